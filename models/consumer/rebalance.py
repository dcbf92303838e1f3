"""client.impl.consumer.RebalanceImpl / RebalancePushImpl / RebalanceService.

Per subscribed topic (the retry topic included): CLUSTERING asks one randomly chosen broker of
the topic for the group's member list, sorts `mqAll` and `cidAll`, allocates, and updates the
ProcessQueue table; BROADCASTING takes every readable queue. Removed queues are dropped after a
oneway offset persist; added queues start at `computePullFromWhere` (the broker's committed
offset; else the max offset for CONSUME_FROM_LAST_OFFSET, 0 for retry topics and
CONSUME_FROM_FIRST_OFFSET, the offset at `consumeTimestamp` for CONSUME_FROM_TIMESTAMP (the
broker's searchOffset; the max offset for a retry topic)), and their first pull is dispatched after 500 ms (5.x;
`new_pull_delay_us`: a 4.x consumer dispatches it at once, as 4.9.8 does). Queues with
no pull for 120 s are dropped and re-added. An empty or missing member list changes nothing.

RebalanceService runs every 20 s on its own timer, started with the client whatever else
happens, and on wake-ups (start: 5.x if its heartbeat round went out, 4.9.8 always;
NOTIFY_CONSUMER_IDS_CHANGED, one from every broker the group's membership changed on; an
OFFSET_ILLEGAL correction; 5.x: a heartbeat on a newly active broker channel, models/client_instance.py),
at least 1 s apart (5.2.0+; `lastRebalanceTimestamp` starts at construction, so a wake-up within the
client's first second waits for it to pass; a wake-up is deferred, never dropped). 4.9.8's service has
no minInterval: a wake-up runs a round at once, so the second broker's notification of one join is a
second round right after the first, not one a second later. 5.2.0+: a round that is not balanced —
an allocated queue it could not start, its offset lookup failed — is followed by the next one after
minInterval (1 s), not 20 s (RebalanceService.run; an orderly lock refused also calls
rebalanceLater(500 ms): orderly_push_consumer.py); 4.x clients and 5.x before 5.2.0 wait the 20 s.

`PopRebalancer`: the same service for a POP-mode push consumer (models/consumer/pop_consumer.py),
whose rounds take the broker's assignment (RebalanceImpl.getRebalanceResultFromBroker →
updateMessageQueueAssignment, 5.3.3) and keep one PopProcessQueue per assigned queue.
"""

from __future__ import annotations

from typing import Any

from models.consumer.config import (
    NEW_PULL_REQUEST_DELAY_US,
    PULL_MAX_IDLE_TIME_US,
    REBALANCE_MIN_INTERVAL_US,
    REBALANCE_WAIT_INTERVAL_US,
    ConsumeFromWhere,
)
from models.coverage_points import COV_REBALANCE_DROPPED_QUEUE_IN_FLIGHT
from models.message import RETRY_GROUP_TOPIC_PREFIX, MessageQueue
from models.protocol import (
    SUCCESS,
    ConsumerList,
    GetConsumerList,
    GetMaxOffset,
    OffsetResponse,
    QueryConsumerOffset,
    SearchOffset,
)
from models.records import CONSUMER_QUEUE_STARTED, CONSUMER_REBALANCED
from sim.env import ms


