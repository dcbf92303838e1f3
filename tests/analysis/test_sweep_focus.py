"""A sweep report's question without Spark: the focus declared or inferred from what varies, the
metrics zero everywhere or unchecked, rates pooled per point, marginal and cell, coverage and
quiescence summaries (analysis/reports/focus.py, analysis/sweeps/aggregate.py), on fabricated runs rows."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.checkers.run_rows import end_state_columns
from analysis.reports import focus
from analysis.sweeps import aggregate
from analysis.sweeps.aggregate import METRICS, SweepData
from analysis.sweeps.stats import poisson_score, wilson


def run(point: int, seed: int, flush: str, rate: int, lost: int = 0, dups: int = 0, acked: int = 1000,
        **extra: object) -> dict:
    """One ok run's row: losses all `unflushed_at_power_loss`, duplicates all `rebalance`."""
    row = {"run_id": f"p{point:04d}-s{seed}", "point": point, "point_key": f"flush={flush},rate={rate}",
           "seed": seed, "status": "ok", "verdict": "valid" if not lost else "invalid", "flush": flush,
           "rate": rate, "lost": lost, "duplicates": dups, "acked_deliveries": acked, "sent_ok": acked,
           "order_violations": None, "txn_violations": None, "txn_transactions": None,
           "lost_by_cause_unflushed_at_power_loss": lost, "lost_by_cause_other": 0,
           "duplicates_by_cause_rebalance": dups, "duplicates_by_cause_consumer_crash": 0}
    row.update(extra)
    return row


def sweep(rows: list[dict], params: tuple[str, ...] = ("flush", "rate")) -> SweepData:
    histograms = {r["point"]: {600 + r["point"]: 10, 700: 1} for r in rows}  # p99 grows with the point
    return SweepData(pd.DataFrame(rows), list(params), histograms)


