"""client.impl.producer.TopicPublishInfo + common.ThreadLocalIndex (5.x), fault tolerance off.

The publish list is (brokerName asc, queueId asc) over writable QueueData whose broker group has
a master (`topicRouteData2TopicPublishInfo`). Every route change builds a new TopicPublishInfo
and so a fresh random start for the index. With `lastBrokerName` set (a retry), up to `size`
probes look for a queue on another broker, then one plain selection.
"""

from __future__ import annotations

import random

from models.message import MessageQueue
from models.protocol import TopicRouteData

PERM_WRITE = 2  # PermName.PERM_WRITE


def publish_queues(route: TopicRouteData) -> list[MessageQueue]:
    masters = {b.broker_name for b in route.broker_datas if any(i == 0 for i, _ in b.addrs)}
    out = []
    for qd in sorted(route.queue_datas):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            out.extend(MessageQueue(route.topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return out


class ThreadLocalIndex:
    """5.x: starts at random.nextInt() (may be negative); returns (v+1) & 0x7FFFFFFF."""

    def __init__(self, stream: random.Random) -> None:
        self.value = stream.getrandbits(32) - (1 << 31)

    def increment_and_get(self) -> int:
        v = self.value + 1
        if v > 0x7FFFFFFF:
            v -= 1 << 32
        self.value = v
        return v & 0x7FFFFFFF


class TopicPublishInfo:
    def __init__(self, route: TopicRouteData, stream: random.Random) -> None:
        self.route = route
        self.queues = publish_queues(route)
        self.index = ThreadLocalIndex(stream)
        self.master_addr = {b.broker_name: dict(b.addrs).get(0) for b in route.broker_datas}

    def select(self, last_broker: str | None) -> MessageQueue:
        queues, size = self.queues, len(self.queues)
        if last_broker is None:  # every first attempt: ThreadLocalIndex.incrementAndGet inlined
            index = self.index
            v = index.value + 1
            if v > 0x7FFFFFFF:
                v -= 1 << 32
            index.value = v
            return queues[(v & 0x7FFFFFFF) % size]
        for _ in range(size):
            mq = queues[self.index.increment_and_get() % size]
            if mq.broker_name != last_broker:
                return mq
        return queues[self.index.increment_and_get() % size]
