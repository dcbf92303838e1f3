"""client.impl.producer.DefaultMQProducerImpl: SYNC, ONEWAY and selector sends (ASYNC: async_send.py).

Follows 5.3.3 or 4.9.8 (`client_version`). One Producer is one client process (node) with one
producer group, registered with the process's MQClientInstance (routes, broker addresses,
heartbeats: models/client_instance.py). Queue selection and the fault tolerance of
`sendLatencyFaultEnable` are MQFaultStrategy's (fault_strategy.py, exact to the Java classes).

SYNC (`sendDefaultImpl`): up to `1 + retryTimesWhenSendFailed` attempts sharing one
`sendMsgTimeout` budget counted from the send() call. Each attempt first selects a queue (a retry
avoids the previous broker; 5.x re-randomises the index before a retry when fault tolerance is
on), then checks the budget (`timeout < cost` ends the loop: "call timeout"; here also `timeout ==
cost`, since an attempt that timed out after the whole budget is never retried in the same
millisecond by a real thread, and a zero budget would fail at once in invokeSync), then sends with the
remaining budget as its RPC timeout (5.3.3: capped by `sendMsgMaxTimeoutPerRequest` while more
attempts remain). Transport failures (timeout, refused connection) and broker codes in
`retryResponseCodes` (4.9.8: 17, 14, 1, 16, 204, 205; 5.3.3 also SYSTEM_BUSY 2 and GO_AWAY 1500)
are retried; other codes end the send (returning an earlier non-OK result if there is one); a
stored-but-not-OK status (FLUSH_DISK_TIMEOUT ...) is returned unless
`retryAnotherBrokerWhenNotStoreOK`. A timed-out attempt may have been stored, so its retry
creates a duplicate with the same uniq key: producer-side duplicates (`producer_retry`).
`updateFaultItem` is fed after every attempt as the Java loop feeds it (per version: a success
with its latency, a RemotingException with isolation — 5.x reachable=false only with the
detector on —, an unknown broker address with isolation in 4.x only, a broker error code with
isolation and reachable=false); with fault tolerance off none of this is even computed.

ONEWAY: one attempt, no response, no retry, status ONEWAY (never "acknowledged"). The request is
written to the channel; if the client holds no live channel to the broker (never connected, or
the broker process died and the OS closed it), it first reconnects: a refused or timed-out
connect fails the send (RemotingConnectException), the only failure the client can know of. A
write into a channel whose peer is unreachable (power loss, partition) "succeeds": the message
is lost without anyone knowing (summary `oneway_unstored`).

Selector sends (`sendSelectImpl`; `send_mode: ORDERLY` = SYNC with SelectMessageQueueByHash on the
sharding key): the selector picks the queue; one attempt, no retry to another queue, no fault
updates; a dead broker fails the send.

Steering (`steered` in the send records): with fault tolerance on, an attempt is *steered away*
when the queue a plain round-robin step would have given (the next index position) is on a broker
the fault strategy holds unavailable (`isAvailable` false at that instant) and the selected queue
is on another broker. Not counted: the first send after a route change in 4.x and 5.x first
attempts while the index is still unset (its random start is drawn inside the selection).

Simplified: the sending thread model is one ThreadLocalIndex per producer; no compression,
namespace, VIP channel, TBW102 auto-creation; `clientCloseSocketIfTimeout` closes no broker
channel; GO_AWAY is handled as a retried response code (the remoting layer's reconnect-and-resend
on a fresh channel is not modelled; the brokers of this model never send it).
"""

# compiled with Cython: the C declarations of this module's classes are in producer.pxd beside it

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import cython

from models.client_instance import (
    MQClientInstance,
    heartbeat_channel_listener_enabled,
    topic_route_data_to_publish_info,
)
from models.coverage_points import COV_SEND_BUDGET_EXHAUSTED, COV_SEND_RETRIED_OTHER_BROKER
from models.message import Message, MessageBatch, MessageQueue
from models.producer.config import CONNECT_TIMEOUT_US, ProducerConfig
from models.producer.fault_strategy import DETECTOR_INITIAL_DELAY_MS, DETECTOR_PERIOD_MS, MQFaultStrategy
from models.producer.selector import make_selector
from models.protocol import (
    RETRY_RESPONSE_CODES_BY_VERSION,
    SEND_OK,
    SEND_STATUS_BY_CODE,
    SUCCESS,
    GetMaxOffset,
    OffsetResponse,
    SendBatchMessage,
    TopicRouteData,
    UnregisterClient,
    new_send_message,
)
from models.records import PRODUCER_ATTEMPT_FAILED, PRODUCER_ROUTE_UPDATED, PRODUCER_SEND_FAILED, PRODUCER_SENT
from models.thread_local_index import POSITIVE_MASK, ThreadLocalIndex
from models.topic_publish_info import TopicPublishInfo
from models.version import V5
from sim.env import Clock, ms
from sim.node import CONNECT_FAILED, Node
from sim.trace import DIGEST_CHUNK

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"  # MixAll.DEFAULT_PRODUCER_GROUP
ONEWAY = "ONEWAY"


