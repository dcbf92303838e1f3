"""client.impl.consumer.ProcessQueue: the client-side cache of one owned queue.

`msgs` maps queue offset → MessageExt, in insertion order, which is ascending offset order
because pulls return increasing offsets; so the first key is the smallest cached offset (the
TreeMap's firstKey). `remove()` implements the sliding-window offset rule: the offset to commit
is the smallest offset still cached, or one past the highest fetched when none is.
`long_consuming` holds the start times cleanExpiredMsg reads (see ConsumeService).
"""

from __future__ import annotations

from typing import Any


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

    def put(self, msgs: Any) -> None:
        cached = self.msgs
        for msg in msgs:
            offset = msg.queue_offset
            if offset not in cached:
                cached[offset] = msg
                self.msg_size_bytes += msg.body_bytes
                self.queue_offset_max = offset

    def remove(self, offset: int) -> int:
        """removeMessage for one message: the offset to store (increaseOnly), or -1."""
        cached = self.msgs
        if not cached:
            return -1
        result = self.queue_offset_max + 1
        msg = cached.pop(offset, None)
        if msg is not None:
            self.msg_size_bytes -= msg.body_bytes
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
