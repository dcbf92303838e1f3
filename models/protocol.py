"""Remoting requests and responses (remoting.protocol.*), and the status enums.

Payloads are NamedTuples: cheap to build, immutable, and dispatched by type at the receiving
node. Response codes are ResponseCode's integers. Stored messages travel as `MessageExt`
(models/message.py), never as the broker's storage layout.
"""

from __future__ import annotations

from typing import NamedTuple

from models.message import Message, MessageExt, MessageQueue, fast_constructor
from models.version import V4, V5

# ResponseCode / RemotingSysResponseCode
SUCCESS, SYSTEM_ERROR, SYSTEM_BUSY = 0, 1, 2
# controller (ResponseCode 2000+): the request reached a controller that is not the Raft leader;
# the master named is not the current one / its epoch is stale; no alive candidate
CONTROLLER_NOT_LEADER, CONTROLLER_INVALID_MASTER, CONTROLLER_FENCED_MASTER_EPOCH = 2007, 2002, 2000
CONTROLLER_MASTER_NOT_AVAILABLE, CONTROLLER_ELECT_MASTER_FAILED = 2004, 2012
CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, CONTROLLER_MASTER_STILL_EXIST = 2013, 2011
CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, CONTROLLER_BROKER_NOT_ALIVE = 2001, 2006
CONTROLLER_INVALID_REPLICAS = 2003  # ResponseCode: a SyncStateSet member the controller never registered
FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT = 10, 11, 12
MESSAGE_ILLEGAL, SERVICE_NOT_AVAILABLE, NO_PERMISSION, TOPIC_NOT_EXIST = 13, 14, 16, 17
PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED, QUERY_NOT_FOUND = 19, 20, 21, 22
INVALID_PARAMETER = 29
NO_BUYER_ID, NOT_IN_CURRENT_UNIT = 204, 205
GO_AWAY = 1500  # 5.3.1+: a server shutting down gracefully (NettyRemotingAbstract)

# SendStatus (client)
SEND_OK = "SEND_OK"
SEND_STATUS_BY_CODE = {SUCCESS: SEND_OK, FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                       FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                       SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE"}
# DefaultMQProducer.retryResponseCodes: 4.9.8, and 5.3.3 (SYSTEM_BUSY since 5.3.0, GO_AWAY since 5.3.1)
RETRY_RESPONSE_CODES_4X = frozenset({TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, NO_PERMISSION,
                                     NO_BUYER_ID, NOT_IN_CURRENT_UNIT})
RETRY_RESPONSE_CODES = RETRY_RESPONSE_CODES_4X | {SYSTEM_BUSY, GO_AWAY}
RETRY_RESPONSE_CODES_BY_VERSION = {V4: RETRY_RESPONSE_CODES_4X, V5: RETRY_RESPONSE_CODES}


class QueueData(NamedTuple):
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6  # PermName.PERM_READ | PERM_WRITE


class BrokerData(NamedTuple):
    broker_name: str
    addrs: tuple[tuple[int, str], ...]  # (brokerId, node name), brokerId 0 = master


class TopicRouteData(NamedTuple):
    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]


class RegisterBroker(NamedTuple):
    broker_name: str
    broker_id: int
    addr: str
    topics: tuple[tuple[str, int, int], ...]  # (topic, read queues, write queues)
    state_version: int = 0  # DataVersion.stateVersion: the master epoch in controller mode (0: classic)


class GetRouteInfo(NamedTuple):
    topic: str


class SendMessage(NamedTuple):
    msg: Message
    queue_id: int


class SendBatchMessage(NamedTuple):
    """SEND_BATCH_MESSAGE: one request carrying a MessageBatch, stored all or nothing."""

    msgs: tuple[Message, ...]
    queue_id: int


class SendResponse(NamedTuple):
    code: int
    queue_offset: int = -1
    phys_offset: int = -1


class PullMessage(NamedTuple):
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    commit_offset: int  # -1: FLAG_COMMIT_OFFSET not set
    suspend_timeout_us: int  # 0: FLAG_SUSPEND not set
    tag_codes: frozenset | None  # SubscriptionData.codeSet (String.hashCode of each tag); None = '*'


