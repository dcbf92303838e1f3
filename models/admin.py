"""tools.admin.DefaultMQAdminExt: the operator's commands a scenario plays (`actions:`).

`reset_offset` is `mqadmin resetOffsetByTime -g GROUP -t TOPIC -s TIME` (DefaultMQAdminExtImpl
.resetOffsetByTimestamp): it asks every master broker that has the topic to reset the group's
offsets to the store time `to_time_ms` (simulated ms since the run started); what each broker
and client then do follows the scenario's version (models/broker/reset_offset.py). The
command's `force` defaults to true, as the tool's does. A broker that is down is skipped (the
tool would report its error and go on).

Simplified: the admin tool has no node of its own; its requests reach the brokers at once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sim.config import DurationMs, Name
from sim.units import ms  # not sim.env: validating a scenario loads no SimPy


class ActionSpec(BaseModel):
    """One scripted operator action."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    at_ms: DurationMs = Field(description="ms when the operator acts")
    kind: Literal["reset_offset"] = Field(description="reset_offset (mqadmin resetOffsetByTime)")
    group: Name = Field(description="a consumer group of the scenario")
    to_time_ms: DurationMs = Field(description="the store time to reset to (simulated ms)")
    topic: Name | None = Field(None, description="default: the group's subscribed topic")
    force: bool = Field(True, description="resetOffsetByTime -f (Broker2Client: else only offsets that move back)")


class MQAdmin:
    def __init__(self, env: Any, brokers: list[Any], group_topics: dict[str, str]) -> None:
        self.env = env
        self.brokers = brokers  # every Broker model, masters and slaves
        self.group_topics = group_topics  # consumer group → its subscribed topic

    def play(self, actions: list[ActionSpec], duration_us: int) -> None:
        for action in actions:
            if ms(action.at_ms) < duration_us:
                self.env.call_later(ms(action.at_ms), self.run, action)

    def run(self, action: ActionSpec) -> None:
        topic = action.topic or self.group_topics[action.group]
        for broker in self.brokers:
            if not broker.slave and topic in broker.topics:
                broker.reset_offset.reset(action.group, topic, ms(action.to_time_ms), action.force)