class Producer:
    """A send in flight carries its state in the RPC continuation's arguments —
    `(msg, info, mq, times, last, steered, begin_us)` — instead of an object per send. `last` is
    what the loop would return or throw if it ended now: None, a failure reason (str), or an
    earlier non-OK result `(status, queue)`."""

    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_chunk", "_on_response_bound", "_waiting_route", "cfg", "client", "client_version", "clock", "cov",
                 "detail", "fault", "fault_on", "group", "max_message_size_bytes", "max_per_request_us", "name", "node",
                 "oneway", "publish", "remoting_reachable", "retry_codes", "selector", "send", "stream",
                 "timeout_us", "times_total", "topics", "v5")

    def __init__(self, env: Any, name: str, zone: str, cfg: ProducerConfig, namesrvs: list[str],
                 topics: list[str], send_mode: str = "SYNC", *, group: str = DEFAULT_PRODUCER_GROUP,
                 client_version: str = V5, selector: str | None = None) -> None:
        node = Node(env, name, zone)
        self.node: Node = node
        self.clock: Clock = env.clock
        self.cov: list[int] = env.coverage  # rare-state counts (models/coverage_points.py)
        self.name = name
        self._chunk = node._chunk
        self.detail = env.tracer.detail  # trace each failed attempt (sim/trace.py detail kinds)
        # bound once: reading a method off `self` makes a new bound-method object each time
        self._on_response_bound = self._on_response
        self.cfg = cfg
        self.group = group
        self.topics = topics
        self.client_version = client_version
        self.v5 = client_version == V5
        self.client: MQClientInstance = MQClientInstance(
            node, namesrvs, cfg.poll_name_server_interval_ms, cfg.heartbeat_broker_interval_ms,
            cfg.mq_client_api_timeout_ms,
            heartbeat_channel_listener_enabled(cfg.enable_heartbeat_channel_event_listener, client_version))
        self.client.register_producer(group, self)
        self.stream = env.rng.stream(f"{name}.producer")  # index starts, whichItemWorst, selector
        self.fault_on = cfg.send_latency_fault_enable
        self.fault = MQFaultStrategy(client_version, cfg.send_latency_fault_enable,
                                     start_detector_enable=cfg.start_detector_enable and self.v5,
                                     detect_timeout_ms=cfg.detect_timeout_ms,
                                     detect_interval_ms=cfg.detect_interval_ms, rng=self.stream,
                                     coverage=env.coverage)
        # reachable flag of a RemotingException (5.x): false only while the detector runs
        self.remoting_reachable = not (self.v5 and cfg.start_detector_enable)
        self.retry_codes = RETRY_RESPONSE_CODES_BY_VERSION[client_version]
        self.publish: dict[str, TopicPublishInfo] = {}  # topicPublishInfoTable (heap)
        self.timeout_us = ms(cfg.send_msg_timeout_ms)
        self.max_per_request_us = ms(cfg.send_msg_max_timeout_per_request_ms) \
            if self.v5 and cfg.send_msg_max_timeout_per_request_ms >= 0 else -1
        self.times_total = 1 + cfg.retry_times_when_send_failed
        self.max_message_size_bytes = cfg.max_message_size_bytes
        self.selector = make_selector(selector, self.stream)
        self._waiting_route: dict[str, list[tuple]] = {}
        node.on_crash(self.publish.clear)
        node.on_crash(self._waiting_route.clear)
        if send_mode == "ASYNC":
            from models.producer.async_send import AsyncSender
            self.send = AsyncSender(self).send
        elif self.selector is not None:
            self.send = self._send_select
        else:
            self.send = self._send_oneway if send_mode == ONEWAY else self._send_sync
        self.oneway = send_mode == ONEWAY
        if self.fault_on and self.fault.start_detector_enable:
            node.add_service(self.detector_loop)

    def exit_gracefully(self) -> None:
        """DefaultMQProducer.shutdown, then the process exits (a `shutdown` fault): the
        application stops calling send(), unregisterProducer sends UNREGISTER_CLIENT (oneway) to
        every known broker, the client instance stops. A send still waiting for its answer gets
        none (as when the remoting client closes under it). The process is not relaunched when
        the fault phase ends."""
        if not self.node.up:
            return
        for addrs in self.client.broker_addr_table.values():
            for addr in addrs.values():
                self.node.send(addr, UnregisterClient(self.client.client_id, producer_group=self.group))
        self.node.stopped = True
        self.node.crash()

    # --- routes (MQProducerInner) ---------------------------------------------------------------
    def update_topic_publish_info(self, topic: str, route: TopicRouteData) -> None:
        """A new route: a new TopicPublishInfo (so a new random start for its index)."""
        if topic in self.topics:
            info = self.publish[topic] = topic_route_data_to_publish_info(route, self.stream, self.client_version)
            self.node.trace(PRODUCER_ROUTE_UPDATED, topic, len(info.message_queue_list))

    def publish_topic_needs_update(self, topic: str) -> bool:
        info = self.publish.get(topic)
        return topic in self.topics and (info is None or not info.message_queue_list)

    def find_route(self, msg: Any, then: Any, *args: Any) -> None:
        """tryToFindTopicPublishInfo: `then(msg, info, *args)` with a usable route, or the send
        fails with "no_route_info" after one NameServer request."""
        info = self.publish.get(msg.topic)
        if info is not None and info.message_queue_list:
            return then(msg, info, *args)
        waiting = self._waiting_route.setdefault(msg.topic, [])
        waiting.append((msg, then, args))
        if len(waiting) == 1:
            self.client.fetch_route(msg.topic, lambda _known, topic=msg.topic: self._route_arrived(topic))  # type: ignore[misc]  # topic bound
        return None

    def _route_arrived(self, topic: str) -> None:
        info = self.publish.get(topic)
        for msg, then, args in self._waiting_route.pop(topic, []):
            if info is not None and info.message_queue_list:
                then(msg, info, *args)
            else:
                self.fail(msg, 0, "no_route_info", "", 0)

    # --- SYNC: sendDefaultImpl ------------------------------------------------------------------
    @cython.ccall
    @cython.locals(info=TopicPublishInfo, index=ThreadLocalIndex)
    def _send_sync(self, msg: Any, info: TopicPublishInfo | None = None, prev: MessageQueue | None = None,
                   times: int = 0, last: Any = None, steered: int = 0) -> None:
        """One turn of sendDefaultImpl's loop: select, check the budget, send. The application's
        call (only `msg`) first validates the message and finds the route."""
        if info is None:
            if msg.body_bytes > self.max_message_size_bytes:  # Validators.checkMessage
                return self.fail(msg, 0, "message_illegal", "", 0)
            info = self.publish.get(msg.topic)
            if info is None or not info.message_queue_list:
                return self.find_route(msg, self._send_sync, None, 0, None, 0)
        now = self.clock.now_us
        if self.fault_on:
            mq, hit = self.select_with_fault(info, prev.broker_name if prev is not None else None,
                                             self.v5 and times > 0, now // 1000)
            steered += hit
        elif prev is None:  # plain round robin, ThreadLocalIndex.incrementAndGet inlined (exact
            index = info.send_which_queue_index  # for both versions with fault tolerance off)
            v = index._value
            if v is None:
                mq = info.select_one_message_queue()
            else:
                v += 1
                if v > 0x7FFFFFFF:
                    v -= 0x100000000
                index._value = v
                queues = info.message_queue_list
                mq = queues[(v & POSITIVE_MASK) % len(queues)]
        else:
            mq = self.fault.select_one_message_queue(info, prev.broker_name, now // 1000)
        cost = now - msg.born_us
        if cost >= self.timeout_us:  # no budget left: callTimeout, no further attempt (see below)
            self.cov[COV_SEND_BUDGET_EXHAUSTED] += 1
            return self._finish(msg, prev, times, last, steered, "call_timeout")
        remaining = self.timeout_us - cost
        if self.max_per_request_us >= 0 and times + 1 < self.times_total and remaining > self.max_per_request_us:
            remaining = self.max_per_request_us
        times += 1
        # unpacked in C when compiled (see Broker.process_send)
        _topic, broker_name, queue_id = cython.cast(tuple, mq) if cython.compiled else mq
        if prev is not None and broker_name != prev.broker_name:  # a retry, on another broker
            self.cov[COV_SEND_RETRIED_OTHER_BROKER] += 1
        addr = self.client.publish_addr.get(broker_name)
        if addr is None:  # MQClientException: the broker group has no master address
            if self.fault_on:  # 4.x: isolation; 5.x: no isolation, reachable
                self.fault.update_fault_item(broker_name, 0, not self.v5, now // 1000)
            if self.detail:
                self._attempt_failed(msg, mq, now, "no_broker_address")
            return self._next(msg, info, mq, times, last if type(last) is tuple else "no_broker_address", steered)
        request = new_send_message((msg, queue_id)) if type(msg) is Message else SendBatchMessage(msg.msgs, queue_id)
        self.node.rpc(addr, request, remaining, self._on_response_bound, msg, info, mq, times, last, steered, now)
        return None

    def _on_response(self, msg: Any, info: TopicPublishInfo, mq: MessageQueue, times: int, last: Any,
                     steered: int, begin_us: int, response: Any) -> None:
        if response is None or response is CONNECT_FAILED:  # RemotingException
            if self.fault_on:
                self._update_fault(mq.broker_name, begin_us, True, self.remoting_reachable)
            if self.detail:
                self._attempt_failed(msg, mq, begin_us, "timeout" if response is None else "connect_failed")
            if type(last) is not tuple:
                last = "timeout" if response is None else "connect_failed"
            return self._next(msg, info, mq, times, last, steered)
        code = response.code
        if code == SUCCESS:
            if self.fault_on:
                self._update_fault(mq.broker_name, begin_us, False, True)
            if type(msg) is not Message:
                return self.sent(msg, mq, times, SEND_OK, steered)
            # the hot path: `sent` inlined, the tuples unpacked once (a NamedTuple field read costs
            # ~200 instructions on CPython 3.11, a field of an unpacking a few; cast to tuple, unpacked
            # in C when compiled: see Broker.process_send)
            msg_id, topic, _tags, shard, _body, born_us, _size, _reconsume, _delay, _props = (
                cython.cast(tuple, msg) if cython.compiled else msg)
            _topic, broker_name, queue_id = cython.cast(tuple, mq) if cython.compiled else mq
            chunk = self._chunk
            chunk.append((self.clock.now_us, self.name, PRODUCER_SENT, msg_id, topic, shard,
                          broker_name, queue_id, SEND_OK, times, born_us, steered))
            if len(chunk) >= DIGEST_CHUNK:
                self.node._flush()
            return None
        if self.fault_on:  # a stored status: a response with its latency; an error code: MQBrokerException
            stored = code in SEND_STATUS_BY_CODE
            self._update_fault(mq.broker_name, begin_us, not stored, stored)
        status = SEND_STATUS_BY_CODE.get(code)
        if self.detail and (status is None or self.cfg.retry_another_broker_when_not_store_ok):
            self._attempt_failed(msg, mq, begin_us, status or f"broker_code_{code}")
        if status is not None:  # stored, but not flushed / replicated in time
            if self.cfg.retry_another_broker_when_not_store_ok:
                return self._next(msg, info, mq, times, (status, mq), steered)
            return self.sent(msg, mq, times, status, steered)
        if code in self.retry_codes:
            return self._next(msg, info, mq, times, last if type(last) is tuple else f"broker_code_{code}", steered)
        if type(last) is tuple:
            return self.sent(msg, last[1], times, last[0], steered)
        return self.fail(msg, times, f"broker_code_{code}", mq.broker_name, steered)

    def _attempt_failed(self, msg: Any, mq: MessageQueue, begin_us: int, reason: str) -> None:
        """A failed attempt (detail kind; its send goes on or ends with this failure)."""
        rt_us = self.clock.now_us - begin_us
        for m in (msg,) if type(msg) is Message else msg.msgs:
            self.node.trace(PRODUCER_ATTEMPT_FAILED, m.msg_id, mq.broker_name, mq.queue_id, reason, rt_us)

    def _next(self, msg: Any, info: TopicPublishInfo, mq: MessageQueue, times: int, last: Any, steered: int) -> None:
        if times < self.times_total:
            self._send_sync(msg, info, mq, times, last, steered)
        else:
            self._finish(msg, mq, times, last, steered)

    def _finish(self, msg: Any, mq: MessageQueue | None, times: int, last: Any, steered: int,
                call_timeout: str | None = None) -> None:
        """After the loop: an earlier result, else the call timeout, else the last failure."""
        if type(last) is tuple:
            self.sent(msg, last[1], times, last[0], steered)
        else:
            self.fail(msg, times, call_timeout or last or "call_timeout", mq.broker_name if mq else "", steered)

    # --- queue selection with fault tolerance ---------------------------------------------------
    def select_with_fault(self, info: TopicPublishInfo, last_broker: str | None, reset_index: bool,
                          now_ms: int) -> tuple[MessageQueue, int]:
        """MQFaultStrategy.selectOneMessageQueue (5.x: `reset_index` re-randomises the index first,
        as a SYNC retry does), and whether it steered away from an unavailable broker (1 or 0; module
        docstring)."""
        fault = self.fault
        if reset_index:
            info.reset_index()  # what select_one_message_queue(reset_index=True) does first
        v = info.send_which_queue
        first = None
        if v is not None:
            v += 1
            if v > 0x7FFFFFFF:
                v -= 0x100000000
            queues = info.message_queue_list
            first = queues[(v & POSITIVE_MASK) % len(queues)].broker_name
        mq = fault.select_one_message_queue(info, last_broker, now_ms)
        hit = first is not None and mq.broker_name != first and not fault.is_available(first, now_ms)
        return mq, int(hit)

    def _update_fault(self, broker: str, begin_us: int, isolation: bool, reachable: bool) -> None:
        now = self.clock.now_us
        self.fault.update_fault_item(broker, (now - begin_us) // 1000, isolation, now // 1000, reachable)

    # --- ONEWAY ---------------------------------------------------------------------------------
    def _send_oneway(self, msg: Any) -> None:
        if msg.body_bytes > self.max_message_size_bytes:
            return self.fail(msg, 0, "message_illegal", "", 0)
        return self.find_route(msg, self._oneway_attempt)

    def _oneway_attempt(self, msg: Any, info: TopicPublishInfo) -> None:
        now = self.clock.now_us
        steered = 0
        if self.fault_on:
            mq, steered = self.select_with_fault(info, None, False, now // 1000)
        else:
            mq = self.fault.select_one_message_queue(info, None, now // 1000)
        if now - msg.born_us > self.timeout_us:
            return self.fail(msg, 0, "call_timeout", "", steered)
        addr = self.client.publish_addr.get(mq.broker_name)
        if addr is None:
            if self.fault_on:
                self.fault.update_fault_item(mq.broker_name, 0, not self.v5, now // 1000)
            return self.fail(msg, 1, "no_broker_address", mq.broker_name, steered)
        return self.write_oneway(msg, mq, addr, steered, self.fault_on)

    def write_oneway(self, msg: Any, mq: MessageQueue, addr: str, steered: int, update_fault: bool) -> None:
        """invokeOneway: write on the live channel, or reconnect first (module docstring)."""
        request = new_send_message((msg, mq.queue_id)) if type(msg) is Message else \
            SendBatchMessage(msg.msgs, mq.queue_id)
        if self.client.channel_open(addr):
            self.node.send(addr, request)
            if update_fault:
                self.fault.update_fault_item(mq.broker_name, 0, False, self.clock.now_us // 1000, True)
            return self.sent(msg, mq, 1, ONEWAY, steered)
        timeout = min(CONNECT_TIMEOUT_US, max(1, self.timeout_us - (self.clock.now_us - msg.born_us)))
        self.node.rpc(addr, request, timeout, self._on_oneway_connect, msg, mq, addr, steered, update_fault,
                      self.clock.now_us)
        return None

    def _on_oneway_connect(self, msg: Any, mq: MessageQueue, addr: str, steered: int, update_fault: bool,
                           begin_us: int, response: Any) -> None:
        if response is None or response is CONNECT_FAILED:  # RemotingConnectException
            if update_fault:
                self._update_fault(mq.broker_name, begin_us, True, self.remoting_reachable)
            return self.fail(msg, 1, "connect_failed", mq.broker_name, steered)
        self.client.channel_opened(addr)
        if update_fault:
            self._update_fault(mq.broker_name, begin_us, False, True)
        return self.sent(msg, mq, 1, ONEWAY, steered)

    # --- selector sends: sendSelectImpl (SYNC and ONEWAY) ---------------------------------------
    def _send_select(self, msg: Any) -> None:
        if msg.body_bytes > self.max_message_size_bytes:
            return self.fail(msg, 0, "message_illegal", "", 0)
        return self.find_route(msg, self._select_attempt)

    def _select_attempt(self, msg: Any, info: TopicPublishInfo) -> None:
        mq = self.selector(info.message_queue_list, msg)  # type: ignore[misc]  # a selector send has one
        now = self.clock.now_us
        if now - msg.born_us > self.timeout_us:
            return self.fail(msg, 0, "call_timeout", "", 0)
        addr = self.client.publish_addr.get(mq.broker_name)
        if addr is None:
            return self.fail(msg, 1, "no_broker_address", mq.broker_name, 0)
        if self.oneway:
            return self.write_oneway(msg, mq, addr, 0, False)
        request = new_send_message((msg, mq.queue_id)) if type(msg) is Message else \
            SendBatchMessage(msg.msgs, mq.queue_id)
        self.node.rpc(addr, request, self.timeout_us - (now - msg.born_us), self._on_select_response, msg, mq)
        return None

    def _on_select_response(self, msg: Any, mq: MessageQueue, response: Any) -> None:
        if response is None or response is CONNECT_FAILED:
            return self.fail(msg, 1, "timeout" if response is None else "connect_failed", mq.broker_name, 0)
        status = SEND_STATUS_BY_CODE.get(response.code)
        if status is None:
            return self.fail(msg, 1, f"broker_code_{response.code}", mq.broker_name, 0)
        return self.sent(msg, mq, 1, status, 0)

    # --- outcomes -------------------------------------------------------------------------------
    def sent(self, msg: Any, mq: MessageQueue, times: int, status: str, steered: int) -> None:
        """The send returned a result (or was written, ONEWAY): one record per message."""
        emit = self.node._emit
        for m in (msg,) if type(msg) is Message else msg.msgs:
            emit(self.name, PRODUCER_SENT, m.msg_id, m.topic, m.shard, mq.broker_name, mq.queue_id, status, times,
                 msg.born_us, steered)

    def fail(self, msg: Any, times: int, reason: str, broker: str, steered: int) -> None:
        for m in (msg,) if type(msg) is Message else msg.msgs:
            self.node.trace(PRODUCER_SEND_FAILED, m.msg_id, m.topic, m.shard, times, reason, msg.born_us, broker,
                            steered)

    # --- 5.x reachability detector --------------------------------------------------------------
    def detector_loop(self) -> Generator:
        """LatencyFaultToleranceImpl.startDetector: every 3 s (first after 3 s, fixed rate), one
        detectByOneRound; each due item's probe is a GET_MAX_OFFSET with `detectTimeout`, the
        items visited one after another (the detector thread waits for each probe)."""
        node, lft = self.node, self.fault.latency_fault_tolerance
        yield node.sleep_us(ms(DETECTOR_INITIAL_DELAY_MS))
        while True:
            started = node.env._now
            for name in list(lft.fault_item_table):
                item = lft.fault_item_table.get(name)
                if item is None:
                    continue
                addr = lft.detect_begin(item, node.env._now // 1000, self.client.publish_addr.get)
                if addr is None or not self.publish:
                    continue  # no master: item removed; no topic to probe: the probe fails at once
                topic = next(iter(self.publish))  # pickTopic: the first topic of the publish table
                response = yield node.rpc_event(addr, GetMaxOffset(topic, 0), ms(self.fault.detect_timeout_ms))
                lft.detect_end(item, isinstance(response, OffsetResponse) and response.code == SUCCESS)
            yield node.sleep_us(max(0, started + ms(DETECTOR_PERIOD_MS) - node.env._now))


def batch_of(msgs: list[Message]) -> MessageBatch:
    """MessageBatch.generateFromList: the messages of one send() call (one topic, no delay)."""
    first = msgs[0]
    return MessageBatch(tuple(msgs), first.topic, first.born_us, sum(m.size_bytes for m in msgs))
