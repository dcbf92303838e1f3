"""What every scenario field means: the trailing comments of `rmqsim defaults`.

`describe(model, field)` is the field's pydantic `description` when it has one, else the entry
here under `"<Model>.<field>"`: meaning, unit, and the RocketMQ (Java) name where there is one
(5.3.3), else the comment written beside the field in its class. A field with none of these is
a test failure naming it (tests/test_reference.py), so a new field must say what it is.

The unit a name carries (`_ms`, `_s`, `_min`, `_bytes`, `_mib`; `mills`/`millis` where the Java
name has it) is what a number without a unit means there; every duration and size field also
takes a unit string ('5s', '64KiB': sim/kernel/config.py), so the entries here need not repeat it.
"""

from __future__ import annotations

import functools
import inspect
import io
import re
import tokenize
from typing import Any

FIELD_DOCS: dict[str, str] = {
    # the scenario
    "Scenario.name": "the run's name; output goes to runs/<name>/",
    "Scenario.seed": "default seed of the run (`--seed` overrides); 0 .. 2^63-1",
    "Scenario.duration_ms": "ms of traffic and faults (units: 500ms, 10s, 2min); then everything heals",
    "Scenario.settle_ms": "ms after duration_ms with no faults, before the checks; `auto`: until the cluster "
                          "is quiet for quiet_window_ms (sim/quiescence.py), at most max_settle_ms",
    "Scenario.quiet_window_ms": "how long the cluster must be quiet (null: one consumer heartbeat + one "
                                "rebalance + one offset persistence round, 60 s with the defaults)",
    "Scenario.max_settle_ms": "the longest `settle_ms: auto` goes on; a run still not quiet then is `unknown`",
    "Scenario.warmup_ms": "ms; messages sent earlier are left out of latency statistics (OMB warmupDurationMinutes)",
    "Scenario.cluster": "name servers, broker groups and topics",
    "Scenario.network": "one-way latencies of the network",
    "Scenario.producers": "producer entries; count N makes nodes <name>-1..<name>-N (rates per instance)",
    "Scenario.consumers": "push-consumer entries; count N makes nodes <name>-1..<name>-N",
    "Scenario.faults": "scripted faults at at_ms (kinds and their fields: header)",
    "Scenario.random_faults": "faults drawn at a seeded rate per hour on one of `nodes` (header)",
    "Scenario.expect": "bounds on summary metrics by key path: {lost: 0, latency_ms.p99: {max: 50}}",
    "Scenario.limits": "sane maxima, raised deliberately; not part of the scenario digest",
    "Limits.max_sim_time_ms": "most ms of duration_ms + settle_ms (default 7 days)",
    "Limits.max_rate_per_s": "most messages per second of one producer instance",
    "Limits.max_instances": "most instances (`count`) of one producer or consumer entry",
    "Limits.max_nodes": "most nodes in the scenario",
    "ClusterSpec.nameservers": "NamesrvController instances (every client and broker knows all)",
    "ClusterSpec.brokers": "broker groups: each a master (brokerId 0) on its own host",
    "ClusterSpec.topics": "topics, created on their brokers at start",
    "NameServerSpec.name": "node name",
    "NameServerSpec.zone": "zone (machine room) of the host",
    "BrokerSpec.name": "brokerName (also the node name; <room>@<name> for machine-room strategies)",
    "BrokerSpec.zone": "zone (machine room) of the host",
    "BrokerSpec.store": "MessageStoreConfig: CommitLog, flush and read settings",
    "BrokerSpec.broker": "BrokerConfig: broker-level settings",
    "BrokerSpec.disk": "the host's disk (simulator, not a Java setting)",
    "TopicSpec.name": "topic name (letters, digits, _ and -)",
    "TopicSpec.queues": "queues per broker (writeQueueNums = readQueueNums)",
    "TopicSpec.brokers": "brokers hosting it (null: every broker)",
    "NetworkSpec.latency_ms": "one-way latency of every link, ms (a distribution)",
    "NetworkSpec.zone_latency": "one-way latency between two zones: {zones: [a, b], latency_ms: ...}",
    "NetworkSpec.links": "one-way latency of one link: {src, dst, latency_ms, both_ways}",
    "ZoneLatencySpec.zones": "the two zones",
    "ZoneLatencySpec.latency_ms": "one-way latency between them, ms (a distribution)",
    "LinkSpec.src": "sending node",
    "LinkSpec.dst": "receiving node",
    "LinkSpec.latency_ms": "one-way latency, ms (a distribution)",
    "LinkSpec.both_ways": "also set dst -> src",
    # producers
    "ProducerSpec.name": "node name (with count N: <name>-1..<name>-N)",
    "ProducerSpec.count": "instances of this entry",
    "ProducerSpec.zone": "zone (machine room) of its hosts",
    "ProducerSpec.topic": "topic it sends to",
    "ProducerSpec.rate_per_s": "messages per second, per instance",
    "ProducerSpec.arrival": "poisson (exponential gaps) or constant gaps",
    "ProducerSpec.message_bytes": "body size in bytes (a distribution; sizes take units: 512, '4KiB', '1MB')",
    "ProducerSpec.tags": "tags, drawn uniformly per message (empty: none)",
    "ProducerSpec.keys": "distinct sharding keys, drawn uniformly (0: none; order is checked per key)",
    "ProducerSpec.send_mode": "SYNC (send) or ONEWAY (sendOneway)",
    "ProducerSpec.start_ms": "ms when it starts sending",
    "ProducerSpec.stop_ms": "ms when it stops sending (null: at duration_ms)",
    "ProducerSpec.client": "DefaultMQProducer / ClientConfig settings",
    "ProducerConfig.send_msg_timeout_ms": "ms budget of one send() including retries (sendMsgTimeout)",
    "ProducerConfig.retry_times_when_send_failed": "extra attempts of a failed sync send (retryTimesWhenSendFailed)",
    "ProducerConfig.retry_another_broker_when_not_store_ok":
        "retry a non-SEND_OK status on another broker (retryAnotherBrokerWhenNotStoreOK)",
    "ProducerConfig.poll_name_server_interval_ms": "ms between route refreshes (ClientConfig.pollNameServerInterval)",
    "ProducerConfig.mq_client_api_timeout_ms": "ms timeout of name-server requests (ClientConfig.mqClientApiTimeout)",
    "ProducerConfig.max_message_size_bytes": "largest body the client accepts, bytes (maxMessageSize)",
    # consumers
    "ConsumerSpec.name": "node name and client id (with count N: <name>-1..<name>-N)",
    "ConsumerSpec.count": "instances of this entry",
    "ConsumerSpec.zone": "zone (machine room) of its hosts",
    "ConsumerSpec.group": "consumer group (consumerGroup)",
    "ConsumerSpec.topic": "topic it subscribes to",
    "ConsumerSpec.tags": "tags it subscribes to (null: '*')",
    "ConsumerSpec.consume_time_ms": "ms the listener takes per message (a distribution; '2ms' works)",
    "ConsumerSpec.failure_probability": "chance the listener fails: RECONSUME_LATER, or SUSPEND_CURRENT_QUEUE_A_MOMENT when ORDERLY (0 .. <1)",
    "ConsumerSpec.consume_mode": "CONCURRENTLY or ORDERLY (MessageListenerOrderly: broker locks, one batch at a time per queue)",
    "ConsumerSpec.start_ms": "ms when it starts",
    "ConsumerSpec.client": "DefaultMQPushConsumer / ClientConfig settings",
    "PushConsumerConfig.message_model": "CLUSTERING (queues shared) or BROADCASTING (messageModel)",
    "PushConsumerConfig.consume_from_where": "where a new group starts (consumeFromWhere)",
    "PushConsumerConfig.allocate_message_queue_strategy":
        "how members split queues: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG, MACHINE_ROOM, MACHINE_ROOM_NEARBY "
        "(allocateMessageQueueStrategy)",
    "PushConsumerConfig.consume_thread_max": "listener threads (consumeThreadMin = consumeThreadMax)",
    "PushConsumerConfig.consume_concurrently_max_span":
        "offset span in a queue above which pulling pauses (consumeConcurrentlyMaxSpan)",
    "PushConsumerConfig.pull_threshold_for_queue": "cached messages per queue above which pulling pauses (pullThresholdForQueue)",
    "PushConsumerConfig.pull_threshold_size_for_queue_mib": "cached MiB per queue above which pulling pauses (pullThresholdSizeForQueue)",
    "PushConsumerConfig.pull_batch_size": "messages per pull request (pullBatchSize)",
    "PushConsumerConfig.pull_interval_ms": "ms between pulls of one queue (pullInterval)",
    "PushConsumerConfig.max_reconsume_times": "retries before the DLQ; -1 means 16, ORDERLY: never (maxReconsumeTimes)",
    "PushConsumerConfig.suspend_current_queue_time_millis": "ORDERLY: ms a failed queue waits before it is retried, used clamped to 10 .. 30000 (suspendCurrentQueueTimeMillis)",
    "PushConsumerConfig.consume_message_batch_max_size": "ORDERLY: messages per listener call; CONCURRENTLY takes 1 (consumeMessageBatchMaxSize)",
    "PushConsumerConfig.persist_consumer_offset_interval_ms": "ms between offset commits to the broker (persistConsumerOffsetInterval)",
    "PushConsumerConfig.pull_time_delay_mills_when_exception": "ms before retrying a failed pull (pullTimeDelayMillsWhenException)",
    "PushConsumerConfig.heartbeat_broker_interval_ms": "ms between heartbeats to brokers (heartbeatBrokerInterval)",
    "PushConsumerConfig.poll_name_server_interval_ms": "ms between route refreshes (pollNameServerInterval)",
    "PushConsumerConfig.mq_client_api_timeout_ms": "ms timeout of name-server and broker requests (mqClientApiTimeout)",
    "PushConsumerConfig.virtual_node_cnt": "CONSISTENT_HASH: virtual nodes per member (virtualNodeCnt)",
    "PushConsumerConfig.consumeridcs": "MACHINE_ROOM: the rooms this group consumes (consumeridcs)",
    "PushConsumerConfig.message_queue_list": "CONFIG: the queues every member consumes ({broker, queue_id, topic})",
    "PushConsumerConfig.machine_room_nearby_inner": "MACHINE_ROOM_NEARBY: strategy inside a room",
    "PushConsumerConfig.machine_room_resolver":
        "MACHINE_ROOM_NEARBY: room of a node, ZONE (its zone) or NAMING (text before '@')",
    "ConfiguredQueue.topic": "topic (null: the consumer's; '%RETRY%<group>' for its retry queue)",
    "ConfiguredQueue.broker": "brokerName",
    "ConfiguredQueue.queue_id": "queueId",
    # brokers
    "MessageStoreConfig.flush_disk_type": "ASYNC_FLUSH (ack before fsync) or SYNC_FLUSH (ack after) (flushDiskType)",
    "MessageStoreConfig.flush_interval_commit_log_ms": "ms between async CommitLog flushes (flushIntervalCommitLog)",
    "MessageStoreConfig.flush_commit_log_least_pages": "4 KiB pages needed before an async flush (flushCommitLogLeastPages)",
    "MessageStoreConfig.flush_commit_log_thorough_interval_ms":
        "ms after which an async flush ignores the page minimum (flushCommitLogThoroughInterval)",
    "MessageStoreConfig.sync_flush_timeout_ms": "ms a SYNC_FLUSH send waits for its fsync (syncFlushTimeout)",
    "MessageStoreConfig.mapped_file_size_commit_log_bytes": "CommitLog file size, bytes (mappedFileSizeCommitLog)",
    "MessageStoreConfig.max_message_size_bytes": "largest message the broker stores, bytes (maxMessageSize)",
    "MessageStoreConfig.max_transfer_count_on_message_in_memory":
        "messages per pull from page cache (maxTransferCountOnMessageInMemory)",
    "MessageStoreConfig.max_transfer_bytes_on_message_in_memory":
        "bytes per pull from page cache (maxTransferBytesOnMessageInMemory)",
    "MessageStoreConfig.max_transfer_count_on_message_in_disk": "messages per pull from disk (maxTransferCountOnMessageInDisk)",
    "MessageStoreConfig.max_transfer_bytes_on_message_in_disk": "bytes per pull from disk (maxTransferBytesOnMessageInDisk)",
    "MessageStoreConfig.access_message_in_memory_max_ratio":
        "percent of RAM beyond which reads count as from disk (accessMessageInMemoryMaxRatio)",
    "MessageStoreConfig.physical_memory_bytes": "host RAM, bytes (UtilAll.TOTAL_PHYSICAL_MEMORY_SIZE)",
    "MessageStoreConfig.broker_role": "ASYNC_MASTER, SYNC_MASTER or SLAVE (brokerRole)",
    "MessageStoreConfig.message_delay_level": "delays of the 18 retry levels (messageDelayLevel)",
    "MessageStoreConfig.flush_delay_offset_interval_ms": "ms between schedule-offset persists (flushDelayOffsetInterval)",
    "BrokerConfig.register_name_server_period_ms": "ms between registrations with the name servers (registerNameServerPeriod)",
    "BrokerConfig.flush_consumer_offset_interval_ms": "ms between consumer-offset persists (flushConsumerOffsetInterval)",
    "BrokerConfig.long_polling_enable": "hold empty pulls until messages arrive (longPollingEnable)",
    "BrokerConfig.short_polling_time_mills": "ms an empty pull waits without long polling (shortPollingTimeMills)",
    "BrokerConfig.notify_consumer_ids_changed_enable":
        "tell a group's members when membership changes (notifyConsumerIdsChangedEnable)",
    "BrokerConfig.default_topic_queue_nums": "queues of an auto-created topic (defaultTopicQueueNums)",
    "BrokerConfig.startup_ms": "ms from restart to serving: JVM start and store recovery (simulator)",
    "DiskConfig.write_latency_ms": "ms of a page-cache write (a distribution; simulator)",
    "DiskConfig.fsync_latency_ms": "ms of an fsync (a distribution; simulator)",
    "DiskConfig.bandwidth_bytes_per_s": "disk bandwidth, bytes per second (simulator)",
    # distributions
    "Constant.dist": "constant: always `value`",
    "Constant.value": "the value (ms, or bytes for sizes)",
    "Uniform.dist": "uniform between low and high",
    "Uniform.low": "lowest value (ms, or bytes)",
    "Uniform.high": "highest value (ms, or bytes)",
    "Exponential.dist": "exponential with the given mean",
    "Exponential.mean_value": "mean (ms, or bytes)",
    "Lognormal.dist": "lognormal: median + sigma, or p50 + p99",
    "Lognormal.median": "median (ms, or bytes)",
    "Lognormal.sigma": "sigma of the underlying normal (no unit)",
    "Lognormal.p50": "median (ms, or bytes), with p99",
    "Lognormal.p99": "99th percentile (ms, or bytes), with p50",
    "Empirical.dist": "empirical: each of `values` equally likely",
    "Empirical.values": "the values (ms, or bytes)",
    # faults
    "FaultSpec.at_ms": "ms when it happens (before duration_ms)",
    "FaultSpec.kind": "process_crash, power_loss, restart, partition, heal, link_latency, packet_loss, disk_slow, "
                      "fsync_stall or pause",
    "FaultSpec.node": "the node (process_crash, power_loss, restart, disk_slow, fsync_stall, pause)",
    "FaultSpec.groups": "partition: lists of nodes that can reach only their own group",
    "FaultSpec.one_way": "partition: cut only the links from the first group to the others",
    "FaultSpec.src": "link_latency, packet_loss: sending node",
    "FaultSpec.dst": "link_latency, packet_loss: receiving node",
    "FaultSpec.both_ways": "link_latency, packet_loss: also dst -> src",
    "FaultSpec.duration_ms": "ms until it heals itself (required for fsync_stall and pause)",
    "FaultSpec.factor": "disk_slow: disk times multiplied by this",
    "FaultSpec.extra_latency_ms": "link_latency: ms added per message (a distribution)",
    "FaultSpec.probability": "packet_loss: chance a segment is lost (0 .. <1)",
    "RandomFaultSpec.kind": "any fault kind but restart and heal",
    "RandomFaultSpec.nodes": "candidates, one chosen uniformly per fault",
    "RandomFaultSpec.rate_per_hour": "faults per simulated hour of healthy time, for the whole entry (not per node)",
    "RandomFaultSpec.min_up_ms": "ms each healthy phase lasts at least: max(min_up_ms, Exp(rate_per_hour))",
    "RandomFaultSpec.down_ms": "ms each fault lasts (a distribution)",
    "RandomFaultSpec.factor": "disk_slow: disk times multiplied by this",
    "RandomFaultSpec.extra_latency_ms": "link_latency: ms added per message (a distribution)",
    "RandomFaultSpec.probability": "packet_loss: chance a segment is lost",
    # added by other features (their source comments above the field, said here in one line)
    "Scenario.version": "RocketMQ behaviour followed where 4.x and 5.x differ: 5.x or 4.x",
    "BrokerSpec.replicas": "roles of the group's brokers: master node <name>, SLAVEs <name>-s1.. (null: one master)",
    "ReplicaSpec.role": "ASYNC_MASTER, SYNC_MASTER or SLAVE (brokerRole)",
    "ReplicaSpec.zone": "zone of this replica's host (null: the group's zone)",
    "BrokerConfig.send_put_time_ms": "ms one SendMessage holds the CommitLog put lock (a distribution; simulator; 0: none)",
    "PushConsumerConfig.consume_timestamp_ms":
        "CONSUME_FROM_TIMESTAMP: simulated ms to start from (null: 30 min before start) (consumeTimestamp)",
    "ActionSpec.at_ms": "ms when the operator acts",
    "ActionSpec.kind": "reset_offset (mqadmin resetOffsetByTime)",
    "ExpectBounds.min": "lowest acceptable value",
    "ExpectBounds.max": "highest acceptable value",
}


