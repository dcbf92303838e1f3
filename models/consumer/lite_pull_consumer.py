"""client.consumer.DefaultLitePullConsumer in subscribe mode (DefaultLitePullConsumerImpl, 5.3.3; 4.9.8 alike).

The application polls. It shares the push consumer's rebalance, offset store, client instance and
ownership records (push_consumer.py); what it does differently, each with the Java method:

- `subscribe(topic, expr)`: only the topic is subscribed — no `%RETRY%<group>` (there is no
  send-back), so the heartbeat names the topic alone and no retry queue is ever owned.
- `start()` fetches the routes but, unlike the push consumer, neither heartbeats nor rebalances at
  once: the first rebalance follows the first scheduled heartbeat (1 s), when the broker's
  NOTIFY_CONSUMER_IDS_CHANGED wakes the RebalanceService.
- Rebalance (RebalanceLitePullImpl, CONSUME_ACTIVELY): a new queue's PullTaskImpl is scheduled at
  once (`startPullTask`: delay 0, not the push consumer's 500 ms); a queue whose pulls stalled is
  never dropped as pull-expired (`updateProcessQueueTableInRebalance` drops only CONSUME_PASSIVELY
  ones); a removed queue is persisted and forgotten (`removeUnnecessaryMessageQueue`) and its
  AssignedMessageQueue state goes with it, consume offset included: what the application polled
  since the last auto-commit is re-delivered to the queue's next owner. ConsumeRequests of a dropped
  queue stay in the cache (they still count for flow control) and poll() skips them.
- The pull thread model (PullTaskImpl.run): one task per owned queue on a ScheduledThreadPoolExecutor
  of `pullThreadNums` (20) threads. A due task waits for a free thread; on it, flow control first:
  `consumeRequestCache.size() × pullBatchSize > pullThresholdForAll` (10000), then the queue's
  cached count > pullThresholdForQueue (1000), MiB > pullThresholdSizeForQueue (100), span >
  consumeMaxSpan (2000) → again in 50 ms. Else a *synchronous* pull of `pullBatchSize` (10)
  messages, long-polled `brokerSuspendMaxTimeMillis` (20 s; the push consumer's is 15 s), RPC
  timeout `consumerTimeoutMillisWhenSuspend` (30 s), holding its thread until the answer — so a
  client owning more than 20 queues of an idle topic pulls 20 of them at a time. The pull's
  sysflag leaves FLAG_COMMIT_OFFSET off: the broker learns the group's offsets only from the 5 s
  persist (and a dropped queue's persist). FOUND → the (tag-filtered) messages go into the
  ProcessQueue and, as one ConsumeRequest, into the cache; OFFSET_ILLEGAL only moves the pull
  offset (no drop, no commit); NO_NEW_MSG / NO_MATCHED_MSG commit nothing (no correctTagsOffset);
  then the task is due again at once (DefaultLitePullConsumer has no pullInterval: a scenario's
  `client.pull_interval_ms` is ignored); an exception → `pullTimeDelayMillsWhenException` (1 s).
- `poll(pollTimeoutMillis = 5 s)`, called by the application's one thread at start-up and again
  after it has processed what the last poll returned (message by message, `consume_time_ms`
  each): first `maybeAutoCommit` — at or after `nextAutoCommitDeadline` (−1 at start: the first
  poll after every start commits), `commitAll` then deadline = now + `autoCommitIntervalMillis`
  (5 s) — so commits happen only at the start of a poll() call, never while one is blocked, and
  their cadence restarts with the process; then the first ConsumeRequest of a queue not dropped:
  its messages leave the ProcessQueue (`removeMessage`) and the queue's consume offset becomes
  what removeMessage returns (the smallest offset still cached, else one past the highest
  fetched). With none, poll() blocks until one arrives or the timeout passes (then returns empty
  and the application polls again, so an idle consumer still commits every 5 s).
- `commitAll`: every assigned queue whose consume offset is known and whose ProcessQueue is not
  dropped gets `updateOffset(offset, increaseOnly=false)` — a consume offset that went back (a
  server-side offset reset answered by OFFSET_ILLEGAL) is committed as it is.
- RESET_CONSUMER_CLIENT_OFFSET is ignored (MQClientInstance.resetOffset acts only on a
  DefaultMQPushConsumerImpl).

A crash therefore re-delivers to the queue's next owner up to one auto-commit interval plus one
persist interval of messages: the duplicate causes are the push consumer's (`consumer_crash`,
`rebalance`), the mechanism — offsets committed late — being the same, only the window longer.

Simplified: assign mode, seek, pause/resume and the application's own commit calls are not
modelled (a scenario cannot express them); auto_commit false commits nothing. A PullTaskImpl's
first run re-reads the offset (`nextPullOffset` → computePullFromWhere, memory first): the model
starts from the offset the rebalance read. The broker's separate LITE_PULL_MESSAGE executor and
its FLOW_CONTROL answer (retried in 20 ms) are not modelled. `shutdown` is the push consumer's
(the application's call in progress is interrupted; Java's lets it finish, uncommitted). No
listener status: nothing is sent back (failure_probability must be 0).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from models.consumer.config import (
    CONSUMER_TIMEOUT_WHEN_SUSPEND_US,
    PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL_US,
    LitePullSpec,
)
from models.consumer.consume_batch import remove_message
from models.consumer.consume_service import ConsumeService
from models.consumer.push_consumer import MIB, PushConsumer
from models.coverage_points import COV_OFFSET_ILLEGAL_CORRECTED, COV_PULL_FLOW_CONTROLLED
from models.message import retry_topic
from models.protocol import (
    PULL_NOT_FOUND,
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    SUCCESS,
    ResetConsumerClientOffset,
    new_pull_message,
)
from models.records import CONSUMER_CONSUMED, CONSUMER_OFFSET_MOVED
from sim.env import ms
from sim.node import CONNECT_FAILED

POLL_TIMEOUT_US = 5_000_000  # DefaultLitePullConsumer.pollTimeoutMillis
LITE_BROKER_SUSPEND_MAX_TIME_US = 20_000_000  # DefaultLitePullConsumer.brokerSuspendMaxTimeMillis
PULL_THREAD_NUMS = 20  # DefaultLitePullConsumer.pullThreadNums
PULL_THRESHOLD_FOR_ALL = 10_000  # DefaultLitePullConsumer.pullThresholdForAll (messages)
NO_DEADLINE_US = -1  # DefaultLitePullConsumerImpl.nextAutoCommitDeadline before the first poll


class LitePullConsumeService(ConsumeService):
    """The application's thread, poll() and the consumeRequestCache (module docstring)."""

    def __init__(self, consumer: LitePullConsumer, consume_time: Any, failure_probability: float) -> None:
        super().__init__(consumer, consume_time, failure_probability)
        self.threads = 1
        self.cache: deque = deque()  # consumeRequestCache: (pq, mq, msgs) per pull
        self.consume_offsets: dict[Any, int] = {}  # AssignedMessageQueue's consume offsets (heap)
        self.auto_commit = consumer.lite.auto_commit
        self.auto_commit_interval_us = ms(consumer.lite.auto_commit_interval_ms)
        self.next_auto_commit_deadline_us = NO_DEADLINE_US
        self.blocked: Any = None  # the timeout of a poll() blocked on an empty cache
        self.node.on_crash(self._lose)

    def _lose(self) -> None:
        self.cache.clear()
        self.consume_offsets.clear()
        self.next_auto_commit_deadline_us = NO_DEADLINE_US
        self.blocked = None

    # --- the application's poll() ---------------------------------------------------------------
    def poll(self) -> None:
        """DefaultLitePullConsumerImpl.poll(pollTimeoutMillis): maybeAutoCommit, then the next
        request, else block until one comes or the timeout passes."""
        if self.stopped or self.stopping is not None:  # shut down: the application polls no more
            return
        if self.auto_commit:
            self._maybe_auto_commit()
        if not self._take():
            self.blocked = self.node.timer(POLL_TIMEOUT_US, self._poll_timed_out)

    def _maybe_auto_commit(self) -> None:
        """maybeAutoCommit: commitAll at or after the deadline, which then moves to now + interval."""
        now = self.clock.now_us
        if now >= self.next_auto_commit_deadline_us:
            self._commit_all()
            self.next_auto_commit_deadline_us = now + self.auto_commit_interval_us

    def _commit_all(self) -> None:
        """commitAll → commit(mq): each assigned queue's known consume offset, its ProcessQueue not
        dropped, into the offset store (updateOffset, increaseOnly=false; in memory)."""
        store = self.consumer.offset_store
        for mq, pq in self.consumer.process_queues.items():
            offset = self.consume_offsets.get(mq, -1)
            if offset != -1 and not pq.dropped:
                store.update(mq, offset, increase_only=False)

    def _poll_timed_out(self) -> None:
        """poll() returned empty; the application polls again at once."""
        self.blocked = None
        self.poll()

    def _take(self) -> bool:
        """consumeRequestCache.poll: the first request whose queue is not dropped, handed over."""
        cache = self.cache
        while cache:
            pq, mq, msgs = cache.popleft()
            if not pq.dropped:
                self._hand_over(pq, mq, msgs)
                return True
        return False

    def _hand_over(self, pq: Any, mq: Any, msgs: list) -> None:
        """poll() returns `msgs`: removeMessage sets the consume offset; the application processes them."""
        self.consume_offsets[mq] = remove_message(pq, msgs)
        self.busy = 1
        duration_us = 0
        for _ in msgs:
            draws = self._times
            duration_us += draws.pop() if draws else self._refill()
        self.node.call_later(duration_us, self._done, pq, mq, msgs, True)

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """PullTaskImpl.submitConsumeRequest: one ConsumeRequest into the cache; a blocked poll()
        returns with it (no auto-commit check: that ran when the poll began)."""
        if self.stopping is not None or self.stopped:
            return
        self.cache.append((pq, mq, msgs))
        if self.blocked is not None and self._take():
            self.blocked.cancel()
            self.blocked = None

    def _done(self, pq: Any, mq: Any, msgs: Any, ok: bool) -> None:
        """The application processed what poll() returned: record it, poll again."""
        if self._cut and self._was_cut(msgs):
            return
        self.busy = 0
        for msg in msgs:
            self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id, msg.user_topic, mq.broker_name,
                            mq.queue_id, msg.queue_offset, True, msg.reconsume_times)
        if self.stopping is not None:
            self._drained()
            return
        self.poll()

    def _interrupted(self, call: tuple) -> None:
        """Shutdown interrupts the application's processing: its messages count as not consumed."""
        _pq, _mq, msgs, _ok = call
        self.busy = 0
        self._cut.append(msgs)


