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

from models.message import Message, MessageQueue
from models.producer.config import ROUTE_POLL_INITIAL_DELAY_US, ProducerConfig
from models.producer.publish_info import TopicPublishInfo
from models.protocol import (
    RETRY_RESPONSE_CODES,
    SEND_OK,
    SEND_STATUS_BY_CODE,
    SUCCESS,
    GetRouteInfo,
    TopicRouteData,
    new_send_message,
)
from models.records import PRODUCER_ROUTE_UPDATED, PRODUCER_SEND_FAILED, PRODUCER_SENT
from sim.env import ms
from sim.node import CONNECT_FAILED, Node
from sim.trace import DIGEST_CHUNK


class Producer:
    """One producer client process. A send in flight carries its state in the RPC continuation's
    arguments — `(msg, mq, times, last_status)` — instead of an object per send."""

    def __init__(self, env: Any, name: str, zone: str, cfg: ProducerConfig, namesrvs: list[str],
                 topics: list[str], send_mode: str = "SYNC") -> None:
        self.node = node = Node(env, name, zone)
        self.name = name
        self._chunk = node._chunk
        self.cfg = cfg
        self.namesrvs = namesrvs
        self.topics = topics
        self.oneway = send_mode == "ONEWAY"
        self.publish: dict[str, TopicPublishInfo] = {}  # topicPublishInfoTable (heap)
        self.index_stream = env.rng.stream(f"{name}.send_which_queue")
        self.timeout_us = ms(cfg.send_msg_timeout_ms)
        self.times_total = 1 + cfg.retry_times_when_send_failed
        self._waiting_route: dict[str, list[tuple]] = {}
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
        self.node.rpc(namesrv, GetRouteInfo(topic), ms(self.cfg.mq_client_api_timeout_ms), self.on_route, topic)

    def on_route(self, topic: str, route: Any) -> None:
        if isinstance(route, TopicRouteData):
            current = self.publish.get(topic)
            if current is None or current.route != route:
                self.publish[topic] = TopicPublishInfo(route, self.index_stream)
                self.node.trace(PRODUCER_ROUTE_UPDATED, topic, len(self.publish[topic].queues))
        for attempt in self._waiting_route.pop(topic, []):
            self.send(*attempt, route_fetched=True)

    # --- send (sendDefaultImpl) -----------------------------------------------------------------
    def send(self, msg: Message, mq: MessageQueue | None = None, times: int = 0, last_status: str | None = None,
             route_fetched: bool = False) -> None:
        """One attempt of sendDefaultImpl (the first, with the defaults; `_next` makes the others)."""
        info = self.publish.get(msg.topic)
        if info is None or not info.queues:
            if route_fetched:
                return self._fail(msg, times, "no_route_info")
            waiting = self._waiting_route.setdefault(msg.topic, [])
            waiting.append((msg, mq, times, last_status))
            if len(waiting) == 1:
                self.fetch_route(msg.topic)
            return None
        cost = self.node.env._now - msg.born_us
        if cost >= self.timeout_us:  # no budget left: callTimeout, no further attempt
            return self._finish(msg, mq, times, last_status, call_timeout=True)
        mq = info.select(mq.broker_name if mq is not None else None)
        times += 1
        addr = info.master_addr.get(mq.broker_name)
        if addr is None:
            return self._next(msg, mq, times, last_status)
        request = new_send_message((msg, mq.queue_id))
        if self.oneway:
            self.node.send(addr, request)
            return self._sent(msg, mq, times, "ONEWAY")
        self.node.rpc(addr, request, self.timeout_us - cost, self._on_response, msg, mq, times, last_status)
        return None

    def _on_response(self, msg: Message, mq: MessageQueue, times: int, last_status: str | None,
                     response: Any) -> None:
        if response is None or response is CONNECT_FAILED:
            return self._next(msg, mq, times, last_status)
        if response.code == SUCCESS:  # SEND_OK: the hot path, `_sent` inlined
            chunk = self._chunk
            chunk.append((self.node.env._now, self.name, PRODUCER_SENT, msg.msg_id, msg.topic, msg.shard,
                          mq.broker_name, mq.queue_id, SEND_OK, times, msg.born_us))
            if len(chunk) >= DIGEST_CHUNK:
                self.node._flush()
            return None
        status = SEND_STATUS_BY_CODE.get(response.code)
        if status is not None:  # stored, but not flushed / replicated in time
            if self.cfg.retry_another_broker_when_not_store_ok:
                return self._next(msg, mq, times, status)
            return self._sent(msg, mq, times, status)
        if response.code in RETRY_RESPONSE_CODES:
            return self._next(msg, mq, times, last_status)
        if last_status is not None:
            return self._sent(msg, mq, times, last_status)
        return self._fail(msg, times, f"broker_code_{response.code}")

    def _next(self, msg: Message, mq: MessageQueue, times: int, last_status: str | None) -> None:
        if times < self.times_total:
            self.send(msg, mq, times, last_status)
        else:
            self._finish(msg, mq, times, last_status)

    def _finish(self, msg: Message, mq: MessageQueue | None, times: int, last_status: str | None,
                call_timeout: bool = False) -> None:
        if last_status is not None and mq is not None:
            self._sent(msg, mq, times, last_status)
        else:
            self._fail(msg, times, "call_timeout" if call_timeout else f"failed_after_{times}_times")

    def _sent(self, msg: Message, mq: MessageQueue, times: int, status: str) -> None:
        self.node._emit(self.node.name, PRODUCER_SENT, msg.msg_id, msg.topic, msg.shard, mq.broker_name,
                        mq.queue_id, status, times, msg.born_us)

    def _fail(self, msg: Message, times: int, reason: str) -> None:
        self.node.trace(PRODUCER_SEND_FAILED, msg.msg_id, msg.topic, msg.shard, times, reason, msg.born_us)
