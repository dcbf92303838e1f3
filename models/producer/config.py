"""Producer tunables: client.producer.DefaultMQProducer and ClientConfig subsets (5.3.3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

INTEGER_MAX_VALUE = 2**31 - 1


class ProducerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    send_msg_timeout_ms: int = Field(3_000, gt=0)  # sendMsgTimeout
    retry_times_when_send_failed: int = Field(2, ge=0)  # retryTimesWhenSendFailed
    retry_another_broker_when_not_store_ok: bool = False  # retryAnotherBrokerWhenNotStoreOK
    poll_name_server_interval_ms: int = Field(30_000, gt=0)  # ClientConfig.pollNameServerInterval
    mq_client_api_timeout_ms: int = Field(3_000, gt=0)  # ClientConfig.mqClientApiTimeout
    max_message_size_bytes: int = Field(4 * 1024 * 1024, gt=0)  # maxMessageSize


ROUTE_POLL_INITIAL_DELAY_US = 10_000  # MQClientInstance.startScheduledTask: first after 10 ms
