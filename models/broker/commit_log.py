"""store.CommitLog with FlushRealTimeService (ASYNC_FLUSH) and GroupCommitService (SYNC_FLUSH).

A record is a tuple `(phys_offset, size_bytes, message, queue_id, queue_offset, store_us)`
(`R_*` indices). Three positions matter, as in MappedFile: `wrote_position` (appended into the
mmap, i.e. the page cache), `flushed_position` (forced to disk) and the dispatch position
(`ReputMessageService`, in consume_queue.py). A process crash keeps the page cache, so nothing
appended is lost; a power loss keeps only whole records below `flushed_position`.

Simplified: one append at a time costs no simulated time (a memory copy under the put lock);
no CRC, no transient store pool, no file pre-allocation; a record never spans a mapped file
(the rest of the file is a blank record), and each flush forces only the file holding the
flushed position, as `MappedFileQueue.flush` does.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Generator
from typing import Any

from models.broker.config import GROUP_COMMIT_WAIT_US, OS_PAGE_SIZE_BYTES, FlushDiskType, MessageStoreConfig
from models.message import Message, record_bytes
from models.records import COMMIT_LOG_FLUSHED, COMMIT_LOG_TRUNCATED
from sim.env import ms

R_PHYS, R_SIZE, R_MSG, R_QID, R_QOFF, R_STORE_US = range(6)
BLANK_MIN_BYTES = 8  # CommitLog END_FILE_MIN_BLANK_LENGTH

PUT_OK, FLUSH_DISK_TIMEOUT = "PUT_OK", "FLUSH_DISK_TIMEOUT"


class CommitLog:
    def __init__(self, node: Any, cfg: MessageStoreConfig) -> None:
        self.node = node
        self.cfg = cfg
        self.file_size = cfg.mapped_file_size_commit_log_bytes
        self.records: list[tuple] = []
        self.wrote_position = 0
        self.flushed_position = 0
        self.queue_offsets: dict[tuple[str, int], int] = {}  # topicQueueTable (heap)
        self.on_flushed: Callable[[], None] = lambda: None
        self.group_commit = GroupCommitService(self) if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH else None
        if self.group_commit is None:
            node.add_service(FlushRealTimeService(self).run)
        node.on_crash(self.queue_offsets.clear)
        node.on_power_loss(self.lose_page_cache)

    def append(self, msg: Message, queue_id: int, size: int = 0) -> tuple:
        size = size or record_bytes(msg)
        pos = self.wrote_position
        room = self.file_size - pos % self.file_size
        if room < size + BLANK_MIN_BYTES:
            pos += room  # blank record fills the file; the record starts the next one
        key = (msg.topic, queue_id)
        queue_offset = self.queue_offsets.get(key, 0)
        self.queue_offsets[key] = queue_offset + 1
        record = (pos, size, msg, queue_id, queue_offset, self.node.env._now)
        self.records.append(record)
        self.wrote_position = pos + size
        return record

    def file_end(self, position: int) -> int:
        return (position // self.file_size + 1) * self.file_size

    def flush(self, least_pages: int) -> int:
        """Bytes that one MappedFileQueue.flush(leastPages) would force now (0 if not able)."""
        target = min(self.wrote_position, self.file_end(self.flushed_position))
        if target <= self.flushed_position:
            return 0
        full = target == self.file_end(self.flushed_position)
        pages = target // OS_PAGE_SIZE_BYTES - self.flushed_position // OS_PAGE_SIZE_BYTES
        if not full and least_pages > 0 and pages < least_pages:
            return 0
        return target - self.flushed_position

    def mark_flushed(self, position: int) -> None:
        if position > self.flushed_position:
            self.flushed_position = position
            self.node.trace(COMMIT_LOG_FLUSHED, position)
            self.on_flushed()

    def lose_page_cache(self) -> None:
        """Power loss: keep whole records below the last fsync."""
        keep = bisect_right(self.records, self.flushed_position, key=_record_end)
        lost = len(self.records) - keep
        del self.records[keep:]
        self.wrote_position = _record_end(self.records[-1]) if self.records else 0
        self.flushed_position = min(self.flushed_position, self.wrote_position)
        self.node.trace(COMMIT_LOG_TRUNCATED, self.wrote_position, lost)
        if self.group_commit is not None:
            self.group_commit.requests.clear()

    def rebuild_queue_offsets(self, consume_queues: dict[tuple[str, int], list]) -> None:
        self.queue_offsets.clear()
        for key, entries in consume_queues.items():
            self.queue_offsets[key] = len(entries)


def _record_end(record: tuple) -> int:
    return record[R_PHYS] + record[R_SIZE]


class FlushRealTimeService:
    """CommitLog.FlushRealTimeService (ASYNC_FLUSH): every 500 ms force ≥ 4 dirty pages, or
    everything once 10 s have passed since the last thorough flush."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log

    def run(self) -> Generator:
        log, node, cfg = self.log, self.log.node, self.log.cfg
        last_thorough_us = -ms(cfg.flush_commit_log_thorough_interval_ms)  # lastFlushTimestamp = 0
        while True:
            least_pages = cfg.flush_commit_log_least_pages
            if node.env.now >= last_thorough_us + ms(cfg.flush_commit_log_thorough_interval_ms):
                last_thorough_us = node.env.now
                least_pages = 0
            yield node.sleep_us(ms(cfg.flush_interval_commit_log_ms))
            nbytes = log.flush(least_pages)
            if nbytes:
                target = log.flushed_position + nbytes
                yield node.sleep_us(node.disk.fsync_duration_us(nbytes))
                log.mark_flushed(target)


