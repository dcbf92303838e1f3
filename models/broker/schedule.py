"""broker.schedule.ScheduleMessageService: delay levels (retry back-off goes through here).

A message with delay level L is stored in `SCHEDULE_TOPIC_XXXX` queue L-1 with its real topic
and queue in properties. Per level, the service delivers each unit once its due time (store time
+ level delay) has passed, re-writing the message to its real topic as a new CommitLog record
(same uniq key). The real per-level timer re-polls every 100 ms while the head is not due; here
a lazy timer fires at the first 100 ms tick after the due time, which delivers at the same time.

Progress (per-level offsets) lives in heap memory and is persisted every
`flushDelayOffsetInterval` (10 s) to `delayOffset.json` without fsync (config_file.py): after a
crash, everything delivered since the last persist is delivered again (duplicates in the target
topic), after a power loss since the last version the kernel wrote back. Masters only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any

from models.broker.config_file import ConfigFile
from models.coverage_points import COV_DELAY_LEVEL_DELIVERED
from models.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    record_bytes,
)
from models.records import SCHEDULE_DELIVERED
from models.version import V5
from sim.env import ms

DELAY_OFFSET_FILE = "config/delayOffset.json"

DELAY_FOR_A_WHILE_US = 100_000  # ScheduleMessageService.DELAY_FOR_A_WHILE
FIRST_DELAY_TIME_US = 1_000_000  # ScheduleMessageService.FIRST_DELAY_TIME
_UNITS_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SCHEDULE_ONLY = (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)


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
    def __init__(self, node: Any, level_spec: str, store: Any, put: Callable[..., Any],
                 persist_interval_ms: int, version: str = V5, active: bool = True) -> None:
        self.node = node
        self.cov = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.delays_us = [ms(d) for d in parse_delay_levels(level_spec)]
        self.store = store  # the broker's MessageStore (ConsumeQueues, lookMessageByOffset)
        self.put = put  # Broker.put_message: append a message to its real topic
        self.persist_interval_us = ms(persist_interval_ms)
        self.offsets: dict[int, int] = {}  # level -> next queue offset to deliver (heap)
        self.file = ConfigFile(node, DELAY_OFFSET_FILE, version)
        self.armed: dict[int, bool] = {}
        self.started = False
        self.suspended = False  # controller mode: not the master now (changeScheduleServiceStatus)
        if active:  # masters only
            node.on_crash(self._stop)
            node.on_start(self._start)
            node.add_service(self.persist_loop)

    @property
    def persisted(self) -> dict[int, int]:
        """What delayOffset.json holds now (page cache view)."""
        return self.file.load()[0]

    def max_level(self) -> int:
        return len(self.delays_us)

    def delivery_us(self, level: int, store_us: int) -> int:
        """computeDeliverTimestamp: the tags code of a schedule-topic unit."""
        return store_us + self.delays_us[level - 1]

    def _stop(self) -> None:
        self.offsets.clear()
        self.armed.clear()
        self.started = False

    def _start(self) -> None:
        self.offsets = self.file.load()[0]
        self.node.call_later(FIRST_DELAY_TIME_US, self._begin)

    def set_running(self, running: bool) -> None:
        """Controller mode's changeScheduleServiceStatus: start (offsets from the file, which a
        slave's SlaveSynchronize keeps copying from its master) or stop (persisting them first)."""
        if not running and not self.suspended and self.started:
            self.file.persist(self.offsets)
        self.suspended = not running
        self._stop()
        if running:
            self._start()

    def _begin(self) -> None:
        if self.suspended:
            return
        self.started = True
        for level in range(1, self.max_level() + 1):
            self.arm(level)

    def on_dispatched(self, level: int) -> None:
        """A schedule-topic unit of `level` was dispatched to its ConsumeQueue."""
        if self.started:
            self.arm(level)

    def arm(self, level: int) -> None:
        if self.armed.get(level):
            return
        cq = self.store.reput.queue(SCHEDULE_TOPIC, level - 1)
        offset = self.offsets.get(level, 0)
        if cq is None or offset >= cq.max_offset:
            return
        due = cq.unit(offset)[2]
        now = self.node.env._now
        wait = 0 if due <= now else -(-(due - now) // DELAY_FOR_A_WHILE_US) * DELAY_FOR_A_WHILE_US
        self.armed[level] = True
        self.node.call_later(wait, self.deliver, level)

    def deliver(self, level: int) -> None:
        self.armed[level] = False
        if self.suspended:
            return
        cq = self.store.reput.queue(SCHEDULE_TOPIC, level - 1)
        now = self.node.env._now
        offset = self.offsets.get(level, 0)
        while cq is not None and offset < cq.max_offset:
            phys, _size, due = cq.unit(offset)
            if due > now:
                break
            msg = self.store.look_message_by_offset(phys)
            if msg is not None:
                self.cov[COV_DELAY_LEVEL_DELIVERED] += 1
                self._deliver_one(msg, level)
            offset += 1
        self.offsets[level] = offset
        self.arm(level)

    def _deliver_one(self, msg: Any, level: int) -> None:
        """Restore the real topic and queue, clear the delay level, write a new record."""
        props = msg.props or {}
        topic, queue_id = props[PROPERTY_REAL_TOPIC], props[PROPERTY_REAL_QUEUE_ID]
        real_props = {k: v for k, v in props.items() if k not in _SCHEDULE_ONLY} or None
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, real_props, msg.reconsume_times)
        self.put(msg.msg_id, topic, queue_id, size, msg.body_bytes, msg.tags, msg.reconsume_times, real_props)
        self.node.trace(SCHEDULE_DELIVERED, msg.msg_id, topic, level)

    def persist_loop(self) -> Generator[Any, Any, None]:
        while True:
            yield self.node.sleep_us(self.persist_interval_us)
            if not self.suspended:  # a stopped service persists nothing (its file is the synced copy)
                self.file.persist(self.offsets)

    def synced(self, entries: tuple[tuple[int, int], ...]) -> None:
        """SlaveSynchronize.syncDelayOffset: the master's table replaces the file (not running here)."""
        if self.suspended:
            self.file.persist(dict(entries))
