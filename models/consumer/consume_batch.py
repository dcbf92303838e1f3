"""ConsumeMessageConcurrentlyService with `consumeMessageBatchMaxSize` > 1 (5.3.3; 4.9.8 alike but where said).

`submitConsumeRequest` cuts each pulled list, in order, into ConsumeRequests of at most
`consumeMessageBatchMaxSize` messages (the pull's `pullBatchSize`, 32, bounds a batch from
above); one listener call consumes a whole request, on one of the pool's threads. The listener (the
application) works through its batch in order, each message taking a `consume_time_ms` draw and
failing with `failure_probability`; it stops at the first failure. What it then returns is the
application's choice, the consumer's `batch_failure`:

- `reconsume_later` (the common listener): RECONSUME_LATER, so ackIndex = -1 and the *whole*
  batch is sent back, the messages it had already processed included: those are consumed again
  from the retry topic (duplicate cause `send_back`);
- `ack_index`: CONSUME_SUCCESS with `context.setAckIndex(i - 1)` for a failure at index i: the
  messages after the ackIndex — the failed one and the ones not reached — are sent back, the
  others are acknowledged (a failure at index 0 acknowledges none, like RECONSUME_LATER).

`processConsumeResult` (CLUSTERING), once the listener returned and the ProcessQueue is not
dropped: the messages after the ackIndex go through `sendMessageBack` (send_back.py) *one after
another*, each waiting for the previous one's answer (the Java call is synchronous); 5.x skips a
message no longer cached (cleanExpiredMsg took it; `containsMessage`), 4.9.8 sends it back anyway.
Those whose send-back failed get reconsumeTimes + 1 and are resubmitted *together* after 5 s
(`submitConsumeRequestLater(msgBackFailed, …)`: cut into requests again), staying cached meanwhile.
Only then are the request's other messages removed from the ProcessQueue, in one `removeMessage`,
and the offset it returns stored (increaseOnly) unless the queue was dropped meanwhile — so the
committed offset passes none of a batch's messages before all its send-backs have answered.
BROADCASTING drops the failed ones. The consumption records: a message the listener processed is
recorded consumed (its work was done, even when RECONSUME_LATER sends it back), the failed one and
the ones not reached as failures (the consumer's own stats count `size - (ackIndex + 1)` failed).
A call whose messages all outlast consumeTimeout leaves their start time for cleanExpiredMsg (every
message of a request gets the same CONSUME_START_TIME); a shorter call overwrites an older one.

Simplified: as in consume_service.py, the thread is released when the listener returns, so the
send-back chain does not hold it (Java's does, up to 5 s + 3 s a message while a broker is down); a
call interrupted at shutdown fails at once (nothing processed, the whole batch sent back).
"""

from __future__ import annotations

from typing import Any

from models.consumer.config import LOCAL_RETRY_DELAY_US
from models.consumer.consume_service import ConsumeService
from models.coverage_points import COV_CONSUME_FAILURE_SENT_BACK, COV_SEND_BACK_FAILED_LOCAL_RETRY
from models.records import CONSUMER_CONSUMED

RECONSUME_LATER, ACK_INDEX = "reconsume_later", "ack_index"


def remove_message(pq: Any, msgs: list) -> int:
    """ProcessQueue.removeMessage(msgs): −1 when nothing was cached; else the smallest offset still
    cached after the removal, or one past the highest offset ever put when none is."""
    cached = pq.msgs
    if not cached:
        return -1
    for msg in msgs:
        pq.remove(msg.queue_offset)
    return next(iter(cached)) if cached else pq.queue_offset_max + 1


def ack_index_of(size: int, failed_at: int, ack_index_policy: bool) -> int:
    """processConsumeResult's ackIndex for a listener that failed at `failed_at` (`size`: none
    failed; -1: interrupted before any): CONSUME_SUCCESS clamps the context's ackIndex to size - 1;
    RECONSUME_LATER makes it -1."""
    if failed_at >= size:
        return size - 1
    return failed_at - 1 if ack_index_policy and failed_at > 0 else -1


