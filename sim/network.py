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
  (traced as `net.dropped`). If the host is up but the process is not (crashed, or still
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
from sim.node import CONNECT_FAILED, REQUEST, RESPONSE

TCP_RTO_MIN_US = 200_000  # Linux TCP_RTO_MIN
TCP_RTO_MAX_US = 120_000_000  # Linux TCP_RTO_MAX


class Link:
    __slots__ = ("src", "dst", "dst_node", "arrive", "dist", "stream", "latencies_us", "_next_block",
                 "last_delivery_us", "generation", "cut", "_extra", "_loss_probability", "impaired")

    def __init__(self, src: str, dst_node: Any, dist: Any, stream: Any) -> None:
        self.src, self.dst, self.dst_node, self.stream = src, dst_node.name, dst_node, stream
        self.arrive = dst_node.arrive  # bound once: the delivery callback of every message
        self.set_dist(dist)
        self.last_delivery_us = 0
        self.generation = 0
        self.cut = False
        self._extra: Any = None
        self._loss_probability = 0.0
        self.impaired = False  # extra latency or loss set: the slow path of `send`

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
        self._queue, self._eid = env._queue, env._eid  # the event heap, for `send`
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
                        self.env.rng.stream(f"net.{src}->{dst}"))
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
    def send(self, src_node: Any, dst: str, envelope: tuple) -> None:
        link = src_node.out_links.get(dst)
        if link is None:
            link = src_node.out_links[dst] = self.link(src_node.name, dst)
        dst_node = link.dst_node
        if link.cut or not dst_node.serving:
            self._undeliverable(src_node, link, dst_node, envelope)
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
        heappush(self._queue, (arrive, NORMAL, next(self._eid),  # a bare (fn, args) entry: env.py
                               (link.arrive, (link, link.generation, dst_node.epoch, envelope))))

    def _undeliverable(self, src_node: Any, link: Link, dst_node: Any, envelope: tuple) -> None:
        reason = "partition" if link.cut else ("down" if not dst_node.host_up else "refused")
        self._emit(src_node.name, trace.NET_DROPPED, src_node.name, dst_node.name,
                   type(envelope[2]).__name__, reason)
        if reason == "refused" and envelope[0] == REQUEST:  # RST comes back after one round trip
            rtt = 2 * link.sample_us()
            back = self.link(dst_node.name, src_node.name)
            src_node.call_later(rtt, src_node.arrive, back, back.generation, src_node.epoch,
                                (RESPONSE, envelope[1], CONNECT_FAILED))

    def _retransmit_delay_us(self, link: Link) -> int:
        delay, rto = 0, TCP_RTO_MIN_US
        while link.stream.random() < link.loss_probability and rto <= TCP_RTO_MAX_US:
            delay += rto
            rto *= 2
        return delay

    def dropped_in_flight(self, link: Link, generation: int, envelope: tuple) -> None:
        """A message in flight on `link` found its connection reset or its receiver gone."""
        reason = "reset" if generation != link.generation else "down"
        self._emit(link.src, trace.NET_DROPPED, link.src, link.dst, type(envelope[2]).__name__,
                   reason)

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
            link.generation += 1  # in-flight data on this connection is reset

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
