"""Repro cards (analysis/sweeps/repro_card.py): `rmqsim run` writes RUN_DIR/repro.md exactly for an invalid
or unknown run — seed, digests, version, the replay command with --trace, each failure, the first
message of each failing cause with its explanation — and lists it in the run's manifest; a sweep
writes DIR/repro/<run_id>.md for each failing run, lists it in the run's row, keeps it through a
resume and --replace rules, and its report links each failing row to its card."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import repro_card
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import load_sweep
from analysis.sweeps.sweep import manifest, run_sweep, tasks
from analysis.sweeps.task import execute
from tests.analysis.test_run_report import CRASH_STORY
from tests.analysis.test_sweep import CRASH, SHORT, write_sweep
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # a sweep and its report, about 20 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)

SHORT_SET = ("--set", "duration_ms=4s", "--set", "settle_ms=3s")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`rmqsim ARGS` in a process of its own, in `cwd` (a card is written by the command as users run it)."""
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], capture_output=True, text=True, cwd=str(cwd),
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def invalid_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The crash story with its trace: invalid (lost messages, duplicates above the expectation)."""
    folder = tmp_path_factory.mktemp("invalid_run")
    (folder / "s.yaml").write_text(CRASH_STORY)
    done = cli("run", "s.yaml", "--trace", "--out", "out", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"repro card: {Path('out') / 'repro.md'}" in done.stdout
    return folder / "out"


def _card_fields(run: Path, card: str) -> None:
    summary = json.loads((run / "summary.json").read_text())
    meta = json.loads((run / "run_meta.json").read_text())
    assert card.startswith(f"# Repro card: {summary['scenario']}, seed {summary['seed']} — verdict {summary['verdict']}")
    assert f"| seed | {summary['seed']} |" in card
    assert f"`{summary['scenario_sha256']}`" in card and f"`{summary['trace_sha256']}`" in card
    assert f"`{meta['simulator_sha256']}`" in card
    assert re.search(r"\| version \| rmqsim \S+", card)
    for failure in summary["failures"]:
        assert f"- {failure}" in card


def test_an_invalid_run_writes_its_card(invalid_run: Path) -> None:
    card = (invalid_run / "repro.md").read_text()
    _card_fields(invalid_run, card)
    assert "```sh\nrmqsim run s.yaml --seed 1 --trace\n```" in card
    summary = json.loads((invalid_run / "summary.json").read_text())
    causes = repro_card.failing_causes(summary)
    assert {(kind, cause) for kind, cause, _n, _keys in causes} >= {("duplicate", c) for c, n in
                                                                    summary["duplicates_by_cause"].items() if n}
    for kind, cause, count, keys in causes:  # the first message of each, explained from the trace
        heading = {"lost": "lost", "duplicate": "duplicate delivery", "order": "order violation"}[kind]
        assert f"### {heading}: `{cause}` ({count:,})" in card
        assert f"First message `{keys[0]}`" in card
        assert f"`rmqsim explain out {keys[0]}`:" in card  # RUN_DIR as the command named it
        assert re.search(rf"```text\n{re.escape(keys[0])} \(msg_id \d+\): producer p-\d", card)
    assert "verdict (billing):" in card
    listed = json.loads((invalid_run / ".rmqsim-manifest.json").read_text())
    assert listed["complete"] and "repro.md" in listed["files"]
    assert listed["files"]["repro.md"]["size"] == (invalid_run / "repro.md").stat().st_size


def test_a_valid_run_writes_no_card_and_replace_removes_an_old_one(invalid_run: Path, tmp_path: Path) -> None:
    """--replace over the invalid run (its card included) with a valid one: no card is left."""
    out = tmp_path / "out"
    done = cli("run", str(ROOT / "scenarios" / "baseline.yaml"), *SHORT_SET, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (out / "repro.md").exists() and "repro card" not in done.stdout
    import shutil

    again = tmp_path / "again"
    shutil.copytree(invalid_run, again, symlinks=True)
    done = cli("run", str(ROOT / "scenarios" / "baseline.yaml"), *SHORT_SET, "--out", str(again), "--replace",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (again / "repro.md").exists()
    assert "repro.md" not in json.loads((again / ".rmqsim-manifest.json").read_text())["files"]


def test_a_users_repro_md_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "repro.md").write_text("my notes")
    done = cli("run", str(ROOT / "scenarios" / "baseline.yaml"), *SHORT_SET, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 2 and "repro.md" in done.stderr
    assert (out / "repro.md").read_text() == "my notes"


def test_an_unknown_run_writes_its_card_with_the_bound(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(CRASH_STORY)
    done = cli("run", "s.yaml", "--max-events", "20000", "--out", "out", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    card = (tmp_path / "out" / "repro.md").read_text()
    _card_fields(tmp_path / "out", card)
    assert "verdict unknown" in card and "rmqsim run s.yaml --seed 1 --trace --max-events 20000" in card
    assert "run stopped at its max_events bound" in card
    assert "No message-level cause: nothing was judged (the run stopped at a bound)." in card


# ---------------------------------------------------------------- sweeps

def _sweep(folder: Path, **extra: object) -> Path:
    """Two points of the consumer-crash story: duplicates allowed up to 0 (invalid) or a million."""
    return write_sweep(folder, "cards", set={**SHORT, "faults": CRASH},
                       grid={"dupmax": {"key": "expect.duplicates.max", "values": [0, 1_000_000]}}, seeds=[1],
                       **extra)


def test_sweep_task_writes_and_lists_cards_of_failing_runs(tmp_path: Path) -> None:
    """In the executor (no Spark): the invalid run's row lists repro/<run_id>.md, the valid one's
    none; a run stopped at a bound gets a card with the bound; a resume keeps them; --replace
    deletes them, and refuses a file of the user's in repro/."""
    sweep = load_sweep(_sweep(tmp_path))
    out = tmp_path / "out"
    sweep_dir.prepare(out, manifest(sweep))
    invalid, valid = tasks(sweep, out)
    for task in (invalid, valid):
        assert execute(task)["status"] == "ok"
    row = pq.read_table(out / store.RUNS / "p0000-s1.parquet").to_pylist()[0]
    assert row["verdict"] == "invalid" and [f["path"] for f in row["output_files"]] == ["repro/p0000-s1.md"]
    card = (out / "repro" / "p0000-s1.md").read_text()
    assert card.startswith("# Repro card: restart_consumer, seed 1 — verdict invalid")
    assert f"{invalid['repro']} --trace\n" in card and "| parameter `dupmax` | `0` |" in card
    assert "expect duplicates: duplicates = " in card and "First message `p-" in card
    assert pq.read_table(out / store.RUNS / "p0001-s1.parquet").to_pylist()[0]["output_files"] == []
    assert not (out / "repro" / "p0001-s1.md").exists()

    stopped = dict(invalid, run_id="p0000-s7", seed=7, max_events=3000, repro=invalid["repro"].replace("--seed 1",
                                                                                                      "--seed 7"))
    assert execute(stopped)["status"] == "failed"
    card = (out / "repro" / "p0000-s7.md").read_text()
    assert "StoppedAtBound" in card and "--seed 7 --set" in card and "--trace --max-events 3000" in card

    assert sweep_dir.completed(out, sweep.digest()) == {"p0000-s1": "ok", "p0001-s1": "ok", "p0000-s7": "failed"}
    (out / "repro" / "notes.md").write_text("mine")
    with pytest.raises(sweep_dir.ForeignDirectory, match="notes.md"):
        sweep_dir.prepare(out, {**manifest(sweep), "digest": "another"}, replace=True)
    assert (out / "repro" / "p0000-s1.md").exists()
    (out / "repro" / "notes.md").unlink()
    sweep_dir.prepare(out, {**manifest(sweep), "digest": "another"}, replace=True)
    assert not (out / "repro").exists() and not (out / store.RUNS).exists()


