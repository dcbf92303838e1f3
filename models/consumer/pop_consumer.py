"""POP consumers (5.x): the gRPC SimpleConsumer through the proxy, and DefaultMQPushConsumer in POP mode.

Neither rebalances nor commits offsets: every member pops queue id -1 of every broker of the
topic (the proxy's choice for a SimpleConsumer; QueryAssignment with `popShareQueueNum` 0 for the
push consumer), the broker hands out messages made invisible for `invisibleTime` and moves the
offset at once (models/broker/pop_message_processor.py), and each message is acked by its receipt
handle once processed. A message not acked in time is put back by the broker's revive service into
the group's POP retry topic, reconsumeTimes + 1, and popped again by any member. So a consumer's
crash re-delivers exactly the messages it held un-acked, after their invisible time, and a
duplicate means an ack that came too late (`pop.ack_late`: the listener ended after the handle's
invisible time — `invisible_time_expired`), an ack that never took effect (`pop.ack_failed`, or
lost with the broker — `ack_lost`), or a broker restart that went back on its offsets (popped or
revived again — `broker_offset_rollback`); analysis/checkers/duplicates.py.

**SimpleConsumer** (rocketmq-clients SimpleConsumerImpl; `pop.client: simple`): `threads`
application threads each loop `receive(maxMessageNum, invisibleDuration)` → process the messages
one by one (`consume_time_ms` each) → `ack` each success as it is done (a failure is left un-acked:
it comes back after the invisible time). Brokers are taken in turn. The receive long-polls: the
proxy holds it `awaitDuration` + 3 s (requestTimeout) − 1.5 s, clamped to 5–20 s
(grpcClientConsumerMin/MaxLongPollingTimeoutMillis); its RPC times out after awaitDuration +
3 s. The proxy runs in LOCAL mode, inside each broker (its checks and dead-letter filter are the
broker's, pop_message_processor.py). A failed receive is retried after 1 s (the application's loop).

**DefaultMQPushConsumer in POP mode** (`pop.client: push`, 5.3.3; the scenario stands for
clientRebalance false and the group's request mode POP): RebalanceImpl.getRebalanceResultFromBroker
/ updateMessageQueueAssignment (models/consumer/rebalance.py `PopRebalancer`) keeps one
PopProcessQueue per broker of the topic (queue id -1: QueryAssignment's allocate4Pop with
popShareQueueNum 0); a new one's first pop is dispatched 500 ms after the round; one no longer
assigned, or not popped for 120 s (isPullExpired, CONSUME_PASSIVELY), is dropped. popMessage per
queue (DefaultMQPushConsumerImpl.popMessage): flow control while more than `popThresholdForQueue`
(96) messages wait for their ack (retry in 50 ms); the master only
(findBrokerAddressInSubscribe(name, MASTER_ID, true); none: the route is fetched again and, still
none, the pop waits `pullTimeDelayMillsWhenException`, ClientConfig's 1 s); pop `popBatchNums` (32)
with `popInvisibleTime` (60 s), pollTime 15 s (BROKER_SUSPEND_MAX_TIME_MILLIS), RPC timeout 25 s,
initMode MIN for CONSUME_FROM_FIRST_OFFSET, else MAX (RebalancePushImpl.getConsumeInitMode).
PopCallback: FOUND → pop again after `pullInterval` (0: at once); POLLING_NOT_FOUND (POLLING_TIMEOUT,
PULL_NOT_FOUND) → at once; POLLING_FULL or another code → `pullTimeDelayMillsWhenException`; an
exception (timeout, no connection) → the same, FLOW_CONTROL → 20 ms. processPopResult acks and drops
a message popped with reconsumeTimes > maxReconsumeTimes (16). The messages go to the consume pool
(ConsumeMessagePopConcurrentlyService, `consume_thread_max` threads, one message a task as
consumeMessageBatchMaxSize 1): a task of a dropped queue, or whose message is already visible again
(isPopTimeout: now − popTime ≥ invisibleTime), is skipped, and a call that ends so sends nothing;
success → ackAsync (one ACK_MESSAGE each); failure → changePopInvisibleTime to
`popDelayLevel[reconsumeTimes]` (10 s, 30 s, 60 s, …), or at reconsumeTimes ≥ maxReconsumeTimes
checkNeedAckOrDelay (`check_need_ack_or_delay`). Acks and invisible-time changes go to the broker
name's master as it is known when they are sent (ASYNC_TIMEOUT 3 s).

Simplified: the SimpleConsumer's heartbeat and the telemetry session are the remoting client's
heartbeat; orderly POP is a SimpleConsumer of a FIFO group (`pop.orderly`: its pops carry `order`,
one queue's batch is blocked until acked or visible again; the group's per-key order is checked as
an orderly push group's is); POP mode is set by the scenario, not by SetMessageRequestMode; a FIFO
group's client-side local retries (maxAttempts) are not modelled: a failed message waits for its
invisible time. The push consumer's QueryAssignment is answered from the client's own route (no
round trip; the broker's route cache is taken to agree), its `%RETRY%group` subscription (PULL mode,
empty in POP mode: failures change the invisible time) is not kept, processPopResult's client-side
tag re-filter is not needed (the broker filters by tag, with no hash collision), and a POP retry
copy carries no bornTimestamp: checkNeedAckOrDelay measures an original from its store time and
takes a retry copy as born more than 2 × 7200 s ago (16 rounds of the default popDelayLevel add up
to 17,140 s), so acks it.
"""

