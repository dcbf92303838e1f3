"""broker.longpolling.PopLongPollingService: POP requests that found nothing wait (5.3.3).

A pop with `pollTime` > 0 that found nothing is parked under (topic, group) — the queue id of the
request is -1 here: the clients pop every queue of a broker — at most `popPollingSize` (1024) per
key (beyond: POLLING_FULL). It is run again (a) when the reput dispatches new messages into a
queue of the topic (NotifyMessageArrivingListener → notifyMessageArriving: one request per group
subscribed to the topic, the one parked first), (b) when an orderly queue unblocks, or (c) when
its pollTime runs out: then it is answered even if still empty (POLLING_TIMEOUT). A woken request
that still finds nothing is parked again until its own deadline. Parked requests are heap state: a
broker crash loses them and the client's RPC timeout fires.

Dead channels (5.3.3 pollRemotingCommands, wakeUp): a request whose client connection is no longer
active is dropped unanswered when it is woken — a message arriving passes it by for the next one
parked, its deadline drops it — so messages born after a POP consumer died are not handed to its
parked pops (which would leave them invisible until their invisible time ran out). The broker learns
that the connection closed when the client process dies (the OS closes the socket, one network
latency later: sim/network.py `watch`); a client whose host lost power is not seen to go (its
connection stays active, as Netty's does until the idle check). A request the LOCAL-mode proxy
parked for a SimpleConsumer (`proxy`) is on the proxy's in-process channel (SimpleChannel, active
while used within 120 s), so it is woken and popped as usual; the proxy's write of the result to
the client's gRPC stream, cancelled when the client died, then fails at its first write (the
status), before any message: processThrowableWhenWriteMessage — which would put each message's
invisible time back to 1 s — is reached only when a write fails after the status went out, which the
model, whose writes take no time, does not have. So a dead SimpleConsumer's parked receive still
takes messages, which wait out their invisible time (pop_message_processor.py).

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
        # client → how many of its connections to this broker have closed: a parked entry keeps the count
        # of its park, and its channel is active while the count has not moved (kept across a broker
        # crash: the broker's own restart gives every client a new connection, and no parked entry survives)
        self.closed_channels: dict[str, int] = {}
        self.node.on_crash(self.held.clear)

    def park(self, src: str, req_id: int, req: PopMessage, deadline_us: int) -> bool:
        """False if the key is full (POLLING_FULL)."""
        if not self._listening:  # the reput listener is added with the first parked pop only
            self.broker.reput.listeners.append(self.notify_message_arriving)
            self._listening = True
        waiting = self.held.setdefault(req.topic, {}).setdefault(req.group, deque())
        if len(waiting) >= POP_POLLING_SIZE:
            return False
        if src not in self.closed_channels:  # NettyServerHandler: the broker hears the client's socket close
            self.closed_channels[src] = 0
            self.node.env.network.watch(self.node, src, self._channel_closed)
        entry = [src, req_id, req, deadline_us, None, self.closed_channels[src]]
        entry[4] = self.node.timer(max(0, deadline_us - self.node.env.clock.now_us), self._expired, entry)
        waiting.append(entry)
        return True

    def _channel_closed(self, client: str) -> None:
        self.closed_channels[client] = self.closed_channels.get(client, 0) + 1

    def channel_active(self, entry: list) -> bool:
        """ctx.channel().isActive() for a parked entry: the proxy's in-process channel always is."""
        return entry[2].proxy or entry[5] == self.closed_channels.get(entry[0], 0)

    def notify_message_arriving(self, cq: ConsumeQueue) -> None:
        by_group = self.held.get(cq.topic)
        if by_group:
            for group in list(by_group):
                self.wake(cq.topic, group)

    def wake(self, topic: str, group: str) -> None:
        """Run the group's first parked request whose channel is still active again; those parked
        before it on dead channels are dropped (pollRemotingCommands)."""
        waiting = self.held.get(topic, {}).get(group)
        while waiting:
            entry = waiting.popleft()
            entry[4].cancel()
            if self.channel_active(entry):
                self.run(entry[0], entry[1], entry[2], entry[3])
                return

    def _expired(self, entry: list) -> None:
        """The request's pollTime ran out (the service's timeout scan): wakeUp, which drops it
        unanswered if its channel is no longer active."""
        waiting = self.held.get(entry[2].topic, {}).get(entry[2].group)
        if waiting is None or entry not in waiting:
            return
        waiting.remove(entry)
        if self.channel_active(entry):
            self.run(entry[0], entry[1], entry[2], entry[3])
