"""A consumer entry of a scenario: its tunables, and how it consumes (5.3.3 defaults).

`PushConsumerConfig`: DefaultMQPushConsumer and ClientConfig subsets (an entry's `client:`).
`LitePullSpec`: DefaultLitePullConsumer's own settings (an entry's `lite_pull:`,
models/consumer/lite_pull_consumer.py). `PopSpec`: POP consumption (an entry's `pop:`,
models/consumer/pop_consumer.py). `ConsumerSpec`: one `consumers:` entry of the scenario, the
client processes it makes and the listener in each.

Bounds of `PushConsumerConfig` are DefaultMQPushConsumerImpl.checkConfig's where it has one
(consumeThreadMax 1..1000, consumeConcurrentlyMaxSpan and pullThresholdForQueue 1..65535,
pullThresholdSizeForQueue 1..1024 MiB, pullInterval 0..65535 ms, pullBatchSize 1..1024); times are
at most `sim.limits.MAX_TIME_MS`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from models.names import Count, GroupName, TopicName, Zone
from sim.config import (
    DurationMs,
    Float,
    Int,
    IntMiB,
    IntMin,
    IntMs,
    NodeName,
    NonNegativeIntMs,
    PositiveDurationMs,
    PositiveIntMs,
    Tag,
)
from sim.dist import Constant, Dist
from sim.limits import MAX_TIME_MS

# ClientConfig.clientIP: an address (IPv4, IPv6 or a host name), 1 to 64 characters
ClientIp = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")]

PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL_US = 50_000  # DefaultMQPushConsumerImpl
BROKER_SUSPEND_MAX_TIME_US = 15_000_000  # DefaultMQPushConsumerImpl.BROKER_SUSPEND_MAX_TIME_MILLIS
CONSUMER_TIMEOUT_WHEN_SUSPEND_US = 30_000_000  # CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND
PULL_MAX_IDLE_TIME_US = 120_000_000  # ProcessQueue.PULL_MAX_IDLE_TIME
REBALANCE_WAIT_INTERVAL_US = 20_000_000  # RebalanceService waitInterval
REBALANCE_MIN_INTERVAL_US = 1_000_000  # RebalanceService minInterval (5.2.0+)
OFFSET_ILLEGAL_LATER_US_4X = 10_000_000  # 4.9.8 PullCallback OFFSET_ILLEGAL: executeTaskLater(..., 10000)
NEW_PULL_REQUEST_DELAY_US = 500_000  # RebalancePushImpl dispatchPullRequest delay (5.x)
SEND_BACK_TIMEOUT_US = 5_000_000  # sendMessageBack RPC timeout
LOCAL_RETRY_DELAY_US = 5_000_000  # ConsumeMessageConcurrentlyService.submitConsumeRequestLater
DEFAULT_MAX_RECONSUME_TIMES = 16  # maxReconsumeTimes -1 → 16 for concurrent consumption
INNER_PRODUCER_SEND_TIMEOUT_US = 3_000_000  # the client instance's inner DefaultMQProducer sendMsgTimeout
INNER_PRODUCER_RETRY_TIMES = 2  # its retryTimesWhenSendFailed (3 attempts in all)
CLEAN_EXPIRED_MAX_PER_ROUND = 16  # ProcessQueue.cleanExpiredMsg looks at most at 16 messages a round
EXPIRED_SEND_BACK_DELAY_LEVEL = 3  # cleanExpiredMsg sends back with delay level 3
RESET_OFFSET_CLIENT_SLEEP_US = 10_000_000  # MQClientInstance.resetOffset: TimeUnit.SECONDS.sleep(10)
CONSUME_TIMESTAMP_BEFORE_START_US = 30 * 60_000_000  # DefaultMQPushConsumer.consumeTimestamp: 30 min ago
# orderly consumption (ConsumeMessageOrderlyService, ProcessQueue, RebalanceImpl, 5.3.3)
REBALANCE_LOCK_MAX_LIVE_TIME_US = 30_000_000  # ProcessQueue: rocketmq.client.rebalance.lockMaxLiveTime
REBALANCE_LOCK_INTERVAL_US = 20_000_000  # ProcessQueue.REBALANCE_LOCK_INTERVAL (lockAll period)
LOCK_ALL_INITIAL_DELAY_US = 1_000_000  # ConsumeMessageOrderlyService.start: lockMQPeriodically after 1 s
LOCK_BATCH_TIMEOUT_US = 1_000_000  # RebalanceImpl.lock / lockAll: lockBatchMQ(..., 1000)
UNLOCK_TIMEOUT_US = 1_000_000  # RebalanceImpl.unlockAll at shutdown: unlockBatchMQ(..., 1000, false)
MAX_TIME_CONSUME_CONTINUOUSLY_US = 60_000_000  # rocketmq.client.maxTimeConsumeContinuously
ORDERLY_RELOCK_DELAY_US = 10_000  # ConsumeRequest: tryLockLaterAndReconsume(..., 10) / yield after 60 s
ORDERLY_LOCK_FAILED_DELAY_US = 3_000_000  # tryLockLaterAndReconsume: lock refused → resubmit after 3000
REBALANCE_LATER_US = 500_000  # RebalanceImpl: rebalanceLater(500) when a new queue could not be locked (5.x)
REMOVE_CONSUME_LOCK_WAIT_US = 500_000  # RebalancePushImpl (5.2.0+): tryLock of the consume lock, 500 ms
REMOVE_DROPPED_LOCK_AGE_US = 20_000_000  # 5.2.0+: a dropped queue is unlocked 20 s after its last lock
# 4.x (4.9.8) orderly removal, RebalancePushImpl.removeUnnecessaryMessageQueue / unlockDelay
V4_REMOVE_CONSUME_LOCK_WAIT_US = 1_000_000  # 4.9.8: consumeLock.tryLock(1000, MILLISECONDS)
UNLOCK_DELAY_TIME_US = 20_000_000  # UNLOCK_DELAY_TIME_MILLS: rocketmq.client.unlockDelayTimeMills 20000
V4_NEW_PULL_REQUEST_DELAY_US = 0  # 4.9.8 dispatchPullRequest: executePullRequestImmediately
SUSPEND_MIN_MS, SUSPEND_MAX_MS = 10, 30_000  # submitConsumeRequestLater clamps the suspend time
ORDERLY_MAX_RECONSUME_TIMES = 2**31 - 1  # getMaxReconsumeTimes: -1 → Integer.MAX_VALUE (orderly)


class MessageModel(StrEnum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(StrEnum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class AllocateStrategy(StrEnum):
    AVG = "AVG"
    AVG_BY_CIRCLE = "AVG_BY_CIRCLE"
    CONSISTENT_HASH = "CONSISTENT_HASH"
    CONFIG = "CONFIG"
    MACHINE_ROOM = "MACHINE_ROOM"
    MACHINE_ROOM_NEARBY = "MACHINE_ROOM_NEARBY"


class MachineRoomResolver(StrEnum):
    """AllocateMachineRoomNearby.MachineRoomResolver, the sim's two implementations
    (models/consumer/allocate_setup.py)."""

    ZONE = "ZONE"  # the `zone` the scenario gives each broker and consumer
    NAMING = "NAMING"  # the text before the first '@' of the broker name and of the consumer's name


class ConfiguredQueue(BaseModel):
    """One MessageQueue of AllocateMessageQueueByConfig.messageQueueList."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    topic: str | None = Field(None, min_length=1, max_length=255, description=(
        "topic (null: the consumer's; '%RETRY%<group>' for its retry queue)"))
    broker: NodeName = Field(description="brokerName")
    queue_id: Int = Field(ge=0, le=1023, description="queueId")  # a topic has at most 1024 queues per broker


class PushConsumerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    message_model: MessageModel = Field(MessageModel.CLUSTERING, description=(
        "CLUSTERING (queues shared) or BROADCASTING (messageModel)"))
    consume_from_where: ConsumeFromWhere = Field(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, description=(
        "where a new group starts (consumeFromWhere)"))
    # null is the Java default, half an hour before the consumer was created: before any message here
    consume_timestamp_ms: DurationMs | None = Field(None, description=(
        "CONSUME_FROM_TIMESTAMP: simulated ms to start from (null: 30 min before start) (consumeTimestamp)"))
    allocate_message_queue_strategy: AllocateStrategy = Field(AllocateStrategy.AVG, description=(
        "how members split queues: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG, MACHINE_ROOM, MACHINE_ROOM_NEARBY "
        "(allocateMessageQueueStrategy)"))
    consume_thread_max: Int = Field(20, gt=0, le=1000, description=(
        "listener threads (consumeThreadMin = consumeThreadMax)"))
    consume_concurrently_max_span: Int = Field(2_000, gt=0, le=65_535, description=(
        "offset span in a queue above which pulling pauses (consumeConcurrentlyMaxSpan)"))
    pull_threshold_for_queue: Int = Field(1_000, gt=0, le=65_535, description=(
        "cached messages per queue above which pulling pauses (pullThresholdForQueue)"))
    pull_threshold_size_for_queue_mib: IntMiB = Field(100, gt=0, le=1024, description=(
        "cached MiB per queue above which pulling pauses (pullThresholdSizeForQueue)"))
    pull_batch_size: Int = Field(32, gt=0, le=1024, description="messages per pull request (pullBatchSize)")
    pull_interval_ms: IntMs = Field(0, ge=0, le=65_535, description="ms between pulls of one queue (pullInterval)")
    # orderly: Integer.MAX_VALUE, never
    max_reconsume_times: Int = Field(-1, ge=-1, le=10_000, description=(
        "retries before the DLQ; -1 means 16, ORDERLY: never (maxReconsumeTimes)"))
    persist_consumer_offset_interval_ms: PositiveIntMs = Field(5_000, description=(
        "ms between offset commits to the broker (persistConsumerOffsetInterval)"))
    await_termination_millis_when_shutdown: NonNegativeIntMs = Field(0, description=(
        "awaitTerminationMillisWhenShutdown"))
    suspend_current_queue_time_millis: NonNegativeIntMs = Field(1_000, description=(
        "ORDERLY: ms a failed queue waits before it is retried, used clamped to 10 .. 30000 "
        "(suspendCurrentQueueTimeMillis)"))
    consume_message_batch_max_size: Int = Field(1, gt=0, le=1024, description=(
        "messages per listener call (consumeMessageBatchMaxSize)"))
    consume_timeout_min: IntMin = Field(15, gt=0, le=MAX_TIME_MS // 60_000, description="consumeTimeout (minutes)")
    pull_time_delay_mills_when_exception: NonNegativeIntMs = Field(1_000, description=(
        "ms before retrying a failed pull (pullTimeDelayMillsWhenException)"))
    heartbeat_broker_interval_ms: PositiveIntMs = Field(30_000, description=(
        "ms between heartbeats to brokers (heartbeatBrokerInterval)"))
    poll_name_server_interval_ms: PositiveIntMs = Field(30_000, description=(
        "ms between route refreshes (pollNameServerInterval)"))
    mq_client_api_timeout_ms: PositiveIntMs = Field(3_000, description=(
        "ms timeout of name-server and broker requests (mqClientApiTimeout)"))
    enable_heartbeat_channel_event_listener: bool | None = Field(None, description=(
        "heartbeat a broker and rebalance at once when a connection to it becomes active, e.g. after the "
        "broker restarted (enableHeartbeatChannelEventListener); null: the client version's default, true "
        "for 5.x; a 4.x client has no such listener"))
    # ClientConfig.instanceName / clientIP: the client id is <clientIP>@<instanceName> (buildMQClientId)
    instance_name: NodeName | None = Field(None, description=(
        "instanceName; null: DEFAULT, which start() makes <pid>#<nanoTime>, unique per process. Set, the client id "
        "is <client_ip>@<instance_name>: two members with the same one share a client id (models/client_instance.py)"))
    client_ip: ClientIp | None = Field(None, description=(
        "clientIP (with instance_name): the host address in the client id; null: this node's own"))

    # AllocateMessageQueueConsistentHash.virtualNodeCnt
    virtual_node_cnt: Int = Field(10, ge=0, le=10_000, description=(
        "CONSISTENT_HASH: virtual nodes per member (virtualNodeCnt)"))
    # AllocateMessageQueueByMachineRoom.consumeridcs
    consumeridcs: list[str] = Field([], max_length=1_000, description=(
        "MACHINE_ROOM: the rooms this group consumes (consumeridcs)"))
    # AllocateMessageQueueByConfig.messageQueueList
    message_queue_list: list[ConfiguredQueue] = Field([], max_length=10_000, description=(
        "CONFIG: the queues every member consumes ({broker, queue_id, topic})"))
    # AllocateMachineRoomNearby's inner strategy
    machine_room_nearby_inner: AllocateStrategy = Field(AllocateStrategy.AVG, description=(
        "MACHINE_ROOM_NEARBY: strategy inside a room"))
    # AllocateMachineRoomNearby's resolver
    machine_room_resolver: MachineRoomResolver = Field(MachineRoomResolver.ZONE, description=(
        "MACHINE_ROOM_NEARBY: room of a node, ZONE (its zone) or NAMING (text before '@')"))

    @field_validator("machine_room_nearby_inner")
    @classmethod
    def _not_nested(cls, value: AllocateStrategy) -> AllocateStrategy:
        if value is AllocateStrategy.MACHINE_ROOM_NEARBY:
            raise ValueError("the inner strategy of MACHINE_ROOM_NEARBY is one of the other five")
        return value


class LitePullSpec(BaseModel):
    """DefaultLitePullConsumer's settings (5.3.3 defaults): a `lite_pull` consumer entry polls
    (models/consumer/lite_pull_consumer.py) instead of being pushed to."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    auto_commit: bool = Field(True, description="autoCommit: poll() commits the consumed offsets")
    auto_commit_interval_ms: PositiveDurationMs = Field(5_000, ge=1_000, description=(
        "autoCommitIntervalMillis: the least time between two commits (at the next poll; at least 1 s)"))
    pull_batch_size: Int = Field(10, gt=0, le=1024, description="pullBatchSize: messages per pull, and per poll()")


class PopSpec(BaseModel):
    """POP consumption (5.x; models/consumer/pop_consumer.py): a `pop` consumer entry pops from the
    brokers instead of pulling its own queues — no rebalance, no offsets, each message acked."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    client: Literal["simple", "push"] = Field("simple", description=(
        "simple: the gRPC SimpleConsumer through the proxy (LOCAL mode); push: DefaultMQPushConsumer in POP mode"))
    invisible_duration_ms: PositiveDurationMs = Field(60_000, description=(
        "invisibleDuration of each receive (simple: 10 s .. 12 h, the proxy's bounds) or popInvisibleTime "
        "(push: 5 s .. 300 s); default 60 s (the proxy's defaultInvisibleTimeMills, the push consumer's default)"))
    max_message_num: Int | None = Field(None, gt=0, le=32, description=(
        "messages a receive asks for (maxMessageNum; the proxy caps it at 32) or popBatchNums (push); "
        "null: 16 for simple, 32 (popBatchNums) for push"))
    await_duration_ms: PositiveDurationMs = Field(30_000, description=(
        "simple: the receive's awaitDuration (the proxy long-polls it, clamped to 5 s .. 20 s)"))
    threads: Int = Field(1, gt=0, le=1_000, description=(
        "simple: application threads, each looping receive → process → ack (push: client.consume_thread_max)"))
    orderly: bool = Field(False, description=(
        "simple: a FIFO group (orderly POP: a queue's batch blocks it until acked or visible again; the "
        "group's per-key order is checked)"))

    @model_validator(mode="after")
    def _bounds(self) -> PopSpec:
        problems = []
        if self.client == "simple" and not 10_000 <= self.invisible_duration_ms <= 12 * 3_600_000:
            problems.append("a SimpleConsumer's invisible_duration_ms must be within 10 s .. 12 h (the proxy "
                            "refuses others: minInvisibleTimeMillsForRecv, maxInvisibleTimeMills)")
        if self.client == "push" and not 5_000 <= self.invisible_duration_ms <= 300_000:
            problems.append("a POP push consumer's invisible_duration_ms must be within 5 s .. 300 s "
                            "(DefaultMQPushConsumer would silently use 60 s)")
        if self.client == "push" and self.orderly:
            problems.append("a push consumer never pops orderly (clientRebalance is forced for orderly "
                            "listeners); use consume_mode ORDERLY without pop, or client: simple")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def batch(self) -> int:
        return self.max_message_num or (16 if self.client == "simple" else 32)


class ConsumerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: NodeName = Field("consumer", description=(
        "node name and client id (with count N: <name>-1..<name>-N; client.instance_name: the id differs)"))
    count: Count = Field(1, description="instances of this entry")
    zone: Zone = Field("zone-a", description="zone (machine room) of its hosts")
    group: GroupName = Field("please_rename_unique_group_name", description="consumer group (consumerGroup)")
    topic: TopicName = Field("TopicTest", description="topic it subscribes to")
    tags: list[Tag] | None = Field(None, max_length=1_000, description="tags it subscribes to (null: '*')")
    consume_time_ms: Dist = Field(Constant(value=1.0), description=(
        "ms the listener takes per message (a distribution; '2ms' works)"))
    failure_probability: Float = Field(0.0, ge=0, lt=1, description=(
        "chance the listener fails: RECONSUME_LATER, or SUSPEND_CURRENT_QUEUE_A_MOMENT when ORDERLY (0 .. <1)"))
    batch_failure: Literal["reconsume_later", "ack_index"] = Field("reconsume_later", description=(
        "CONCURRENTLY with client.consume_message_batch_max_size > 1: what the listener returns when a "
        "message of its batch fails: RECONSUME_LATER (the whole batch is sent back) or CONSUME_SUCCESS "
        "with ackIndex before the failed message (models/consumer/consume_batch.py)"))
    start_ms: DurationMs = Field(1_000, description="ms when it starts")
    stop_ms: PositiveDurationMs | None = Field(None, description=(
        "graceful shutdown (DefaultMQPushConsumer.shutdown) at this time"))
    # the listener registered: MessageListenerConcurrently, or MessageListenerOrderly (a failure suspends the queue)
    consume_mode: Literal["CONCURRENTLY", "ORDERLY"] = Field("CONCURRENTLY", description=(
        "CONCURRENTLY or ORDERLY (MessageListenerOrderly: broker locks, one batch at a time per queue)"))
    client: PushConsumerConfig = Field(PushConsumerConfig(), description=(
        "DefaultMQPushConsumer / ClientConfig settings"))
    lite_pull: LitePullSpec | None = Field(None, description=(
        "a DefaultLitePullConsumer (subscribe mode) instead of a push consumer: its settings (null: push)"))
    pop: PopSpec | None = Field(None, description=(
        "POP consumption (5.x): a SimpleConsumer or a POP-mode push consumer instead (null: pull-based)"))

    @model_validator(mode="after")
    def _orderly_needs_clustering(self) -> ConsumerSpec:
        problems = []
        if self.lite_pull is not None and (self.consume_mode == "ORDERLY" or self.failure_probability
                                           or self.client.message_model is MessageModel.BROADCASTING):
            problems.append("lite_pull is modelled for CONCURRENTLY, CLUSTERING consumers without failure_probability "
                            "(the application polls and handles failures itself)")
        if self.pop is not None and (self.lite_pull is not None or self.consume_mode == "ORDERLY"
                                     or self.client.message_model is MessageModel.BROADCASTING
                                     or self.client.consume_message_batch_max_size > 1):
            problems.append("pop is modelled for CONCURRENTLY, CLUSTERING consumers without lite_pull or batch "
                            "consumption (orderly POP: pop.orderly)")
        if self.pop is not None and self.client.instance_name is not None:
            problems.append("client.instance_name is modelled for push and lite pull consumers (a POP consumer's "
                            "client id is its node name)")
        if self.client.client_ip is not None and self.client.instance_name is None:
            problems.append("client.client_ip enters the client id only with client.instance_name (without it the "
                            "id ends in <pid>#<nanoTime>, unique per process)")
        if self.consume_mode == "ORDERLY" and self.client.message_model is MessageModel.BROADCASTING:
            problems.append("consume_mode ORDERLY with message_model BROADCASTING is not modelled; use CLUSTERING")
        if problems:
            raise ValueError("; ".join(problems))
        return self
