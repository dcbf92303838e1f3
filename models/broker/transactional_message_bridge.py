"""broker.transaction.queue.TransactionalMessageBridge: the half and op topics over the store (5.3.3).

- Half messages (`parseHalfMessageInner`): a message sent with TRAN_MSG=true is stored under
  RMQ_SYS_TRANS_HALF_TOPIC, **queue 0**, with its real topic and queue as REAL_TOPIC / REAL_QID
  and (5.x) `__transactionId__` = its uniq key. The half topic has its own ConsumeQueue; the real
  topic's ConsumeQueue gets nothing, so no consumer can see a half message.
- Op messages (`writeOp`): RMQ_SYS_TRANS_OP_HALF_TOPIC, the half queue's queue id, tag `d`
  (TransactionalMessageUtil.REMOVE_TAG), body = half queue offsets as `"<offset>,"` text.
- Both topics are read with the store's getMessage on behalf of system group CID_RMQ_SYS_TRANS,
  whose consume offsets live in the ConsumerOffsetManager like any group's (so a crash rolls them
  back to the last persist of consumerOffset.json, and halves get checked again).
- Put-backs (`renewHalfMessageInner`): a copy of a half message with the same properties and
  born timestamp, appended to the end of the half queue (WAIT=false).

Ground truth (not RocketMQ): the bridge remembers the CommitLog offset of the newest copy of
every half that no end has resolved yet; after a power loss it records `txn.half_lost` for those
whose newest copy the CommitLog no longer holds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from models.broker.message_store import (
    FOUND,
    NO_MATCHED_LOGIC_QUEUE,
    NO_MATCHED_MESSAGE,
    NO_MESSAGE_IN_QUEUE,
    OFFSET_OVERFLOW_ONE,
)
from models.coverage_points import COV_TXN_HALF_LOST_POWER_LOSS
from models.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_OP_BODY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    MessageExt,
    record_bytes,
)
from models.records import TXN_HALF_LOST

CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"  # TransactionalMessageUtil.buildConsumerGroup()
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG
OFFSET_SEPARATOR = ","  # TransactionalMessageUtil.OFFSET_SEPARATOR
HALF_QUEUE_ID = 0  # parseHalfMessageInner: every half message goes to queue 0
# PullStatus of the bridge's getMessage
PULL_FOUND, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL = "FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL"


class PullResult(NamedTuple):
    status: str
    next_begin_offset: int
    max_offset: int
    msgs: tuple[MessageExt, ...]


class TransactionalMessageBridge:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.node = broker.node
        self.store = broker.store
        self.unresolved: dict[int, int] = {}  # ground truth: msg id -> CommitLog offset of its newest half copy
        self.node.on_power_loss(self._record_lost_halves)

    # --- writes -------------------------------------------------------------------------------
    def put_half_message(self, msg: Any, queue_id: int) -> tuple[int, int]:
        """parseHalfMessageInner + putMessage; returns (phys offset, half queue offset)."""
        props = dict(msg.props or {})
        props[PROPERTY_TRANSACTION_ID] = msg.msg_id
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = queue_id
        if msg.delay_level > 0:  # the DELAY property stays with the half; its commit is re-routed by it
            props[PROPERTY_DELAY_TIME_LEVEL] = msg.delay_level  # (never from a 4.9.8 / 5.3.3 client: it clears it)
        size = record_bytes(RMQ_SYS_TRANS_HALF_TOPIC, msg.body_bytes, msg.tags, 0, props)
        return self._put_half(msg.msg_id, size, msg.body_bytes, msg.tags, props)

    def put_back_half_message(self, half: MessageExt, props: dict[str, Any]) -> tuple[int, int]:
        """renewHalfMessageInner + putMessage (WAIT=false, so PUT_OK): the copy goes to the end."""
        size = record_bytes(RMQ_SYS_TRANS_HALF_TOPIC, half.body_bytes, half.tags, 0, props)
        phys, offset = self.put_unwaited(half.msg_id, RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, size, half.body_bytes,
                                         half.tags, props)
        self.unresolved[half.msg_id] = phys
        return phys, offset

    def _put_half(self, msg_id: int, size: int, body_bytes: int, tags: str | None, props: dict) -> tuple[int, int]:
        phys, offset = self.broker.put_message(msg_id, RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, size, body_bytes, tags,
                                               0, props)
        self.unresolved[msg_id] = phys
        return phys, offset

    def put_unwaited(self, msg_id: int, topic: str, queue_id: int, size: int, body_bytes: int, tags: str | None,
                     props: dict) -> tuple[int, int]:
        """putMessage with WAIT=false (put-backs, op messages, commits, discards): PUT_OK at once;
        with SYNC_FLUSH the group commit's idle round flushes it (Broker.put_no_wait)."""
        return self.broker.put_no_wait(msg_id, topic, queue_id, size, body_bytes, tags, 0, props)

    def write_op(self, queue_id: int, body: str) -> None:
        """writeOp: one op message carrying `body` (half queue offsets)."""
        props = {PROPERTY_OP_BODY: body}
        size = record_bytes(RMQ_SYS_TRANS_OP_HALF_TOPIC, len(body), REMOVE_TAG, 0, props)
        self.put_unwaited(0, RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, size, len(body), REMOVE_TAG, props)

    def resolved(self, msg_id: int) -> None:
        """Ground truth: an end applied to this half (commit or rollback)."""
        self.unresolved.pop(msg_id, None)

    def _record_lost_halves(self) -> None:
        end = self.store.commit_log.wrote_position  # after the CommitLog's own power-loss hook
        lost = [msg_id for msg_id, phys in self.unresolved.items() if phys >= end]
        for msg_id in lost:
            self.node.env.coverage[COV_TXN_HALF_LOST_POWER_LOSS] += 1
            del self.unresolved[msg_id]
            self.node.trace(TXN_HALF_LOST, msg_id)

    # --- reads --------------------------------------------------------------------------------
    def get_half_message(self, offset: int, nums: int) -> PullResult:
        return self._get_message(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int) -> PullResult:
        return self._get_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, offset, nums)

    def _get_message(self, topic: str, queue_id: int, offset: int, nums: int) -> PullResult:
        """getMessage for CID_RMQ_SYS_TRANS, GetMessageStatus mapped to a PullStatus. A queue the
        store has never seen reads as empty (DefaultMessageStore creates it on demand)."""
        cq = self.store.reput.queue(topic, queue_id)
        status, next_offset, max_offset, msgs = self.store.get_message(cq, offset, nums, None)
        if status is FOUND:
            return PullResult(PULL_FOUND, next_offset, max_offset, msgs)
        if status is NO_MATCHED_MESSAGE:
            return PullResult(NO_MATCHED_MSG, next_offset, max_offset, ())
        if status in (NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE, NO_MATCHED_LOGIC_QUEUE):
            return PullResult(NO_NEW_MSG, next_offset, max_offset, ())
        return PullResult(OFFSET_ILLEGAL, next_offset, max_offset, ())

    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        """The group's consume offset, or the queue's min offset (0 here) when it has none."""
        offset = self.broker.offsets.query(CID_RMQ_SYS_TRANS, topic, queue_id)
        return 0 if offset == -1 else offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.broker.offsets.commit(CID_RMQ_SYS_TRANS, topic, queue_id, offset)

    def look_message_by_offset(self, phys_offset: int) -> MessageExt | None:
        return self.store.look_message_by_offset(phys_offset)
