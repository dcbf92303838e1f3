"""Every RocketMQ trace record kind and its typed fields, declared once (analysis reads these).

Per-message kinds carry the message's integer id (`msg_id`, models/message.py), never its key
string. Facts fixed at send time (`born_us`, the producer's first attempt; `shard`, the sharding
key index, -1 for none) are recorded once, in `producer.sent` / `producer.send_failed`: a run
emits one record of each per-message kind per message, so every field costs time in emission,
the digest and the checkers.
"""

from __future__ import annotations

from sim.trace import declare, declare_detail

# producer: one record per message of a send() call, when its outcome is known. `born_us` is the
# send() call (the application hands the message over); the send latency (RT) is the record's
# t_us - born_us. `attempts` counts the requests the send made (a batch's attempt counts for each
# of its messages); `steered` the attempts whose queue selection avoided a broker the fault
# strategy held unavailable (models/producer/producer.py); `broker` of a failure is the broker
# of the last attempt ("" if none was made).
PRODUCER_SENT = declare("producer.sent", msg_id=int, topic=str, shard=int, broker=str, queue_id=int,
                        status=str, attempts=int, born_us=int, steered=int)
PRODUCER_SEND_FAILED = declare("producer.send_failed", msg_id=int, topic=str, shard=int, attempts=int,
                               reason=str, born_us=int, broker=str, steered=int)
PRODUCER_ROUTE_UPDATED = declare("producer.route_updated", topic=str, queues=int)
# sendMessageInTransaction cleared the message's delay level (models/producer/transaction_producer.py)
PRODUCER_TXN_DELAY_CLEARED = declare("producer.txn_delay_cleared", msg_id=int, delay_level=int)

# broker
BROKER_STORED = declare("broker.stored", msg_id=int, topic=str, queue_id=int, queue_offset=int,
                        phys_offset=int, size_bytes=int, reconsume_times=int)
BROKER_SEND_REJECTED = declare("broker.send_rejected", msg_id=int, topic=str, code=int)
BROKER_REGISTERED = declare("broker.registered", namesrv=str)
BROKER_RECOVERED = declare("broker.recovered", records=int, wrote_position=int, flushed_position=int)
COMMIT_LOG_FLUSHED = declare("commit_log.flushed", position=int)
# an fsync failed (the `fsync_error` fault) and MappedFile.flush swallowed it: the flushed position
# still moved to `position`; the disk holds nothing from `lost_from` on (models/broker/commit_log.py)
COMMIT_LOG_FLUSH_ERROR = declare("commit_log.flush_error", position=int, lost_from=int)
COMMIT_LOG_TRUNCATED = declare("commit_log.truncated", position=int, records_lost=int)
CONSUMER_OFFSETS_PERSISTED = declare("broker.offsets_persisted", entries=int)
CONSUMER_OFFSETS_LOADED = declare("broker.offsets_loaded", entries=int, source=str)  # source: file, bak, none
BROKER_BUSY = declare("broker.busy", msg_id=int, reason=str)  # SYSTEM_BUSY answer (fast_failure.py)
# ground truth for loss causes (commit_log.py): a record a fault destroyed on a master, and a
# queue offset assigned again after a truncation
# retention (clean_service.py): a CommitLog file deleted (`forced`: before it expired, the disk
# above diskSpaceCleanForciblyRatio; `unconsumed`: the destroyed facts it gave), and the store's
# disk-full flag changing (`used_pct` of DiskConfig.size_bytes)
COMMIT_LOG_EXPIRED_DELETED = declare("commit_log.expired_deleted", file_from=int, records=int, forced=bool,
                                     unconsumed=int)
BROKER_DISK_STATE = declare("broker.disk_state", full=bool, used_pct=int)
COMMIT_LOG_DESTROYED = declare("commit_log.destroyed", msg_id=int, topic=str, queue_id=int, queue_offset=int,
                               fault=str, replicas=int, replicated=bool)
