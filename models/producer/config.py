"""A producer entry of a scenario: its tunables and its workload (5.3.3 defaults).

`ProducerConfig`: client.producer.DefaultMQProducer and ClientConfig subsets (an entry's
`client:`). `ProducerSpec`: one `producers:` entry of the scenario, the client processes it
makes, the workload in front of each (models/producer/workload.py reads it) and, with a
`transaction:` section, its TransactionMQProducer settings (transaction_config.py).

Bounds: times at most `sim.limits.MAX_TIME_MS`, sizes and counts within a Java `int`, retries at
most `MAX_RETRY_TIMES` (each retry is a whole send: more would only multiply events). Options
that exist only in 5.x (`start_detector_enable`, `send_msg_max_timeout_per_request_ms`, the async
back-pressure) are refused with `client_version: "4.x"` (rmqsim/scenario/validate.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from models.names import Count, GroupName, TopicName, Zone
from models.producer.transaction_config import TransactionSpec
from sim.config import (
    DurationMs,
    Float,
    Int,
    IntBytes,
    IntMs,
    NodeName,
    PositiveDurationMs,
    PositiveIntMs,
    Tag,
    sizes_in_dist,
)
from sim.dist import MAX_ZIPF_SUPPORT, Constant, Dist, SizeDist
from sim.limits import HARD_MAX_RATE_PER_S, MAX_TIME_MS, MIN_RATE_PER_S

INTEGER_MAX_VALUE = 2**31 - 1
MAX_RETRY_TIMES = 1_000
MIB = 1024 * 1024


class ProducerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    send_msg_timeout_ms: PositiveIntMs = Field(3_000, description=(
        "ms budget of one send() including retries (sendMsgTimeout)"))
    retry_times_when_send_failed: Int = Field(2, ge=0, le=MAX_RETRY_TIMES, description=(
        "extra attempts of a failed sync send (retryTimesWhenSendFailed)"))
    retry_times_when_send_async_failed: Int = Field(2, ge=0, le=MAX_RETRY_TIMES, description=(
        "retryTimesWhenSendAsyncFailed"))
    retry_another_broker_when_not_store_ok: bool = Field(False, description=(
        "retry a non-SEND_OK status on another broker (retryAnotherBrokerWhenNotStoreOK)"))
    send_msg_max_timeout_per_request_ms: IntMs = Field(-1, ge=-1, le=MAX_TIME_MS, description=(
        "sendMsgMaxTimeoutPerRequest (5.3.3; -1 off)"))
    send_latency_fault_enable: bool = Field(False, description="sendLatencyFaultEnable")
    start_detector_enable: bool = Field(False, description="startDetectorEnable (5.1.4+)")
    detect_timeout_ms: PositiveIntMs = Field(200, description="detectTimeout (5.1.4+)")
    detect_interval_ms: PositiveIntMs = Field(2_000, description="detectInterval (5.1.4+)")
    enable_backpressure_for_async_mode: bool = Field(False, description="enableBackpressureForAsyncMode (5.x)")
    back_pressure_for_async_send_num: Int = Field(10_000, gt=0, le=INTEGER_MAX_VALUE, description=(
        "backPressureForAsyncSendNum"))
    back_pressure_for_async_send_size_bytes: IntBytes = Field(100 * MIB, gt=0, le=INTEGER_MAX_VALUE, description=(
        "backPressureForAsyncSendSize"))
    client_async_semaphore_value: Int = Field(65_535, gt=0, le=INTEGER_MAX_VALUE, description=(
        "NettyClientConfig.clientAsyncSemaphoreValue"))
    poll_name_server_interval_ms: PositiveIntMs = Field(30_000, description=(
        "ms between route refreshes (ClientConfig.pollNameServerInterval)"))
    heartbeat_broker_interval_ms: PositiveIntMs = Field(30_000, description="ClientConfig.heartbeatBrokerInterval")
    mq_client_api_timeout_ms: PositiveIntMs = Field(3_000, description=(
        "ms timeout of name-server requests (ClientConfig.mqClientApiTimeout)"))
    enable_heartbeat_channel_event_listener: bool | None = Field(None, description=(
        "heartbeat a broker when a connection to it becomes active, e.g. after the broker restarted "
        "(ClientConfig.enableHeartbeatChannelEventListener); null: the client version's default, true for "
        "5.x; a 4.x client has no such listener"))
    max_message_size_bytes: IntBytes = Field(4 * MIB, gt=0, le=INTEGER_MAX_VALUE, description=(
        "largest body the client accepts, bytes (maxMessageSize)"))


# constants of the Java code (not tunables)
SEMAPHORE_ASYNC_NUM_MIN = 10  # DefaultMQProducerImpl: semaphoreAsyncSendNum is at least 10
SEMAPHORE_ASYNC_SIZE_MIN_BYTES = MIB  # ... and semaphoreAsyncSendSize at least 1 MiB
SCAN_RESPONSE_TABLE_INITIAL_DELAY_US = 3_000_000  # NettyRemotingClient: scanResponseTable first after 3 s
SCAN_RESPONSE_TABLE_PERIOD_US = 1_000_000  # ... then every 1 s
SCAN_RESPONSE_TABLE_SLACK_US = 1_000_000  # a response future expires at begin + timeout + 1000 ms
CONNECT_TIMEOUT_US = 3_000_000  # NettyClientConfig.connectTimeoutMillis


class ProducerSpec(BaseModel):
    """A producer entry: `count` client processes, each with one DefaultMQProducer and its own
    workload (models/producer/workload.py). `rate_per_s` is per producer instance."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: NodeName = Field("producer", description="node name (with count N: <name>-1..<name>-N)")
    count: Count = Field(1, description="instances of this entry")
    zone: Zone = Field("zone-a", description="zone (machine room) of its hosts")
    group: GroupName = Field("DEFAULT_PRODUCER", description="producerGroup (MixAll.DEFAULT_PRODUCER_GROUP)")
    topic: TopicName = Field("TopicTest", description="topic it sends to")
    # at most limits.max_rate_per_s
    rate_per_s: Float = Field(1000.0, ge=MIN_RATE_PER_S, le=HARD_MAX_RATE_PER_S, description=(
        "messages per second, per instance"))
    arrival: Literal["poisson", "constant", "bursts", "on_off"] = Field("poisson", description=(
        "poisson (exponential gaps) or constant gaps"))
    burst_size: Int = Field(10, gt=0, le=100_000, description="arrival bursts: messages per burst")
    on_ms: Dist = Field(Constant(value=5_000), description="arrival on_off: length of an on period")
    off_ms: Dist = Field(Constant(value=5_000), description="arrival on_off: length of an off period")
    message_bytes: Annotated[SizeDist, BeforeValidator(sizes_in_dist)] = Field(Constant(value=1024), description=(
        "body size in bytes (a distribution; sizes take units: 512, '4KiB', '1MB')"))
    key_bytes: Annotated[SizeDist, BeforeValidator(sizes_in_dist)] | None = Field(None, description=(
        "length of the KEYS property (None: no KEYS, or `k<i>` of a sharding key)"))
    tags: list[Tag] = Field([], max_length=1_000, description="tags, drawn uniformly per message (empty: none)")
    # drawn by orderly sends only (send_mode ORDERLY or selector: hash)
    keys: Int = Field(0, ge=0, le=2**31 - 1, description=(
        "distinct sharding keys, drawn uniformly (0: none; order is checked per key)"))
    key_skew: Float = Field(0.0, ge=0, le=10, description="Zipf exponent of the sharding keys (0: uniform)")
    # ORDERLY = SYNC + selector hash
    send_mode: Literal["SYNC", "ASYNC", "ONEWAY", "ORDERLY"] = Field("SYNC", description=(
        "SYNC (send), ASYNC (send with a SendCallback), ONEWAY (sendOneway) or ORDERLY (SYNC with a "
        "MessageQueueSelector on the sharding key)"))
    selector: Literal["hash", "random"] | None = Field(None, description=(
        "MessageQueueSelector (sendSelectImpl); None: sendDefaultImpl"))
    deliver_time_ms: Dist | None = Field(None, description=(
        "timer messages (5.x): each message asks to be delivered this many ms after its send() "
        "(Message.setDeliverTimeMs(now + this)); a distribution; null: none (4.x brokers deliver at once)"))
    delay_level: Int = Field(0, ge=0, le=64, description=(
        "DELAY property (0: none; the broker caps it at its highest level; a transactional producer's "
        "sendMessageInTransaction clears it: the message is delivered at its commit)"))
    batch_size: Int = Field(1, gt=0, le=10_000, description="messages per send (> 1: MessageBatch)")
    start_ms: DurationMs = Field(1_000, description="ms when it starts sending")
    stop_ms: PositiveDurationMs | None = Field(None, description="ms when it stops sending (null: at duration_ms)")
    client: ProducerConfig = Field(ProducerConfig(), description="DefaultMQProducer / ClientConfig settings")
    transaction: TransactionSpec | None = Field(None, description=(
        "set: a TransactionMQProducer (sendMessageInTransaction)"))

    @model_validator(mode="after")
    def _send_options(self) -> ProducerSpec:
        problems = []
        if self.transaction is not None and (self.send_mode != "SYNC" or self.selector or self.batch_size > 1):
            problems.append("a transactional producer sends one message at a time with sendMessageInTransaction "
                            "(SYNC, no selector, no batch)")
        orderly = self.send_mode == "ORDERLY" or self.selector == "hash"
        if self.send_mode == "ORDERLY" and self.selector == "random":
            problems.append("send_mode ORDERLY selects by the sharding key's hash; drop selector: random")
        if orderly and not self.keys:
            problems.append("orderly sends (send_mode ORDERLY or selector: hash) need sharding keys: set keys > 0")
        if orderly and self.key_skew and self.keys > MAX_ZIPF_SUPPORT:
            problems.append(f"with key_skew, keys is at most {MAX_ZIPF_SUPPORT:,}")
        if self.batch_size > 1 and self.delay_level:
            problems.append("a batch cannot carry a delay level (MessageBatch: 'TimeDelayLevel is not supported "
                            "for batching')")
        if self.batch_size > 1 and (orderly or self.selector):
            problems.append("batch sends go through sendDefaultImpl: use no selector and no ORDERLY with batch_size > 1")
        if problems:
            raise ValueError("; ".join(problems))
        return self
