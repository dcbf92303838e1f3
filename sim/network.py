"""Network: nodes and TCP-like links (each directed link's latency override in a plain dict).

Each directed link (src, dst) is **FIFO**, as RocketMQ's remoting runs over TCP connections:
a message is delivered at `max(now + latency, previous delivery on the link)`. Latency is drawn
from the link's distribution (per-link override, else per zone pair, else the default) with one
random stream per directed link, so adding a node never changes another link's draws.

Modelling choices:
- Packet loss on TCP is not message loss: a lost segment is retransmitted after the RTO
  (`TCP_RTO_MIN_US`, Linux's 200 ms), doubling for each consecutive loss; the message arrives late.
- A partition cuts links but not connections: TCP keeps what it could not deliver (what is sent
  into the partition, traced `net.held`; segments already on the wire when the link is cut
  still arrive) and retransmits it after the heal, at the sender's next retransmission (RTO 200 ms, doubling, each
  wait at most `TCP_RTO_MAX_US`), in order. Callers keep their own RPC timeouts: a request that
  arrives after its caller gave up is still processed (a send stored after a client timeout),
  and its late response is ignored. A connection that cannot deliver for `TCP_GIVE_UP_US`
  (tcp_retries2 = 15, about 15 minutes) is reset instead: held data is lost and the sender's
  requests on it fail.
- Sends to a node that is down, and messages in flight to a node that crashes, are dropped
  (traced as `net.dropped`): a crash resets every connection into the node (bumps the links'
  generation), so an arrival needs only compare its link's generation. If the host is up but
  the process is not (crashed, or still booting after a restart) a request is refused: the
  caller gets CONNECT_FAILED after a round trip, as a TCP RST.
- When a *process* dies, its peers' TCP connections are closed by the OS at once (RST/FIN):
  their outstanding requests to it fail with CONNECT_FAILED, and `watch()` lets a model react
  (NameServer unregistering a broker, a broker dropping a consumer channel).
- A host that loses power, or a process that dies while a partition hides its FIN, closes
  nothing: its peers keep their connections, now *stale* (the far end has forgotten them).
  Once the host is up again, the first segment a peer sends on a stale connection — a new
  request, or the retransmission of one sent while the host was down — is answered with a
  RST: the peer's client closes the channel and fails every request still pending on it at
  once (NettyRemotingClient's channel close → failFast), and its `watch()` callbacks run. So a
  pull held on a rebooted broker fails within seconds, not at its 30 s timeout. What the
  restarted node sends first opens a new connection of its own (`renew`): a peer's answers and
  pushes to it then travel on that one (a rebooted broker registering with its NameServer is
  answered, not reset).
"""

# compiled with Cython: the C declarations of this module's classes are in network.pxd beside it

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cython
from simpy.core import NORMAL

from sim import trace
from sim.dist import Constant
from sim.env import Clock, Owner
from sim.event_queue import heappush
from sim.node import CONNECT_FAILED, Node

TCP_RTO_MIN_US = 200_000  # Linux TCP_RTO_MIN
TCP_RTO_MAX_US = 120_000_000  # Linux TCP_RTO_MAX
TCP_RETRIES2 = 15  # net.ipv4.tcp_retries2: retransmissions before a connection is given up


def retransmission_at_us(first_sent_us: int, not_before_us: int) -> int:
    """The first retransmission of a segment sent at `first_sent_us` that happens at or after
    `not_before_us` (RTO from TCP_RTO_MIN_US, doubling, each wait capped at TCP_RTO_MAX_US),
    or -1 if TCP gives the connection up first (after TCP_RETRIES2 retransmissions)."""
    at, rto = first_sent_us, TCP_RTO_MIN_US
    for _ in range(TCP_RETRIES2):
        at += rto
        if at >= not_before_us:
            return at
        rto = min(2 * rto, TCP_RTO_MAX_US)
    return -1


TCP_GIVE_UP_US = sum(min(TCP_RTO_MIN_US << i, TCP_RTO_MAX_US) for i in range(TCP_RETRIES2 + 1))