def describe(model: type, name: str) -> str | None:
    """The field's description: pydantic's `description`, else FIELD_DOCS, else the comment
    written beside the field in its class (house style: the Java name beside each default);
    None if none of them."""
    field = model.model_fields[name]
    return field.description or FIELD_DOCS.get(f"{model.__name__}.{name}") or source_comments(model).get(name)


@functools.cache
def source_comments(model: type) -> dict[str, str]:
    """field name → the trailing `# comment` of its line in the class body (ruff's noqa removed)."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    for line in lines:
        match = _FIELD_LINE.match(line)
        if match and match.group(1) in model.model_fields:
            tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
            comment = next((t.string[1:].strip() for t in tokens if t.type == tokenize.COMMENT), "")
            comment = re.sub(r"noqa\S*( - )?", "", comment).strip()
            if comment:
                out[match.group(1)] = comment
    return out


_FIELD_LINE = re.compile(r"^    ([a-z_][a-z0-9_]*)\s*:")


def every_model(root: type) -> list[type]:
    """Every pydantic model reachable from `root`'s fields (and the distribution classes)."""
    import typing

    from pydantic import BaseModel

    from sim.kernel.dist import Constant, Empirical, Exponential, Lognormal, Uniform

    seen: dict[str, type] = {}

    def models_in(tp: Any) -> list[type]:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [tp]
        return [m for arg in typing.get_args(tp) for m in models_in(arg)]

    def walk(model: type) -> None:
        if model.__name__ in seen:
            return
        seen[model.__name__] = model
        for field in model.model_fields.values():
            for inner in models_in(field.annotation):
                walk(inner)

    for model in (root, Constant, Uniform, Exponential, Lognormal, Empirical):
        walk(model)
    return list(seen.values())


def missing_descriptions(root: type) -> list[str]:
    """`<module>.<Model>.<field>` of every field without a description."""
    return [f"{m.__module__}.{m.__name__}.{name}" for m in every_model(root) for name in m.model_fields
            if not describe(m, name)]