LOSS_SWEEP = [run(p, s, flush, rate, lost=(30 + s + rate // 10) if flush == "ASYNC_FLUSH" else 0, dups=5 + s)
              for p, (flush, rate) in enumerate([("ASYNC_FLUSH", 100), ("ASYNC_FLUSH", 250),
                                                 ("SYNC_FLUSH", 100), ("SYNC_FLUSH", 250)])
              for s in (1, 2, 3)]


def test_loss_that_switches_on_with_a_parameter_is_inferred_as_the_focus() -> None:
    data = sweep(LOSS_SWEEP)
    stats = aggregate.point_stats(data)
    chosen = focus.choose(data, stats, None)
    assert chosen.name == "loss" and not chosen.declared
    assert "loss varies most across points" in chosen.reason and "relative spread 100%" in chosen.reason
    assert "also varying: duplicates" in chosen.reason
    assert chosen.varying == ["duplicates"] and chosen.zero == []
    assert chosen.unchecked == {"order": "no orderly consumer group", "transactions": "no transactional producer"}
    assert focus.unchecked_line(chosen) == ("not checked in any run: order violations (no orderly consumer group), "
                                            "transaction violations (no transactional producer)")


def test_duplicates_alone_varying_is_the_focus_and_zero_loss_is_one_line() -> None:
    rows = [run(p, s, f, r, dups=(p + 1) * 10 + s) for p, (f, r) in enumerate([("A", 1), ("A", 2), ("B", 1)])
            for s in (1, 2)]
    data = sweep(rows)
    chosen = focus.choose(data, aggregate.point_stats(data), None)
    assert chosen.name == "duplicates" and chosen.zero == ["loss"] and chosen.varying == []
    assert focus.zero_line(chosen) == "zero in every run: loss"


def test_nothing_varying_makes_latency_the_focus_and_a_declared_focus_wins() -> None:
    rows = [run(p, s, f, r, dups=4) for p, (f, r) in enumerate([("A", 1), ("B", 1)]) for s in (1, 2)]
    data = sweep(rows)
    stats = aggregate.point_stats(data)
    chosen = focus.choose(data, stats, None)
    assert chosen.name == "latency" and "do not vary across runs" in chosen.reason
    assert chosen.varying == ["duplicates"]  # constant, not zero: still drawn after the focus
    declared = focus.choose(data, stats, "loss")
    assert declared.name == "loss" and declared.declared and "declared in the sweep file" in declared.reason
    assert declared.zero == ["loss"]  # the page then says so instead of drawing it


def test_a_single_point_infers_from_the_spread_across_seeds() -> None:
    rows = [run(0, s, "A", 1, lost=s * 3, dups=2) for s in (1, 2, 3)]
    data = sweep(rows, params=())
    chosen = focus.choose(data, aggregate.point_stats(data), None)
    assert chosen.name == "loss" and "across runs (one point)" in chosen.reason


def test_pooled_rates_and_intervals_per_point_marginal_and_cell() -> None:
    """Events over exposure summed over the runs (Wilson for loss, Poisson score for duplicates);
    a marginal pools the other parameter, a cell the seeds."""
    data = sweep(LOSS_SWEEP)
    stats = aggregate.point_stats(data)
    first = stats[0]
    lost = sum(r["lost"] for r in LOSS_SWEEP if r["point"] == 0)
    assert first["loss"]["mean"] == pytest.approx(lost / 3000)
    assert (first["loss"]["lo"], first["loss"]["hi"]) == pytest.approx(wilson(lost, 3000))
    assert first["loss"]["causes"] == {"unflushed_at_power_loss": lost, **{c: 0 for c in METRICS["loss"].causes
                                                                          if c != "unflushed_at_power_loss"}}
    dups = sum(r["duplicates"] for r in LOSS_SWEEP if r["point"] == 0)
    assert (first["duplicates"]["lo"], first["duplicates"]["hi"]) == pytest.approx(poisson_score(dups, 3000))
    assert stats[2]["loss"]["mean"] == 0 and stats[2]["loss"]["hi"] > 0  # none lost still has a bound
    assert first["order"]["mean"] is None and first["order"]["runs"] == 0  # not checked, not 0
    assert first["passed"] == 0 and first["invalid"] == 3 and stats[2]["passed"] == 3
    by_flush = aggregate.marginals(data, "flush", METRICS["loss"])
    assert [m["value"] for m in by_flush] == ["ASYNC_FLUSH", "SYNC_FLUSH"] and by_flush[0]["pooled_over"] == ["rate"]
    assert by_flush[0]["events"] == sum(r["lost"] for r in LOSS_SWEEP if r["flush"] == "ASYNC_FLUSH")
    assert by_flush[0]["exposure"] == 6000 and by_flush[0]["runs"] == 6
    cells = aggregate.cells(data, "flush", "rate", METRICS["loss"])
    assert [(c["row"], c["col"], c["runs"]) for c in cells] == [("ASYNC_FLUSH", 100, 3), ("ASYNC_FLUSH", 250, 3),
                                                                 ("SYNC_FLUSH", 100, 3), ("SYNC_FLUSH", 250, 3)]
    latency = aggregate.cells(data, "flush", "rate", None)
    assert latency[0]["latency_ms"]["p50"] < latency[3]["latency_ms"]["p50"]  # merged histograms of each cell


def test_failed_runs_are_counted_not_pooled() -> None:
    rows = [*LOSS_SWEEP[:3], {"run_id": "p0000-s9", "point": 0, "point_key": "flush=ASYNC_FLUSH,rate=100",
                              "seed": 9, "status": "failed", "flush": "ASYNC_FLUSH", "rate": 100,
                              "error": "ValueError: boom", "repro": "rmqsim run x --seed 9"}]
    data = sweep(rows)
    (only,) = aggregate.point_stats(data)
    assert only["runs"] == 4 and only["failed"] == 1 and only["loss"]["runs"] == 3
    failing = aggregate.failing_runs(data, limit=10)
    assert failing["total"] == 4 and failing["rows"][-1]["error"] == "ValueError: boom"  # 3 invalid + 1 failed
    assert aggregate.failed_runs(data) == [{"run_id": "p0000-s9", "error": "ValueError: boom",
                                            "repro": "rmqsim run x --seed 9"}]


def test_coverage_counts_runs_reaching_each_point() -> None:
    rows = [run(0, 1, "A", 1, coverage={"pull_held": 5, "power_loss_tail": 0, "lock_expired": 0}),
            run(0, 2, "A", 1, coverage={"pull_held": 2, "power_loss_tail": 1, "lock_expired": 0}),
            run(0, 3, "A", 1, coverage=None)]  # an older rmqsim's row: not counted
    cov = aggregate.coverage(sweep(rows))
    assert cov == {"runs": 2, "points": {"lock_expired": {"runs": 0, "times": 0},
                                         "power_loss_tail": {"runs": 1, "times": 1},
                                         "pull_held": {"runs": 2, "times": 7}}}
    assert aggregate.coverage(sweep([run(0, 1, "A", 1)])) is None  # no row recorded it


def test_quiescence_counts_unquiet_runs_and_what_moved() -> None:
    rows = [run(0, 1, "A", 1, quiescence_reached=True, quiescence_unsettled={}),
            run(0, 2, "A", 1, quiescence_reached=False, quiescence_unsettled={"rebalances": 2, "backlog": 0}),
            run(0, 3, "A", 1, quiescence_reached=False, quiescence_unsettled={"rebalances": 1, "duplicates": 4}),
            run(0, 4, "A", 1, quiescence_reached=None)]
    data = sweep(rows)
    q = aggregate.quiescence(data)
    assert (q["runs"], q["quiet"], q["unquiet"], q["unjudged"]) == (4, 1, 2, 1)
    assert q["moving_runs"] == {"rebalances": 2, "duplicates": 1} and q["unquiet_ids"] == ["p0000-s2", "p0000-s3"]
    assert aggregate.point_stats(data)[0]["unquiet"] == 2


def test_run_rows_carry_coverage_and_quiescence_or_nulls_for_older_summaries() -> None:
    summary = {"coverage": {"pull_held": 3, "power_loss_tail": 0},
               "quiescence": {"reached": False, "settle": "fixed", "at_ms": 61_000, "window_ms": 60_000,
                              "checked_at_ms": 90_000, "unsettled": {"rebalances": 1}},
               "failovers": 1, "unwritable_s": {"broker-a": 11.5}}
    assert end_state_columns(summary) == {
        "coverage": {"pull_held": 3, "power_loss_tail": 0}, "quiescence_unsettled": {"rebalances": 1},
        "quiescence": {"reached": False, "settle": "fixed", "at_ms": 61_000, "window_ms": 60_000},
        "failovers": 1, "unwritable_s": {"broker-a": 11.5}}
    assert end_state_columns({}) == {"coverage": None, "quiescence_unsettled": None, "quiescence": dict.fromkeys(
        ("reached", "settle", "at_ms", "window_ms")), "failovers": None, "unwritable_s": None}
