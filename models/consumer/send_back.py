"""DefaultMQPushConsumerImpl.sendMessageBack and sendMessageBackAsNormalMessage (5.3.3).

A failed (or expired) message goes back to the broker in two steps:

1. CONSUMER_SEND_MSG_BACK (5 s timeout) to the master of the broker the message was pulled from;
   the broker looks the message up by its CommitLog offset and re-stores it in `%RETRY%<group>`
   (or `%DLQ%<group>`), reading the reconsume count from the *stored* message (models/broker).
2. If that fails (timeout, connection refused, error code, no master address), the client sends
   a new message to `%RETRY%<group>` through the client instance's inner producer
   (CLIENT_INNER_PRODUCER): same body and uniq key, `RETRY_TOPIC` = the original topic,
   `ORIGIN_MESSAGE_ID`, `RECONSUME_TIME` = reconsumeTimes + 1, `MAX_RECONSUME_TIMES`, delay level
   3 + reconsumeTimes. The broker's handleRetryAndDLQ sends it to the DLQ when RECONSUME_TIME
   exceeds the maximum.

Only when both fail does the caller fall back (the concurrent service's 5 s local
resubmission). The inner producer is a DefaultMQProducer with the defaults (3 s timeout, 2
retries on another broker, fault tolerance off), selecting over the retry topic's route as the
consumer knows it (the retry topic is subscribed in CLUSTERING; a BROADCASTING consumer has no
route for it, so its fallback fails). Simplified: the consume thread is not held by the
synchronous calls; the inner producer's route is the consumer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.consumer.config import (
    INNER_PRODUCER_RETRY_TIMES,
    INNER_PRODUCER_SEND_TIMEOUT_US,
    SEND_BACK_TIMEOUT_US,
)
from models.coverage_points import COV_SEND_BACK_RESENT_BY_INNER_PRODUCER
from models.message import (
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    MessageExt,
    new_message,
    record_bytes,
    retry_topic,
)
from models.perm_name import PERM_WRITE
from models.protocol import SUCCESS, ConsumerSendMsgBack, SendMessage
from models.records import CONSUMER_RESENT_AS_NORMAL, CONSUMER_SENT_BACK
from sim.node import CONNECT_FAILED

PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"  # MessageConst


def _ok(response: Any) -> bool:
    return response is not None and response is not CONNECT_FAILED and response.code == SUCCESS


class SendBack:
    def __init__(self, consumer: Any, max_reconsume_times: int) -> None:
        self.consumer = consumer
        self.node = consumer.node
        self.cov = consumer.node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.group = consumer.group
        self.max_reconsume_times = max_reconsume_times
        self.retry_topic = retry_topic(consumer.group)
        self.stream = self.node.env.rng.stream(f"{self.node.name}.inner_producer")
        self._index = self.stream.getrandbits(31)  # ThreadLocalIndex: a random start

    def send(self, mq: Any, msg: MessageExt, delay_level: int, done: Callable[[bool], None]) -> None:
        """sendMessageBack(msg, delayLevel, brokerName): `done(True)` once a copy is stored."""
        addr = self.consumer.client.find_broker_address_in_publish(mq.broker_name)  # the master
        if addr is None:
            self.cov[COV_SEND_BACK_RESENT_BY_INNER_PRODUCER] += 1
            self.send_as_normal(msg, done)
            return
        origin = msg.topic if msg.props is None else msg.user_topic
        request = ConsumerSendMsgBack(self.group, msg.phys_offset, msg.msg_id, origin, delay_level,
                                      self.max_reconsume_times)
        self.node.rpc(addr, request, SEND_BACK_TIMEOUT_US, self._sent_back, msg, done)

    def _sent_back(self, msg: MessageExt, done: Callable[[bool], None], response: Any) -> None:
        ok = _ok(response)
        self.node.trace(CONSUMER_SENT_BACK, self.group, msg.msg_id, msg.reconsume_times, ok)
        if ok:
            done(True)
        else:
            self.cov[COV_SEND_BACK_RESENT_BY_INNER_PRODUCER] += 1
            self.send_as_normal(msg, done)

    # --- sendMessageBackAsNormalMessage through the inner producer ------------------------------
    def _queues(self) -> list[tuple[str, int]]:
        """The retry topic's publish list (brokerName, queueId), over writable queues of broker
        groups with a master, as topicRouteData2TopicPublishInfo builds it."""
        route = self.consumer.client.topic_route_table.get(self.retry_topic)
        if route is None:
            return []
        masters = {b.broker_name for b in route.broker_datas if any(i == 0 for i, _ in b.addrs)}
        return [(qd.broker_name, i) for qd in sorted(route.queue_datas)
                if qd.perm & PERM_WRITE and qd.broker_name in masters for i in range(qd.write_queue_nums)]

    def _select(self, queues: list[tuple[str, int]], last_broker: str | None) -> tuple[str, int]:
        """selectOneMessageQueue, fault tolerance off: round robin from a random start, avoiding
        the last attempt's broker where another exists."""
        for _ in range(len(queues)):
            self._index = (self._index + 1) & 0x7FFFFFFF
            queue = queues[self._index % len(queues)]
            if last_broker is None or queue[0] != last_broker:
                return queue
        self._index = (self._index + 1) & 0x7FFFFFFF
        return queues[self._index % len(queues)]

    def send_as_normal(self, msg: MessageExt, done: Callable[[bool], None]) -> None:
        props = dict(msg.props or {})
        props[PROPERTY_ORIGIN_MESSAGE_ID] = props.get(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        props[PROPERTY_RETRY_TOPIC] = msg.topic if msg.props is None else msg.user_topic
        props[PROPERTY_MAX_RECONSUME_TIMES] = self.max_reconsume_times
        topic, reconsume = self.retry_topic, msg.reconsume_times + 1
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, props, reconsume)
        new = new_message((msg.msg_id, topic, msg.tags, -1, msg.body_bytes, self.node.env._now, size, reconsume,
                           3 + msg.reconsume_times, props))
        self._attempt(new, None, 0, done)

    def _attempt(self, new: Any, last_broker: str | None, times: int, done: Callable[[bool], None]) -> None:
        queues = self._queues()
        cost = self.node.env._now - new.born_us
        if not queues or times > INNER_PRODUCER_RETRY_TIMES or cost >= INNER_PRODUCER_SEND_TIMEOUT_US:
            self.node.trace(CONSUMER_RESENT_AS_NORMAL, self.group, new.msg_id, new.reconsume_times, False)
            done(False)
            return
        broker, queue_id = self._select(queues, last_broker)
        addr = self.consumer.client.find_broker_address_in_publish(broker)
        if addr is None:
            self._attempt(new, broker, times + 1, done)
            return
        self.node.rpc(addr, SendMessage(new, queue_id), INNER_PRODUCER_SEND_TIMEOUT_US - cost, self._resent,
                      new, broker, times + 1, done)

    def _resent(self, new: Any, broker: str, times: int, done: Callable[[bool], None], response: Any) -> None:
        if _ok(response):
            self.node.trace(CONSUMER_RESENT_AS_NORMAL, self.group, new.msg_id, new.reconsume_times, True)
            done(True)
            return
        self._attempt(new, broker, times, done)
