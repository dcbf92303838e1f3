"""The rare-state coverage catalogue: named "sometimes" points at the branches of the RocketMQ
models that decide loss, duplicates, order and latency (FoundationDB's `TEST()`, Antithesis's
sometimes-assertions); the counting mechanism is the kernel's (sim/coverage.py).

A run of 1,000 seeds that reports "0 lost" says little unless the states that could lose a
message were reached. Each point below names one such branch in the models; the run counts how
often it was taken, and the summary's `coverage` maps every declared name, in this order, to
that count (0: never reached). A sweep then shows which points no run reached.

Cost: a model holds the run's counter (`env.coverage`, made by `SimEnv`) and counts a point with
one increment on the branch itself, `cov[COV_POWER_LOSS_UNFLUSHED_TAIL] += 1`, the index a
module-level int below: no lookup by name, no call. The counts are read only at the end
(`counts`), never traced, so they leave the trace digest as it is. Most points are rare; the one
reached about once a message (`pull_held_woken_by_arrival`) has its index typed when compiled
(`cython.declare`, models/broker/long_polling.py), so the baseline pays about 190 instructions a
message (bench/instructions.py: 98,866 → 99,053; with an untyped index, 99,674).

Adding a point: append a `Point` to `POINTS` (names are stable: sweeps and reports key on them),
add its index constant (`COV_` + the upper-case name; checked at import), put the increment on the
branch, and give tests/test_coverage_points.py a scenario that reaches it.
"""

from __future__ import annotations

from sim.coverage import Point, check_catalogue
from sim.coverage import counts as _counts

