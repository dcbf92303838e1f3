"""Node: an addressable, crashable host (a broker JVM, a client process, a NameServer).

A node owns its services (RocketMQ's `ServiceThread`s) and every timer it sets. All timing goes
through the node (`call_later`, `sleep_us`, `rpc`), tagged with the node's *incarnation*: when the
node crashes the incarnation changes, so every pending timer, RPC continuation and in-flight
delivery of the old incarnation silently vanishes, exactly like the threads of a killed JVM.
Service generators of the old incarnation are left suspended forever and never resume.

What a crash destroys is declared by the models: `on_crash` hooks drop heap state (caches,
tables, locks, held pulls); `on_power_loss` hooks additionally drop what only the OS page cache
held (unflushed file bytes). Restart re-runs the `on_start` hooks and the services, i.e. the
start-up and recovery logic.

A `pause` (GC or VM stall) freezes the node: timers and deliveries that fall due during the pause
run when it ends, in their original order.

Messages: `send` is oneway (request id 0); `rpc(dst, payload, timeout_us, on_reply, *args)` calls
`on_reply(*args, response)`, or `on_reply(*args, None)` at the timeout (the "third state": the
request may still have been processed), or `on_reply(*args, CONNECT_FAILED)` when the peer's host
is up but its process is not (connection refused, one round trip). Passing `args` instead of a
closure saves a function object and a call per request. Handlers are registered per
payload type and receive `(src, req_id, payload)`; `req_id` is 0 for oneway messages.
"""

# compiled with Cython: the C declarations of this module's classes are in node.pxd beside it

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from functools import partial
from operator import itemgetter
from typing import Any

import simpy
from simpy.core import NORMAL

from sim import trace
from sim.env import Clock, OwnedCall, Owner
from sim.event_queue import heappush


class ConnectFailed:
    """Reply sentinel: the peer refused the connection (process down, host up)."""

    def __repr__(self) -> str:
        return "CONNECT_FAILED"


CONNECT_FAILED = ConnectFailed()
_EID = itemgetter(2)  # a heap entry's eid: the order its call was made (sim/env.py)
Handler = Callable[[str, int, Any], None]


