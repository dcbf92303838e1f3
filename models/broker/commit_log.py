"""store.CommitLog: append, the wrote / committed / flushed positions, and what a fault destroys.

Records live in a MappedFileQueue of compact per-file tables (mapped_file.py). Positions, as in
MappedFile: `wrote_position` (appended), `committed_position` (with `transientStorePoolEnable`
the bytes moved from the off-heap write buffer into the file: transient_store_pool.py; without
the pool it is the wrote position), and `flushed_position` (forced to disk). Readers, dispatch
and HA see the *readable* position: committed with the pool, wrote without. A process crash
keeps the page cache (everything committed) and loses the write buffer; a power loss keeps only
whole records below `flushed_position`. The flush services are in flush_service.py.

A failed fsync (the `fsync_error` disk fault, sim/disk.py) is swallowed, as DefaultMappedFile
.flush (5.3.3; MappedFile.flush in 4.9.8) does: it logs "Error occurred when force data to
disk." and sets the flushed position to the read position all the same. So the flush services go
on as after a good fsync — GroupCommitService.doCommit sees `flushedWhere >= nextOffset` and
answers PUT_OK (SEND_OK), never FLUSH_DISK_TIMEOUT — while the disk holds nothing from
`flush_error_from` (the flushed position before the first failed fsync) on: the kernel marked
those pages clean without writing them, and later fsyncs write only pages dirtied since. The
data stays readable from the page cache (a process crash keeps it); a power loss leaves zeros
there, and recovery (recoverAbnormally / recoverNormally) stops at the first record whose magic
code is invalid, so the CommitLog is cut at `flush_error_from` and everything after it is lost,
acknowledged or not (`commit_log.destroyed` fault `fsync_error` for the records the store had
reported flushed, `power_loss` beyond). Simplified: the page holding `flush_error_from` is not
written again by a later fsync that re-dirties it (a few records at most).

Ground truth for the checkers (not behaviour): on a master, every record a fault destroys is
emitted as `commit_log.destroyed` (fault, and whether a replica of the group held the same
record then); a queue offset assigned again after a truncation is emitted as
`consume_queue.offset_reused`, so a message stored there and never consumed is attributed to
the consumer's offset being past it. Slaves append the master's records at the master's
physical offsets (`append_replica`) and share its intern tables.

Topics and tags are stored as indexes into the store's intern tables (`topics`, `tags`), which
stand for the strings a real record carries in its own bytes and so are never lost.

Simplified: one append at a time costs no simulated time here (the put lock's hold time is the
broker's `send_put_time_ms`, fast_failure.py); no CRC, no file pre-allocation; a record never
spans a mapped file (the rest of the file is a blank record); each flush or commit handles only
the file holding the flushed/committed position, as `MappedFileQueue.flush/commit` do.
"""

# compiled with Cython: the C declarations of this module's classes are in commit_log.pxd beside it

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import cython

from models.broker.config import OS_PAGE_SIZE_BYTES, MessageStoreConfig
from models.broker.mapped_file import RECORD, RECORD_BYTES, MappedFile, MappedFileQueue, pack_record
from models.coverage_points import COV_CRASH_WRITE_BUFFER_LOST, COV_POWER_LOSS_UNFLUSHED_TAIL, COV_QUEUE_OFFSET_REUSED
from models.message import PROPERTY_REAL_TOPIC, SCHEDULE_TOPIC, java_string_hash
from models.records import (
    COMMIT_LOG_DESTROYED,
    COMMIT_LOG_FLUSH_ERROR,
    COMMIT_LOG_FLUSHED,
    COMMIT_LOG_TRUNCATED,
    OFFSET_REUSED,
)
from sim.env import Clock

BLANK_MIN_BYTES = 8  # CommitLog END_FILE_MIN_BLANK_LENGTH
QUEUE_ID_BITS = 16  # queue key = topic index << 16 | queue id (queue ids are below 2^16)

PUT_OK, FLUSH_DISK_TIMEOUT = "PUT_OK", "FLUSH_DISK_TIMEOUT"
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE = "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"
POWER_LOSS, PROCESS_CRASH = "power_loss", "process_crash"
FSYNC_ERROR = "fsync_error"  # destroyed by a power loss, though the store had reported it flushed
FAILOVER_TRUNCATED = "failover_truncated"  # controller mode: cut at the epochs' consistent point


