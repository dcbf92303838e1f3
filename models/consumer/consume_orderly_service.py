"""ConsumeMessageOrderlyService with the application's MessageListenerOrderly (5.3.3; 4.9.8 runs
the same ConsumeRequest: its consume lock is a plain lock where 5.x takes a read lock, which only
the removal's tryLock sees (models/consumer/orderly_push_consumer.py)).

A pool of `consumeThreadMax` threads with a FIFO task queue. A queue has at most one ConsumeRequest
at a time: the pull hands it over when putMessage reports `dispatchToConsume` (messages cached and
no request running), and the request runs the queue's messages one batch after another
(the per-queue monitor: one listener call at a time per queue). In CLUSTERING a request runs only
while the ProcessQueue is `locked` and not lock-expired (30 s since `lastLockTimestamp`);
otherwise it re-locks the queue on the master after 100 ms (10 ms inside the loop) and resubmits
10 ms after a granted lock, 3000 ms after a refused one. After 60 s of continuous work
(`rocketmq.client.maxTimeConsumeContinuously`) it yields and resubmits after 10 ms.

Each batch: `takeMessages(consumeMessageBatchMaxSize)`, the listener under the consume lock (its
time drawn from `consume_time_ms`; it fails — SUSPEND_CURRENT_QUEUE_A_MOMENT — with
`failure_probability`), then processConsumeResult with autoCommit: SUCCESS → `commit()` and
`updateOffset(offset, increaseOnly=false)` unless the queue was dropped meanwhile; SUSPEND → per
message, reconsumeTimes ≥ maxReconsumeTimes (−1 → Integer.MAX_VALUE: never) sends it to the DLQ
path through the inner producer (a `%RETRY%` message whose RECONSUME_TIME exceeds the maximum,
models/consumer/send_back.py), else reconsumeTimes += 1 and the batch is put back and the queue
suspended for `suspendCurrentQueueTimeMillis` (1000, clamped to [10, 30000]). So by default a
failing message blocks its queue, retried every second, and never takes the retry topic.

Shutdown: the pool stops, waits up to awaitTerminationMillisWhenShutdown for the running calls
(then interrupts them: a call that throws, i.e. SUSPEND), then unlockAll (one UNLOCK_BATCH_MQ per
broker, 1000 ms) before the consumer persists its offsets and unregisters.

Simplified: the RECONSUME_TIME of a DLQ-bound re-send is reconsumeTimes + 1 as in 5.3.3 (4.9.8
sends reconsumeTimes, which its broker's handleRetryAndDLQ, reconsumeTimes ≥ MAX_RECONSUME_TIMES,
also sends to the DLQ: the same destination); the inner-producer send does not hold the thread
and its failure is not seen (Java suspends the queue and counts the message up instead).
BROADCASTING orderly consumption (no locks) is not modelled (the scenario check refuses it).
"""

from __future__ import annotations

from typing import Any

from models.consumer.config import (
    MAX_TIME_CONSUME_CONTINUOUSLY_US,
    ORDERLY_LOCK_FAILED_DELAY_US,
    ORDERLY_MAX_RECONSUME_TIMES,
    ORDERLY_RELOCK_DELAY_US,
    SUSPEND_MAX_MS,
    SUSPEND_MIN_MS,
)
from models.consumer.consume_pool import ConsumePool
from models.consumer.send_back import SendBack
from models.coverage_points import COV_ORDERLY_CONSUME_NEEDS_LOCK, COV_ORDERLY_QUEUE_SUSPENDED
from models.records import CONSUMER_CONSUMED
from sim.env import ms

ORDERLY_OUTER_RELOCK_DELAY_US = 100_000  # ConsumeRequest.run: tryLockLaterAndReconsume(..., 100) when not locked