def test_sweep_report_links_failing_rows_to_their_cards(spark, tmp_path: Path) -> None:
    from analysis.reports.sweep_report import build_report

    path = _sweep(tmp_path)
    out = tmp_path / "out"
    outcome = run_sweep(load_sweep(path), out, master="local[2]", parallelism=2, progress=io.StringIO())
    assert outcome.failed == [] and sorted(p.name for p in (out / "repro").iterdir()) == ["p0000-s1.md"]
    page = build_report(out, tmp_path / "elsewhere", master="local[2]").read_text()
    row = re.search(r'<tr id="failing-p0000-s1">(.*?)</tr>', page, re.S)
    assert row and "invalid" in row.group(1) and "expect duplicates" in row.group(1)
    link = re.search(r'<a class="repro-card" href="([^"]+)">repro/p0000-s1.md</a>', row.group(1))
    assert link and (tmp_path / "elsewhere" / link.group(1)).resolve() == (out / "repro" / "p0000-s1.md").resolve()
    assert 'id="failing-p0001-s1"' not in page


# ---------------------------------------------------------------- the card's parts, without a run

SUMMARY = {"scenario": "s", "seed": 3, "verdict": "invalid", "scenario_sha256": "a" * 64, "trace_sha256": "b" * 64,
           "failures": ["at_least_once(g): 3 acknowledged message(s) never consumed",
                        "expect duplicates_by_cause.rebalance: duplicates_by_cause.rebalance = 2, expected <= 0",
                        "expect latency_ms.p99: latency_ms.p99 = 80, expected <= 50", "transactional atomicity: 1"],
           "guarantees": [{"group": "g", "guarantee": "at_least_once", "ok": False},
                          {"group": "g", "guarantee": "per_key_order", "ok": True}],
           "expectations": [{"metric": "duplicates_by_cause.rebalance", "ok": False},
                            {"metric": "latency_ms.p99", "ok": False}, {"metric": "duplicates", "ok": True}],
           "lost_by_cause": {"unflushed_at_power_loss": 3, "other": 0},
           "lost_sample": {"unflushed_at_power_loss": ["p-1-5", "p-1-9"]},
           "duplicates_by_cause": {"rebalance": 2, "consumer_crash": 4},
           "duplicate_sample": {"rebalance": ["p-2-7"], "consumer_crash": ["p-1-1"]},
           "order_violations_by_cause": {"send_side": 5}, "order_violation_sample": {"send_side": ["p-1-3"]},
           "txn_violations": 1, "txn": {"committed_lost_causes": {"half_lost": 1}, "rolled_back_visible": 0}}


