"""Broker tunables: subsets of store.config.MessageStoreConfig and common.BrokerConfig (5.3.3).

One field per tunable the model reads; Java field name beside each default.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

OS_PAGE_SIZE_BYTES = 4 * 1024  # DefaultMappedFile.OS_PAGE_SIZE
CQ_UNIT_BYTES = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE
REPUT_INTERVAL_US = 1_000  # ReputMessageService: Thread.sleep(1)
GROUP_COMMIT_WAIT_US = 10_000  # GroupCommitService.waitForRunning(10)
HOLD_SCAN_INTERVAL_US = 5_000_000  # PullRequestHoldService, long polling on
CONSUMER_SCAN_INTERVAL_US = 10_000_000  # ClientHousekeepingService
CHANNEL_EXPIRED_TIMEOUT_US = 120_000_000  # ConsumerManager.channelExpiredTimeout
OFFSET_PERSIST_INITIAL_DELAY_US = 10_000_000  # BrokerController scheduled persist, first run
REGISTER_INITIAL_DELAY_US = 10_000_000  # BrokerController.registerBrokerAll schedule
MAX_SCAN_BYTES = 16_000  # maxFilterMessageSize: CQ bytes scanned per getMessage (at least maxMsgNums × 20)


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"


class MessageStoreConfig(BaseModel):
    """store.config.MessageStoreConfig subset."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH  # flushDiskType
    flush_interval_commit_log_ms: int = Field(500, gt=0)  # flushIntervalCommitLog
    flush_commit_log_least_pages: int = Field(4, ge=0)  # flushCommitLogLeastPages
    flush_commit_log_thorough_interval_ms: int = Field(10_000, gt=0)  # flushCommitLogThoroughInterval
    sync_flush_timeout_ms: int = Field(5_000, gt=0)  # syncFlushTimeout
    mapped_file_size_commit_log_bytes: int = Field(1 << 30, ge=1 << 16)  # mappedFileSizeCommitLog
    max_message_size_bytes: int = Field(4 * 1024 * 1024, gt=0)  # maxMessageSize
    max_transfer_count_on_message_in_memory: int = Field(32, gt=0)  # maxTransferCountOnMessageInMemory
    max_transfer_bytes_on_message_in_memory: int = Field(262_144, gt=0)  # maxTransferBytesOnMessageInMemory
    max_transfer_count_on_message_in_disk: int = Field(8, gt=0)  # maxTransferCountOnMessageInDisk
    max_transfer_bytes_on_message_in_disk: int = Field(65_536, gt=0)  # maxTransferBytesOnMessageInDisk
    access_message_in_memory_max_ratio: int = Field(40, ge=0, le=100)  # accessMessageInMemoryMaxRatio
    physical_memory_bytes: int = Field(16 * 1024**3, gt=0)  # host RAM (UtilAll.TOTAL_PHYSICAL_MEMORY_SIZE)
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER  # brokerRole
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"  # messageDelayLevel
    flush_delay_offset_interval_ms: int = Field(10_000, gt=0)  # flushDelayOffsetInterval


class BrokerConfig(BaseModel):
    """common.BrokerConfig subset."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    register_name_server_period_ms: int = Field(30_000, ge=10_000, le=60_000)  # registerNameServerPeriod
    flush_consumer_offset_interval_ms: int = Field(5_000, gt=0)  # flushConsumerOffsetInterval
    long_polling_enable: bool = True  # longPollingEnable
    short_polling_time_mills: int = Field(1_000, gt=0)  # shortPollingTimeMills
    notify_consumer_ids_changed_enable: bool = True  # notifyConsumerIdsChangedEnable
    default_topic_queue_nums: int = Field(8, gt=0)  # defaultTopicQueueNums (broker side)
    startup_ms: int = Field(2_000, ge=0)  # not a Java field: JVM start + store recovery time
