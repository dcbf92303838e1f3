"""client.impl.consumer.ProcessQueue: the client-side cache of one owned queue.

`msgs` maps queue offset → MessageExt, in insertion order, which is ascending offset order
because pulls return increasing offsets; so the first key is the smallest cached offset (the
TreeMap's firstKey). `remove()` implements the sliding-window offset rule: the offset to commit
is the smallest offset still cached, or one past the highest fetched when none is.
`long_consuming` holds the start times cleanExpiredMsg reads (see ConsumeService).
"""

# compiled with Cython: the C declarations of this module's classes are in process_queue.pxd beside it

from __future__ import annotations

from typing import Any

import cython

from models.consumer.config import REBALANCE_LOCK_MAX_LIVE_TIME_US


class ProcessQueue:
    __slots__ = ("msgs", "msg_size_bytes", "queue_offset_max", "dropped", "last_pull_us",
                 "next_offset", "frozen", "long_consuming")

    def __init__(self, next_offset: int, now_us: int) -> None:
        self.msgs: dict[int, Any] = {}
        self.msg_size_bytes = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.last_pull_us = now_us
        self.next_offset = next_offset  # the PullRequest's nextOffset
        # offset → CONSUME_START_TIME of listener calls that will outlast consumeTimeout (the only
        # ones cleanExpiredMsg can act on); None until one exists, so the hot path only tests it
        self.long_consuming: dict[int, int] | None = None

    @cython.ccall
    def put(self, msgs: Any) -> None:
        cached = self.msgs
        for msg in msgs:  # a MessageExt cast to tuple: unpacked in C when compiled (see Broker.process_send)
            _id, _topic, _queue_id, offset, _phys, _size, _store, _tags, _reconsume, body_bytes, _props = (
                cython.cast(tuple, msg) if cython.compiled else msg)
            if offset not in cached:
                cached[offset] = msg
                self.msg_size_bytes += body_bytes
                self.queue_offset_max = offset

    @cython.ccall
    def remove(self, offset: int) -> int:
        """removeMessage for one message: the offset to store (increaseOnly), or -1."""
        cached = self.msgs
        if not cached:
            return -1
        result = self.queue_offset_max + 1
        msg = cached.pop(offset, None)
        if msg is not None:  # a MessageExt, unpacked in C when compiled (see Broker.process_send)
            _id, _topic, _queue_id, _offset, _phys, _size, _store, _tags, _reconsume, body_bytes, _props = (
                cython.cast(tuple, msg) if cython.compiled else msg)
            self.msg_size_bytes -= body_bytes
        if cached:
            result = next(iter(cached))
        return result

    @property
    def msg_count(self) -> int:
        return len(self.msgs)

    def max_span(self) -> int:
        """getMaxSpan: lastKey − firstKey of the messages still cached (0 if none)."""
        cached = self.msgs
        if not cached:
            return 0
        return next(reversed(cached)) - next(iter(cached))


class OrderlyProcessQueue(ProcessQueue):
    """ProcessQueue as ConsumeMessageOrderlyService uses it.

    `taking` is consumingMsgOrderlyTreeMap (the batch the listener holds); `consuming` the flag
    putMessage sets when it hands the queue to a ConsumeRequest; `locked` / `last_lock_us` the
    broker lock as last seen (isLockExpired: older than 30 s); `previously_locked` the
    PullRequest's flag (the first pull after locking re-reads the offset); `busy_until_us` the end
    of the listener call in progress, under the consume lock (-1: none). Span flow control is
    concurrent-only, so `max_span` is 0 here (the pull loop is shared); the count and size flow
    control see only the messages not taken (Java counts the taken batch too: at most
    consumeMessageBatchMaxSize more).
    """

    __slots__ = ("taking", "consuming", "locked", "last_lock_us", "previously_locked", "busy_until_us",
                 "consume_started_us")

    def __init__(self, next_offset: int, now_us: int) -> None:
        super().__init__(next_offset, now_us)
        self.taking: dict[int, Any] = {}
        self.consuming = False
        self.locked = False
        self.last_lock_us = now_us  # lastLockTimestamp starts at construction
        self.previously_locked = False
        self.busy_until_us = -1
        self.consume_started_us = 0

    def dispatch_to_consume(self) -> bool:
        """putMessage's result: true when messages are cached and no ConsumeRequest holds the queue."""
        if self.msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    def max_span(self) -> int:
        return 0

    def has_messages(self) -> bool:
        """msgCount > 0: cached or taken by the listener."""
        return bool(self.msgs or self.taking)

    def take_messages(self, n: int) -> list[Any]:
        """takeMessages(n): the n smallest cached messages move to the taken map; none left →
        `consuming` is cleared (the ConsumeRequest ends)."""
        cached = self.msgs
        out: list[Any] = []
        while cached and len(out) < n:
            offset = next(iter(cached))
            msg = cached.pop(offset)
            self.taking[offset] = msg
            out.append(msg)
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """commit(): forget the taken batch; the offset to store is its last offset + 1 (-1 if none)."""
        taking = self.taking
        if not taking:
            return -1
        offset = next(reversed(taking)) + 1
        self.msg_size_bytes -= sum(m.body_bytes for m in taking.values())
        self.taking = {}
        return offset

    def make_to_consume_again(self, msgs: list[Any]) -> None:
        """makeMessageToConsumeAgain: the batch goes back to the cache (in offset order)."""
        for msg in msgs:
            self.taking.pop(msg.queue_offset, None)
        merged = {m.queue_offset: m for m in msgs}
        merged.update(self.msgs)
        self.msgs = dict(sorted(merged.items()))

    def is_lock_expired(self, now_us: int) -> bool:
        return now_us - self.last_lock_us > REBALANCE_LOCK_MAX_LIVE_TIME_US
