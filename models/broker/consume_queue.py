"""store.ConsumeQueue and DefaultMessageStore.ReputMessageService (dispatch).

A ConsumeQueue is what RocketMQ says it is: a sequence of 20-byte units (CommitLog physical
offset 8, size 4, tags code 8) in a `bytearray`; unit `i` is queue offset `min_offset + i`. The
tags code is `String.hashCode` of the TAGS property (0 without tags), and for
`SCHEDULE_TOPIC_XXXX` the delivery time (store time + level delay, here in µs).

Held more compactly than on disk while that is exact: a queue whose units all carry one tags code
(a topic without tags, or with one tag) holds that code once (`code`) and 12-byte units (physical
offset 8, size 4); the first unit with another code widens the queue for good (`widen`) to 16-byte
units whose code is 4 bytes (a tags code is `String.hashCode`, an int widened to a long:
MessageExtBrokerInner.tagsString2tagsCode). Only
`SCHEDULE_TOPIC_XXXX` queues, whose codes are delivery times, hold the 20-byte unit, from the
start. Every unit reads back the same (`unit`) whatever its queue's layout, and `CQ_UNIT_BYTES`
stays the real unit's 20 bytes where a size is modelled (disk usage, the units a pull scans).

`ReputMessageService` builds the units from the CommitLog on a 1 ms cadence, from its
`reput_from` position, and tells long polling about new data. Dispatch is lazy: when nothing is
pending no event is scheduled, and a new record is dispatched at the next tick of the service's
1 ms grid (the real thread sleeps 1 ms between rounds).

Dispatch limit (5.3.0+ "confirm offset"): the readable end (written, or committed with the
transient store pool) with ASYNC_FLUSH, the *flushed* position with SYNC_FLUSH, so a SYNC_FLUSH
message becomes visible only after its fsync; 4.x dispatches up to the readable end whatever
the flush type. An HA slave whose log diverged from its master's (ha_client.py) dispatches
nothing past the divergence (`stop_at`), as its ReputMessageService stops at the first invalid
record.

Simplified: queues never lose their head (no retention deletion, min offset 0); the CQ's own flush
is not modelled because recovery rebuilds CQ units from the CommitLog (recoverAbnormally
re-dispatches every valid record), which yields the same queues after any crash.
"""

# compiled with Cython: the C declarations of this module's classes are in consume_queue.pxd beside it

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import cython

from models.broker.commit_log import QUEUE_ID_BITS, CommitLog
from models.broker.config import REPUT_INTERVAL_US, FlushDiskType
from models.broker.mapped_file import RECORD, RECORD_BYTES, MappedFile, unpack_record
from models.coverage_points import COV_CONSUME_QUEUE_DIRTY_UNITS_DROPPED, COV_RECOVERY_TRUNCATES_INVALID_TAIL
from models.message import PROPERTY_DELAY_TIME_LEVEL, SCHEDULE_TOPIC
from models.records import CONSUME_QUEUE_DISPATCHED
from sim.env import Clock

CQ_UNIT = struct.Struct("<qiq")  # ConsumeQueue.CQ_STORE_UNIT_SIZE = 20
CQ_UNIT_BYTES = CQ_UNIT.size
SAME_CODE_UNIT = struct.Struct("<qi")  # a unit of a queue whose units share one tags code (module docstring)
SAME_CODE_UNIT_BYTES = SAME_CODE_UNIT.size  # 12
HASH_UNIT = struct.Struct("<qii")  # a unit of a queue whose tags codes are String.hashCode ints (module docstring)
HASH_UNIT_BYTES = HASH_UNIT.size  # 16
# the units' functions bound once, for the per-message paths (as mapped_file.py's for RECORD)
pack_unit, unpack_unit = CQ_UNIT.pack, CQ_UNIT.unpack_from
pack_same, unpack_same = SAME_CODE_UNIT.pack, SAME_CODE_UNIT.unpack_from


