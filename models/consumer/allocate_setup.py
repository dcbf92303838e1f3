"""The allocation strategy a scenario gives a push consumer (DefaultMQPushConsumer.
setAllocateMessageQueueStrategy), as `allocate` options, and the two MachineRoomResolvers.

- CONFIG: `message_queue_list`, each queue on the consumer's topic unless it names another
  (`%RETRY%<group>` for the group's retry queue on that broker). As in Java, every member gets
  the whole list for every topic it rebalances, and only the listed queues are consumed.
- MACHINE_ROOM: `consumeridcs`; only brokers named `<room>@<name>` can be eligible.
- CONSISTENT_HASH: `virtual_node_cnt`.
- MACHINE_ROOM_NEARBY: `machine_room_nearby_inner` (with the options above passed through) and
  `machine_room_resolver`:
  - ZONE: a broker's room is the `zone` the scenario gives it, a consumer's room its own `zone`
    (a deployment map the application would configure);
  - NAMING: RocketMQ's `<room>@<broker>` convention, applied to both sides: the room is the text
    before the first '@' of the broker name and of the client id (the consumer's node name, e.g.
    `idc1@billing-1`); a name without '@' has no room, so the Java strategy throws and that
    rebalance round changes nothing (rmqsim/scenario/validate.py reports such names up front).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from models.consumer.allocate import Strategy, allocate
from models.consumer.config import AllocateStrategy, MachineRoomResolver, PushConsumerConfig
from models.message import MessageQueue


def naming_room(name: str) -> str | None:
    """The NAMING resolver: the text before the first '@' (None if there is none)."""
    room, sep, _rest = name.partition("@")
    return room if sep and room else None


def allocate_options(cfg: PushConsumerConfig, topic: str, zones: Mapping[str, str]) -> dict[str, Any]:
    """`allocate`'s options for `cfg` (a consumer of `topic`; `zones`: node name → zone)."""
    options: dict[str, Any] = {
        "message_queue_list": [MessageQueue(q.topic or topic, q.broker, q.queue_id) for q in cfg.message_queue_list],
        "consumeridcs": cfg.consumeridcs,
        "virtual_node_cnt": cfg.virtual_node_cnt,
    }
    if cfg.allocate_message_queue_strategy is AllocateStrategy.MACHINE_ROOM_NEARBY:
        options["inner"] = cfg.machine_room_nearby_inner.value
        if cfg.machine_room_resolver is MachineRoomResolver.NAMING:
            options["broker_room"] = lambda mq: naming_room(mq.broker_name)
            options["consumer_room"] = naming_room
        else:
            options["broker_room"] = lambda mq: zones.get(mq.broker_name)
            options["consumer_room"] = zones.get
    return options


def allocate_strategy(cfg: PushConsumerConfig, topic: str, zones: Mapping[str, str]) -> Strategy:
    """`(group, current_cid, mq_all, cid_all) -> queues` for the consumer's Rebalancer."""
    return partial(allocate, cfg.allocate_message_queue_strategy.value, **allocate_options(cfg, topic, zones))
