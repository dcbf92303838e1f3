"""broker.processor.EndTransactionProcessor, the half-message branch of SendMessageProcessor, and
the broker's transactional services wired together (5.3.3; `version: 4.x` writes op messages
unbatched and its check rounds without the 1 s sleep).

Receiving a half message (a SEND_MESSAGE whose message carries TRAN_MSG=true):
`rejectTransactionMessage` → NO_PERMISSION; else it is stored as a half message
(transactional_message_bridge.py) and answered like any send (with SYNC_FLUSH after its flush:
FLUSH_DISK_TIMEOUT makes the producer roll back without running its local transaction).

END_TRANSACTION (always oneway, so nothing is answered):
- UNKNOW (TRANSACTION_NOT_TYPE): nothing happens.
- COMMIT / ROLLBACK: the half is looked up by its CommitLog offset (none → SYSTEM_ERROR). 5.1.1+:
  an end not from a check, later than the half's CHECK_IMMUNITY_TIME_IN_SECONDS, is refused
  (ILLEGAL_OPERATION). Then the producer group, the queue offset and the CommitLog offset are
  compared with the request (mismatch → SYSTEM_ERROR; the message id is *not* compared, so after
  a power loss a stale end can hit another half stored at the same offsets).
  COMMIT writes the real message — real topic and queue from REAL_TOPIC / REAL_QID, TRAN_MSG
  cleared, the same uniq key — and deletes the half (op record) only if that put succeeded: with
  the store's disk full it is refused (SERVICE_NOT_AVAILABLE) and the half stays open for a later
  check; ROLLBACK only deletes it.
- On a slave (controller mode: a deposed master) the end is refused (SLAVE_NOT_AVAILABLE).
- No idempotence: the half stays in the CommitLog and every commit of it, or of one of its
  checked copies, writes another real message (a late end plus a check answer: two messages).

Simplified: the end-transaction thread pool and its queue are not modelled (processing is
immediate).
"""

from __future__ import annotations

from typing import Any

from models.broker.transaction_check import TransactionalMessageCheckService
from models.broker.transactional_message_bridge import TransactionalMessageBridge
from models.broker.transactional_message_service import TransactionalOpBatchService
from models.coverage_points import COV_TXN_CHECK_ANSWERED_UNKNOW, COV_TXN_END_REFUSED
from models.message import (
    PROPERTY_BORN_TIMESTAMP,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    MessageExt,
    record_bytes,
)
from models.protocol import (
    ILLEGAL_OPERATION,
    NO_PERMISSION,
    SERVICE_NOT_AVAILABLE,
    SLAVE_NOT_AVAILABLE,
    SUCCESS,
    SYSTEM_ERROR,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    EndTransaction,
    SendMessage,
    SendResponse,
)
from models.records import TXN_ENDED
from sim.env import ms

ACTIONS = {TRANSACTION_COMMIT_TYPE: "COMMIT", TRANSACTION_ROLLBACK_TYPE: "ROLLBACK"}


class BrokerTransaction:
    """The broker's transactional message parts: bridge, op batching, check service, end processor."""

    def __init__(self, broker: Any, batched_ops: bool) -> None:
        """`batched_ops`: 5.x (op batching, and the check round's 1 s sleep); False: 4.x."""
        self.broker = broker
        self.node = broker.node
        self.cov = broker.node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.cfg = broker.cfg
        self.timeout_us = ms(self.cfg.transaction_timeout_ms)
        self.bridge = TransactionalMessageBridge(broker)
        self.ops = TransactionalOpBatchService(self.node, self.bridge, self.cfg, batched_ops)
        self.check_service = TransactionalMessageCheckService(broker, self.bridge, self.cfg, v5=batched_ops)
        self.node.handle(EndTransaction, self.on_end_transaction)

    # --- SendMessageProcessor: the transaction branch -----------------------------------------
    def on_half_send(self, src: str, req_id: int, req: SendMessage) -> None:
        node = self.node
        if self.cfg.reject_transaction_message:
            node.reply(src, req_id, SendResponse(NO_PERMISSION))
            return
        msg = req.msg
        phys, queue_offset = self.bridge.put_half_message(msg, req.queue_id)
        if not self.broker.waits:
            node.reply(src, req_id, SendResponse(SUCCESS, queue_offset, phys))
            return
        size = self.broker.store.look_message_by_offset(phys).size_bytes
        self.broker._wait_store(src, req_id, queue_offset, phys, phys + size)  # flush and replicas, as any send

    # --- EndTransactionProcessor --------------------------------------------------------------
    def on_end_transaction(self, src: str, req_id: int, req: EndTransaction) -> None:
        action = ACTIONS.get(req.commit_or_rollback)
        if action is None:  # UNKNOW: "pending status", nothing happens
            if req.from_transaction_check:
                self.cov[COV_TXN_CHECK_ANSWERED_UNKNOW] += 1
            return
        if self.broker.slave:  # controller mode, a deposed master: "Can't process ... in slave mode"
            self.cov[COV_TXN_END_REFUSED] += 1
            self.node.trace(TXN_ENDED, req.msg_id, action, req.from_transaction_check, SLAVE_NOT_AVAILABLE)
            return
        half = self.bridge.look_message_by_offset(req.commit_log_offset)
        code = self._verify(req, half)
        if code == SUCCESS and action == "COMMIT" and self.broker.disk_full:
            # sendFinalMessage: the store refuses the real message (SERVICE_NOT_AVAILABLE), so the half
            # is not deleted: it stays open and a later check commits it again
            code = SERVICE_NOT_AVAILABLE
        if code == SUCCESS:  # so `half` is not None (_verify)
            if action == "COMMIT":
                self._send_final_message(half)  # type: ignore[arg-type]  # not None: SUCCESS
            self.bridge.resolved(half.msg_id)  # type: ignore[union-attr]  # not None: SUCCESS
            self.ops.delete_prepare_message(half.queue_id, half.queue_offset)  # type: ignore[union-attr]  # not None: SUCCESS
        else:
            self.cov[COV_TXN_END_REFUSED] += 1
        self.node.trace(TXN_ENDED, req.msg_id, action, req.from_transaction_check, code)

    def _verify(self, req: EndTransaction, half: MessageExt | None) -> int:
        """rejectCommitOrRollback + checkPrepareMessage."""
        if half is None:
            return SYSTEM_ERROR  # "Find prepared transaction message failed"
        props = half.props or {}
        immunity_s = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if immunity_s is not None and not req.from_transaction_check:
            immunity_us = self.timeout_us if immunity_s == -1 else max(immunity_s * 1_000_000, self.timeout_us)
            if self.node.env._now - props.get(PROPERTY_BORN_TIMESTAMP, half.store_us) > immunity_us:
                return ILLEGAL_OPERATION
        if props.get(PROPERTY_PRODUCER_GROUP) != req.producer_group or half.queue_offset != req.tran_state_table_offset \
                or half.phys_offset != req.commit_log_offset:
            return SYSTEM_ERROR
        return SUCCESS

    def _send_final_message(self, half: MessageExt) -> None:
        """endMessageTransaction + sendFinalMessage: the real message (WAIT=false: PUT_OK)."""
        props = dict(half.props or {})
        topic = props.pop(PROPERTY_REAL_TOPIC)
        queue_id = props.pop(PROPERTY_REAL_QUEUE_ID)
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        size = record_bytes(topic, half.body_bytes, half.tags, 0, props)
        self.bridge.put_unwaited(half.msg_id, topic, queue_id, size, half.body_bytes, half.tags, props)