class ConsumeQueue:
    """One (topic, queue id)'s units: 12 bytes each and the shared tags code `code` while `narrow`,
    else `width` bytes each, packed and read by `pack_full` / `unpack_full` (module docstring)."""

    __slots__ = ("topic", "queue_id", "key", "ident", "units", "min_offset", "max_offset", "hint_phys",
                 "hint_file", "hint_index", "narrow", "code", "width", "pack_full", "unpack_full")

    def __init__(self, topic: str, queue_id: int, key: int, code: int | None = None) -> None:
        """`code`: the tags code the queue's units share until one differs (then 16-byte units);
        None: 20-byte units from the start (a delay-level queue, whose codes are delivery times)."""
        self.topic, self.queue_id, self.key = topic, queue_id, key
        self.ident = (topic, queue_id)
        self.units = bytearray()
        self.narrow = code is not None
        self.code = 0 if code is None else code  # read only while `narrow`
        self.width = SAME_CODE_UNIT_BYTES if self.narrow else CQ_UNIT_BYTES
        # the layout after `widen` (a narrow queue), else the queue's own: bound once, for the per-message paths
        full = HASH_UNIT if self.narrow else CQ_UNIT
        self.pack_full, self.unpack_full = full.pack, full.unpack_from
        self.min_offset = 0
        self.max_offset = 0  # one past the last unit (getMaxOffsetInQueue)
        # where the last unit's record lives: a caught-up consumer reads exactly that record,
        # which then needs no search by offset (a lookup cache only)
        self.hint_phys, self.hint_index = -1, -1
        self.hint_file: MappedFile | None = None

    def append(self, phys_offset: int, size: int, tags_code: int) -> None:
        if self.narrow and tags_code != self.code:
            self.widen()
        self.units += pack_same(phys_offset, size) if self.narrow else self.pack_full(phys_offset, size, tags_code)
        self.max_offset += 1

    def widen(self) -> None:
        """A unit with another tags code is coming: hold every unit with its own code (16 bytes)."""
        if self.narrow:
            code, pack = self.code, self.pack_full
            self.units = bytearray(b"".join([pack(phys, size, code)
                                             for phys, size in SAME_CODE_UNIT.iter_unpack(self.units)]))
            self.narrow, self.code, self.width = False, 0, HASH_UNIT_BYTES

    def unit(self, offset: int) -> tuple[int, int, int]:
        """(physical offset, size, tags code) of queue offset `offset`."""
        if self.narrow:
            phys, size = unpack_same(self.units, (offset - self.min_offset) * SAME_CODE_UNIT_BYTES)
            return phys, size, self.code
        return self.unpack_full(self.units, (offset - self.min_offset) * self.width)

    def drop_head(self, count: int) -> None:
        """Drop the first `count` units (CleanConsumeQueueService: below the CommitLog's first offset)."""
        del self.units[:count * self.width]
        self.min_offset += count

    def truncate_dirty(self, phys_end: int) -> int:
        """Drop units that reference CommitLog data at or beyond `phys_end` (truncateDirtyLogicFiles);
        returns how many were dropped."""
        self.hint_phys, self.hint_file, self.hint_index = -1, None, -1
        keep = self.max_offset - self.min_offset
        while keep and self.unit(self.min_offset + keep - 1)[0] >= phys_end:
            keep -= 1
        del self.units[keep * self.width:]
        dropped = self.max_offset - self.min_offset - keep
        self.max_offset = self.min_offset + keep
        return dropped

    def last_end(self) -> int:
        """End of the CommitLog record the last unit references (-1 if empty)."""
        if self.max_offset == self.min_offset:
            return -1
        phys, size, _code = self.unit(self.max_offset - 1)
        return phys + size


