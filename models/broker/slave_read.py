"""The request processors of a SLAVE broker: reads from a slave, 5.3.3 vs 4.9.8.

- PULL_MESSAGE. 5.x: with `slaveReadEnable` false (the default) PullMessageProcessor.rejectRequest
  answers every pull SYSTEM_BUSY "[REJECTREQUEST]" at the remoting layer (the client retries
  after 1 s): a dead master's queues are not consumed until it returns. With `slaveReadEnable`
  the slave serves what it has, but since its group's minimum broker id is the master's (0, in
  classic mode) it suggests the master and answers anything but FOUND with
  PULL_RETRY_IMMEDIATELY (no long polling there). 4.x: the slave serves pulls whatever
  `slaveReadEnable` says (that flag only picks the suggested broker: 1 for a lagging consumer
  with it, else the master), holds "not found" pulls like a master, but wakes them only by the
  5 s scan (dispatch notifies long polling on masters only). Either way a slave without
  `offsetCheckInSlave` never moves a consumer's offset: a PULL_OFFSET_MOVED becomes
  PULL_RETRY_IMMEDIATELY with the requested offset kept. The commit offset a pull carries is
  applied in 5.x (the client clears the flag for slaves), never in 4.x.
- SEND_MESSAGE, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK: 5.x rejects them (SYSTEM_BUSY "[REJECTREQUEST]",
  SendMessageProcessor.rejectRequest); 4.x answers SERVICE_NOT_AVAILABLE (the store is not
  writeable on a slave).
"""

from __future__ import annotations

from typing import Any

from models.broker.config import MASTER_ID, WHICH_BROKER_WHEN_CONSUME_SLOWLY
from models.coverage_points import COV_SLAVE_PULL_REJECTED
from models.protocol import (
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    SERVICE_NOT_AVAILABLE,
    SUCCESS,
    SYSTEM_BUSY,
    CodeResponse,
    ConsumerSendMsgBack,
    PullMessage,
    SendBatchMessage,
    SendMessage,
    SendResponse,
    new_pull_response,
)
from models.records import BROKER_BUSY
from models.version import Version


class SlaveProcessors:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.node = broker.node
        self.v5 = broker.version is Version.V5
        self.slave_read_enable = broker.cfg.slave_read_enable

    def register(self) -> None:
        self.node.handle(SendMessage, self.on_send)
        self.node.handle(SendBatchMessage, self.on_send)
        self.node.handle(PullMessage, self.on_pull)
        self.node.handle(ConsumerSendMsgBack, self.on_send_back)

    def on_send(self, src: str, req_id: int, req: SendMessage | SendBatchMessage) -> None:
        if self.v5:
            msg = req.msg if isinstance(req, SendMessage) else req.msgs[0]
            self.node.trace(BROKER_BUSY, msg.msg_id, "REJECTREQUEST")
        self.node.reply(src, req_id, SendResponse(SYSTEM_BUSY if self.v5 else SERVICE_NOT_AVAILABLE))

    def on_send_back(self, src: str, req_id: int, req: ConsumerSendMsgBack) -> None:
        self.node.reply(src, req_id, CodeResponse(SYSTEM_BUSY if self.v5 else SERVICE_NOT_AVAILABLE))

    def on_pull(self, src: str, req_id: int, req: PullMessage) -> None:
        broker = self.broker
        if self.v5 and not self.slave_read_enable:
            self.node.env.coverage[COV_SLAVE_PULL_REJECTED] += 1
            self.node.reply(src, req_id, new_pull_response((SYSTEM_BUSY, req.queue_offset, 0, 0, (), MASTER_ID)))
            return
        if self.v5 and req.commit_offset >= 0:
            broker.offsets.commit(req.group, req.topic, req.queue_id, req.commit_offset)
            if broker.offsets.detail:
                broker.offsets.committed(src, req.group, req.topic, req.queue_id, req.commit_offset, "pull")
        broker.execute_pull(src, req_id, req, True)

    def compose(self, code: int, msgs: tuple) -> tuple[int, int]:
        """composeResponseHeader (and the result handler's PULL_OFFSET_MOVED rule) on a slave."""
        suggest = MASTER_ID
        if self.slave_read_enable and self.broker.suggest_pulling_from_slave(msgs):
            suggest = WHICH_BROKER_WHEN_CONSUME_SLOWLY
        if self.v5 and code != SUCCESS and suggest == MASTER_ID:
            return PULL_RETRY_IMMEDIATELY, MASTER_ID  # minBrokerIdInGroup is the master's: go there
        if code == PULL_OFFSET_MOVED and not self.broker.store_cfg.offset_check_in_slave:
            return PULL_RETRY_IMMEDIATELY, MASTER_ID
        return code, suggest
