"""Simulated clock and cheap callbacks on top of SimPy.

`SimEnv.now` is an integer number of **microseconds**. RocketMQ's settings are in milliseconds;
they are converted once, with `ms()`, where a model reads them. SimPy breaks ties between events
at the same time in scheduling order (FIFO), which makes integer time fully deterministic.

Most of the model is written as callbacks rather than SimPy processes: a process costs a
generator plus an `Initialize` event, a callback costs one heap entry. `SimEnv.call_later`
schedules one.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.core import NORMAL

US_PER_MS = 1_000
US_PER_S = 1_000_000


def ms(value_ms: float) -> int:
    """Milliseconds to integer microseconds (the only ms→µs conversion point for config)."""
    return int(round(value_ms * US_PER_MS))


def us_to_ms(value_us: int) -> float:
    return value_us / US_PER_MS


class Call:
    """A scheduled function call; `cancel()` makes it a no-op. One heap entry, no process.

    Not a simpy.Event subclass: `Environment.step` only needs `callbacks` and `_ok`, and a
    slotted object is cheaper to build on the hot path.
    """

    __slots__ = ("callbacks", "_ok", "_value", "fn", "args")

    def __init__(self, env: simpy.Environment, delay_us: int, fn: Callable[..., Any], args: tuple) -> None:
        self.callbacks = [_fire]
        self._value = None
        self._ok = True
        self.fn = fn
        self.args = args
        heappush(env._queue, (env._now + delay_us, NORMAL, next(env._eid), self))  # = env.schedule

    def cancel(self) -> None:
        self.fn = None


def _fire(event: Call) -> None:
    fn = event.fn
    if fn is not None:
        fn(*event.args)


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

    def timeout_us(self, delay_us: int) -> simpy.Timeout:
        return self.timeout(int(delay_us))
