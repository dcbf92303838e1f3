"""store.ConsumeQueue and DefaultMessageStore.ReputMessageService (dispatch).

A ConsumeQueue is a list of references to CommitLog records: entry `i` is queue offset `i` (a
20-byte unit on disk: physical offset, size, tags code). `ReputMessageService` builds the
entries from the CommitLog on a 1 ms cadence and tells long polling about new data. Dispatch is
lazy: when nothing is pending no event is scheduled, and a new record is dispatched at the next
tick of the service's 1 ms grid (the real thread sleeps 1 ms between rounds).

Dispatch limit (5.3.0+ "confirm offset"): the written end with ASYNC_FLUSH, the *flushed*
position with SYNC_FLUSH, so a SYNC_FLUSH message becomes visible only after its fsync.

Simplified: queues never lose their head (no retention deletion, min offset 0); the CQ's own flush
is not modelled because recovery rebuilds CQ entries from the CommitLog (recoverAbnormally
re-dispatches every valid record), which yields the same queues after any crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.broker.commit_log import R_PHYS, R_QID, R_SIZE, CommitLog
from models.broker.config import REPUT_INTERVAL_US, FlushDiskType
from models.message import SCHEDULE_TOPIC


class ReputMessageService:
    def __init__(self, node: Any, log: CommitLog, flush_type: FlushDiskType) -> None:
        self.node = node
        self.log = log
        self.sync_flush = flush_type is FlushDiskType.SYNC_FLUSH
        self.queues: dict[tuple[str, int], list[tuple]] = {}
        self.reput_index = 0  # next CommitLog record to dispatch
        self.pending = False
        self.grid_origin_us = 0
        self.listeners: list[Callable[[str, int, int], None]] = []  # (topic, queue_id, max_offset)
        self.schedule_listener: Callable[[tuple], None] | None = None
        node.on_crash(self._stop)
        node.on_start(self.recover)

    def _stop(self) -> None:
        self.pending = False

    def wake(self) -> None:
        """A record was appended (or flushed): dispatch at the next 1 ms tick."""
        if not self.pending:
            self.pending = True
            elapsed = (self.node.env._now - self.grid_origin_us) % REPUT_INTERVAL_US
            self.node.call_later(REPUT_INTERVAL_US - elapsed, self.dispatch)

    def confirm_position(self) -> int:
        return self.log.flushed_position if self.sync_flush else self.log.wrote_position

    def dispatch(self, limit: int | None = None) -> None:
        self.pending = False
        records = self.log.records
        if limit is None:
            limit = self.confirm_position()
        touched: dict[tuple[str, int], list] = {}
        i, end = self.reput_index, len(records)
        queues = self.queues
        while i < end:
            record = records[i]
            if record[R_PHYS] + record[R_SIZE] > limit:
                break
            key = (record[2].topic, record[R_QID])
            cq = queues.get(key)
            if cq is None:
                cq = queues[key] = []
            cq.append(record)
            touched[key] = cq
            if key[0] == SCHEDULE_TOPIC and self.schedule_listener is not None:
                self.schedule_listener(record)
            i += 1
        self.reput_index = i
        for (topic, queue_id), cq in touched.items():
            for listener in self.listeners:
                listener(topic, queue_id, len(cq))

    def recover(self) -> None:
        """Start-up: drop CQ units beyond the surviving CommitLog, re-dispatch the rest."""
        self.grid_origin_us = self.node.env._now
        end = self.log.wrote_position
        for cq in self.queues.values():
            while cq and cq[-1][R_PHYS] >= end:
                cq.pop()
        self.reput_index = _first_undispatched(self.log.records, self.queues)
        self.dispatch(limit=end)  # recovery dispatches every valid record, flushed or not
        self.log.rebuild_queue_offsets(self.queues)


def _first_undispatched(records: list[tuple], queues: dict[tuple[str, int], list]) -> int:
    """Index of the first CommitLog record that no ConsumeQueue references."""
    last_phys = max((cq[-1][R_PHYS] for cq in queues.values() if cq), default=-1)
    lo, hi = 0, len(records)
    while lo < hi:  # records are sorted by physical offset
        mid = (lo + hi) // 2
        if records[mid][R_PHYS] <= last_phys:
            lo = mid + 1
        else:
            hi = mid
    return lo