class ReputMessageService:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_cursor", "_dispatch_bound", "clock", "cov", "delivery_us", "detail", "grid_origin_us", "listeners", "log",
                 "node", "pending", "queues", "replica", "reput_from", "schedule_listener", "stop_at", "sync_flush",
                 "confirm_cap")

    def __init__(self, node: Any, log: CommitLog, flush_type: FlushDiskType, confirm_flushed: bool = True) -> None:
        self.node = node
        self.clock: Clock = node.env.clock
        self.log: CommitLog = log
        self.cov: list[int] = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self._dispatch_bound = self.dispatch  # bound once: `self.dispatch` makes a new bound-method object each time
        self.sync_flush = flush_type is FlushDiskType.SYNC_FLUSH and confirm_flushed
        self.stop_at = -1  # diverged HA slave: nothing at or past this position is dispatched
        self.replica = False  # an HA slave: units go at their records' queue offsets
        self.confirm_cap = -1  # controller mode, allAckInSyncStateSet: the master's confirm offset (-1: none)
        self.queues: dict[int, ConsumeQueue] = {}  # queue key (commit_log.queue_key) -> CQ
        self.reput_from = 0  # reputFromOffset: the next CommitLog position to dispatch
        self._cursor: tuple[MappedFile | None, int] = (None, 0)  # (file, index) of the next record
        self.pending = False
        self.grid_origin_us = 0
        self.detail = node.env.tracer.detail  # trace each dispatched range (detail kind, sim/trace.py)
        self.listeners: list[Callable[[ConsumeQueue], None]] = []  # new units in a queue
        self.schedule_listener: Callable[[int], None] | None = None  # (delay level)
        self.delivery_us: Callable[[int, int], int] = lambda level, store_us: store_us  # schedule tags code
        node.on_crash(self._stop)
        node.on_start(self.recover)

    def _stop(self) -> None:
        self.pending = False

    @cython.ccall
    def wake(self) -> None:
        """A record was appended (or flushed): dispatch at the next 1 ms tick."""
        if not self.pending:
            self.pending = True
            elapsed = (self.clock.now_us - self.grid_origin_us) % REPUT_INTERVAL_US
            self.node.call_later(REPUT_INTERVAL_US - elapsed, self._dispatch_bound)

    @cython.ccall
    def confirm_position(self) -> int:
        """How far dispatch may read: flushed (SYNC_FLUSH), else readable, and not past `stop_at`."""
        position = self.log.flushed_position if self.sync_flush else self.log.readable_position()
        if self.confirm_cap >= 0 and self.confirm_cap < position:
            position = self.confirm_cap
        return position if self.stop_at < 0 else min(position, self.stop_at)

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        index = self.log.topic_index.get(topic)
        return None if index is None else self.queues.get(index << QUEUE_ID_BITS | queue_id)

    @cython.ccall
    def dispatch(self, limit: int | None = None) -> None:
        self.pending = False
        if limit is None:
            limit = self.confirm_position()
        files = self.log.files.files
        mapped, i = self._cursor
        if mapped is None:  # after recovery: find the first record at or after reput_from
            mapped, i = self._locate(files, self.reput_from)
            if mapped is None:
                return
        touched: dict[int, ConsumeQueue] = {}
        start = self.reput_from
        while True:
            if self.replica:
                i = self._dispatch_replica(mapped, i, limit, touched)
            else:
                i = self._dispatch_file(mapped, i, limit, touched)
            if i < len(mapped.rel) or mapped is files[-1]:
                break
            mapped, i = files[(mapped.file_from_offset - files[0].file_from_offset) // self.log.file_size + 1], 0
        self._cursor = (mapped, i)
        if self.detail and self.reput_from > start:
            self.node.trace(CONSUME_QUEUE_DISPATCHED, start, self.reput_from)
        for cq in touched.values():
            for listener in self.listeners:
                listener(cq)

    def _locate(self, files: list[MappedFile], position: int) -> tuple[MappedFile | None, int]:
        """The file and index of the first record starting at or after `position`."""
        for mapped in files:
            if mapped.file_from_offset + self.log.file_size > position:
                return mapped, mapped.first_at(position)
        return (files[-1], len(files[-1].rel)) if files else (None, 0)

    @cython.ccall
    @cython.locals(cq=ConsumeQueue, mapped=MappedFile)
    def _dispatch_file(self, mapped: MappedFile, i: int, limit: int, touched: dict[int, ConsumeQueue]) -> int:
        """Dispatch the file's records from index `i` while they end by `limit`; returns the
        index of the first record not dispatched."""
        log, queues, rel, data, base = self.log, self.queues, mapped.rel, mapped.data, mapped.file_from_offset
        codes, unpack, pack, pack_narrow = log.tags_codes, unpack_record, pack_unit, pack_same
        n = len(rel)
        while i < n:
            start = base + rel[i]
            size, store_us, queue_id, _qoff, _msg_id, topic, tags, _rec, _flag = unpack(data, i * RECORD_BYTES)
            if start + size > limit:
                break
            key = topic << QUEUE_ID_BITS | queue_id
            cq = queues.get(key)
            if cq is None:
                cq = queues[key] = self._new_queue(topic, queue_id, key, codes[tags])
            if cq.narrow:
                code = codes[tags]
                if code == cq.code:
                    cq.units += pack_narrow(start, size)
                else:
                    cq.widen()
                    cq.units += cq.pack_full(start, size, code)
                cq.max_offset += 1
            elif cq.topic == SCHEDULE_TOPIC:
                level = mapped.props[i][PROPERTY_DELAY_TIME_LEVEL]
                cq.units += pack(start, size, self.delivery_us(level, store_us))
                cq.max_offset += 1  # before the listener: it arms on units below max_offset
                if self.schedule_listener is not None:
                    self.schedule_listener(level)
            else:
                cq.units += cq.pack_full(start, size, codes[tags])
                cq.max_offset += 1
            cq.hint_phys, cq.hint_file, cq.hint_index = start, mapped, i
            touched[key] = cq
            self.reput_from = start + size
            i += 1
        return i

    def _new_queue(self, topic: int, queue_id: int, key: int, code: int) -> ConsumeQueue:
        """A queue's first unit is coming: 12-byte units sharing its tags code `code`, 20-byte ones
        for a delay-level queue (module docstring)."""
        name = self.log.topics[topic]
        return ConsumeQueue(name, queue_id, key, None if name == SCHEDULE_TOPIC else code)

    def _dispatch_replica(self, mapped: MappedFile, i: int, limit: int, touched: dict[int, ConsumeQueue]) -> int:
        """`_dispatch_file` on a slave: a record whose queue offset is below its queue's end
        gets no unit (putMessagePositionInfo: "build consume queue repeatedly")."""
        queues, rel, data, base = self.queues, mapped.rel, mapped.data, mapped.file_from_offset
        n = len(rel)
        while i < n:
            size, _t, queue_id, queue_offset, _m, topic, _tags, _rec, _flag = RECORD.unpack_from(data, i * RECORD_BYTES)
            end = base + rel[i] + size
            if end > limit:
                break
            cq = queues.get(topic << QUEUE_ID_BITS | queue_id)
            if cq is not None and queue_offset < cq.max_offset:
                self.reput_from = end
                i += 1
                continue
            i = self._dispatch_file(mapped, i, min(limit, end), touched)
        return i

    def truncated(self) -> None:
        """The CommitLog was cut while running (controller mode's consistent point): drop the
        ConsumeQueue units past its end and dispatch on from there (truncateDirtyLogicFiles)."""
        end = self.log.wrote_position
        for cq in self.queues.values():
            cq.truncate_dirty(end)
        self._cursor = (None, 0)
        self.reput_from = min(self.reput_from, end)
        self.log.rebuild_queue_offsets({key: cq.max_offset for key, cq in self.queues.items()})

    def recover(self) -> None:
        """Start-up: drop CQ units beyond the surviving CommitLog, re-dispatch the rest."""
        self.grid_origin_us = self.node.env._now
        self._cursor = (None, 0)
        if self.stop_at >= 0:  # recovery truncates a diverged slave's log at its first invalid record
            self.cov[COV_RECOVERY_TRUNCATES_INVALID_TAIL] += 1
            self.log.truncate_invalid(self.stop_at)
            self.stop_at = -1
        end = self.log.wrote_position
        for cq in self.queues.values():
            if cq.truncate_dirty(end):
                self.cov[COV_CONSUME_QUEUE_DIRTY_UNITS_DROPPED] += 1
        self.reput_from = max((cq.last_end() for cq in self.queues.values()), default=0)
        self.reput_from = max(self.reput_from, 0)
        self.dispatch(limit=end)  # recovery dispatches every valid record, flushed or not
        self.log.rebuild_queue_offsets({key: cq.max_offset for key, cq in self.queues.items()})
