"""The sweep report shaped by its question, on fabricated `runs` rows read through Spark: the focus
first (inferred, declared, or chosen with --focus), no figure for a metric zero in every run, the
coverage table and the unquiet runs, older rows without those columns, figures of an earlier
report removed, and `rmqsim sweep --report` in the sweep's own SparkSession (none for a local sweep)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import load_sweep
from analysis.sweeps.sweep import manifest
from rmqsim import cli
from rmqsim.scenario import spec as scenario_mod
from tests.conftest import ROOT

SWEEP = f"""
name: fabricated
base: {ROOT / "scenarios" / "baseline.yaml"}
grid:
  flush: {{key: "cluster.brokers[0].store.flush_disk_type", values: [ASYNC_FLUSH, SYNC_FLUSH]}}
  rate: {{key: "producers[0].rate_per_s", values: [100, 250]}}
seeds: 3
timeline: {{point: 1, seed: 2}}
"""
POINTS = ("power_loss_unflushed_tail", "pull_held_woken_by_arrival", "orderly_lock_expired_taken_over")


def fabricated_row(sweep: Any, point: Any, seed: int, end_state: bool = True) -> dict[str, Any]:
    """A run's row as an executor would write it: loss only under ASYNC_FLUSH, growing with the
    rate; no duplicates; the power-loss point reached where a loss happened; the seed-3 runs of
    ASYNC_FLUSH end unquiet."""
    asynchronous = point.params["flush"] == "ASYNC_FLUSH"
    lost = 20 + point.params["rate"] // 10 + seed if asynchronous else 0
    acked = 10 * point.params["rate"]
    row = {"run_id": f"p{point.index:04d}-s{seed}", "sweep": sweep.name, "sweep_digest": sweep.digest(),
           "point": point.index, "point_key": point.key, "seed": seed, "status": "ok", "output_files": [],
           "params_json": json.dumps(point.params), "scenario": "baseline",
           "repro": shlex.join(["rmqsim", "run", "base.yaml", "--seed", str(seed)]
                               + [w for item in point.overrides for w in ("--set", item)]),
           "trace_sha256": f"{point.index:02d}{seed:02d}" * 16,
           "scenario_sha256": scenario_mod.from_data(sweep.scenario_data(point)).digest(),
           **point.params, "verdict": "invalid" if lost else "valid", "sent_ok": acked, "consumed": acked - lost,
           "lost": lost, "duplicates": 0, "acked_deliveries": acked, "sim_time_ms": 30_000, "wall_s": 1.5,
           "lost_by_cause": {"unflushed_at_power_loss": lost, "other": 0}, "duplicates_by_cause": {"rebalance": 0},
           "lat_hist_bucket": [600 + point.index, 640], "lat_hist_count": [90, 10], "delivery_hist": [lost, acked - lost],
           "tl_second": [1, 2, 3], "tl_p50_ms": [1.0, 2.0, 1.0], "tl_p99_ms": [3.0, 9.0, 3.0],
           "tl_max_ms": [4.0, 12.0, 4.0], "fault_windows": [{"kind": "power_loss", "target": "broker-a",
                                                              "start_ms": 1500.0, "end_ms": 2500.0}]}
    if end_state:
        row["coverage"] = {POINTS[0]: 1 if lost else 0, POINTS[1]: 40 + seed, POINTS[2]: 0}
        unquiet = asynchronous and seed == 3
        row["quiescence"] = {"reached": not unquiet, "settle": "fixed", "at_ms": 20_000.0, "window_ms": 60_000.0}
        row["quiescence_unsettled"] = {"rebalances": 1} if unquiet else {}
    return row


def fabricated_sweep(folder: Path, end_state: bool = True) -> Path:
    path = folder / "sweep.yaml"
    path.write_text(SWEEP)
    sweep = load_sweep(path)
    out = folder / "out"
    sweep_dir.prepare(out, manifest(sweep))
    schema = store.runs_schema(sweep.param_types)
    if not end_state:  # a row of an rmqsim before coverage and quiescence
        schema = pa.schema([f for f in schema if not f.name.startswith(("coverage", "quiescence"))])
    for point in sweep.points:
        for seed in sweep.seeds:
            store.write_run_row(out, fabricated_row(sweep, point, seed, end_state), schema)
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fabricated_sweep(tmp_path_factory.mktemp("fabricated"))


@pytest.fixture(scope="module")
def reported(swept: Path, spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of the fabricated sweep's report (read by several tests, written by none)."""
    from analysis.reports.sweep_report import build_report

    return build_report(swept, tmp_path_factory.mktemp("fabricated-report") / "report", spark=spark)


def figure_ids(page: str) -> list[str]:
    return re.findall(r'<figure id="([^"]+)"', page)


def test_loss_sweep_opens_with_loss_and_draws_no_zero_metric(reported: Path) -> None:
    page = reported.read_text()
    assert figure_ids(page)[:2] == ["loss_heatmap", "loss_by_cause"]  # the focus first
    assert not [f for f in figure_ids(page) if f.startswith(("duplicates", "order", "transactions"))]
    assert page.index('id="focus"') < page.index("Per point") < page.index('id="latency"')
    assert "<b>Focus: loss</b> — inferred: loss varies most across points" in page
    assert "Zero in every run: duplicates." in page
    assert "Not checked in any run: order violations (no orderly consumer group)" in page
    assert "Loss rate [95 % t over runs] (events)" in page and "Loss rate: per-message [95 % Wilson]" in page
    assert "Duplicate-delivery rate" not in page  # no all-zero column
    assert "Latency over simulated time, run p0001-s2" in page  # the sweep's timeline run
    points = json.loads((reported.parent / "points.json").read_text())
    assert points[0]["loss"]["events"] == sum(30 + s for s in (1, 2, 3)) and points[2]["loss"]["events"] == 0
    assert points[0]["loss"]["causes"]["unflushed_at_power_loss"] == points[0]["loss"]["events"]