def queue_key(topic_index: int, queue_id: int) -> int:
    """One int per (topic, queue id): the key of ConsumeQueues and the topicQueueTable."""
    return topic_index << QUEUE_ID_BITS | queue_id


class CommitLog:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_current", "_tags_index", "cfg", "clock", "committed_position", "cov", "file_size", "files",
                 "flush_error_from", "flushed_position", "group_commit", "master", "node", "on_flushed", "on_readable", "pool",
                 "put_hook", "queue_offsets", "replica_has", "replicas", "reused_below", "slow_append", "tags",
                 "tags_codes", "topic_index", "topics", "wrote_position")

    def __init__(self, node: Any, cfg: MessageStoreConfig, pool: bool = False, master: bool = True) -> None:
        self.node = node
        self.clock: Clock = node.env.clock
        self.cov: list[int] = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.cfg = cfg
        self.file_size = cfg.mapped_file_size_commit_log_bytes
        self.files = MappedFileQueue(self.file_size)
        self._current: MappedFile | None = None  # the file appends go to
        self.wrote_position = 0
        self.committed_position = 0  # == wrote_position without the transient store pool
        self.flushed_position = 0
        self.flush_error_from = -1  # the disk holds nothing from here on (a swallowed fsync error); -1: none
        self.pool = pool  # transientStorePoolEnable in effect (ASYNC_FLUSH master)
        self.master = master  # emits the ground-truth facts (destroyed records, reused offsets)
        self.queue_offsets: dict[int, int] = {}  # topicQueueTable (heap): queue key -> next offset
        self.topics: list[str] = []
        self.topic_index: dict[str, int] = {}
        self.tags: list[str | None] = [None]  # index 0: no TAGS property
        self.tags_codes: list[int] = [0]  # String.hashCode of each tag (0 without tags)
        self._tags_index: dict[str | None, int] = {None: 0}
        self.on_flushed: Callable[[], None] = lambda: None
        self.on_readable: Callable[[], None] = lambda: None  # committed data became readable (pool)
        self.put_hook: Callable[[], None] | None = None  # a service woken by every put
        self.reused_below: dict[int, int] = {}  # queue key -> queue max before a truncation (facts)
        self.slow_append = False  # put_hook or reused_below set: `append` takes its slow tail
        self.replica_has: Callable[[int, int], bool] = lambda phys, msg_id: False  # any slave holds it
        self.replicas = 0  # slaves in the broker group (facts only)
        self.group_commit: Any = None  # GroupCommitService with SYNC_FLUSH (flush_service.py)
        node.on_crash(self.queue_offsets.clear)
        if pool:
            node.on_crash(self.lose_write_buffer)
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
            self.tags_codes.append(java_string_hash(tags))  # type: ignore[arg-type]  # None is in the table from the start
        return index

    def share_interns(self, other: CommitLog) -> None:
        """Use `other`'s intern tables (a slave: replicated record bytes carry its indexes)."""
        self.topics, self.topic_index = other.topics, other.topic_index
        self.tags, self.tags_codes, self._tags_index = other.tags, other.tags_codes, other._tags_index

    # --- append -------------------------------------------------------------------------------
    @cython.ccall
    @cython.locals(mapped=MappedFile)
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
            mapped.props[len(mapped.rel)] = props
        mapped.rel.append(pos - mapped.file_from_offset)
        mapped.data += pack_record(size, self.clock.now_us, queue_id, queue_offset, msg_id, topic_index,
                                   tags_index, reconsume_times, sysflag)
        self.wrote_position = pos + size
        if self.slow_append:
            self._after_append(key, queue_offset, msg_id, topic, queue_id)
        return pos, queue_offset

    def _after_append(self, key: int, queue_offset: int, msg_id: int, topic: str, queue_id: int) -> None:
        """The rare work after an append: facts about a reused queue offset, the put hook."""
        below = self.reused_below.get(key)
        if below is not None:
            if queue_offset < below:
                self.cov[COV_QUEUE_OFFSET_REUSED] += 1
                self.node.trace(OFFSET_REUSED, msg_id, topic, queue_id, queue_offset)
            if queue_offset + 1 >= below:
                del self.reused_below[key]
        if self.put_hook is not None:
            self.put_hook()
        self._update_slow_append()

    def _update_slow_append(self) -> None:
        self.slow_append = bool(self.reused_below) or self.put_hook is not None

    def set_put_hook(self, hook: Callable[[], None] | None) -> None:
        self.put_hook = hook
        self._update_slow_append()

    def append_replica(self, records: list[tuple[int, bytes, dict | None]]) -> None:
        """HA slave: append the master's records (physical offset, RECORD bytes, props) at the
        master's offsets; a gap (the master's blank file tail) moves to the next file."""
        for phys, record, props in records:
            mapped = self._current
            if mapped is None or phys >= mapped.file_from_offset + self.file_size:
                mapped = self._current = self.files.last(phys)
            if props:
                mapped.props[len(mapped.rel)] = props
            mapped.rel.append(phys - mapped.file_from_offset)
            mapped.data += record
            self.wrote_position = self.committed_position = phys + RECORD.unpack_from(record)[0]

    # --- reading --------------------------------------------------------------------------------
    @cython.ccall
    def readable_position(self) -> int:
        """What readers, dispatch and HA may see: committed with the pool, else everything wrote."""
        return self.committed_position if self.pool else self.wrote_position

    def records_from(self, position: int, max_bytes: int) -> tuple[list[tuple[int, bytes, dict | None]], int]:
        """HA transfer: the whole records of one file from the first one starting at or after
        `position` up to the readable position, at most `max_bytes` (at least one record);
        returns (records, first start) — first start is -1 when there is nothing to send."""
        mapped, index = self.files.find(position)
        if mapped is None:
            mapped, index = self._first_after(position)
            if mapped is None:
                return [], -1
        limit, total = self.readable_position(), 0
        out: list[tuple[int, bytes, dict | None]] = []
        rel, data, base = mapped.rel, mapped.data, mapped.file_from_offset
        for i in range(index, len(rel)):
            size = RECORD.unpack_from(data, i * RECORD_BYTES)[0]
            if base + rel[i] + size > limit or (out and total + size > max_bytes):
                break
            out.append((base + rel[i], bytes(data[i * RECORD_BYTES:(i + 1) * RECORD_BYTES]), mapped.props.get(i)))
            total += size
        return out, (out[0][0] if out else -1)

    def _first_after(self, position: int) -> tuple[MappedFile | None, int]:
        for mapped in self.files.files:
            if mapped.file_from_offset + self.file_size > position and mapped.rel:
                i = mapped.first_at(position)
                if i < len(mapped.rel):
                    return mapped, i
        return None, -1

    def at_boundary(self, position: int) -> bool:
        """`position` is not inside a record: a record's start, a file's blank tail, or past the end."""
        files = self.files.files
        if not files:
            return True
        idx = (position - files[0].file_from_offset) // self.file_size
        if not 0 <= idx < len(files) or files[idx].file_from_offset != position - position % self.file_size:
            return True
        mapped = files[idx]
        position -= mapped.file_from_offset
        n = bisect_right(mapped.rel, position)
        if n == 0 or mapped.rel[n - 1] == position:
            return True
        return position >= mapped.rel[n - 1] + mapped.record(n - 1)[0]

    def holds(self, phys: int, msg_id: int) -> bool:
        """This log holds the record of `msg_id` at `phys` (ground truth for replica checks)."""
        mapped, index = self.files.find(phys)
        return mapped is not None and mapped.record(index)[4] == msg_id

    # --- flush (the services are in flush_service.py) ------------------------------------------
    def file_end(self, position: int) -> int:
        return (position // self.file_size + 1) * self.file_size

    def flush(self, least_pages: int) -> int:
        """Bytes that one MappedFileQueue.flush(leastPages) would force now (0 if not able)."""
        target = min(self.committed_position if self.pool else self.wrote_position,
                     self.file_end(self.flushed_position))
        if target <= self.flushed_position:
            return 0
        full = target == self.file_end(self.flushed_position)
        pages = target // OS_PAGE_SIZE_BYTES - self.flushed_position // OS_PAGE_SIZE_BYTES
        if not full and least_pages > 0 and pages < least_pages:
            return 0
        return target - self.flushed_position

    def mark_flushed(self, position: int) -> None:
        """An fsync up to `position` completed: DefaultMappedFile.flush sets the flushed position
        whether or not the force threw (module docstring)."""
        if position > self.flushed_position:
            if self.node.disk.fsync_failing():
                if self.flush_error_from < 0:
                    self.flush_error_from = self.flushed_position
                self.node.trace(COMMIT_LOG_FLUSH_ERROR, position, self.flush_error_from)
            self.flushed_position = position
            self.node.trace(COMMIT_LOG_FLUSHED, position)
            self.on_flushed()

    # --- faults -----------------------------------------------------------------------------------
    def lose_write_buffer(self) -> None:
        """Process crash with the transient store pool: what was not committed into the file
        never reached the page cache (a power loss truncates further: `lose_page_cache`)."""
        if self.node.host_up:
            if self.wrote_position > self.committed_position:
                self.cov[COV_CRASH_WRITE_BUFFER_LOST] += 1
            self._truncate(self.committed_position, PROCESS_CRASH)

    def lose_page_cache(self) -> None:
        """Power loss: keep whole records below the last fsync, or below the first failed one
        (recovery stops at the zeros the disk holds from `flush_error_from` on)."""
        if self.wrote_position > self.flushed_position:
            self.cov[COV_POWER_LOSS_UNFLUSHED_TAIL] += 1
        if self.flush_error_from >= 0:
            self._truncate(self.flush_error_from, POWER_LOSS, error_until=self.flushed_position)
        else:
            self._truncate(self.flushed_position, POWER_LOSS)
        if self.group_commit is not None:
            self.group_commit.requests.clear()

    def _truncate(self, position: int, fault: str, facts: bool | None = None, error_until: int = -1) -> int:
        """Drop every record past `position`; the destroyed facts are emitted on a master (or as
        `facts` says), those starting before `error_until` with fault `fsync_error`. Returns how
        many records were dropped."""
        if self.master if facts is None else facts:
            self._destroyed_facts(position, fault, error_until)
        lost = self.files.truncate_to(position)
        self._current = None
        self.wrote_position = self.committed_position = self.files.end()
        self._positions_cut()
        self.node.trace(COMMIT_LOG_TRUNCATED, self.wrote_position, lost)
        return lost

    def _positions_cut(self) -> None:
        """After a truncation: nothing is flushed past the end, and a failed range cut off is gone."""
        self.flushed_position = min(self.flushed_position, self.wrote_position)
        if self.flush_error_from >= self.wrote_position:
            self.flush_error_from = -1

    def truncate_invalid(self, position: int) -> None:
        """Recovery: drop everything from `position`, where the first invalid record starts."""
        self.files.truncate_to(position)
        self._current = None
        self.wrote_position = self.committed_position = self.files.end()
        self._positions_cut()

    def truncate_at_consistent_point(self, position: int) -> int:
        """Controller mode, AutoSwitchHAClient.doTruncate → truncateFiles: drop every record past
        the consistent point of the epochs (models/broker/auto_switch_ha.py). Any replica emits the
        destroyed facts here (fault `failover_truncated`): the copy cut may have been the last one.
        Returns how many records were dropped."""
        if position >= self.wrote_position:
            return 0
        return self._truncate(position, FAILOVER_TRUNCATED, facts=True)

    def _destroyed_facts(self, position: int, fault: str, error_until: int = -1) -> None:
        """Emit every record the truncation at `position` destroys (fault `fsync_error` for one
        starting before `error_until`, else `fault`), and remember each queue's offsets that will
        be assigned again (`reused_below`)."""
        for mapped in self.files.files:
            if mapped.file_from_offset + self.file_size <= position:
                continue
            for i in range(mapped.count_ending_by(position), len(mapped.rel)):
                phys = mapped.offset(i)
                _size, _t, queue_id, queue_offset, msg_id, topic, _tags, _rec, _flag = mapped.record(i)
                name = self.topics[topic]
                if name == SCHEDULE_TOPIC:
                    name = mapped.props[i].get(PROPERTY_REAL_TOPIC, name)
                cause = FSYNC_ERROR if phys < error_until else fault
                self.node.trace(COMMIT_LOG_DESTROYED, msg_id, name, queue_id, queue_offset, cause, self.replicas,
                                self.replica_has(phys, msg_id))
                key = topic << QUEUE_ID_BITS | queue_id
                self.reused_below[key] = max(self.reused_below.get(key, 0), queue_offset + 1)
        self._update_slow_append()

    def rebuild_queue_offsets(self, max_offsets: dict[int, int]) -> None:
        self.queue_offsets.clear()
        self.queue_offsets.update(max_offsets)
        # a queue whose offsets did not go back has nothing to reuse
        for key in [k for k, below in self.reused_below.items() if max_offsets.get(k, 0) >= below]:
            del self.reused_below[key]
        self._update_slow_append()

    @property
    def record_count(self) -> int:
        return len(self.files)