class Rebalancer:
    def __init__(self, consumer: Any, strategy: Any) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.cov = consumer.node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.strategy = strategy
        self.stream = self.node.env.rng.stream(f"{self.node.name}.rebalance")
        self.last_round_us = -REBALANCE_MIN_INTERVAL_US
        self.timer: Any = None
        self.adding: dict[MessageQueue, None] = {}
        self.in_round = self.unbalanced = False  # a round running now; it found a queue it could not start
        # what a new queue goes through before computePullFromWhere: orderly locks it first
        self.prepare_add = self.compute_pull_from_where
        self.new_pull_delay_us = NEW_PULL_REQUEST_DELAY_US  # dispatchPullRequest(..., 500) (5.x)
        self.node.on_crash(self.adding.clear)

    # --- RebalanceService -----------------------------------------------------------------------
    def start(self) -> None:
        """The service thread starts: `waitForRunning(20 s)` first; the last round counts from now."""
        self.last_round_us = self.node.env._now
        self.schedule(REBALANCE_WAIT_INTERVAL_US)

    def schedule(self, delay_us: int) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.node.timer(delay_us, self.run_round)

    def wakeup(self) -> None:
        """rebalanceImmediately. 5.2.0+: the round comes at least minInterval (1 s) after the last
        one. 4.9.8 has no minInterval: the round runs at once (a wake-up during a round makes
        ServiceThread.waitForRunning return at once after it)."""
        if self.consumer.v4:
            self.schedule(0)
            return
        gap = self.node.env._now - self.last_round_us
        self.schedule(max(0, REBALANCE_MIN_INTERVAL_US - gap))

    def run_round(self) -> None:
        self.timer = None
        self.last_round_us = self.node.env._now
        self.in_round, self.unbalanced = True, False
        for topic in list(self.consumer.subscriptions):
            self.rebalance_by_topic(topic)
        self.in_round = False
        self.schedule(REBALANCE_MIN_INTERVAL_US if self.unbalanced else REBALANCE_WAIT_INTERVAL_US)

    # --- RebalanceImpl --------------------------------------------------------------------------
    def rebalance_by_topic(self, topic: str) -> None:
        consumer = self.consumer
        mq_all = sorted(consumer.subscribe_info.get(topic, ()))
        if not mq_all:
            return
        if consumer.broadcasting:
            self.update_table(topic, mq_all)
            return
        brokers = sorted({mq.broker_name for mq in mq_all})
        addr = consumer.broker_addr(brokers[self.stream.randrange(len(brokers))])
        if addr is None:
            return
        self.node.rpc(addr, GetConsumerList(consumer.group), ms(consumer.cfg.mq_client_api_timeout_ms),
                      lambda r: self._on_members(topic, r))

    def _on_members(self, topic: str, response: Any) -> None:
        if not isinstance(response, ConsumerList) or response.code != SUCCESS or not response.client_ids:
            return
        consumer = self.consumer
        mq_all = sorted(consumer.subscribe_info.get(topic, ()))
        if not mq_all:
            return
        cid_all = sorted(response.client_ids)
        try:
            target = self.strategy(consumer.group, consumer.client_id, mq_all, cid_all)
        except ValueError:
            return
        self.update_table(topic, target)

    def update_table(self, topic: str, target: list[MessageQueue]) -> None:
        consumer, now = self.consumer, self.node.env._now
        wanted = dict.fromkeys(target)
        removed = added = 0
        for mq, pq in list(consumer.process_queues.items()):
            if mq.topic != topic:
                continue
            if mq not in wanted or now - pq.last_pull_us > PULL_MAX_IDLE_TIME_US:
                if pq.msgs:  # pulled, not yet consumed: the next owner pulls them again
                    self.cov[COV_REBALANCE_DROPPED_QUEUE_IN_FLIGHT] += 1
                if consumer.drop_queue(mq, pq, "rebalance" if mq not in wanted else "pull_expired"):
                    removed += 1
        for mq in wanted:
            if mq not in consumer.process_queues and mq not in self.adding:
                self.adding[mq] = None
                self.prepare_add(mq)
                added += 1
        if removed or added:
            owned = sum(1 for mq in consumer.process_queues if mq.topic == topic)
            self.node.trace(CONSUMER_REBALANCED, consumer.group, topic, owned + added, added, removed)

    def compute_pull_from_where(self, mq: MessageQueue) -> None:
        consumer = self.consumer
        if consumer.broadcasting:
            self._offset_known(mq, consumer.offset_store.read_local_file(mq))
            return
        addr = consumer.broker_addr(mq.broker_name)
        if addr is None:
            self._not_placed(mq)
            return
        request = QueryConsumerOffset(consumer.group, mq.topic, mq.queue_id)
        self.node.rpc(addr, request, ms(consumer.cfg.mq_client_api_timeout_ms),
                      lambda r: self._on_offset(mq, addr, r))

    def _on_offset(self, mq: MessageQueue, addr: str, response: Any) -> None:
        if not isinstance(response, OffsetResponse):
            self._not_placed(mq)  # 5.x: -2 → exception → queue skipped this round
            return
        self._offset_known(mq, response.offset if response.code == SUCCESS else -1, addr)

    def _offset_known(self, mq: MessageQueue, offset: int, addr: str | None = None) -> None:
        if offset >= 0:
            return self._add(mq, offset)
        retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        where = self.consumer.cfg.consume_from_where
        timestamp = where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (retry and not timestamp):
            return self._add(mq, 0)
        addr = addr or self.consumer.broker_addr(mq.broker_name)
        if addr is None:
            self._not_placed(mq)
            return None
        request = SearchOffset(mq.topic, mq.queue_id, self.consumer.consume_timestamp_us) if timestamp and not retry \
            else GetMaxOffset(mq.topic, mq.queue_id)
        self.node.rpc(addr, request, ms(self.consumer.cfg.mq_client_api_timeout_ms),
                      lambda r: self._add(mq, r.offset) if isinstance(r, OffsetResponse) else self._not_placed(mq))
        return None

    def _not_placed(self, mq: MessageQueue) -> None:
        """computePullFromWhere failed: the queue is skipped this round, which is then not balanced;
        5.2.0+ RebalanceService waits minInterval (1 s) instead of waitInterval before the next round
        (a 4.x client waits the 20 s)."""
        self.adding.pop(mq, None)
        if self.consumer.v4:
            return
        if self.in_round:  # found within the round itself: the round's own wait becomes 1 s
            self.unbalanced = True
        else:
            self.wakeup()

    def _add(self, mq: MessageQueue, offset: int) -> None:
        self.adding.pop(mq, None)
        consumer = self.consumer
        if mq in consumer.process_queues or mq.topic not in consumer.subscriptions:
            return
        consumer.offset_store.remove(mq)
        consumer.offset_store.update(mq, offset, increase_only=False)  # readOffset caches it
        pq = consumer.process_queue_class(offset, self.node.env._now)
        consumer.process_queues[mq] = pq
        self.node.trace(CONSUMER_QUEUE_STARTED, consumer.group, mq.topic, mq.broker_name, mq.queue_id, offset)
        self.node.call_later(self.new_pull_delay_us, consumer.pull, mq, pq)


