"""client.impl.consumer.DefaultMQPushConsumerImpl.

One PushConsumer is one client process (node) with one consumer group, registered with the
process's MQClientInstance (models/client_instance.py), which polls the routes, keeps the broker
address table, heartbeats and persists offsets. Start-up: fetch routes of the subscribed topics
(plus `%RETRY%<group>` in CLUSTERING), heartbeat to every broker, then rebalance at once if
the heartbeat round went out (5.x: not when no broker address was known yet; 4.9.8: whatever it
returned). A new queue's first pull is dispatched 500 ms after the rebalance (5.x
`dispatchPullRequest(..., 500)`), at once for a 4.9.8 client (`client_version` 4.x:
`executePullRequestImmediately`).
Timers of the client instance: route poll every 30 s (first after 10 ms), heartbeat every 30 s
(first after 1 s), offset persist every 5 s (first after 10 s); rebalance every 20 s.

Pull loop (`pullMessage`), one outstanding PullRequest per owned queue: flow control
(count > 1000, size > 100 MiB, span > 2000 → retry in 50 ms), then PULL_MESSAGE to the queue's
master with the in-memory offset piggy-backed (commitOffset), suspend 15 s, RPC timeout 30 s.
FOUND → cache and submit, pull again; NO_NEW_MSG / NO_MATCHED_MSG → move on (and commit the new
offset if nothing is cached); OFFSET_ILLEGAL → 5.2.0+ update-and-persist the corrected offset,
drop the queue, rebalance now (4.9.8: update, persist and remove 10 s later, no rebalance); errors → retry after
`pullTimeDelayMillsWhenException` (1 s: ClientConfig's, which the impl's 3000 is overwritten with
in both versions) — among them SUBSCRIPTION_NOT_EXIST, from a broker that has no heartbeat of the
group since its start (the pull carries no subscription: models/pull_sys_flag.py), recorded as
`consumer.pull_failed` "subscription_not_exist".
When a route lists slaves, the node a queue is pulled from follows the brokers' suggestions and
falls back to a slave when the master is gone (pull_api.py). A broker's
RESET_CONSUMER_CLIENT_OFFSET is handled by reset_offset.py.
"""

# compiled with Cython: the C declarations of this module's classes are in push_consumer.pxd beside it

from __future__ import annotations

from typing import Any

import cython

from models.client_instance import (
    MQClientInstance,
    build_mq_client_id,
    heartbeat_channel_listener_enabled,
    topic_route_data_to_subscribe_info,
)
from models.consumer.allocate_setup import allocate_strategy
from models.consumer.config import (
    BROKER_SUSPEND_MAX_TIME_US,
    CONSUME_TIMESTAMP_BEFORE_START_US,
    CONSUMER_TIMEOUT_WHEN_SUSPEND_US,
    OFFSET_ILLEGAL_LATER_US_4X,
    PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL_US,
    V4_NEW_PULL_REQUEST_DELAY_US,
    MessageModel,
    PushConsumerConfig,
)
from models.consumer.consume_batch import BatchConsumeService
from models.consumer.consume_service import ConsumeService
from models.consumer.offset_store import OffsetStore
from models.consumer.process_queue import ProcessQueue
from models.consumer.pull_api import PullAPIWrapper
from models.consumer.rebalance import Rebalancer
from models.consumer.reset_offset import ClientResetOffset
from models.coverage_points import COV_OFFSET_ILLEGAL_CORRECTED, COV_PULL_FLOW_CONTROLLED, COV_PULL_FROM_SLAVE
from models.message import MessageQueue, java_string_hash, retry_topic
from models.protocol import (
    PULL_NOT_FOUND,
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    SUCCESS,
    NotifyConsumerIdsChanged,
    TopicRouteData,
    UnregisterClient,
)
from models.pull_sys_flag import SUBSCRIPTION_NOT_EXIST, new_pull_message_without_subscription
from models.records import CONSUMER_OFFSET_MOVED, CONSUMER_PULL_FAILED, CONSUMER_QUEUE_DROPPED, CONSUMER_SHUTDOWN
from models.version import V4, V5, VERSIONS
from sim.env import Clock, ms
from sim.node import CONNECT_FAILED, Node