class PullResponse(NamedTuple):
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msgs: tuple[MessageExt, ...] = ()
    suggest_which_broker_id: int = 0  # PullMessageResponseHeader.suggestWhichBrokerId


class QueryConsumerOffset(NamedTuple):
    group: str
    topic: str
    queue_id: int


class GetMaxOffset(NamedTuple):
    topic: str
    queue_id: int


class OffsetResponse(NamedTuple):
    code: int
    offset: int = -1


class UpdateConsumerOffset(NamedTuple):
    group: str
    topic: str
    queue_id: int
    offset: int


class Heartbeat(NamedTuple):
    client_id: str
    consumer_groups: tuple[tuple[str, tuple[str, ...]], ...]  # (group, subscribed topics)
    producer_groups: tuple[str, ...] = ()  # HeartbeatData.producerDataSet


class GetConsumerList(NamedTuple):
    group: str


class ConsumerList(NamedTuple):
    code: int
    client_ids: tuple[str, ...] = ()


class NotifyConsumerIdsChanged(NamedTuple):
    group: str


class ConsumerSendMsgBack(NamedTuple):
    """CONSUMER_SEND_MSG_BACK: the broker looks the message up by its CommitLog offset."""

    group: str
    phys_offset: int  # commitLogOffset of the consumed copy
    msg_id: int  # originMsgId (its uniq key)
    origin_topic: str
    delay_level: int
    max_reconsume_times: int


class CodeResponse(NamedTuple):
    code: int


# Per-message payloads, built on hot paths from a tuple of all fields (models/message.py).
new_send_message = fast_constructor(SendMessage)
new_send_response = fast_constructor(SendResponse)
new_pull_message = fast_constructor(PullMessage)
new_pull_response = fast_constructor(PullResponse)


# --- transactional messages (models/producer/transaction_producer.py, models/broker/end_transaction.py,
# models/broker/transaction_check.py); MessageSysFlag's transaction types
TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE = 0, 1 << 2
TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE = 2 << 2, 3 << 2
ILLEGAL_OPERATION = 604  # ResponseCode.ILLEGAL_OPERATION (5.1.1+: an end later than the immunity time)


class EndTransaction(NamedTuple):
    """END_TRANSACTION (EndTransactionRequestHeader), always oneway: the producer's end after its
    local transaction (`from_transaction_check` False) or its answer to a check (True)."""

    producer_group: str
    tran_state_table_offset: int  # the half message's queue offset
    commit_log_offset: int  # the half message's CommitLog offset
    msg_id: int  # uniq key (= transactionId)
    commit_or_rollback: int  # TRANSACTION_COMMIT_TYPE / _ROLLBACK_TYPE / _NOT_TYPE (UNKNOW)
    from_transaction_check: bool


class CheckTransactionState(NamedTuple):
    """CHECK_TRANSACTION_STATE (CheckTransactionStateRequestHeader), broker → producer, oneway;
    the offsets are those of the newest half copy (the one the check wrote back)."""

    producer_group: str  # PGROUP of the half message (the client picks its producer by it)
    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: int
    broker_name: str


class UnregisterClient(NamedTuple):
    """UNREGISTER_CLIENT (UnregisterClientRequestHeader): a producer or a consumer of a group shuts
    down (MQClientInstance.unregisterClient); the other group field is None."""

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


# --- HA (store.ha: the master's HA port; not remoting commands in RocketMQ, raw frames) ---------
class HaConnect(NamedTuple):
    """A slave's HAClient opens a connection to its master's HA port."""


class HaReport(NamedTuple):
    """DefaultHAClient.reportSlaveMaxOffset: the slave's CommitLog max offset (8 bytes)."""

    offset: int