OFFSET_REUSED = declare("consume_queue.offset_reused", msg_id=int, topic=str, queue_id=int, queue_offset=int)
HA_CONNECTED = declare("ha.connected", slave=str, offset=int)  # the master got a slave's first report
HA_DISCONNECTED = declare("ha.disconnected", peer=str, reason=str)
HA_DIVERGED = declare("ha.diverged", position=int, torn_bytes=int)  # a slave's dispatch stops here
SLAVE_SYNCED = declare("broker.slave_synced", entries=int)
ADMIN_OFFSET_RESET = declare("admin.offset_reset", group=str, topic=str, queues=int, server_side=bool)
BROKER_CONSUMER_IDS_CHANGED = declare("broker.consumer_ids_changed", group=str, members=int, reason=str)
# timer messages (5.x TimerMessageStore, models/broker/timer_store.py): a message parked in
# rmq_sys_wheel_timer for the requested absolute delivery time `deliver_us` (slot `slot_us`: the
# wheel's slot it waits in), and each time the timer puts it back into its real topic (`replay`:
# from a slot read again after a restart, the timer's at-least-once delivery)
TIMER_ENQUEUED = declare("timer.enqueued", msg_id=int, topic=str, deliver_us=int, slot_us=int)
TIMER_DELIVERED = declare("timer.delivered", msg_id=int, topic=str, slot_us=int, replay=bool)
SCHEDULE_DELIVERED = declare("schedule.delivered", msg_id=int, topic=str, delay_level=int)

# controller mode (5.x automatic failover, models/controller.py, models/broker/replicas_manager.py):
# an election on the controller leader (`master`: the new master's node, "" when no member of the
# SyncStateSet was alive; `old_master` likewise; `epoch`: the new master epoch), a SyncStateSet the
# controller accepted (members' node names joined by ","), a broker's role change (`role`: master,
# slave, fenced — fenced: started, not yet told its role by the controller, takes no writes), the
# controller leadership (`leader` "" when no controller reaches a majority), and a slave's CommitLog
# cut at the consistent point of its epochs (AutoSwitchHAClient.doTruncate; `records`: how many)
CONTROLLER_ELECTED = declare("controller.elected", broker_name=str, master=str, old_master=str, epoch=int,
                             reason=str)
CONTROLLER_SYNC_STATE_SET = declare("controller.sync_state_set", broker_name=str, members=str, epoch=int)
CONTROLLER_LEADER = declare("controller.leader", leader=str, term=int)
BROKER_ROLE = declare("broker.role", broker_name=str, role=str, epoch=int)
HA_TRUNCATED = declare("ha.truncated", position=int, records=int, epoch=int)

# namesrv
NAMESRV_BROKER_UNREGISTERED = declare("namesrv.broker_unregistered", broker=str, reason=str)

# consumer
CONSUMER_CONSUMED = declare("consumer.consumed", group=str, msg_id=int, topic=str, broker=str,
                            queue_id=int, queue_offset=int, ok=bool, reconsume_times=int)
CONSUMER_REBALANCED = declare("consumer.rebalanced", group=str, topic=str, queues=int, added=int,
                              removed=int)
CONSUMER_PULL_FAILED = declare("consumer.pull_failed", group=str, broker=str, queue_id=int, reason=str)
CONSUMER_OFFSET_MOVED = declare("consumer.offset_moved", group=str, broker=str, queue_id=int,
                                from_offset=int, to_offset=int)
CONSUMER_SENT_BACK = declare("consumer.sent_back", group=str, msg_id=int, reconsume_times=int, ok=bool)
CONSUMER_RESENT_AS_NORMAL = declare("consumer.resent_as_normal", group=str, msg_id=int, reconsume_times=int,
                                   ok=bool)
CONSUMER_EXPIRED_CLEANED = declare("consumer.expired_cleaned", group=str, msg_id=int, broker=str, queue_id=int,
                                   queue_offset=int)
# ground truth for the duplicate causes (analysis/checkers/duplicates.py): rare, one per queue ownership change
CONSUMER_QUEUE_STARTED = declare("consumer.queue_started", group=str, topic=str, broker=str, queue_id=int, offset=int)
CONSUMER_QUEUE_DROPPED = declare("consumer.queue_dropped", group=str, topic=str, broker=str, queue_id=int,
                                 reason=str)