class BatchConsumeService(ConsumeService):
    """ConsumeService whose requests are lists of messages (module docstring)."""

    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        super().__init__(consumer, consume_time, failure_probability)
        self.batch = consumer.cfg.consume_message_batch_max_size
        self.ack_index_policy = consumer.batch_failure == ACK_INDEX

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """submitConsumeRequest: one request per `consumeMessageBatchMaxSize` messages, in order."""
        if self.stopping is not None or self.stopped:
            return
        msgs = list(msgs)
        for i in range(0, len(msgs), self.batch):
            batch = msgs[i:i + self.batch]
            if self.busy < self.threads:
                self._start(pq, mq, batch)
            else:
                self.queue.append((pq, mq, batch))

    def _start(self, pq: Any, mq: Any, batch: Any) -> None:
        """A thread runs the listener on the batch: where it fails, and how long it takes, drawn now."""
        if pq.dropped:
            self._next()
            return
        self.busy += 1
        duration_us, failed_at = 0, len(batch)
        for i in range(len(batch)):
            draws = self._times
            duration_us += draws.pop() if draws else self._refill()
            if self.failure_probability and self.stream.random() < self.failure_probability:
                failed_at = i
                break
        self._mark_consume_start(pq, batch, duration_us)
        self.node.call_later(duration_us, self._done, pq, mq, batch, failed_at)

    def _mark_consume_start(self, pq: Any, batch: list, duration_us: int) -> None:
        """CONSUME_START_TIME of every message of the request: kept for cleanExpiredMsg only when the
        call will outlast consumeTimeout; a shorter call overwrites an older start."""
        if duration_us > self.consume_timeout_us:
            if pq.long_consuming is None:
                pq.long_consuming = {}
            for msg in batch:
                pq.long_consuming[msg.queue_offset] = self.clock.now_us
        elif pq.long_consuming:
            for msg in batch:
                pq.long_consuming.pop(msg.queue_offset, None)

    def _done(self, pq: Any, mq: Any, batch: Any, failed_at: int) -> None:
        """The listener returned: record what it consumed, then processConsumeResult."""
        if self._cut and self._was_cut(batch):
            return
        self.busy -= 1
        for i, msg in enumerate(batch):  # failed_at -1: interrupted before any
            self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id, msg.user_topic, mq.broker_name,
                            mq.queue_id, msg.queue_offset, i < failed_at, msg.reconsume_times)
        if not pq.dropped:
            self._process_result(pq, mq, batch, ack_index_of(len(batch), failed_at, self.ack_index_policy))
        if self.queue and self.busy < self.threads:
            self._next()
        if self.stopping is not None and not self.busy:
            self._drained()

    # --- processConsumeResult -----------------------------------------------------------------
    def _process_result(self, pq: Any, mq: Any, batch: list, ack_index: int) -> None:
        """CLUSTERING: send back what follows the ackIndex, one by one, then remove the rest.
        BROADCASTING: the failed ones are dropped, all removed at once."""
        if ack_index + 1 >= len(batch) or self.consumer.broadcasting:
            self._removed(pq, mq, batch)
            return
        self.cov[COV_CONSUME_FAILURE_SENT_BACK] += len(batch) - (ack_index + 1)
        self._send_back_from(pq, mq, batch, ack_index + 1, [])

    def _send_back_from(self, pq: Any, mq: Any, batch: list, i: int, back_failed: list) -> None:
        """sendMessageBack(batch[i]); the next one when it has answered (a synchronous call in Java)."""
        check_cached = not self.consumer.v4  # 5.x: containsMessage (4.9.8 has no such check)
        while i < len(batch) and check_cached and batch[i].queue_offset not in pq.msgs:
            i += 1  # cleaned by cleanExpiredMsg meanwhile: skipped
        if i == len(batch):
            self._after_send_backs(pq, mq, batch, back_failed)
            return
        self.send_back.send(mq, batch[i], 0,
                            lambda ok: self._sent_back_one(pq, mq, batch, i, back_failed, ok))

    def _sent_back_one(self, pq: Any, mq: Any, batch: list, i: int, back_failed: list, ok: bool) -> None:
        if not ok:  # both CONSUMER_SEND_MSG_BACK and the inner producer's send failed
            self.cov[COV_SEND_BACK_FAILED_LOCAL_RETRY] += 1
            back_failed.append(batch[i])
        self._send_back_from(pq, mq, batch, i + 1, back_failed)

    def _after_send_backs(self, pq: Any, mq: Any, batch: list, back_failed: list) -> None:
        """msgBackFailed: reconsumeTimes + 1, resubmitted together in 5 s, still cached; the rest removed."""
        if back_failed:
            again = [msg._replace(reconsume_times=msg.reconsume_times + 1) for msg in back_failed]
            self.node.call_later(LOCAL_RETRY_DELAY_US, self.submit, pq, mq, again)
            failed = {msg.queue_offset for msg in back_failed}
            batch = [msg for msg in batch if msg.queue_offset not in failed]
        self._removed(pq, mq, batch)

    def _removed(self, pq: Any, mq: Any, msgs: list) -> None:
        """removeMessage(msgs), then updateOffset(increaseOnly=true) unless the queue was dropped."""
        offset = remove_message(pq, msgs)
        if offset >= 0 and not pq.dropped:
            offsets = self.offsets
            old = offsets.get(mq)
            if old is None or offset > old:
                offsets[mq] = offset

    def _interrupted(self, call: tuple) -> None:
        """An interrupted call throws: nothing processed, the whole batch sent back."""
        pq, mq, batch, _failed_at = call
        self._done(pq, mq, batch, -1)
        self._cut.append(batch)