POINTS: tuple[Point, ...] = (
    # --- store: what a crash or a power loss destroys, and what recovery makes of it
    Point("power_loss_unflushed_tail", "a power loss found CommitLog bytes written past the last fsync and lost them",
          "CommitLog / MappedFileQueue.flush (recoverAbnormally keeps only flushed data)"),
    Point("crash_write_buffer_lost", "a process crash lost transient-store-pool bytes not yet committed to the file",
          "TransientStorePool / CommitLog.CommitRealTimeService"),
    Point("recovery_truncates_invalid_tail", "a restarted slave's recovery truncated its log at the first invalid record",
          "CommitLog.recoverAbnormally (MappedFileQueue.truncateDirtyFiles)"),
    Point("consume_queue_dirty_units_dropped", "recovery dropped ConsumeQueue units past the surviving CommitLog end",
          "DefaultMessageStore.recover → ConsumeQueue.truncateDirtyLogicFiles"),
    Point("queue_offset_reused", "a queue offset was assigned again after a truncation (a new message at an old offset)",
          "CommitLog.DefaultAppendMessageCallback (topicQueueTable rebuilt by recoverTopicQueueTable)"),
    Point("flush_disk_timeout", "a SYNC_FLUSH put waited past syncFlushTimeout: answered FLUSH_DISK_TIMEOUT",
          "CommitLog.GroupCommitService / FlushDiskWatcher"),
    Point("config_file_loaded_from_bak", "a broker config file (offsets, delay offsets) was empty: loaded from its .bak",
          "ConfigManager.load → loadBak"),
    Point("broker_offset_rolled_back", "a restarted broker loaded a committed offset below the one it had served",
          "ConsumerOffsetManager.load (consumerOffset.json older than the crashed table)"),
    Point("offset_answer_behind_replica", "a consumer offset query was answered below what another replica holds",
          "ConsumerManageProcessor.queryConsumerOffset after a failover"),
    # --- replication
    Point("sync_master_waits_for_slave", "a SYNC_MASTER send waited for its slave's acknowledgement",
          "CommitLog.handleHA → GroupTransferService.putRequest"),
    Point("flush_slave_timeout", "a SYNC_MASTER send's replica wait ran out: answered FLUSH_SLAVE_TIMEOUT",
          "GroupTransferService.doWaitTransfer"),
    Point("slave_not_available", "a 4.x SYNC_MASTER had no slave in sync: answered SLAVE_NOT_AVAILABLE at once",
          "CommitLog.handleHA (HAService.isSlaveOK false)"),
    Point("ha_slave_catching_up", "a slave connected behind the master's readable end and was sent the gap",
          "DefaultHAConnection.WriteSocketService (slaveRequestOffset < max offset)"),
    Point("ha_slave_diverged", "a slave holding records its master lost got torn bytes: its dispatch stops there",
          "DefaultHAClient.dispatchReadRequest (classic HA, no epoch check)"),
    # --- broker read path
    Point("pull_held_woken_by_arrival", "a held pull was answered because a message arrived in its queue",
          "PullRequestHoldService.notifyMessageArriving"),
    Point("pull_hold_expired_empty", "a held pull's suspend time ran out with nothing new: answered not found",
          "PullRequestHoldService.checkHoldRequest"),
    Point("server_side_reset_taken", "a pull took a pending 5.x server-side offset reset: PULL_OFFSET_MOVED",
          "PullMessageProcessor (ConsumerOffsetManager.queryThenEraseResetOffset)"),
    Point("slave_pull_rejected", "a 5.x slave without slaveReadEnable refused a pull (SYSTEM_BUSY)",
          "PullMessageProcessor.rejectRequest"),
    Point("pull_from_slave", "a consumer sent a pull to a slave (master gone or suggested)",
          "PullAPIWrapper.recalculatePullFromWhichNode / findBrokerAddressInSubscribe"),
    # --- retry, delay, dead letters
    Point("delay_level_delivered", "a delayed (or retried) message became due and was written to its real topic",
          "ScheduleMessageService.DeliverDelayedMessageTimerTask"),
    Point("consume_failure_sent_back", "a concurrently consumed message failed (RECONSUME_LATER) and was sent back",
          "ConsumeMessageConcurrentlyService.processConsumeResult → sendMessageBack"),
    Point("send_back_resent_by_inner_producer", "a send-back failed and the client re-sent the message to %RETRY%",
          "DefaultMQPushConsumerImpl.sendMessageBackAsNormalMessage"),
    Point("send_back_failed_local_retry", "both send-back paths failed: the message is consumed again locally",
          "ConsumeMessageConcurrentlyService.submitConsumeRequestLater"),
    Point("dlq_by_send_back", "a sent-back message had reached its maximum reconsume times: stored in %DLQ%",
          "SendMessageProcessor.consumerSendMsgBack"),
    Point("dlq_by_retry_send", "a %RETRY% send over its maximum reconsume times was redirected to %DLQ%",
          "SendMessageProcessor.handleRetryAndDLQ"),
    # --- producer
    Point("send_retried_other_broker", "a send's retry (SYNC or ASYNC) went to another broker than the failed attempt",
          "DefaultMQProducerImpl.sendDefaultImpl / onExceptionImpl (selectOneMessageQueue(lastBrokerName))"),
    Point("send_budget_exhausted", "a SYNC send ran out of sendMsgTimeout before its next attempt",
          "DefaultMQProducerImpl.sendDefaultImpl (callTimeout)"),
    Point("fault_broker_isolated", "a send's latency or failure made a broker unavailable for a while",
          "MQFaultStrategy.updateFaultItem (notAvailableDuration > 0)"),
    Point("pick_one_at_least_chosen", "4.x: every broker was isolated, so pickOneAtLeast chose one anyway",
          "MQFaultStrategy.selectOneMessageQueue (4.9.8) → LatencyFaultToleranceImpl.pickOneAtLeast"),
    Point("reachable_pass_chosen", "5.x: no broker was available; the reachable pass chose an isolated one",
          "MQFaultStrategy.selectOneMessageQueue (5.3.3, reachableFilter)"),
    Point("detector_restored_broker", "5.x: the detector's probe made an unreachable broker reachable again",
          "LatencyFaultToleranceImpl.detectByOneRound"),
    Point("async_backpressure_rejected", "an ASYNC send failed to get a back-pressure permit in time",
          "DefaultMQProducerImpl.send (semaphoreAsyncSendNum / semaphoreAsyncSendSize)"),
    Point("broker_busy_rejected", "a broker answered a send SYSTEM_BUSY (page cache busy, queue full or expired)",
          "BrokerFastFailure / SendMessageProcessor.rejectRequest"),
    # --- consumer
    Point("rebalance_dropped_queue_in_flight", "a rebalance took a queue away while messages of it were cached",
          "RebalanceImpl.updateProcessQueueTableInRebalance (ProcessQueue.setDropped)"),
    Point("offset_illegal_corrected", "a pull answered OFFSET_ILLEGAL: the corrected offset was stored, queue dropped",
          "DefaultMQPushConsumerImpl.pullMessage (PullCallback, OFFSET_ILLEGAL)"),
    Point("pull_flow_controlled", "a pull was put off because the queue's cache was over its count, size or span",
          "DefaultMQPushConsumerImpl.pullMessage (flow control)"),
    Point("orderly_lock_refused", "a broker refused an orderly lock held by another client",
          "RebalanceLockManager.tryLockBatch"),
    Point("orderly_lock_expired_taken_over", "a broker granted an orderly lock whose holder let it expire (60 s)",
          "RebalanceLockManager.tryLockBatch (isExpired)"),
    Point("orderly_lock_lost", "an orderly consumer's lockAll was refused a queue it held",
          "ConsumeMessageOrderlyService.lockMQPeriodically → RebalanceImpl.lockAll"),
    Point("orderly_consume_needs_lock", "an orderly ConsumeRequest found its queue unlocked or expired: re-lock later",
          "ConsumeMessageOrderlyService.ConsumeRequest.run (tryLockLaterAndReconsume)"),
    Point("orderly_queue_suspended", "an orderly listener returned SUSPEND_CURRENT_QUEUE_A_MOMENT: the queue waits",
          "ConsumeMessageOrderlyService.processConsumeResult"),
    # --- transactions
    Point("txn_check_max_reached", "a half message reached transactionCheckMax and was discarded",
          "TransactionalMessageServiceImpl.needDiscard → resolveDiscardMsg"),
    Point("txn_check_answered_unknow", "a check-back was answered UNKNOW: the half stays open",
          "EndTransactionProcessor.processRequest (TRANSACTION_NOT_TYPE)"),
    Point("txn_check_no_producer", "a check-back found no producer channel of the group: nobody was asked",
          "AbstractTransactionalMessageCheckListener.sendCheckMessage (getAvailableChannel null)"),
    Point("txn_op_batch_lost_in_crash", "a broker crash lost buffered op records: resolved halves get checked again",
          "TransactionalOpBatchService (MessageQueueOpContext in heap)"),
    Point("txn_end_refused", "an end transaction did not match its half (or came too late): not applied",
          "EndTransactionProcessor.checkPrepareMessage / rejectCommitOrRollback"),
    Point("txn_half_lost_power_loss", "a power loss destroyed an unresolved half message's newest copy",
          "TransactionalMessageBridge (half topic data past the last fsync)"),
    # --- retention and disk pressure
    Point("commit_log_file_expired", "a CommitLog file past fileReservedTime was deleted",
          "DefaultMessageStore.CleanCommitLogService → MappedFileQueue.deleteExpiredFileByTime"),
    Point("commit_log_file_deleted_forcibly", "a CommitLog file not yet expired was deleted: disk above "
          "diskSpaceCleanForciblyRatio", "CleanCommitLogService.isSpaceToDelete (cleanImmediately)"),
    Point("disk_full_send_refused", "a send was refused because the store's disk is full: SERVICE_NOT_AVAILABLE",
          "DefaultMessageStore.checkStoreStatus (RunningFlags DISK_FULL_BIT)"),
    # --- controller mode (5.x automatic failover)
    Point("controller_elected_new_master", "the controller elected another broker of a group master",
          "ReplicasInfoManager.electMaster (DefaultElectPolicy)"),
    Point("controller_no_candidate", "an election found no alive SyncStateSet member: the group has no master",
          "ReplicasInfoManager.electMaster (CONTROLLER_MASTER_NOT_AVAILABLE)"),
    Point("controller_write_without_quorum", "a controller write (register, elect, alter) failed: no quorum",
          "DLedgerController.appendToDLedgerAndWait (5 s, SYSTEM_ERROR)"),
    Point("sync_state_set_shrunk", "a master asked to drop a slave from its SyncStateSet",
          "AutoSwitchHAService.maybeShrinkSyncStateSet / removeConnection"),
    Point("ha_truncated_at_consistent_point", "a slave cut records past the epochs' consistent point",
          "AutoSwitchHAClient.doTruncate (EpochFileCache.findConsistentPoint)"),
    Point("ha_no_consistent_point", "a slave's handshake found no epoch starting where its master's does: retried",
          "AutoSwitchHAClient.doTruncate (findConsistentPoint -1; a master re-confirmed at its own epoch moved its start)"),
    Point("in_sync_replicas_not_enough", "a send was refused: the SyncStateSet below minInSyncReplicas",
          "CommitLog.asyncPutMessage (IN_SYNC_REPLICAS_NOT_ENOUGH)"),
    # --- POP consumption (5.x)
    Point("pop_revived", "a popped message's invisible time passed un-acked: put into the POP retry topic",
          "PopReviveService.reviveRetry"),
    Point("pop_ack_after_revive", "an ack reached the broker after its checkpoint was revived: ignored",
          "PopReviveService.consumeReviveMessage (no checkpoint for the ack)"),
    Point("pop_ack_expired_handle", "the proxy refused an ack: the receipt handle's invisible time had passed",
          "proxy AbstractProcessor.validateReceiptHandle (INVALID_RECEIPT_HANDLE)"),
    Point("pop_order_queue_blocked", "an orderly pop skipped a queue whose popped batch is un-acked and invisible",
          "ConsumerOrderInfoManager.checkBlock"),
)