CONSUMER_SHUTDOWN = declare("consumer.shutdown", group=str, queues=int)
# orderly consumption (models/broker/rebalance_lock_manager.py, models/consumer/queue_lock.py): rare,
# one per queue per lock request. `how` of a grant: new (no lock held), renewed (the same client),
# expired (taken over from another client whose lock was older than lockMaxLiveTime); a refusal
# names the holder. The client records what lockAll / a rebalance lock did to its ProcessQueue.
BROKER_LOCK_GRANTED = declare("broker.lock_granted", group=str, client=str, topic=str, queue_id=int, how=str)
BROKER_LOCK_REFUSED = declare("broker.lock_refused", group=str, client=str, topic=str, queue_id=int, holder=str)
BROKER_UNLOCKED = declare("broker.unlocked", group=str, client=str, topic=str, queue_id=int)
CONSUMER_LOCK_LOST = declare("consumer.lock_lost", group=str, topic=str, broker=str, queue_id=int)
BROKER_OFFSET_ROLLED_BACK = declare("broker.offset_rolled_back", group=str, topic=str, queue_id=int,
                                    from_offset=int, to_offset=int)
# a QUERY_CONSUMER_OFFSET from `client` answered `offset`, below the `replica_offset` another replica
# of broker group `broker` held (models/broker/offsets.py): rare, one per queue start at most
BROKER_OFFSET_BEHIND_REPLICA = declare("broker.offset_behind_replica", group=str, topic=str, broker=str,
                                       queue_id=int, client=str, offset=int, replica_offset=int)

# POP consumption (5.x, models/broker/pop_revive_service.py, models/consumer/pop_consumer.py): ground
# truth for the duplicate causes invisible_time_expired and ack_lost (analysis/checkers/duplicates.py). Rare: a
# message put back into the group's POP retry topic by PopReviveService because its checkpoint's
# invisible time passed without an ack (`reconsume_times` of the new copy; `from_*`: the popped copy;
# `replay`: a checkpoint revived again after a restart reloaded an older revive offset), a
# listener call that ended after its handle's invisible time (`deadline_us`; the ack comes too late),
# an ack the consumer sent and that failed (`reason`: timeout, connect_failed, code_<n>)
POP_REVIVED = declare("pop.revived", group=str, msg_id=int, topic=str, queue_id=int, queue_offset=int,
                      reconsume_times=int, from_topic=str, from_queue_id=int, from_offset=int, replay=bool)
POP_ACK_LATE = declare("pop.ack_late", group=str, msg_id=int, deadline_us=int)
# an orderly pop handing out again, in place, an offset of a batch whose invisible time passed with a
# message un-acked (ConsumerOrderInfoManager; `reconsume_times` its offsetConsumedCount)
POP_ORDER_REDELIVERED = declare("pop.order_redelivered", group=str, msg_id=int, topic=str, queue_id=int,
                                queue_offset=int, reconsume_times=int)
POP_ACK_FAILED = declare("pop.ack_failed", group=str, msg_id=int, reason=str)

# transactional messages (analysis/checkers/txn_checker.py). Producer side: `txn.local_done` when the local
# transaction's outcome is decided (ground truth: `outcome` COMMIT / ROLLBACK; `state` what
# executeLocalTransaction returned: COMMIT_MESSAGE / ROLLBACK_MESSAGE / UNKNOW / EXCEPTION, or
# NOT_EXECUTED after a stored-but-not-OK half send); `txn.check_answered` per check answered.
TXN_LOCAL_DONE = declare("txn.local_done", msg_id=int, outcome=str, state=str)
TXN_CHECK_ANSWERED = declare("txn.check_answered", msg_id=int, state=str)
# broker side: `txn.checked` per check (the half written back with its new TRANSACTION_CHECK_TIMES;
# `producer` the channel the check went to, "" if none); `txn.ended` per COMMIT/ROLLBACK end
# processed (`code` 0 = applied; a commit's real message is a `broker.stored` of the real topic);
# `txn.discarded` when a half reached transactionCheckMax; `txn.half_lost`: a power loss destroyed
# the newest copy of an unresolved half (ground truth, not a RocketMQ event)
TXN_CHECKED = declare("txn.checked", msg_id=int, check_times=int, producer=str)
# a check round threw (the `service_error` fault): it ended without storing the half and op queues'
# consume offsets, which stay at `half_offset` / `op_offset` (its scan had reached `scanned_to`)
TXN_CHECK_ERROR = declare("txn.check_error", half_offset=int, scanned_to=int, op_offset=int)
TXN_ENDED = declare("txn.ended", msg_id=int, action=str, from_check=bool, code=int)
TXN_DISCARDED = declare("txn.discarded", msg_id=int, check_times=int)
TXN_HALF_LOST = declare("txn.half_lost", msg_id=int)
CONSUMER_OFFSET_RESET = declare("consumer.offset_reset", group=str, topic=str, queues=int)  # 4.x client-side reset

