"""Messages and queues: common.message.Message / MessageExt / MessageQueue.

A message is an immutable tuple; the per-message cost is one tuple, shared by the producer's
request, the CommitLog record and every pull response (no copies). `uniq_key` plays the role of
the `UNIQ_KEY` property (MessageClientIDSetter): it is set once per send and reused by every
retry, so a re-sent message has the same key but a new CommitLog record.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple, TypeVar

T = TypeVar("T", bound=tuple)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
UNIQ_KEY_CHARS = 32  # 16-byte IPv4 client id, hex encoded
FIXED_RECORD_BYTES = 91  # MessageExtEncoder.calMsgLength, IPv4 hosts, v1 format


class MessageQueue(NamedTuple):
    """common.message.MessageQueue; tuple order = Java compareTo (topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


class Message(NamedTuple):
    """The message as stored. `topic` is where it is stored; `origin_topic` the user's topic."""

    uniq_key: str
    topic: str
    tags: str | None
    keys: str | None
    body_bytes: int
    born_us: int
    producer: str
    reconsume_times: int = 0
    origin_topic: str = ""  # RETRY_TOPIC property: the user topic of a retry message
    delay_level: int = 0  # DELAY property
    real_topic: str = ""  # REAL_TOPIC property (while parked in SCHEDULE_TOPIC_XXXX)
    real_queue_id: int = -1  # REAL_QID property

    @property
    def user_topic(self) -> str:
        return self.origin_topic or self.topic


# A producer's new message: the fields after `producer`, as Message's defaults give them.
NEW_MESSAGE_DEFAULTS = tuple(Message._field_defaults.values())


def fast_constructor(cls: type[T]) -> Callable[[tuple], T]:
    """Build a NamedTuple `cls` from one tuple of *all* its fields in declared order, without
    the Python-level `__new__` NamedTuple generates: about half the cost of `cls(...)`, which
    matters for the few payloads built once or twice per simulated message."""
    return partial(tuple.__new__, cls)


new_message = fast_constructor(Message)


def properties_bytes(msg: Message) -> int:
    """Length of the encoded properties string (name\\x01value\\x02 pairs), approximately."""
    size = 10 + UNIQ_KEY_CHARS  # UNIQ_KEY
    size += 10  # WAIT=true
    if msg.tags:
        size += 6 + len(msg.tags)
    if msg.keys:
        size += 6 + len(msg.keys)
    if msg.origin_topic:
        size += 13 + len(msg.origin_topic)  # RETRY_TOPIC
    if msg.real_topic:
        size += 12 + len(msg.real_topic) + 11  # REAL_TOPIC, REAL_QID
    if msg.reconsume_times:
        size += 20
    return size


def record_bytes(msg: Message) -> int:
    """CommitLog record size: 91 + body + topic + properties (MessageExtEncoder.calMsgLength)."""
    return FIXED_RECORD_BYTES + msg.body_bytes + len(msg.topic) + properties_bytes(msg)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode (tags code on the ConsumeQueue)."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h