def test_failing_causes_are_those_of_what_failed() -> None:
    """A broken at-least-once: its loss causes; a failed expectation on one duplicate cause: that
    cause (not consumer_crash, which no check failed on); order held: none; a latency expectation:
    no message cause; a transaction violation: its committed-lost causes."""
    assert repro_card.failing_causes(SUMMARY) == [("lost", "unflushed_at_power_loss", 3, ["p-1-5", "p-1-9"]),
                                                  ("duplicate", "rebalance", 2, ["p-2-7"]),
                                                  ("txn", "half_lost", 1, [])]


def test_the_explain_hook_and_its_fallback() -> None:
    """With an explainer, each cause's first message is explained (a cause without a sample asks
    the engine for its first message); an engine that fails leaves the ids and the command."""
    asked = []

    def message(key: str) -> str:
        asked.append(key)
        return f"{key} (msg_id 1): the story of {key}"
    card = repro_card.card_text(SUMMARY, "rmqsim run s.yaml --seed 3", simulator="c" * 64, where="runs/x",
                                explain=repro_card.Explainer(message, lambda cause: "p-3-1"))
    assert asked == ["p-1-5", "p-2-7", "p-3-1"]
    assert "`rmqsim explain runs/x p-3-1`:\n\n```text\np-3-1 (msg_id 1): the story of p-3-1\n```" in card
    assert "### transaction: `half_lost` (1)" in card and "rmqsim run s.yaml --seed 3 --trace" in card
    assert all(f"- {f}" in card for f in SUMMARY["failures"])

    def broken(key: str) -> str:
        raise RuntimeError("engine under construction")
    card = repro_card.card_text(SUMMARY, "rmqsim run s.yaml --seed 3", simulator="c" * 64, where="runs/x",
                                explain=repro_card.Explainer(broken, lambda cause: None))
    assert "Explain it: `rmqsim explain RUN_DIR p-1-5`" in card and "```text" not in card
    assert "`rmqsim explain RUN_DIR --cause half_lost` lists its messages" in card
    assert repro_card.card_text({**SUMMARY, "verdict": "valid"}, "x", simulator=None, where="w") and \
        not repro_card.needs_card({**SUMMARY, "verdict": "valid"})