class LitePullConsumer(PushConsumer):
    """DefaultLitePullConsumer (subscribe mode): the push consumer's rebalance and offsets, its own
    pull tasks and the application's poll loop (module docstring)."""

    consume_service_class = LitePullConsumeService
    consume: LitePullConsumeService  # built by PushConsumer from consume_service_class

    def __init__(self, *args: Any, lite: LitePullSpec, **kwargs: Any) -> None:
        self.lite = lite  # the scenario's LitePullSpec (auto commit)
        super().__init__(*args, **kwargs)
        retry = retry_topic(self.group)  # subscribe() adds no %RETRY% subscription
        self.subscriptions.pop(retry, None)
        self.tag_codes.pop(retry, None)
        self.rebalancer.new_pull_delay_us = 0  # startPullTask: scheduledThreadPoolExecutor.schedule(task, 0)
        self.pull_threads_free = PULL_THREAD_NUMS
        self.pull_tasks_waiting: deque = deque()  # due PullTaskImpls waiting for a pull thread, in due order
        self.node.handle(ResetConsumerClientOffset, lambda src, rid, req: None)  # not a push consumer
        self.node.on_crash(self._lose_pull_threads)
        self.node.on_start(lambda: self.consume.poll())  # the application polls once start() returns

    def _route_fetched(self, _known: bool) -> None:
        """start() → operateAfterRunning: the subscriptions' routes only. Unlike the push consumer's
        start(), no heartbeat and no rebalanceImmediately: the first rebalance waits for the client
        instance's first scheduled heartbeat (1 s), whose registration makes the broker send
        NOTIFY_CONSUMER_IDS_CHANGED (or for the 20 s timer)."""

    def _lose_pull_threads(self) -> None:
        self.pull_threads_free = PULL_THREAD_NUMS
        self.pull_tasks_waiting.clear()

    def drop_queue(self, mq: Any, pq: Any, reason: str = "rebalance") -> bool:
        """removeUnnecessaryMessageQueue (persist, forget the offset) and the AssignedMessageQueue
        state with its consume offset. A pull-expired queue is kept: RebalanceImpl drops those only
        for CONSUME_PASSIVELY consumers."""
        if reason == "pull_expired":
            return False
        self.consume.consume_offsets.pop(mq, None)
        return super().drop_queue(mq, pq, reason)

    # --- PullTaskImpl on the pull thread pool -----------------------------------------------------
    def pull(self, mq: Any, pq: Any) -> None:
        """A queue's PullTaskImpl is due: it runs on a free pull thread, else waits for one."""
        if pq.dropped:  # cancelled with its queue
            return
        if self.pull_threads_free:
            self._run_pull_task(mq, pq)
        else:
            self.pull_tasks_waiting.append((mq, pq))

    def _run_pull_task(self, mq: Any, pq: Any) -> None:
        """PullTaskImpl.run: flow control, then a synchronous pull that holds the thread."""
        pq.last_pull_us = self.clock.now_us
        if self._lite_flow_controlled(pq):
            self.cov[COV_PULL_FLOW_CONTROLLED] += 1
            self.pull_later(mq, pq, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL_US)
            return
        addr = self.client.subscribe_addr.get(mq.broker_name)
        if addr is not None and self._slave_reads:
            target = self.pull_api.target(mq)
            addr = None if target is None else target[0]
        if addr is None:
            self._pull_failed(mq, pq, "no_broker_address")
            return
        request = new_pull_message((self.group, mq.topic, mq.queue_id, pq.next_offset, self._pull_batch_size,
                                    -1, LITE_BROKER_SUSPEND_MAX_TIME_US, self.tag_codes.get(mq.topic)))
        self.pull_threads_free -= 1
        self.node.rpc(addr, request, CONSUMER_TIMEOUT_WHEN_SUSPEND_US, self._on_pull_bound, mq, pq)

    def _lite_flow_controlled(self, pq: Any) -> bool:
        """pullThresholdForAll over the cache, then the queue's count, size (MiB) and span."""
        if len(self.consume.cache) * self._pull_batch_size > PULL_THRESHOLD_FOR_ALL:
            return True
        max_count, max_mib, max_span = self._flow_limits
        return len(pq.msgs) > max_count or pq.msg_size_bytes // MIB > max_mib or pq.max_span() > max_span

    def _on_pull(self, mq: Any, pq: Any, response: Any) -> None:
        """The synchronous pull returned: handle its result, then the thread is free again."""
        self._pull_result(mq, pq, response)
        self.pull_threads_free += 1
        waiting = self.pull_tasks_waiting
        while waiting and self.pull_threads_free:
            next_mq, next_pq = waiting.popleft()
            if not next_pq.dropped:
                self._run_pull_task(next_mq, next_pq)

    def _pull_result(self, mq: Any, pq: Any, response: Any) -> None:
        if pq.dropped:  # cancelled meanwhile: the result is dropped, the task not rescheduled
            return
        if response is None or response is CONNECT_FAILED:
            self._pull_failed(mq, pq, "timeout" if response is None else "connect_failed")
            return
        code, next_begin_offset, _min, _max, found, suggest_which_broker_id = response
        if self._slave_reads and code in (SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED):
            self.pull_api.update(mq, suggest_which_broker_id)
        if code == SUCCESS:
            tags = self.subscriptions.get(mq.topic)
            msgs = list(found) if tags is None else [m for m in found if m.tags in tags]
            if msgs:
                pq.put(msgs)
                self.consume.submit(pq, mq, msgs)
        elif code == PULL_OFFSET_MOVED:  # DefaultLitePullConsumerImpl only logs it (4.9.8 and 5.3.3)
            self.cov[COV_OFFSET_ILLEGAL_CORRECTED] += 1
            self.node.trace(CONSUMER_OFFSET_MOVED, self.group, mq.broker_name, mq.queue_id, pq.next_offset,
                            next_begin_offset)
        elif code not in (PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY):
            self._pull_failed(mq, pq, f"code_{code}")
            return
        pq.next_offset = next_begin_offset  # updatePullOffset
        self.pull_later(mq, pq, 0)
