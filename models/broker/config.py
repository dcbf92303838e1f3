"""Broker tunables: subsets of store.config.MessageStoreConfig and common.BrokerConfig (5.3.3).

One field per tunable the model reads; Java field name beside each default. Bounds: times at
most `sim.limits.MAX_TIME_MS`, sizes and counts within a Java `int` (the type RocketMQ keeps
them in), `messageDelayLevel` parsed here as ScheduleMessageService parses it.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sim.config import Int, IntBytes, IntMs, NonNegativeIntMs, PositiveIntMs
from sim.dist import Constant, Dist
from sim.limits import MAX_TIME_MS

OS_PAGE_SIZE_BYTES = 4 * 1024  # DefaultMappedFile.OS_PAGE_SIZE
CQ_UNIT_BYTES = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE
REPUT_INTERVAL_US = 1_000  # ReputMessageService: Thread.sleep(1)
GROUP_COMMIT_WAIT_US = 10_000  # GroupCommitService.waitForRunning(10)
HOLD_SCAN_INTERVAL_US = 5_000_000  # PullRequestHoldService, long polling on
CONSUMER_SCAN_INTERVAL_US = 10_000_000  # ClientHousekeepingService
CHANNEL_EXPIRED_TIMEOUT_US = 120_000_000  # ConsumerManager.channelExpiredTimeout
OFFSET_PERSIST_INITIAL_DELAY_US = 10_000_000  # BrokerController scheduled persist, first run
REGISTER_INITIAL_DELAY_US = 10_000_000  # BrokerController.registerBrokerAll schedule
MAX_SCAN_BYTES = 16_000  # maxFilterMessageSize default: CQ bytes scanned per getMessage (at least maxMsgNums × 20)
MASTER_ID = 0  # MixAll.MASTER_ID
WHICH_BROKER_WHEN_CONSUME_SLOWLY = 1  # SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly
HA_WRITE_POLL_US = 100_000  # DefaultHAConnection.WriteSocketService: allWaitForRunning(100)
HA_CONNECT_RETRY_US = 5_000_000  # DefaultHAClient: waitForRunning(1000 * 5) after a failed connect
GROUP_TRANSFER_WAIT_US = 10_000  # GroupTransferService.waitForRunning(10)
FAST_FAILURE_PERIOD_US = 10_000  # BrokerFastFailure: scheduleAtFixedRate(..., 1000, 10, ms)
FAST_FAILURE_INITIAL_DELAY_US = 1_000_000
INTEGER_MAX_VALUE = 2**31 - 1  # Java int: RocketMQ's sizes and counts
MAX_DELAY_LEVELS = 64  # delay levels are queue ids of SCHEDULE_TOPIC_XXXX
DELAY_LEVEL_RE = re.compile(r"(\d{1,12})([smhd])")  # ScheduleMessageService.parseDelayLevel units
DELAY_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
TIMER_PRECISION_CANDIDATES_MS = (100, 200, 500, 1000)  # MessageStoreConfig.setTimerPrecisionMs's candidates
TIMER_MAX_DELAY_SEC = 3600 * 24 * 3  # MessageStoreConfig.timerMaxDelaySec default (timer_max_delay_sec below)
BROKER_SERVICES = ("transaction_check",)  # the services a `service_error` fault can make throw (transaction_check.py)


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class MessageStoreConfig(BaseModel):
    """store.config.MessageStoreConfig subset."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    flush_disk_type: FlushDiskType = Field(FlushDiskType.ASYNC_FLUSH, description=(
        "ASYNC_FLUSH (ack before fsync) or SYNC_FLUSH (ack after) (flushDiskType)"))
    flush_interval_commit_log_ms: PositiveIntMs = Field(500, description=(
        "ms between async CommitLog flushes (flushIntervalCommitLog)"))
    flush_commit_log_least_pages: Int = Field(4, ge=0, le=INTEGER_MAX_VALUE, description=(
        "4 KiB pages needed before an async flush (flushCommitLogLeastPages)"))
    flush_commit_log_thorough_interval_ms: PositiveIntMs = Field(10_000, description=(
        "ms after which an async flush ignores the page minimum (flushCommitLogThoroughInterval)"))
    sync_flush_timeout_ms: PositiveIntMs = Field(5_000, description=(
        "ms a SYNC_FLUSH send waits for its fsync (syncFlushTimeout)"))
    mapped_file_size_commit_log_bytes: IntBytes = Field(1 << 30, ge=1 << 16, le=INTEGER_MAX_VALUE, description=(
        "CommitLog file size, bytes (mappedFileSizeCommitLog)"))
    max_message_size_bytes: IntBytes = Field(4 * 1024 * 1024, gt=0, le=INTEGER_MAX_VALUE, description=(
        "largest message the broker stores, bytes (maxMessageSize)"))
    max_transfer_count_on_message_in_memory: Int = Field(32, gt=0, le=INTEGER_MAX_VALUE, description=(
        "messages per pull from page cache (maxTransferCountOnMessageInMemory)"))
    max_transfer_bytes_on_message_in_memory: IntBytes = Field(262_144, gt=0, le=INTEGER_MAX_VALUE, description=(
        "bytes per pull from page cache (maxTransferBytesOnMessageInMemory)"))
    max_transfer_count_on_message_in_disk: Int = Field(8, gt=0, le=INTEGER_MAX_VALUE, description=(
        "messages per pull from disk (maxTransferCountOnMessageInDisk)"))
    max_transfer_bytes_on_message_in_disk: IntBytes = Field(65_536, gt=0, le=INTEGER_MAX_VALUE, description=(
        "bytes per pull from disk (maxTransferBytesOnMessageInDisk)"))
    access_message_in_memory_max_ratio: Int = Field(40, ge=0, le=100, description=(
        "percent of RAM beyond which reads count as from disk (accessMessageInMemoryMaxRatio)"))
    physical_memory_bytes: IntBytes = Field(16 * 1024**3, gt=0, le=1 << 50, description=(
        "host RAM, bytes (UtilAll.TOTAL_PHYSICAL_MEMORY_SIZE)"))
    broker_role: BrokerRole = Field(BrokerRole.ASYNC_MASTER, description=(
        "ASYNC_MASTER, SYNC_MASTER or SLAVE (brokerRole)"))
    message_delay_level: str = Field("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", description=(
        "delays of the 18 retry levels (messageDelayLevel)"))
    flush_delay_offset_interval_ms: PositiveIntMs = Field(10_000, description=(
        "ms between schedule-offset persists (flushDelayOffsetInterval)"))
    # 4.9.8 and 5.3.3 both default to true (Thread.sleep); false (waitForRunning, woken by puts in
    # 4.x, by puts only with wake_flush_when_put_message in 5.x) was the default up to 4.9.0
    flush_commit_log_timed: bool = Field(True, description="flushCommitLogTimed")
    wake_flush_when_put_message: bool = Field(False, description="wakeFlushWhenPutMessage (5.x only; 4.x always wakes)")
    transient_store_pool_enable: bool = Field(False, description="transientStorePoolEnable (ASYNC_FLUSH masters only)")
    wake_commit_when_put_message: bool = Field(True, description=(
        "wakeCommitWhenPutMessage (5.x only; 4.x always wakes)"))
    commit_interval_commit_log_ms: PositiveIntMs = Field(200, description="commitIntervalCommitLog")
    commit_commit_log_least_pages: Int = Field(4, ge=0, le=INTEGER_MAX_VALUE, description="commitCommitLogLeastPages")
    commit_commit_log_thorough_interval_ms: PositiveIntMs = Field(200, description="commitCommitLogThoroughInterval")
    slave_timeout_ms: PositiveIntMs = Field(3_000, description="slaveTimeout (SYNC_MASTER wait → FLUSH_SLAVE_TIMEOUT)")
    ha_send_heartbeat_interval_ms: PositiveIntMs = Field(5_000, description="haSendHeartbeatInterval")
    ha_housekeeping_interval_ms: PositiveIntMs = Field(20_000, description="haHousekeepingInterval")
    ha_transfer_batch_size_bytes: IntBytes = Field(32 * 1024, gt=0, le=INTEGER_MAX_VALUE, description=(
        "haTransferBatchSize"))
    ha_max_gap_not_in_sync_bytes: IntBytes = Field(256 * 1024 * 1024, gt=0, le=INTEGER_MAX_VALUE, description=(
        "haMaxGapNotInSync (4.x haSlaveFallbehindMax)"))
    # 5.x SYNC_MASTER: acknowledgements a send waits for, the master's own included (≤ 1: no
    # wait). enableAutoInSyncReplicas acts only with enableSlaveActingMaster (not modelled): 5.3.3's
    # controller mode does not read it (CommitLog.calcNeedAckNums)
    in_sync_replicas: Int = Field(1, ge=1, le=64, description="inSyncReplicas")
    # controller mode (enable_controller_mode; models/broker/auto_switch_ha.py): a send is refused
    # (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH) before it is written while the SyncStateSet has
    # fewer members than minInSyncReplicas; allAckInSyncStateSet makes it wait for every member
    min_in_sync_replicas: Int = Field(1, ge=1, le=64, description=(
        "minInSyncReplicas (controller mode: fewer SyncStateSet members refuse sends)"))
    all_ack_in_sync_state_set: bool = Field(False, description=(
        "allAckInSyncStateSet (controller mode: a send waits for every SyncStateSet member; consumers "
        "read only up to what all of them hold)"))
    ha_max_time_slave_not_catchup_ms: PositiveIntMs = Field(15_000, description=(
        "haMaxTimeSlaveNotCatchup (controller mode: a slave not caught up this long leaves the SyncStateSet)"))
    offset_check_in_slave: bool = Field(False, description="offsetCheckInSlave")
    os_page_cache_busy_time_out_mills: PositiveIntMs = Field(1_000, description="osPageCacheBusyTimeOutMills")
    max_filter_message_size_bytes: IntBytes = Field(MAX_SCAN_BYTES, gt=0, le=INTEGER_MAX_VALUE, description=(
        "maxFilterMessageSize"))

    # retention and disk pressure (models/broker/clean_service.py; DefaultMessageStore.CleanCommitLogService)
    file_reserved_time_ms: PositiveIntMs = Field(72 * 3_600_000, description=(
        "how long a CommitLog file is kept after its last write (fileReservedTime, 72 h; Java in hours)"))
    delete_when: str = Field("04", description=(
        "hours of the simulated day (00-23, `;`-separated; run time 0 is 00:00) when expired files are "
        "deleted (deleteWhen)"))
    disk_max_used_space_ratio: Int = Field(75, ge=10, le=95, description=(
        "percent of the disk used above which expired files are deleted at any hour (diskMaxUsedSpaceRatio)"))
    disk_space_clean_forcibly_ratio: Int = Field(85, ge=1, le=100, description=(
        "percent above which files are deleted whatever their age (diskSpaceCleanForciblyRatio; Java "
        "clamps it to 30..85)"))
    disk_space_warning_level_ratio: Int = Field(90, ge=1, le=100, description=(
        "percent above which the store refuses writes, SERVICE_NOT_AVAILABLE (diskSpaceWarningLevelRatio; "
        "Java clamps it to 35..90)"))
    clean_file_forcibly_enable: bool = Field(True, description="cleanFileForciblyEnable")
    clean_resource_interval_ms: PositiveIntMs = Field(10_000, description=(
        "period of the deletion task, first run 60 s after start (cleanResourceInterval)"))
    delete_commit_log_files_interval_ms: NonNegativeIntMs = Field(100, description=(
        "pause between two file deletions of one run (deleteCommitLogFilesInterval)"))
    delete_file_batch_max: Int = Field(10, gt=0, le=1000, description="files deleted per run at most (deleteFileBatchMax)")

    # timer messages (5.x; models/broker/timer_store.py, TimerMessageStore)
    timer_wheel_enable: bool = Field(True, description="timerWheelEnable (5.x: messages with a delivery time "
                                                        "wait in the timer wheel; 4.x has no timer)")
    timer_precision_ms: PositiveIntMs = Field(1_000, description=(
        "width of a timer wheel slot: a message is delivered within one of its time (timerPrecisionMs)"))
    timer_flush_interval_ms: PositiveIntMs = Field(1_000, description=(
        "period of the timer checkpoint (timerFlushIntervalMs): what a restart delivers again"))
    timer_max_delay_sec: Int = Field(TIMER_MAX_DELAY_SEC, gt=0, le=MAX_TIME_MS // 1000, description=(
        "longest delay a timer message may ask for, seconds; a send asking for more is refused "
        "MESSAGE_ILLEGAL (timerMaxDelaySec, WHEEL_TIMER_MSG_ILLEGAL)"))

    @field_validator("timer_precision_ms")
    @classmethod
    def _timer_precision(cls, value: int) -> int:
        if value not in TIMER_PRECISION_CANDIDATES_MS:
            raise ValueError("timerPrecisionMs is one of 100, 200, 500 or 1000 (MessageStoreConfig."
                             "setTimerPrecisionMs rounds any other value down to one of them)")
        return value

    @field_validator("delete_when")
    @classmethod
    def _hours(cls, value: str) -> str:
        hours = [h.strip() for h in value.split(";")]
        if not all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
            raise ValueError("hours 00..23 separated by ';', e.g. '04' or '00;12'")
        return value

    @field_validator("message_delay_level")
    @classmethod
    def _delay_levels(cls, spec: str) -> str:
        delay_levels_ms(spec)
        return spec


