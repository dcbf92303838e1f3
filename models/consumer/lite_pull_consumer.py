"""client.consumer.DefaultLitePullConsumer in subscribe mode (5.3.3): the application polls.

What differs from the push consumer (push_consumer.py, whose rebalance, pull loop, offset store
and ownership records it shares):

- the application has one thread that calls `poll()` and processes what it returns, message by
  message (`consume_time_ms` each), then polls again; `poll()` hands over one ConsumeRequest of
  the cache — the messages of one pull, at most `pullBatchSize` (10) — in pull order, skipping
  those of queues dropped meanwhile;
- offsets: `poll()` sets each queue's consume offset to past the messages it returns, and commits
  (commitAll: into the offset store, in memory) only at the start of a poll at or after
  `nextAutoCommitDeadline`, every `autoCommitIntervalMillis` (5 s) — so what is committed is what
  earlier polls returned, which the application has processed; the client instance persists the
  store to the brokers every 5 s (persistConsumerOffsetInterval). A crash therefore re-delivers up
  to one auto-commit interval plus one persist interval of messages to the queue's next owner:
  the duplicate causes are the push consumer's (`consumer_crash`, `rebalance`), the mechanism —
  offsets committed late — being the same, only the window longer;
- OFFSET_ILLEGAL moves the pull offset only (no drop, no commit);
- no listener status: nothing is sent back (failure_probability must be 0: an application that
  handles a failure does so itself).

Simplified: assign mode and seek are not modelled (subscribe with rebalance only); the pull loop is
the push consumer's (long polling, flow control at pullThresholdForQueue), and its pulls carry the
committed offset as the push consumer's do (the lite pull client leaves that flag off: the broker
learns the offset with the next 5 s persist instead).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from models.consumer.config import LitePullSpec
from models.consumer.consume_service import ConsumeService
from models.consumer.push_consumer import PushConsumer
from models.records import CONSUMER_CONSUMED, CONSUMER_OFFSET_MOVED

POLL_TIMEOUT_US = 5_000_000  # DefaultLitePullConsumer.pollTimeoutMillis


class LitePullConsumeService(ConsumeService):
    """The application thread's poll loop over the consumeRequestCache (module docstring)."""

    def __init__(self, consumer: LitePullConsumer, consume_time: Any, failure_probability: float) -> None:
        super().__init__(consumer, consume_time, failure_probability)
        self.threads = 1
        self.cache: deque = deque()  # consumeRequestCache: (pq, mq, msgs) per pull
        self.consume_offsets: dict[Any, int] = {}  # assignedMessageQueue's consume offsets (heap)
        self.auto_commit = consumer.lite.auto_commit
        self.auto_commit_interval_us = consumer.lite.auto_commit_interval_ms * 1000
        self.next_commit_us: float = 0  # nextAutoCommitDeadline (auto_commit_interval_ms is a float)
        self.idle: Any = None  # the timer of a poll() blocked on an empty cache
        self.node.on_crash(self._lose)

    def _lose(self) -> None:
        self.cache.clear()
        self.consume_offsets.clear()
        self.next_commit_us = 0
        self.idle = None

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """PullTaskImpl: the pulled messages become one ConsumeRequest in the cache."""
        if self.stopping is not None or self.stopped:
            return
        self.cache.append((pq, mq, list(msgs)))
        if not self.busy:
            if self.idle is not None:  # the blocked poll() returns with it
                self.idle.cancel()
                self.idle = None
            self._poll()

    def _poll(self) -> None:
        """DefaultLitePullConsumerImpl.poll: maybe auto-commit, then the next request; with none,
        poll() blocks up to pollTimeoutMillis (5 s), returns empty, and the application polls
        again (so an idle consumer still commits)."""
        self.idle = None
        if self.stopped:  # shut down: the application polls no more
            return
        now = self.clock.now_us
        if self.auto_commit and now >= self.next_commit_us:
            if self.next_commit_us:
                self._commit_all()
            self.next_commit_us = now + self.auto_commit_interval_us
        while self.cache:
            pq, mq, msgs = self.cache.popleft()
            if pq.dropped:
                continue
            self.consume_offsets[mq] = msgs[-1].queue_offset + 1
            self.busy = 1
            duration_us = 0
            for _ in msgs:
                draws = self._times
                duration_us += draws.pop() if draws else self._refill()
            self.node.call_later(duration_us, self._done, pq, mq, msgs, True)
            return
        if self.stopping is None:
            self.idle = self.node.timer(POLL_TIMEOUT_US, self._poll)

    def _commit_all(self) -> None:
        """commitAll: each assigned queue's consume offset into the offset store (in memory)."""
        offsets = self.offsets
        for mq, offset in self.consume_offsets.items():
            pq = self.consumer.process_queues.get(mq)
            if pq is not None and not pq.dropped and offset > offsets.get(mq, -1):
                offsets[mq] = offset

    def _done(self, pq: Any, mq: Any, msgs: Any, ok: bool) -> None:
        """The application processed the messages poll() returned: record them, poll again."""
        if self._cut and self._was_cut(msgs):
            return
        self.busy = 0
        for msg in msgs:
            self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id, msg.user_topic, mq.broker_name,
                            mq.queue_id, msg.queue_offset, True, msg.reconsume_times)
            pq.remove(msg.queue_offset)  # out of the cache; the offset waits for the auto-commit
        if self.stopping is not None:
            self._drained()
            return
        self._poll()

    def _interrupted(self, call: tuple) -> None:
        """Shutdown interrupts the application's processing: its messages count as not consumed."""
        _pq, _mq, msgs, _ok = call
        self.busy = 0
        self._cut.append(msgs)


class LitePullConsumer(PushConsumer):
    """DefaultLitePullConsumer (subscribe mode): the push consumer's machinery, polled."""

    consume_service_class = LitePullConsumeService
    consume: LitePullConsumeService  # built by PushConsumer from consume_service_class

    def __init__(self, *args: Any, lite: LitePullSpec, **kwargs: Any) -> None:
        self.lite = lite  # the scenario's LitePullSpec (auto commit)
        super().__init__(*args, **kwargs)

    def correct_tags_offset(self, mq: Any, pq: Any) -> None:
        """NO_NEW_MSG / NO_MATCHED_MSG: only the pull offset moves (no commit, unlike push)."""

    def _offset_illegal(self, mq: Any, pq: Any, next_offset: int) -> None:
        """OFFSET_ILLEGAL: DefaultLitePullConsumerImpl only logs it and moves the pull offset (4.9.8
        and 5.3.3 alike); the queue is not dropped and nothing is committed."""
        self.node.trace(CONSUMER_OFFSET_MOVED, self.group, mq.broker_name, mq.queue_id, pq.next_offset, next_offset)
        pq.next_offset = next_offset
        self.pull_later(mq, pq, 0)

    def drop_queue(self, mq: Any, pq: Any, reason: str = "rebalance") -> bool:
        """The push consumer's drop; the queue's consume offset goes with it (a later owner of the
        queue in this client starts from the committed one)."""
        self.consume.consume_offsets.pop(mq, None)
        return super().drop_queue(mq, pq, reason)