from __future__ import annotations

from typing import Any

from models.client_instance import MQClientInstance, heartbeat_channel_listener_enabled
from models.consumer.config import ConsumeFromWhere, PopSpec, PushConsumerConfig
from models.consumer.rebalance import PopRebalancer
from models.message import PROPERTY_BORN_TIMESTAMP, java_string_hash
from models.perm_name import PERM_READ
from models.protocol import (
    POLLING_TIMEOUT,
    POP_ALL_QUEUES,
    PULL_NOT_FOUND,
    SUCCESS,
    AckMessage,
    ChangeInvisibleTime,
    NotifyConsumerIdsChanged,
    PopMessage,
    TopicRouteData,
)
from models.records import CONSUMER_CONSUMED, POP_ACK_FAILED, POP_ACK_LATE, POP_RECEIVED
from models.version import V5
from sim.dist import Dist
from sim.env import ms
from sim.node import CONNECT_FAILED, Node

REQUEST_TIMEOUT_US = 3_000_000  # rocketmq-clients ClientConfiguration requestTimeout
PROXY_MIN_POLLING_US = 5_000_000  # ProxyConfig.grpcClientConsumerMinLongPollingTimeoutMillis
PROXY_MAX_POLLING_US = 20_000_000  # ProxyConfig.grpcClientConsumerMaxLongPollingTimeoutMillis
RECEIVE_RETRY_US = 1_000_000  # the application's pause after a failed receive
PUSH_POLL_US = 15_000_000  # BROKER_SUSPEND_MAX_TIME_MILLIS
PUSH_POP_TIMEOUT_US = 25_000_000  # the pop's network timeout (popMessageAsync)
POP_THRESHOLD_FOR_QUEUE = 96  # DefaultMQPushConsumer.popThresholdForQueue
FLOW_CONTROL_RETRY_US = 50_000  # PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
BROKER_FLOW_CONTROL_RETRY_US = 20_000  # PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
FLOW_CONTROL = 215  # ResponseCode.FLOW_CONTROL: PopCallback.onException waits 20 ms, not the exception delay
# DefaultMQPushConsumerImpl.popDelayLevel (seconds)
POP_DELAY_LEVEL_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
DEFAULT_MAX_RECONSUME_TIMES = 16  # getMaxReconsumeTimes: maxReconsumeTimes -1 → 16
ACK_TIMEOUT_US = 3_000_000  # ASYNC_TIMEOUT of ackAsync / changePopInvisibleTimeAsync; the gRPC ack's timeout


