"""ConsumeMessageConcurrentlyService with the application listener (consume time, failures).

A pool of `consumeThreadMax` threads with an unbounded FIFO task queue; each message is one
ConsumeRequest (`consumeMessageBatchMaxSize` = 1; larger batches: consume_batch.py). The listener's time is drawn from
`consume_time_ms` and its verdict from `failure_probability` (RECONSUME_LATER).

Results: success → `removeMessage` and `updateOffset(increaseOnly)`. Failure in CLUSTERING →
`sendMessageBack` (models/consumer/send_back.py: the broker's CONSUMER_SEND_MSG_BACK, else the
inner producer's send to `%RETRY%<group>`); if both fail, the message stays cached (pinning the
offset) and is re-consumed locally after 5 s. BROADCASTING failures are dropped.
cleanExpiredMsg (every `consumeTimeout`, 15 min) sends back cached messages whose listener call
has run longer than consumeTimeout and takes them out of the cache; if that call then fails, 5.x
skips the message (`containsMessage`: no longer cached), 4.9.8 sends it back again. A ProcessQueue dropped meanwhile discards the result (no
offset update, no send-back) — the listener did run, so the consumption is still recorded.

Simplified: the thread is released when the listener returns; the send-back RPC does not hold it.
"""

# compiled with Cython: the C declarations of this module's classes are in consume_service.pxd beside it

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import cython

from models.consumer.config import (
    CLEAN_EXPIRED_MAX_PER_ROUND,
    DEFAULT_MAX_RECONSUME_TIMES,
    EXPIRED_SEND_BACK_DELAY_LEVEL,
    LOCAL_RETRY_DELAY_US,
)
from models.consumer.consume_pool import ConsumePool
from models.consumer.process_queue import ProcessQueue
from models.consumer.send_back import SendBack
from models.coverage_points import COV_CONSUME_FAILURE_SENT_BACK, COV_SEND_BACK_FAILED_LOCAL_RETRY
from models.message import MessageExt
from models.records import CONSUMER_CONSUMED, CONSUMER_EXPIRED_CLEANED
from sim.env import Clock
from sim.trace import DIGEST_CHUNK


