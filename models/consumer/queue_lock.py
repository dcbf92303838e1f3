"""The client side of the orderly broker locks: RebalanceImpl.lock / lockAll / unlock / unlockAll and
ConsumeMessageOrderlyService.lockMQPeriodically (5.3.3; 4.9.8 where it differs).

Every request goes to the queue's master (brokerId 0 in the broker address table; none known →
the lock fails): LOCK_BATCH_MQ with a 1000 ms timeout. `lock(mq)` (a new queue at rebalance, or
a ConsumeRequest re-locking) sets `locked` and `lastLockTimestamp` of the queue's ProcessQueue
when granted. `lockAll` runs every 20 s (first 1 s after start, CLUSTERING only): one request per
broker for its non-dropped queues (4.9.8: every queue in the table, a dropped one kept for the
next round included, so its broker lock is renewed); granted queues get `locked` and a fresh
`lastLockTimestamp`, refused ones `locked = false` (`consumer.lock_lost` when that takes a lock away); a failed
request changes nothing (the queue stays locked until its 30 s client-side expiry).
`unlock(mq)` is oneway (rebalance removal); `unlockAll` at shutdown waits for the answers (1000 ms).

Simplified: lockAll's per-broker requests go out together, not one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.config import MASTER_ID
from models.consumer.config import (
    LOCK_ALL_INITIAL_DELAY_US,
    LOCK_BATCH_TIMEOUT_US,
    REBALANCE_LOCK_INTERVAL_US,
    UNLOCK_TIMEOUT_US,
)
from models.coverage_points import COV_ORDERLY_LOCK_LOST
from models.message import MessageQueue
from models.protocol import SUCCESS, LockBatchMQ, UnlockBatchMQ
from models.records import CONSUMER_LOCK_LOST


class QueueLocks:
    def __init__(self, consumer: Any, skip_dropped: bool = True) -> None:
        self.consumer = consumer
        self.skip_dropped = skip_dropped  # buildProcessQueueTableByBrokerName skips dropped queues (5.x)
        self.node = consumer.node
        self.group = consumer.group
        if not consumer.broadcasting:
            self.node.add_service(self.lock_mq_periodically)

    def master(self, broker_name: str) -> str | None:
        """findBrokerAddressInSubscribe(brokerName, MASTER_ID, onlyThisBroker=true)."""
        return self.consumer.client.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    # --- lock -----------------------------------------------------------------------------------
    def lock(self, mq: MessageQueue, done: Callable[[bool], None]) -> None:
        """RebalanceImpl.lock(mq): `done(granted)`."""
        addr = self.master(mq.broker_name)
        if addr is None:
            done(False)
            return
        request = LockBatchMQ(self.group, self.consumer.client_id, (mq,))
        self.node.rpc(addr, request, LOCK_BATCH_TIMEOUT_US, self._locked_one, mq, done)

    def _locked_one(self, mq: MessageQueue, done: Callable[[bool], None], response: Any) -> None:
        granted = _granted(response)
        ok = granted is not None and mq in granted
        if ok:
            pq = self.consumer.process_queues.get(mq)
            if pq is not None:
                self._mark_locked(pq)
        done(ok)

    def _mark_locked(self, pq: Any) -> None:
        pq.locked = True
        pq.last_lock_us = self.node.env._now

    def lock_mq_periodically(self) -> Generator[Any, Any, None]:
        yield self.node.sleep_us(LOCK_ALL_INITIAL_DELAY_US)
        while True:
            self.lock_all()
            yield self.node.sleep_us(REBALANCE_LOCK_INTERVAL_US)

    def _by_broker(self) -> dict[str, list[MessageQueue]]:
        """buildProcessQueueTableByBrokerName: the (5.x: non-dropped) queues, per broker name, sorted."""
        out: dict[str, list[MessageQueue]] = {}
        skip_dropped = self.skip_dropped
        for mq in sorted(self.consumer.process_queues):
            if not (skip_dropped and self.consumer.process_queues[mq].dropped):
                out.setdefault(mq.broker_name, []).append(mq)
        return out

    def lock_all(self) -> None:
        if self.consumer.consume.stopped:  # lockMQPeriodically: not once the service is stopped
            return
        for broker, mqs in self._by_broker().items():
            addr = self.master(broker)
            if addr is None:
                continue
            request = LockBatchMQ(self.group, self.consumer.client_id, tuple(mqs))
            self.node.rpc(addr, request, LOCK_BATCH_TIMEOUT_US, self._locked_all, request.mqs)

    def _locked_all(self, mqs: tuple[MessageQueue, ...], response: Any) -> None:
        granted = _granted(response)
        if granted is None:
            return  # an exception: nothing changes
        for mq in mqs:
            pq = self.consumer.process_queues.get(mq)
            if pq is None:
                continue
            if mq in granted:
                self._mark_locked(pq)
            elif pq.locked:
                self.node.env.coverage[COV_ORDERLY_LOCK_LOST] += 1
                pq.locked = False
                self.node.trace(CONSUMER_LOCK_LOST, self.group, mq.topic, mq.broker_name, mq.queue_id)

    # --- unlock ---------------------------------------------------------------------------------
    def unlock(self, mq: MessageQueue) -> None:
        """RebalanceImpl.unlock(mq, oneway=true)."""
        addr = self.master(mq.broker_name)
        if addr is not None:
            self.node.send(addr, UnlockBatchMQ(self.group, self.consumer.client_id, (mq,)))

    def unlock_all(self, then: Callable[[], None]) -> None:
        """unlockAll(oneway=false): per broker, its queues; locked = false; `then()` once all answered."""
        by_broker = {b: mqs for b, mqs in self._by_broker().items() if self.master(b) is not None}
        if not by_broker:
            then()
            return
        pending = [len(by_broker)]

        def answered(_response: Any) -> None:
            pending[0] -= 1
            if pending[0] == 0:
                then()

        for broker, mqs in by_broker.items():
            for mq in mqs:
                self.consumer.process_queues[mq].locked = False
            self.node.rpc(self.master(broker), UnlockBatchMQ(self.group, self.consumer.client_id, tuple(mqs)),
                          UNLOCK_TIMEOUT_US, answered)


def _granted(response: Any) -> frozenset | None:
    """The queues a LOCK_BATCH_MQ answer granted; None when the request failed (timeout, error)."""
    if response is None or getattr(response, "code", None) != SUCCESS:
        return None
    return frozenset(response.locked)
