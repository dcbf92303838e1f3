"""A sweep report asked about any numeric column, without Spark: focus names checked with the nearest
valid ones (exit 2), labels and units, the inferred focus among the tail and availability metrics,
a zip drawn once against its tuples, the summary's maps as flat columns, `compiled`, the run-level
intervals and the lint over every point (analysis/sweeps/columns.py, stats.py, aggregate.py,
lint_points.py, analysis/reports/focus.py, sweep_report.py), on fabricated runs rows."""

from __future__ import annotations

import random
from pathlib import Path

import matplotlib
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from analysis.checkers.run_rows import map_columns
from analysis.reports import focus
from analysis.sweeps import aggregate, columns
from analysis.sweeps import results_store as store
from analysis.sweeps.aggregate import METRICS, SweepData
from analysis.sweeps.stats import bootstrap_ratio, chi2_95, ratio_t_interval, runs_agree
from rmqsim import cli
from tests.conftest import ROOT

matplotlib.use("Agg")
TABLE = columns.table_columns(store.runs_schema({}), [])  # the fixed columns a report can be asked about


def row(point: int, seed: int, **values: object) -> dict:
    out = {"run_id": f"p{point:04d}-s{seed}", "point": point, "point_key": f"p{point}", "seed": seed, "status": "ok",
           "verdict": "valid", "lost": 0, "duplicates": 0, "acked_deliveries": 1000, "sent_ok": 1000,
           "order_violations": None, "txn_violations": None, "txn_transactions": None, "lost_by_cause_other": 0,
           "duplicates_by_cause_rebalance": 0}
    out.update(values)
    return out


# ---------------------------------------------------------------- names, labels, units

@pytest.mark.parametrize(("name", "column", "unit", "words"), [
    ("latency_ms.max", "latency_ms_max", "ms", "end-to-end latency"),
    ("latency_ms.p999", "latency_ms_p999", "ms", "p99.9"),
    ("availability.write_outage_s.max", "availability_write_outage_s_max", "s", "write outage"),
    ("availability.recovery_s.max", "availability_recovery_s_max", "s", "time to recover"),
    ("duplicates_by_cause.invisible_time_expired", "duplicates_by_cause_invisible_time_expired", "",
     "duplicate deliveries caused by invisible_time_expired"),
    ("loss_rate", "loss_rate", "fraction", "loss rate"),
    ("txn.resolution_ms_p99", "txn_resolution_ms_p99", "ms", "transactions"),
])
def test_a_column_is_named_by_its_key_path_with_a_label_and_unit(name: str, column: str, unit: str,
                                                                 words: str) -> None:
    found = columns.find(name, TABLE)
    assert found is not None and found.column == column and found.unit == unit and words in found.label
    assert columns.find(column, TABLE) == found  # the flat column names it too
    assert columns.check_name(name) == name


def test_map_columns_are_metrics_by_key_path() -> None:
    found = columns.map_column("availability_write_outage_s_by_topic_orders")
    assert found is not None and found.name == "availability.write_outage_s.by_topic.orders" and found.unit == "s"
    assert "topic orders" in found.label
    assert columns.map_column("unwritable_s_broker_a").name == "unwritable_s.broker_a"
    assert columns.check_name("coverage.pop_revived") == "coverage.pop_revived"  # the catalogue's point
    assert columns.check_name("availability.recovery_s.by_group.billing")  # a group only the runs know


@pytest.mark.parametrize(("typed", "nearest"), [("latency_ms.maxx", "latency_ms.max"), ("latncy_ms.max", "latency_ms.max"),
                                                ("availability.write_outage.max", "availability.write_outage_s.max"),
                                                ("losses", "loss")])
def test_an_unknown_focus_names_the_nearest_valid_names(typed: str, nearest: str) -> None:
    with pytest.raises(columns.FocusError) as caught:
        columns.check_name(typed)
    assert f"nearest: {nearest}" in str(caught.value)


