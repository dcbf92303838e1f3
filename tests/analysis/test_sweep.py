"""Sweeps end to end: Spark results equal direct runs, crash/resume, validation, failed runs,
determinism re-checks (analysis/sweeps/spec.py, sweep.py, sweep_task.py, results_store.py).

Every sweep here is built on the bundled restart_consumer scenario shortened to a few simulated
seconds, so a run costs ~0.1 s of wall time (the crash/resume test uses ~0.5 s runs on purpose).
A sweep on a local master runs in local worker processes, without a JVM (fixture `scratch`: the
module's temporary files); the CLI tests start `rmqsim sweep` in their own process group and kill
every process they started (found by a marker in the environment) before they return.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import yaml

import rmqsim
from analysis.checkers.run_rows import CAUSES, LATENCY_KEYS, MAP_PREFIXES, SUMMARY_COUNTS
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import load_sweep, run_id
from analysis.sweeps.sweep import run_sweep, tasks
from analysis.sweeps.task import execute
from rmqsim.scenario import spec as scenario_mod
from sim import compiled
from sim.config import ConfigError
from tests.conftest import ROOT, scratch_env

BASE = ROOT / "scenarios" / "restart_consumer.yaml"
SHORT = {"duration_ms": "6s", "settle_ms": "4s"}
# the consumer crash and restart inside the short run: redeliveries, so duplicates are not all 0
CRASH = [{"at_ms": "4s", "kind": "process_crash", "node": "c-1"},
         {"at_ms": "5500ms", "kind": "restart", "node": "c-1"}]
# summary.json metrics the runs table carries under the same name
METRICS = (*SUMMARY_COUNTS, "scenario", "scenario_sha256", "trace_sha256",  # sub-trees as flat columns
           *(f"latency_ms_{k}" for k in LATENCY_KEYS), *(f"duplicate_causes_{c}" for c in CAUSES))
TAG_VAR = "RMQSIM_TEST_TAG"


# ---------------------------------------------------------------- helpers (also used by test_spark_standalone)

def write_sweep(folder: Path, name: str, **body: Any) -> Path:
    doc = {"name": name, "base": str(BASE), **body}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def rmqsim_cmd() -> list[str]:
    script = Path(sys.executable).parent / "rmqsim"
    return [str(script)] if script.exists() else [sys.executable, "-m", "rmqsim.cli"]


def child_env(tag: str, tmp: Path, **extra: str) -> dict[str, str]:
    """Environment for a child process tree: loopback Spark, scratch files under `tmp`, and a
    marker to find every descendant."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(ROOT), **{TAG_VAR: tag})
    env.update(scratch_env(tmp), **extra)
    return env


def tagged_pids(tag: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries the marker `tag`."""
    marker = f"{TAG_VAR}={tag}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone, or not ours
            continue
        if state not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _ppid, pgrp = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def kill_tree(proc: subprocess.Popen, tag: str, sig: int = signal.SIGKILL, grace_s: float = 0.0,
              timeout_s: float = 20.0) -> None:
    """Signal `proc`'s process group, then SIGKILL every straggler carrying `tag` (Spark's Python
    daemons make process groups of their own); returns once none is left."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    if grace_s:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout_s
    while True:
        left = sorted(set(tagged_pids(tag)) | set(group_members(proc.pid)))
        if not left:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"processes still alive after kill: {left}")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    proc.wait(timeout=10)


def visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith((".", "_"))) \
        if folder.is_dir() else []