# Detail kinds (sim/trace.py `declare_detail`): emitted only by a run that asks for them (a traced
# run, `rmqsim explain`'s replay), left out of the digest. `producer.attempt_failed`: a send
# attempt that failed and was retried or ended the send (SYNC sends; `rt_us` the attempt's time);
# the last attempt of a successful send is its `producer.sent`.
PRODUCER_ATTEMPT_FAILED = declare_detail("producer.attempt_failed", msg_id=int, broker=str, queue_id=int,
                                         reason=str, rt_us=int)
# ConsumerOffsetManager: a commit a broker applied (`via` pull: FLAG_COMMIT_OFFSET of a pull; update:
# UPDATE_CONSUMER_OFFSET, the client's persist), each entry of consumerOffset.json written, each entry
# loaded at start-up (`source` file / bak), each entry a slave copied from its master (SlaveSynchronize)
BROKER_OFFSET_COMMITTED = declare_detail("broker.offset_committed", group=str, topic=str, queue_id=int, offset=int,
                                         client=str, via=str)
BROKER_OFFSET_FILE_WRITTEN = declare_detail("broker.offset_file_written", group=str, topic=str, queue_id=int,
                                            offset=int)
BROKER_OFFSET_LOADED = declare_detail("broker.offset_loaded", group=str, topic=str, queue_id=int, offset=int,
                                      source=str)
BROKER_OFFSET_SYNCED = declare_detail("broker.offset_synced", group=str, topic=str, queue_id=int, offset=int)
# ConsumerManager: a heartbeat that registered a client in a group, and a client leaving it
# (`reason` unregistered / closed / expired)
BROKER_CLIENT_REGISTERED = declare_detail("broker.client_registered", group=str, client=str)
BROKER_CLIENT_UNREGISTERED = declare_detail("broker.client_unregistered", group=str, client=str, reason=str)
# MQClientInstance: a route a client installed (`queues`: "<broker>:<write queues>", comma separated)
CLIENT_ROUTE_UPDATED = declare_detail("client.route_updated", topic=str, queues=str)
# the CommitLog range [from_position, to_position) a broker dispatched to its ConsumeQueues in one
# round (ReputMessageService), and the range a slave appended from one HA frame
CONSUME_QUEUE_DISPATCHED = declare_detail("consume_queue.dispatched", from_position=int, to_position=int)
HA_APPENDED = declare_detail("ha.appended", from_position=int, to_position=int)
# POP (models/consumer/pop_consumer.py): each message a POP consumer received, with its receipt
# handle's pop time and invisible time (the ground truth of the POP stories)
POP_RECEIVED = declare_detail("pop.received", group=str, msg_id=int, topic=str, queue_id=int, queue_offset=int,
                              pop_time_us=int, invisible_us=int)
# POP (models/broker/pop_message_processor.py): each message a broker handed out to a pop, on the
# broker, with the client whose request it answered (`client`: the node that sent the pop) — the
# ground truth of who popped it, also when no consumer received it (a dead client's parked receive)
POP_POPPED = declare_detail("pop.popped", group=str, msg_id=int, topic=str, queue_id=int, queue_offset=int,
                            client=str, pop_time_us=int, invisible_us=int)