def test_an_unknown_focus_in_a_sweep_file_is_exit_2_naming_the_key_path(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "base": str(ROOT / "scenarios" / "baseline.yaml"),
                                    "report": {"focus": "latency_ms.maxx"}}))
    assert cli.main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "report.focus: neither a focus word" in err and "nearest: latency_ms.max" in err, err
    path.write_text(yaml.safe_dump({"name": "good", "base": str(ROOT / "scenarios" / "baseline.yaml"),
                                    "report": {"focus": "latency_ms.max"}}))
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0


# ---------------------------------------------------------------- the inferred focus

def tail_sweep(noise_ms: float, *, recovery: bool = False) -> SweepData:
    """Three points whose max latency grows 10 s, 20 s, 60 s (+ `noise_ms` between seeds), every
    correctness metric flat; with `recovery`, the recovery time moves alike."""
    rows = []
    for p, base in enumerate((13_000.0, 23_000.0, 63_000.0)):
        for s in (1, 2, 3):
            extra = {"latency_ms_max": base + noise_ms * (s - 2), "latency_ms_p99": 30.0 + s,
                     "latency_ms_p999": 45.0 + s, "invisible_ms": (10_000, 20_000, 60_000)[p]}
            if recovery:
                extra["availability_recovery_s_max"] = base / 1000 + 0.1 * s
            rows.append(row(p, s, **extra))
    return SweepData(pd.DataFrame(rows), ["invisible_ms"], {p: {600: 10} for p in range(3)})


def test_a_tail_metric_that_varies_with_the_parameter_is_the_inferred_focus() -> None:
    data = tail_sweep(noise_ms=200)
    chosen = focus.choose(data, aggregate.point_stats(data), None, columns=TABLE)
    assert chosen.kind == "column" and chosen.name == "latency_ms.max" and not chosen.declared
    assert "varies most across points" in chosen.reason and "13 s to 63 s" in chosen.reason, chosen.reason


def test_a_tail_that_moves_only_with_the_seeds_is_not_the_question() -> None:
    data = tail_sweep(noise_ms=40_000)  # the seeds spread it more than the points do
    chosen = focus.choose(data, aggregate.point_stats(data), None, columns=TABLE)
    assert chosen.name == "latency" and chosen.kind == "latency"


def test_a_tie_between_the_max_latency_and_the_recovery_time_opens_with_the_max_latency() -> None:
    data = tail_sweep(noise_ms=200, recovery=True)
    chosen = focus.choose(data, aggregate.point_stats(data), None, columns=TABLE)
    assert chosen.name == "latency_ms.max" and "availability.recovery_s.max" in chosen.reason


def test_a_varying_loss_still_comes_first() -> None:
    rows = [{**r, "lost": 10 * r["point"], "lost_by_cause_other": 10 * r["point"]}
            for r in tail_sweep(noise_ms=200).runs.to_dict("records")]
    data = SweepData(pd.DataFrame(rows), ["invisible_ms"], {p: {600: 10} for p in range(3)})
    assert focus.choose(data, aggregate.point_stats(data), None, columns=TABLE).name == "loss"


def test_a_declared_column_focus_and_an_unknown_one() -> None:
    data = tail_sweep(noise_ms=200)
    stats = aggregate.point_stats(data)
    chosen = focus.choose(data, stats, "latency_ms.p999", columns=TABLE)
    assert chosen.declared and chosen.column.column == "latency_ms_p999" and chosen.label.endswith("p99.9")
    with pytest.raises(columns.FocusError, match="nearest: latency_ms.p999"):
        focus.choose(data, stats, "latency_ms.p9999", columns=TABLE)
    assert focus.show(chosen.column, 74_418.0) == "74.4 s"


# ---------------------------------------------------------------- zip: one axis, one panel

