"""Simulated clock and cheap callbacks on top of SimPy.

`SimEnv.now` is an integer number of **microseconds**. RocketMQ's settings are in milliseconds;
they are converted once, with `ms()`, where a model reads them. SimPy breaks ties between events
at the same time in scheduling order (FIFO), which makes integer time fully deterministic.

Why callbacks, and what this relies on in SimPy. SimPy's Environment owns the clock, the event
heap and its FIFO tie-break, and RocketMQ's ServiceThreads (flush services, persist loops, route
polling) are SimPy processes. But a process costs a generator, an `Initialize` event and a
callback list per wake-up, and a simulated message crosses about six scheduling points (send,
store, dispatch, pull, response, consume), so the per-message paths are plain callbacks on the
same heap. Every heap entry has one shape, SimPy's `(time, priority, eid, ...)` extended:

    (time, priority, eid, owner, epoch, fn, args)

`fn(*args)` runs unless `owner.epoch` has moved on from `epoch` (the owner died: a crashed host,
a reset connection, a cancelled call; then `owner.on_drop(entry)` runs if it is set), and is
deferred while `owner.paused_until` lies ahead (a paused host). Owners are hosts (their timers,
sim/node.py), connections (deliveries, sim/network.py), cancellable calls (`Call`) and `ALWAYS`,
which owns SimPy's own events (`schedule` wraps them: `_fire_simpy` processes an event exactly
as `simpy.Environment.step` does). Entries compare by (time, priority, eid) only, eid being
unique, so the order is SimPy's. The loop needs no per-entry type test and no object per entry.

Far-future entries (more than `FAR_US` ahead: the service loops' sleeps, RPC deadlines, the
rebalance timer — about three quarters of what is queued at any time) wait in a staging heap
and are moved into the main heap by a marker entry one µs before the earliest of them, so the
main heap, which every event pops, stays a third as deep. They keep their (time, priority, eid),
so the order of events is the same as with one heap. `push_far` stages; hot paths push directly.

SimPy internals used, all inside `sim/` (pinned in pyproject.toml to simpy 4.1.x): the heap
`Environment._queue`, the id counter `_eid`, `_now`, the priorities `NORMAL`/`URGENT`, and an
event's `callbacks`, `_ok`, `_value` and `_defused`; `SimEnv` overrides the four methods that
touch the heap (`schedule`, `peek`, `step`, `run`). The heap is pushed and popped with
`sim/event_queue.py`: heapq's algorithm, comparing entries on C integers when compiled.

Livelock: `max_events_per_instant` (set from the scenario's `limits:` by rmqsim/runner.py; None:
no bound) caps the events processed at one simulated instant. The loop counts them exactly — heap
entries popped at one time, the run's own stop marker (`run(until)`) left out, the count going on
across `run` calls and reset when the clock moves — and, instead of processing the one beyond the
bound, puts it back on the heap and raises `InstantLivelock` (rmqsim/runner.py stops the run with
`stopped_by: livelock`). Compiled, that is a conversion and a compare of C integers per event.

Compiled (sim/compiled.py), reading SimPy's `env._now` is an attribute lookup on a Python class,
about 150 instructions, and hot code reads the time about 20 times a simulated message. So
`SimEnv._now` is a property over a `Clock` object's `now_us`, which hot code holds as a typed
field (`self.clock.now_us`: two loads); the run loop writes it once per event. Likewise every
entry owner derives from `Owner`, so the loop reads `epoch` and `paused_until` as fields.
"""

# compiled with Cython: the C declarations of this module's classes are in env.pxd beside it

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cython
import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule, Infinity

from sim.coverage import new_counter
from sim.event_queue import heappop, heappush

US_PER_MS = 1_000
US_PER_S = 1_000_000
FAR_US = 50_000  # entries due further ahead than this are staged (module docstring)
NO_INSTANT_BOUND = 1 << 62  # the loop's per-instant bound when `max_events_per_instant` is None