def run_rmqsim(args: list[str], tmp_path: Path, timeout_s: float) -> subprocess.CompletedProcess:
    """`rmqsim ARGS` in its own session, to completion; nothing it started survives it."""
    tag = uuid.uuid4().hex
    proc = subprocess.Popen([*rmqsim_cmd(), *args], cwd=tmp_path, env=child_env(tag, tmp_path / "tmp"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    finally:
        kill_tree(proc, tag)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

def read_runs(out_dir: Path) -> dict[str, dict[str, Any]]:
    table = ds.dataset(out_dir / store.RUNS, format="parquet").to_table()
    rows = table.to_pylist()
    by_id = {r["run_id"]: r for r in rows}
    assert len(by_id) == len(rows), "a run id appears twice in the runs table"
    return by_id


def assert_same_metrics(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """`got` a runs row, `want` a runs row or a summary (flattened as the runs table is)."""
    want = store.flatten_row(want)
    for name in METRICS:
        assert got[name] == want[name], f"{where}: {name}: {got[name]!r} != {want[name]!r}"


def direct_summary(sweep, point_index: int, seed: int) -> dict[str, Any]:
    sc = scenario_mod.from_data(sweep.scenario_data(sweep.points[point_index]))
    return rmqsim.run(sc, seed=seed).summary


def stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The module's temporary files (Python's, and any child's) under a folder of its own, loopback
    Spark, as the module's sweeps always had. A sweep on a local master runs in local worker
    processes without a JVM (analysis/sweeps/local_pool.py), so no SparkSession is started here;
    the modules that read through Spark share tests/conftest.py's `spark`."""
    folder = tmp_path_factory.mktemp("spark-scratch")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        for name, value in scratch_env(folder).items():
            mp.setenv(name, value)
        mp.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.fixture(scope="module")
def quick(scratch, tmp_path_factory):
    """2 points × 2 seeds with both per-message tables, run once on local[2]."""
    folder = tmp_path_factory.mktemp("quick")
    path = write_sweep(folder, "quick_test", set={**SHORT, "faults": CRASH},
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [100, 250]}},
                       seeds=[1, 2], keep=["deliveries", "latencies"])
    sweep = load_sweep(path)
    out = folder / "out"
    log = io.StringIO()
    started = time.perf_counter()
    outcome = run_sweep(sweep, out, master="local[2]", parallelism=2, progress=log)
    return {"sweep": sweep, "out": out, "outcome": outcome, "log": log.getvalue(),
            "wall_s": time.perf_counter() - started}


# ---------------------------------------------------------------- (a) Spark rows == direct runs

def test_sweep_rows_equal_direct_runs(quick):
    sweep, out, outcome = quick["sweep"], quick["out"], quick["outcome"]
    assert (outcome.total, outcome.skipped, outcome.ran) == (4, 0, 4)
    assert outcome.failed == [] and outcome.mismatches == [] and outcome.verified == []
    assert "runs 4/4" in quick["log"]
    # the executors used this tree's compiled build (sim/compiled.py), checked against the zip's sources
    assert outcome.compiled_runs == (0 if compiled.pure_requested() else 4)

    manifest = sweep_dir.read_manifest(out)
    assert manifest["digest"] == sweep.digest() and manifest["runs"] == 4
    expected_ids = {run_id(p, s) for p, s in sweep.runs}
    assert expected_ids == {"p0000-s1", "p0000-s2", "p0001-s1", "p0001-s2"}
    for folder in (store.RUNS, store.DELIVERIES, store.LATENCIES):
        assert {p.stem for p in visible(out / folder)} == expected_ids, folder
        assert not [p for p in (out / folder).iterdir() if p.name.startswith(".")], "temp files left"

    schema = store.runs_schema(sweep.param_types)
    rows = read_runs(out)
    assert set(rows) == expected_ids
    for rid, row in rows.items():
        fields = list(pq.read_schema(out / store.RUNS / f"{rid}.parquet"))  # the fixed columns, then map columns
        assert pa.schema(fields[:len(schema)]).equals(schema), rid
        assert all(f.name.startswith(tuple(MAP_PREFIXES)) for f in fields[len(schema):]), rid
        point = sweep.points[row["point"]]
        assert rid == run_id(row["point"], row["seed"])
        assert row["status"] == "ok" and row["error"] is None, row["error"]
        assert row["point_key"] == point.key and row["rate"] == point.params["rate"]
        assert json.loads(row["params_json"]) == point.params
        want = direct_summary(sweep, row["point"], row["seed"])
        assert_same_metrics(row, want, rid)
        # the run's verdict (analysis/checkers/verdict.py), as the summary states it
        assert row["verdict"] == want["verdict"] and row["stopped_by"] == want["stopped_by"] is None
        assert row["verdict_failures"] == "; ".join(want["failures"])
        groups = len(want["groups"])
        not_consumed = row["lost"] + row["pending_retry"] + row["dlq"]
        assert sum(row["delivery_hist"]) == row["sent_ok"] * groups and row["delivery_hist"][0] == not_consumed
        # the latency histogram holds the consumed messages sent after the warm-up (run_rows.py)
        assert 0 < sum(row["lat_hist_count"]) <= row["sent_ok"] * groups - not_consumed
    # the parameter reached the scenario, and the faults made the comparison non-trivial
    assert {direct_scenario_rate(sweep, p) for p in range(2)} == {100, 250}
    assert any(r["duplicates"] > 0 for r in rows.values())
    # at-least-once: redeliveries are reported, not failed; nothing was lost
    assert {(r["verdict"], r["verdict_failures"], r["lost"]) for r in rows.values()} == {("valid", "", 0)}
    assert {r["order_violations"] for r in rows.values()} == {None}  # no orderly group: not judged
    assert len({r["trace_sha256"] for r in rows.values()}) == 4


def direct_scenario_rate(sweep, point_index: int) -> float:
    sc = scenario_mod.from_data(sweep.scenario_data(sweep.points[point_index]))
    return sc.producers[0].rate_per_s


def test_per_message_tables_agree_with_summaries(quick):
    out = quick["out"]
    rows = read_runs(out)
    deliveries = ds.dataset(out / store.DELIVERIES, format="parquet").to_table()
    latencies = ds.dataset(out / store.LATENCIES, format="parquet").to_table()
    assert deliveries.schema.equals(store.DELIVERIES_SCHEMA)
    assert latencies.schema.equals(store.LATENCIES_SCHEMA)
    for rid, row in rows.items():
        d = deliveries.filter(pc.equal(deliveries["run_id"], rid))
        lat = latencies.filter(pc.equal(latencies["run_id"], rid))
        assert set(d["point"].to_pylist()) == {row["point"]} and set(d["seed"].to_pylist()) == {row["seed"]}
        # every successful consumption is a deliveries row
        assert pc.sum(pc.cast(d["ok"], "int64")).as_py() == row["consumed"], rid
        # one latency per acked message consumed at least once (one consumer group here)
        assert lat.num_rows == row["sent_ok"] - row["lost"] - row["pending_retry"] - row["dlq"], rid
        lat_keys = list(zip(lat["unit"].to_pylist(), lat["key"].to_pylist(), strict=True))
        assert len(set(lat_keys)) == len(lat_keys)
        ok_keys = {(u, k) for u, k, ok in zip(d["unit"].to_pylist(), d["key"].to_pylist(),
                                              d["ok"].to_pylist(), strict=True) if ok}
        assert set(lat_keys) <= ok_keys
        # delivered more than once == duplicated, in the deliveries table too
        counts: dict[tuple, int] = {}
        for u, k, ok in zip(d["unit"].to_pylist(), d["key"].to_pylist(), d["ok"].to_pylist(), strict=True):
            if ok:
                counts[(u, k)] = counts.get((u, k), 0) + 1
        assert sum(n - 1 for n in counts.values()) == row["duplicates"], rid
        measured = [v for v, sent in zip(lat["latency_ms"].to_pylist(), lat["sent_ms"].to_pylist(), strict=True)
                    if sent >= row["warmup_ms"]]  # the summary's latency leaves out the warm-up
        assert min(measured) >= 0 and max(measured) == pytest.approx(row["latency_ms_max"], abs=1e-3)


def test_repro_line_reproduces_the_run(quick):
    """Each row's `repro` is an `rmqsim run` command line giving the same trace digest."""
    from rmqsim.cli import parser

    for rid, row in read_runs(quick["out"]).items():
        argv = shlex.split(row["repro"])
        assert argv[:2] == ["rmqsim", "run"], row["repro"]
        args = parser().parse_args(argv[1:])
        sc = scenario_mod.load(args.scenario, args.set)  # relative to the driver's cwd (unchanged)
        assert rmqsim.run(sc, seed=args.seed).summary["trace_sha256"] == row["trace_sha256"], rid


# ---------------------------------------------------------------- (e) determinism re-check

def test_verify_determinism_on_finished_sweep(quick):
    sweep, out = quick["sweep"], quick["out"]
    before = {p.name: stamp(p) for p in visible(out / store.RUNS)}
    log = io.StringIO()
    outcome = run_sweep(sweep, out, master="local[2]", parallelism=2, verify_determinism=2, progress=log)
    assert (outcome.total, outcome.skipped, outcome.ran) == (4, 4, 0)
    assert outcome.failed == [] and outcome.mismatches == []
    assert len(outcome.verified) == 2 and len(set(outcome.verified)) == 2
    assert set(outcome.verified) <= {run_id(p, s) for p, s in sweep.runs}
    text = log.getvalue()
    assert "4 of 4 runs already complete, skipped" in text
    assert text.count(" same") == 2 and "DIFFERENT" not in text
    assert {p.name: stamp(p) for p in visible(out / store.RUNS)} == before  # nothing rewritten


def test_verify_determinism_detects_a_wrong_digest(quick, tmp_path):
    """The check is not vacuous: a tampered digest in a runs row is reported as a mismatch."""
    sweep = quick["sweep"]
    out = tmp_path / "copy"
    shutil.copytree(quick["out"], out)
    victim = out / store.RUNS / "p0001-s2.parquet"
    table = pq.read_table(victim)
    i = table.schema.get_field_index("trace_sha256")
    table = table.set_column(i, table.schema.field(i), [["0" * 64]])
    pq.write_table(table, victim)
    outcome = run_sweep(sweep, out, master="local[2]", verify_determinism=4, progress=io.StringIO())
    assert sorted(outcome.verified) == sorted(run_id(p, s) for p, s in sweep.runs)
    assert outcome.mismatches == ["p0001-s2"]


# ---------------------------------------------------------------- (d) failed runs are rows

def test_failed_run_is_recorded_and_retried(scratch, tmp_path):
    """Point 1 is valid but over the sweep's per-run wall budget (40,000 msg/s for 6 s takes
    seconds; the budget is 0.3 s), so it fails at run time: a row with the error and a repro
    line, the CLI exits 1, and a rerun retries only that run."""
    path = write_sweep(tmp_path, "fails", set=SHORT,
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [20, 20_000]}},
                       seeds=[1], keep=["deliveries"], run_timeout_s=0.3)
    out = tmp_path / "out"
    done = run_rmqsim(["sweep", str(path), "--out", str(out), "--parallelism", "2"], tmp_path, 120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "failed: p0001-s1" in done.stdout

    rows = read_runs(out)
    assert set(rows) == {"p0000-s1", "p0001-s1"}
    good, bad = rows["p0000-s1"], rows["p0001-s1"]
    assert good["status"] == "ok" and good["error"] is None and good["trace_sha256"]
    assert bad["status"] == "failed" and bad["rate"] == 20_000
    assert "StoppedAtBound" in bad["error"] and "run_timeout_s = 0.3 s" in bad["error"]
    assert bad["stopped_by"] == "max_wall_s"
    assert bad["trace_sha256"] is None and bad["sent_ok"] is None and bad["latency_ms_p99"] is None
    assert {p.stem for p in visible(out / store.DELIVERIES)} == {"p0000-s1"}
    from rmqsim.cli import parser

    args = parser().parse_args(shlex.split(bad["repro"])[1:])  # a valid `rmqsim run` command line
    assert args.command == "run" and args.seed == 1 and "producers[0].rate_per_s=20000" in args.set

    # a rerun skips the ok run and retries the failed one
    kept = stamp(out / store.RUNS / "p0000-s1.parquet")
    outcome = run_sweep(load_sweep(path), out, master="local[2]", progress=io.StringIO())
    assert (outcome.total, outcome.skipped, outcome.ran, outcome.failed) == (2, 1, 1, ["p0001-s1"])
    assert stamp(out / store.RUNS / "p0000-s1.parquet") == kept


def test_execute_broken_task_writes_failed_row(tmp_path):
    """In-process (no Spark): a task whose scenario cannot even be parsed still leaves a row."""
    path = write_sweep(tmp_path, "broken", set=SHORT,
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [100]}}, seeds=[3],
                       keep=["deliveries", "latencies"])
    out = tmp_path / "out"
    sweep = load_sweep(path)
    sweep_dir.prepare(out, {"digest": sweep.digest()})
    (task,) = tasks(sweep, out)
    bad_json = dict(task, base_json="{not json")
    bad_tree = dict(task, run_id="p0000-s4", seed=4, base_json=json.dumps({**sweep.base_data, "bogus": 1}))
    for t, error in ((bad_json, "JSONDecodeError"), (bad_tree, "ConfigError")):
        result = execute(t)
        assert result["status"] == "failed" and result["trace_sha256"] is None
        row = pq.read_table(out / store.RUNS / f"{t['run_id']}.parquet").to_pylist()[0]
        assert row["status"] == "failed" and error in row["error"], row["error"]
        assert row["repro"].startswith("rmqsim run ") and row["repro"] == t["repro"]
        assert (row["point"], row["seed"], row["rate"]) == (0, t["seed"], 100)
    assert sweep_dir.completed(out, sweep.digest()) == {"p0000-s3": "failed", "p0000-s4": "failed"}
    assert visible(out / store.DELIVERIES) == [] and visible(out / store.LATENCIES) == []


