"""store.CommitLog with FlushRealTimeService (ASYNC_FLUSH) and GroupCommitService (SYNC_FLUSH).

Records live in a MappedFileQueue of compact per-file tables (mapped_file.py). Three positions
matter, as in MappedFile: `wrote_position` (appended into the mmap, i.e. the page cache),
`flushed_position` (forced to disk) and the dispatch position (`ReputMessageService`, in
consume_queue.py). A process crash keeps the page cache, so nothing appended is lost; a power
loss keeps only whole records below `flushed_position`.

Topics and tags are stored as indexes into the store's intern tables (`topics`, `tags`), which
stand for the strings a real record carries in its own bytes and so are never lost.

Simplified: one append at a time costs no simulated time (a memory copy under the put lock);
no CRC, no transient store pool, no file pre-allocation; a record never spans a mapped file
(the rest of the file is a blank record), and each flush forces only the file holding the
flushed position, as `MappedFileQueue.flush` does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.config import GROUP_COMMIT_WAIT_US, OS_PAGE_SIZE_BYTES, FlushDiskType, MessageStoreConfig
from models.broker.mapped_file import RECORD, MappedFile, MappedFileQueue
from models.message import java_string_hash
from models.records import COMMIT_LOG_FLUSHED, COMMIT_LOG_TRUNCATED
from sim.env import ms

BLANK_MIN_BYTES = 8  # CommitLog END_FILE_MIN_BLANK_LENGTH
QUEUE_ID_BITS = 16  # queue key = topic index << 16 | queue id (queue ids are below 2^16)

PUT_OK, FLUSH_DISK_TIMEOUT = "PUT_OK", "FLUSH_DISK_TIMEOUT"


def queue_key(topic_index: int, queue_id: int) -> int:
    """One int per (topic, queue id): the key of ConsumeQueues and the topicQueueTable."""
    return topic_index << QUEUE_ID_BITS | queue_id


class CommitLog:
    def __init__(self, node: Any, cfg: MessageStoreConfig) -> None:
        self.node = node
        self.cfg = cfg
        self.file_size = cfg.mapped_file_size_commit_log_bytes
        self.files = MappedFileQueue(self.file_size)
        self._current: MappedFile | None = None  # the file appends go to
        self.wrote_position = 0
        self.flushed_position = 0
        self.queue_offsets: dict[int, int] = {}  # topicQueueTable (heap): queue key -> next offset
        self.topics: list[str] = []
        self.topic_index: dict[str, int] = {}
        self.tags: list[str | None] = [None]  # index 0: no TAGS property
        self.tags_codes: list[int] = [0]  # String.hashCode of each tag (0 without tags)
        self._tags_index: dict[str | None, int] = {None: 0}
        self.on_flushed: Callable[[], None] = lambda: None
        self.group_commit = GroupCommitService(self) if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH else None
        if self.group_commit is None:
            node.add_service(FlushRealTimeService(self).run)
        node.on_crash(self.queue_offsets.clear)
        node.on_power_loss(self.lose_page_cache)

    # --- intern tables ------------------------------------------------------------------------
    def topic_id(self, topic: str) -> int:
        index = self.topic_index.get(topic)
        if index is None:
            index = self.topic_index[topic] = len(self.topics)
            self.topics.append(topic)
        return index

    def tags_id(self, tags: str | None) -> int:
        index = self._tags_index.get(tags)
        if index is None:
            index = self._tags_index[tags] = len(self.tags)
            self.tags.append(tags)
            self.tags_codes.append(java_string_hash(tags))
        return index

    # --- append -------------------------------------------------------------------------------
    def append(self, msg_id: int, topic: str, queue_id: int, size: int, tags: str | None,
               reconsume_times: int, sysflag: int, props: dict | None) -> tuple[int, int]:
        """Append one record; returns (physical offset, queue offset)."""
        topic_index = self.topic_index.get(topic)
        if topic_index is None:
            topic_index = self.topic_id(topic)
        tags_index = self._tags_index.get(tags)
        if tags_index is None:
            tags_index = self.tags_id(tags)
        pos = self.wrote_position
        room = self.file_size - pos % self.file_size
        if room < size + BLANK_MIN_BYTES:
            pos += room  # blank record fills the file; the record starts the next one
        mapped = self._current
        if mapped is None or pos >= mapped.file_from_offset + self.file_size:
            mapped = self._current = self.files.last(pos)
        key = topic_index << QUEUE_ID_BITS | queue_id
        queue_offset = self.queue_offsets.get(key, 0)
        self.queue_offsets[key] = queue_offset + 1
        if props:
            mapped.props[len(mapped.phys)] = props
        mapped.phys.append(pos)
        mapped.data += RECORD.pack(size, self.node.env._now, queue_id, queue_offset, msg_id, topic_index,
                                   tags_index, reconsume_times, sysflag)
        self.wrote_position = pos + size
        return pos, queue_offset

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
        lost = self.files.truncate_to(self.flushed_position)
        self._current = None
        self.wrote_position = self.files.end()
        self.flushed_position = min(self.flushed_position, self.wrote_position)
        self.node.trace(COMMIT_LOG_TRUNCATED, self.wrote_position, lost)
        if self.group_commit is not None:
            self.group_commit.requests.clear()

    def rebuild_queue_offsets(self, max_offsets: dict[int, int]) -> None:
        self.queue_offsets.clear()
        self.queue_offsets.update(max_offsets)

    @property
    def record_count(self) -> int:
        return len(self.files)


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
