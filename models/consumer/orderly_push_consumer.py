"""DefaultMQPushConsumerImpl with a MessageListenerOrderly (`consume_mode: ORDERLY`), 5.3.3 or
4.9.8 (`client_version`, null: the scenario's `version`).

What differs from the concurrent consumer (models/consumer/push_consumer.py), chosen once when the
group's consumers are built (the concurrent path carries no orderly test):

- consumption: ConsumeMessageOrderlyService (models/consumer/consume_orderly_service.py);
- broker locks: models/consumer/queue_lock.py (lockAll every 20 s, first after 1 s);
- rebalance, new queue: locked on its master first; granted → a ProcessQueue created `locked`;
  refused or failed → skipped this round and `rebalanceLater(500)` (5.x), or skipped until the
  next round, 20 s later or on a wake-up (4.x); its first pull is dispatched after 500 ms (5.x) or
  at once (4.x, executePullRequestImmediately);
- rebalance, removed queue (RebalancePushImpl.removeUnnecessaryMessageQueue), 5.2.0+: the queue
  is marked dropped and its offset persisted; then if 20 s have passed since its last lock
  refresh, or the consume lock is free within 500 ms (no listener call on it, or the call ends
  within 500 ms: the removal happens then), the offset is persisted again and forgotten, the
  queue unlocked on the broker (oneway) and removed; otherwise it stays in the table, dropped,
  for the next round;
- rebalance, removed queue, 4.9.8: the queue is marked dropped, its offset persisted and
  forgotten at once; then if the consume lock is free within 1 s (tryLock(1000)), the queue is
  removed then and unlocked on the broker (oneway) — 20 s later (unlockDelay,
  `rocketmq.client.unlockDelayTimeMills`) when its ProcessQueue still caches messages
  (hasTempMessage), so the broker lock outlives the queue's ownership and the new owner's lock
  is refused until then (or until the broker's 60 s expiry); otherwise it stays in the table,
  dropped — and still renewed by lockAll, which skips no dropped queue in 4.9.8 — for the next
  round. A delayed unlock fires even if this consumer owns the queue again by then (the new
  ProcessQueue then runs on a lock the broker no longer holds for it, until the next lockAll);
- pulling (pullMessage): only while the ProcessQueue is `locked` (else again after
  `pullTimeDelayMillsWhenException`, 1000 ms); the first pull of a PullRequest re-reads the
  offset from the broker (computePullFromWhere; an error → again after 1000 ms); no span flow
  control; with nothing cached or taken, NO_NEW_MSG advances the committed offset.

Pulls may go to a slave when the master is gone (the ProcessQueue stays `locked` and consumption
runs until the 30 s client-side expiry), but a lock is only ever granted by a master.

Simplified: a removal waiting for the consume lock does not hold up the rest of the rebalance
round (Java's rebalance thread blocks in tryLock, up to 500 ms (5.x) or 1 s (4.x) per queue).
"""

from __future__ import annotations

from typing import Any

from models.consumer.config import (
    REBALANCE_LATER_US,
    REMOVE_CONSUME_LOCK_WAIT_US,
    REMOVE_DROPPED_LOCK_AGE_US,
    UNLOCK_DELAY_TIME_US,
    V4_REMOVE_CONSUME_LOCK_WAIT_US,
)
from models.consumer.consume_orderly_service import ConsumeOrderlyService
from models.consumer.process_queue import OrderlyProcessQueue
from models.consumer.push_consumer import PushConsumer
from models.consumer.queue_lock import QueueLocks
from models.message import MessageQueue
from models.protocol import SUCCESS, OffsetResponse, QueryConsumerOffset
from models.records import CONSUMER_QUEUE_DROPPED
from sim.env import ms


def locked_process_queue(next_offset: int, now_us: int) -> OrderlyProcessQueue:
    """createProcessQueue + setLocked(true): only a queue whose lock was granted is added."""
    pq = OrderlyProcessQueue(next_offset, now_us)
    pq.locked = True
    return pq


