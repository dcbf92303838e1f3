"""Rare-state coverage, the mechanism: a run's counter of named "sometimes" points.

The points themselves are RocketMQ branches and live with the models (models/coverage_points.py:
the catalogue, its index constants and the summary's `coverage`); the kernel keeps only what
counts them. A run's counter (`SimEnv.coverage`) is a list of `CAPACITY` ints made before the
catalogue is known (the kernel imports nothing of the models); a model increments its point's
index on the branch itself (`cov[COV_X] += 1`: no lookup by name, no call), and the counts are
read only at the end (`counts`), never traced, so they leave the trace digest as it is. A
catalogue larger than `CAPACITY` fails at import (`check_catalogue`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

CAPACITY = 256  # points a run's counter has room for (the catalogue declares 60-odd)


class Point(NamedTuple):
    name: str  # stable snake_case name: the summary key
    branch: str  # the branch taken, in one line
    mirrors: str  # the modelled system's class and method whose branch it is


def check_catalogue(points: Sequence[Point], constants: Mapping[str, int], where: str) -> None:
    """Each point's constant is its upper-case name and its index in `points` (a point added
    without its constant, or the constants out of order, fails at import), names are unique, and
    the catalogue fits a run's counter."""
    names = [p.name for p in points]
    expected = {"COV_" + p.name.upper(): i for i, p in enumerate(points)}
    if dict(constants) != expected or len(set(names)) != len(names):
        wrong = sorted(set(constants.items()) ^ set(expected.items()))
        raise AssertionError(f"{where}: point constants out of step with POINTS: {wrong}")
    if len(points) > CAPACITY:
        raise AssertionError(f"{where}: {len(points)} points, more than sim/coverage.py's CAPACITY {CAPACITY}")


def new_counter() -> list[int]:
    """A run's counter: `CAPACITY` ints, all 0 (`SimEnv.coverage`)."""
    return [0] * CAPACITY


def counts(counter: list[int] | None, names: Sequence[str]) -> dict[str, int]:
    """Every name of a catalogue, in declaration order, with its count (0 without a counter)."""
    if counter is None:
        return {name: 0 for name in names}
    return {name: int(counter[i]) for i, name in enumerate(names)}