# ---------------------------------------------------------------- (b) crash and resume

def test_killed_sweep_resumes_without_touching_complete_runs(tmp_path):
    # 8 runs of ~0.5 s each, one at a time: time to kill the driver between runs 2 and 8
    path = write_sweep(tmp_path, "resume", set={"duration_ms": "20s", "settle_ms": "3s", "faults": []},
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [240, 250]}},
                       seeds=4, keep=["latencies"])
    out = tmp_path / "out"
    args = ["sweep", str(path), "--parallelism", "1", "--out", str(out)]
    cmd = [*rmqsim_cmd(), *args]
    total = 8

    tag = uuid.uuid4().hex
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=child_env(tag, tmp_path / "tmp"), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while len(visible(out / store.RUNS)) < 2:
                assert proc.poll() is None, f"sweep ended (rc {proc.returncode}) before it could be killed: " \
                    + (tmp_path / "first.log").read_text()
                assert time.monotonic() < deadline, "no 2 runs complete within 120 s"
                time.sleep(0.05)
        finally:
            kill_tree(proc, tag)  # SIGKILL the group (a crash), then any straggler
    assert tagged_pids(tag) == []

    # what the crash left: only whole files under visible names
    for folder in (store.RUNS, store.LATENCIES):
        for p in visible(out / folder):
            pq.read_table(p)  # readable, not truncated
    complete = {p.stem: p for p in visible(out / store.RUNS)}
    assert 2 <= len(complete) < total, f"{len(complete)} runs complete: kill was not mid-sweep"
    assert all(s == "ok" for s in sweep_dir.completed(out).values())
    before = {rid: stamp(p) for rid, p in complete.items()}
    before_lat = {rid: stamp(out / store.LATENCIES / f"{rid}.parquet") for rid in complete}
    manifest = stamp(out / sweep_dir.MANIFEST)

    rerun = run_rmqsim(args, tmp_path, 150)
    stdout, stderr = rerun.stdout, rerun.stderr
    assert rerun.returncode == 0, stdout + stderr
    k = len(complete)
    assert f"{k} of {total} runs already complete, skipped" in stderr
    assert f"done: {total - k} run(s)" in stdout and f"({k} already complete)" in stdout

    status = sweep_dir.completed(out)
    assert len(status) == total and set(status.values()) == {"ok"}
    assert {p.stem for p in visible(out / store.LATENCIES)} == set(status)
    assert {rid: stamp(complete[rid]) for rid in complete} == before, "complete runs were rewritten"
    assert {rid: stamp(out / store.LATENCIES / f"{rid}.parquet") for rid in complete} == before_lat
    assert stamp(out / sweep_dir.MANIFEST) == manifest
    # a run from before the crash and one from the resumed sweep both equal a direct run
    sweep, rows = load_sweep(path), read_runs(out)
    for rid in (min(complete), max(set(status) - set(complete))):
        want = direct_summary(sweep, rows[rid]["point"], rows[rid]["seed"])
        assert rows[rid]["trace_sha256"] == want["trace_sha256"], rid


