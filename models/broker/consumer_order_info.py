"""broker.offset.ConsumerOrderInfoManager: orderly POP's per-queue state (5.3.3).

An orderly pop (`order` true) writes no checkpoint and does not move the consumer offset: it reads
from the committed offset and records, per (topic, group, queue id), the batch it handed out (its
offsets, popTime, invisibleTime) and how many times each offset was handed out before
(`offsetConsumedCount`, the message's reconsumeTimes). While any offset of the batch is un-acked
and invisible (`needBlock`: now < its nextVisibleTime, popTime + invisibleTime unless
ChangeInvisibleTime moved it) the queue is blocked: pops skip it. An ack (`commitAndNext`) sets the
offset's bit and commits the first un-acked offset (or the batch end); once the invisible time
passes un-acked, the next pop reads the same offsets again, in place (never the retry topic).
When a queue unblocks (an ack, or its invisible time passing: the lock-free timer) one held pop of
the group is woken.

Simplified: the table lives in memory and a broker crash drops it, so a queue blocked at the crash
opens at once after the restart (5.3.3 reloads consumerOrderInfo.json, at most 10 s old); the
`attemptId` of a client's retried request is not modelled.
"""

from __future__ import annotations

from typing import Any


class OrderInfo:
    """ConsumerOrderInfoManager.OrderInfo: one queue's popped batch."""

    __slots__ = ("acked", "counts", "invisible_us", "next_visible", "offsets", "pop_time_us")

    def __init__(self, pop_time_us: int, invisible_us: int, offsets: list[int], counts: dict[int, int]) -> None:
        self.pop_time_us, self.invisible_us = pop_time_us, invisible_us
        self.offsets = offsets
        self.counts = counts  # offsetConsumedCount
        self.acked = 0  # commitOffsetBit
        self.next_visible: dict[int, int] = {}  # offsetNextVisibleTime (ChangeInvisibleTime)

    def visible_us(self, offset: int) -> int:
        return self.next_visible.get(offset, self.pop_time_us + self.invisible_us)

    def blocked(self, now_us: int) -> bool:
        """needBlock: an un-acked offset still invisible."""
        return any(not self.acked >> i & 1 and now_us < self.visible_us(o) for i, o in enumerate(self.offsets))

    def unblocks_at_us(self) -> int:
        return max((self.visible_us(o) for i, o in enumerate(self.offsets) if not self.acked >> i & 1), default=0)


class ConsumerOrderInfoManager:
    """The table and its two operations (module docstring)."""

    def __init__(self, node: Any, commit: Any, wake: Any) -> None:
        self.node = node
        self.commit = commit  # (group, topic, queue id, offset) → the consumer offset
        self.wake = wake  # (topic, group) → wake one held pop
        self.table: dict[tuple[str, str, int], OrderInfo] = {}
        node.on_crash(self.table.clear)

    def blocked(self, topic: str, group: str, queue_id: int, now_us: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        return info is not None and info.blocked(now_us)

    def update(self, topic: str, group: str, queue_id: int, offsets: list[int], now_us: int,
               invisible_us: int) -> dict[int, int]:
        """A batch handed out: the counts merge (+1 for an offset handed out before); arms the
        lock-free timer. Returns offset → reconsumeTimes."""
        old = self.table.get((topic, group, queue_id))
        counts = {o: (old.counts[o] + 1 if old is not None and o in old.counts else 0) for o in offsets}
        self.table[(topic, group, queue_id)] = OrderInfo(now_us, invisible_us, offsets, counts)
        self.node.call_later(invisible_us, self._lock_free, topic, group, queue_id)
        return counts

    def _lock_free(self, topic: str, group: str, queue_id: int) -> None:
        if not self.blocked(topic, group, queue_id, self.node.env.clock.now_us):
            self.wake(topic, group)

    def ack(self, topic: str, group: str, queue_id: int, offset: int, pop_time_us: int, committed: int) -> None:
        """ackOrderly → commitAndNext: a stale handle (another popTime) or an offset below the
        committed one is ignored."""
        info = self.table.get((topic, group, queue_id))
        if info is None or offset < committed or info.pop_time_us != pop_time_us or offset not in info.offsets:
            return
        info.acked |= 1 << info.offsets.index(offset)
        following = [o for i, o in enumerate(info.offsets) if not info.acked >> i & 1]
        self.commit(group, topic, queue_id, following[0] if following else info.offsets[-1] + 1)
        if not info.blocked(self.node.env.clock.now_us):
            self.wake(topic, group)

    def change_invisible(self, topic: str, group: str, queue_id: int, offset: int, visible_us: int) -> int | None:
        """updateNextVisibleTime; returns the batch's popTime (None: no such batch)."""
        info = self.table.get((topic, group, queue_id))
        if info is None or offset not in info.offsets:
            return None
        info.next_visible[offset] = visible_us
        self.node.call_later(max(0, visible_us - self.node.env.clock.now_us), self._lock_free, topic, group, queue_id)
        return info.pop_time_us