def ms(value_ms: float) -> int:
    """Milliseconds to integer microseconds (the only ms→µs conversion point for config)."""
    return int(round(value_ms * US_PER_MS))


def us_to_ms(value_us: int) -> float:
    return value_us / US_PER_MS


def push(env: SimEnv, time_us: int, owner: Any, epoch: int, fn: Callable[..., Any],
         args: tuple, priority: int = NORMAL) -> None:
    """Schedule an entry (module docstring). Hot paths inline this one line."""
    heappush(env._queue, (time_us, priority, next(env._eid), owner, epoch, fn, args))


class Owner:
    """The owner of heap entries (module docstring): `epoch`, `paused_until` and `on_drop` are
    what the run loop reads of it. Hosts (sim/node.py), connections (sim/network.py), cancellable
    calls and `ALWAYS` derive from it, so that compiled, the loop reads them as fields."""

    __slots__ = ("epoch", "paused_until", "on_drop")


class Clock:
    """`SimEnv`'s current time, `now_us` (integer µs; `SimEnv._now` reads and writes it). Hot code
    holds it as a typed field (`self.clock: Clock = env.clock`, sim/compiled.py):
    compiled, reading the time is then two field loads, where `env._now` is an attribute lookup on
    SimPy's Python class."""

    __slots__ = ("now_us",)

    def __init__(self, now_us: int = 0) -> None:
        self.now_us = now_us


class _Always(Owner):
    """The owner of entries that always fire: SimPy's events."""

    __slots__ = ()

    def __init__(self) -> None:
        self.epoch = 0
        self.paused_until = 0
        self.on_drop = None


ALWAYS = _Always()


class Call(Owner):
    """A cancellable scheduled call: the owner of its own heap entry; `cancel()` drops it."""

    __slots__ = ()

    def __init__(self, env: SimEnv, delay_us: int, fn: Callable[..., Any], args: tuple,
                 priority: int = NORMAL) -> None:
        self.epoch = 0
        self.paused_until = 0
        self.on_drop = None
        push(env, env._now + delay_us, self, 0, fn, args, priority)

    def cancel(self) -> None:
        self.epoch = 1


class OwnedCall(Owner):
    """A cancellable timer of a crashable host (`owner`, sim/node.py): dropped if the host
    crashed since, deferred while it is paused, or cancelled."""

    __slots__ = ("host", "host_epoch", "fn", "args")

    def __init__(self, owner: Any, delay_us: int, fn: Callable[..., Any], args: tuple) -> None:
        self.host, self.host_epoch, self.fn, self.args = owner, owner.epoch, fn, args
        self.epoch = 0
        self.paused_until = 0
        self.on_drop = None
        env = owner.env
        env.push_far(env._now + delay_us, self, 0, self._fire, ())

    def _fire(self) -> None:
        host = self.host
        if host.epoch != self.host_epoch:
            return
        if host.paused_until > host.env._now:
            host.env.push_far(host.paused_until, self, self.epoch, self._fire, ())
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


class _StopRun(Exception):
    """`run(until)` reached `until`."""


class InstantLivelock(Exception):
    """Raised by `SimEnv.run` instead of processing event number `events` of the simulated
    instant `instant_us`: more than `limit` (`SimEnv.max_events_per_instant`) at one instant, the
    clock not moving (module docstring). That event is back on the heap, unprocessed."""

    def __init__(self, instant_us: int, events: int, limit: int) -> None:
        super().__init__(f"event {events:,} at simulated {instant_us / US_PER_S:.6f} s: more than {limit:,} "
                         "at one instant")
        self.instant_us, self.events, self.limit = instant_us, events, limit


def _stop() -> None:
    raise _StopRun


