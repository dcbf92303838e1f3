"""broker.processor.AckMessageProcessor and ChangeInvisibleTimeProcessor (5.3.3).

ACK_MESSAGE names a message by its receipt handle. The broker checks only that the offset is
within the queue (else NO_MESSAGE) and answers SUCCESS: it never checks the invisible time, so a
late ack is written too and cancels the retry only if it comes before the revive
(pop_revive_service.py). An orderly handle (reviveQid 999) goes to ConsumerOrderInfoManager
(consumer_order_info.py), which commits the offset.

CHANGE_MESSAGE_INVISIBLETIME: a new checkpoint of the one message, popTime now and the new
invisible time, is written first, then the original is acked; the answer carries the new handle.
Orderly: only the offset's next visible time moves (the handle keeps its popTime).

Requests from a SimpleConsumer pass the LOCAL-mode proxy first (AbstractProcessor
.validateReceiptHandle): a handle whose invisible time has passed is refused with
INVALID_RECEIPT_HANDLE and never reaches the broker's processor.
"""

from __future__ import annotations

from typing import Any

from models.broker.pop_revive_service import ORDER_REVIVE_QID, pop_retry_topic
from models.coverage_points import COV_POP_ACK_EXPIRED_HANDLE
from models.protocol import (
    INVALID_RECEIPT_HANDLE,
    NO_MESSAGE,
    SERVICE_NOT_AVAILABLE,
    SUCCESS,
    AckMessage,
    ChangeInvisibleTime,
    ChangeInvisibleTimeResponse,
    CodeResponse,
    ReceiptHandle,
)


class AckMessageProcessor:
    """ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME on one broker (module docstring)."""

    def __init__(self, pop: Any) -> None:
        self.pop = pop
        self.broker = pop.broker
        self.node = pop.node
        self.clock = pop.clock
        self.cov: list[int] = pop.cov
        self.node.handle(AckMessage, self.on_ack)
        self.node.handle(ChangeInvisibleTime, self.on_change_invisible)

    def _refused(self, req: Any) -> int | None:
        """The answer code of a request the proxy or the processor refuses, else None."""
        if self.broker.slave:
            return SERVICE_NOT_AVAILABLE
        handle = req.handle
        if req.proxy and self.clock.now_us >= handle.pop_time_us + handle.invisible_us:
            self.cov[COV_POP_ACK_EXPIRED_HANDLE] += 1
            return INVALID_RECEIPT_HANDLE
        cq = self.broker.reput.queue(self._topic(req.group, req.topic, handle), handle.queue_id)
        if cq is None or not cq.min_offset <= handle.queue_offset < cq.max_offset:
            return NO_MESSAGE
        return None

    @staticmethod
    def _topic(group: str, topic: str, handle: ReceiptHandle) -> str:
        """The topic the message was popped from (the group's POP retry topic for a retry message)."""
        return pop_retry_topic(group, topic) if handle.retry else topic

    def on_ack(self, src: str, req_id: int, req: AckMessage) -> None:
        code = self._refused(req)
        if code is None:
            self.ack_handle(req.group, req.topic, req.handle)
        self.node.reply(src, req_id, CodeResponse(SUCCESS if code is None else code))

    def ack_handle(self, group: str, topic: str, handle: ReceiptHandle) -> None:
        """appendAck (or ackOrderly) of one handle."""
        topic = self._topic(group, topic, handle)
        if handle.revive_qid == ORDER_REVIVE_QID:
            committed = self.broker.offsets.table.get((group, topic, handle.queue_id), -1)
            self.pop.orders.ack(topic, group, handle.queue_id, handle.queue_offset, handle.pop_time_us, committed)
            return
        self.pop.revive.ack(group, topic, handle.queue_id, handle.ck_start_offset, handle.pop_time_us,
                            handle.queue_offset)

    def on_change_invisible(self, src: str, req_id: int, req: ChangeInvisibleTime) -> None:
        code = self._refused(req)
        if code is not None:
            self.node.reply(src, req_id, ChangeInvisibleTimeResponse(code))
            return
        handle, now = req.handle, self.clock.now_us
        topic = self._topic(req.group, req.topic, handle)
        if handle.revive_qid == ORDER_REVIVE_QID:
            pop_time = self.pop.orders.change_invisible(topic, req.group, handle.queue_id, handle.queue_offset,
                                                        now + req.invisible_us)
            if pop_time is None:
                self.node.reply(src, req_id, ChangeInvisibleTimeResponse(SUCCESS, handle))
                return
            new = handle._replace(invisible_us=now + req.invisible_us - pop_time)
        else:  # appendCheckPointThenAckOrigin
            self.pop.revive.add_ck(req.group, topic, handle.queue_id, [handle.queue_offset], req.invisible_us,
                                   handle.revive_qid)
            self.ack_handle(req.group, req.topic, handle)
            new = handle._replace(ck_start_offset=handle.queue_offset, pop_time_us=now, invisible_us=req.invisible_us)
        self.node.reply(src, req_id, ChangeInvisibleTimeResponse(SUCCESS, new))
