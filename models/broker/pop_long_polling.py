"""broker.longpolling.PopLongPollingService: POP requests that found nothing wait (5.3.3).

A pop with `pollTime` > 0 that found nothing is parked under (topic, group) — the queue id of the
request is -1 here: the clients pop every queue of a broker — at most `popPollingSize` (1024) per
key (beyond: POLLING_FULL). It is run again (a) when the reput dispatches new messages into a
queue of the topic (NotifyMessageArrivingListener → notifyMessageArriving: one request per group
subscribed to the topic, the one parked first), (b) when an orderly queue unblocks, or (c) when
its pollTime runs out: then it is answered even if still empty (POLLING_TIMEOUT). A woken request
that still finds nothing is parked again until its own deadline. Parked requests are heap state: a
broker crash loses them and the client's RPC timeout fires.

What a V1 retry topic (`%RETRY%<group>_<topic>`) receives wakes nobody (5.3.3 maps only V2 names
back to their topic): a revived message waits for the group's next pop. Simplified: the tags of
the arrived messages are not checked before waking (5.3.3 checks them unless `offset % 800 == 0`),
and the service's 20 ms tick is not modelled (a deadline fires on time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from models.broker.consume_queue import ConsumeQueue
from models.protocol import PopMessage

if TYPE_CHECKING:  # broker.py builds this service (through pop_message_processor.py): annotations only
    from models.broker.broker import Broker

POP_POLLING_SIZE = 1024  # BrokerConfig.popPollingSize


class PopLongPollingService:
    """Parked POP requests (module docstring); `run(src, req_id, req, deadline_us)` re-runs one."""

    def __init__(self, broker: Broker, run: Callable[[str, int, PopMessage, int], None]) -> None:
        self.broker = broker
        self.node = broker.node
        self.run = run
        self.held: dict[str, dict[str, deque]] = {}  # topic → group → parked entries, first parked first
        self._listening = False
        self.node.on_crash(self.held.clear)

    def park(self, src: str, req_id: int, req: PopMessage, deadline_us: int) -> bool:
        """False if the key is full (POLLING_FULL)."""
        if not self._listening:  # the reput listener is added with the first parked pop only
            self.broker.reput.listeners.append(self.notify_message_arriving)
            self._listening = True
        waiting = self.held.setdefault(req.topic, {}).setdefault(req.group, deque())
        if len(waiting) >= POP_POLLING_SIZE:
            return False
        entry = [src, req_id, req, deadline_us, None]
        entry[4] = self.node.timer(max(0, deadline_us - self.node.env.clock.now_us), self._expired, entry)
        waiting.append(entry)
        return True

    def notify_message_arriving(self, cq: ConsumeQueue) -> None:
        by_group = self.held.get(cq.topic)
        if by_group:
            for group in list(by_group):
                self.wake(cq.topic, group)

    def wake(self, topic: str, group: str) -> None:
        """Run the group's first parked request again."""
        waiting = self.held.get(topic, {}).get(group)
        if not waiting:
            return
        entry = waiting.popleft()
        entry[4].cancel()
        self.run(entry[0], entry[1], entry[2], entry[3])

    def _expired(self, entry: list) -> None:
        waiting = self.held.get(entry[2].topic, {}).get(entry[2].group)
        if waiting is None or entry not in waiting:
            return
        waiting.remove(entry)
        self.run(entry[0], entry[1], entry[2], entry[3])