class ConsumeOrderlyService(ConsumePool):
    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.env = self.node.env
        self.cov = self.env.coverage  # rare-state counts (models/coverage_points.py)
        self.group = consumer.group
        cfg = consumer.cfg
        self.threads = cfg.consume_thread_max
        self.batch = cfg.consume_message_batch_max_size
        self.suspend_us = ms(min(max(cfg.suspend_current_queue_time_millis, SUSPEND_MIN_MS), SUSPEND_MAX_MS))
        self.max_reconsume_times = ORDERLY_MAX_RECONSUME_TIMES if cfg.max_reconsume_times < 0 \
            else cfg.max_reconsume_times
        self.failure_probability = failure_probability
        self.stream = self.node.env.rng.stream(f"{self.node.name}.listener")
        self._draw_us = consume_time.sampler_us(self.stream)  # listener times in µs
        self.send_back = SendBack(consumer, self.max_reconsume_times)
        self.init_pool()  # running: token → (pq, mq, msgs, begin_us); queue: (pq, mq)

    # --- submitConsumeRequest -------------------------------------------------------------------
    def submit(self, pq: Any, mq: Any, _msgs: Any) -> None:
        """submitConsumeRequest(msgs, pq, mq, dispatchToConsume): a request only when dispatched."""
        if pq.dispatch_to_consume():
            self.submit_request(pq, mq)

    def submit_request(self, pq: Any, mq: Any) -> None:
        if self.stopped or not self.node.up:
            return
        if self.busy < self.threads:
            self.busy += 1
            self._run(pq, mq)
        else:
            self.queue.append((pq, mq))

    def submit_later(self, pq: Any, mq: Any, delay_us: int) -> None:
        """submitConsumeRequestLater: a new request after `delay_us` (unless the node died meanwhile)."""
        epoch = self.node.epoch
        self.node.call_later(delay_us, self._resubmit, pq, mq, epoch)

    def _resubmit(self, pq: Any, mq: Any, epoch: int) -> None:
        if epoch == self.node.epoch and not pq.dropped:
            self.submit_request(pq, mq)

    def _release(self) -> None:
        """The thread's request returned: the next waiting request starts on it."""
        self.busy -= 1
        while self.queue and self.busy < self.threads:
            pq, mq = self.queue.popleft()
            if not pq.dropped:
                self.busy += 1
                self._run(pq, mq)
                return

    # --- ConsumeRequest.run -----------------------------------------------------------------------
    def _run(self, pq: Any, mq: Any) -> None:
        if pq.dropped or pq.busy_until_us >= 0:  # dropped; or another request holds the queue's monitor
            self._release()
            return
        if not self.consumer.broadcasting and (not pq.locked or pq.is_lock_expired(self.env._now)):
            self.cov[COV_ORDERLY_CONSUME_NEEDS_LOCK] += 1
            self._try_lock_later(pq, mq, ORDERLY_OUTER_RELOCK_DELAY_US)
            self._release()
            return
        self._loop(pq, mq, self.env._now)

    def _loop(self, pq: Any, mq: Any, begin_us: int) -> None:
        """One turn of the request's loop: check, take a batch, start the listener on it."""
        now = self.env._now
        if pq.dropped:
            return self._release()
        if not self.consumer.broadcasting and (not pq.locked or pq.is_lock_expired(now)):
            self.cov[COV_ORDERLY_CONSUME_NEEDS_LOCK] += 1
            self._try_lock_later(pq, mq, ORDERLY_RELOCK_DELAY_US)
            return self._release()
        if now - begin_us > MAX_TIME_CONSUME_CONTINUOUSLY_US:
            self.submit_later(pq, mq, ORDERLY_RELOCK_DELAY_US)
            return self._release()
        msgs = pq.take_messages(self.batch)
        if not msgs:
            return self._release()  # `consuming` is cleared: the next pull dispatches again
        ok = self.failure_probability == 0.0 or self.stream.random() >= self.failure_probability
        duration_us = self._draw_us()
        pq.busy_until_us = now + duration_us
        pq.consume_started_us = now
        token = next(self._tokens)
        self.running[token] = (pq, mq, msgs, begin_us)
        self.node.call_later(duration_us, self._done, token, ok)
        return None

    def _try_lock_later(self, pq: Any, mq: Any, delay_us: int) -> None:
        """tryLockLaterAndReconsume: lock the queue after `delay_us`; resubmit 10 ms after a
        granted lock, 3000 ms after a refused one."""
        epoch = self.node.epoch

        def relock() -> None:  # lockOneMQ: nothing once the service is stopped
            if epoch != self.node.epoch or pq.dropped or self.stopped:
                return
            self.consumer.locks.lock(mq, lambda ok: self.submit_later(
                pq, mq, ORDERLY_RELOCK_DELAY_US if ok else ORDERLY_LOCK_FAILED_DELAY_US))

        self.node.call_later(delay_us, relock)

    def _done(self, token: int, ok: bool) -> None:
        entry = self.running.pop(token, None)
        if entry is None:
            return  # interrupted by shutdown: its result was processed then
        pq, mq, msgs, begin_us = entry
        pq.busy_until_us = -1
        self._record(mq, msgs, ok)
        if self.stopping is None:
            self._process_result(pq, mq, msgs, ok, begin_us)
            return
        self._process_result(pq, mq, msgs, ok, None)  # a stopping pool takes no further batch
        self.busy -= 1
        if not self.running:
            self._drained()

    def _record(self, mq: Any, msgs: list[Any], ok: bool) -> None:
        for msg in msgs:
            self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id,
                            msg.topic if msg.props is None else msg.user_topic, mq.broker_name, mq.queue_id,
                            msg.queue_offset, ok, msg.reconsume_times)

    # --- processConsumeResult (autoCommit) --------------------------------------------------------
    def _process_result(self, pq: Any, mq: Any, msgs: list[Any], ok: bool, begin_us: int | None) -> None:
        """SUCCESS → commit; SUSPEND → checkReconsumeTimes. `begin_us` None: the thread is gone
        (an interrupted call at shutdown): nothing continues."""
        if ok:
            self._commit(pq, mq)
            if begin_us is not None:
                self._loop(pq, mq, begin_us)
            return
        suspend = False
        batch = []
        for msg in msgs:  # checkReconsumeTimes
            if msg.reconsume_times >= self.max_reconsume_times:
                self.send_back.send_as_normal(msg, lambda _ok: None)  # the DLQ path
                batch.append(msg)
            else:
                suspend = True
                batch.append(msg._replace(reconsume_times=msg.reconsume_times + 1))
        if not suspend:
            self._commit(pq, mq)
            if begin_us is not None:
                self._loop(pq, mq, begin_us)
            return
        self.cov[COV_ORDERLY_QUEUE_SUSPENDED] += 1
        pq.make_to_consume_again(batch)  # the whole batch, as Java does
        if begin_us is not None:
            self.submit_later(pq, mq, self.suspend_us)
            self._release()

    def _commit(self, pq: Any, mq: Any) -> None:
        offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update(mq, offset, increase_only=False)

    # --- shutdown (models/consumer/consume_pool.py) --------------------------------------------
    def _interrupted(self, call: tuple) -> None:
        """An interrupted call throws: SUSPEND, the batch stays uncommitted."""
        pq, mq, msgs, _begin = call
        self.busy -= 1
        pq.busy_until_us = -1
        self._record(mq, msgs, False)
        self._process_result(pq, mq, msgs, False, None)

    def _terminated(self, then: Any) -> None:
        """Then unlockAll (CLUSTERING), before the consumer persists its offsets."""
        if self.consumer.broadcasting:
            then()
        else:
            self.consumer.locks.unlock_all(then)