class ConsumeService(ConsumePool):
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_chunk", "_cut", "_done_bound", "_time_block", "_times", "clock", "consume_time", "cov",
                 "consume_timeout_us", "consumer", "env", "failure_probability", "group", "max_reconsume_times",
                 "name", "node", "offsets", "send_back", "stream", "threads")

    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.group = consumer.group
        self.threads = consumer.cfg.consume_thread_max
        self.consume_time = consume_time
        self.failure_probability = failure_probability
        self.name = self.node.name
        self.env = self.node.env
        self.clock: Clock = self.env.clock
        self.cov: list[int] = self.env.coverage  # rare-state counts (models/coverage_points.py)
        self._chunk = self.node._chunk
        # bound once: reading a method off `self` makes a new bound-method object each time
        self._done_bound = self._done
        self.offsets = consumer.offset_store.offsets  # RemoteBrokerOffsetStore's table (heap)
        self.stream = self.node.env.rng.stream(f"{self.node.name}.listener")
        self._time_block = consume_time.block_sampler(self.stream, 1000)  # consume times in µs, last first
        self._times: list[int] = []
        max_times = consumer.cfg.max_reconsume_times
        self.max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES if max_times < 0 else max_times
        self.send_back = SendBack(consumer, self.max_reconsume_times)
        self.consume_timeout_us = consumer.cfg.consume_timeout_min * 60_000_000
        self.node.add_service(self.clean_expired_loop)
        self.init_pool()
        self._cut: list[MessageExt] = []  # messages of calls interrupted at shutdown whose timers are still due

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """One ConsumeRequest per message: a free thread starts it, else it waits in the pool's queue.
        A pool shutting down rejects it (the 5 s resubmission falls after the process exit)."""
        if self.stopping is not None:
            return
        for msg in msgs:
            if self.busy < self.threads:
                self._start(pq, mq, msg)
            else:
                self.queue.append((pq, mq, msg))

    @cython.ccall
    @cython.locals(pq=ProcessQueue)
    def _start(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        """A thread runs the listener on `msg`: its verdict and duration are drawn now."""
        if pq.dropped:  # a ConsumeRequest on a dropped queue returns at once
            self._next()
            return
        self.busy += 1
        ok = self.failure_probability == 0.0 or self.stream.random() >= self.failure_probability
        draws = self._times
        duration_us = draws.pop() if draws else self._refill()
        if duration_us > self.consume_timeout_us:  # cleanExpiredMsg will see this one
            if pq.long_consuming is None:
                pq.long_consuming = {}
            pq.long_consuming[msg.queue_offset] = self.clock.now_us
        elif pq.long_consuming:
            pq.long_consuming.pop(msg.queue_offset, None)
        self.node.call_later(duration_us, self._done_bound, pq, mq, msg, ok)  # no registry: see _take_running

    def _refill(self) -> int:
        self._times += self._time_block()
        return self._times.pop()

    @cython.locals(pq=ProcessQueue)
    def _done(self, pq: Any, mq: Any, msg: MessageExt, ok: bool) -> None:
        """The listener returned: record the consumption, then processConsumeResult (commit or
        send back). The message and queue are unpacked once (a field of an unpacking costs a few
        instructions, a NamedTuple field read tens), and this runs once per consumed message."""
        if self._cut and self._was_cut(msg):
            return  # interrupted by shutdown: its result was processed then
        self.busy -= 1
        # NamedTuples cast to tuple: unpacked in C when compiled (see Broker.process_send)
        msg_id, topic, _qid, queue_offset, _phys, _size, _store, _tags, reconsume_times, _body, props = (
            cython.cast(tuple, msg) if cython.compiled else msg)
        _topic, broker_name, queue_id = cython.cast(tuple, mq) if cython.compiled else mq
        chunk = self._chunk
        chunk.append((self.clock.now_us, self.name, CONSUMER_CONSUMED, self.group, msg_id,
                      topic if props is None else msg.user_topic, broker_name, queue_id,
                      queue_offset, ok, reconsume_times))
        if len(chunk) >= DIGEST_CHUNK:
            self.node._flush()
        if not pq.dropped:
            if ok or self.consumer.broadcasting:
                self._commit_offset(pq, mq, queue_offset)
            else:
                self.cov[COV_CONSUME_FAILURE_SENT_BACK] += 1
                self._send_back(pq, mq, msg)
        if self.queue and self.busy < self.threads:
            self._next()
        if self.stopping is not None and not self.busy:
            self._drained()

    @cython.ccall
    @cython.locals(pq=ProcessQueue)
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
        self._commit_offset(pq, mq, msg.queue_offset)

    @cython.ccall
    @cython.locals(pq=ProcessQueue)
    def _commit_offset(self, pq: Any, mq: Any, queue_offset: int) -> None:
        """removeMessage(queue_offset), then updateOffset(increaseOnly=true) of the returned offset."""
        offset = pq.remove(queue_offset)
        if offset >= 0:
            offsets = self.offsets
            old = offsets.get(mq)
            if old is None or offset > old:
                offsets[mq] = offset

    def _send_back(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        """processConsumeResult (CLUSTERING) for a failed message. 5.3.3 first asks
        `ProcessQueue.containsMessage` (by queue offset): a message no longer cached — cleanExpiredMsg
        sent it back and took it out meanwhile — is not sent back again, only removed and its offset
        stored. 4.9.8 has no such check: it sends the message back a second time (another retry
        copy), and if that send-back fails re-consumes it locally 5 s later."""
        if not self.consumer.v4 and msg.queue_offset not in pq.msgs:
            self._commit(pq, mq, msg)
            return
        self.send_back.send(mq, msg, 0, lambda ok: self._sent_back(pq, mq, msg, ok))

    def _sent_back(self, pq: Any, mq: Any, msg: MessageExt, ok: bool) -> None:
        if pq.dropped:
            return
        if ok:
            self._commit(pq, mq, msg)
        else:
            self.cov[COV_SEND_BACK_FAILED_LOCAL_RETRY] += 1
            self._local_retry(pq, mq, msg)

    def _local_retry(self, pq: Any, mq: Any, msg: MessageExt) -> None:
        again = msg._replace(reconsume_times=msg.reconsume_times + 1)
        self.node.call_later(LOCAL_RETRY_DELAY_US, self.submit, pq, mq, [again])

    # --- shutdown (models/consumer/consume_pool.py) ------------------------------------------
    def _reset(self) -> None:
        super()._reset()
        self._cut.clear()

    def _calls_left(self) -> bool:
        return self.busy > 0  # a thread is busy exactly while its listener call runs

    def _take_running(self) -> list[tuple]:
        """The calls in progress are the `_done` timers still due (no per-call registry on the hot path)."""
        return self.node.pending_calls(self._done)

    def _interrupted(self, call: tuple) -> None:
        """An interrupted call throws: RECONSUME_LATER, sent back while its offset stays
        uncommitted (the #7182 pattern). Its timer, still due, is then ignored (`_cut`)."""
        pq, mq, msg, _ok = call
        self._done(pq, mq, msg, False)
        self._cut.append(msg)

    def _was_cut(self, msg: MessageExt) -> bool:
        """Whether this `_done` belongs to a call interrupted at shutdown (then forget it). By
        identity: the same message may be consumed again meanwhile, as an equal object; at most
        consumeThreadMax calls are ever cut at once, so a scan is cheap."""
        for i, cut in enumerate(self._cut):
            if cut is msg:
                del self._cut[i]
                return True
        return False

    # --- cleanExpiredMsg ------------------------------------------------------------------------
    def clean_expired_loop(self) -> Generator[Any, Any, None]:
        """Every consumeTimeout (first after one): ProcessQueue.cleanExpiredMsg on every queue."""
        period_us = self.consume_timeout_us
        while True:
            yield self.node.sleep_us(period_us)
            for mq, pq in list(self.consumer.process_queues.items()):
                if pq.long_consuming:
                    self._clean_expired(mq, pq)

    def _clean_expired(self, mq: Any, pq: Any) -> None:
        """Up to 16 times: the smallest cached message, if its listener call started more than
        consumeTimeout ago, is sent back with delay level 3 and then removed from the cache if it
        is still the smallest (no offset update; the running call is not interrupted)."""
        starts, now = pq.long_consuming, self.clock.now_us
        for offset in [o for o in starts if o not in pq.msgs]:
            del starts[offset]
        for _ in range(CLEAN_EXPIRED_MAX_PER_ROUND):
            if not pq.msgs:
                return
            first = next(iter(pq.msgs))
            start = starts.get(first)
            if start is None or now - start <= self.consume_timeout_us:
                return
            del starts[first]
            msg = pq.msgs[first]
            self.node.trace(CONSUMER_EXPIRED_CLEANED, self.group, msg.msg_id, mq.broker_name, mq.queue_id, first)
            self.send_back.send(mq, msg, EXPIRED_SEND_BACK_DELAY_LEVEL,
                                lambda ok, pq=pq, first=first: self._expired_sent(pq, first, ok))  # type: ignore[misc]  # defaults bind the loop's values

    @staticmethod
    def _expired_sent(pq: Any, offset: int, ok: bool) -> None:
        if ok and pq.msgs and next(iter(pq.msgs)) == offset:
            pq.remove(offset)