MIB = 1024 * 1024


class PushConsumer:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_flow_limits", "_on_pull_bound", "_pull_batch_size", "_pull_interval_us", "_routes_pending",
                 "_slave_reads", "broadcasting", "cfg", "client", "client_id", "clock", "consume", "cov",
                 "consume_timestamp_us", "group", "node", "offset_store", "process_queues", "pull_api",
                 "rebalancer", "subscribe_info", "subscriptions", "tag_codes", "v4", "batch_failure")

    consume_service_class = ConsumeService  # ConsumeMessageConcurrentlyService; orderly: its subclass
    process_queue_class = ProcessQueue

    def __init__(self, env: Any, name: str, zone: str, group: str, topic: str, tags: list[str] | None,
                 cfg: PushConsumerConfig, namesrvs: list[str], consume_time: Any,
                 failure_probability: float, zones: dict[str, str] | None = None, *,
                 client_version: str = V5, batch_failure: str = "reconsume_later") -> None:
        if client_version not in VERSIONS:
            raise ValueError(f"client_version must be one of {VERSIONS}, not {client_version!r}")
        self.v4 = client_version == V4  # 4.9.8 client (the scenario's `client_version` / `version`)
        node = Node(env, name, zone)
        self.node: Node = node
        self.clock: Clock = env.clock
        self.cov: list[int] = env.coverage  # rare-state counts (models/coverage_points.py)
        # bound once: reading a method off `self` makes a new bound-method object each time
        self._on_pull_bound = self._on_pull
        # <clientIP>@<instanceName>; sorted as a string, like the real one
        self.client_id = build_mq_client_id(name, cfg.client_ip, cfg.instance_name)
        self.group = group
        self.cfg = cfg
        # the settings each pull reads, as plain attributes (a pydantic model's attribute read goes
        # through its __getattr__ hook: a few times slower, and the pull loop runs once per message)
        self._pull_batch_size = cfg.pull_batch_size
        self._pull_interval_us = ms(cfg.pull_interval_ms)
        self._flow_limits = (cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue_mib,
                             cfg.consume_concurrently_max_span)
        self.client: MQClientInstance = MQClientInstance(
            node, namesrvs, cfg.poll_name_server_interval_ms, cfg.heartbeat_broker_interval_ms,
            cfg.mq_client_api_timeout_ms,
            heartbeat_channel_listener_enabled(cfg.enable_heartbeat_channel_event_listener, client_version),
            self.client_id)
        self.broadcasting = cfg.message_model is MessageModel.BROADCASTING
        self.subscriptions: dict[str, frozenset | None] = {topic: frozenset(tags) if tags else None}
        if not self.broadcasting:
            self.subscriptions[retry_topic(group)] = None
        # SubscriptionData.codeSet: what the broker filters by
        self.tag_codes = {t: None if tags is None else frozenset(java_string_hash(tag) for tag in sorted(tags))
                          for t, tags in self.subscriptions.items()}
        self.subscribe_info: dict[str, list[MessageQueue]] = {}  # topicSubscribeInfoTable
        self._routes_pending = 0
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.offset_store: OffsetStore = OffsetStore(node, group, self.broadcasting)
        self.batch_failure = batch_failure  # the listener's answer to a failure in a batch (consume_batch.py)
        service = self.consume_service_class
        if service is ConsumeService and cfg.consume_message_batch_max_size > 1:
            service = BatchConsumeService
        self.consume = service(self, consume_time, failure_probability)
        # zones: node name → zone, for MACHINE_ROOM_NEARBY by ZONE
        self.rebalancer = Rebalancer(self, allocate_strategy(cfg, topic, zones or {}))
        if self.v4:  # 4.9.8 RebalancePushImpl.dispatchPullRequest: executePullRequestImmediately
            self.rebalancer.new_pull_delay_us = V4_NEW_PULL_REQUEST_DELAY_US
        self.pull_api = PullAPIWrapper(self.broker_addr_table)
        self.consume_timestamp_us = ms(cfg.consume_timestamp_ms) if cfg.consume_timestamp_ms is not None else \
            max(0, env._now - CONSUME_TIMESTAMP_BEFORE_START_US)
        self._slave_reads = False  # a route lists a slave: pulls choose their node (pull_api.py)
        ClientResetOffset(self)
        self.client.register_consumer(group, self, cfg.persist_consumer_offset_interval_ms)
        node.handle(NotifyConsumerIdsChanged, lambda src, rid, req: self.rebalancer.wakeup())
        node.on_crash(self._lose_heap)
        node.on_start(self._start)

    def _lose_heap(self) -> None:
        self.process_queues.clear()
        self.subscribe_info.clear()
        self._slave_reads = False

    def _start(self) -> None:
        """start(): fetch every subscription's route (each answer or failure counts), then
        heartbeat to every broker and rebalance at once, as the Java start() does after its
        synchronous route updates (a topic without a route yet, like a new %RETRY% topic, does
        not hold the heartbeat back). 5.x: with no broker address known yet (no route found), the
        heartbeat returns false and start() wakes nobody up: the first round waits for a
        broker's notification after the scheduled heartbeat, or the 20 s timer. 4.9.8 calls
        rebalanceImmediately() whatever the heartbeat returned."""
        self._routes_pending = len(self.subscriptions)
        self.node.stopped = False
        self.rebalancer.start()
        for topic in self.subscriptions:
            self.client.fetch_route(topic, self._route_fetched)

    # --- routes (through the client instance) --------------------------------------------------
    def _route_fetched(self, _known: bool) -> None:
        self._routes_pending -= 1
        if self._routes_pending == 0:
            self.client.send_heartbeat_to_all_broker_with_lock(self.rebalancer.wakeup, always=self.v4)

    def update_topic_subscribe_info(self, topic: str, route: TopicRouteData) -> None:
        """MQConsumerInner.updateTopicSubscribeInfo: only for subscribed topics. The client
        instance has already installed the route's addresses: when any group lists a slave,
        pulls choose their node (pull_api.py)."""
        self._slave_reads = any(bid != 0 for addrs in self.client.broker_addr_table.values() for bid in addrs)
        if topic in self.subscriptions:
            self.subscribe_info[topic] = topic_route_data_to_subscribe_info(route)

    def subscribe_topic_needs_update(self, topic: str) -> bool:
        return topic in self.subscriptions and topic not in self.subscribe_info

    def broker_addr(self, broker_name: str) -> str | None:
        """findBrokerAddressInSubscribe: the master if present, else any address of the group."""
        return self.client.subscribe_addr.get(broker_name)

    def broker_addr_table(self, broker_name: str) -> dict[int, str]:
        """brokerAddrTable[brokerName]: broker id → address (the client instance's table)."""
        return dict(sorted(self.client.broker_addr_table.get(broker_name, {}).items()))

    def persist_consumer_offset(self) -> None:
        """MQConsumerInner.persistConsumerOffset (the client instance's scheduled task)."""
        self.offset_store.persist_all(self.process_queues, self.broker_addr)

    # --- shutdown (DefaultMQPushConsumerImpl.shutdown) ----------------------------------------------
    def shutdown(self) -> None:
        """Graceful shutdown, 5.3.3 order: the consume pool stops (awaiting running calls up to
        awaitTerminationMillisWhenShutdown, then interrupting them), persistConsumerOffset,
        UNREGISTER_CLIENT to every broker (the broker notifies the group at once), then the
        process queues are dropped and the process exits (it is not restarted at the end of the
        fault phase). Simplified: the unregister requests go out in parallel, not one by one."""
        if not self.node.up or self.consume.stopping is not None:
            return
        self.consume.shutdown(ms(self.cfg.await_termination_millis_when_shutdown), self._persist_and_unregister)

    def _persist_and_unregister(self) -> None:
        self.offset_store.persist_all(self.process_queues, self.broker_addr)
        addrs = self.client.all_broker_addrs()
        if self.broadcasting or not addrs:  # (broadcasting unregisters too; nobody rebalances on it)
            self._exit()
            return
        pending = [len(addrs)]

        def answered(_response: Any) -> None:
            pending[0] -= 1
            if pending[0] == 0:
                self._exit()

        for addr in addrs:
            self.node.rpc(addr, UnregisterClient(self.client_id, consumer_group=self.group), ms(self.cfg.mq_client_api_timeout_ms),
                          answered)

    def _exit(self) -> None:
        """rebalanceImpl.destroy, then the JVM exits."""
        for pq in self.process_queues.values():
            pq.dropped = True
        self.node.trace(CONSUMER_SHUTDOWN, self.group, len(self.process_queues))
        self.node.stopped = True  # the end-of-faults heal does not relaunch a stopped process
        self.node.crash()

    # --- queues ---------------------------------------------------------------------------------
    def drop_queue(self, mq: MessageQueue, pq: ProcessQueue, reason: str = "rebalance") -> bool:
        """removeUnnecessaryMessageQueue (concurrent): persist, forget the offset, drop; removed
        (True) at once."""
        self.node.trace(CONSUMER_QUEUE_DROPPED, self.group, mq.topic, mq.broker_name, mq.queue_id, reason)
        pq.dropped = True
        self.offset_store.persist(mq, self.broker_addr)
        self.offset_store.remove(mq)
        self.process_queues.pop(mq, None)
        return True

    # --- PullMessageService ---------------------------------------------------------------------
    def pull_later(self, mq: MessageQueue, pq: ProcessQueue, delay_us: int) -> None:
        self.node.call_later(delay_us, self.pull, mq, pq)

    @cython.ccall
    @cython.locals(pq=ProcessQueue)
    def pull(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """DefaultMQPushConsumerImpl.pullMessage for one PullRequest."""
        if pq.dropped:
            return None
        pq.last_pull_us = self.clock.now_us
        cached = pq.msgs
        if len(cached) > 1 and self._flow_controlled(pq):
            self.cov[COV_PULL_FLOW_CONTROLLED] += 1
            return self.pull_later(mq, pq, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL_US)
        # once: a NamedTuple field read costs ~200 instructions (3.11); as a tuple, unpacked in C
        topic, broker_name, queue_id = cython.cast(tuple, mq) if cython.compiled else mq
        addr = self.client.subscribe_addr.get(broker_name)
        if addr is None:
            return self._pull_failed(mq, pq, "no_broker_address")
        commit = self.offset_store.offsets.get(mq, -1) if not self.broadcasting else -1
        if self._slave_reads:
            target = self.pull_api.target(mq)
            if target is None:
                return self._pull_failed(mq, pq, "no_broker_address")
            addr, slave = target
            if slave:
                self.cov[COV_PULL_FROM_SLAVE] += 1
                commit = -1  # PullSysFlag.clearCommitOffsetFlag
        # no FLAG_SUBSCRIPTION (postSubscriptionWhenPull false): the broker must know the group (pull_sys_flag.py)
        request = new_pull_message_without_subscription((
            self.group, topic, queue_id, pq.next_offset, self._pull_batch_size, commit if commit > 0 else -1,
            BROKER_SUSPEND_MAX_TIME_US, self.tag_codes.get(topic)))
        self.node.rpc(addr, request, CONSUMER_TIMEOUT_WHEN_SUSPEND_US, self._on_pull_bound, mq, pq)
        return None

    @cython.ccall
    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        """The count, size (MiB) and span thresholds (pullThresholdForQueue, pullThresholdSizeForQueue,
        consumeConcurrentlyMaxSpan)."""
        max_count, max_mib, max_span = self._flow_limits
        return len(pq.msgs) > max_count or pq.msg_size_bytes // MIB > max_mib or pq.max_span() > max_span

    def _pull_failed(self, mq: MessageQueue, pq: ProcessQueue, reason: str) -> None:
        self.node.trace(CONSUMER_PULL_FAILED, self.group, mq.broker_name, mq.queue_id, reason)
        self.pull_later(mq, pq, ms(self.cfg.pull_time_delay_mills_when_exception))

    @cython.locals(pq=ProcessQueue)
    def _on_pull(self, mq: MessageQueue, pq: ProcessQueue, response: Any) -> None:
        if pq.dropped:
            return None
        if response is None or response is CONNECT_FAILED:
            return self._pull_failed(mq, pq, "timeout" if response is None else "connect_failed")
        # unpacked once: a NamedTuple field read costs ~200 instructions (3.11), and this runs per pull
        code, next_begin_offset, _min, _max, response_msgs, suggest_which_broker_id = (
            cython.cast(tuple, response) if cython.compiled else response)
        if self._slave_reads and code in (SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED):
            self.pull_api.update(mq, suggest_which_broker_id)
        if code == SUCCESS:
            pq.next_offset = next_begin_offset
            # unpacked in C when compiled (see Broker.process_send)
            topic, _broker_name, _queue_id = cython.cast(tuple, mq) if cython.compiled else mq
            tags = self.subscriptions.get(topic)
            msgs = response_msgs if tags is None else [m for m in response_msgs if m.tags in tags]
            if msgs:
                pq.put(msgs)
                self.consume.submit(pq, mq, msgs)
        elif code in (PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY):
            pq.next_offset = next_begin_offset
            self.correct_tags_offset(mq, pq)
        elif code == PULL_OFFSET_MOVED:
            self.cov[COV_OFFSET_ILLEGAL_CORRECTED] += 1
            return self._offset_illegal(mq, pq, next_begin_offset)
        elif code == SUBSCRIPTION_NOT_EXIST:  # the broker does not know the group (yet): MQBrokerException
            return self._pull_failed(mq, pq, "subscription_not_exist")
        else:
            return self._pull_failed(mq, pq, f"code_{code}")
        if self._pull_interval_us:
            return self.pull_later(mq, pq, self._pull_interval_us)
        return self.pull(mq, pq)

    def _offset_illegal_later(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """4.9.8's task 10 s after an OFFSET_ILLEGAL: updateOffset, persist, removeProcessQueue."""
        self.offset_store.update(mq, next_offset, increase_only=False)
        self.offset_store.persist(mq, self.broker_addr)
        if self.process_queues.get(mq) is pq:  # removeProcessQueue → removeUnnecessaryMessageQueue
            self.process_queues.pop(mq, None)
            self.offset_store.remove(mq)

    def correct_tags_offset(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """correctTagsOffset: with nothing cached, the committed offset follows the pull."""
        if not pq.msgs:
            self.offset_store.update(mq, pq.next_offset, increase_only=True)

    def _offset_illegal(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """5.2.0+: update-and-freeze the offset, persist it, drop the queue, rebalance now. 4.9.8:
        drop the queue, and only 10 s later update the offset, persist it and remove the queue
        (executeTaskLater); no rebalance: the next round (up to 20 s on) takes the queue up again."""
        self.node.trace(CONSUMER_OFFSET_MOVED, self.group, mq.broker_name, mq.queue_id, pq.next_offset,
                        next_offset)
        self.node.trace(CONSUMER_QUEUE_DROPPED, self.group, mq.topic, mq.broker_name, mq.queue_id, "offset_moved")
        pq.dropped = True
        if self.v4:
            self.node.call_later(OFFSET_ILLEGAL_LATER_US_4X, self._offset_illegal_later, mq, pq, next_offset)
            return
        self.offset_store.update(mq, next_offset, increase_only=False)
        self.offset_store.persist(mq, self.broker_addr)
        self.offset_store.remove(mq)
        self.process_queues.pop(mq, None)
        self.rebalancer.wakeup()