def test_coverage_table_and_unquiet_runs(reported: Path) -> None:
    page = reported.read_text()
    coverage = page[page.index('id="coverage"'):]
    assert "2 of 3 points reached by at least one of 12 runs." in coverage
    assert re.search(r"<code>power_loss_unflushed_tail</code></td><td[^>]*>[^<]*</td><td>6 of 12</td><td>6</td>",
                     coverage), coverage[:2000]
    assert "<td>12 of 12</td>" in coverage
    assert re.search(r'id="coverage-unreached">No run reached: <code>orderly_lock_expired_taken_over</code>', coverage)
    end = page[page.index('id="end-state"'):page.index('id="coverage"')]
    assert "10 of 12 runs ended quiet" in end and "<b>2 ended unquiet</b>" in end
    assert "rebalances in 2 runs" in end and "p0000-s3, p0001-s3" in end
    assert "runs ended unquiet</th>" in page  # a per-point column only when some run ended unquiet


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_declared_and_cli_focus_and_stale_figures(swept: Path, spark, tmp_path: Path) -> None:
    """`--focus duplicates` on a sweep without duplicates: the page opens with their bound, draws
    none; `--focus latency`: the p99 heatmap first; the loss heatmap of the earlier report goes."""
    from analysis.reports.sweep_report import ReportError, build_report

    folder = tmp_path / "report"
    page = build_report(swept, folder, spark=spark, focus="duplicates").read_text()
    assert "<b>Focus: duplicates</b> — chosen with --focus duplicates" in page
    assert figure_ids(page)[0] == "loss_by_cause" and "duplicates_by_cause" not in figure_ids(page)
    assert re.search(r"Duplicates: 0 of [0-9,]+ acknowledged messages in 12 runs: 0 % \[0 %, [0-9.]+ %\]", page)
    assert (folder / "loss_by_cause.png").exists() and not (folder / "loss_heatmap.png").exists()
    page = build_report(swept, folder, spark=spark, focus="latency").read_text()
    assert figure_ids(page)[:3] == ["latency_heatmap", "latency_vs_params", "latency_spectrum"]
    (folder / "mine.png").write_text("a user's file, never removed")
    build_report(swept, folder, spark=spark)
    assert not (folder / "latency_heatmap.png").exists() and (folder / "loss_heatmap.png").exists()
    assert (folder / "mine.png").exists()
    with pytest.raises(ReportError, match="--focus losses: not a focus"):
        build_report(swept, folder, spark=spark, focus="losses")


def test_rows_of_an_older_rmqsim_say_coverage_was_not_recorded(spark, tmp_path: Path) -> None:
    from analysis.reports.sweep_report import build_report

    out = fabricated_sweep(tmp_path, end_state=False)
    page = build_report(out, spark=spark).read_text()
    assert page.count("Not recorded by these runs (an older rmqsim)") == 2  # quiescence and coverage
    assert figure_ids(page)[0] == "loss_heatmap"


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_sweep_report_flag_uses_the_sweeps_spark_session(tmp_path: Path, capsys, monkeypatch, engine: str) -> None:
    """`rmqsim sweep --report`: one SparkSession for the runs and the report when Spark runs the
    sweep (RMQSIM_SWEEP_ENGINE=spark), none at all for a local sweep (local workers, Arrow)."""
    from analysis.sweeps import sweep as sweep_mod

    monkeypatch.setenv(sweep_mod.ENGINE_ENV, engine)
    started: list[str] = []
    real = sweep_mod.spark_session

    def counting(*args: Any, **kwargs: Any) -> Any:
        started.append(kwargs.get("purpose", "sweep"))
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_mod, "spark_session", counting)
    path = tmp_path / "tiny.yaml"
    path.write_text(f"""
name: tiny
base: {ROOT / "scenarios" / "baseline.yaml"}
set: {{duration_ms: 5s, settle_ms: 1s}}
grid:
  rate: {{key: "producers[0].rate_per_s", values: [50]}}
seeds: 1
report: {{focus: loss}}
""")
    code = cli.main(["sweep", str(path), "--out", str(tmp_path / "out"), "--parallelism", "1", "--report"])
    out = capsys.readouterr().out
    assert code == 0 and started == ([] if engine == "local" else ["sweep"]), (code, started)
    page = (tmp_path / "out" / "report" / "index.html").read_text()
    assert f"report: {tmp_path / 'out' / 'report' / 'index.html'}" in out
    assert "<b>Focus: loss</b> — declared in the sweep file (report: {focus: loss})" in page


def test_report_focus_in_the_sweep_file_is_validated_with_its_key_path(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"base: {ROOT / 'scenarios' / 'baseline.yaml'}\nname: bad\nreport: {{focus: los, colour: red}}\n")
    code = cli.main(["sweep", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert "report.focus: neither a focus word (loss, duplicates, latency, order, transactions)" in err
    assert "nearest: loss" in err
    assert "report.colour: unknown key" in err


def test_resume_takes_the_sweep_files_current_report_section(tmp_path: Path) -> None:
    """`report:` changes no result: a resumed directory takes the file's current question."""
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP)
    sweep = load_sweep(path)
    out = tmp_path / "out"
    sweep_dir.prepare(out, manifest(sweep))
    path.write_text(SWEEP + "report: {focus: latency}\n")
    again = load_sweep(path)
    assert again.digest() == sweep.digest()
    sweep_dir.prepare(out, manifest(again))
    assert sweep_dir.read_manifest(out)["report"] == {"focus": "latency"}