class GroupCommitService:
    """CommitLog.GroupCommitService + FlushDiskWatcher (SYNC_FLUSH).

    A put with WAIT=true queues `(next_offset, deadline, callback)` and wakes the service; the
    service swaps its request list, forces the CommitLog (one fsync covers every request taken:
    group commit) and completes each request PUT_OK, or FLUSH_DISK_TIMEOUT when
    `syncFlushTimeout` passes first. Requests arriving during a flush wait for the next round.
    """

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.node = log.node
        self.requests: list[list] = []  # [next_offset, deadline_us, callback, done]
        self.in_flight: list[list] = []  # requests covered by the fsync under way
        self.flushing = False
        self.watcher_armed = False
        self.node.on_crash(self._reset)

    def _reset(self) -> None:
        self.requests.clear()
        self.in_flight = []
        self.flushing = False
        self.watcher_armed = False

    def put_request(self, next_offset: int, callback: Callable[[str], None]) -> None:
        deadline = self.node.env._now + ms(self.log.cfg.sync_flush_timeout_ms)
        self.requests.append([next_offset, deadline, callback, False])
        if not self.flushing:
            self.flushing = True
            self.node.call_later(0, self._round)
        if not self.watcher_armed:
            self.watcher_armed = True
            self.node.call_later(deadline - self.node.env._now, self._watch)

    def _round(self) -> None:
        taken, self.requests = self.requests, []
        if not taken:
            self.flushing = False
            return
        nbytes = self.log.flush(0)
        if nbytes == 0:
            self._complete(taken)
            self.node.call_later(GROUP_COMMIT_WAIT_US if self.requests else 0, self._round)
            return
        target = self.log.flushed_position + nbytes
        self.in_flight = taken
        self.node.call_later(self.node.disk.fsync_duration_us(nbytes), self._flushed, target, taken)

    def _flushed(self, target: int, taken: list[list]) -> None:
        self.in_flight = []
        self.log.mark_flushed(target)
        pending = [r for r in taken if r[0] > self.log.flushed_position and not r[3]]
        if pending:  # the data spans another mapped file: flush again (5.x retries up to 1000×)
            self.requests = pending + self.requests
        self._complete([r for r in taken if r[0] <= self.log.flushed_position])
        self._round()

    def _complete(self, requests: list[list]) -> None:
        for request in requests:
            if not request[3]:
                request[3] = True
                request[2](PUT_OK if request[0] <= self.log.flushed_position else FLUSH_DISK_TIMEOUT)

    def _watch(self) -> None:
        """FlushDiskWatcher: complete overdue requests with FLUSH_DISK_TIMEOUT."""
        now = self.node.env._now
        pending = [r for r in self.requests + self.in_flight if not r[3]]
        for request in pending:
            if request[1] <= now:
                request[3] = True
                request[2](FLUSH_DISK_TIMEOUT)
        upcoming = [r[1] for r in pending if not r[3]]
        self.watcher_armed = bool(upcoming)
        if upcoming:
            self.node.call_later(min(upcoming) - now, self._watch)
