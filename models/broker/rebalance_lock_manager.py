"""broker.client.rebalance.RebalanceLockManager with the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ handlers
(AdminBrokerProcessor.lockBatchMQ / unlockBatchMQ), 5.3.3.

A table group → queue → (client id, lastUpdateTimestamp), in broker memory only: a crash or power
loss empties it, so a restarted broker grants any queue to whoever asks first. A queue is granted
to a client when no lock exists, when the client already holds it (the timestamp is refreshed), or
when the holder's lock is older than `rocketmq.broker.rebalance.lockMaxLiveTime` (60 s; taken
over). Registered on masters only: clients lock on the master (RebalanceImpl.lock asks
findBrokerAddressInSubscribe(brokerName, MASTER_ID, true)), so a queue whose master is gone
cannot be locked, and no orderly consumption starts from a slave.

Simplified: the lock table is keyed by (topic, queue id); the broker name is the broker's own.
5.3.3's two-phase tryLockBatch (lock what is free, then take the table lock for the rest) grants
the same set as the single pass here. Not modelled: the 5.x proxy's lock path.
"""

from __future__ import annotations

from typing import Any

from models.coverage_points import COV_ORDERLY_LOCK_EXPIRED_TAKEN_OVER, COV_ORDERLY_LOCK_REFUSED
from models.protocol import SUCCESS, CodeResponse, LockBatchMQ, LockBatchResponse, UnlockBatchMQ
from models.records import BROKER_LOCK_GRANTED, BROKER_LOCK_REFUSED, BROKER_UNLOCKED

REBALANCE_LOCK_MAX_LIVE_TIME_US = 60_000_000  # rocketmq.broker.rebalance.lockMaxLiveTime (RebalanceLockManager)


class RebalanceLockManager:
    def __init__(self, node: Any) -> None:
        self.node = node
        self.cov = node.env.coverage  # rare-state counts (models/coverage_points.py)
        # group → (topic, queue id) → [client id, lastUpdateTimestamp µs]
        self.table: dict[str, dict[tuple[str, int], list]] = {}
        node.on_crash(self.table.clear)  # locks live only in broker memory
        node.handle(LockBatchMQ, self.on_lock_batch)
        node.handle(UnlockBatchMQ, self.on_unlock_batch)

    def try_lock(self, group: str, client_id: str, topic: str, queue_id: int) -> bool:
        """tryLock for one queue: grant (new / renewed / expired takeover) or refuse."""
        locks = self.table.setdefault(group, {})
        now = self.node.env._now
        entry = locks.get((topic, queue_id))
        if entry is None:
            how = "new"
        elif entry[0] == client_id:
            how = "renewed"
        elif now - entry[1] > REBALANCE_LOCK_MAX_LIVE_TIME_US:
            self.cov[COV_ORDERLY_LOCK_EXPIRED_TAKEN_OVER] += 1
            how = "expired"
        else:
            self.cov[COV_ORDERLY_LOCK_REFUSED] += 1
            self.node.trace(BROKER_LOCK_REFUSED, group, client_id, topic, queue_id, entry[0])
            return False
        locks[(topic, queue_id)] = [client_id, now]
        self.node.trace(BROKER_LOCK_GRANTED, group, client_id, topic, queue_id, how)
        return True

    def unlock(self, group: str, client_id: str, topic: str, queue_id: int) -> None:
        """unlockBatch for one queue: only the holder's lock is removed."""
        locks = self.table.get(group)
        if locks is None:
            return
        entry = locks.get((topic, queue_id))
        if entry is not None and entry[0] == client_id:
            del locks[(topic, queue_id)]
            self.node.trace(BROKER_UNLOCKED, group, client_id, topic, queue_id)

    def on_lock_batch(self, src: str, req_id: int, req: LockBatchMQ) -> None:
        locked = tuple(mq for mq in req.mqs if self.try_lock(req.group, req.client_id, mq.topic, mq.queue_id))
        self.node.reply(src, req_id, LockBatchResponse(SUCCESS, locked))

    def on_unlock_batch(self, src: str, req_id: int, req: UnlockBatchMQ) -> None:
        for mq in req.mqs:
            self.unlock(req.group, req.client_id, mq.topic, mq.queue_id)
        if req_id:  # a oneway request has no answer
            self.node.reply(src, req_id, CodeResponse(SUCCESS))