class HaTransfer(NamedTuple):
    """DefaultHAConnection.WriteSocketService frame: data from physical `offset`; `records` are
    (physical offset, RECORD bytes, props) of whole records; `torn_bytes` > 0 when `offset` lies
    inside a master record (a diverged slave: those bytes are the tail of a foreign record).
    No records and no torn bytes: a heartbeat header."""

    offset: int
    records: tuple = ()
    torn_bytes: int = 0
    epoch: int = 0  # controller mode (AutoSwitchHAConnection header): the master epoch of `offset`,
    epoch_start: int = 0  # that epoch's start offset, and the master's confirm offset
    confirm: int = -1


class HaClose(NamedTuple):
    """The HA connection is closed by this end (housekeeping or an offset mismatch)."""


class HaHandshake(NamedTuple):
    """Controller mode, AutoSwitchHAConnection.buildHandshakeBuffer: the master's answer to a
    slave's handshake: its max offset and every entry of its epoch file ((epoch, start offset), in
    epoch order). The slave truncates to the consistent point before it reports (auto_switch_ha.py)."""

    code: int
    max_offset: int = 0
    epochs: tuple[tuple[int, int], ...] = ()


# --- controller mode (controller.ControllerManager / ReplicasManager requests) ------------------
class BrokerHeartbeatToController(NamedTuple):
    """BROKER_HEARTBEAT (oneway, to every controller): liveness and election facts."""

    broker_name: str
    broker_id: int  # the controller-assigned id (≥ 1)
    addr: str
    epoch: int  # last epoch of the broker's epoch file
    max_offset: int  # CommitLog max physical offset
    timeout_us: int  # controllerHeartBeatTimeoutMills
    priority: int  # brokerElectionPriority


class RegisterBrokerToController(NamedTuple):
    """CONTROLLER_REGISTER_BROKER: the answer names the master only if it is alive."""

    broker_name: str
    broker_id: int
    addr: str


class GetReplicaInfo(NamedTuple):
    """CONTROLLER_GET_REPLICA_INFO (read: served from the leader's memory)."""

    broker_name: str


class ElectMaster(NamedTuple):
    """CONTROLLER_ELECT_MASTER from a broker (`broker_id`) that found no master."""

    broker_name: str
    broker_id: int


class AlterSyncStateSet(NamedTuple):
    """CONTROLLER_ALTER_SYNC_STATE_SET from the master."""

    broker_name: str
    master_id: int
    master_epoch: int
    members: tuple[int, ...]
    sync_state_set_epoch: int


class ReplicaInfo(NamedTuple):
    """The controller's answer (and NOTIFY_BROKER_ROLE_CHANGED's body): the group's master (id 0 /
    "" when none), its epoch, the SyncStateSet and its epoch; `code` SUCCESS or a controller code."""

    code: int
    master_id: int = 0
    master_addr: str = ""
    master_epoch: int = 0
    members: tuple[int, ...] = ()
    sync_state_set_epoch: int = 0


class GetAllDelayOffset(NamedTuple):
    """GET_ALL_DELAY_OFFSET: a slave's SlaveSynchronize.syncDelayOffset (controller mode here)."""


class AllDelayOffsets(NamedTuple):
    code: int
    entries: tuple[tuple[int, int], ...] = ()  # (delay level, next queue offset to deliver)


class GetControllerMetadata(NamedTuple):
    """CONTROLLER_GET_METADATA_INFO: which controller is the Raft leader."""


class ControllerMetadata(NamedTuple):
    code: int
    leader: str = ""  # the leader's node name, "" when none is known


class NotifyBrokerRoleChanged(NamedTuple):
    """NOTIFY_BROKER_ROLE_CHANGED (oneway, controller → every active broker of the group)."""

    info: ReplicaInfo


# --- slave metadata, offsets by time, reset ------------------------------------------------------
class GetAllConsumerOffset(NamedTuple):
    """GET_ALL_CONSUMER_OFFSET (SlaveSynchronize.syncConsumerOffset)."""


class AllConsumerOffsets(NamedTuple):
    code: int
    entries: tuple[tuple[str, str, int, int], ...] = ()  # (group, topic, queue id, offset)


