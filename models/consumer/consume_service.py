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

from models.consumer.config import DEFAULT_MAX_RECONSUME_TIMES, LOCAL_RETRY_DELAY_US, SEND_BACK_TIMEOUT_US
from models.message import MessageExt
from models.protocol import SUCCESS, ConsumerSendMsgBack
from models.records import CONSUMER_CONSUMED, CONSUMER_SENT_BACK
from sim.node import CONNECT_FAILED
from sim.trace import DIGEST_CHUNK


class ConsumeService:
    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.group = consumer.group
        self.threads = consumer.cfg.consume_thread_max
        self.consume_time = consume_time
        self.failure_probability = failure_probability
        self.name = self.node.name
        self.env = self.node.env
        self._chunk = self.node._chunk
        self.offsets = consumer.offset_store.offsets  # RemoteBrokerOffsetStore's table (heap)
        self.stream = self.node.env.rng.stream(f"{self.node.name}.listener")
        self._time_block = consume_time.block_sampler(self.stream, 1000)  # consume times in µs, last first
        self._times: list[int] = []
        max_times = consumer.cfg.max_reconsume_times
        self.max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES if max_times < 0 else max_times
        self.busy = 0
        self.queue: deque = deque()
        self.node.on_crash(self._reset)

    def _reset(self) -> None:
        self.busy = 0
        self.queue.clear()

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """One ConsumeRequest per message: a free thread starts it, else it waits in the pool's queue."""
        for msg in msgs:
            if self.busy < self.threads:
                self._start(pq, mq, msg)
            else:
                self.queue.append((pq, mq, msg))

    def _start(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        """A thread runs the listener on `msg`: its verdict and duration are drawn now."""
        if pq.dropped:  # a ConsumeRequest on a dropped queue returns at once
            self._next()
            return
        self.busy += 1
        ok = self.failure_probability == 0.0 or self.stream.random() >= self.failure_probability
        draws = self._times
        self.node.call_later(draws.pop() if draws else self._refill(), self._done, pq, mq, msg, ok)

    def _refill(self) -> int:
        self._times += self._time_block()
        return self._times.pop()

    def _done(self, pq: Any, mq: Any, msg: MessageExt, ok: bool) -> None:
        """The listener returned: record the consumption, then processConsumeResult."""
        self.busy -= 1
        chunk = self._chunk
        chunk.append((self.env._now, self.name, CONSUMER_CONSUMED, self.group, msg.msg_id,
                      msg.topic if msg.props is None else msg.user_topic, mq.broker_name, mq.queue_id,
                      msg.queue_offset, ok, msg.reconsume_times))
        if len(chunk) >= DIGEST_CHUNK:
            self.node._flush()
        if not pq.dropped:
            if ok or self.consumer.broadcasting:
                self._commit(pq, mq, msg)
            else:
                self._send_back(pq, mq, msg)
        if self.queue and self.busy < self.threads:
            self._next()

    def _next(self) -> None:
        """Start the next queued request whose queue is not dropped (a loop, not recursion: a
        dropped queue can have thousands of requests waiting)."""
        queue = self.queue
        while queue and self.busy < self.threads:
            pq, mq, msg = queue.popleft()
            if not pq.dropped:
                self._start(pq, mq, msg)
                return

    def _commit(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        """removeMessage, then updateOffset(increaseOnly=true) of the returned offset."""
        offset = pq.remove(msg.queue_offset)
        if offset >= 0:
            offsets = self.offsets
            old = offsets.get(mq)
            if old is None or offset > old:
                offsets[mq] = offset

    def _send_back(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        addr = self.consumer.broker_addr(mq.broker_name)
        if addr is None:
            self._local_retry(pq, mq, msg)
            return
        origin = msg.topic if msg.props is None else msg.user_topic
        request = ConsumerSendMsgBack(self.group, msg.phys_offset, msg.msg_id, origin, 0, self.max_reconsume_times)
        self.node.rpc(addr, request, SEND_BACK_TIMEOUT_US, self._sent_back, pq, mq, msg)

    def _sent_back(self, pq: Any, mq: Any, msg: MessageExt, response: Any) -> None:
        ok = response is not None and response is not CONNECT_FAILED and response.code == SUCCESS
        self.node.trace(CONSUMER_SENT_BACK, self.group, msg.msg_id, msg.reconsume_times, ok)
        if pq.dropped:
            return
        if ok:
            self._commit(pq, mq, msg)
        else:
            self._local_retry(pq, mq, msg)

    def _local_retry(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        again = msg._replace(reconsume_times=msg.reconsume_times + 1)
        self.node.call_later(LOCAL_RETRY_DELAY_US, self.submit, pq, mq, [again])