# ---------------------------------------------------------------- (c) validation

def _base_body() -> dict[str, Any]:
    return {"set": SHORT, "grid": {"rate": {"key": "producers[0].rate_per_s", "values": [100, 200]}}, "seeds": 1}


MISTAKES = {
    # name: (change to the sweep document, pattern a problem line on stderr must match)
    "unknown_top_level_key": (lambda d: d.update(colour="blue"), r"\bcolour: "),
    "zip_unequal_lengths": (lambda d: d.update(zip={
        "batch": {"key": "consumers[0].client.pull_batch_size", "values": [1, 32]},
        "threads": {"key": "consumers[0].client.consume_thread_max", "values": [1, 20, 40]}}),
        r"\bzip\S*: .*(length|equal)"),
    "key_path_not_in_scenario": (lambda d: d["grid"].update(
        ghost={"key": "producers[0].no_such_knob", "values": [1]}), r"no_such_knob"),
    "bad_value_type": (lambda d: d["grid"].update(
        count={"key": "consumers[0].count", "values": ["many"]}), r"consumers\[0\]\.count: .*'many'"),
    "mixed_value_types": (lambda d: d["grid"].update(
        persist={"key": "consumers[0].client.persist_consumer_offset_interval_ms", "values": [1000, "often"]}),
        r"\bpersist\b.*\b(type|mix)"),
    "base_missing": (lambda d: d.update(base="/nonexistent/rmqsim/nothing_here.yaml"),
                     r"\bbase: .*nothing_here\.yaml"),
}
# Two sets of mistakes made together: with the base scenario there every problem can be found;
# without it, the ones that need no scenario (a key path can only be checked against the base).
WITH_BASE = ("unknown_top_level_key", "zip_unequal_lengths", "key_path_not_in_scenario", "bad_value_type",
             "mixed_value_types")
