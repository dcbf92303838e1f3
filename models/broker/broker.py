"""broker.BrokerController with its request processors (Send, Pull, ConsumerManage, ClientManage).

One Broker is one broker JVM (a master, brokerId 0) on its own node. Start-up = store recovery,
loading `consumerOffset.json`, then `registerBrokerAll` to every NameServer at once and every
`registerNameServerPeriod` (first after 10 s).

Send path (SendMessageProcessor): checks (role, topic, queue id, size) → CommitLog append (a
delay level > 0 parks the message in SCHEDULE_TOPIC_XXXX) → `broker.stored` → with SYNC_FLUSH
the answer waits for GroupCommitService (PUT_OK or FLUSH_DISK_TIMEOUT; the message is stored
either way). A 5.x SYNC_MASTER with the default `inSyncReplicas` = 1 answers like an async master.

Pull path (PullMessageProcessor): apply the piggy-backed commit offset (first processing only),
getMessage, map GetMessageStatus to a response code, and park "not found" pulls in long polling.

Simplified: no slaves/HA (SLAVE roles are rejected by validation), no request queues or
BrokerFastFailure, request processing costs no simulated time.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.commit_log import QUEUE_ID_BITS
from models.broker.config import REGISTER_INITIAL_DELAY_US, BrokerConfig, FlushDiskType, MessageStoreConfig
from models.broker.consumer_manager import ConsumerManager
from models.broker.end_transaction import BrokerTransaction
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
from models.broker.producer_manager import ProducerManager
from models.broker.schedule import ScheduleMessageService
from models.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    SCHEDULE_TOPIC,
    dlq_topic,
    record_bytes,
    retry_topic,
)
from models.protocol import FLUSH_DISK_TIMEOUT as CODE_FLUSH_DISK_TIMEOUT
from models.protocol import (
    INVALID_PARAMETER,
    MESSAGE_ILLEGAL,
    PULL_NOT_FOUND,
    PULL_OFFSET_MOVED,
    PULL_RETRY_IMMEDIATELY,
    QUERY_NOT_FOUND,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    CodeResponse,
    ConsumerList,
    ConsumerSendMsgBack,
    GetConsumerList,
    GetMaxOffset,
    Heartbeat,
    OffsetResponse,
    PullMessage,
    QueryConsumerOffset,
    RegisterBroker,
    SendBatchMessage,
    SendMessage,
    SendResponse,
    UpdateConsumerOffset,
    new_pull_response,
    new_send_response,
)
from models.records import BROKER_REGISTERED, BROKER_SEND_REJECTED, BROKER_STORED
from sim.disk import Disk, DiskConfig
from sim.env import ms
from sim.node import Node
from sim.trace import DIGEST_CHUNK

RETRY_QUEUE_NUMS = 1  # SubscriptionGroupConfig.retryQueueNums
DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
RETRY_MAX_TIMES = 16  # SubscriptionGroupConfig.retryMaxTimes
NAMESRV_RPC_TIMEOUT_US = 24_000_000  # registerBrokerTimeoutMills (5.x)


class Broker:
    def __init__(self, env: Any, name: str, zone: str, store_cfg: MessageStoreConfig,
                 broker_cfg: BrokerConfig, disk_cfg: DiskConfig, topics: dict[str, int],
                 namesrvs: list[str], version: str = "5.x") -> None:
        self.name = name  # brokerName; the node name doubles as its address
        self.node = node = Node(env, name, zone)
        node.startup_us = ms(broker_cfg.startup_ms)
        node.disk = Disk(env, disk_cfg, env.rng.stream(f"{name}.disk"))
        self.cfg, self.store_cfg = broker_cfg, store_cfg
        self.topics = dict(topics)  # TopicConfigManager: topic -> queue count (read = write)
        self.namesrvs = namesrvs
        self.max_message_size_bytes = store_cfg.max_message_size_bytes
        self._chunk = node._chunk
        self.store = MessageStore(node, store_cfg)
        self.commit_log = self.store.commit_log
        self.reput = self.store.reput
        self.group_commit = self.commit_log.group_commit
        if store_cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.commit_log.on_flushed = self.store.reput.wake
        hold_us = ms(broker_cfg.short_polling_time_mills) if not broker_cfg.long_polling_enable else None
        self.hold = PullRequestHoldService(node, self.store.reput.queue, self.execute_pull,
                                           **({"scan_interval_us": hold_us} if hold_us else {}))
        self.store.reput.listeners.append(self.hold.notify_message_arriving)
        self.offsets = ConsumerOffsetManager(node, broker_cfg)
        self.consumers = ConsumerManager(node, broker_cfg)
        self.producers = ProducerManager(node)
        self.schedule = ScheduleMessageService(node, store_cfg.message_delay_level, self.store,
                                               self.put_message, store_cfg.flush_delay_offset_interval_ms)
        self.store.reput.schedule_listener = self.schedule.on_dispatched
        self.store.reput.delivery_us = self.schedule.delivery_us
        self._register_handlers()
        node.add_service(self.register_loop)
        # transactional messages: half/op topics, end processor, check-back (models/broker/end_transaction.py)
        self.transaction = BrokerTransaction(self, batched_ops=version != "4.x")

    def _register_handlers(self) -> None:
        node = self.node
        node.handle(SendMessage, self.on_send)
        node.handle(SendBatchMessage, self.on_send_batch)
        node.handle(PullMessage, self.on_pull)
        node.handle(QueryConsumerOffset, self.on_query_offset)
        node.handle(GetMaxOffset, self.on_get_max_offset)
        node.handle(UpdateConsumerOffset, self.on_update_offset)
        node.handle(Heartbeat, self.on_heartbeat)
        node.handle(GetConsumerList, self.on_get_consumer_list)
        node.handle(ConsumerSendMsgBack, self.on_send_back)

    # --- NameServer registration --------------------------------------------------------------
    def registration(self) -> RegisterBroker:
        topics = tuple((t, n, n) for t, n in self.topics.items())
        return RegisterBroker(self.name, 0, self.node.name, topics)

    def register_all(self) -> None:
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
    def on_send(self, src: str, req_id: int, req: SendMessage) -> None:
        msg = req.msg
        queue_nums = self.topics.get(msg.topic)
        if queue_nums is None or not 0 <= req.queue_id < queue_nums or msg.size_bytes > self.max_message_size_bytes:
            return self._reject(src, req_id, msg, queue_nums)
        props = msg.props
        if props is not None and PROPERTY_TRANSACTION_PREPARED in props:
            return self.transaction.on_half_send(src, req_id, req)
        if msg.delay_level > 0:
            props = dict(props or {}, **{PROPERTY_DELAY_TIME_LEVEL: msg.delay_level})
        phys, queue_offset = self.put_message(msg.msg_id, msg.topic, req.queue_id, msg.size_bytes, msg.body_bytes,
                                              msg.tags, msg.reconsume_times, props)
        if self.group_commit is None:
            return self.node.reply(src, req_id, new_send_response((SUCCESS, queue_offset, phys)))
        node = self.node
        self.group_commit.put_request(phys + msg.size_bytes, lambda status: node.reply(
            src, req_id, SendResponse(SUCCESS if status == "PUT_OK" else CODE_FLUSH_DISK_TIMEOUT,
                                      queue_offset, phys)))
        return None

    def on_send_batch(self, src: str, req_id: int, req: SendBatchMessage) -> None:
        """SEND_BATCH_MESSAGE (CommitLog.asyncPutMessages): the checks apply to the whole batch (its
        size is the encoded batch), then every message is appended under one lock, with consecutive
        queue offsets: all or nothing. The answer carries the first queue offset and, with
        SYNC_FLUSH, waits for the flush of the batch's end."""
        msgs = req.msgs
        first = msgs[0]
        size = sum(m.size_bytes for m in msgs)
        queue_nums = self.topics.get(first.topic)
        if queue_nums is None or not 0 <= req.queue_id < queue_nums or size > self.max_message_size_bytes \
                or any(m.delay_level > 0 or m.topic != first.topic for m in msgs):
            return self._reject(src, req_id, first, queue_nums, size)
        phys = end = queue_offset = -1
        for m in msgs:
            p, offset = self.put_message(m.msg_id, m.topic, req.queue_id, m.size_bytes, m.body_bytes, m.tags,
                                         m.reconsume_times, m.props)
            if phys < 0:
                phys, queue_offset = p, offset
            end = p + m.size_bytes
        if self.group_commit is None:
            return self.node.reply(src, req_id, new_send_response((SUCCESS, queue_offset, phys)))
        node = self.node
        self.group_commit.put_request(end, lambda status: node.reply(
            src, req_id, SendResponse(SUCCESS if status == "PUT_OK" else CODE_FLUSH_DISK_TIMEOUT, queue_offset, phys)))
        return None

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

    def put_message(self, msg_id: int, topic: str, queue_id: int, size: int, body_bytes: int,
                    tags: str | None, reconsume_times: int, props: dict | None) -> tuple[int, int]:
        """CommitLog.asyncPutMessage: a delay level re-routes the message to SCHEDULE_TOPIC_XXXX
        (queue level−1) with its real topic and queue as properties. Returns (phys, queue offset)."""
        if props and PROPERTY_DELAY_TIME_LEVEL in props:
            level = min(props[PROPERTY_DELAY_TIME_LEVEL], self.schedule.max_level())
            props = dict(props, **{PROPERTY_DELAY_TIME_LEVEL: level, PROPERTY_REAL_TOPIC: topic,
                                   PROPERTY_REAL_QUEUE_ID: queue_id})
            topic, queue_id = SCHEDULE_TOPIC, level - 1
            size = record_bytes(topic, body_bytes, tags, 0, props, reconsume_times)
        phys, queue_offset = self.commit_log.append(msg_id, topic, queue_id, size, tags, reconsume_times, 0, props)
        chunk = self._chunk
        chunk.append((self.node.env._now, self.name, BROKER_STORED, msg_id, topic, queue_id, queue_offset, phys,
                      size, reconsume_times))
        if len(chunk) >= DIGEST_CHUNK:
            self.node._flush()
        if not self.reput.pending:
            self.reput.wake()
        return phys, queue_offset

    # --- PullMessageProcessor -----------------------------------------------------------------
    def on_pull(self, src: str, req_id: int, req: PullMessage) -> None:
        if req.commit_offset >= 0:  # applied on the first processing only, held or answered
            self.offsets.table[(req.group, req.topic, req.queue_id)] = req.commit_offset
        topic_index = self.commit_log.topic_index.get(req.topic)
        cq = None if topic_index is None else self.reput.queues.get(topic_index << QUEUE_ID_BITS | req.queue_id)
        if cq is not None and req.queue_offset == cq.max_offset and req.suspend_timeout_us > 0 \
                and self.cfg.long_polling_enable:
            # getMessage would answer OFFSET_OVERFLOW_ONE (PULL_NOT_FOUND): hold the request at once
            self.hold.suspend(src, req_id, req, req.suspend_timeout_us, cq)
            return
        self.execute_pull(src, req_id, req, True, cq)

    def execute_pull(self, src: str, req_id: int, req: PullMessage, allow_suspend: bool = False,
                     cq: Any = None) -> None:
        """PullMessageProcessor.processRequest; `cq` is the request's ConsumeQueue when the caller
        has it (on_pull, long polling's wake-up), else it is looked up."""
        if cq is None:
            cq = self.reput.queue(req.topic, req.queue_id)
        status, next_offset, max_offset, msgs = self.store.get_message(cq, req.queue_offset, req.max_msg_nums,
                                                                       req.tag_codes)
        if status is FOUND:
            code = SUCCESS
        elif status is NO_MATCHED_MESSAGE:
            code = PULL_RETRY_IMMEDIATELY
        elif status is OFFSET_OVERFLOW_ONE or (
                status in (NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE) and req.queue_offset == 0):
            code = PULL_NOT_FOUND
        else:
            code = PULL_OFFSET_MOVED
        if code == PULL_NOT_FOUND and allow_suspend and req.suspend_timeout_us > 0:
            timeout = req.suspend_timeout_us if self.cfg.long_polling_enable else ms(self.cfg.short_polling_time_mills)
            self.hold.suspend(src, req_id, req, timeout, cq)
            return
        self.node.reply(src, req_id, new_pull_response((code, next_offset, 0, max_offset, msgs)))

    # --- ConsumerManageProcessor --------------------------------------------------------------
    def on_query_offset(self, src: str, req_id: int, req: QueryConsumerOffset) -> None:
        offset = self.offsets.query(req.group, req.topic, req.queue_id)
        if offset < 0 and self.store.head_in_memory(req.topic, req.queue_id):
            offset = 0  # 5.1.0+: a hot queue head makes a brand-new group start at 0
        response = OffsetResponse(SUCCESS, offset) if offset >= 0 else OffsetResponse(QUERY_NOT_FOUND)
        self.node.reply(src, req_id, response)

    def on_get_max_offset(self, src: str, req_id: int, req: GetMaxOffset) -> None:
        self.node.reply(src, req_id, OffsetResponse(SUCCESS, self.store.max_offset(req.topic, req.queue_id)))

    def on_update_offset(self, src: str, req_id: int, req: UpdateConsumerOffset) -> None:
        self.offsets.commit(req.group, req.topic, req.queue_id, req.offset)
        self.node.reply(src, req_id, CodeResponse(SUCCESS))

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
        self.consumers.heartbeat(req.client_id, req.consumer_groups)
        for group in req.producer_groups:
            self.producers.register_producer(group, req.client_id)
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
            topic = dlq_topic(req.group)
            self.topics.setdefault(topic, DLQ_NUMS_PER_GROUP)
        else:
            topic = retry_topic(req.group)
            self.topics.setdefault(topic, RETRY_QUEUE_NUMS)
            props[PROPERTY_DELAY_TIME_LEVEL] = req.delay_level or 3 + reconsume
        size = record_bytes(topic, stored.body_bytes, stored.tags, 0, props, reconsume + 1)
        self.put_message(req.msg_id, topic, 0, size, stored.body_bytes, stored.tags, reconsume + 1, props)
        self.node.reply(src, req_id, CodeResponse(SUCCESS))