def clamp_ratio(percent: int, low: int, high: int) -> float:
    """getDiskSpaceWarningLevelRatio / getDiskSpaceCleanForciblyRatio (DefaultMessageStore.
    CleanCommitLogService): the percent clamped to [low, high], as a fraction (clean_service.py)."""
    return min(max(percent, low), high) / 100.0


def delete_hours(cfg: MessageStoreConfig) -> frozenset[int]:
    """The hours of the simulated day `deleteWhen` names (clean_service.py's isTimeToDelete)."""
    return frozenset(int(h) for h in cfg.delete_when.split(";"))


def delay_levels_ms(spec: str) -> list[int]:
    """`messageDelayLevel` ("1s 5s … 2h") → delay in ms per level (index 0 = level 1)."""
    tokens = spec.split()
    if not 1 <= len(tokens) <= MAX_DELAY_LEVELS:
        raise ValueError(f"give 1 to {MAX_DELAY_LEVELS} delay levels separated by spaces, like '1s 5s 10s 1m 2h'")
    out = []
    for token in tokens:
        match = DELAY_LEVEL_RE.fullmatch(token)
        if not match:
            raise ValueError(f"cannot read delay level {token[:20]!r} (a number and one of s, m, h, d, like '30s')")
        value_ms = int(match.group(1)) * DELAY_UNIT_MS[match.group(2)]
        if value_ms > MAX_TIME_MS:
            raise ValueError(f"delay level {token!r} is longer than {MAX_TIME_MS // 86_400_000} days")
        out.append(value_ms)
    return out


