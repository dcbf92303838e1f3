"""Producer tunables: client.producer.DefaultMQProducer and ClientConfig subsets (5.3.3).

Bounds: times at most `sim.limits.MAX_TIME_MS`, sizes within a Java `int`, retries at most
`MAX_RETRY_TIMES` (each retry is a whole send: more would only multiply events).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sim.config import Int, PositiveIntMs

INTEGER_MAX_VALUE = 2**31 - 1
MAX_RETRY_TIMES = 1_000


class ProducerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    send_msg_timeout_ms: PositiveIntMs = 3_000  # sendMsgTimeout
    retry_times_when_send_failed: Int = Field(2, ge=0, le=MAX_RETRY_TIMES)  # retryTimesWhenSendFailed
    retry_another_broker_when_not_store_ok: bool = False  # retryAnotherBrokerWhenNotStoreOK
    poll_name_server_interval_ms: PositiveIntMs = 30_000  # ClientConfig.pollNameServerInterval
    mq_client_api_timeout_ms: PositiveIntMs = 3_000  # ClientConfig.mqClientApiTimeout
    max_message_size_bytes: Int = Field(4 * 1024 * 1024, gt=0, le=INTEGER_MAX_VALUE)  # maxMessageSize


ROUTE_POLL_INITIAL_DELAY_US = 10_000  # MQClientInstance.startScheduledTask: first after 10 ms
