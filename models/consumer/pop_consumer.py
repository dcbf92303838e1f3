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

**DefaultMQPushConsumer in POP mode** (`pop.client: push`; DefaultMQPushConsumerImpl.popMessage,
ConsumeMessagePopConcurrentlyService): one pop loop per broker — flow control while more than
`popThresholdForQueue` (96) messages wait for their ack (retry in 50 ms), pop `popBatchNums` (32)
with `popInvisibleTime` (60 s), pollTime 15 s, RPC timeout 25 s; found or not, pop again at once;
an error waits `pullTimeDelayMillsWhenException` (3 s). The messages go to the consume pool
(`consume_thread_max`): a task whose message is already visible again (now − popTime ≥
invisibleTime) is skipped, and a call that ends after it sends nothing; success → ack (one
ACK_MESSAGE each); failure → changeInvisibleTime to `popDelayLevel[reconsumeTimes]` (10 s, 30 s,
60 s, …). A message popped with reconsumeTimes > 16 is
acked and dropped (no dead-letter queue in this mode).

Simplified: the SimpleConsumer's heartbeat and the telemetry session are the remoting client's
heartbeat; orderly POP is a SimpleConsumer of a FIFO group (`pop.orderly`: its pops carry `order`,
one queue's batch is blocked until acked or visible again; the group's per-key order is checked as
an orderly push group's is); POP mode is set by the scenario, not by SetMessageRequestMode; a FIFO
group's client-side local retries (maxAttempts) are not modelled: a failed message waits for its
invisible time.
"""

from __future__ import annotations

from typing import Any

from models.client_instance import MQClientInstance, heartbeat_channel_listener_enabled
from models.consumer.config import PopSpec, PushConsumerConfig
from models.message import java_string_hash
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
EXCEPTION_RETRY_US = 3_000_000  # pullTimeDelayMillsWhenException (POP mode)
POP_DELAY_LEVEL_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
PUSH_MAX_RECONSUME_TIMES = 16  # maxReconsumeTimes -1 → 16
ACK_TIMEOUT_US = 3_000_000  # ackAsync / the gRPC ack's request timeout


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
        self.loops: set[str] = set()  # push: brokers with a pop loop running
        self.waiting_ack: dict[str, int] = {}  # push: messages popped from a broker, not yet done
        self.busy = 0
        self.queue: list = []  # push: consume requests waiting for a thread
        self.stopped = False
        self.detail = env.tracer.detail  # pop.received (a detail kind, sim/trace.py)
        # bound once, so that quiescence tells the long polls from other requests (rmqsim/quiescence.py)
        self._received_bound, self._popped_bound = self._received, self._popped
        self.long_polls = (self._received_bound, self._popped_bound)
        # the group's membership changes nothing: every member pops every broker (queue id -1)
        node.handle(NotifyConsumerIdsChanged, lambda src, rid, req: None)
        node.on_crash(self._lose)
        node.on_start(self._start)

    # --- MQConsumerInner, as the client instance sees it ---------------------------------------
    def update_topic_subscribe_info(self, topic: str, route: TopicRouteData) -> None:
        if topic != self.topic:
            return
        self.brokers = sorted({qd.broker_name for qd in route.queue_datas if qd.perm & PERM_READ})
        if not self.simple:
            for name in self.brokers:
                if name not in self.loops:
                    self.loops.add(name)
                    self._pop_push(name)

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
    def _lose(self) -> None:
        self.brokers = []
        self.loops.clear()
        self.waiting_ack.clear()
        self.busy = 0
        self.queue.clear()

    def _start(self) -> None:
        """start(), also when a `restart` relaunches a process that was shut down."""
        self.stopped = self.node.stopped = False
        self.client.fetch_route(self.topic, self._route_fetched)

    def _route_fetched(self, known: bool) -> None:
        self.client.send_heartbeat_to_all_broker_with_lock(lambda: None)
        if not known:
            self.node.call_later(RECEIVE_RETRY_US, self._start)
            return
        if self.simple:
            for _ in range(self.threads):
                self._receive()

    def _addr(self, broker_name: str) -> str | None:
        return self.client.subscribe_addr.get(broker_name)

    def _pop_request(self) -> PopMessage:
        return PopMessage(self.group, self.topic, POP_ALL_QUEUES, self.batch, self.invisible_us, self.poll_us,
                          self.orderly, self.tag_codes, self.simple)

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
    def _pop_push(self, name: str) -> None:
        """popMessage for one broker's PopMessageQueue (queue id -1)."""
        if self.stopped or name not in self.loops:
            return
        if self.waiting_ack.get(name, 0) > POP_THRESHOLD_FOR_QUEUE:
            self.node.call_later(FLOW_CONTROL_RETRY_US, self._pop_push, name)
            return
        addr = self._addr(name)
        if addr is None:
            self.node.call_later(EXCEPTION_RETRY_US, self._pop_push, name)
            return
        self.node.rpc(addr, self._pop_request(), self.rpc_timeout_us, self._popped_bound, name, addr)

    def _popped(self, name: str, addr: str, response: Any) -> None:
        if response is None or response is CONNECT_FAILED or response.code not in (
                SUCCESS, POLLING_TIMEOUT, PULL_NOT_FOUND):  # POLLING_FULL, errors
            self.node.call_later(EXCEPTION_RETRY_US, self._pop_push, name)
            return
        self._received_msgs(response.msgs)
        for msg, handle in response.msgs:
            if msg.reconsume_times > PUSH_MAX_RECONSUME_TIMES:  # processPopResult: acked, dropped
                self._ack(addr, msg, handle)
                continue
            self.waiting_ack[name] = self.waiting_ack.get(name, 0) + 1
            self.queue.append((name, addr, msg, handle))
        self._next()
        self._pop_push(name)

    def _next(self) -> None:
        while self.queue and self.busy < self.threads:
            name, addr, msg, handle = self.queue.pop(0)
            if self.clock.now_us - handle.pop_time_us >= handle.invisible_us:  # visible again: skipped
                self._done_waiting(name)
                continue
            self.busy += 1
            duration_us, ok = self._draw()
            self.node.call_later(duration_us, self._push_done, name, addr, msg, handle, ok)

    def _push_done(self, name: str, addr: str, msg: Any, handle: Any, ok: bool) -> None:
        """processConsumeResult, unless the pop timed out meanwhile ("processQueue invalid or
        popTimeout": no ack, no invisible-time change; the broker revives the message)."""
        self.busy -= 1
        self._consumed(msg, handle, ok)
        if self.clock.now_us - handle.pop_time_us >= handle.invisible_us:
            pass
        elif ok:
            self._ack(addr, msg, handle)
        else:  # changePopInvisibleTimeAsync to popDelayLevel[reconsumeTimes]
            delay_s = POP_DELAY_LEVEL_S[min(msg.reconsume_times, len(POP_DELAY_LEVEL_S) - 1)]
            self.node.rpc(addr, ChangeInvisibleTime(self.group, self.topic, handle, delay_s * 1_000_000, False),
                          ACK_TIMEOUT_US, lambda _r: None)
        self._done_waiting(name)
        self._next()

    def _done_waiting(self, name: str) -> None:
        self.waiting_ack[name] = max(0, self.waiting_ack.get(name, 0) - 1)
