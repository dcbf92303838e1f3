"""Simulated clock and cheap callbacks on top of SimPy.

`SimEnv.now` is an integer number of **microseconds**. RocketMQ's settings are in milliseconds;
they are converted once, with `ms()`, where a model reads them. SimPy breaks ties between events
at the same time in scheduling order (FIFO), which makes integer time fully deterministic.

Why callbacks, and what this relies on in SimPy. SimPy's Environment owns the clock, the event
heap and its FIFO tie-break, and RocketMQ's ServiceThreads (flush services, persist loops, route
polling) are SimPy processes. But a process costs a generator, an `Initialize` event and a
callback list per wake-up, and a simulated message crosses about six scheduling points (send,
store, dispatch, pull, response, consume), so the per-message paths are plain callbacks on the
same heap. Besides SimPy's `(time, priority, eid, event)` entries, the heap holds entries of one
shape of our own, fired inline by `SimEnv.run` with no object per entry:

    (time, NORMAL, eid, owner, epoch, fn, args)

`fn(*args)` runs unless `owner.epoch` has moved on from `epoch` (the owner died: a crashed host,
a reset connection, a cancelled call; then `owner.on_drop(entry)` runs if it is set), and is
deferred while `owner.paused_until` lies ahead (a paused host). Owners are hosts (their timers,
sim/node.py), connections (deliveries, sim/network.py) and cancellable calls (`Call`). Entries
compare by (time, priority, eid) only, eid being unique, exactly as SimPy's do.

SimPy internals used, all inside `sim/` (pinned in pyproject.toml to simpy 4.1.x): the heap
`Environment._queue`, the id counter `_eid`, `_now`, the priorities `NORMAL`/`URGENT`, and an
event's `callbacks`, `_ok`, `_value` and `_defused`; `run` and `step` are SimPy's loop with the
entries above added.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule

US_PER_MS = 1_000
US_PER_S = 1_000_000
OWNED_ENTRY = 7  # len of (time, NORMAL, eid, owner, epoch, fn, args); SimPy's entries have 4


def ms(value_ms: float) -> int:
    """Milliseconds to integer microseconds (the only ms→µs conversion point for config)."""
    return int(round(value_ms * US_PER_MS))


def us_to_ms(value_us: int) -> float:
    return value_us / US_PER_MS


def push(env: simpy.Environment, time_us: int, owner: Any, epoch: int, fn: Callable[..., Any],
         args: tuple) -> None:
    """Schedule an owned entry (module docstring). Hot paths inline this one line."""
    heappush(env._queue, (time_us, NORMAL, next(env._eid), owner, epoch, fn, args))


class Call:
    """A cancellable scheduled call: the owner of its own heap entry; `cancel()` drops it."""

    __slots__ = ("epoch", "paused_until", "on_drop")

    def __init__(self, env: simpy.Environment, delay_us: int, fn: Callable[..., Any], args: tuple) -> None:
        self.epoch = 0
        self.paused_until = 0
        self.on_drop = None
        push(env, env._now + delay_us, self, 0, fn, args)

    def cancel(self) -> None:
        self.epoch = 1


class OwnedCall:
    """A cancellable timer of a crashable host (`owner`, sim/node.py): dropped if the host
    crashed since, deferred while it is paused, or cancelled."""

    __slots__ = ("host", "host_epoch", "fn", "args", "epoch", "paused_until", "on_drop")

    def __init__(self, owner: Any, delay_us: int, fn: Callable[..., Any], args: tuple) -> None:
        self.host, self.host_epoch, self.fn, self.args = owner, owner.epoch, fn, args
        self.epoch = 0
        self.paused_until = 0
        self.on_drop = None
        env = owner.env
        push(env, env._now + delay_us, self, 0, self._fire, ())

    def _fire(self) -> None:
        host = self.host
        if host.epoch != self.host_epoch:
            return
        if host.paused_until > host.env._now:
            push(host.env, host.paused_until, self, self.epoch, self._fire, ())
            return
        self.fn(*self.args)

    def cancel(self) -> None:
        self.epoch = 1


def _fire_simpy(event: Any) -> None:
    """What `simpy.Environment.step` does with an event: run its callbacks, surface failures."""
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)
    if not event._ok and not hasattr(event, "_defused"):
        exc = type(event._value)(*event._value.args)
        exc.__cause__ = event._value
        raise exc


def _fire(env: simpy.Environment, entry: tuple) -> bool:
    """Process one popped heap entry; True if it was `stop` (run's end marker)."""
    if len(entry) == OWNED_ENTRY:
        owner = entry[3]
        if owner.epoch == entry[4]:
            if owner.paused_until > env._now:
                heappush(env._queue, (owner.paused_until, NORMAL, next(env._eid), *entry[3:]))
            else:
                entry[5](*entry[6])
        elif owner.on_drop is not None:
            owner.on_drop(entry)
        return False
    _fire_simpy(entry[3])
    return False


class SimEnv(simpy.Environment):
    """simpy.Environment with integer-µs time, owned heap entries (module docstring) and the
    per-run services (rng, tracer, network)."""

    def __init__(self, rng: Any = None, tracer: Any = None) -> None:
        super().__init__(initial_time=0)
        self.rng = rng
        self.tracer = tracer
        self.network: Any = None
        self.events = 0  # heap entries processed by `run`

    def call_later(self, delay_us: int, fn: Callable[..., Any], *args: Any) -> Call:
        if delay_us < 0:
            raise ValueError(f"negative delay {delay_us} µs")
        return Call(self, delay_us, fn, args)

    def run(self, until: int | None = None, max_events: int | None = None) -> bool:
        """Process events until simulated time `until` (µs) or until none are left; with
        `max_events`, stop after that many more. Returns True if stopped by `max_events`.

        Same contract as `simpy.Environment.run` with a number: events at `until` itself are
        not processed, and `now == until` afterwards.
        """
        stop = None
        if until is not None:
            if not isinstance(until, int | float) or isinstance(until, bool):
                raise TypeError(f"SimEnv.run takes a time in µs, not {type(until).__name__}")
            if until <= self._now:
                raise ValueError(f"until ({until}) must be greater than the current time ({self._now})")
            stop = simpy.Event(self)
            stop._ok, stop._value = True, None  # a stale stop from an aborted run fires as a no-op
            heappush(self._queue, (until, URGENT, next(self._eid), stop))
        queue, eid = self._queue, self._eid
        left = -1 if max_events is None else max_events  # counts down to 0; never 0 when unbounded
        processed = 0
        try:
            while queue:
                if processed == left:
                    return True
                entry = heappop(queue)
                self._now = now = entry[0]
                processed += 1
                if len(entry) == OWNED_ENTRY:  # = _fire, inlined: the hot path
                    owner = entry[3]
                    if owner.epoch == entry[4]:
                        if owner.paused_until > now:  # deferred, keeping its place among the deferred
                            heappush(queue, (owner.paused_until, NORMAL, next(eid), *entry[3:]))
                        else:
                            entry[5](*entry[6])
                    elif owner.on_drop is not None:  # the owner died since: the entry dies with it
                        owner.on_drop(entry)
                elif entry[3] is stop:
                    return False
                else:
                    _fire_simpy(entry[3])
        finally:
            self.events += processed
        return False

    def step(self) -> None:
        """Process one event (SimPy's `step`, with this module's entries)."""
        try:
            entry = heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        self._now = entry[0]
        _fire(self, entry)