class SearchOffset(NamedTuple):
    """SEARCH_OFFSET_BY_TIMESTAMP (MQAdminImpl.searchOffset): a queue offset by store time."""

    topic: str
    queue_id: int
    timestamp_us: int


class ResetConsumerClientOffset(NamedTuple):
    """RESET_CONSUMER_CLIENT_OFFSET (Broker2Client.resetOffset → MQClientInstance.resetOffset)."""

    topic: str
    group: str
    offsets: tuple[tuple[str, int, int], ...]  # (broker name, queue id, offset)


class LockBatchMQ(NamedTuple):
    """LOCK_BATCH_MQ (LockBatchRequestBody): lock these queues of `group` for `client_id` on the
    master; answered with LockBatchResponse."""

    group: str
    client_id: str
    mqs: tuple[MessageQueue, ...]


class LockBatchResponse(NamedTuple):
    """LockBatchResponseBody.lockOKMQSet: the queues of the request now held by the client."""

    code: int
    locked: tuple[MessageQueue, ...] = ()


class UnlockBatchMQ(NamedTuple):
    """UNLOCK_BATCH_MQ (UnlockBatchRequestBody): release the client's locks on these queues
    (oneway from a rebalance removal, a request at shutdown)."""

    group: str
    client_id: str
    mqs: tuple[MessageQueue, ...]


# --- POP consumption (5.x: models/broker/pop_message_processor.py, models/broker/ack_message_processor.py,
# models/consumer/pop_consumer.py); ResponseCode values
NO_MESSAGE, POLLING_FULL, POLLING_TIMEOUT = 208, 209, 210
INVALID_RECEIPT_HANDLE = 40020  # the proxy's gRPC Code.INVALID_RECEIPT_HANDLE ("receipt handle is expired")
POP_ALL_QUEUES = -1  # queueId -1: the broker picks the queues (the proxy's BROKER_ACTING_QUEUE_ID)


class ReceiptHandle(NamedTuple):
    """ExtraInfoUtil's extra info (the message's PROPERTY_POP_CK): which checkpoint holds the message.
    `retry`: the message was read from the group's POP retry topic (topic type retry V1)."""

    ck_start_offset: int
    pop_time_us: int
    invisible_us: int
    revive_qid: int
    retry: bool
    broker_name: str
    queue_id: int
    queue_offset: int


class PopMessage(NamedTuple):
    """POP_MESSAGE (PopMessageRequestHeader). `proxy`: sent by the gRPC proxy for a SimpleConsumer
    (its checks and its dead-letter filter apply); `order`: orderly POP."""

    group: str
    topic: str
    queue_id: int  # POP_ALL_QUEUES: every queue of the topic on this broker
    max_msg_nums: int
    invisible_us: int
    poll_us: int  # how long the broker may hold the request (0: answer at once)
    order: bool
    tag_codes: frozenset | None
    proxy: bool
    # initMode (ConsumeInitMode): where a group's first pop of a queue starts, "MIN" or "MAX"
    # (PopMessageProcessor.getInitOffset, models.broker.pop_init_offset)
    init_mode: str = "MAX"


class PopResponse(NamedTuple):
    """POLLING_TIMEOUT / NO_MESSAGE answers carry nothing; SUCCESS the messages, each with its handle."""

    code: int
    msgs: tuple[tuple[MessageExt, ReceiptHandle], ...] = ()


class AckMessage(NamedTuple):
    """ACK_MESSAGE (AckMessageRequestHeader) of one message by its receipt handle."""

    group: str
    topic: str  # the topic the handle names (the POP retry topic for a retry message)
    handle: ReceiptHandle
    proxy: bool


class ChangeInvisibleTime(NamedTuple):
    """CHANGE_MESSAGE_INVISIBLETIME: the message becomes visible `invisible_us` from now."""

    group: str
    topic: str
    handle: ReceiptHandle
    invisible_us: int
    proxy: bool


class ChangeInvisibleTimeResponse(NamedTuple):
    code: int
    handle: ReceiptHandle | None = None  # the new handle (popTime = now)
