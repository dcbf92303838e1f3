"""ConsumeMessageConcurrentlyService with the application listener (consume time, failures).

A pool of `consumeThreadMax` threads with an unbounded FIFO task queue; each message is one
ConsumeRequest (`consumeMessageBatchMaxSize` = 1). The listener's time is drawn from
`consume_time_ms` and its verdict from `failure_probability` (RECONSUME_LATER).

Results: success → `removeMessage` and `updateOffset(increaseOnly)`. Failure in CLUSTERING →
`sendMessageBack` to the broker (retry topic, delay level 3 + reconsumeTimes); if that RPC
fails, the message stays cached (pinning the offset) and is re-consumed locally after 5 s.
BROADCASTING failures are dropped. A ProcessQueue dropped meanwhile discards the result (no
offset update, no send-back) — the listener did run, so the consumption is still recorded.

Simplified: the thread is released when the listener returns; the send-back RPC does not hold it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from models.broker.commit_log import R_MSG, R_QOFF
from models.consumer.config import DEFAULT_MAX_RECONSUME_TIMES, LOCAL_RETRY_DELAY_US, SEND_BACK_TIMEOUT_US
from models.protocol import SUCCESS, ConsumerSendMsgBack
from models.records import CONSUMER_CONSUMED, CONSUMER_SENT_BACK
from sim.node import CONNECT_FAILED


class ConsumeService:
    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.group = consumer.group
        self.threads = consumer.cfg.consume_thread_max
        self.consume_time = consume_time
        self.failure_probability = failure_probability
        self.stream = self.node.env.rng.stream(f"{self.node.name}.listener")
        self.consume_time_us = consume_time.sampler_us(self.stream)
        max_times = consumer.cfg.max_reconsume_times
        self.max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES if max_times < 0 else max_times
        self.busy = 0
        self.queue: deque = deque()
        self.node.on_crash(self._reset)

    def _reset(self) -> None:
        self.busy = 0
        self.queue.clear()

    def submit(self, pq: Any, mq: Any, records: list[tuple]) -> None:
        queue = self.queue
        for record in records:
            if self.busy < self.threads:
                self._start(pq, mq, record)
            else:
                queue.append((pq, mq, record))

    def _start(self, pq: Any, mq: Any, record: tuple) -> None:
        if pq.dropped:  # a ConsumeRequest on a dropped queue returns at once
            self._next()
            return
        self.busy += 1
        stream = self.stream
        ok = self.failure_probability == 0.0 or stream.random() >= self.failure_probability
        self.node.call_later(self.consume_time_us(), self._done, pq, mq, record, ok)

    def _done(self, pq: Any, mq: Any, record: tuple, ok: bool) -> None:
        self.busy -= 1
        msg = record[R_MSG]
        self.node._emit(self.node.name, CONSUMER_CONSUMED, self.group, msg.uniq_key, msg.user_topic,
                        mq.broker_name, mq.queue_id, record[R_QOFF], ok, msg.reconsume_times)
        if not pq.dropped:
            if ok or self.consumer.broadcasting:
                self._commit(pq, mq, record)
            else:
                self._send_back(pq, mq, record)
        self._next()

    def _next(self) -> None:
        if self.queue and self.busy < self.threads:
            self._start(*self.queue.popleft())

    def _commit(self, pq: Any, mq: Any, record: tuple) -> None:
        offset = pq.remove(record[R_QOFF])
        if offset >= 0:
            self.consumer.offset_store.update(mq, offset, increase_only=True)

    def _send_back(self, pq: Any, mq: Any, record: tuple) -> None:
        addr = self.consumer.broker_addr(mq.broker_name)
        msg = record[R_MSG]
        if addr is None:
            self._local_retry(pq, mq, record)
            return
        request = ConsumerSendMsgBack(self.group, msg, 0, self.max_reconsume_times)

        def on_reply(response: Any) -> None:
            ok = response is not None and response is not CONNECT_FAILED and response.code == SUCCESS
            self.node.trace(CONSUMER_SENT_BACK, self.group, msg.uniq_key, msg.reconsume_times, ok)
            if pq.dropped:
                return
            if ok:
                self._commit(pq, mq, record)
            else:
                self._local_retry(pq, mq, record)

        self.node.rpc(addr, request, SEND_BACK_TIMEOUT_US, on_reply)

    def _local_retry(self, pq: Any, mq: Any, record: tuple) -> None:
        msg = record[R_MSG]
        again = record[:R_MSG] + (msg._replace(reconsume_times=msg.reconsume_times + 1),) + record[R_MSG + 1:]
        self.node.call_later(LOCAL_RETRY_DELAY_US, self.submit, pq, mq, [again])
