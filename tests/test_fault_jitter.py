"""Scripted faults with `jitter_ms` (sim/faults.py, README "Faults"; issue 25): a fault happens at
`at_ms` plus a uniform draw in [0, jitter_ms) from the seeded stream `faults.jitter`, one draw per
jittered fault in `at_ms` order; a fault without jitter happens at `at_ms` exactly. So one seed
always gives the same times, and seeds spread a fault over the window (a flush cycle in the
bundled power-loss scenarios) instead of hitting one phase.
"""

from __future__ import annotations

import pytest

from rmqsim.runner import build, start
from rmqsim.scenario.spec import from_data, load
from sim.env import ms
from sim.rng import Rng
from sim.trace import FAULT_INJECTED, field_index
from tests.conftest import ROOT

SEEDS = tuple(range(1, 9))
# listed out of time order on purpose (the draws follow at_ms order); the windows do not overlap
FAULTS = [
    {"at_ms": 9_000, "jitter_ms": 500, "kind": "pause", "node": "broker-a", "duration_ms": 1},
    {"at_ms": 2_000, "jitter_ms": 3_000, "kind": "heal"},
    {"at_ms": 5_500, "kind": "pause", "node": "broker-a", "duration_ms": 1},  # no jitter: exactly at 5.5 s
    {"at_ms": 7_000, "jitter_ms": 0.002, "kind": "heal"},  # 2 µs: 0 or 1 µs late
]


def tiny(faults: list[dict]) -> dict:
    return {"name": "jitter", "duration_ms": 12_000, "settle_ms": 0,
            "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 1}]},
            "faults": faults}


def injected(sc, seed: int, until_us: int) -> list[tuple[int, str, str]]:
    """(time, fault kind, target) of every fault injected before `until_us`, in time order."""
    w = build(sc, seed, keep_records=True)
    start(w)
    w.env.run(until=until_us)
    fault, target = field_index(FAULT_INJECTED, "fault"), field_index(FAULT_INJECTED, "target")
    return [(r[0], r[fault], r[target]) for r in w.env.tracer.of_kind(FAULT_INJECTED)]


def expected_times(seed: int) -> list[int]:
    """The documented draws, recomputed: stream `faults.jitter` of the seed, in at_ms order."""
    stream = Rng(seed).stream("faults.jitter")
    times = []
    for f in sorted(FAULTS, key=lambda f: f["at_ms"]):
        at = ms(f["at_ms"])
        times.append(at + int(stream.random() * ms(f["jitter_ms"])) if f.get("jitter_ms") else at)
    return sorted(times)


@pytest.fixture(scope="module")
def times() -> dict[int, list[int]]:
    return {seed: [t for t, _k, _n in injected(from_data(tiny(FAULTS), "jitter"), seed, 12_000_000)]
            for seed in SEEDS}


def test_each_fault_happens_at_its_seeded_draw_within_the_window(times) -> None:
    windows = sorted((ms(f["at_ms"]), ms(f["at_ms"]) + max(ms(f.get("jitter_ms", 0)), 1)) for f in FAULTS)
    for seed in SEEDS:
        assert times[seed] == expected_times(seed), seed
        assert len(times[seed]) == len(FAULTS)
        # the windows do not overlap, so the i-th fault in time is the i-th window
        assert all(lo <= t < hi for t, (lo, hi) in zip(times[seed], windows, strict=True)), (seed, times[seed])


def test_one_seed_gives_the_same_times_and_seeds_spread_them(times) -> None:
    sc = from_data(tiny(FAULTS), "jitter")
    assert [t for t, _k, _n in injected(sc, 3, 12_000_000)] == times[3]
    for i, f in enumerate(sorted(FAULTS, key=lambda f: f["at_ms"])):
        per_seed = [times[seed][i] for seed in SEEDS]
        if f.get("jitter_ms", 0) >= 1:  # ms-wide windows: every seed draws its own time
            assert len(set(per_seed)) == len(SEEDS), (f, per_seed)
            assert min(per_seed) > ms(f["at_ms"])
        elif not f.get("jitter_ms"):
            assert set(per_seed) == {ms(f["at_ms"])}
    # over 8 seeds the 3 s window is not hit in one narrow phase
    heal = [times[seed][0] - 2_000_000 for seed in SEEDS]
    assert max(heal) - min(heal) > 1_000_000, heal


@pytest.mark.parametrize("name", ["power_loss_async_flush", "transient_store_pool_crash"])
def test_bundled_crash_scenarios_spread_the_fault_over_the_flush_or_commit_cycle(name: str) -> None:
    """The bundled power loss (15 s + up to 500 ms, one ASYNC_FLUSH interval) and kill -9 (15 s +
    up to 200 ms, one commit interval) land at a different instant of the cycle for each seed."""
    sc = load(ROOT / "scenarios" / f"{name}.yaml")
    (spec,) = [f for f in sc.faults if f.jitter_ms]
    lo, hi = ms(spec.at_ms), ms(spec.at_ms) + ms(spec.jitter_ms)
    at = {}
    for seed in (1, 2, 3):
        (fault,) = [x for x in injected(sc, seed, hi) if x[1] == spec.kind]
        at[seed] = fault[0]
        assert lo <= at[seed] < hi and fault[2] == spec.node
        stream = Rng(seed).stream("faults.jitter")
        assert at[seed] == lo + int(stream.random() * ms(spec.jitter_ms))
    assert len(set(at.values())) == 3, at