def zip_sweep(grid: bool) -> SweepData:
    rows = []
    zipped = [(1, 1), (32, 20), (8, 4)]  # file order, not sorted
    rates = (100, 200) if grid else (None,)
    point = 0
    for rate in rates:
        for batch, threads in zipped:
            for s in (1, 2):
                values = {"batch": batch, "threads": threads, "dups": 0}
                if grid:
                    values["rate"] = rate
                rows.append(row(point, s, duplicates=batch + s, duplicates_by_cause_rebalance=batch + s,
                                latency_ms_max=1000.0 * threads + s, **values))
            point += 1
    params = (["rate"] if grid else []) + ["batch", "threads"]
    data = SweepData(pd.DataFrame(rows).drop(columns=["dups"]), params, {p: {600: 10} for p in range(point)})
    data.zipped = ["batch", "threads"]
    return data


@pytest.mark.parametrize("grid", [False, True])
def test_a_zip_is_one_axis_drawn_once_against_its_tuples(grid: bool) -> None:
    from analysis.reports import sweep_report

    data = zip_sweep(grid)
    axes = sweep_report.heatmap_axes(["rate"] if grid else [], ["batch", "threads"])
    view = sweep_report.gather(data, "duplicates", axes, columns=TABLE)
    figures = {stem: fig for _section, stem, fig in sweep_report._figures(view)}
    panels = figures["duplicates_by_cause"].axes
    assert len(panels) == (2 if grid else 1)  # never a panel per zipped key
    zip_panel = panels[-1]
    assert zip_panel.get_xlabel() == "(batch, threads)"
    assert [t.get_text() for t in zip_panel.get_xticklabels()] == ["batch=1, threads=1", "batch=32, threads=20",
                                                                    "batch=8, threads=4"]  # the file's order
    assert "pooled over threads" not in zip_panel.get_title() and "pooled over batch" not in zip_panel.get_title()
    if grid:
        assert "pooled over (batch, threads) × seeds" in panels[0].get_title()
        heat = figures["duplicates_heatmap"].axes[0]
        assert heat.get_xlabel() == "(batch, threads)" and heat.get_ylabel() == "rate"
        assert [t.get_text() for t in heat.get_xticklabels()][0] == "batch=1, threads=1"
    view = sweep_report.gather(data, "latency_ms.max", axes, columns=TABLE)
    column_panels = {stem: fig for _s, stem, fig in sweep_report._figures(view)}["column_vs_params"].axes
    assert len(column_panels) == (2 if grid else 1) and column_panels[-1].get_xlabel() == "(batch, threads)"
    import matplotlib.pyplot as plt

    plt.close("all")


# ---------------------------------------------------------------- run-level intervals

def test_the_run_level_interval_contains_the_bootstrap_over_few_runs() -> None:
    """With three to five runs the t interval over the runs holds the percentile bootstrap's (which
    cannot leave the runs' range) — seeded draws of bursty counts."""
    rng = random.Random(11)
    for _ in range(300):
        n = rng.choice([3, 4])
        exposure = [rng.randint(8_000, 12_000) for _ in range(n)]
        events = [rng.choice([0, 3, 8, 140, 300]) for _ in range(n)]
        if not sum(events):
            continue
        t = ratio_t_interval(events, exposure, proportion=False)
        boot = bootstrap_ratio(events, exposure, seed=3)
        assert t["lo"] <= boot[0] + 1e-12 and boot[1] <= t["hi"] + 1e-12, (events, exposure, t, boot)


def test_runs_agree_with_independent_messages_and_not_with_bursts() -> None:
    rng = random.Random(5)
    agree = 0
    for _ in range(400):  # Poisson counts (sums of rare independent events): the test's 95 % holds
        exposure = [10_000] * 5
        events = [sum(1 for _ in range(200) if rng.random() < 0.25) for _ in range(5)]
        agree += bool(runs_agree(events, exposure, proportion=False))
    assert agree / 400 > 0.9
    assert runs_agree([7, 139, 132], [20_000] * 3, proportion=False) is False  # restart_consumer's bursts
    assert runs_agree([5], [100], proportion=False) is None  # one run: nothing to compare
    assert chi2_95(1) == pytest.approx(3.841) and chi2_95(100) == pytest.approx(124.342, rel=1e-3)


