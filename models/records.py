"""Every RocketMQ trace record kind and its fields, declared once (analysis reads these names).

Per-message kinds carry the message's `uniq_key` (`key`). Facts fixed at send time (`born_us`,
the producer's first attempt; `shard`, the sharding key) are recorded once, in `producer.sent`,
and joined by key where needed: a run emits one record of each per-message kind per message,
so every field costs time in emission, the digest and the checkers.
"""

from __future__ import annotations

from sim.trace import declare

# producer: one record per send() call, when its outcome is known
PRODUCER_SENT = declare("producer.sent", "key", "topic", "shard", "broker", "queue_id", "status",
                        "attempts", "born_us")
PRODUCER_SEND_FAILED = declare("producer.send_failed", "key", "topic", "shard", "attempts",
                               "reason", "born_us")
PRODUCER_ROUTE_UPDATED = declare("producer.route_updated", "topic", "queues")

# broker
BROKER_STORED = declare("broker.stored", "key", "topic", "queue_id", "queue_offset", "phys_offset",
                        "size_bytes", "reconsume_times")
BROKER_SEND_REJECTED = declare("broker.send_rejected", "key", "topic", "code")
BROKER_REGISTERED = declare("broker.registered", "namesrv")
BROKER_RECOVERED = declare("broker.recovered", "records", "wrote_position", "flushed_position")
COMMIT_LOG_FLUSHED = declare("commit_log.flushed", "position")
COMMIT_LOG_TRUNCATED = declare("commit_log.truncated", "position", "records_lost")
CONSUMER_OFFSETS_PERSISTED = declare("broker.offsets_persisted", "entries")
BROKER_CONSUMER_IDS_CHANGED = declare("broker.consumer_ids_changed", "group", "members", "reason")
SCHEDULE_DELIVERED = declare("schedule.delivered", "key", "topic", "delay_level")

# namesrv
NAMESRV_BROKER_UNREGISTERED = declare("namesrv.broker_unregistered", "broker", "reason")

# consumer
CONSUMER_CONSUMED = declare("consumer.consumed", "group", "key", "topic", "broker", "queue_id",
                            "queue_offset", "ok", "reconsume_times")
CONSUMER_REBALANCED = declare("consumer.rebalanced", "group", "topic", "queues", "added", "removed")
CONSUMER_PULL_FAILED = declare("consumer.pull_failed", "group", "broker", "queue_id", "reason")
CONSUMER_OFFSET_MOVED = declare("consumer.offset_moved", "group", "broker", "queue_id", "from_offset",
                                "to_offset")
CONSUMER_SENT_BACK = declare("consumer.sent_back", "group", "key", "reconsume_times", "ok")