WITHOUT_BASE = ("unknown_top_level_key", "zip_unequal_lengths", "mixed_value_types", "base_missing")


def _run_invalid(tmp_path: Path, name: str, doc: dict[str, Any]) -> tuple[subprocess.CompletedProcess, float, Path]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "base": str(BASE), **doc}, sort_keys=False))
    out = tmp_path / "out"
    started = time.monotonic()
    result = run_rmqsim(["sweep", str(path), "--out", str(out)], tmp_path, 60)
    return result, time.monotonic() - started, out


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_invalid_sweep_one_mistake(tmp_path, mistake):
    doc = _base_body()
    change, pattern = MISTAKES[mistake]
    change(doc)
    result, wall_s, out = _run_invalid(tmp_path, mistake, doc)
    assert result.returncode == 2, result.stderr
    assert wall_s < 10 and not out.exists(), "Spark must not start for an invalid sweep"
    assert "Traceback" not in result.stderr
    assert f"{mistake}.yaml" in result.stderr
    assert re.search(pattern, result.stderr), (pattern, result.stderr)


@pytest.mark.parametrize("mistakes", [WITH_BASE, WITHOUT_BASE], ids=["with_base", "without_base"])
def test_invalid_sweep_every_mistake_reported_at_once(tmp_path, mistakes):
    doc = _base_body()
    for name in mistakes:
        MISTAKES[name][0](doc)
    result, wall_s, out = _run_invalid(tmp_path, "many_mistakes", doc)
    assert result.returncode == 2, result.stderr
    assert wall_s < 10 and not out.exists(), "Spark must not start for an invalid sweep"
    assert "Traceback" not in result.stderr
    problem_lines = [line for line in result.stderr.splitlines() if line.strip().startswith(str(tmp_path))]
    assert problem_lines and all("many_mistakes.yaml: " in line for line in problem_lines)
    missing = [m for m in mistakes if not re.search(MISTAKES[m][1], result.stderr)]
    assert not missing, f"problems not reported: {missing}\nstderr:\n{result.stderr}"


