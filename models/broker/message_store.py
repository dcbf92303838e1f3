"""store.DefaultMessageStore: the read side (getMessage, lookMessageByOffset) over CommitLog + ConsumeQueues.

`get_message` returns a GetMessageStatus with the next begin offset as in the real table
(OFFSET_TOO_SMALL → min, OFFSET_OVERFLOW_BADLY → max, FOUND → offset + units scanned); on a
slave without `offsetCheckInSlave` the corrections keep the requested offset. The scan covers
at most `max(maxFilterMessageSize, maxMsgNums × 20)` bytes of units (16000 by default: it grows
with the batch size, as getMessage's does). A batch follows
`isTheBatchFull`: the first message is always taken; then at most `maxMsgNums`, and the
in-memory (32 messages / 256 KiB) or on-disk (8 / 64 KiB) transfer limits, "in memory" meaning
within 40 % of physical RAM of the CommitLog end. Units are filtered by tags code against the
subscription's code set, as the broker's ExpressionMessageFilter does; the client then re-checks
the tag strings (a hash collision lets a message through the broker, never the client).

`get_offset_in_queue_by_time` is ConsumeQueue.getOffsetInQueueByTime over the store timestamps
of a queue's units: 5.x (5.1.1+) with `BoundaryType.LOWER` (the first unit stored at or after
the time; one past the last unit if all are older), 4.x the nearer neighbour by time (an exact
match wins; ties go to the earlier unit; before every unit → the first, after every unit →
the last). Simplified: one binary search over the whole queue (the real one first picks a CQ
file by its modification time).

Messages are returned as `MessageExt` built from the CommitLog's tables; `body_bytes` is derived
from the record size minus the header, topic and properties the broker knows (the KEYS property
is not stored, so the body of a message with keys reads a few bytes long).
"""

# compiled with Cython: the C declarations of this module's classes are in message_store.pxd beside it

from __future__ import annotations

from typing import Any

import cython

from models.broker.commit_log import CommitLog
from models.broker.config import MessageStoreConfig
from models.broker.consume_queue import CQ_UNIT_BYTES, ConsumeQueue, ReputMessageService, unpack_same
from models.broker.mapped_file import RECORD_BYTES, MappedFile, unpack_record
from models.message import FIXED_RECORD_BYTES, MessageExt, new_message_ext, properties_bytes

FOUND = "FOUND"
NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"


