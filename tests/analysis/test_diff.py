"""`rmqsim diff A B`: only the metrics that differ, by section and with causes; the scenario keys
that differ; run directories and sweep points alike; bad input is exit 2 with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rmqsim import cli
from rmqsim.scenario import spec as scenario_mod
from tests.analysis.test_sweep_report import fabricated_sweep
from tests.conftest import ROOT

BASE = ROOT / "scenarios" / "baseline.yaml"


def summary(sc: Any, **changes: Any) -> dict[str, Any]:
    """A run summary (the keys the diff reads; values made up)."""
    out = {"scenario": sc.name, "seed": 1, "scenario_sha256": sc.digest(), "trace_sha256": "a" * 64,
           "verdict": "valid", "failures": [], "sent_ok": 2000, "consumed": 2000, "lost": 0,
           "lost_by_cause": {"unflushed_at_power_loss": 0, "other": 0}, "duplicates": 3,
           "duplicates_by_cause": {"rebalance": 3, "consumer_crash": 0}, "duplicate_causes": {"redelivery": 3},
           "order_violations": None, "latency_ms": {"p50": 2.5, "p99": 10.0}, "wall_s": 1.25,
           "lost_sample": {"other": []}, "groups": {"billing": {"lost": 0, "duplicates": 3}},
           "send_status": {"SEND_OK": 2000}, "coverage": {"pull_held_woken_by_arrival": 10, "power_loss_unflushed_tail": 0},
           "quiescence": {"reached": True, "unsettled": {}}}
    out.update(changes)
    return out


def run_dir(folder: Path, sets: list[str], **changes: Any) -> Path:
    sc = scenario_mod.load(BASE, sets)
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary(sc, **changes)))
    (folder / "scenario.resolved.json").write_text(json.dumps(sc.model_dump(mode="json")))
    return folder


def diff(capsys: pytest.CaptureFixture, a: str, b: str) -> tuple[int, str, str]:
    code = cli.main(["diff", a, b])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("diff")
    a = run_dir(folder / "a", ["cluster.brokers[1].store.flush_disk_type=ASYNC_FLUSH"], lost=51, verdict="invalid",
                lost_by_cause={"unflushed_at_power_loss": 51, "other": 0}, failures=["at_least_once(billing): 51"],
                coverage={"pull_held_woken_by_arrival": 12, "power_loss_unflushed_tail": 1},
                quiescence={"reached": False, "unsettled": {"rebalances": 1}},
                groups={"billing": {"lost": 51, "duplicates": 3}})
    b = run_dir(folder / "b", ["cluster.brokers[1].store.flush_disk_type=SYNC_FLUSH"], trace_sha256="b" * 64,
                duplicates=5, duplicates_by_cause={"rebalance": 3, "consumer_crash": 2},
                duplicate_causes={"redelivery": 5}, lost_sample={"other": ["p-1-1"]}, wall_s=9.0)
    return a, b


def test_two_runs_differ_in_these_metrics_only(runs: tuple[Path, Path], capsys) -> None:
    code, out, err = diff(capsys, str(runs[0]), str(runs[1]))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"A: {runs[0]}  (run directory)" and "seed 1" in lines[1] and "verdict invalid" in lines[1]
    assert "resolved scenarios differ in 1 key(s):" in out
    assert "  cluster.brokers[1].store.flush_disk_type: ASYNC_FLUSH → SYNC_FLUSH" in out
    assert "\nguarantees\n" in out and "\ncoverage\n" in out and "\nquiescence\n" in out
    assert out.index("\nverdict\n") < out.index("\nguarantees\n") < out.index("\ncoverage\n")
    for line in ("lost  ", "lost_by_cause.unflushed_at_power_loss", "duplicates_by_cause.consumer_crash",
                 "groups.billing.lost", "coverage.power_loss_unflushed_tail", "quiescence.reached",
                 "quiescence.unsettled.rebalances"):
        assert f"  {line}" in out, line
    assert [x for x in lines if "lost_by_cause.unflushed_at_power_loss" in x][0].endswith("51 → 0  (−51)")
    assert [x for x in lines if x.strip().startswith("duplicates  ")][0].endswith("3 → 5  (+2)")
    for same in ("sent_ok", "latency_ms", "send_status", "lost_by_cause.other", "rebalance"):
        assert f"  {same}" not in out, same  # equal: not shown
    for skipped in ("wall_s", "lost_sample", "duplicate_causes", "trace_sha256  "):
        assert skipped not in out, skipped  # wall clock, samples, the older two-way split, identity
    assert "metric(s) differ" in lines[-1] and "equal (not shown)" in lines[-1]


def test_a_run_against_itself_and_against_a_sweep_point(runs: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    code, out, _err = diff(capsys, str(runs[0]), str(runs[0]))
    assert code == 0 and "resolved scenarios: the same" in out and "same trace sha256" in out
    assert out.splitlines()[-1].startswith("0 metric(s) differ")
    sweep = fabricated_sweep(tmp_path)
    code, out, err = diff(capsys, f"{sweep}:p0000-s1", f"{sweep}:p0003-s2")
    assert code == 0, err
    assert "(sweep point flush=ASYNC_FLUSH,rate=100)" in out and "(sweep point flush=SYNC_FLUSH,rate=250)" in out
    assert "resolved scenarios differ in 2 key(s):" in out
    assert "  cluster.brokers[0].store.flush_disk_type: ASYNC_FLUSH → SYNC_FLUSH" in out
    assert "  producers[0].rate_per_s: 100 → 250" in out
    assert "  lost_by_cause_unflushed_at_power_loss" in out and "\n  flush " not in out  # parameters: in the scenario
    code, out, _err = diff(capsys, str(runs[1]), f"{sweep}:p0002-s1")
    assert code == 0 and "present on one side only (not compared)" in out and "\n  lost " not in out


@pytest.mark.parametrize("case", ["missing", "file", "sweep-dir", "bad-id", "no-such-run", "failed-run",
                                  "damaged-summary", "no-summary", "damaged-row"])
def test_bad_input_is_exit_2_with_one_line(runs: tuple[Path, Path], tmp_path: Path, capsys, case: str) -> None:
    sweep = fabricated_sweep(tmp_path) if case in ("sweep-dir", "bad-id", "no-such-run", "failed-run",
                                                   "damaged-row") else None
    arg, expected = {
        "missing": (str(tmp_path / "nope"), "no such run directory"),
        "file": (str(runs[0] / "summary.json"), "is not a directory"),
        "sweep-dir": (str(sweep), "is a sweep directory: name one of its runs"),
        "bad-id": (f"{sweep}:../../etc", "is not a run id"),
        "no-such-run": (f"{sweep}:p0099-s1", "the sweep has no run p0099-s1"),
        "failed-run": (f"{sweep}:p0000-s1", "the run failed to run (ValueError: boom)"),
        "damaged-summary": (str(tmp_path / "damaged"), "is damaged (not the JSON rmqsim writes)"),
        "no-summary": (str(tmp_path), "is not a run directory (no summary.json)"),
        "damaged-row": (f"{sweep}:p0000-s2", "is damaged (not readable Parquet)"),
    }[case]
    if case == "failed-run":
        import pyarrow.parquet as pq

        path = sweep / "runs" / "p0000-s1.parquet"
        table = pq.read_table(path).to_pylist()[0] | {"status": "failed", "error": "ValueError: boom\n  at x"}
        pq.write_table(pq.read_table(path).from_pylist([table], schema=pq.read_schema(path)), path)
    elif case == "damaged-summary":
        shutil.copytree(runs[0], tmp_path / "damaged")
        (tmp_path / "damaged" / "summary.json").write_text('{"lost": 5')
    elif case == "damaged-row":
        path = sweep / "runs" / "p0000-s2.parquet"
        path.write_bytes(path.read_bytes()[:100])
    code, out, err = diff(capsys, str(runs[0]), arg)
    assert code == 2 and out == "", (code, out)
    assert err.startswith("rmqsim diff: ") and expected in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
