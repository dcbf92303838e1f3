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

Persistence (ConfigManager): the table is written to `consumerOrderInfo.json` every 10 s, first
10 s after the start (BrokerController's scheduled task, with consumerFilter.json; no fsync:
config_file.py's page-cache rules), and read back at start-up (ConsumerOrderInfoManager.load →
decode): a crash drops the heap table and the restarted broker blocks what the file blocks — the
batches popped up to 10 s before the crash stay blocked until their invisible time, those popped
since are free at once, an ack since is forgotten (the queue blocked again until the invisible
time); ConsumerOrderInfoLockManager.recover arms the lock-free timer of each loaded queue still
blocked (`getLockFreeTimestamp`: the first un-acked offset still invisible;
enableNotifyAfterPopOrderLockRelease, true).

Simplified: the `attemptId` of a client's retried request and encode's autoClean (entries of a
topic or group gone, or not consumed for 24 h) are not modelled.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config_file import ConfigFile
from models.version import Version

CONSUMER_ORDER_INFO_FILE = "config/consumerOrderInfo.json"  # BrokerPathConfigHelper.getConsumerOrderInfoPath
PERSIST_PERIOD_US = 10_000_000  # BrokerController: consumerOrderInfoManager.persist() at 1000 * 10, 1000 * 10 ms


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

    def lock_free_us(self, now_us: int) -> int:
        """getLockFreeTimestamp: the next visible time of the first un-acked offset still
        invisible, else now."""
        for i, o in enumerate(self.offsets):
            if not self.acked >> i & 1 and now_us < self.visible_us(o):
                return self.visible_us(o)
        return now_us

    def saved(self) -> tuple:
        """The JSON fields (popTime, i, o, oc, cm, ot) as an immutable value."""
        return (self.pop_time_us, self.invisible_us, tuple(self.offsets), tuple(self.counts.items()), self.acked,
                tuple(self.next_visible.items()))

    @classmethod
    def loaded(cls, saved: tuple) -> OrderInfo:
        pop_time_us, invisible_us, offsets, counts, acked, next_visible = saved
        info = cls(pop_time_us, invisible_us, list(offsets), dict(counts))
        info.acked, info.next_visible = acked, dict(next_visible)
        return info


class ConsumerOrderInfoManager:
    """The table and its two operations (module docstring)."""

    def __init__(self, node: Any, commit: Any, wake: Any) -> None:
        self.node = node
        self.commit = commit  # (group, topic, queue id, offset) → the consumer offset
        self.wake = wake  # (topic, group) → wake one held pop
        self.table: dict[tuple[str, str, int], OrderInfo] = {}
        self.file = ConfigFile(node, CONSUMER_ORDER_INFO_FILE, Version.V5)  # POP is 5.x only
        node.on_crash(self.table.clear)
        node.on_start(self.load)
        node.add_service(self.persist_loop)

    # --- ConfigManager ------------------------------------------------------------------------
    def persist_loop(self) -> Generator[Any, Any, None]:
        """The broker's scheduled persist (fixed rate: nothing here takes time)."""
        while True:
            yield self.node.sleep_us(PERSIST_PERIOD_US)
            self.persist()

    def persist(self) -> None:
        self.file.persist({key: info.saved() for key, info in self.table.items()})

    def load(self) -> None:
        """load → decode: the table is the file's; recover: the lock-free timers of the queues
        still blocked."""
        saved, _source = self.file.load()
        now = self.node.env.clock.now_us
        self.table.clear()  # (the crash hook holds this dict's clear)
        self.table.update((key, OrderInfo.loaded(value)) for key, value in saved.items())
        for (topic, group, queue_id), info in self.table.items():
            free_us = info.lock_free_us(now)
            if free_us > now:
                self.node.call_later(free_us - now, self._lock_free, topic, group, queue_id)

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