class MessageStore:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_cold_limits", "_hot_limits", "_overhead", "cfg", "commit_log", "correct_offsets",
                 "memory_window_bytes", "reput", "scan_bytes", "scan_units")

    def __init__(self, node: Any, cfg: MessageStoreConfig, pool: bool = False, master: bool = True,
                 confirm_flushed: bool = True, correct_offsets: bool = True) -> None:
        self.cfg = cfg
        self.commit_log: CommitLog = CommitLog(node, cfg, pool, master)
        self.reput: ReputMessageService = ReputMessageService(node, self.commit_log, cfg.flush_disk_type,
                                                              confirm_flushed)
        self.scan_bytes = cfg.max_filter_message_size_bytes
        # isTheBatchFull's limits (bytes, count) for page-cache-hot and for cold data, read once
        self._hot_limits = (cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory)
        self._cold_limits = (cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk)
        self.scan_units = self.scan_bytes // CQ_UNIT_BYTES  # units a pull scans at least (maxFilterMessageSize)
        self.correct_offsets = correct_offsets  # a master, or a slave with offsetCheckInSlave
        self.memory_window_bytes = cfg.physical_memory_bytes * cfg.access_message_in_memory_max_ratio // 100
        self._overhead: dict[int, int] = {}  # topic index << 16 | tags index -> header + topic + properties

    def release(self) -> None:
        """Free the per-message tables (every CommitLog file's records, every ConsumeQueue's units)
        at the end of a run whose analysis reads none of them (rmqsim/runner.py `release_stores`).
        The store holds no message afterwards and is not to be used again (its positions and queue
        ends are left as they were, without the records behind them)."""
        for mapped in self.commit_log.files.files:
            mapped.rel, mapped.data, mapped.props = mapped.rel[:0], bytearray(), {}
        for cq in self.reput.queues.values():
            cq.units = bytearray()

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.reput.queue(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def head_in_memory(self, topic: str, queue_id: int) -> bool:
        """5.1.0+ queryConsumerOffset rule: the unit at offset 0 exists and is page-cache hot."""
        cq = self.reput.queue(topic, queue_id)
        if cq is None or cq.min_offset > 0 or cq.max_offset == 0:
            return False
        return self.commit_log.wrote_position - cq.unit(0)[0] <= self.memory_window_bytes

    def look_message_by_offset(self, phys_offset: int) -> MessageExt | None:
        """lookMessageByOffset: the stored message at a CommitLog offset, or None."""
        mapped, index = self.commit_log.files.find(phys_offset)
        if mapped is None:
            return None
        size, store_us, queue_id, queue_offset, msg_id, topic, tags, reconsume, _flag = mapped.record(index)
        props = mapped.props.get(index)
        body = size - self._header_bytes(topic, tags, props)
        log = self.commit_log
        return new_message_ext((msg_id, log.topics[topic], queue_id, queue_offset, phys_offset, size, store_us,
                                log.tags[tags], reconsume, body, props))

    @cython.ccall
    @cython.locals(cq=ConsumeQueue, log=CommitLog, mapped=MappedFile, narrow=cython.bint)
    def get_message(self, cq: ConsumeQueue | None, offset: int, max_msg_nums: int,
                    tag_codes: frozenset | None) -> tuple[str, int, int, tuple[MessageExt, ...]]:
        """Returns (status, next_begin_offset, max_offset, messages) for queue `cq` (None: no
        ConsumeQueue for the topic and queue id)."""
        if cq is None:
            return NO_MATCHED_LOGIC_QUEUE, self._corrected(offset, 0), 0, ()
        max_offset = cq.max_offset
        if max_offset == 0:
            return NO_MESSAGE_IN_QUEUE, self._corrected(offset, 0), 0, ()
        if offset < cq.min_offset:
            return OFFSET_TOO_SMALL, self._corrected(offset, cq.min_offset), max_offset, ()
        if offset == max_offset:
            return OFFSET_OVERFLOW_ONE, offset, max_offset, ()
        if offset > max_offset:
            return OFFSET_OVERFLOW_BADLY, self._corrected(offset, max_offset), max_offset, ()
        # scan the units (isTheBatchFull), build a MessageExt from the record of each match
        # max(maxFilterMessageSize, maxMsgNums × 20) bytes of units, not past the queue's end
        stop = offset + (max_msg_nums if max_msg_nums > self.scan_units else self.scan_units)
        if stop > max_offset:
            stop = max_offset
        log, window = self.commit_log, self.memory_window_bytes
        end, topics, tags_table, overheads = log.wrote_position, log.topics, log.tags, self._overhead
        units, base, hint_phys = cq.units, cq.min_offset, cq.hint_phys
        # a narrow queue's units share `code`; the others' have their own (consume_queue.py)
        narrow, code, width, unpack_full = cq.narrow, cq.code, cq.width, cq.unpack_full
        msgs: list[MessageExt] = []
        total = 0
        i = offset
        while i < stop:
            if narrow:
                phys, size = unpack_same(units, (i - base) * width)
            else:
                phys, size, code = unpack_full(units, (i - base) * width)
            if msgs:
                if len(msgs) >= max_msg_nums:
                    break
                max_bytes, max_count = self._hot_limits if end - phys <= window else self._cold_limits
                if total + size > max_bytes or len(msgs) >= max_count:
                    break
            i += 1
            if tag_codes is not None and code not in tag_codes:
                continue
            if phys == hint_phys:
                mapped, index = cq.hint_file, cq.hint_index
            else:
                mapped, index = log.files.find(phys)
                if mapped is None:
                    continue  # the CommitLog data is gone (MESSAGE_WAS_REMOVING)
            size, store_us, queue_id, _qoff, msg_id, topic, tags, reconsume, _flag = unpack_record(
                mapped.data, index * RECORD_BYTES)  # type: ignore[union-attr]  # a hint_phys match: hint_file is set
            props = mapped.props.get(index) if mapped.props else None  # type: ignore[union-attr]  # as above
            overhead = overheads.get(topic << 16 | tags) if props is None else None
            if overhead is None:
                overhead = self._header_bytes(topic, tags, props)
            msgs.append(new_message_ext((msg_id, topics[topic], queue_id, i - 1, phys, size, store_us, tags_table[tags],
                                         reconsume, size - overhead, props)))
            total += size
        if msgs:
            return FOUND, i, max_offset, tuple(msgs)
        return NO_MATCHED_MESSAGE, i, max_offset, ()

    def _corrected(self, offset: int, corrected: int) -> int:
        """nextOffsetCorrection: a slave without offsetCheckInSlave keeps the requested offset."""
        return corrected if self.correct_offsets else offset

    def store_time_us(self, cq: ConsumeQueue, offset: int) -> int:
        """The CommitLog store timestamp of queue offset `offset` (pickupStoreTimestamp)."""
        mapped, index = self.commit_log.files.find(cq.unit(offset)[0])
        return -1 if mapped is None else mapped.record(index)[1]

    def get_offset_in_queue_by_time(self, cq: ConsumeQueue | None, timestamp_us: int, lower: bool) -> int:
        """getOffsetInQueueByTime (module docstring): `lower` is 5.x's BoundaryType.LOWER, else
        4.x's nearest unit."""
        if cq is None or cq.max_offset == cq.min_offset:
            return 0
        low, high = cq.min_offset, cq.max_offset - 1
        if self.store_time_us(cq, high) < timestamp_us:
            return high + 1 if lower else high
        if self.store_time_us(cq, low) > timestamp_us:
            return low
        while low <= high:  # invariant: time(low - 1) < timestamp <= ... (lower bound search)
            mid = (low + high) // 2
            if self.store_time_us(cq, mid) < timestamp_us:
                low = mid + 1
            else:
                high = mid - 1
        first_at_or_after = low  # exists: the last unit is not older than the timestamp
        if lower or self.store_time_us(cq, first_at_or_after) == timestamp_us or first_at_or_after == cq.min_offset:
            return first_at_or_after
        before = first_at_or_after - 1
        after_gap = self.store_time_us(cq, first_at_or_after) - timestamp_us
        before_gap = timestamp_us - self.store_time_us(cq, before)
        return before if before_gap <= after_gap else first_at_or_after

    def _header_bytes(self, topic: int, tags: int, props: dict | None) -> int:
        """Record bytes that are not body: header, topic and the properties the broker knows."""
        log = self.commit_log
        overhead = FIXED_RECORD_BYTES + len(log.topics[topic]) + properties_bytes(log.tags[tags], 0, props)
        if props is None:
            self._overhead[topic << 16 | tags] = overhead
        return overhead
