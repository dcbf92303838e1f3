"""The end-of-run analysis streams over the ledger's per-message arrays (issue 41 item 5): what it
allocates beside them stays a few bytes a message, and its answers are the ones the sorted copies
gave (nearest-rank percentiles, the lag series)."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np

from analysis.checkers.percentiles import PERCENTILES, percentiles_ms
from rmqsim import runner
from rmqsim.scenario.spec import from_data

SEC_US = 1_000_000
BENCH = Path(__file__).resolve().parents[2] / "bench" / "backlog.py"


def _sorted_percentiles(values: np.ndarray) -> dict:
    ordered = np.sort(values.astype(np.int64))
    n = len(ordered)
    out = {name: int(ordered[max(0, math.ceil(q * n) - 1)]) / 1000 for name, q in PERCENTILES}
    return out | {"max": int(ordered[-1]) / 1000}


def test_owned_percentiles_are_the_sorted_ones_and_borrowed_values_stay_put() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 999, 1000, 1001, 12_345):
        for dtype in (np.int64, np.uint32, np.uint16):
            values = rng.integers(0, 60_000, n).astype(dtype)
            expected = _sorted_percentiles(values)
            before = values.copy()
            assert percentiles_ms(values) == expected
            assert np.array_equal(values, before)  # not owned: untouched
            assert percentiles_ms(values, owned=True) == expected


def _lag_from_sorted_copies(stored_us: np.ndarray, consumed_us: np.ndarray, end_us: int) -> list[int]:
    """The series as the sorted arrays gave it (searchsorted at each second's end)."""
    edges = np.arange(1, max(1, -(-end_us // SEC_US)) + 1, dtype=np.int64) * SEC_US
    lag = np.maximum(np.searchsorted(np.sort(stored_us), edges) - np.searchsorted(np.sort(consumed_us), edges), 0)
    return [int(v) for v in lag]


def test_lag_from_counts_per_second_is_the_lag_from_sorted_times() -> None:
    from analysis.checkers.consumer_metrics import SecondCounts, lag_by_second

    rng = np.random.default_rng(3)
    end_us = 37 * SEC_US + 250_000
    stored = rng.integers(0, end_us + 3 * SEC_US, 20_000)  # some after the end: never counted
    consumed = np.concatenate([stored[:15_000] + rng.integers(0, 2 * SEC_US, 15_000), [SEC_US - 1, SEC_US, 0]])
    counts_stored, counts_consumed = SecondCounts(end_us), SecondCounts(end_us)
    for part in np.array_split(stored, 4):  # part by part, as unit_metrics adds one producer at a time
        counts_stored.add(part)
    for part in np.array_split(consumed, 3):
        counts_consumed.add(part)
    assert lag_by_second(counts_stored, counts_consumed) == _lag_from_sorted_copies(stored, consumed, end_us)


def _backlog_world(messages: int) -> runner.World:
    import importlib.util

    spec = importlib.util.spec_from_file_location("backlog_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    data = bench.scenario(messages, 200_000, 4) | {"warmup_ms": 0}  # every send's RT is a sample
    return runner.build(from_data(data), seed=1)


def test_the_summary_of_a_backlog_allocates_a_few_bytes_a_message() -> None:
    """400 k stored messages nobody consumed (one idle group: every one is judged, none read):
    the summary's own allocations peak under 12 bytes a stored message (sorted copies of every
    store time and every send RT, a padded first-consumption array per producer held together,
    the lost messages' indexes and their cause lookups made it 26)."""
    messages = 400_000
    world = _backlog_world(messages)
    ledger = runner.make_ledger(world)
    world.env.tracer.keep = False
    world.env.tracer.observers.append(ledger.feed)
    runner.start(world)
    world.env.run(until=(2 + messages // 200_000) * 1_000_000 + 1_000_000)
    stored = world.models["broker-a"].commit_log.record_count
    assert stored >= messages
    tracemalloc.start()
    try:
        summary = runner.summarize(world, 1, ledger, "-", 0, world.env.now, None)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    group = summary["groups"]["late"]
    assert group["lost"] + group["unconsumed"] == summary["sent_ok"] > messages * 0.99  # every message judged
    assert group["lag_max"] >= summary["sent_ok"] - group["lost"] > 0  # the lag series was built
    assert summary["send_latency_ms"]["p50"] is not None
    assert peak_bytes / stored < 12, peak_bytes / stored