class Link(Owner):
    """One direction of a TCP connection, and the owner of the deliveries in flight on it: a
    delivery is a heap entry `(t, NORMAL, eid, link, epoch, fn, args)` (sim/env.py), dropped if
    the connection was reset since (`epoch` bumped by the receiver's crash) and deferred while
    the receiver is paused (`paused_until` mirrors the receiving node's). `blocked` (cut, stale,
    `renew`: the first send of a restarted node, which replaces its peer's stale connection
    back, or a receiver that does not serve: `Network.serving_changed` keeps it current) sends a
    transmission down the slow path."""

    __slots__ = ("src", "dst", "dst_node", "handlers", "response", "dist", "stream", "latencies_us",
                 "_next_block", "last_delivery_us", "reset_reason",
                 "cut", "_extra", "_loss_probability", "impaired", "stale", "renew", "blocked",
                 "held", "held_since_us", "unacked_since_us")

    def __init__(self, src: str, dst_node: Any, dist: Any, stream: Any, on_drop: Callable[[tuple], None]) -> None:
        self.src, self.dst, self.dst_node, self.stream = src, dst_node.name, dst_node, stream
        self.handlers: dict[type, Any] = dst_node.handlers  # request handlers by payload type
        self.response = dst_node.response_arrived  # bound once: the continuation of every response
        self.set_dist(dist)
        self.last_delivery_us = 0
        self.epoch = 0  # bumped by every connection reset (partition, receiver crash)
        self.paused_until = dst_node.paused_until
        self.on_drop = on_drop
        self.reset_reason = ""
        self.cut = False
        self.stale = False  # the far end forgot this connection (reboot, or a FIN lost in a partition)
        self.renew = False  # restarted sender: its first send renews the stale reverse link
        self.blocked = not dst_node.serving  # cut, stale, renew or not serving: `transmit` takes the slow path
        self.held: list[tuple] = []  # (fn, args) TCP could not deliver through a partition, in order
        self.held_since_us = -1  # first send of the oldest held segment
        self.unacked_since_us = -1  # stale link: first segment lost to the host while it was down
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

    def update_blocked(self) -> None:
        self.blocked = self.cut or self.stale or self.renew or not self.dst_node.serving

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
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_eid", "_emit", "_queue", "_watchers", "clock", "default_latency", "env", "link_latency", "links",
                 "nodes", "zone_latency")

    def __init__(self, env: Any, default_latency: Any = None) -> None:
        self.env = env
        self.link_latency: dict[tuple[str, str], Any] = {}  # (src, dst) → its latency distribution
        self.nodes: dict[str, Any] = {}
        self.default_latency = default_latency or Constant(value=0.5)
        self.zone_latency: dict[tuple[str, str], Any] = {}
        self.links: dict[tuple[str, str], Link] = {}
        self._watchers: dict[str, list[tuple[Any, Callable[[str], None]]]] = {}
        self._emit = env.tracer.emit
        self._queue, self._eid = env._queue, env._eid  # the event heap
        self.clock: Clock = env.clock
        env.network = self

    def add_node(self, node: Any) -> None:
        if node.name in self.nodes:
            raise ValueError(f"node {node.name!r} added twice")
        self.nodes[node.name] = node

    def set_zone_latency(self, zone_a: str, zone_b: str, dist: Any) -> None:
        self.zone_latency[(zone_a, zone_b)] = dist
        self.zone_latency[(zone_b, zone_a)] = dist

    def set_link_latency(self, src: str, dst: str, dist: Any) -> None:
        self.link_latency[(src, dst)] = dist
        self.link(src, dst).set_dist(dist)

    def link(self, src: str, dst: str) -> Link:
        key = (src, dst)
        link = self.links.get(key)
        if link is None:
            link = Link(src, self.nodes[dst], self._latency_for(src, dst),
                        self.env.rng.stream(f"net.{src}->{dst}"), self.dropped_in_flight)
            self.links[key] = link
            back = self.links.get((dst, src))
            if back is not None and back.stale:
                link.renew = True
                link.update_blocked()
            self.link_latency.setdefault(key, link.dist)
        return link

    def _latency_for(self, src: str, dst: str) -> Any:
        dist = self.link_latency.get((src, dst))
        if dist is not None:
            return dist
        zones = (self.nodes[src].zone, self.nodes[dst].zone)
        return self.zone_latency.get(zones, self.default_latency)

    # --- traffic ----------------------------------------------------------------------------
    @cython.locals(link=Link, src_node=Node)
    def transmit(self, src_node: Any, response: bool, dst: str, req_id: int, payload: Any) -> None:
        """Send one message from `src_node` to `dst`: a request (`req_id` > 0) or oneway message
        (0) goes to the receiver's handler for its payload type, a `response` to the receiver's
        continuation for `req_id` (none to a oneway message: `req_id` 0). `response` comes
        second so that a node's `reply` is this method with both bound (sim/node.py)."""
        if response and not req_id:
            return
        link = src_node.out_links.get(dst)
        if link is None:
            link = src_node.out_links[dst] = self.link(src_node.name, dst)
        if link.blocked and self._slow_transmit(src_node, link, req_id, payload, response):
            return
        latencies = link.latencies_us
        arrive = self.clock.now_us + (latencies.pop() if latencies else link.sample_us())
        if link.impaired:
            if link.extra is not None:
                arrive += link.extra.sample_us(link.stream)
            if link.loss_probability:
                arrive += self._retransmit_delay_us(link)
        if arrive < link.last_delivery_us:
            arrive = link.last_delivery_us
        link.last_delivery_us = arrive
        if response:
            fn = link.response
            args: tuple[Any, ...] = (req_id, payload)
        else:
            fn = link.handlers.get(type(payload))
            if fn is None:
                raise TypeError(f"{link.dst} has no handler for {type(payload).__name__}")
            args = (link.src, req_id, payload)
        heappush(self._queue, (arrive, NORMAL, next(self._eid), link, link.epoch, fn, args))  # = env.push

    def transmit_response(self, src_node: Any, dst: str, req_id: int, payload: Any) -> None:
        """`transmit` of a response (none for a oneway message: `req_id` 0)."""
        self.transmit(src_node, True, dst, req_id, payload)

    def _slow_transmit(self, src_node: Any, link: Link, req_id: int, payload: Any, response: bool) -> bool:
        """A transmission on a blocked link, or to a node that does not serve (module docstring);
        False: deliver it as usual after all (`transmit` goes on)."""
        dst_node = link.dst_node
        if link.renew:
            self._renew(link)
            if not link.blocked and dst_node.serving:
                return False
        if link.cut:  # TCP keeps the segment and retransmits it after the heal
            self._hold(link, self._delivery(link, req_id, payload, response), self.env._now)
            return True
        if link.stale:
            if dst_node.host_up:  # the far end has no such connection: RST
                self._emit(src_node.name, trace.NET_DROPPED, src_node.name, dst_node.name, type(payload).__name__,
                           "reset")
                self.connection_reset(link, 2 * link.sample_us())
                return True
            if link.unacked_since_us < 0:  # lost to a host that is off: retransmitted after it is back
                link.unacked_since_us = self.env._now
        self._undeliverable(src_node, link, req_id, payload, response)
        return True

    def _renew(self, link: Link) -> None:
        """A restarted node's first send to a peer opens a new connection, which the peer's
        answers and pushes use from now on: the peer's stale link back is replaced."""
        link.renew = False
        link.update_blocked()
        back = self.links.get((link.dst, link.src))
        if back is not None and back.stale:
            back.stale = False
            back.unacked_since_us = -1
            back.update_blocked()

    def _delivery(self, link: Link, req_id: int, payload: Any, response: bool) -> tuple:
        """(fn, args) of a delivery, as `transmit` builds it."""
        if response:
            return link.response, (req_id, payload)
        fn = link.handlers.get(type(payload))
        if fn is None:
            raise TypeError(f"{link.dst} has no handler for {type(payload).__name__}")
        return fn, (link.src, req_id, payload)

    def _hold(self, link: Link, delivery: tuple, sent_us: int) -> None:
        if not link.held:
            link.held_since_us = sent_us
        link.held.append(delivery)
        self._emit(link.src, trace.NET_HELD, link.src, link.dst, type(delivery[1][-1]).__name__)

    def _undeliverable(self, src_node: Any, link: Link, req_id: int, payload: Any, response: bool) -> None:
        dst_node = link.dst_node
        reason = "down" if not dst_node.host_up else "refused"
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
        """A delivery (a heap entry, sim/env.py) found its connection reset (the receiver
        crashed); its payload is the last argument."""
        link = entry[3]
        self._emit(link.src, trace.NET_DROPPED, link.src, link.dst, type(entry[6][-1]).__name__, link.reset_reason)

    def reset(self, link: Link, reason: str) -> None:
        """Reset the connection: whatever is in flight on it, or held for retransmission, is lost."""
        link.epoch += 1
        link.reset_reason = reason
        for _fn, args in link.held:
            self._emit(link.src, trace.NET_DROPPED, link.src, link.dst, type(args[-1]).__name__, reason)
        link.held = []
        link.held_since_us = -1

    def connection_reset(self, link: Link, delay_us: int) -> None:
        """The sender of `link` gets a RST for its stale connection (module docstring): after
        `delay_us` it fails the requests pending on it now and runs its watchers; later sends
        use a new connection."""
        src = self.nodes[link.src]
        link.stale = False
        link.unacked_since_us = -1
        link.update_blocked()
        src.fail_requests(src.pending_to(link.dst), delay_us)
        for observer, on_closed in self._watchers.get(link.dst, []):
            if observer is src:
                src.call_later(delay_us, on_closed, link.dst)

    def serving_changed(self, node: Any) -> None:
        """`node` started or stopped serving: the links into it take the slow path exactly while it does not."""
        for link in self._links_into(node):
            link.update_blocked()

    def _links_into(self, node: Any) -> list[Link]:
        """The links whose receiver is `node`, in creation order (deterministic)."""
        return [link for link in self.links.values() if link.dst_node is node]

    def paused(self, node: Any) -> None:
        """`node` paused or resumed: deliveries to it wait as its timers do."""
        for link in self._links_into(node):
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
        """Every connection into `node` dies; peers are told at once (RST/FIN) only when a
        process dies and the peer can hear it; otherwise their connections go stale."""
        now = self.env._now
        for link in self._links_into(node):
            in_flight = link.last_delivery_us > now or bool(link.held)
            self.reset(link, "down")
            told = not power_loss and node.name in self.nodes and not self.link(node.name, link.src).cut
            if not told:
                link.stale = True
                link.unacked_since_us = now if in_flight else -1
                link.update_blocked()
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

    def node_restarted(self, node: Any) -> None:
        """`node` starts a new incarnation: its first send on each link renews the peer's stale link back."""
        for link in self.links.values():  # insertion order: deterministic
            if link.src == node.name:
                back = self.links.get((link.dst, link.src))
                if back is not None and back.stale:
                    link.renew = True
                    link.update_blocked()

    def host_powered_on(self, node: Any) -> None:
        """`node`'s host is up again: a peer that lost a segment to it while it was off gets a RST
        at its next retransmission (one latency later); the others find out with their next send."""
        now = self.env._now
        for link in self._links_into(node):
            if link.stale and link.unacked_since_us >= 0 and not link.cut:
                at = retransmission_at_us(link.unacked_since_us, now)
                if at < 0:  # TCP gave the connection up while the host was off
                    self.connection_reset(link, 0)
                else:
                    self.connection_reset(link, at - now + 2 * link.sample_us())

    def connected(self, a: str, b: str) -> bool:
        """Both nodes serve and neither direction between them is cut (a partition): the view a
        quorum protocol's heartbeats give (models/controller/raft.py)."""
        na, nb = self.nodes[a], self.nodes[b]
        if not (na.serving and nb.serving):
            return False
        return a == b or not (self.link(a, b).cut or self.link(b, a).cut)

    # --- faults -----------------------------------------------------------------------------
    def cut(self, src: str, dst: str) -> None:
        """Cut the link: from now on what is sent on it is held (`_slow_transmit`)."""
        link = self.link(src, dst)
        if not link.cut:
            link.cut = True
            link.update_blocked()

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
        for link in self.links.values():  # insertion order: deterministic
            if link.cut:
                link.cut = False
                link.update_blocked()
                self._release(link)

    def _release(self, link: Link) -> None:
        """A healed link: TCP retransmits what it held, from its next retransmission on."""
        held, since = link.held, link.held_since_us
        link.held, link.held_since_us = [], -1
        now = self.env._now
        if link.stale:  # the far end forgot the connection meanwhile: what TCP retransmits meets a RST
            if link.unacked_since_us >= 0:
                since = link.unacked_since_us if since < 0 else min(since, link.unacked_since_us)
            if since < 0:
                return
            if not link.dst_node.host_up:
                link.unacked_since_us = since
                return
            at = retransmission_at_us(since, now)
            self.connection_reset(link, 0 if at < 0 else at - now + 2 * link.sample_us())
            return
        if not held:
            return
        at = retransmission_at_us(since, now)
        if at < 0:  # the connection was given up during the partition
            self.reset(link, "timeout")
            src = self.nodes[link.src]
            src.fail_requests(src.pending_to(link.dst), 0)
            return
        arrive = max(at + link.sample_us(), link.last_delivery_us)
        for fn, args in held:
            heappush(self._queue, (arrive, NORMAL, next(self._eid), link, link.epoch, fn, args))
        link.last_delivery_us = arrive

    def reset_link_faults(self) -> None:
        for link in self.links.values():
            link.extra = None
            link.loss_probability = 0.0