def check_need_ack_or_delay(elapsed_ms: int) -> int | None:
    """ConsumeMessagePopConcurrentlyService.checkNeedAckOrDelay (5.3.3), for a message that failed at
    reconsumeTimes ≥ maxReconsumeTimes, `elapsed_ms` after it was born: None → ack it (born more than
    2 × the last popDelayLevel ago); else the delay level changePopInvisibleTime is given — one past
    the highest level whose delay has elapsed. -1 when none has: Java then indexes popDelayLevel[-1]
    and throws before any request, so the message is neither acked nor delayed."""
    if elapsed_ms > POP_DELAY_LEVEL_S[-1] * 1000 * 2:
        return None
    for level in range(len(POP_DELAY_LEVEL_S) - 1, -1, -1):
        if elapsed_ms >= POP_DELAY_LEVEL_S[level] * 1000:
            return level + 1
    return -1


def pop_delay_s(delay_level: int, reconsume_times: int) -> int | None:
    """changePopInvisibleTime's delay: level 0 means the message's reconsumeTimes; a level past the
    table takes its last entry; None for a negative level (Java's ArrayIndexOutOfBoundsException)."""
    if delay_level == 0:
        delay_level = reconsume_times
    if delay_level < 0:
        return None
    return POP_DELAY_LEVEL_S[min(delay_level, len(POP_DELAY_LEVEL_S) - 1)]


class PopProcessQueue:
    """client.impl.consumer.PopProcessQueue: one broker's queue -1 as the push consumer pops it."""

    __slots__ = ("broker_name", "dropped", "last_pop_us", "wait_ack")

    def __init__(self, broker_name: str, now_us: int) -> None:
        self.broker_name = broker_name
        self.wait_ack = 0  # waitAckCounter: popped, not yet acked, delayed or skipped
        self.last_pop_us = now_us  # lastPopTimestamp (isPullExpired)
        self.dropped = False


def _nothing() -> None:
    """A SimpleConsumer's start does not rebalance after its heartbeat."""