def _fire(env: simpy.Environment, entry: tuple) -> None:
    """Process one popped heap entry (the body of `SimEnv.run`'s loop)."""
    owner = entry[3]
    if owner.epoch == entry[4]:
        if owner.paused_until > env._now:
            heappush(env._queue, (owner.paused_until, NORMAL, next(env._eid), *entry[3:]))
        else:
            entry[5](*entry[6])
    elif owner.on_drop is not None:
        owner.on_drop(entry)


class SimEnv(simpy.Environment):
    """simpy.Environment with integer-µs time, owned heap entries (module docstring) and the
    per-run services (rng, tracer, network) and the run's coverage counter (sim/coverage.py)."""

    # the heap SimPy's __init__ sets and this class's own state as slots, not instance-dict entries
    __slots__ = ("clock", "_queue", "_eid", "_active_proc", "rng", "tracer", "network", "_far", "_far_marker",
                 "coverage", "max_events_per_instant", "_instant_us", "_instant_events")

    def __init__(self, rng: Any = None, tracer: Any = None) -> None:
        self.clock = Clock()
        super().__init__(initial_time=0)
        self.rng = rng
        self.tracer = tracer
        self.network: Any = None
        self._far: list[tuple] = []  # staged far-future entries (a heap; module docstring)
        self._far_marker: Call | None = None
        self.coverage: list[int] = new_counter()  # the run's rare-state counts (sim/coverage.py)
        self.max_events_per_instant: int | None = None  # the livelock bound (module docstring)
        self._instant_us, self._instant_events = -1, 0  # the instant the loop counts, and its events so far

    @property
    def _now(self) -> int:
        """SimPy's clock attribute, kept in `clock` (class `Clock`)."""
        return self.clock.now_us

    @_now.setter
    def _now(self, now_us: int) -> None:
        self.clock.now_us = now_us

    def schedule(self, event: simpy.Event, priority: int = NORMAL, delay: float = 0) -> None:
        """SimPy's `Environment.schedule`: an entry that processes `event` (module docstring)."""
        self.push_far(self._now + int(delay), ALWAYS, 0, _fire_simpy, (event,), priority)

    def push_far(self, time_us: int, owner: Any, epoch: int, fn: Callable[..., Any], args: tuple,
                 priority: int = NORMAL) -> None:
        """`push` for entries that may lie far ahead: those due after `FAR_US` are staged."""
        entry = (time_us, priority, next(self._eid), owner, epoch, fn, args)
        if time_us - self._now <= FAR_US:
            heappush(self._queue, entry)
            return
        heappush(self._far, entry)
        if self._far[0] is entry:  # a new earliest staged entry: the marker moves before it
            self._arm_far()

    def _arm_far(self) -> None:
        if self._far_marker is not None:
            self._far_marker.cancel()
        self._far_marker = Call(self, self._far[0][0] - 1 - self._now, self._bring_near, (), URGENT)

    def _bring_near(self) -> None:
        """The marker: move the staged entries due within `FAR_US` into the main heap."""
        self._far_marker = None
        far, queue, limit = self._far, self._queue, self._now + FAR_US
        while far and far[0][0] <= limit:
            heappush(queue, heappop(far))
        if far:
            self._arm_far()

    def peek(self) -> float:
        times = [q[0][0] for q in (self._queue, self._far) if q]
        return min(times) if times else Infinity

    def call_later(self, delay_us: int, fn: Callable[..., Any], *args: Any) -> Call:
        if delay_us < 0:
            raise ValueError(f"negative delay {delay_us} µs")
        return Call(self, delay_us, fn, args)

    def scheduled(self) -> int:
        """Entries ever pushed (each takes an eid; the count is read, not consumed)."""
        return int(repr(self._eid)[6:-1])  # itertools.count's repr: count(N)

    def processed(self) -> int:
        """Entries popped so far: pushed minus still queued (a staged entry is popped twice)."""
        return self.scheduled() - len(self._queue) - len(self._far)

    # `until` is a time only (an event: TypeError), where SimPy's `run` also takes an event: hence the ignore
    def run(self, until: float | None = None, max_events: int | None = None) -> bool:  # type: ignore[override]
        """Process events until simulated time `until` (µs) or until none are left; with
        `max_events`, stop after that many more. Returns True if stopped by `max_events`.

        Same contract as `simpy.Environment.run` with a number: events at `until` itself are
        not processed, and `now == until` afterwards. Without `max_events` the loop counts
        nothing but the events of the current instant (`processed()` reads the count off the eid
        counter). More than `max_events_per_instant` at one instant raises `InstantLivelock`.
        """
        stop = None
        if until is not None:
            if not isinstance(until, int | float) or isinstance(until, bool):
                raise TypeError(f"SimEnv.run takes a time in µs, not {type(until).__name__}")
            if until <= self._now:
                raise ValueError(f"until ({until}) must be greater than the current time ({self._now})")
            stop = Call(self, int(until) - self._now, _stop, (), URGENT)
        try:
            if max_events is not None:
                return self._run_counted(max_events)
            self._run_loop()
            return False
        except _StopRun:
            self._instant_events -= 1  # the stop marker is the loop's own, not an event of the instant
            return False
        finally:
            if stop is not None:
                stop.cancel()  # a stop not reached (max_events) must not end a later run

    @cython.locals(clock=Clock, owner=Owner, at=cython.longlong, instant=cython.longlong, count=cython.longlong,
                   most=cython.longlong)
    def _run_loop(self) -> None:
        """`run`'s loop: every entry until the heap is empty (or `_StopRun`), counting the events of
        the current instant in C integers (module docstring)."""
        queue, eid, clock = self._queue, self._eid, self.clock
        instant, count = self._instant_us, self._instant_events
        most = NO_INSTANT_BOUND if self.max_events_per_instant is None else self.max_events_per_instant
        try:
            while queue:
                now, priority, entry_id, owner, epoch, fn, args = heappop(queue)  # = _fire, inlined: the hot loop
                at = now
                if at != instant:
                    instant, count = at, 1
                else:
                    count += 1
                    if count > most and fn is not _stop:
                        heappush(queue, (now, priority, entry_id, owner, epoch, fn, args))
                        count -= 1
                        raise InstantLivelock(now, count + 1, most)
                clock.now_us = now
                # `is` first: the entry holds the very int its owner's epoch was when pushed, and a
                # paused_until of 0 (no pause) is false; both skip a rich comparison per event
                if owner.epoch is epoch or owner.epoch == epoch:
                    if owner.paused_until and owner.paused_until > now:  # deferred, keeping its place among them
                        heappush(queue, (owner.paused_until, NORMAL, next(eid), owner, epoch, fn, args))
                    else:
                        fn(*args)
                elif owner.on_drop is not None:  # the owner died since: the entry dies with it
                    owner.on_drop((now, NORMAL, 0, owner, epoch, fn, args))
        finally:
            self._instant_us, self._instant_events = instant, count

    def _run_counted(self, max_events: int) -> bool:
        queue = self._queue
        for _ in range(max_events):
            if not queue:
                return False
            entry = heappop(queue)
            self._count(entry)
            self._now = entry[0]
            _fire(self, entry)
        return bool(queue)

    def _count(self, entry: tuple) -> None:
        """Count a popped entry among the events of its instant; past `max_events_per_instant`,
        put it back and raise `InstantLivelock` (`_run_loop`'s rule, for the slower paths)."""
        if entry[0] != self._instant_us:
            self._instant_us, self._instant_events = entry[0], 1
            return
        self._instant_events += 1
        most = self.max_events_per_instant
        if most is not None and self._instant_events > most and entry[5] is not _stop:
            heappush(self._queue, entry)
            self._instant_events -= 1
            raise InstantLivelock(entry[0], self._instant_events + 1, most)

    def step(self) -> None:
        """Process one event (SimPy's `step`, with this module's entries)."""
        try:
            entry = heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        self._count(entry)
        self._now = entry[0]
        _fire(self, entry)