class Node(Owner):
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_chunk", "_crash_hooks", "_deadlines", "_eid", "_emit", "_flush", "_next_req_id", "_pending",
                 "_power_hooks", "_queue", "_request", "_services", "_start_hooks", "booting", "clock", "disk", "env",
                 "handlers", "host_up", "name", "out_links", "reply", "serving", "startup_us", "stopped", "up",
                 "zone")

    def __init__(self, env: Any, name: str, zone: str = "default") -> None:
        self.env = env
        self.clock: Clock = env.clock
        self._queue, self._eid = env._queue, env._eid  # the event heap (sim/env.py)
        self.name = name
        self.zone = zone
        self.up = True
        self.host_up = True  # False after a power loss: nobody answers, not even with a RST
        self.booting = False  # restarted, start-up not finished: connections are refused
        self.serving = True  # up and not booting: change it with `set_serving` (the links into the node follow)
        self.startup_us = 0  # JVM start + recovery time before a restarted node serves
        self.epoch = 0  # incarnation; bumped by every crash
        self.stopped = False  # shut down on purpose (a graceful consumer shutdown): heal_all leaves it down
        self.paused_until = 0
        self.on_drop = None  # timers of a dead incarnation vanish silently (sim/env.py)
        self.disk: Any = None
        self.handlers: dict[type, Handler] = {}
        self.out_links: dict[str, Any] = {}  # dst name -> sim.network.Link (the network's cache)
        self._pending: dict[int, tuple] = {}  # req id -> (on_reply, args, peer, deadline µs)
        # RPC deadlines, one FIFO per timeout value: a single armed timer per FIFO instead of one
        # heap entry per request (deadlines within a FIFO are non-decreasing)
        self._deadlines: dict[int, deque] = {}
        self._next_req_id = 1
        self._services: list[Callable[[], Generator[Any, Any, None]]] = []
        self._start_hooks: list[Callable[[], None]] = []
        self._crash_hooks: list[Callable[[], None]] = []
        self._power_hooks: list[Callable[[], None]] = []
        self._emit = env.tracer.emit
        self._chunk = env.tracer.chunk  # hot paths append records here (sim/trace.py Tracer.emit)
        self._flush = env.tracer.flush
        # `reply(dst, req_id, payload)` and `_request(dst, req_id, payload)` (0: oneway): the
        # network's transmit bound to us, without a frame of their own; fields, not methods
        self.reply = self._reply if env.network is None else partial(env.network.transmit, self, True)
        self._request = self._request_late if env.network is None else partial(env.network.transmit, self, False)

    # --- life cycle -------------------------------------------------------------------------
    def add_service(self, service: Callable[[], Generator[Any, Any, None]]) -> None:
        """A generator function started at every start and restart (a ServiceThread)."""
        self._services.append(service)

    def on_start(self, hook: Callable[[], None]) -> None:
        self._start_hooks.append(hook)

    def on_crash(self, hook: Callable[[], None]) -> None:
        """Heap state: destroyed by a process crash and by a power loss."""
        self._crash_hooks.append(hook)

    def on_power_loss(self, hook: Callable[[], None]) -> None:
        """Page-cache state: destroyed only by a power loss (after the crash hooks ran)."""
        self._power_hooks.append(hook)

    def start(self) -> None:
        for hook in self._start_hooks:
            hook()
        for service in self._services:
            self.env.process(service())

    def set_serving(self, serving: bool) -> None:
        self.serving = serving
        if self.env.network is not None:
            self.env.network.serving_changed(self)

    def crash(self, power_loss: bool = False) -> None:
        if not self.up:
            return
        self.up = False
        self.set_serving(False)
        self.host_up = not power_loss
        self.booting = False
        self.epoch += 1
        self.paused_until = 0  # the pause dies with the incarnation (and the links into it: below)
        self._pending.clear()
        self._deadlines.clear()
        self.trace(trace.NODE_CRASHED, power_loss)
        for hook in self._crash_hooks:
            hook()
        if power_loss:
            for hook in self._power_hooks:
                hook()
        if self.env.network is not None:
            self.env.network.paused(self)
            self.env.network.node_crashed(self, power_loss)

    def restart(self) -> None:
        """Power on / start the process; it serves after `startup_us` (refusing until then)."""
        if self.up:
            return
        self.up = True
        was_off, self.host_up = not self.host_up, True
        self.booting = True
        self.call_later(self.startup_us, self._booted)
        if self.env.network is not None:
            if was_off:
                self.env.network.host_powered_on(self)
            self.env.network.node_restarted(self)

    def _booted(self) -> None:
        self.booting = False
        self.set_serving(True)
        self.trace(trace.NODE_RESTARTED, self.epoch)
        self.start()

    def pause(self, duration_us: int) -> None:
        self.paused_until = max(self.paused_until, self.env._now + duration_us)
        if self.env.network is not None:
            self.env.network.paused(self)

    def unpause(self) -> None:
        self.paused_until = 0
        if self.env.network is not None:
            self.env.network.paused(self)

    # --- time -------------------------------------------------------------------------------
    def call_later(self, delay_us: int, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn(*args)` after `delay_us`, unless this incarnation crashed (deferred while paused)."""
        # = push (sim/env.py)
        heappush(self._queue, (self.clock.now_us + delay_us, NORMAL, next(self._eid), self, self.epoch, fn, args))

    def timer(self, delay_us: int, fn: Callable[..., Any], *args: Any) -> OwnedCall:
        """`call_later` that can be cancelled (`.cancel()`)."""
        return OwnedCall(self, delay_us, fn, args)

    def sleep_us(self, delay_us: int) -> simpy.Event:
        event = simpy.Event(self.env)
        self.env.push_far(self.env._now + delay_us, self, self.epoch, event.succeed, ())
        return event

    def sleep_ms(self, delay_ms: float) -> simpy.Event:
        return self.sleep_us(int(round(delay_ms * 1000)))

    def trace(self, kind: str, *fields: Any) -> None:
        self._emit(self.name, kind, *fields)

    # --- messaging --------------------------------------------------------------------------
    def handle(self, payload_type: type, handler: Handler) -> None:
        self.handlers[payload_type] = handler

    def send(self, dst: str, payload: Any) -> None:
        self._request(dst, 0, payload)

    def rpc(self, dst: str, payload: Any, timeout_us: int, on_reply: Callable[..., Any], *args: Any) -> None:
        req_id = self._next_req_id
        self._next_req_id = req_id + 1
        now = self.clock.now_us
        self._pending[req_id] = (on_reply, args, dst, now + timeout_us)
        fifo = self._deadlines.get(timeout_us)
        if not fifo:  # an expiry timer is armed exactly while its FIFO is not empty
            if fifo is None:
                fifo = self._deadlines[timeout_us] = deque()
            self.env.push_far(now + timeout_us, self, self.epoch, self._expire, (timeout_us,))
        fifo.append(req_id)
        self._request(dst, req_id, payload)

    def rpc_event(self, dst: str, payload: Any, timeout_us: int) -> simpy.Event:
        """`rpc` for generator services: the event's value is the response or None."""
        event = simpy.Event(self.env)
        self.rpc(dst, payload, timeout_us, event.succeed)
        return event

    def _request_late(self, dst: str, req_id: int, payload: Any) -> None:
        """`_request` of a node made before the network."""
        self.env.network.transmit(self, False, dst, req_id, payload)

    def _reply(self, dst: str, req_id: int, payload: Any) -> None:
        """`reply` of a node made before the network: answer request `req_id` of `dst` (nothing
        for a oneway message: `req_id` 0)."""
        self.env.network.transmit_response(self, dst, req_id, payload)

    def fail_requests_to(self, link: Any, delay_us: int) -> None:
        """The peer at the other end of `link` (peer → this node) died: its connection closes and
        every outstanding request on it fails at once (NettyRemotingClient closes the channel
        and fails the response futures)."""
        for req_id, (_on_reply, _args, dst, _deadline) in list(self._pending.items()):
            if dst == link.src:
                self.call_later(delay_us, self.response_arrived, req_id, CONNECT_FAILED)

    def pending_calls(self, fn: Callable[..., Any]) -> list[tuple]:
        """The argument tuples of this incarnation's `call_later(…, fn, …)` calls still to come,
        in the order they were made. A scan of the event heap: for the rare caller (a shutdown)
        that would otherwise have to register every call as it is made."""
        env = self.env
        entries = [e for q in (env._queue, env._far) for e in q if e[3] is self and e[4] == self.epoch and e[5] == fn]
        return [e[6] for e in sorted(entries, key=_EID)]

    def pending_to(self, dst: str) -> list[int]:
        """Ids of the requests to `dst` still waiting for a response (in issue order)."""
        return [req_id for req_id, entry in self._pending.items() if entry[2] == dst]

    def fail_requests(self, req_ids: list[int], delay_us: int) -> None:
        """Fail these requests with CONNECT_FAILED after `delay_us` (those still pending then):
        their connection was reset."""
        for req_id in req_ids:
            self.call_later(delay_us, self.response_arrived, req_id, CONNECT_FAILED)

    def _expire(self, timeout_us: int) -> None:
        """Time out the requests of one FIFO whose deadline has come (answered ones are skipped),
        and re-arm for the next pending one."""
        fifo, pending, now = self._deadlines[timeout_us], self._pending, self.clock.now_us
        expired = []
        while fifo:
            entry = pending.get(fifo[0])
            if entry is not None:
                if entry[3] > now:
                    self.env.push_far(entry[3], self, self.epoch, self._expire, (timeout_us,))
                    break
                expired.append(pending.pop(fifo[0]))
            fifo.popleft()
        for on_reply, args, _dst, _deadline in expired:
            on_reply(*args, None)

    def response_arrived(self, req_id: int, payload: Any) -> None:
        """A response to request `req_id` arrived: its continuation runs, unless the request
        timed out already (then it is ignored). Deliveries reach here through sim/network.py,
        which drops what a reset connection or a crash destroyed and defers during a pause."""
        pending = self._pending.pop(req_id, None)
        if pending is not None:
            pending[0](*pending[1], payload)

    def handler_for(self, payload: Any) -> Handler:
        handler = self.handlers.get(type(payload))
        if handler is None:
            raise TypeError(f"{self.name} has no handler for {type(payload).__name__}")
        return handler
