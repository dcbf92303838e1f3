"""Every RocketMQ trace record kind and its typed fields, declared once (analysis reads these).

Per-message kinds carry the message's integer id (`msg_id`, models/message.py), never its key
string. Facts fixed at send time (`born_us`, the producer's first attempt; `shard`, the sharding
key index, -1 for none) are recorded once, in `producer.sent` / `producer.send_failed`: a run
emits one record of each per-message kind per message, so every field costs time in emission,
the digest and the checkers.
"""

from __future__ import annotations

from sim.trace import declare

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

# broker
BROKER_STORED = declare("broker.stored", msg_id=int, topic=str, queue_id=int, queue_offset=int,
                        phys_offset=int, size_bytes=int, reconsume_times=int)
BROKER_SEND_REJECTED = declare("broker.send_rejected", msg_id=int, topic=str, code=int)
BROKER_REGISTERED = declare("broker.registered", namesrv=str)
BROKER_RECOVERED = declare("broker.recovered", records=int, wrote_position=int, flushed_position=int)
COMMIT_LOG_FLUSHED = declare("commit_log.flushed", position=int)
COMMIT_LOG_TRUNCATED = declare("commit_log.truncated", position=int, records_lost=int)
CONSUMER_OFFSETS_PERSISTED = declare("broker.offsets_persisted", entries=int)
CONSUMER_OFFSETS_LOADED = declare("broker.offsets_loaded", entries=int, source=str)  # source: file, bak, none
BROKER_BUSY = declare("broker.busy", msg_id=int, reason=str)  # SYSTEM_BUSY answer (fast_failure.py)
# ground truth for loss causes (commit_log.py): a record a fault destroyed on a master, and a
# queue offset assigned again after a truncation
COMMIT_LOG_DESTROYED = declare("commit_log.destroyed", msg_id=int, topic=str, queue_id=int, queue_offset=int,
                               fault=str, replicas=int, replicated=bool)
OFFSET_REUSED = declare("consume_queue.offset_reused", msg_id=int, topic=str, queue_id=int, queue_offset=int)
HA_CONNECTED = declare("ha.connected", slave=str, offset=int)  # the master got a slave's first report
HA_DISCONNECTED = declare("ha.disconnected", peer=str, reason=str)
HA_DIVERGED = declare("ha.diverged", position=int, torn_bytes=int)  # a slave's dispatch stops here
SLAVE_SYNCED = declare("broker.slave_synced", entries=int)
ADMIN_OFFSET_RESET = declare("admin.offset_reset", group=str, topic=str, queues=int, server_side=bool)
BROKER_CONSUMER_IDS_CHANGED = declare("broker.consumer_ids_changed", group=str, members=int, reason=str)
SCHEDULE_DELIVERED = declare("schedule.delivered", msg_id=int, topic=str, delay_level=int)

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
CONSUMER_OFFSET_RESET = declare("consumer.offset_reset", group=str, topic=str, queues=int)  # 4.x client-side reset
