"""ConsumeMessageConcurrentlyService with `consumeMessageBatchMaxSize` > 1 (5.3.3; 4.9.8 alike).

submitConsumeRequest splits each pulled list into ConsumeRequests of at most
`consumeMessageBatchMaxSize` messages (the pull's `pullBatchSize`, 32, bounds a batch from
above); one listener call consumes a whole request. The listener (the application) works through
its batch in order, each message taking a `consume_time_ms` draw and failing with
`failure_probability`; it stops at the first failure. What it then returns is the application's
choice, the consumer's `batch_failure`:

- `reconsume_later` (the common listener): RECONSUME_LATER, so ackIndex = -1 and the *whole*
  batch is sent back, the messages it had already processed included: those are consumed again
  from the retry topic (duplicate cause `send_back`);
- `ack_index`: CONSUME_SUCCESS with `context.setAckIndex(i - 1)` for a failure at index i: the
  messages after the ackIndex — the failed one and the ones not reached — are sent back, the
  others are acknowledged.

processConsumeResult (CLUSTERING): every message after the ackIndex goes through sendMessageBack
(send_back.py); one whose send-back fails stays cached and is re-consumed locally after 5 s (as a
batch of its own); the others leave the ProcessQueue and the offset moves to its new minimum.
BROADCASTING drops the failed ones. The consumption records: a message the listener processed is
recorded consumed (its work was done, even when RECONSUME_LATER sends it back), the failed one and
the ones not reached as failures (the consumer's own stats count `size - (ackIndex + 1)` failed).

Simplified: as in consume_service.py, the thread is released when the listener returns; a call
interrupted at shutdown fails at once (nothing processed, the whole batch sent back).
"""

from __future__ import annotations

from typing import Any

from models.consumer.consume_service import ConsumeService
from models.coverage_points import COV_CONSUME_FAILURE_SENT_BACK
from models.records import CONSUMER_CONSUMED

RECONSUME_LATER, ACK_INDEX = "reconsume_later", "ack_index"


class BatchConsumeService(ConsumeService):
    """ConsumeService whose requests are lists of messages (module docstring)."""

    def __init__(self, consumer: Any, consume_time: Any, failure_probability: float) -> None:
        super().__init__(consumer, consume_time, failure_probability)
        self.batch = consumer.cfg.consume_message_batch_max_size
        self.ack_index_policy = consumer.batch_failure == ACK_INDEX

    def submit(self, pq: Any, mq: Any, msgs: Any) -> None:
        """submitConsumeRequest: one request per `consumeMessageBatchMaxSize` messages."""
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
        if duration_us > self.consume_timeout_us:  # cleanExpiredMsg will see these
            if pq.long_consuming is None:
                pq.long_consuming = {}
            for msg in batch:
                pq.long_consuming[msg.queue_offset] = self.clock.now_us
        self.node.call_later(duration_us, self._done, pq, mq, batch, failed_at)

    def _done(self, pq: Any, mq: Any, batch: Any, failed_at: int) -> None:
        """The listener returned: record what it consumed, then processConsumeResult."""
        if self._cut and self._was_cut(batch):
            return
        self.busy -= 1
        ack_index = len(batch) - 1 if failed_at == len(batch) else \
            failed_at - 1 if self.ack_index_policy and failed_at > 0 else -1
        for i, msg in enumerate(batch):  # failed_at -1: interrupted before any
            self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id, msg.user_topic, mq.broker_name,
                            mq.queue_id, msg.queue_offset, i < failed_at, msg.reconsume_times)
        if not pq.dropped:
            for msg in batch[:ack_index + 1]:
                self._commit_offset(pq, mq, msg.queue_offset)
            for msg in batch[ack_index + 1:]:
                if self.consumer.broadcasting:
                    self._commit_offset(pq, mq, msg.queue_offset)
                else:
                    self.cov[COV_CONSUME_FAILURE_SENT_BACK] += 1
                    self._send_back(pq, mq, msg)
        if self.queue and self.busy < self.threads:
            self._next()
        if self.stopping is not None and not self.busy:
            self._drained()

    def _interrupted(self, call: tuple) -> None:
        """An interrupted call throws: nothing processed, the whole batch sent back."""
        pq, mq, batch, _failed_at = call
        self._done(pq, mq, batch, -1)
        self._cut.append(batch)
