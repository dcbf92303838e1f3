"""Network: a networkx graph of nodes and TCP-like links.

Each directed link (src, dst) is **FIFO**, as RocketMQ's remoting runs over TCP connections:
a message is delivered at `max(now + latency, previous delivery on the link)`. Latency is drawn
from the link's distribution (per-link override, else per zone pair, else the default) with one
random stream per directed link, so adding a node never changes another link's draws.

Modelling choices:
- Packet loss on TCP is not message loss: a lost segment is retransmitted after the RTO
  (`TCP_RTO_MIN_US`, Linux's 200 ms), doubling for each consecutive loss; the message arrives late.
- A partition cuts links; whatever is in flight on a cut link is lost (a connection reset) and
  sends on it are dropped. Callers notice only through their RPC timeouts.
- Sends to a node that is down, and messages in flight to a node that crashes, are dropped
  (traced as `net.dropped`): a crash resets every connection into the node (bumps the links'
  generation), so an arrival needs only compare its link's generation. If the host is up but the process is not (crashed, or still
  booting after a restart) a request is refused: the caller gets CONNECT_FAILED after a round
  trip, as a TCP RST. After a power loss nothing answers, and the caller waits for its timeout.
- When a *process* dies, its peers' TCP connections are closed by the OS at once (RST/FIN):
  their outstanding requests to it fail with CONNECT_FAILED, and `watch()` lets a model react (NameServer unregistering a broker, a broker dropping a
  consumer channel). A power loss or a partition closes nothing: peers find out by expiry.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import networkx as nx
from simpy.core import NORMAL

from sim import trace
from sim.dist import Constant
from sim.node import CONNECT_FAILED

TCP_RTO_MIN_US = 200_000  # Linux TCP_RTO_MIN
TCP_RTO_MAX_US = 120_000_000  # Linux TCP_RTO_MAX


class Link:
    """One direction of a TCP connection, and the owner of the deliveries in flight on it: a
    delivery is a heap entry `(t, NORMAL, eid, link, epoch, fn, args)` (sim/env.py), dropped if
    the connection was reset since (`epoch` bumped by a partition or the receiver's crash) and
    deferred while the receiver is paused (`paused_until` mirrors the receiving node's)."""

    __slots__ = ("src", "dst", "dst_node", "handlers", "response", "dist", "stream", "latencies_us",
                 "_next_block", "last_delivery_us", "epoch", "paused_until", "on_drop", "reset_reason",
                 "cut", "_extra", "_loss_probability", "impaired")

    def __init__(self, src: str, dst_node: Any, dist: Any, stream: Any, on_drop: Callable[[tuple], None]) -> None:
        self.src, self.dst, self.dst_node, self.stream = src, dst_node.name, dst_node, stream
        self.handlers = dst_node.handlers  # request handlers by payload type
        self.response = dst_node.response_arrived  # bound once: the continuation of every response
        self.set_dist(dist)
        self.last_delivery_us = 0
        self.epoch = 0  # bumped by every connection reset (partition, receiver crash)
        self.paused_until = dst_node.paused_until
        self.on_drop = on_drop
        self.reset_reason = ""
        self.cut = False
        self._extra: Any = None
        self._loss_probability = 0.0
        self.impaired = False  # extra latency or loss set: the slow path of `send`

    @property
    def generation(self) -> int:
        """The connection's incarnation (= `epoch`)."""
        return self.epoch

    @property
    def extra(self) -> Any:
        """Extra latency Dist added to every message (link_latency fault), or None."""
        return self._extra

    @extra.setter
    def extra(self, dist: Any) -> None:
        self._extra = dist
        self._update_impaired()

    @property
    def loss_probability(self) -> float:
        """Probability that a segment is lost and retransmitted (packet_loss fault)."""
        return self._loss_probability

    @loss_probability.setter
    def loss_probability(self, probability: float) -> None:
        self._loss_probability = probability
        self._update_impaired()

    def _update_impaired(self) -> None:
        self.impaired = self._extra is not None or self._loss_probability > 0

    def set_dist(self, dist: Any) -> None:
        self.dist = dist
        self._next_block = dist.block_sampler(self.stream, 1000)
        self.latencies_us: list[int] = []  # upcoming latency draws, next one last (`send` pops)

    def sample_us(self) -> int:
        """The link's next latency draw."""
        if not self.latencies_us:
            self.latencies_us = self._next_block()
        return self.latencies_us.pop()


class Network:
    def __init__(self, env: Any, default_latency: Any = None) -> None:
        self.env = env
        self.graph = nx.DiGraph()
        self.nodes: dict[str, Any] = {}
        self.default_latency = default_latency or Constant(value=0.5)
        self.zone_latency: dict[tuple[str, str], Any] = {}
        self.links: dict[tuple[str, str], Link] = {}
        self._watchers: dict[str, list[tuple[Any, Callable[[str], None]]]] = {}
        self._emit = env.tracer.emit
        self._queue, self._eid = env._queue, env._eid  # the event heap
        env.network = self

    def add_node(self, node: Any) -> None:
        if node.name in self.nodes:
            raise ValueError(f"node {node.name!r} added twice")
        self.nodes[node.name] = node
        self.graph.add_node(node.name, zone=node.zone)

    def set_zone_latency(self, zone_a: str, zone_b: str, dist: Any) -> None:
        self.zone_latency[(zone_a, zone_b)] = dist
        self.zone_latency[(zone_b, zone_a)] = dist

    def set_link_latency(self, src: str, dst: str, dist: Any) -> None:
        self.graph.add_edge(src, dst, latency=dist)
        self.link(src, dst).set_dist(dist)

    def link(self, src: str, dst: str) -> Link:
        key = (src, dst)
        link = self.links.get(key)
        if link is None:
            link = Link(src, self.nodes[dst], self._latency_for(src, dst),
                        self.env.rng.stream(f"net.{src}->{dst}"), self.dropped_in_flight)
            self.links[key] = link
            if not self.graph.has_edge(src, dst):
                self.graph.add_edge(src, dst, latency=link.dist)
        return link

    def _latency_for(self, src: str, dst: str) -> Any:
        edge = self.graph.get_edge_data(src, dst)
        if edge and "latency" in edge:
            return edge["latency"]
        zones = (self.nodes[src].zone, self.nodes[dst].zone)
        return self.zone_latency.get(zones, self.default_latency)

    # --- traffic ----------------------------------------------------------------------------
    def transmit(self, src_node: Any, dst: str, req_id: int, payload: Any, response: bool = False) -> None:
        """Send one message from `src_node` to `dst`: a request (`req_id` > 0) or oneway message
        (0) goes to the receiver's handler for its payload type, a response to the receiver's
        continuation for `req_id`."""
        link = src_node.out_links.get(dst)
        if link is None:
            link = src_node.out_links[dst] = self.link(src_node.name, dst)
        if link.cut or not link.dst_node.serving:
            self._undeliverable(src_node, link, req_id, payload, response)
            return
        latencies = link.latencies_us
        arrive = self.env._now + (latencies.pop() if latencies else link.sample_us())
        if link.impaired:
            if link.extra is not None:
                arrive += link.extra.sample_us(link.stream)
            if link.loss_probability:
                arrive += self._retransmit_delay_us(link)
        if arrive < link.last_delivery_us:
            arrive = link.last_delivery_us
        link.last_delivery_us = arrive
        if response:
            fn, args = link.response, (req_id, payload)
        else:
            fn = link.handlers.get(type(payload))
            if fn is None:
                raise TypeError(f"{link.dst} has no handler for {type(payload).__name__}")
            args = (link.src, req_id, payload)
        heappush(self._queue, (arrive, NORMAL, next(self._eid), link, link.epoch, fn, args))  # = env.push

    def transmit_response(self, src_node: Any, dst: str, req_id: int, payload: Any) -> None:
        """`transmit` of a response (none for a oneway message: `req_id` 0)."""
        if req_id:
            self.transmit(src_node, dst, req_id, payload, True)

    def _undeliverable(self, src_node: Any, link: Link, req_id: int, payload: Any, response: bool) -> None:
        dst_node = link.dst_node
        reason = "partition" if link.cut else ("down" if not dst_node.host_up else "refused")
        self._emit(src_node.name, trace.NET_DROPPED, src_node.name, dst_node.name, type(payload).__name__, reason)
        if reason == "refused" and req_id and not response:  # a request: RST comes back after a round trip
            src_node.call_later(2 * link.sample_us(), src_node.response_arrived, req_id, CONNECT_FAILED)

    def _retransmit_delay_us(self, link: Link) -> int:
        delay, rto = 0, TCP_RTO_MIN_US
        while link.stream.random() < link.loss_probability and rto <= TCP_RTO_MAX_US:
            delay += rto
            rto *= 2
        return delay

    def dropped_in_flight(self, entry: tuple) -> None:
        """A delivery (a heap entry, sim/env.py) found its connection reset (partition or
        receiver crash); its payload is the last argument."""
        link = entry[3]
        self._emit(link.src, trace.NET_DROPPED, link.src, link.dst, type(entry[6][-1]).__name__, link.reset_reason)

    def reset(self, link: Link, reason: str) -> None:
        """Reset the connection: whatever is in flight on it is lost."""
        link.epoch += 1
        link.reset_reason = reason

    def paused(self, node: Any) -> None:
        """`node` paused or resumed: deliveries to it wait as its timers do."""
        for link in self.links.values():
            if link.dst_node is node:
                link.paused_until = node.paused_until

    # --- connection watching ----------------------------------------------------------------
    def watch(self, observer: Any, target: str, on_closed: Callable[[str], None]) -> None:
        """Call `on_closed(target)` at `observer` when target's process dies (not power loss)."""
        entries = self._watchers.setdefault(target, [])
        if all(o is not observer or f != on_closed for o, f in entries):
            entries.append((observer, on_closed))

    def unwatch(self, observer: Any, target: str) -> None:
        entries = self._watchers.get(target, [])
        self._watchers[target] = [(o, f) for o, f in entries if o is not observer]

    def node_crashed(self, node: Any, power_loss: bool) -> None:
        for link in self.links.values():  # insertion order: deterministic
            if link.dst_node is node:
                self.reset(link, "down")
        if power_loss:
            return
        for peer in self.nodes.values():  # insertion order: deterministic
            if peer is not node and peer.up:
                link = self.link(node.name, peer.name)
                if not link.cut:
                    peer.fail_requests_to(link, link.sample_us())
        for observer, on_closed in self._watchers.get(node.name, []):
            link = self.link(node.name, observer.name)
            if link.cut or not observer.up:
                continue
            delay = link.sample_us()
            observer.call_later(delay, on_closed, node.name)

    # --- faults -----------------------------------------------------------------------------
    def cut(self, src: str, dst: str) -> None:
        link = self.link(src, dst)
        if not link.cut:
            link.cut = True
            self.reset(link, "reset")  # in-flight data on this connection is lost

    def partition(self, groups: list[list[str]], one_way: bool = False) -> None:
        """Cut every link between different groups (only first group → others if one_way)."""
        for i, group in enumerate(groups):
            for j, other in enumerate(groups):
                if i == j or (one_way and i != 0):
                    continue
                for src in group:
                    for dst in other:
                        self.cut(src, dst)

    def heal(self) -> None:
        for link in self.links.values():
            link.cut = False

    def reset_link_faults(self) -> None:
        for link in self.links.values():
            link.extra = None
            link.loss_probability = 0.0