class OrderlyPushConsumer(PushConsumer):
    # not subclasses of the base's classes: a service built alike, and a factory of ProcessQueues
    consume_service_class = ConsumeOrderlyService  # type: ignore[assignment]  # built as ConsumeService
    process_queue_class = staticmethod(locked_process_queue)  # type: ignore[assignment]  # called as ProcessQueue

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # client_version: PushConsumer sets `v4` and the first-pull delay
        self.locks = QueueLocks(self, skip_dropped=not self.v4)
        self.rebalancer.prepare_add = self._lock_then_add

    # --- rebalance: add -----------------------------------------------------------------------
    def _lock_then_add(self, mq: MessageQueue) -> None:
        self.locks.lock(mq, lambda ok: self._lock_answered(mq, ok))

    def _lock_answered(self, mq: MessageQueue, ok: bool) -> None:
        if ok:
            self.rebalancer.compute_pull_from_where(mq)
            return
        self.rebalancer.adding.pop(mq, None)
        if not self.v4:  # 4.9.8: no rebalanceLater, the queue waits for the next round
            self.node.call_later(REBALANCE_LATER_US, self.rebalancer.wakeup)  # rebalanceLater(500)

    # --- rebalance: remove --------------------------------------------------------------------
    def drop_queue(self, mq: MessageQueue, pq: Any, reason: str = "rebalance") -> bool:
        """removeUnnecessaryMessageQueue, orderly and CLUSTERING (5.2.0+, or 4.9.8): see the
        module docstring. True when the queue is removed (now, or when its listener call ends
        within 500 ms (5.x) / 1 s (4.x)); False when it stays for the next round."""
        if not pq.dropped:
            self.node.trace(CONSUMER_QUEUE_DROPPED, self.group, mq.topic, mq.broker_name, mq.queue_id, reason)
            pq.dropped = True
        self.offset_store.persist(mq, self.broker_addr)
        if self.v4:
            return self._drop_v4(mq, pq)
        now = self.node.env._now
        if now - pq.last_lock_us > REMOVE_DROPPED_LOCK_AGE_US or pq.busy_until_us < 0:
            self._remove(mq, pq)
            return True
        if pq.busy_until_us - now <= REMOVE_CONSUME_LOCK_WAIT_US:
            self.node.call_later(pq.busy_until_us - now, self._remove, mq, pq)
            return True
        return False

    def _remove(self, mq: MessageQueue, pq: OrderlyProcessQueue) -> None:
        if self.process_queues.get(mq) is not pq:
            return
        self.offset_store.persist(mq, self.broker_addr)
        self.offset_store.remove(mq)
        pq.locked = False
        self.locks.unlock(mq)
        del self.process_queues[mq]

    def _drop_v4(self, mq: MessageQueue, pq: OrderlyProcessQueue) -> bool:
        """4.9.8: removeOffset at once, then tryLock(1000) of the consume lock → unlockDelay."""
        self.offset_store.remove(mq)
        wait_us = pq.busy_until_us - self.node.env._now
        if pq.busy_until_us < 0:
            self._remove_v4(mq, pq)
            return True
        if wait_us <= V4_REMOVE_CONSUME_LOCK_WAIT_US:
            self.node.call_later(wait_us, self._remove_v4, mq, pq)
            return True
        return False

    def _remove_v4(self, mq: MessageQueue, pq: OrderlyProcessQueue) -> None:
        """unlockDelay: unlock (oneway) at once, or 20 s later when messages are still cached."""
        if self.process_queues.get(mq) is not pq:
            return
        del self.process_queues[mq]
        if pq.msgs:  # hasTempMessage: msgTreeMap (not the taken batch) is not empty
            self.node.call_later(UNLOCK_DELAY_TIME_US, self.locks.unlock, mq)
        else:
            self.locks.unlock(mq)

    # --- pullMessage --------------------------------------------------------------------------
    def pull(self, mq: MessageQueue, pq: Any) -> None:
        if pq.dropped:
            return None
        if not pq.locked:
            pq.last_pull_us = self.node.env._now
            return self.pull_later(mq, pq, ms(self.cfg.pull_time_delay_mills_when_exception))
        if pq.previously_locked:
            return super().pull(mq, pq)
        addr = self.broker_addr(mq.broker_name)
        if addr is None:
            return self.pull_later(mq, pq, ms(self.cfg.pull_time_delay_mills_when_exception))
        request = QueryConsumerOffset(self.group, mq.topic, mq.queue_id)
        self.node.rpc(addr, request, ms(self.cfg.mq_client_api_timeout_ms), self._offset_reread, mq, pq)
        return None

    def _offset_reread(self, mq: MessageQueue, pq: Any, response: Any) -> None:
        """The first pull after locking: nextOffset = the broker's committed offset; none stored
        (QUERY_NOT_FOUND) → the offset the rebalance computed by the same rule stands (simplified:
        not computed again); no answer → again after 1000 ms."""
        if pq.dropped:
            return
        if not isinstance(response, OffsetResponse):
            self.pull_later(mq, pq, ms(self.cfg.pull_time_delay_mills_when_exception))
            return
        if response.code == SUCCESS and response.offset >= 0:
            pq.next_offset = response.offset
            self.offset_store.update(mq, response.offset, increase_only=False)
        pq.previously_locked = True
        super().pull(mq, pq)

    def correct_tags_offset(self, mq: MessageQueue, pq: Any) -> None:
        if not pq.has_messages():
            self.offset_store.update(mq, pq.next_offset, increase_only=True)