COV_POWER_LOSS_UNFLUSHED_TAIL = 0
COV_CRASH_WRITE_BUFFER_LOST = 1
COV_RECOVERY_TRUNCATES_INVALID_TAIL = 2
COV_CONSUME_QUEUE_DIRTY_UNITS_DROPPED = 3
COV_QUEUE_OFFSET_REUSED = 4
COV_FLUSH_DISK_TIMEOUT = 5
COV_CONFIG_FILE_LOADED_FROM_BAK = 6
COV_BROKER_OFFSET_ROLLED_BACK = 7
COV_OFFSET_ANSWER_BEHIND_REPLICA = 8
COV_SYNC_MASTER_WAITS_FOR_SLAVE = 9
COV_FLUSH_SLAVE_TIMEOUT = 10
COV_SLAVE_NOT_AVAILABLE = 11
COV_HA_SLAVE_CATCHING_UP = 12
COV_HA_SLAVE_DIVERGED = 13
COV_PULL_HELD_WOKEN_BY_ARRIVAL = 14
COV_PULL_HOLD_EXPIRED_EMPTY = 15
COV_SERVER_SIDE_RESET_TAKEN = 16
COV_SLAVE_PULL_REJECTED = 17
COV_PULL_FROM_SLAVE = 18
COV_DELAY_LEVEL_DELIVERED = 19
COV_CONSUME_FAILURE_SENT_BACK = 20
COV_SEND_BACK_RESENT_BY_INNER_PRODUCER = 21
COV_SEND_BACK_FAILED_LOCAL_RETRY = 22
COV_DLQ_BY_SEND_BACK = 23
COV_DLQ_BY_RETRY_SEND = 24
COV_SEND_RETRIED_OTHER_BROKER = 25
COV_SEND_BUDGET_EXHAUSTED = 26
COV_FAULT_BROKER_ISOLATED = 27
COV_PICK_ONE_AT_LEAST_CHOSEN = 28
COV_REACHABLE_PASS_CHOSEN = 29
COV_DETECTOR_RESTORED_BROKER = 30
COV_ASYNC_BACKPRESSURE_REJECTED = 31
COV_BROKER_BUSY_REJECTED = 32
COV_REBALANCE_DROPPED_QUEUE_IN_FLIGHT = 33
COV_OFFSET_ILLEGAL_CORRECTED = 34
COV_PULL_FLOW_CONTROLLED = 35
COV_ORDERLY_LOCK_REFUSED = 36
COV_ORDERLY_LOCK_EXPIRED_TAKEN_OVER = 37
COV_ORDERLY_LOCK_LOST = 38
COV_ORDERLY_CONSUME_NEEDS_LOCK = 39
COV_ORDERLY_QUEUE_SUSPENDED = 40
COV_TXN_CHECK_MAX_REACHED = 41
COV_TXN_CHECK_ANSWERED_UNKNOW = 42
COV_TXN_CHECK_NO_PRODUCER = 43
COV_TXN_OP_BATCH_LOST_IN_CRASH = 44
COV_TXN_END_REFUSED = 45
COV_TXN_HALF_LOST_POWER_LOSS = 46
COV_COMMIT_LOG_FILE_EXPIRED = 47
COV_COMMIT_LOG_FILE_DELETED_FORCIBLY = 48
COV_DISK_FULL_SEND_REFUSED = 49
COV_CONTROLLER_ELECTED_NEW_MASTER = 50
COV_CONTROLLER_NO_CANDIDATE = 51
COV_CONTROLLER_WRITE_WITHOUT_QUORUM = 52
COV_SYNC_STATE_SET_SHRUNK = 53
COV_HA_TRUNCATED_AT_CONSISTENT_POINT = 54
COV_HA_NO_CONSISTENT_POINT = 55
COV_IN_SYNC_REPLICAS_NOT_ENOUGH = 56
COV_POP_REVIVED = 57
COV_POP_ACK_AFTER_REVIVE = 58
COV_POP_ACK_EXPIRED_HANDLE = 59
COV_POP_ORDER_QUEUE_BLOCKED = 60

NAMES: tuple[str, ...] = tuple(p.name for p in POINTS)

check_catalogue(POINTS, {name: value for name, value in globals().items() if name.startswith("COV_")},
                "models/coverage_points.py")


def counts(counter: list[int] | None) -> dict[str, int]:
    """The summary's `coverage`: every declared name, in declaration order, with its count."""
    return _counts(counter, NAMES)
