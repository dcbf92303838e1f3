"""Producer tunables: client.producer.DefaultMQProducer and ClientConfig subsets (5.3.3 defaults).

Bounds: times at most `sim.kernel.limits.MAX_TIME_MS`, sizes and counts within a Java `int`, retries at
most `MAX_RETRY_TIMES` (each retry is a whole send: more would only multiply events). Options
that exist only in 5.x (`start_detector_enable`, `send_msg_max_timeout_per_request_ms`, the async
back-pressure) are refused with `client_version: "4.x"` (sim/scenario_checks.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sim.kernel.config import Int, IntBytes, IntMs, PositiveIntMs
from sim.kernel.limits import MAX_TIME_MS

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
    max_message_size_bytes: IntBytes = Field(4 * MIB, gt=0, le=INTEGER_MAX_VALUE, description=(
        "largest body the client accepts, bytes (maxMessageSize)"))


# constants of the Java code (not tunables)
SEMAPHORE_ASYNC_NUM_MIN = 10  # DefaultMQProducerImpl: semaphoreAsyncSendNum is at least 10
SEMAPHORE_ASYNC_SIZE_MIN_BYTES = MIB  # ... and semaphoreAsyncSendSize at least 1 MiB
SCAN_RESPONSE_TABLE_INITIAL_DELAY_US = 3_000_000  # NettyRemotingClient: scanResponseTable first after 3 s
SCAN_RESPONSE_TABLE_PERIOD_US = 1_000_000  # ... then every 1 s
SCAN_RESPONSE_TABLE_SLACK_US = 1_000_000  # a response future expires at begin + timeout + 1000 ms
CONNECT_TIMEOUT_US = 3_000_000  # NettyClientConfig.connectTimeoutMillis