@pytest.mark.parametrize("mistakes", [WITH_BASE, WITHOUT_BASE], ids=["with_base", "without_base"])
def test_load_sweep_lists_every_problem(tmp_path, mistakes):
    doc = _base_body()
    for name in mistakes:
        MISTAKES[name][0](doc)
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump({"name": "many", "base": str(BASE), **doc}, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert info.value.source == str(path)
    assert len(info.value.problems) >= len(mistakes), info.value.problems


def test_set_typo_is_blamed_on_its_own_key(tmp_path):
    """`set: {duration_msx: ...}` is reported against set.duration_msx, not its prefix duration_ms."""
    path = write_sweep(tmp_path, "typo", set={**SHORT, "duration_msx": 3}, seeds=1)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    (problem,) = [p for p in info.value.problems if "duration_msx" in p]
    assert "set.duration_msx →" in problem, problem


def test_float_parameter_values_survive_the_override_round_trip(tmp_path):
    """A float the sweep file holds (0.00001, 1e+16) reaches the scenario as that float.

    Overrides are rendered with json.dumps ('1e-05'), which YAML 1.1 reads back as a string."""
    path = write_sweep(tmp_path, "floats", set=SHORT,
                       grid={"ct": {"key": "consumers[0].consume_time_ms", "values": [0.00001, 0.5]}}, seeds=1)
    sweep = load_sweep(path)
    sc = scenario_mod.from_data(sweep.scenario_data(sweep.points[0]))
    assert sc.consumers[0].consume_time_ms.mean() == 0.00001


def test_resume_refuses_runs_of_another_simulator_version(tmp_path):
    """No Spark: a directory is resumed only by the same sweep *and* the same sim/ + models/
    sources, since other sources give other digests and results."""
    from analysis.sweeps.sweep import manifest, simulator_sha256

    path = write_sweep(tmp_path, "versioned", set=SHORT, seeds=[1])
    sweep, out = load_sweep(path), tmp_path / "out"
    current = manifest(sweep)
    assert current["simulator_sha256"] == simulator_sha256() and len(current["simulator_sha256"]) == 64
    sweep_dir.prepare(out, current)
    sweep_dir.prepare(out, current)  # same sweep, same simulator: resumes
    older = dict(current, simulator_sha256="0" * 64)
    with pytest.raises(sweep_dir.ForeignDirectory, match="another version of the simulator"):
        sweep_dir.prepare(out, older)
    legacy = tmp_path / "legacy"  # made before manifests carried the simulator digest
    sweep_dir.prepare(legacy, {k: v for k, v in current.items() if k != "simulator_sha256"})
    with pytest.raises(sweep_dir.ForeignDirectory, match="another version of the simulator"):
        sweep_dir.prepare(legacy, current)
    with pytest.raises(sweep_dir.ForeignDirectory, match="another sweep"):
        sweep_dir.prepare(out, dict(current, digest="x"))
    store.write_run_row(out, {"run_id": "p0000-s1", "sweep_digest": current["digest"], "status": "ok"},
                        store.runs_schema(sweep.param_types))  # a row of that sweep: provably rmqsim's
    sweep_dir.prepare(out, older, replace=True)  # foreign: deleted, started afresh
    assert not (out / "runs").exists() and sweep_dir.read_manifest(out) == older
    (out / "keep").write_text("x")
    sweep_dir.prepare(out, older, replace=True)  # same sweep and simulator: resumed, nothing deleted
    assert (out / "keep").exists()
