"""broker.BrokerController with its request processors (Send, Pull, ConsumerManage, ClientManage).

One Broker is one broker JVM on its own node: a master (brokerId 0, ASYNC_MASTER or
SYNC_MASTER) or a slave (brokerId ≥ 1, SLAVE) of a broker group named `broker_name`; the node
name is its address. Start-up = store recovery, loading `consumerOffset.json`, then
`registerBrokerAll` to every NameServer at once and every `registerNameServerPeriod` (first
after 10 s). In the classic deployment a group without its master serves reads from its slaves
only as `version` allows (slave_read.py) and takes no sends. With `enableControllerMode` the
broker is built able to be either and the controller decides (replicas_manager.py: fenced at
start, then master or slave, switched at elections; auto_switch_ha.py for the replication).
DLedger mode is out of scope.

Send path (SendMessageProcessor): checks (topic, queue id, size) → CommitLog append (a delay
level > 0 parks the message in SCHEDULE_TOPIC_XXXX) → `broker.stored` → the answer, at once, or
once the flush (SYNC_FLUSH: GroupCommitService) and the replicas (SYNC_MASTER: HAService) are
done: PUT_OK, else FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (the message
is stored either way; the replica status wins). With a put time (`send_put_time_ms`) requests
go through the send thread pool and BrokerFastFailure first (fast_failure.py).

Pull path (PullMessageProcessor): a push consumer's pull (no FLAG_SUBSCRIPTION) of a group the
broker does not know (no member's heartbeat since its start) → SUBSCRIPTION_NOT_EXIST; then apply
the piggy-backed commit offset (first processing only),
a pending 5.x server-side reset (→ PULL_OFFSET_MOVED), getMessage, map GetMessageStatus to a
response code, and park "not found" pulls in long polling. `suggestWhichBrokerId` is the master
unless `slaveReadEnable` and the consumer lags by more than `accessMessageInMemoryMaxRatio` of
RAM (then slave 1).

`version` ("5.x" = 5.3.3, "4.x" = 4.9.8) selects: dispatch under SYNC_FLUSH (5.x after the fsync,
4.x at once), the flush thread woken by puts (flush_service.py), SYNC_MASTER semantics
(ha_service.py), slave reads (slave_read.py), the offset files' write (config_file.py),
getOffsetInQueueByTime (nearest vs LOWER) and the reset by time (reset_offset.py).

Simplified: pull and admin requests cost no broker time; sends cost `send_put_time_ms` (0 by
default).
"""

# compiled with Cython: the C declarations of this module's classes are in broker.pxd beside it

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import cython

from models.broker.auto_switch_ha import AutoSwitchHAClient, AutoSwitchHAService, EpochFile
from models.broker.clean_service import CleanService
from models.broker.commit_log import PUT_OK, QUEUE_ID_BITS, CommitLog
from models.broker.config import (
    MASTER_ID,
    REGISTER_INITIAL_DELAY_US,
    WHICH_BROKER_WHEN_CONSUME_SLOWLY,
    BrokerConfig,
    BrokerRole,
    FlushDiskType,
    MessageStoreConfig,
)
from models.broker.consume_queue import ConsumeQueue, ReputMessageService
from models.broker.consumer_manager import ConsumerManager
from models.broker.end_transaction import BrokerTransaction
from models.broker.fast_failure import SendMessageExecutor
from models.broker.flush_service import WakeableFlushService, make_flush_service
from models.broker.ha_client import HAClient, SlaveSynchronize
from models.broker.ha_service import HAService
from models.broker.long_polling import PullRequestHoldService
from models.broker.message_store import (
    FOUND,
    NO_MATCHED_LOGIC_QUEUE,
    NO_MATCHED_MESSAGE,
    NO_MESSAGE_IN_QUEUE,
    OFFSET_OVERFLOW_ONE,
    MessageStore,
)
from models.broker.offsets import ConsumerOffsetManager
from models.broker.pop_message_processor import PopMessageProcessor
from models.broker.producer_manager import ProducerManager
from models.broker.rebalance_lock_manager import RebalanceLockManager
from models.broker.replicas_manager import ReplicasManager
from models.broker.reset_offset import ResetOffsetService
from models.broker.schedule import ScheduleMessageService
from models.broker.slave_read import SlaveProcessors
from models.broker.timer_store import TimerMessageStore
from models.broker.transient_store_pool import CommitRealTimeService
from models.coverage_points import (
    COV_DISK_FULL_SEND_REFUSED,
    COV_DLQ_BY_RETRY_SEND,
    COV_DLQ_BY_SEND_BACK,
    COV_SERVER_SIDE_RESET_TAKEN,
)
from models.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    dlq_topic,
    record_bytes,
    retry_topic,
)
from models.protocol import FLUSH_DISK_TIMEOUT as CODE_FLUSH_DISK_TIMEOUT
from models.protocol import FLUSH_SLAVE_TIMEOUT as CODE_FLUSH_SLAVE_TIMEOUT
from models.protocol import (
    INVALID_PARAMETER,
    MESSAGE_ILLEGAL,
    PULL_NOT_FOUND,
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    QUERY_NOT_FOUND,
    SERVICE_NOT_AVAILABLE,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    AllConsumerOffsets,
    AllDelayOffsets,
    CodeResponse,
    ConsumerList,
    ConsumerSendMsgBack,
    GetAllConsumerOffset,
    GetAllDelayOffset,
    GetConsumerList,
    GetMaxOffset,
    Heartbeat,
    OffsetResponse,
    PullMessage,
    QueryConsumerOffset,
    RegisterBroker,
    SearchOffset,
    SendBatchMessage,
    SendMessage,
    SendResponse,
    UnregisterClient,
    UpdateConsumerOffset,
    new_pull_response,
    new_send_response,
)
from models.protocol import SLAVE_NOT_AVAILABLE as CODE_SLAVE_NOT_AVAILABLE
from models.pull_sys_flag import SUBSCRIPTION_NOT_EXIST, PullMessageWithoutSubscription
from models.records import BROKER_REGISTERED, BROKER_SEND_REJECTED, BROKER_STORED
from models.version import Version
from sim.disk import Disk, DiskConfig
from sim.dist import Constant
from sim.env import Clock, ms
from sim.node import Node
from sim.trace import DIGEST_CHUNK

