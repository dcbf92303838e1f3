"""broker.processor.PopMessageProcessor: POP_MESSAGE, the broker side of POP consumption (5.3.3).

A pop names a group, a topic, `maxMsgNums` (≤ 32), `invisibleTime` and `pollTime`; the clients
modelled pop queue id -1 (every queue of the topic on this broker: the proxy's and the POP-mode
push consumer's `popShareQueueNum` 0 assignment). With probability `popFromRetryProbability` (20 %)
the group's POP retry topic is read first; otherwise the topic's queues are read from a random
start, `(r + i) % queues`, while the batch is short, and the retry topic last if it is still short.
Orderly pops never read the retry topic.

Per queue (non-orderly): the offset is the committed one — a group's first pop of a queue starts at
maxOffset − 1, or 0 when the queue's head is still in memory (`initPopOffsetByCheckMsgInMem`), and
commits it —; the messages found get one checkpoint (pop_revive_service.py) and the consumer offset
is committed past them at once (PopBufferMergeService commits it as soon as the checkpoint is
stored): the offset moves at the pop, an ack never moves it. A filtered-out stretch moves the
offset too (addCkMock). Orderly pops: consumer_order_info.py. Each message goes out with its
receipt handle (ExtraInfoUtil: checkpoint start offset, popTime, invisibleTime, reviveQid, retry).

Nothing found and `pollTime` > 0: the request is parked (pop_long_polling.py); nothing found at the
end: POLLING_TIMEOUT (an immediate pop: PULL_NOT_FOUND, NO_NEW_MSG). A parked request of a client
whose connection has closed (its process died) is dropped when woken, unanswered: what arrives goes to
the next parked pop (PopLongPollingService; pop_long_polling.py). A SimpleConsumer's request, parked
by the proxy on its in-process channel, is not: its result is popped and written to a gRPC stream
that is gone, and the proxy's nack on a failed write (processThrowableWhenWriteMessage) does not
happen, the first write (the status) failing before any message's (pop_long_polling.py).

The proxy (requests from a SimpleConsumer, `proxy` true) is modelled in its LOCAL mode, inside the
broker's process: no hop of its own, it lives and dies with the broker. Its receive filter
(PopMessageResultFilterImpl) sends a message whose reconsumeTimes reached `retryMaxTimes` + 1 (17)
to `%DLQ%<group>` and acks it instead of delivering it; its receipt-handle check refuses acks and
invisible-time changes of an expired handle (ack_message_processor.py).

Simplified: QueueLockManager's per-queue lock never contends (a pop costs no broker time); the
pending server-side reset and the in-flight threshold (`enablePopMessageThreshold`, off) are not
modelled; pops on a slave are refused (SERVICE_NOT_AVAILABLE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.broker.ack_message_processor import AckMessageProcessor
from models.broker.consume_queue import ConsumeQueue
from models.broker.consumer_order_info import ConsumerOrderInfoManager
from models.broker.message_store import FOUND, NO_MATCHED_MESSAGE, OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL
from models.broker.pop_long_polling import PopLongPollingService
from models.broker.pop_revive_service import ORDER_REVIVE_QID, PopReviveService, pop_retry_topic
from models.coverage_points import COV_POP_ORDER_QUEUE_BLOCKED
from models.message import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageExt,
    dlq_topic,
    record_bytes,
)
from models.protocol import (
    POLLING_FULL,
    POLLING_TIMEOUT,
    PULL_NOT_FOUND,
    SERVICE_NOT_AVAILABLE,
    SUCCESS,
    PopMessage,
    PopResponse,
    ReceiptHandle,
)
from models.records import POP_ORDER_REDELIVERED, POP_POPPED

if TYPE_CHECKING:  # broker.py builds this processor: imported for the annotations only
    from models.broker.broker import Broker

POP_FROM_RETRY_PROBABILITY = 20  # BrokerConfig.popFromRetryProbability (%)
PROXY_MAX_ATTEMPTS = 17  # the proxy's maxAttempts: SubscriptionGroupConfig.retryMaxTimes (16) + 1
DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
INIT_POP_OFFSET_BY_CHECK_MSG_IN_MEM = True  # BrokerConfig.initPopOffsetByCheckMsgInMem
# the pop's initMode is the request's (PopMessage.init_mode): the proxy's ReceiveMessageActivity asks
# MAX, and so does a POP-mode push consumer unless it consumes from the first offset
# (RebalancePushImpl.getConsumeInitMode: MIN)


def pop_init_offset(topic: str, init_mode: str, min_offset: int, max_offset: int,
                    init_pop_offset_by_check_msg_in_mem: bool, offset_zero_in_memory: bool) -> int:
    """PopMessageProcessor.getInitOffset (5.3.3): a group's first offset in a queue it never popped.
    `init_mode` "MIN", or a retry topic (`%RETRY%` prefix): the queue's min offset. "MAX": 0 when
    initPopOffsetByCheckMsgInMem is on, the min offset is ≤ 0 and the message at offset 0 is in
    memory (checkInMemByConsumeOffset(topic, queueId, 0, 1)); else the max offset − 1 (pop the last
    one), not below 0."""
    if init_mode == "MIN" or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return min_offset
    if init_pop_offset_by_check_msg_in_mem and min_offset <= 0 and offset_zero_in_memory:
        return 0
    return max(max_offset - 1, 0)


class PopMessageProcessor:
    """POP_MESSAGE (module docstring), with the services it shares with the ack processors."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node = broker.node
        self.clock = self.node.env.clock
        self.detail = self.node.env.tracer.detail  # pop.popped: a detail kind (who popped what), for explain
        self.cov: list[int] = self.node.env.coverage
        self.stream = self.node.env.rng.stream(f"{self.node.name}.pop")  # PopMessageProcessor's random
        self.revive = PopReviveService(broker)
        self.polling = PopLongPollingService(broker, self._rerun)
        self.orders = ConsumerOrderInfoManager(self.node, self.commit, self.polling.wake)
        self.acks = AckMessageProcessor(self)
        self.groups: dict[str, set[str]] = {}  # group → the topics it popped here (its retry topic too)
        self.node.handle(PopMessage, self.on_pop)

    def backlog(self, groups: set[str]) -> int:
        """Messages the POP groups `groups` (those with a live member) still have to take or ack here
        (quiescence): un-acked messages of checkpoints not yet revived, and what lies past the
        offsets they popped to."""
        unacked = sum(bin(ck.acked ^ ((1 << len(ck.offsets)) - 1)).count("1")
                      for ck in self.revive.by_key.values() if ck.group in groups)
        ahead = 0
        for (group, topic, queue_id), offset in self.broker.offsets.table.items():
            if group in groups and topic in self.groups.get(group, ()):
                ahead += max(0, self.broker.store.max_offset(topic, queue_id) - offset)
        return unacked + ahead

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.groups.setdefault(group, set()).add(topic)
        self.broker.offsets.commit(group, topic, queue_id, offset)

    # --- the request ------------------------------------------------------------------------
    def on_pop(self, src: str, req_id: int, req: PopMessage) -> None:
        self._rerun(src, req_id, req, self.clock.now_us + req.poll_us)

    def _rerun(self, src: str, req_id: int, req: PopMessage, deadline_us: int) -> None:
        """Pop; nothing found → park until `deadline_us`, or answer when it has passed."""
        if self.broker.slave:
            self.node.reply(src, req_id, PopResponse(SERVICE_NOT_AVAILABLE))
            return
        found = self.pop(req)
        if found:
            if self.detail:
                for m, h in found:
                    self.node.trace(POP_POPPED, req.group, m.msg_id, m.topic, m.queue_id, m.queue_offset, src,
                                    h.pop_time_us, h.invisible_us)
            self.node.reply(src, req_id, PopResponse(SUCCESS, tuple(found)))
        elif req.poll_us <= 0:
            self.node.reply(src, req_id, PopResponse(PULL_NOT_FOUND))
        elif self.clock.now_us >= deadline_us:
            self.node.reply(src, req_id, PopResponse(POLLING_TIMEOUT))
        elif not self.polling.park(src, req_id, req, deadline_us):
            self.node.reply(src, req_id, PopResponse(POLLING_FULL))

    def pop(self, req: PopMessage) -> list[tuple[MessageExt, ReceiptHandle]]:
        """The retry topic first (20 %) or last (when short), the topic's queues from a random start."""
        out: list[tuple[MessageExt, ReceiptHandle]] = []
        r = self.stream.randrange(100)
        need_retry = r < POP_FROM_RETRY_PROBABILITY and not req.order
        revive_qid = ORDER_REVIVE_QID if req.order else self.revive.next_revive_qid()
        retry = pop_retry_topic(req.group, req.topic)
        if need_retry:
            self._pop_queue(req, retry, 0, out, revive_qid, True)
        queues = self.broker.topics.get(req.topic, 0)
        ids = [req.queue_id] if req.queue_id >= 0 else [(r + i) % queues for i in range(queues)]
        for queue_id in ids:
            if len(out) >= req.max_msg_nums:
                break
            self._pop_queue(req, req.topic, queue_id, out, revive_qid, False)
        if not need_retry and not req.order and len(out) < req.max_msg_nums:
            self._pop_queue(req, retry, 0, out, revive_qid, True)
        if req.proxy and out:
            out = self._proxy_filter(req, out)
        return out

    def _pop_queue(self, req: PopMessage, topic: str, queue_id: int, out: list, revive_qid: int,
                   retry: bool) -> None:
        broker = self.broker
        cq = broker.reput.queue(topic, queue_id)
        if cq is None:
            return
        now = self.clock.now_us
        if req.order and self.orders.blocked(topic, req.group, queue_id, now):
            self.cov[COV_POP_ORDER_QUEUE_BLOCKED] += 1
            return
        offset = self._pop_offset(req.group, topic, queue_id, cq, req.init_mode)
        tags = None if retry else req.tag_codes
        status, next_offset, _max, msgs = broker.store.get_message(cq, offset, req.max_msg_nums - len(out), tags)
        if status in (OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY):  # commit the corrected offset, read again
            self.commit(req.group, topic, queue_id, next_offset)
            offset = next_offset
            status, next_offset, _max, msgs = broker.store.get_message(cq, offset, req.max_msg_nums - len(out), tags)
        if not msgs:
            if status is NO_MATCHED_MESSAGE or (status is FOUND and next_offset > offset):  # addCkMock
                if not req.order:
                    self.commit(req.group, topic, queue_id, next_offset)
            return
        offsets = [m.queue_offset for m in msgs]
        if req.order:
            counts = self.orders.update(topic, req.group, queue_id, offsets, now, req.invisible_us)
            msgs = [m._replace(reconsume_times=counts[m.queue_offset]) for m in msgs]
            for m in msgs:
                if m.reconsume_times:
                    self.node.trace(POP_ORDER_REDELIVERED, req.group, m.msg_id, topic, queue_id, m.queue_offset,
                                    m.reconsume_times)
        else:
            self.revive.add_ck(req.group, topic, queue_id, offsets, req.invisible_us, revive_qid)
            self.commit(req.group, topic, queue_id, next_offset)
        name = broker.broker_name
        for m in msgs:
            out.append((m, ReceiptHandle(offsets[0], now, req.invisible_us, revive_qid, retry, name, queue_id,
                                         m.queue_offset)))

    def _pop_offset(self, group: str, topic: str, queue_id: int, cq: ConsumeQueue, init_mode: str) -> int:
        """getPopOffset: the committed offset; a first pop initialises it (`pop_init_offset`, the
        request's initMode; a retry topic from its min offset) and commits it."""
        offset = self.broker.offsets.table.get((group, topic, queue_id), -1)
        if offset >= 0:
            return offset
        offset = pop_init_offset(topic, init_mode, cq.min_offset, cq.max_offset, INIT_POP_OFFSET_BY_CHECK_MSG_IN_MEM,
                                 self.broker.store.head_in_memory(topic, queue_id))
        self.commit(group, topic, queue_id, offset)
        return offset

    def _proxy_filter(self, req: PopMessage, out: list) -> list:
        """PopMessageResultFilterImpl: reconsumeTimes ≥ maxAttempts → the DLQ, then acked."""
        kept = []
        for msg, handle in out:
            if msg.reconsume_times < PROXY_MAX_ATTEMPTS:
                kept.append((msg, handle))
                continue
            self._to_dlq(req.group, msg)
            self.acks.ack_handle(req.group, req.topic, handle)
        return kept

    def _to_dlq(self, group: str, msg: MessageExt) -> None:
        """forwardMessageToDeadLetterQueue (CONSUMER_SEND_MSG_BACK with delay level -1)."""
        topic = dlq_topic(group)
        self.broker.topics.setdefault(topic, DLQ_NUMS_PER_GROUP)
        props = dict(msg.props or {})
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.user_topic)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, props, msg.reconsume_times)
        self.broker.put_no_wait(msg.msg_id, topic, 0, size, msg.body_bytes, msg.tags, msg.reconsume_times, props)
