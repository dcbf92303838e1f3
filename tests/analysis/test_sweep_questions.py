"""Two small real sweeps, each asking the report a question issue 39 says it could not answer:

- a POP consumer's invisible time (scenarios/pop_consumer_crash.yaml: a consumer killed while it holds
  messages) with `report: {focus: latency_ms.max}`: the report opens with the max latency, which
  grows with the invisible time, and infers that focus too when none is declared;
- the offset persist interval, which the lint calls inert, on a consumer crash whose duplicates
  come in bursts (scenarios/restart_consumer.yaml): each point's interval is the run-level one, and
  contains the bootstrap interval over its runs (computed here), while the per-message Poisson one
  does not; the report says the swept parameter is inert.

Runs are short (0.1 to 1.5 s of wall time each), six per sweep on local[2] (two local workers, no
JVM; the reports read the tables with Arrow); bounds, not pinned numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as ds
import pytest
import yaml

from rmqsim import cli
from tests.conftest import ROOT

# two whole sweeps and their reports (about 140 s): run by scripts/test.sh --slow, not in CI
pytestmark = pytest.mark.slow

INVISIBLE_MS = (10_000, 20_000, 40_000)


def run(folder: Path, doc: dict[str, Any]) -> tuple[Path, Any]:
    from analysis.sweeps.spec import load_sweep
    from analysis.sweeps.sweep import run_sweep

    path = folder / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    outcome = run_sweep(load_sweep(path), folder / "out", master="local[2]")
    assert outcome.ran == 6 and not outcome.failed, outcome
    return folder / "out", outcome


@pytest.fixture(scope="module")
def invisible(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    return run(tmp_path_factory.mktemp("invisible"), {
        "name": "invisible", "base": str(ROOT / "scenarios" / "pop_consumer_crash.yaml"),
        "grid": {"invisible_ms": {"key": "consumers[0].pop.invisible_duration_ms", "values": list(INVISIBLE_MS)}},
        "seeds": 2, "report": {"focus": "latency_ms.max"}})


@pytest.fixture(scope="module")
def inert(tmp_path_factory: pytest.TempPathFactory, invisible) -> tuple[Path, Any]:
    return run(tmp_path_factory.mktemp("inert"), {
        "name": "inert", "base": str(ROOT / "scenarios" / "restart_consumer.yaml"), "set": {"duration_ms": "30s"},
        "grid": {"persist_ms": {"key": "consumers[0].client.persist_consumer_offset_interval_ms",
                                "values": [1000, 2000]}},
        "seeds": 3, "report": {"focus": "duplicates"}})


def runs_table(out: Path) -> list[dict[str, Any]]:
    return ds.dataset(out / "runs", format="parquet").to_table().to_pylist()


def report(out: Path, spark: Any, folder: Path, focus: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    from analysis.reports.sweep_report import build_report

    page = build_report(out, folder, spark=spark, focus=focus).read_text()
    return page, json.loads((folder / "points.json").read_text())


def test_a_declared_max_latency_focus_opens_the_report_in_order_of_the_invisible_time(invisible, tmp_path) -> None:
    out, outcome = invisible
    page, points = report(out, outcome.spark, tmp_path / "report")
    assert re.findall(r'<figure id="([^"]+)"', page)[0] == "column_vs_params"
    assert "<b>Focus: end-to-end latency (send → first consume), max</b> — declared in the sweep file" in page
    means = [p["columns"]["latency_ms_max"]["mean"] / 1000 for p in points]
    assert [p["params"]["invisible_ms"] for p in points] == list(INVISIBLE_MS)
    assert means == sorted(means) and len(set(means)) == 3, means
    for invisible_ms, mean in zip(INVISIBLE_MS, means, strict=True):  # back after the invisible time and a revive
        assert invisible_ms / 1000 < mean < 1.5 * invisible_ms / 1000 + 5, (invisible_ms, mean)
    for p in points:  # the run-level interval of a column: t over the runs, around their mean
        stat = p["columns"]["latency_ms_max"]
        assert stat["n"] == 2 and stat["lo"] <= stat["min"] <= stat["max"] <= stat["hi"]


def test_without_a_declared_focus_the_max_latency_is_inferred(invisible) -> None:
    from analysis.reports.sweep_report import check_tables, gather, heatmap_axes
    from analysis.sweeps import aggregate
    from analysis.sweeps.columns import table_columns
    from analysis.sweeps.directory import read_manifest

    out, outcome = invisible
    schema, n_runs = check_tables(out, read_manifest(out)["digest"])
    assert outcome.spark is None  # a local sweep: its report reads the table with Arrow
    data = aggregate.load_local(out, ["invisible_ms"], schema, None)
    assert n_runs == len(data.runs) == 6
    view = gather(data, None, heatmap_axes(["invisible_ms"], []), columns=table_columns(schema, ["invisible_ms"]))
    assert view["focus"].name == "latency_ms.max" and not view["focus"].declared, view["focus"].reason
    assert view["stats"][0]["latency_ms"]["p99"] < 1000  # the p99 does not move: it is not the question


def test_an_unknown_focus_is_exit_2_naming_the_nearest(invisible, capsys) -> None:
    out, _outcome = invisible
    assert cli.main(["report", str(out), "--focus", "latency_ms.maxx"]) == 2  # before Spark is asked anything
    err = capsys.readouterr().err
    assert "--focus latency_ms.maxx: not a focus" in err and "nearest: latency_ms.max" in err, err


def bootstrap(events: list[int], exposure: list[int], resamples: int = 4000) -> tuple[float, float]:
    """Percentile bootstrap over the runs of the pooled rate Σ events / Σ exposure (seeded)."""
    rng = np.random.default_rng(2024)
    e, x = np.asarray(events, float), np.asarray(exposure, float)
    picks = rng.integers(0, len(e), size=(resamples, len(e)))
    rates = e[picks].sum(axis=1) / x[picks].sum(axis=1)
    return float(np.quantile(rates, 0.025)), float(np.quantile(rates, 0.975))


def test_bursty_duplicates_get_the_run_level_interval_and_the_inert_parameter_is_named(inert, tmp_path) -> None:
    out, outcome = inert
    page, points = report(out, outcome.spark, tmp_path / "report")
    rows = runs_table(out)
    burst = False
    for p in points:
        mine = sorted((r for r in rows if r["point"] == p["point"]), key=lambda r: r["seed"])
        events, exposure = [r["duplicates"] for r in mine], [r["acked_deliveries"] for r in mine]
        lo, hi = bootstrap(events, exposure)
        d = p["duplicates"]
        assert d["events"] == sum(events) and len(d["rates"]) == 3
        assert d["run_lo"] <= lo + 1e-12 and hi <= d["run_hi"] + 1e-12, (p["point"], d, (lo, hi))
        burst = burst or not (d["lo"] <= lo and hi <= d["hi"])
        if d["agree"] is False:  # then the per-message interval is not shown as one
            assert re.search(r"runs disagree \([0-9.,]+× the spread of independent messages\)", page)
    assert burst, "the runs' duplicates came in bursts: the per-message interval cannot hold the runs' spread"
    assert "Swept parameter persist_ms is one the lint calls inert ([offset-persist-decides-little]" in page
    assert "swept parameter persist_ms: the lint calls it inert" in page  # the lint section


def test_the_runs_table_says_which_runs_ran_compiled(inert) -> None:
    out, outcome = inert
    rows = runs_table(out)
    assert {type(r["compiled"]) for r in rows} == {bool}
    assert sum(r["compiled"] for r in rows) == outcome.compiled_runs
    assert all(r["availability_acked_ratio"] is not None and "unwritable_s_broker_a" in r for r in rows)