def proxy_polling_us(await_us: int) -> int:
    """ReceiveMessageActivity: deadline remaining − requestTimeout / 2, clamped to 5–20 s."""
    return min(PROXY_MAX_POLLING_US, max(PROXY_MIN_POLLING_US, await_us + REQUEST_TIMEOUT_US // 2))


class PopConsumer:
    """One client process of a POP group (module docstring)."""

    def __init__(self, env: Any, name: str, zone: str, group: str, topic: str, tags: list[str] | None,
                 cfg: PushConsumerConfig, namesrvs: list[str], consume_time: Dist, failure_probability: float,
                 pop: PopSpec) -> None:
        node = Node(env, name, zone)
        self.node = node
        self.clock = env.clock
        self.group, self.topic, self.cfg = group, topic, cfg
        self.simple = pop.client == "simple"
        self.orderly = pop.orderly
        self.tags = frozenset(tags) if tags else None
        self.tag_codes = None if tags is None else frozenset(java_string_hash(t) for t in sorted(tags))
        self.subscriptions = {topic: self.tags}  # what the heartbeat names
        self.invisible_us = ms(pop.invisible_duration_ms)
        self.batch = pop.batch  # maxMessageNum, or popBatchNums
        self.failure_probability = failure_probability
        self.v4 = False  # POP is 5.x (the rebalance service's rules)
        # RebalancePushImpl.getConsumeInitMode; the proxy's ReceiveMessageActivity always asks MAX
        self.init_mode = "MIN" if not self.simple and cfg.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET \
            else "MAX"
        self.max_reconsume_times = DEFAULT_MAX_RECONSUME_TIMES if cfg.max_reconsume_times == -1 \
            else cfg.max_reconsume_times
        self.exception_delay_us = ms(cfg.pull_time_delay_mills_when_exception)  # ClientConfig: 1 s
        self.pull_interval_us = ms(cfg.pull_interval_ms)
        if self.simple:
            await_us = ms(pop.await_duration_ms)
            self.poll_us, self.rpc_timeout_us = proxy_polling_us(await_us), await_us + REQUEST_TIMEOUT_US
            self.threads = pop.threads
        else:
            self.poll_us, self.rpc_timeout_us = PUSH_POLL_US, PUSH_POP_TIMEOUT_US
            self.threads = cfg.consume_thread_max
        self.client = MQClientInstance(node, namesrvs, cfg.poll_name_server_interval_ms,
                                       cfg.heartbeat_broker_interval_ms, cfg.mq_client_api_timeout_ms,
                                       heartbeat_channel_listener_enabled(cfg.enable_heartbeat_channel_event_listener,
                                                                          V5))
        self.client.register_consumer(group, self, cfg.persist_consumer_offset_interval_ms)
        self.stream = env.rng.stream(f"{name}.listener")
        self._time_block = consume_time.block_sampler(self.stream, 1000)
        self._times: list[int] = []
        self.brokers: list[str] = []  # the topic's broker names, in route order
        self.next_broker = 0  # the SimpleConsumer's round robin
        self.pqs: dict[str, PopProcessQueue] = {}  # push: popProcessQueueTable, by broker name
        self.busy = 0
        self.queue: list = []  # push: consume requests waiting for a thread
        self.stopped = False
        self.detail = env.tracer.detail  # pop.received (a detail kind, sim/trace.py)
        # bound once, so that quiescence tells the long polls from other requests (rmqsim/quiescence.py)
        self._received_bound, self._popped_bound = self._received, self._popped
        self.long_polls = (self._received_bound, self._popped_bound)
        # push: RebalanceImpl in POP mode (models/consumer/rebalance.py); the client instance's
        # rebalanceImmediately wakes it. A SimpleConsumer does not rebalance.
        self.rebalancer = None if self.simple else PopRebalancer(self)
        # the group's membership changes no POP assignment (every member pops every broker), but a
        # notification still wakes the push consumer's rebalance service
        node.handle(NotifyConsumerIdsChanged, self._ids_changed)
        node.on_crash(self._lose)
        node.on_start(self._start)

    # --- MQConsumerInner, as the client instance sees it ---------------------------------------
    def update_topic_subscribe_info(self, topic: str, route: TopicRouteData) -> None:
        if topic != self.topic:
            return
        self.brokers = sorted({qd.broker_name for qd in route.queue_datas if qd.perm & PERM_READ})

    def subscribe_topic_needs_update(self, topic: str) -> bool:
        return topic == self.topic and not self.brokers

    def persist_consumer_offset(self) -> None:
        """Nothing to persist: the broker moved the offset at the pop."""

    def shutdown(self) -> None:
        """The application stops receiving; acks in flight still land. The process then exits."""
        self.stopped = True
        self.node.stopped = True
        self.node.crash()

    # --- life cycle ----------------------------------------------------------------------------
    def _ids_changed(self, _src: str, _rid: int, _req: Any) -> None:
        if self.rebalancer is not None:
            self.rebalancer.wakeup()

    def _lose(self) -> None:
        self.brokers = []
        for pq in self.pqs.values():
            pq.dropped = True
        self.pqs.clear()
        self.busy = 0
        self.queue.clear()

    def _start(self) -> None:
        """start(), also when a `restart` relaunches a process that was shut down."""
        self.stopped = self.node.stopped = False
        if self.rebalancer is not None:
            self.rebalancer.start()
        self.client.fetch_route(self.topic, self._route_fetched)

    def _route_fetched(self, known: bool) -> None:
        """After the route: heartbeat every broker, then (push) rebalanceImmediately."""
        self.client.send_heartbeat_to_all_broker_with_lock(
            self.rebalancer.wakeup if self.rebalancer is not None else _nothing)
        if not self.simple:  # the rebalance rounds (every 1 s while unbalanced) wait for the route poll
            return
        if not known:
            self.node.call_later(RECEIVE_RETRY_US, self._start)
            return
        for _ in range(self.threads):
            self._receive()

    def _addr(self, broker_name: str) -> str | None:
        return self.client.subscribe_addr.get(broker_name)

    def _pop_request(self) -> PopMessage:
        return PopMessage(self.group, self.topic, POP_ALL_QUEUES, self.batch, self.invisible_us, self.poll_us,
                          self.orderly, self.tag_codes, self.simple, self.init_mode)

    def _draw(self) -> tuple[int, bool]:
        """One listener call: its duration (µs) and whether it succeeds."""
        ok = self.failure_probability == 0.0 or self.stream.random() >= self.failure_probability
        if not self._times:
            self._times += self._time_block()
        return self._times.pop(), ok

    # --- SimpleConsumer -------------------------------------------------------------------------
    def _receive(self) -> None:
        """One application thread's receive(), from the next broker in turn."""
        if self.stopped or not self.brokers:
            self.node.call_later(RECEIVE_RETRY_US, self._receive)
            return
        name = self.brokers[self.next_broker % len(self.brokers)]
        self.next_broker += 1
        addr = self._addr(name)
        if addr is None:
            self.node.call_later(RECEIVE_RETRY_US, self._receive)
            return
        self.node.rpc(addr, self._pop_request(), self.rpc_timeout_us, self._received_bound, addr)

    def _received(self, addr: str, response: Any) -> None:
        if response is None or response is CONNECT_FAILED or response.code not in (
                SUCCESS, POLLING_TIMEOUT, PULL_NOT_FOUND):
            self.node.call_later(RECEIVE_RETRY_US, self._receive)
            return
        self._received_msgs(response.msgs)
        self._process(addr, list(response.msgs))

    def _process(self, addr: str, msgs: list) -> None:
        """Process the received messages one after another, acking each success, then receive."""
        if self.stopped:
            return
        if not msgs:
            self._receive()
            return
        msg, handle = msgs.pop(0)
        duration_us, ok = self._draw()
        self.node.call_later(duration_us, self._processed, addr, msg, handle, ok, msgs)

    def _processed(self, addr: str, msg: Any, handle: Any, ok: bool, rest: list) -> None:
        self._consumed(msg, handle, ok)
        if ok:
            self._ack(addr, msg, handle)
        self._process(addr, rest)

    # --- shared: the records, the ack -------------------------------------------------------------
    def _received_msgs(self, msgs: tuple) -> None:
        if self.detail:
            for msg, h in msgs:
                self.node.trace(POP_RECEIVED, self.group, msg.msg_id, msg.topic, msg.queue_id, msg.queue_offset,
                                h.pop_time_us, h.invisible_us)

    def _consumed(self, msg: Any, handle: Any, ok: bool) -> None:
        self.node.trace(CONSUMER_CONSUMED, self.group, msg.msg_id, msg.user_topic, handle.broker_name,
                        msg.queue_id, msg.queue_offset, ok, msg.reconsume_times)
        deadline = handle.pop_time_us + handle.invisible_us
        if ok and self.clock.now_us >= deadline:
            self.node.trace(POP_ACK_LATE, self.group, msg.msg_id, deadline)

    def _ack(self, addr: str, msg: Any, handle: Any) -> None:
        late = self.clock.now_us >= handle.pop_time_us + handle.invisible_us
        self.node.rpc(addr, AckMessage(self.group, self.topic, handle, self.simple), ACK_TIMEOUT_US, self._acked,
                      msg, late)

    def _acked(self, msg: Any, late: bool, response: Any) -> None:
        if late:  # recorded as late already (a SimpleConsumer's: the proxy refuses it)
            return
        if response is None or response is CONNECT_FAILED:
            reason = "timeout" if response is None else "connect_failed"
        elif response.code != SUCCESS:
            reason = f"code_{response.code}"
        else:
            return
        self.node.trace(POP_ACK_FAILED, self.group, msg.msg_id, reason)

    # --- DefaultMQPushConsumer in POP mode --------------------------------------------------------
    def pop_assignment(self, topic: str) -> list[str] | None:
        """QueryAssignment's answer (allocate4Pop, popShareQueueNum 0): queue -1 of every broker with
        a readable queue of the topic, here from the client's route; None without a route (the
        client finds no broker to ask: the round is not balanced)."""
        if topic != self.topic or not self.brokers:
            return None
        return self.brokers

    def new_pop_process_queue(self, broker_name: str) -> PopProcessQueue:
        """createPopProcessQueue."""
        return PopProcessQueue(broker_name, self.clock.now_us)

    def pop_message(self, pq: PopProcessQueue) -> None:
        """DefaultMQPushConsumerImpl.popMessage for one PopProcessQueue (module docstring)."""
        if pq.dropped or self.stopped:
            return
        pq.last_pop_us = self.clock.now_us
        if pq.wait_ack > POP_THRESHOLD_FOR_QUEUE:
            self.node.call_later(FLOW_CONTROL_RETRY_US, self.pop_message, pq)
            return
        self._with_master(pq.broker_name, self._send_pop, pq)

    def _send_pop(self, addr: str | None, pq: PopProcessQueue) -> None:
        """PullAPIWrapper.popAsync: to the master; none even after the route update → the
        MQClientException of popAsync, retried after pullTimeDelayMillsWhenException."""
        if addr is None:
            self.node.call_later(self.exception_delay_us, self.pop_message, pq)
            return
        self.node.rpc(addr, self._pop_request(), self.rpc_timeout_us, self._popped_bound, pq)

    def _with_master(self, broker_name: str, send: Any, *args: Any) -> None:
        """findBrokerAddressInSubscribe(brokerName, MASTER_ID, true), and when no master is known
        updateTopicRouteInfoFromNameServer and a second look: `send(addr or None, *args)`."""
        addr = self.client.find_broker_address_in_publish(broker_name)  # the master's address only
        if addr is not None:
            send(addr, *args)
            return
        self.client.fetch_route(self.topic, lambda _known: send(
            self.client.find_broker_address_in_publish(broker_name), *args))

    def _popped(self, pq: PopProcessQueue, response: Any) -> None:
        """PopCallback.onSuccess / onException (module docstring)."""
        if response is None or response is CONNECT_FAILED:
            delay_us = self.exception_delay_us
        elif response.code == SUCCESS:
            delay_us = self._found(pq, response.msgs)
        elif response.code in (POLLING_TIMEOUT, PULL_NOT_FOUND):  # POLLING_NOT_FOUND
            delay_us = 0
        elif response.code == FLOW_CONTROL:
            delay_us = BROKER_FLOW_CONTROL_RETRY_US
        else:  # POLLING_FULL, or an MQBrokerException
            delay_us = self.exception_delay_us
        if delay_us:
            self.node.call_later(delay_us, self.pop_message, pq)
        else:
            self.pop_message(pq)

    def _found(self, pq: PopProcessQueue, msgs: tuple) -> int:
        """processPopResult, submitPopConsumeRequest; the delay before the next pop."""
        self._received_msgs(msgs)
        kept = 0
        for msg, handle in msgs:
            if msg.reconsume_times > self.max_reconsume_times:  # processPopResult: acked, dropped
                self._with_master(handle.broker_name, self._send_ack, msg, handle)
                continue
            kept += 1
            self.queue.append((pq, msg, handle))
        if not kept:
            return 0
        pq.wait_ack += kept  # incFoundMsg
        self._next()
        return self.pull_interval_us

    def _next(self) -> None:
        """The consume pool takes the next ConsumeRequest (run(): dropped or popTimeout → skipped)."""
        while self.queue and self.busy < self.threads:
            pq, msg, handle = self.queue.pop(0)
            if pq.dropped:
                continue
            if self.clock.now_us - handle.pop_time_us >= handle.invisible_us:  # isPopTimeout
                pq.wait_ack -= 1  # decFoundMsg
                continue
            self.busy += 1
            duration_us, ok = self._draw()
            self.node.call_later(duration_us, self._push_done, pq, msg, handle, ok)

    def _push_done(self, pq: PopProcessQueue, msg: Any, handle: Any, ok: bool) -> None:
        """The listener returned: processConsumeResult, unless the queue was dropped or the pop
        timed out meanwhile ("processQueue invalid or popTimeout": no ack, no invisible-time
        change; the broker revives the message)."""
        self.busy -= 1
        self._consumed(msg, handle, ok)
        pq.wait_ack -= 1  # PopProcessQueue.ack, or decFoundMsg
        if not pq.dropped and self.clock.now_us - handle.pop_time_us < handle.invisible_us:
            self._process_consume_result(msg, handle, ok)
        self._next()

    def _process_consume_result(self, msg: Any, handle: Any, ok: bool) -> None:
        """processConsumeResult for one message (ackIndex 0 on success, -1 on RECONSUME_LATER)."""
        if ok:
            self._with_master(handle.broker_name, self._send_ack, msg, handle)
        elif msg.reconsume_times >= self.max_reconsume_times:
            self._check_need_ack_or_delay(msg, handle)
        else:  # changePopInvisibleTime(msg, group, delayLevelWhenNextConsume 0 → reconsumeTimes)
            self._change_invisible(msg, handle, pop_delay_s(0, msg.reconsume_times))

    def _check_need_ack_or_delay(self, msg: Any, handle: Any) -> None:
        """checkNeedAckOrDelay (`check_need_ack_or_delay`), the message's age from its born time."""
        born_us = self._born_us(msg)
        level = None if born_us is None else check_need_ack_or_delay((self.clock.now_us - born_us) // 1000)
        if level is None:
            self._with_master(handle.broker_name, self._send_ack, msg, handle)
        else:
            self._change_invisible(msg, handle, pop_delay_s(level, msg.reconsume_times))

    @staticmethod
    def _born_us(msg: Any) -> int | None:
        """bornTimestamp: a kept born property, else an original's store time; a retry copy's is not
        carried (None: older than any popDelayLevel sum, module docstring)."""
        if msg.props and PROPERTY_BORN_TIMESTAMP in msg.props:
            return msg.props[PROPERTY_BORN_TIMESTAMP]
        return msg.store_us if msg.reconsume_times == 0 else None

    def _change_invisible(self, msg: Any, handle: Any, delay_s: int | None) -> None:
        """changePopInvisibleTimeAsync; no delay (Java's index out of bounds): nothing is sent."""
        if delay_s is not None:
            self._with_master(handle.broker_name, self._send_change_invisible, handle, delay_s)

    def _send_change_invisible(self, addr: str | None, handle: Any, delay_s: int) -> None:
        if addr is not None:  # else MQClientException, logged
            self.node.rpc(addr, ChangeInvisibleTime(self.group, self.topic, handle, delay_s * 1_000_000, False),
                          ACK_TIMEOUT_US, lambda _r: None)

    def _send_ack(self, addr: str | None, msg: Any, handle: Any) -> None:
        """ackAsync to the master; none known: logged, nothing sent."""
        if addr is None:
            self.node.trace(POP_ACK_FAILED, self.group, msg.msg_id, "broker_not_exist")
            return
        self._ack(addr, msg, handle)
