"""Messages and queues: common.message.Message / MessageExt / MessageQueue.

A message's identity is an integer, `msg_id = producer_index << 32 | seq` (the producer's index in
scenario order, and its 1-based sequence number). It plays the role of the `UNIQ_KEY` property
(MessageClientIDSetter): set once per message and reused by every retry, so a re-sent message has
the same id but a new CommitLog record. The key string a person reads (`p-1-42`) is derived from
it only for display (analysis/checkers/ledger.py `display_key`).

`Message` is what a producer sends (the request body and header of SEND_MESSAGE); the broker copies
its fields into the CommitLog's arrays and keeps no object. `MessageExt` is a stored message as a
pull returns it (built per delivery from those arrays). Both are NamedTuples built on hot paths
without NamedTuple's Python-level `__new__` (`fast_constructor`).

`props` carries the rare properties a plain message does not have (None for most messages):
`RETRY_TOPIC`, `REAL_TOPIC`, `REAL_QID`, `DELAY`, `ORIGIN_MESSAGE_ID`, ..., as a dict keyed by
the Java property name (MessageConst).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T", bound=tuple)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (5.x)
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
UNIQ_KEY_CHARS = 32  # 16-byte IPv4 client id, hex encoded
FIXED_RECORD_BYTES = 91  # MessageExtEncoder.calMsgLength, IPv4 hosts, v1 format
BASE_PROPERTIES_BYTES = 10 + UNIQ_KEY_CHARS + 10  # UNIQ_KEY=<32 hex>, WAIT=true (name\x01value\x02)

# MessageConst property names used in `props`
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # MessageConst (Message.setDeliverTimeMs); here in sim µs
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"  # the wheel slot a parked timer message waits in; here in sim µs
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"

SEQ_BITS = 32  # msg_id = producer_index << SEQ_BITS | seq (analysis/checkers/ledger.py reads it the same way)
SEQ_MASK = (1 << SEQ_BITS) - 1


def msg_id_of(producer_index: int, seq: int) -> int:
    """The id of producer `producer_index`'s message number `seq` (1-based)."""
    return producer_index << SEQ_BITS | seq


class MessageQueue(NamedTuple):
    """common.message.MessageQueue; tuple order = Java compareTo (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class Message(NamedTuple):
    """A message as a producer sends it. `size_bytes` is its encoded CommitLog record length
    (computed once, by `record_bytes`); `shard` is the sharding key index (KEYS `k<shard>`), or -1."""

    msg_id: int
    topic: str
    tags: str | None
    shard: int
    body_bytes: int
    born_us: int
    size_bytes: int
    reconsume_times: int = 0
    delay_level: int = 0  # DELAY property (0: none)
    props: dict[str, Any] | None = None


class MessageBatch(NamedTuple):
    """common.message.MessageBatch: messages of one topic sent in one request and stored all or
    nothing; each keeps its own id (uniq key). `size_bytes` is the sum of the records' sizes (the
    encoded batch body the client checks against maxMessageSize)."""

    msgs: tuple[Message, ...]
    topic: str
    born_us: int
    size_bytes: int
    shard: int = -1

    @property
    def msg_id(self) -> int:
        return self.msgs[0].msg_id

    @property
    def body_bytes(self) -> int:
        """The batch's body: its messages encoded (what Validators.checkMessage measures)."""
        return self.size_bytes


class MessageExt(NamedTuple):
    """common.message.MessageExt: a stored message as getMessage returns it."""

    msg_id: int
    topic: str  # the topic it is stored under
    queue_id: int
    queue_offset: int
    phys_offset: int  # commitLogOffset
    size_bytes: int  # storeSize
    store_us: int  # storeTimestamp (bornTimestamp is not kept: the checkers read it from the producer)
    tags: str | None
    reconsume_times: int
    body_bytes: int
    props: dict[str, Any] | None

    @property
    def user_topic(self) -> str:
        """The topic the application sees: RETRY_TOPIC for a retry message, else the topic."""
        if self.props and PROPERTY_RETRY_TOPIC in self.props:
            return self.props[PROPERTY_RETRY_TOPIC]
        return self.topic


def fast_constructor(cls: type[T]) -> Callable[[tuple], T]:
    """Build a NamedTuple `cls` from one tuple of *all* its fields in declared order, without
    the Python-level `__new__` NamedTuple generates: about half the cost of `cls(...)`, which
    matters for the payloads built once or twice per simulated message."""
    return partial(tuple.__new__, cls)


new_message = fast_constructor(Message)
new_message_ext = fast_constructor(MessageExt)


def properties_bytes(tags: str | None, keys_chars: int, props: dict[str, Any] | None) -> int:
    """Length of the encoded properties string (`name\\x01value\\x02` pairs)."""
    size = BASE_PROPERTIES_BYTES
    if tags:
        size += 6 + len(tags)  # TAGS
    if keys_chars:
        size += 6 + keys_chars  # KEYS
    if props:
        for name, value in props.items():
            size += len(name) + 2 + len(str(value))
    return size


def record_bytes(topic: str, body_bytes: int, tags: str | None = None, keys_chars: int = 0,
                 props: dict[str, Any] | None = None, reconsume_times: int = 0) -> int:
    """CommitLog record size: 91 + body + topic + properties (MessageExtEncoder.calMsgLength)."""
    size = FIXED_RECORD_BYTES + body_bytes + len(topic) + properties_bytes(tags, keys_chars, props)
    if reconsume_times:
        size += 20  # RECONSUME_TIME, MAX_RECONSUME_TIMES
    return size


def shard_key(shard: int) -> str:
    """The KEYS property of sharding key index `shard` (`k<shard>`)."""
    return f"k{shard}"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units (tags code on the ConsumeQueue)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# transactional messages (MessageConst / TopicValidator / TransactionalMessageUtil)
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"  # TransactionalMessageUtil.TRANSACTION_ID (5.x)
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
# the record's bornTimestamp (a fixed header field in RocketMQ; this store keeps it as a property of
# transactional records only, which the check-back reads: the record grows by ~30 bytes)
PROPERTY_BORN_TIMESTAMP = "__bornTimestampUs"
# the body of an op message ("<offset>,<offset>,"): this store keeps no bodies, so it rides here
PROPERTY_OP_BODY = "__opBody"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
