"""Milliseconds to integer microseconds for modules that validating a scenario imports.

`ms` here is the same conversion as `sim.env.ms` (`int(round(value_ms * 1000))`, the
conversion point for config), without importing sim/env.py: that module loads SimPy and the
event queue, which `rmqsim validate` never needs. sim/env.py, compiled, keeps its own copy for
the run's callers; tests/test_cli_startup.py checks the two agree."""

from __future__ import annotations

US_PER_MS = 1_000


def ms(value_ms: float) -> int:
    """Milliseconds to integer microseconds, rounded half to even like `sim.env.ms`."""
    return int(round(value_ms * US_PER_MS))