# version-dependent defaults: what 4.9.8 defaults differently from the 5.3.3 defaults the fields
# below carry, by section of a broker group, applied to a `version: 4.x` scenario where the file
# leaves the field out (rmqsim/scenario/spec.py). Compared field by field over BrokerConfig,
# MessageStoreConfig, ClientConfig, DefaultMQPushConsumer and DefaultMQProducer: every other
# modelled default is the same in the two lines (5.x-only fields have no 4.x counterpart).
V4_DEFAULTS: dict[str, dict[str, int]] = {
    "broker": {"transaction_check_interval_ms": 60_000},  # BrokerConfig.transactionCheckInterval (30 s from 5.1.0)
}


class BrokerConfig(BaseModel):
    """common.BrokerConfig subset."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    register_name_server_period_ms: IntMs = Field(30_000, ge=10_000, le=60_000, description=(
        "ms between registrations with the name servers (registerNameServerPeriod)"))
    flush_consumer_offset_interval_ms: PositiveIntMs = Field(5_000, description=(
        "ms between consumer-offset persists (flushConsumerOffsetInterval)"))
    long_polling_enable: bool = Field(True, description="hold empty pulls until messages arrive (longPollingEnable)")
    short_polling_time_mills: PositiveIntMs = Field(1_000, description=(
        "ms an empty pull waits without long polling (shortPollingTimeMills)"))
    notify_consumer_ids_changed_enable: bool = Field(True, description=(
        "tell a group's members when membership changes (notifyConsumerIdsChangedEnable)"))
    slave_read_enable: bool = Field(False, description="slaveReadEnable")
    send_message_thread_pool_nums: Int = Field(4, gt=0, le=1024, description="sendMessageThreadPoolNums: min(cores, 4)")
    send_thread_pool_queue_capacity: Int = Field(10_000, gt=0, le=INTEGER_MAX_VALUE, description=(
        "sendThreadPoolQueueCapacity"))
    broker_fast_failure_enable: bool = Field(True, description="brokerFastFailureEnable")
    wait_time_mills_in_send_queue: PositiveIntMs = Field(200, description="waitTimeMillsInSendQueue")
    use_server_side_reset_offset: bool = Field(True, description="useServerSideResetOffset (5.x only)")
    # not a Java field: the time one SendMessage holds the CommitLog put lock (encode + append
    # into the mmap; times the disk's slow factor). 0 by default: sends cost no broker time, as
    # before this setting; a positive value makes the send thread pool and BrokerFastFailure work
    send_put_time_ms: Dist = Field(Constant(value=0.0), description=(
        "ms one SendMessage holds the CommitLog put lock (a distribution; simulator; 0: none)"))
    # broker side (DefaultMQProducer has its own defaultTopicQueueNums)
    default_topic_queue_nums: Int = Field(8, gt=0, le=1024, description=(
        "queues of an auto-created topic (defaultTopicQueueNums)"))
    startup_ms: NonNegativeIntMs = Field(2_000, description=(
        "ms from restart to serving: JVM start and store recovery (simulator)"))
    # transactional messages (models/broker/transaction_check.py, end_transaction.py); 5.3.3 defaults
    reject_transaction_message: bool = Field(False, description="rejectTransactionMessage")
    transaction_timeout_ms: NonNegativeIntMs = Field(6_000, description="transactionTimeOut")
    transaction_check_max: Int = Field(15, ge=0, le=INTEGER_MAX_VALUE, description="transactionCheckMax")
    transaction_check_interval_ms: PositiveIntMs = Field(30_000, description=(
        "transactionCheckInterval (a version 4.x scenario defaults to 4.9.8's 60000)"))
    transaction_op_msg_max_size_bytes: IntBytes = Field(4_096, gt=0, le=INTEGER_MAX_VALUE, description=(
        "transactionOpMsgMaxSize"))
    transaction_op_batch_interval_ms: PositiveIntMs = Field(3_000, description="transactionOpBatchInterval")
    # controller mode (5.x automatic failover: models/broker/replicas_manager.py); 5.3.3 defaults
    enable_controller_mode: bool = Field(False, description=(
        "enableControllerMode (5.x: the group's master is elected by the cluster's controllers)"))
    broker_heartbeat_interval_ms: PositiveIntMs = Field(1_000, description=(
        "brokerHeartbeatInterval (ms between heartbeats to every controller)"))
    controller_heart_beat_timeout_ms: PositiveIntMs = Field(10_000, description=(
        "controllerHeartBeatTimeoutMills (a broker silent this long is inactive at the controller)"))
    sync_broker_metadata_period_ms: PositiveIntMs = Field(5_000, description=(
        "syncBrokerMetadataPeriod (ms between GetReplicaInfo polls of the controller leader)"))
    sync_controller_metadata_period_ms: PositiveIntMs = Field(10_000, description=(
        "syncControllerMetadataPeriod (ms between GetMetaData rounds that refresh the controller "
        "leader's address; the first 3 s after the first success)"))
    check_sync_state_set_period_ms: PositiveIntMs = Field(5_000, description=(
        "checkSyncStateSetPeriod (ms between the master's SyncStateSet shrink checks)"))
    broker_election_priority: Int = Field(INTEGER_MAX_VALUE, ge=0, le=INTEGER_MAX_VALUE, description=(
        "brokerElectionPriority (lower is preferred among equally up-to-date candidates)"))
