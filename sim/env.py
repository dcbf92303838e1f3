"""Simulated clock and cheap callbacks on top of SimPy.

`SimEnv.now` is an integer number of **microseconds**. RocketMQ's settings are in milliseconds;
they are converted once, with `ms()`, where a model reads them. SimPy breaks ties between events
at the same time in scheduling order (FIFO), which makes integer time fully deterministic.

Most of the model is written as callbacks rather than SimPy processes: a process costs a
generator plus an `Initialize` event, a callback costs one heap entry. `SimEnv.call_later`
schedules one. `SimEnv.run` is SimPy's event loop with the dispatch of these callbacks inlined:
a heap entry's event is a SimPy event, a `Call`, a node-owned `NodeCall` (sim/node.py) or a bare
`(fn, args)` tuple (network deliveries, which are never cancelled). Ordering is SimPy's own:
(time, priority, insertion id).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import NORMAL, URGENT, EmptySchedule

US_PER_MS = 1_000
US_PER_S = 1_000_000


def ms(value_ms: float) -> int:
    """Milliseconds to integer microseconds (the only ms→µs conversion point for config)."""
    return int(round(value_ms * US_PER_MS))


def us_to_ms(value_us: int) -> float:
    return value_us / US_PER_MS


class Call:
    """A scheduled function call; `cancel()` makes it a no-op. One heap entry, no process.

    Not a simpy.Event: `SimEnv.run` dispatches it directly, and a slotted object with two
    fields is the cheapest cancellable thing to build on the hot path.
    """

    __slots__ = ("fn", "args")

    def __init__(self, env: simpy.Environment, delay_us: int, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        heappush(env._queue, (env._now + delay_us, NORMAL, next(env._eid), self))  # = env.schedule

    def cancel(self) -> None:
        self.fn = None


def _fire_call(event: Call) -> None:
    if event.fn is not None:
        event.fn(*event.args)


def _fire_tuple(event: tuple) -> None:
    event[0](*event[1])


# Heap-entry types that `SimEnv.run` fires directly, without SimPy's callback list. Other kernel
# modules register their own (sim/node.py: NodeCall). Anything else is a SimPy event.
DIRECT: dict[type, Callable[[Any], None]] = {Call: _fire_call, tuple: _fire_tuple}


class SimEnv(simpy.Environment):
    """simpy.Environment with integer-µs time and the per-run services (rng, tracer, network)."""

    def __init__(self, rng: Any = None, tracer: Any = None) -> None:
        super().__init__(initial_time=0)
        self.rng = rng
        self.tracer = tracer
        self.network: Any = None

    def call_later(self, delay_us: int, fn: Callable[..., Any], *args: Any) -> Call:
        if delay_us < 0:
            raise ValueError(f"negative delay {delay_us} µs")
        return Call(self, delay_us, fn, args)

    def run(self, until: int | None = None) -> None:
        """Process events until simulated time `until` (µs) or until none are left.

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
        queue, direct = self._queue, DIRECT
        while queue:
            now, _, _, event = heappop(queue)
            self._now = now
            cls = type(event)
            if cls is tuple:  # the most frequent kind: inlined
                event[0](*event[1])
                continue
            fire = direct.get(cls)
            if fire is not None:
                fire(event)
            elif event is stop:
                return
            else:
                _fire_simpy(event)

    def step(self) -> None:
        """Process one event (SimPy's `step`, with this module's dispatch)."""
        try:
            self._now, _, _, event = heappop(self._queue)
        except IndexError:
            raise EmptySchedule() from None
        fire = DIRECT.get(type(event))
        if fire is not None:
            fire(event)
        else:
            _fire_simpy(event)


def _fire_simpy(event: Any) -> None:
    """What `simpy.Environment.step` does with an event: run its callbacks, surface failures."""
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)
    if not event._ok and not hasattr(event, "_defused"):
        exc = type(event._value)(*event._value.args)
        exc.__cause__ = event._value
        raise exc

