"""client.impl.consumer.ProcessQueue: the client-side cache of one owned queue.

`msgs` maps queue offset → CommitLog record, in insertion order, which is ascending offset
order because pulls return increasing offsets; so the first key is the smallest cached offset
(the TreeMap's firstKey). `remove()` implements the sliding-window offset rule: the offset to
commit is the smallest offset still cached, or one past the highest fetched when none is.
"""

from __future__ import annotations

from models.broker.commit_log import R_MSG, R_QOFF


class ProcessQueue:
    __slots__ = ("msgs", "msg_size_bytes", "queue_offset_max", "dropped", "last_pull_us",
                 "next_offset", "frozen")

    def __init__(self, next_offset: int, now_us: int) -> None:
        self.msgs: dict[int, tuple] = {}
        self.msg_size_bytes = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.last_pull_us = now_us
        self.next_offset = next_offset  # the PullRequest's nextOffset

    def put(self, records: list[tuple]) -> None:
        msgs = self.msgs
        for record in records:
            offset = record[R_QOFF]
            if offset not in msgs:
                msgs[offset] = record
                self.msg_size_bytes += record[R_MSG].body_bytes
                self.queue_offset_max = offset

    def remove(self, offset: int) -> int:
        """removeMessage for one message: the offset to store (increaseOnly), or -1."""
        msgs = self.msgs
        if not msgs:
            return -1
        result = self.queue_offset_max + 1
        record = msgs.pop(offset, None)
        if record is not None:
            self.msg_size_bytes -= record[R_MSG].body_bytes
        if msgs:
            result = next(iter(msgs))
        return result

    @property
    def msg_count(self) -> int:
        return len(self.msgs)

    def max_span(self) -> int:
        msgs = self.msgs
        if not msgs:
            return 0
        return self.queue_offset_max - next(iter(msgs))
