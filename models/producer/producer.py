"""client.impl.producer.DefaultMQProducerImpl: SYNC and ONEWAY sends with the real retry loop.

SYNC (`sendDefaultImpl`): up to `1 + retryTimesWhenSendFailed` attempts sharing one
`sendMsgTimeout` budget; each attempt picks a queue (avoiding the last failed broker) and gets
the remaining budget as its RPC timeout. Transport failures (timeout, refused connection) and
broker codes in `retryResponseCodes` are retried; other codes end the send; a non-OK store
status (FLUSH_DISK_TIMEOUT …) is returned unless `retryAnotherBrokerWhenNotStoreOK`. A timed-out
attempt may have been stored, so its retry creates a duplicate with the same uniq key — the
classic source of producer-side duplicates. Routes are polled every 30 s (first after 10 ms)
and fetched on demand when a topic has none.

ONEWAY: one attempt, no response, no retry; recorded with status ONEWAY (never "acknowledged").

Simplified: the sending thread model is one ThreadLocalIndex per producer; no compression, no
namespace, no MQFaultStrategy (sendLatencyFaultEnable=false, the default).
"""

from __future__ import annotations

from typing import Any

from models.message import Message
from models.producer.config import ROUTE_POLL_INITIAL_DELAY_US, ProducerConfig
from models.producer.publish_info import TopicPublishInfo
from models.protocol import (
    RETRY_RESPONSE_CODES,
    SEND_OK,
    SEND_STATUS_BY_CODE,
    GetRouteInfo,
    TopicRouteData,
    new_send_message,
)
from models.records import PRODUCER_ROUTE_UPDATED, PRODUCER_SEND_FAILED, PRODUCER_SENT
from sim.env import ms
from sim.node import CONNECT_FAILED, Node


class _Send:
    """One send() call in flight."""

    __slots__ = ("msg", "shard", "times", "last_broker", "last_status", "mq", "call_timeout")

    def __init__(self, msg: Message, shard: str) -> None:
        self.msg, self.shard = msg, shard
        self.times = 0
        self.last_broker: str | None = None
        self.last_status: str | None = None
        self.mq: Any = None
        self.call_timeout = False


class Producer:
    def __init__(self, env: Any, name: str, zone: str, cfg: ProducerConfig, namesrvs: list[str],
                 topics: list[str], send_mode: str = "SYNC") -> None:
        self.node = node = Node(env, name, zone)
        self.cfg = cfg
        self.namesrvs = namesrvs
        self.topics = topics
        self.send_mode = send_mode
        self.publish: dict[str, TopicPublishInfo] = {}  # topicPublishInfoTable (heap)
        self.index_stream = env.rng.stream(f"{name}.send_which_queue")
        self.timeout_us = ms(cfg.send_msg_timeout_ms)
        self.times_total = 1 + cfg.retry_times_when_send_failed
        self._waiting_route: dict[str, list[_Send]] = {}
        node.on_crash(self.publish.clear)
        node.on_crash(self._waiting_route.clear)
        node.add_service(self.poll_name_server)

    # --- routes -------------------------------------------------------------------------------
    def poll_name_server(self) -> Any:
        yield self.node.sleep_us(ROUTE_POLL_INITIAL_DELAY_US)
        while True:
            for topic in self.topics:
                self.fetch_route(topic)
            yield self.node.sleep_us(ms(self.cfg.poll_name_server_interval_ms))

    def fetch_route(self, topic: str) -> None:
        namesrv = self.namesrvs[0] if len(self.namesrvs) == 1 else \
            self.namesrvs[self.index_stream.randrange(len(self.namesrvs))]
        self.node.rpc(namesrv, GetRouteInfo(topic), ms(self.cfg.mq_client_api_timeout_ms),
                      lambda r: self.on_route(topic, r))

    def on_route(self, topic: str, route: Any) -> None:
        if isinstance(route, TopicRouteData):
            current = self.publish.get(topic)
            if current is None or current.route != route:
                self.publish[topic] = TopicPublishInfo(route, self.index_stream)
                self.node.trace(PRODUCER_ROUTE_UPDATED, topic, len(self.publish[topic].queues))
        for send in self._waiting_route.pop(topic, []):
            self._attempt(send, route_fetched=True)

    # --- send ---------------------------------------------------------------------------------
    def send(self, msg: Message, shard: str = "") -> None:
        self._attempt(_Send(msg, shard))

    def _attempt(self, send: _Send, route_fetched: bool = False) -> None:
        topic = send.msg.topic
        info = self.publish.get(topic)
        if info is None or not info.queues:
            if route_fetched:
                return self._fail(send, "no_route_info")
            waiting = self._waiting_route.setdefault(topic, [])
            waiting.append(send)
            if len(waiting) == 1:
                self.fetch_route(topic)
            return None
        cost = self.node.env._now - send.msg.born_us
        if cost >= self.timeout_us:  # no budget left: callTimeout, no further attempt
            send.call_timeout = True
            return self._finish(send)
        mq = send.mq = info.select(send.last_broker)
        send.times += 1
        addr = info.master_addr.get(mq.broker_name)
        if addr is None:
            send.last_broker = mq.broker_name
            return self._next(send)
        request = new_send_message((send.msg, mq.queue_id))
        if self.send_mode == "ONEWAY":
            self.node.send(addr, request)
            return self._sent(send, "ONEWAY")
        self.node.rpc(addr, request, self.timeout_us - cost, self._on_response, send)
        return None

    def _on_response(self, send: _Send, response: Any) -> None:
        send.last_broker = send.mq.broker_name
        if response is None or response is CONNECT_FAILED:
            return self._next(send)
        status = SEND_STATUS_BY_CODE.get(response.code)
        if status == SEND_OK:
            return self._sent(send, SEND_OK)
        if status is not None:  # stored, but not flushed / replicated in time
            send.last_status = status
            if self.cfg.retry_another_broker_when_not_store_ok:
                return self._next(send)
            return self._sent(send, status)
        if response.code in RETRY_RESPONSE_CODES:
            return self._next(send)
        if send.last_status is not None:
            return self._sent(send, send.last_status)
        return self._fail(send, f"broker_code_{response.code}")

    def _next(self, send: _Send) -> None:
        if send.times < self.times_total:
            self._attempt(send)
        else:
            self._finish(send)

    def _finish(self, send: _Send) -> None:
        if send.last_status is not None:
            self._sent(send, send.last_status)
        else:
            self._fail(send, "call_timeout" if send.call_timeout else f"failed_after_{send.times}_times")

    def _sent(self, send: _Send, status: str) -> None:
        msg, mq = send.msg, send.mq
        self.node._emit(self.node.name, PRODUCER_SENT, msg.uniq_key, msg.topic, send.shard, mq.broker_name,
                        mq.queue_id, status, send.times, msg.born_us)

    def _fail(self, send: _Send, reason: str) -> None:
        msg = send.msg
        self.node.trace(PRODUCER_SEND_FAILED, msg.uniq_key, msg.topic, send.shard, send.times,
                        reason, msg.born_us)