RETRY_QUEUE_NUMS = 1  # SubscriptionGroupConfig.retryQueueNums
DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
NAMESRV_RPC_TIMEOUT_US = 24_000_000  # registerBrokerTimeoutMills (5.x)
STORE_CODES = {PUT_OK: SUCCESS, "FLUSH_DISK_TIMEOUT": CODE_FLUSH_DISK_TIMEOUT,
               "FLUSH_SLAVE_TIMEOUT": CODE_FLUSH_SLAVE_TIMEOUT, "SLAVE_NOT_AVAILABLE": CODE_SLAVE_NOT_AVAILABLE}


class Broker:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_chunk", "_compose", "broker_id", "broker_name", "cfg", "clean", "clock", "commit_log",
                 "commit_service", "consumers", "cov", "disk_full", "flush_service", "group_commit", "ha", "ha_client", "hold", "locks",
                 "long_polling_enable", "max_message_size_bytes", "name", "namesrvs", "node", "offsets", "pop",
                 "producers", "reput", "reset_offset", "role", "schedule", "send_executor", "short_polling_us",
                 "slave", "slave_processors", "store", "store_cfg", "timer", "topics", "transaction", "version",
                 "waits", "replicas", "isolated", "replica_waits", "slave_sync")

    def __init__(self, env: Any, name: str, zone: str, store_cfg: MessageStoreConfig,
                 broker_cfg: BrokerConfig, disk_cfg: DiskConfig, topics: dict[str, int],
                 namesrvs: list[str], broker_name: str | None = None, broker_id: int = MASTER_ID,
                 version: str = Version.V5, master: str | None = None, controllers: list[str] | None = None,
                 peers: dict[str, int] | None = None, pop: bool = False) -> None:
        """`controllers` and `peers` (the group's node name → controller id): controller mode
        (replicas_manager.py): the broker is built able to be either, and starts fenced. `pop`: a
        consumer group of the scenario pops (5.x): the broker gets the POP processors and their
        services (pop_message_processor.py), else none (a push-only run is built without them)."""
        self.name = name  # the node name, its address
        self.broker_name = broker_name or name  # brokerName: the broker group
        self.broker_id = broker_id
        self.version = Version(version)
        controller = bool(controllers) and broker_cfg.enable_controller_mode
        self.role = BrokerRole.SYNC_MASTER if controller else store_cfg.broker_role
        self.slave = self.role is BrokerRole.SLAVE
        self.isolated = False  # controller mode: fenced, not registered with the NameServers
        self.replicas = None
        node = Node(env, name, zone)
        self.node: Node = node
        self.clock: Clock = env.clock
        self.cov: list[int] = env.coverage  # rare-state counts (models/coverage_points.py)
        node.startup_us = ms(broker_cfg.startup_ms)
        node.disk = Disk(env, disk_cfg, env.rng.stream(f"{name}.disk"))
        node.on_power_loss(lambda: node.disk.files.power_loss(env._now))
        self.cfg, self.store_cfg = broker_cfg, store_cfg
        self.long_polling_enable = broker_cfg.long_polling_enable  # read per pull: a plain attribute
        self.short_polling_us = ms(broker_cfg.short_polling_time_mills)
        self.topics = dict(topics)  # TopicConfigManager: topic -> queue count (read = write)
        self.namesrvs = namesrvs
        self.max_message_size_bytes = store_cfg.max_message_size_bytes
        self._chunk = node._chunk
        self._build_store()
        self.hold: PullRequestHoldService = PullRequestHoldService(node, self.store.reput.queue, self.execute_pull,
                                                                   **self._hold_interval())
        if not (self.slave and self.version is Version.V4):  # 4.x notifies held pulls on masters only
            self.store.reput.listeners.append(self.hold.notify_message_arriving)
        self.offsets: ConsumerOffsetManager = ConsumerOffsetManager(node, broker_cfg, self.version, slave=self.slave)
        self.consumers = ConsumerManager(node, broker_cfg)
        self.producers = ProducerManager(node)
        self.schedule = ScheduleMessageService(node, store_cfg.message_delay_level, self.store,
                                               self.put_no_wait, store_cfg.flush_delay_offset_interval_ms,
                                               self.version, active=not self.slave)
        self.disk_full = False  # RunningFlags' DISK_FULL_BIT, set by the clean service
        self.clean = CleanService(self, store_cfg, disk_cfg, not self.slave, self._set_disk_full)
        # 5.x timer messages, on masters (timer_store.py)
        self.timer = TimerMessageStore(self, store_cfg) if (
            not self.slave and self.version is Version.V5 and store_cfg.timer_wheel_enable) else None
        self.store.reput.schedule_listener = self.schedule.on_dispatched
        self.store.reput.delivery_us = self.schedule.delivery_us
        self.reset_offset = ResetOffsetService(self)
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None
        self.slave_processors: SlaveProcessors | None = None
        self.slave_sync: SlaveSynchronize | None = None
        self.locks: RebalanceLockManager | None = None  # masters: set with the handlers
        if controller:
            self._build_auto_switch()
        elif self.slave:
            self._build_slave(master)
        else:
            self.ha = HAService(node, self.commit_log, store_cfg, self.version)
        self.replica_waits = self._waits_for_replicas()
        self.waits = self._waits_for_store()
        # how a pull answer is composed beyond the status: None on a master without slave reads (a slave
        # has its processors: _build_slave)
        self._compose = (self.slave_processors.compose if self.slave  # type: ignore[attr-defined]
                         else self._suggest_compose if broker_cfg.slave_read_enable else None)
        self.send_executor = None if self._put_time_is_zero() else \
            SendMessageExecutor(node, broker_cfg, store_cfg, self._process_send_request)
        self._register_handlers()
        node.add_service(self.register_loop)
        # transactional messages on a master: half/op topics, end processor, check-back (end_transaction.py)
        self.transaction = None if self.slave else BrokerTransaction(self, batched_ops=self.version is Version.V5)
        if controller:  # last but POP: its start hook runs after every other one but POP's (it fences the broker)
            self.replicas = ReplicasManager(self, controllers, peers)  # type: ignore[arg-type]  # given with controllers
        # POP_MESSAGE, ACK_MESSAGE, CHANGE_INVISIBLE_TIME and the revive service; built last, so that
        # its hooks and services run after the broker's own
        self.pop: PopMessageProcessor | None = PopMessageProcessor(self) if pop else None

    # --- construction ------------------------------------------------------------------------
    def _build_store(self) -> None:
        cfg, node, v5 = self.store_cfg, self.node, self.version is Version.V5
        sync_flush = cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        pool = cfg.transient_store_pool_enable and not sync_flush and not self.slave
        self.store: MessageStore = MessageStore(node, cfg, pool, master=not self.slave, confirm_flushed=v5,
                                                correct_offsets=not self.slave or cfg.offset_check_in_slave)
        self.commit_log: CommitLog = self.store.commit_log
        self.reput: ReputMessageService = self.store.reput
        self.flush_service = make_flush_service(self.commit_log, sync_flush, cfg.flush_commit_log_timed)
        self.group_commit = self.commit_log.group_commit
        if sync_flush and v5:
            # a Python bound method (getattr): compiled, reading a cpdef method off a typed field as a
            # value converts its C function with the wrong signature (Cython 3.1)
            self.commit_log.on_flushed = getattr(self.reput, "wake")  # noqa: B009 (above)
        wakeable = self.flush_service if isinstance(self.flush_service, WakeableFlushService) else None
        if pool:
            def committed() -> None:
                if wakeable is not None:
                    wakeable.wakeup()
                self.reput.wake()

            self.commit_service = CommitRealTimeService(self.commit_log, not v5 or cfg.wake_commit_when_put_message,
                                                        committed)
        elif wakeable is not None and (not v5 or cfg.wake_flush_when_put_message):
            self.commit_log.set_put_hook(wakeable.wakeup)

    def _build_slave(self, master: str | None) -> None:
        if master is None:
            raise ValueError(f"slave {self.name} needs its master's node name")

        def appended() -> None:
            self.reput.wake()
            if self.group_commit is not None:
                self.group_commit.wakeup()

        self.reput.replica = True
        self.ha_client = HAClient(self.node, self.commit_log, self.reput, self.store_cfg, master, appended)
        self.slave_sync = SlaveSynchronize(self.node, self.offsets, master, self.version)
        self.slave_processors = SlaveProcessors(self)

    def _build_auto_switch(self) -> None:
        """Controller mode: both sides of replication (auto_switch_ha.py), the slave's sync and
        processors; ReplicasManager switches between them."""
        epochs = EpochFile()

        def appended() -> None:
            self.reput.wake()
            if self.group_commit is not None:
                self.group_commit.wakeup()

        self.ha = AutoSwitchHAService(self.node, self.commit_log, self.store_cfg, self.version, epochs, self.reput,
                                      lambda members: self.replicas.alter_sync_state_set(members))  # type: ignore[union-attr]  # built next
        self.ha_client = AutoSwitchHAClient(self.node, self.commit_log, self.reput, self.store_cfg, appended, epochs)
        self.slave_sync = SlaveSynchronize(self.node, self.offsets, "", self.version, controller=True)
        self.slave_sync.schedule = self.schedule
        self.node.handle(GetAllDelayOffset, self.on_get_all_delay_offsets)
        self.slave_processors = SlaveProcessors(self)

    def _hold_interval(self) -> dict[str, int]:
        if self.cfg.long_polling_enable:
            return {}
        return {"scan_interval_us": self.short_polling_us}

    def _waits_for_store(self) -> bool:
        """Whether a send's answer waits for the flush or the replicas (else it is immediate)."""
        if self.slave:
            return False
        if self.group_commit is not None:
            return True
        return self.replica_waits

    def _waits_for_replicas(self) -> bool:
        """Whether a send waits for the replicas (CommitLog.handleHA): a SYNC_MASTER's (4.x; 5.x with
        inSyncReplicas > 1; controller mode also with allAckInSyncStateSet)."""
        if self.slave or self.role is not BrokerRole.SYNC_MASTER:
            return False
        if isinstance(self.ha, AutoSwitchHAService):  # controller mode
            return self.store_cfg.all_ack_in_sync_state_set or self.store_cfg.in_sync_replicas > 1
        return self.version is Version.V4 or self.store_cfg.in_sync_replicas > 1

    def _put_time_is_zero(self) -> bool:
        put = self.cfg.send_put_time_ms
        return isinstance(put, Constant) and put.value == 0

    def _register_handlers(self) -> None:
        node = self.node
        if self.slave:
            self.slave_processors.register()  # type: ignore[union-attr]  # a slave has them
        else:
            self.register_master_handlers()
            self.locks = RebalanceLockManager(node)  # LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: masters only
        # a push consumer's pull: checked against the consumer table, then the role's PULL_MESSAGE
        # processor (registered once: it reads the current one at each pull, across role changes)
        node.handle(PullMessageWithoutSubscription, self.on_pull_without_subscription)
        node.handle(QueryConsumerOffset, self.on_query_offset)
        node.handle(GetMaxOffset, self.on_get_max_offset)
        node.handle(SearchOffset, self.reset_offset.on_search_offset)
        node.handle(UpdateConsumerOffset, self.on_update_offset)
        node.handle(Heartbeat, self.on_heartbeat)
        node.handle(GetConsumerList, self.on_get_consumer_list)
        node.handle(UnregisterClient, self.on_unregister_client)

    def register_master_handlers(self) -> None:
        """The master's processors (also at a controller-mode promotion, replicas_manager.py)."""
        node = self.node
        submit = self.send_executor.submit if self.send_executor else None
        send: Callable[[str, int, Any], None]
        batch: Callable[[str, int, Any], None]
        send, batch = submit or self.process_send, submit or self.on_send_batch
        if self.replicas is not None:  # controller mode: the in-sync replicas check comes first
            send, batch = self.replicas.gate(send), self.replicas.gate(batch)
        node.handle(SendMessage, send)
        node.handle(SendBatchMessage, batch)
        node.handle(PullMessage, self.on_pull)
        node.handle(ConsumerSendMsgBack, self.on_send_back)
        node.handle(GetAllConsumerOffset, self.on_get_all_offsets)

    # --- NameServer registration --------------------------------------------------------------
    def registration(self) -> RegisterBroker:
        topics = tuple((t, n, n) for t, n in self.topics.items())
        epoch = 0 if self.replicas is None else self.replicas.master_epoch  # DataVersion.stateVersion
        return RegisterBroker(self.broker_name, self.broker_id, self.node.name, topics, epoch)

    def register_all(self) -> None:
        if self.isolated:  # controller mode, before the controller named the role: "Skip register"
            return
        for namesrv in self.namesrvs:
            self.node.rpc(namesrv, self.registration(), NAMESRV_RPC_TIMEOUT_US, lambda _r: None)
            self.node.trace(BROKER_REGISTERED, namesrv)

    def register_loop(self) -> Generator:
        self.register_all()
        yield self.node.sleep_us(REGISTER_INITIAL_DELAY_US)
        while True:
            self.register_all()
            yield self.node.sleep_us(ms(self.cfg.register_name_server_period_ms))

    # --- SendMessageProcessor -----------------------------------------------------------------
    def _process_send_request(self, src: str, req_id: int, req: Any) -> None:
        """What a send thread runs: SEND_MESSAGE or SEND_BATCH_MESSAGE (one processor, one pool); a
        request queued before a controller-mode demotion meets the slave's refusal."""
        if self.slave:
            msg = req.msg if type(req) is SendMessage else req.msgs[0]
            self.node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, SERVICE_NOT_AVAILABLE)
            self.node.reply(src, req_id, SendResponse(SERVICE_NOT_AVAILABLE))
            return None
        if type(req) is SendBatchMessage:
            return self.on_send_batch(src, req_id, req)
        return self.process_send(src, req_id, req)

    def process_send(self, src: str, req_id: int, req: SendMessage) -> None:
        # unpacked once (a NamedTuple field read costs tens of instructions), cast to tuple when
        # compiled: a NamedTuple is otherwise unpacked through an iterator (an unchecked cast:
        # handlers get their payload type only, sim/network.py); pure, the NamedTuple itself
        msg, queue_id = cython.cast(tuple, req) if cython.compiled else req
        msg_id, topic, tags, _shard, body_bytes, _born, size, reconsume_times, delay_level, props = (
            cython.cast(tuple, msg) if cython.compiled else msg)
        queue_nums = self.topics.get(topic)
        if queue_nums is None or not 0 <= queue_id < queue_nums or size > self.max_message_size_bytes:
            return self._reject(src, req_id, msg, queue_nums)
        if self.disk_full:
            return self._refuse_disk_full(src, req_id, msg)
        if reconsume_times:  # only retry messages re-sent by a client carry RECONSUME_TIME
            msg, req = self._retry_or_dlq(msg, req)
            queue_id, topic, size, delay_level, props = req.queue_id, msg.topic, msg.size_bytes, msg.delay_level, \
                msg.props
        if props is not None and PROPERTY_TRANSACTION_PREPARED in props:
            self.transaction.on_half_send(src, req_id, req)  # type: ignore[union-attr]  # a master's
            return None
        if props is not None and self.timer is not None and self.timer.refused(src, req_id, msg, props, delay_level):
            return None  # HookUtils: a delivery time beyond timerMaxDelaySec (timer_store.py)
        if delay_level > 0:
            props = dict(props or {}, **{PROPERTY_DELAY_TIME_LEVEL: delay_level})
        phys, queue_offset = self.put_message(msg_id, topic, queue_id, size, body_bytes, tags, reconsume_times, props)
        if not self.waits:
            self.node.reply(src, req_id, new_send_response((SUCCESS, queue_offset, phys)))
            return None
        self._wait_store(src, req_id, queue_offset, phys, phys + size)
        return None

    def _retry_or_dlq(self, msg: Any, req: SendMessage) -> tuple[Any, SendMessage]:
        """SendMessageProcessor.handleRetryAndDLQ: a `%RETRY%` send whose RECONSUME_TIME exceeds
        MAX_RECONSUME_TIMES (else the group's retryMaxTimes, 16) goes to `%DLQ%<group>` instead,
        with no delay. (Not modelled: the 5.1.x rule sending it to the DLQ while an orderly lock
        of the group is unexpired.)"""
        if not msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return msg, req
        max_times = (msg.props or {}).get("MAX_RECONSUME_TIMES", RETRY_MAX_TIMES)
        if msg.reconsume_times <= max_times:
            return msg, req
        self.cov[COV_DLQ_BY_RETRY_SEND] += 1
        topic = dlq_topic(msg.topic[len(RETRY_GROUP_TOPIC_PREFIX):])
        self.topics.setdefault(topic, DLQ_NUMS_PER_GROUP)
        props = {k: v for k, v in (msg.props or {}).items() if k != PROPERTY_DELAY_TIME_LEVEL}
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, props, msg.reconsume_times)
        msg = msg._replace(topic=topic, delay_level=0, props=props, size_bytes=size)
        return msg, req._replace(msg=msg, queue_id=0)

    def _wait_store(self, src: str, req_id: int, queue_offset: int, phys: int, next_offset: int) -> None:
        """handleDiskFlushAndHA: answer once the flush and the replica waits are both done; a
        replica status other than PUT_OK wins over the flush status."""
        state: list[str | None] = [None, None]  # [flush status, replica status]

        def done(index: int, status: str) -> None:
            state[index] = status
            if state[0] is not None and state[1] is not None:
                final = state[1] if state[1] != PUT_OK else state[0]
                self.node.reply(src, req_id, SendResponse(STORE_CODES[final], queue_offset, phys))

        if self.group_commit is not None:
            self.group_commit.put_request(next_offset, lambda status: done(0, status))
        else:
            state[0] = PUT_OK
        if self.replica_waits:
            self.ha.replicate(next_offset, lambda status: done(1, status))  # type: ignore[union-attr]  # waits: it has one
        else:
            done(1, PUT_OK)


    def on_send_batch(self, src: str, req_id: int, req: SendBatchMessage) -> None:
        """SEND_BATCH_MESSAGE (CommitLog.asyncPutMessages): the checks apply to the whole batch (its
        size is the encoded batch), then every message is appended under one lock, with consecutive
        queue offsets: all or nothing. The answer carries the first queue offset and waits, like a
        single send, for the flush and the replicas of the batch's end."""
        msgs = req.msgs
        first = msgs[0]
        size = sum(m.size_bytes for m in msgs)
        queue_nums = self.topics.get(first.topic)
        if queue_nums is None or not 0 <= req.queue_id < queue_nums or size > self.max_message_size_bytes \
                or any(m.delay_level > 0 or m.topic != first.topic for m in msgs):
            return self._reject(src, req_id, first, queue_nums, size)
        if self.disk_full:
            return self._refuse_disk_full(src, req_id, first)
        phys = end = queue_offset = -1
        for m in msgs:
            p, offset = self.put_message(m.msg_id, m.topic, req.queue_id, m.size_bytes, m.body_bytes, m.tags,
                                         m.reconsume_times, m.props)
            if phys < 0:
                phys, queue_offset = p, offset
            end = p + m.size_bytes
        if not self.waits:
            self.node.reply(src, req_id, new_send_response((SUCCESS, queue_offset, phys)))
            return None
        self._wait_store(src, req_id, queue_offset, phys, end)
        return None

    def _set_disk_full(self, full: bool) -> None:
        self.disk_full = full

    def _refuse_disk_full(self, src: str, req_id: int, msg: Any) -> None:
        """checkStoreStatus with the disk full: PutMessageStatus.SERVICE_NOT_AVAILABLE (the producer
        retries it on another broker: a retryResponseCode)."""
        self.cov[COV_DISK_FULL_SEND_REFUSED] += 1
        self.node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, SERVICE_NOT_AVAILABLE)
        self.node.reply(src, req_id, SendResponse(SERVICE_NOT_AVAILABLE))

    def _reject(self, src: str, req_id: int, msg: Any, queue_nums: int | None, size: int | None = None) -> None:
        size = msg.size_bytes if size is None else size
        if queue_nums is None:
            code = TOPIC_NOT_EXIST
        elif size > self.max_message_size_bytes:
            code = MESSAGE_ILLEGAL
        else:
            code = INVALID_PARAMETER
        self.node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, code)
        self.node.reply(src, req_id, SendResponse(code))

    @cython.ccall
    def put_message(self, msg_id: int, topic: str, queue_id: int, size: int, body_bytes: int,
                    tags: str | None, reconsume_times: int, props: dict | None) -> tuple[int, int]:
        """CommitLog.asyncPutMessage: a delay level re-routes the message to SCHEDULE_TOPIC_XXXX
        (queue level−1) with its real topic and queue as properties — not a half message (TRAN_MSG:
        only TRANSACTION_NOT_TYPE and COMMIT puts are re-routed, 4.9.8 CommitLog / 5.3.3
        HookUtils.handleScheduleMessage), whose level its commit carries on. Returns (phys, queue offset)."""
        if props and PROPERTY_TIMER_DELIVER_MS in props and self.timer is not None and \
                PROPERTY_DELAY_TIME_LEVEL not in props:  # HookUtils: a delay level wins over a delivery time
            moved = self.timer.transform(msg_id, topic, queue_id, props)
            if moved is not None:
                topic, queue_id, props = moved
                size = record_bytes(topic, body_bytes, tags, 0, props, reconsume_times)
        if props and PROPERTY_DELAY_TIME_LEVEL in props and PROPERTY_TRANSACTION_PREPARED not in props:
            level = min(props[PROPERTY_DELAY_TIME_LEVEL], self.schedule.max_level())
            props = dict(props, **{PROPERTY_DELAY_TIME_LEVEL: level, PROPERTY_REAL_TOPIC: topic,
                                   PROPERTY_REAL_QUEUE_ID: queue_id})
            topic, queue_id = SCHEDULE_TOPIC, level - 1
            size = record_bytes(topic, body_bytes, tags, 0, props, reconsume_times)
        phys, queue_offset = self.commit_log.append(msg_id, topic, queue_id, size, tags, reconsume_times, 0, props)
        chunk = self._chunk
        chunk.append((self.clock.now_us, self.name, BROKER_STORED, msg_id, topic, queue_id, queue_offset, phys,
                      size, reconsume_times))
        if len(chunk) >= DIGEST_CHUNK:
            self.node._flush()
        if not self.reput.pending:
            self.reput.wake()
        return phys, queue_offset

    def put_no_wait(self, *args: Any) -> tuple[int, int]:
        """`put_message` of a put nobody waits for (WAIT=false: schedule deliveries, send-backs,
        transaction put-backs and op messages, timer deliveries): with SYNC_FLUSH the group
        commit's idle round flushes it. On a slave (controller mode: demoted or fenced while a
        background writer still ran) HookUtils.checkBeforePutMessage refuses it: (-1, -1)."""
        if self.slave:
            return -1, -1
        result = self.put_message(*args)
        if self.group_commit is not None:
            self.group_commit.wakeup()
        return result

    # --- PullMessageProcessor -----------------------------------------------------------------
    def on_pull_without_subscription(self, src: str, req_id: int, req: PullMessage) -> None:
        """PullMessageProcessor.processRequest (5.3.3 and 4.9.8) for a pull without FLAG_SUBSCRIPTION
        (a push consumer's: models/pull_sys_flag.py): the subscription is the one the group's
        heartbeats left in the ConsumerManager; a group the broker does not know — never heard of
        since its start, or every member gone — is answered SUBSCRIPTION_NOT_EXIST, before the
        piggy-backed commit offset or a pending reset is applied, and the client retries after
        pullTimeDelayMillsWhenException. So a restarted broker refuses a group's pulls until a
        member's heartbeat reaches it (4.x: the 30 s round; 5.x: at once, models/client_instance.py).
        A 5.x slave without slaveReadEnable rejects the request at the remoting layer first
        (rejectRequest: SYSTEM_BUSY, slave_read.py).

        Simplified: the ConsumerManager keeps members, not subscriptions (consumer_manager.py), so a
        known group is taken to subscribe the topic (Java also answers SUBSCRIPTION_NOT_EXIST for a
        group without a subscription to it), and there is no subVersion (SUBSCRIPTION_NOT_LATEST).
        A pull held by long polling is not checked again when it wakes up (Java's re-run is: only a
        group that lost every member meanwhile would be refused, and the answer would then go to a
        client that is gone or about to rejoin)."""
        handler = self.node.handlers[PullMessage]  # the role's processor: master's on_pull or the slave's
        if self.slave and self.version is Version.V5 and not self.cfg.slave_read_enable:
            handler(src, req_id, req)  # rejectRequest answers before processRequest runs
            return
        if not self.consumers.groups.get(req[0]):  # getConsumerGroupInfo(group) == null
            self.node.reply(src, req_id, new_pull_response((SUBSCRIPTION_NOT_EXIST, req[3], 0, 0, (), MASTER_ID)))
            return
        handler(src, req_id, req)

    @cython.locals(cq=ConsumeQueue)
    def on_pull(self, src: str, req_id: int, req: PullMessage) -> None:
        # unpacked once (a NamedTuple field read costs tens of instructions; this runs per pull)
        group, topic, queue_id, queue_offset, _max_nums, commit_offset, suspend_us, _codes = (
            cython.cast(tuple, req) if cython.compiled else req)
        if commit_offset >= 0:  # applied on the first processing only, held or answered
            self.offsets.table[(group, topic, queue_id)] = commit_offset
            if self.offsets.detail:
                self.offsets.committed(src, group, topic, queue_id, commit_offset, "pull")
        if self.offsets.reset:
            reset = self.offsets.take_reset(group, topic, queue_id)
            if reset >= 0:  # 5.x server-side reset: OFFSET_RESET → PULL_OFFSET_MOVED
                self.cov[COV_SERVER_SIDE_RESET_TAKEN] += 1
                max_offset = self.store.max_offset(topic, queue_id)
                self.node.reply(src, req_id, new_pull_response((PULL_OFFSET_MOVED, reset, 0, max_offset, (),
                                                                MASTER_ID)))
                return None
        topic_index = self.commit_log.topic_index.get(topic)
        cq = None if topic_index is None else self.reput.queues.get(topic_index << QUEUE_ID_BITS | queue_id)
        if cq is not None and queue_offset == cq.max_offset and suspend_us > 0 and self.long_polling_enable:
            # getMessage would answer OFFSET_OVERFLOW_ONE (PULL_NOT_FOUND): hold the request at once
            self.hold.suspend(src, req_id, req, suspend_us, cq)
            return None
        self.execute_pull(src, req_id, req, True, cq)
        return None

    @cython.ccall
    def execute_pull(self, src: str, req_id: int, req: PullMessage, allow_suspend: bool = False,
                     cq: Any = None) -> None:
        """PullMessageProcessor.processRequest; `cq` is the request's ConsumeQueue when the caller
        has it (on_pull, long polling's wake-up), else it is looked up."""
        _group, topic, queue_id, queue_offset, max_msg_nums, _commit, suspend_us, tag_codes = (
            cython.cast(tuple, req) if cython.compiled else req)  # once
        if cq is None:
            cq = self.reput.queue(topic, queue_id)
        status, next_offset, max_offset, msgs = self.store.get_message(cq, queue_offset, max_msg_nums, tag_codes)
        if status is FOUND:
            code = SUCCESS
        elif status is NO_MATCHED_MESSAGE:
            code = PULL_RETRY_IMMEDIATELY
        elif status is OFFSET_OVERFLOW_ONE or (
                status in (NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE) and queue_offset == 0):
            code = PULL_NOT_FOUND
        else:
            code = PULL_OFFSET_MOVED
        if self._compose is None:
            suggest = MASTER_ID
        else:
            code, suggest = self._compose(code, msgs)
        if code == PULL_NOT_FOUND and allow_suspend and suspend_us > 0:
            timeout = suspend_us if self.long_polling_enable else self.short_polling_us
            self.hold.suspend(src, req_id, req, timeout, cq)
            return
        self.node.reply(src, req_id, new_pull_response((code, next_offset, 0, max_offset, msgs, suggest)))

    def suggest_pulling_from_slave(self, msgs: tuple) -> bool:
        """GetMessageResult.suggestPullingFromSlave: the consumer lags by more than the in-memory window."""
        return bool(msgs) and self.commit_log.wrote_position - msgs[-1].phys_offset > self.store.memory_window_bytes

    def _suggest_compose(self, code: int, msgs: tuple) -> tuple[int, int]:
        """A master with slaveReadEnable: suggest slave 1 to a lagging consumer, else the master."""
        return code, WHICH_BROKER_WHEN_CONSUME_SLOWLY if self.suggest_pulling_from_slave(msgs) else MASTER_ID

    # --- ConsumerManageProcessor --------------------------------------------------------------
    def on_query_offset(self, src: str, req_id: int, req: QueryConsumerOffset) -> None:
        offset = self.offsets.query(req.group, req.topic, req.queue_id)
        if offset < 0 and self.store.head_in_memory(req.topic, req.queue_id):
            offset = 0  # 5.1.0+: a hot queue head makes a brand-new group start at 0
        response = OffsetResponse(SUCCESS, offset) if offset >= 0 else OffsetResponse(QUERY_NOT_FOUND)
        if self.offsets.peers:
            self.offsets.behind_replica(src, self.broker_name, (req.group, req.topic, req.queue_id), offset)
        self.node.reply(src, req_id, response)

    def on_get_max_offset(self, src: str, req_id: int, req: GetMaxOffset) -> None:
        self.node.reply(src, req_id, OffsetResponse(SUCCESS, self.store.max_offset(req.topic, req.queue_id)))

    def on_update_offset(self, src: str, req_id: int, req: UpdateConsumerOffset) -> None:
        key = (req.group, req.topic, req.queue_id)
        if not (self.offsets.reset and key in self.offsets.reset):  # 5.x: ignored while a reset is pending
            self.offsets.commit(req.group, req.topic, req.queue_id, req.offset)
            if self.offsets.detail:
                self.offsets.committed(src, req.group, req.topic, req.queue_id, req.offset, "update")
        self.node.reply(src, req_id, CodeResponse(SUCCESS))

    def on_get_all_delay_offsets(self, src: str, req_id: int, req: GetAllDelayOffset) -> None:
        """GET_ALL_DELAY_OFFSET: the schedule service's table (controller mode's slaves copy it)."""
        self.node.reply(src, req_id, AllDelayOffsets(SUCCESS, tuple(sorted(self.schedule.offsets.items()))))

    def on_get_all_offsets(self, src: str, req_id: int, req: GetAllConsumerOffset) -> None:
        entries = tuple((g, t, q, o) for (g, t, q), o in self.offsets.table.items())
        self.node.reply(src, req_id, AllConsumerOffsets(SUCCESS, entries))

    # --- ClientManageProcessor ----------------------------------------------------------------
    def on_heartbeat(self, src: str, req_id: int, req: Heartbeat) -> None:
        created = False
        for group, _topics in req.consumer_groups:
            topic = retry_topic(group)
            if topic not in self.topics:  # createTopicInSendMessageBackMethod on heartbeat
                self.topics[topic] = RETRY_QUEUE_NUMS
                created = True
        if created:
            self.register_all()
        self.consumers.heartbeat(src, req.client_id, req.consumer_groups)
        for group in req.producer_groups:
            self.producers.register_producer(group, req.client_id)
        self.node.reply(src, req_id, CodeResponse(SUCCESS))

    def on_unregister_client(self, src: str, req_id: int, req: UnregisterClient) -> None:
        """ClientManageProcessor.unregisterClient: the producer and/or consumer group named."""
        if req.producer_group is not None:
            self.producers.unregister_producer(req.producer_group, req.client_id)
        if req.consumer_group is not None:
            self.consumers.unregister(src, req.consumer_group)
        if req_id:  # a one-way request has no answer
            self.node.reply(src, req_id, CodeResponse(SUCCESS))

    def on_get_consumer_list(self, src: str, req_id: int, req: GetConsumerList) -> None:
        self.node.reply(src, req_id, ConsumerList(SUCCESS, self.consumers.client_ids(req.group)))

    def on_send_back(self, src: str, req_id: int, req: ConsumerSendMsgBack) -> None:
        """consumerSendMsgBack: look the message up by its CommitLog offset; to %RETRY%group with
        delay level 3 + reconsumeTimes (of the *stored* message), or to the DLQ."""
        stored = self.store.look_message_by_offset(req.phys_offset)
        if stored is None or stored.msg_id != req.msg_id:
            self.node.reply(src, req_id, CodeResponse(SYSTEM_ERROR))
            return
        max_times = req.max_reconsume_times if req.max_reconsume_times >= 0 else RETRY_MAX_TIMES
        reconsume = stored.reconsume_times
        props = {PROPERTY_RETRY_TOPIC: req.origin_topic, PROPERTY_ORIGIN_MESSAGE_ID: req.msg_id}
        if reconsume >= max_times or req.delay_level < 0:
            self.cov[COV_DLQ_BY_SEND_BACK] += 1
            topic = dlq_topic(req.group)
            self.topics.setdefault(topic, DLQ_NUMS_PER_GROUP)
        else:
            topic = retry_topic(req.group)
            self.topics.setdefault(topic, RETRY_QUEUE_NUMS)
            props[PROPERTY_DELAY_TIME_LEVEL] = req.delay_level or 3 + reconsume
        size = record_bytes(topic, stored.body_bytes, stored.tags, 0, props, reconsume + 1)
        self.put_no_wait(req.msg_id, topic, 0, size, stored.body_bytes, stored.tags, reconsume + 1, props)
        self.node.reply(src, req_id, CodeResponse(SUCCESS))