class PopRebalancer(Rebalancer):
    """RebalanceImpl in POP mode (5.3.3, clientRebalance false): each round asks the assignment
    (`consumer.pop_assignment(topic)`: broker names, one queue -1 each; None: no answer) and
    updates the popProcessQueueTable as updateMessageQueueAssignment does — a PopProcessQueue no
    longer assigned, or pull-expired (PopProcessQueue.isPullExpired: no pop for 120 s; RebalancePushImpl.consumeType
    is CONSUME_PASSIVELY, the only type that drops one), is marked dropped and removed; each
    assigned queue without one gets a new one whose first pop is dispatched 500 ms later
    (dispatchPopPullRequest(list, 500)). getRebalanceResultFromBroker returns whether the table
    changed, and doRebalance counts an unchanged topic as not balanced: so a steady POP consumer
    rebalances every minInterval (1 s), a round that changed something waits the 20 s."""

    def __init__(self, consumer: Any) -> None:
        super().__init__(consumer, None)

    def rebalance_by_topic(self, topic: str) -> None:
        consumer, now = self.consumer, self.node.env._now
        assigned = consumer.pop_assignment(topic)
        if assigned is None:
            self.unbalanced = True
            return
        wanted = dict.fromkeys(assigned)
        changed = False
        for name, pq in list(consumer.pqs.items()):
            if name not in wanted or now - pq.last_pop_us > PULL_MAX_IDLE_TIME_US:
                pq.dropped = True
                del consumer.pqs[name]
                changed = True
        for name in wanted:
            if name not in consumer.pqs:
                pq = consumer.pqs[name] = consumer.new_pop_process_queue(name)
                self.node.call_later(self.new_pull_delay_us, consumer.pop_message, pq)
                changed = True
        if not changed:
            self.unbalanced = True
