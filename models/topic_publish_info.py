"""client.impl.producer.TopicPublishInfo, exact to 4.9.8 and 5.3.3: the publish queues of one topic route.

A producer's route of a topic (MQClientInstance.topicRouteData2TopicPublishInfo builds it,
models/client_instance.py): the publish queue list, the QueueData it came from, and
`sendWhichQueue`, the ThreadLocalIndex (models/thread_local_index.py) the selection increments.
The selection without fault tolerance is here (`selectOneMessageQueue`, 5.x with QueueFilters);
MQFaultStrategy (models/producer/fault_strategy.py) selects through it. Arithmetic is Java's
(models/java.py): a `%` by zero raises ZeroDivisionError on an empty list, where Java throws
ArithmeticException (the producer checks `ok()` first, as `sendDefaultImpl` does).
"""

# compiled with Cython: the C declarations of this module's classes are in topic_publish_info.pxd beside it

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from models.java import RandomSource, java_abs_int, java_rem
from models.message import MessageQueue
from models.perm_name import PERM_READ, PERM_WRITE, is_writeable
from models.thread_local_index import ThreadLocalIndex
from models.version import V4, V5, check_version


class QueueData(NamedTuple):
    """The fields of route.QueueData (4.9.8 common.protocol.route, 5.3.3 remoting.protocol.route;
    the route's own is models/protocol.py's QueueData) that selection reads; `perm` defaults to
    PermName.PERM_READ | PERM_WRITE."""

    broker_name: str
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE


QueueFilter = Callable[[MessageQueue], bool]  # TopicPublishInfo.QueueFilter (5.x)


class TopicPublishInfo:
    """client.impl.producer.TopicPublishInfo: the publish queue list of one topic route, its
    QueueData (`topicRouteData.getQueueDatas()`) and `sendWhichQueue`, a ThreadLocalIndex whose
    stored value is `send_which_queue`.

    `client_version` None (the default) means: adopt the version of the first MQFaultStrategy
    that selects from it (a route's TopicPublishInfo belongs to one producer); until then the
    index follows the 5.x rules. Every route change builds a new TopicPublishInfo in Java, so a new
    random start: build a new one here too, with the producer's stream as `rng`."""

    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("client_version", "message_queue_list", "queue_datas", "send_which_queue_index")

    def __init__(self, message_queue_list: Iterable[MessageQueue], queue_datas: Iterable[QueueData] = (), *,
                 send_which_queue: int | None = None, rng: RandomSource | None = None,
                 client_version: str | None = None) -> None:
        self.message_queue_list: list[MessageQueue] = list(message_queue_list)
        self.queue_datas: list[QueueData] = list(queue_datas)
        self.client_version = None if client_version is None else check_version(client_version)
        self.send_which_queue_index = ThreadLocalIndex(client_version or V5, send_which_queue, rng)

    @property
    def send_which_queue(self) -> int | None:
        return self.send_which_queue_index.value

    @send_which_queue.setter
    def send_which_queue(self, value: int | None) -> None:
        self.send_which_queue_index.value = value

    def adopt_version(self, client_version: str) -> None:
        if self.client_version is None:
            self.client_version = self.send_which_queue_index.client_version = check_version(client_version)
        elif self.client_version != client_version:
            raise ValueError(f"a {self.client_version} TopicPublishInfo used by a {client_version} MQFaultStrategy")

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """selectOneMessageQueue(lastBrokerName) / selectOneMessageQueue() (same in both tags).

        No last broker: one increment, `list[index % size]`. Else up to `size` increments looking
        for a queue on another broker, then one more plain selection."""
        if last_broker_name is not None:
            for _ in range(len(self.message_queue_list)):
                mq = self._plain()
                if mq.broker_name != last_broker_name:
                    return mq
        return self._plain()

    def _plain(self) -> MessageQueue:
        index = self.send_which_queue_index.increment_and_get()
        # 4.9.8: Math.abs(index) % size, pos < 0 -> 0; 5.3.3: index % size. `index` is never
        # negative (masked), so both are the same number.
        pos = java_rem(java_abs_int(index), len(self.message_queue_list))
        return self.message_queue_list[max(pos, 0)]

    def select_one_message_queue_filtered(self, *filters: QueueFilter) -> MessageQueue | None:
        """5.3.3 selectOneMessageQueue(QueueFilter...): None for an empty list; with filters, up to
        `size` increments, each `list[abs(index % size)]`, returning the first queue every filter
        accepts, else None; without filters, one plain selection."""
        if self.client_version == V4:
            raise TypeError("TopicPublishInfo has no QueueFilter selection in 4.9.8")
        mqs = self.message_queue_list
        if not mqs:
            return None
        size = len(mqs)
        if filters:
            for _ in range(size):
                mq = mqs[java_abs_int(java_rem(self.send_which_queue_index.increment_and_get(), size))]
                if all([f(mq) for f in filters]):  # Java evaluates every filter (`&=`)
                    return mq
            return None
        return mqs[java_abs_int(java_rem(self.send_which_queue_index.increment_and_get(), size))]

    def reset_index(self) -> None:
        """5.3.3 resetIndex(): the index re-randomised (ThreadLocalIndex.reset)."""
        self.send_which_queue_index.reset()

    def get_queue_id_by_broker(self, broker_name: str | None) -> int:
        """4.9.8 getQueueIdByBroker: writeQueueNums of the first *writable* QueueData of the broker, else -1."""
        for qd in self.queue_datas:
            if is_writeable(qd.perm) and qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    def get_write_queue_nums_by_broker(self, broker_name: str | None) -> int:
        """5.3.3 getWriteQueueNumsByBroker: like 4.9.8's, without the permission check (unused by selection)."""
        for qd in self.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1

    def __repr__(self) -> str:
        return (f"TopicPublishInfo(queues={len(self.message_queue_list)}, "
                f"send_which_queue={self.send_which_queue}, client_version={self.client_version!r})")
