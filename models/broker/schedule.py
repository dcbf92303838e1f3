"""broker.schedule.ScheduleMessageService: delay levels (retry back-off goes through here).

A message with delay level L is stored in `SCHEDULE_TOPIC_XXXX` queue L-1 with its real topic
and queue in properties. Per level, the service delivers each unit once its due time (store time
+ level delay) has passed, re-writing the message to its real topic as a new CommitLog record
(same uniq key). The real per-level timer re-polls every 100 ms while the head is not due; here
a lazy timer fires at the first 100 ms tick after the due time, which delivers at the same time.

Progress (per-level offsets) lives in heap memory and is persisted every
`flushDelayOffsetInterval` (10 s) to `delayOffset.json`: after a crash, everything delivered
since the last persist is delivered again (duplicates in the target topic). Masters only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any

from models.broker.commit_log import R_MSG, R_QOFF, R_STORE_US
from models.message import SCHEDULE_TOPIC, Message
from models.records import SCHEDULE_DELIVERED
from sim.env import ms

DELAY_FOR_A_WHILE_US = 100_000  # ScheduleMessageService.DELAY_FOR_A_WHILE
FIRST_DELAY_TIME_US = 1_000_000  # ScheduleMessageService.FIRST_DELAY_TIME
_UNITS_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> list[int]:
    """`messageDelayLevel` ("1s 5s … 2h") → delay in ms per level (index 0 = level 1)."""
    out = []
    for token in spec.split():
        match = re.fullmatch(r"(\d+)([smhd])", token)
        if not match:
            raise ValueError(f"bad delay level {token!r}")
        out.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
    return out


class ScheduleMessageService:
    def __init__(self, node: Any, level_spec: str, queues: dict[tuple[str, int], list],
                 put: Callable[[Message, int], None], persist_interval_ms: int) -> None:
        self.node = node
        self.delays_us = [ms(d) for d in parse_delay_levels(level_spec)]
        self.queues = queues  # the store's ConsumeQueues (shared)
        self.put = put  # append a message to its real topic
        self.persist_interval_us = ms(persist_interval_ms)
        self.offsets: dict[int, int] = {}  # level -> next queue offset to deliver (heap)
        self.persisted: dict[int, int] = {}  # delayOffset.json
        self.armed: dict[int, bool] = {}
        self.started = False
        node.on_crash(self._stop)
        node.on_start(self._start)
        node.add_service(self.persist_loop)

    def max_level(self) -> int:
        return len(self.delays_us)

    def _stop(self) -> None:
        self.offsets.clear()
        self.armed.clear()
        self.started = False

    def _start(self) -> None:
        self.offsets = dict(self.persisted)
        self.node.call_later(FIRST_DELAY_TIME_US, self._begin)

    def _begin(self) -> None:
        self.started = True
        for level in range(1, self.max_level() + 1):
            self.arm(level)

    def on_dispatched(self, record: tuple) -> None:
        """A schedule-topic unit was dispatched to its ConsumeQueue."""
        if self.started:
            self.arm(record[2].delay_level)

    def arm(self, level: int) -> None:
        if self.armed.get(level):
            return
        cq = self.queues.get((SCHEDULE_TOPIC, level - 1))
        offset = self.offsets.get(level, 0)
        if not cq or offset >= len(cq):
            return
        due = cq[offset][R_STORE_US] + self.delays_us[level - 1]
        now = self.node.env._now
        wait = 0 if due <= now else -(-(due - now) // DELAY_FOR_A_WHILE_US) * DELAY_FOR_A_WHILE_US
        self.armed[level] = True
        self.node.call_later(wait, self.deliver, level)

    def deliver(self, level: int) -> None:
        self.armed[level] = False
        cq = self.queues.get((SCHEDULE_TOPIC, level - 1), [])
        now, delay = self.node.env._now, self.delays_us[level - 1]
        offset = self.offsets.get(level, 0)
        while offset < len(cq) and cq[offset][R_STORE_US] + delay <= now:
            msg = cq[offset][R_MSG]
            real = msg._replace(topic=msg.real_topic, real_topic="", delay_level=0,
                                real_queue_id=-1)
            self.put(real, msg.real_queue_id)
            self.node.trace(SCHEDULE_DELIVERED, msg.uniq_key, msg.real_topic, level)
            offset = cq[offset][R_QOFF] + 1
        self.offsets[level] = offset
        self.arm(level)

    def persist_loop(self) -> Generator:
        while True:
            yield self.node.sleep_us(self.persist_interval_us)
            self.persisted = dict(self.offsets)