def test_pooled_rates_carry_both_intervals_and_each_runs_rate() -> None:
    rows = [row(0, s, duplicates=d, duplicates_by_cause_rebalance=d) for s, d in ((1, 7), (2, 139), (3, 132))]
    data = SweepData(pd.DataFrame(rows), [], {0: {600: 10}})
    d = aggregate.pooled(data, data.ok, METRICS["duplicates"])
    assert d["rates"] == [0.007, 0.139, 0.132] and d["agree"] is False and d["overdispersion"] > 10
    assert d["run_lo"] < d["lo"] and d["hi"] < d["run_hi"]  # bursts: the runs say far less than the messages


# ---------------------------------------------------------------- the runs table's flat map columns

def test_summary_maps_become_flat_columns_in_the_runs_file(tmp_path: Path) -> None:
    summary = {"coverage": {"pop_revived": 3}, "unwritable_s": {"broker-a": 11.9},
               "availability": {"sends": 10, "acked": 9, "acked_ratio": 0.9,
                                "write_outage_s": {"max": 43.0, "by_topic": {"TopicTest": 43.0}},
                                "read_outage_s": {"max": 5.0, "by_group": {"g": 5.0}},
                                "recovery_s": {"max": None, "by_group": {"g": None, "g-1": 2.0, "g_1": 3.0}},
                                "not_recovered": ["group g"], "faults": []}}
    flat = map_columns(summary)
    assert flat == {"coverage_pop_revived": 3, "unwritable_s_broker_a": 11.9,
                    "availability_write_outage_s_by_topic_topictest": 43.0,
                    "availability_read_outage_s_by_group_g": 5.0, "availability_recovery_s_by_group_g": None,
                    "availability_recovery_s_by_group_g_1": 3.0}  # g-1 and g_1: the larger stays
    schema = store.runs_schema({})
    store.write_run_row(tmp_path, {"run_id": "p0000-s1", "status": "ok", "compiled": True,
                                   "availability": {"sends": 10, "write_outage_s": {"max": 43.0}}, **flat}, schema)
    table = pq.read_table(tmp_path / store.RUNS / "p0000-s1.parquet")
    got = table.to_pylist()[0]
    assert got["unwritable_s_broker_a"] == 11.9 and got["coverage_pop_revived"] == 3
    assert got["availability_write_outage_s_max"] == 43.0 and got["availability_sends"] == 10
    assert got["compiled"] is True and table.schema.field("compiled").type == "bool"
    assert table.schema.names[:len(schema)] == schema.names  # the fixed columns first, the run's maps after


# ---------------------------------------------------------------- the lint over every point

def write_sweep(folder: Path, persist: list[int], consume: list[int]) -> Path:
    path = folder / "lint.yaml"
    path.write_text(yaml.safe_dump({
        "name": "lint", "base": str(ROOT / "scenarios" / "restart_consumer.yaml"),
        "grid": {"persist_ms": {"key": "consumers[0].client.persist_consumer_offset_interval_ms", "values": persist},
                 "consume_ms": {"key": "consumers[0].consume_time_ms.mean", "values": consume}}, "seeds": 1}))
    return path


def test_every_point_is_linted_and_each_warning_printed_once_with_its_points(tmp_path: Path, capsys) -> None:
    """persist 1,000 ms is flagged (the default, 5,000, is not): the warning names the points by
    the parameter's value and calls the swept parameter inert."""
    from analysis.sweeps.spec import load_sweep

    path = write_sweep(tmp_path, [1000, 5000], [1, 10])
    (entry,) = [e for e in load_sweep(path).lint if e["id"] == "offset-persist-decides-little"]
    assert entry["where"] == "persist_ms=1000 (2 of 4 points)" and entry["points"] == 2
    assert entry["params"] == ["persist_ms"] and entry["inert"] is True
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert err.count("[offset-persist-decides-little]") == 1, err
    assert "at persist_ms=1000 (2 of 4 points); swept parameter persist_ms: the lint calls it inert" in err
    path = write_sweep(tmp_path, [1000, 2000], [1])
    (entry,) = [e for e in load_sweep(path).lint if e["id"] == "offset-persist-decides-little"]
    assert entry["where"].startswith("every point") and "quotes the first" in entry["where"]
