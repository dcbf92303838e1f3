"""A sweep on a local master runs in local worker processes, without a JVM (analysis/sweeps/local_pool.py),
and its report reads the runs table with Arrow (analysis/sweeps/aggregate.py `load_local`): the
same runs table, files and report as the Spark path gives; retries and aborts as Spark's
`local[N,F]`; workers that die with their driver, and a resume after that.

One local[2] Spark session (tests/conftest.py's `spark`, shared by the modules of a test process) runs
the same sweep the Spark way, for the comparison; nothing else here starts a JVM.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from analysis.sweeps import aggregate, local_pool
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps import sweep as sweep_mod
from analysis.sweeps.spec import load_sweep
from analysis.sweeps.sweep import ENGINE_ENV, run_sweep, tasks, uses_spark
from tests.analysis.test_sweep import (
    CRASH,
    SHORT,
    child_env,
    kill_tree,
    read_runs,
    rmqsim_cmd,
    run_rmqsim,
    tagged_pids,
    visible,
    write_sweep,
)
from tests.analysis.test_sweep_report import fabricated_row, fabricated_sweep

# columns that depend on the machine, not on the run: wall times
MACHINE_COLUMNS = ("wall_s", "simulate_wall_s")


def _no_spark(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("a local sweep or its report started a SparkSession")


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    """The same sweep run by the local workers (no session allowed) and by Spark (local[2])."""
    folder = tmp_path_factory.mktemp("both")
    path = write_sweep(folder, "both", set={**SHORT, "faults": CRASH},
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [100, 250]}},
                       seeds=[1, 2], keep=["deliveries", "latencies"], timeline={"point": 1, "seed": 2})
    sweep = load_sweep(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sweep_mod, "spark_session", _no_spark)
        mp.delenv(ENGINE_ENV, raising=False)
        local = run_sweep(sweep, folder / "local", master="local[2]", progress=io.StringIO())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENGINE_ENV, "spark")
        on_spark = run_sweep(sweep, folder / "spark", master="local[2]", progress=io.StringIO())
    assert local.spark is None and on_spark.spark is spark
    return {"sweep": sweep, "local": folder / "local", "spark": folder / "spark", "outcomes": (local, on_spark)}


def _layout(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and "report" not in p.parts)


def test_local_workers_write_the_runs_table_and_files_spark_writes(both) -> None:
    local, on_spark = both["outcomes"]
    assert (local.total, local.ran, local.failed, local.retried) == (on_spark.total, on_spark.ran, [], {})
    assert local.compiled_runs == on_spark.compiled_runs
    assert _layout(both["local"]) == _layout(both["spark"])  # the same files under the same names
    mine, theirs = read_runs(both["local"]), read_runs(both["spark"])
    assert sorted(mine) == sorted(theirs) == ["p0000-s1", "p0000-s2", "p0001-s1", "p0001-s2"]
    for rid, row in mine.items():
        other = theirs[rid]
        differ = {k for k in row if k not in MACHINE_COLUMNS and row[k] != other[k]}
        assert not differ, (rid, {k: (row[k], other[k]) for k in differ})
        assert row["attempt"] == 0 and row["status"] == "ok" and row["compiled"] == other["compiled"]
    for table in (store.DELIVERIES, store.LATENCIES):  # per-message files: byte for byte
        for path in visible(both["local"] / table):
            assert path.read_bytes() == (both["spark"] / table / path.name).read_bytes(), path


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_the_local_report_reads_what_spark_reads(both, spark, tmp_path) -> None:
    """The report's tables without a JVM equal Spark's: every column, maps as dicts, failing-run
    columns only on failing rows, merged histograms, the timeline run; and the pages agree."""
    from analysis.reports.sweep_report import build_report, check_tables

    out = both["local"]
    bad = dict(read_runs(out)["p0000-s1"], verdict="invalid",
               verdict_failures="planted: lost 1")  # a failing run: its failures and repro reach the report
    schema_now = pq.read_schema(out / store.RUNS / "p0000-s1.parquet")
    store.write_table(out, store.RUNS, "p0000-s1", {k: [bad.get(k)] for k in schema_now.names}, schema_now)
    schema, n_runs = check_tables(out, both["sweep"].digest())
    for wanted in ("p0001-s2", "p0009-s9"):  # the chosen run; one that did not run: the first ok run instead
        arrow = aggregate.load_local(out, ["rate"], schema, wanted)
        spark_data = aggregate.load(spark, out, ["rate"], schema, wanted, n_runs)
        pd.testing.assert_frame_equal(arrow.runs, spark_data.runs)
        assert arrow.histograms == spark_data.histograms and arrow.histograms[1]
        assert (arrow.timeline_run, arrow.timeline) == (spark_data.timeline_run, spark_data.timeline)
    assert arrow.timeline_run == "p0000-s1"
    failing = arrow.runs.set_index("run_id")[["verdict_failures", "repro", "output_files"]]
    assert failing.loc["p0000-s1", "verdict_failures"] == "planted: lost 1"
    assert failing.loc["p0000-s1", "output_files"] and failing.drop("p0000-s1").isna().all().all()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sweep_mod, "spark_session", _no_spark)
        page = build_report(out, tmp_path / "arrow").read_text()
    assert page == build_report(out, tmp_path / "spark", spark=spark).read_text().replace(
        str(tmp_path / "spark"), str(tmp_path / "arrow"))
    assert (tmp_path / "arrow" / "points.json").read_text() == (tmp_path / "spark" / "points.json").read_text()


def test_rows_of_several_shapes_read_alike(spark, tmp_path) -> None:
    """Older rows without the end-state columns beside newer ones, and a map column (`coverage`):
    Arrow's unified read equals Spark's."""
    from analysis.reports.sweep_report import check_tables
    from analysis.sweeps.spec import load_sweep as load

    out = fabricated_sweep(tmp_path, end_state=False)
    sweep = load(tmp_path / "sweep.yaml")
    point = sweep.points[0]
    store.write_run_row(out, fabricated_row(sweep, point, 1, end_state=True), store.runs_schema(sweep.param_types))
    schema, n_runs = check_tables(out, sweep.digest())
    arrow = aggregate.load_local(out, ["flush", "rate"], schema, "p0001-s2")
    spark_data = aggregate.load(spark, out, ["flush", "rate"], schema, "p0001-s2", n_runs)
    pd.testing.assert_frame_equal(arrow.runs, spark_data.runs)
    assert arrow.histograms == spark_data.histograms and arrow.timeline == spark_data.timeline
    covered = arrow.runs.loc[arrow.runs.run_id == "p0000-s1", "coverage"].item()
    assert isinstance(covered, dict) and covered["power_loss_unflushed_tail"] == 1


def test_local_masters_run_here_and_cluster_masters_on_spark(monkeypatch) -> None:
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    for master in (None, "local", "local[2]", "local[*]", "local[ 2 , 3 ]"):
        assert not uses_spark(master), master
    for master in ("local-cluster[2,1,1024]", "spark://h:7077", "yarn", "k8s://https://h:6443"):
        assert uses_spark(master), master
    monkeypatch.setenv(ENGINE_ENV, "spark")
    assert uses_spark("local[2]") and uses_spark(None)
    monkeypatch.setenv(ENGINE_ENV, "jvm")
    with pytest.raises(sweep_mod.SparkMasterError, match="RMQSIM_SWEEP_ENGINE='jvm': give spark"):
        uses_spark(None)
    assert [local_pool.parallelism_of(m, p) for m, p in (("local[3]", None), ("local", None), ("local[2,4]", None),
                                                         ("local[*]", 5), (None, None))] == \
        [3, 1, 2, 5, len(os.sched_getaffinity(0))]


def test_a_task_that_keeps_failing_aborts_the_sweep_after_spark_s_attempts(tmp_path) -> None:
    """`execute` raising (here: its output folder is a file) is retried as a failed Spark task is,
    with the next attempt number each time, and the third failure stops the sweep in one line."""
    path = write_sweep(tmp_path, "broken", set=SHORT, seeds=1)
    blocked = tmp_path / "blocked"
    (blocked / "runs").mkdir(parents=True)
    task = tasks(load_sweep(path), blocked)[0]
    (blocked / "runs").rmdir()
    (blocked / "runs").write_text("a file where the runs folder goes")
    progress = local_pool.PoolProgress()
    polls: list[int] = []
    with pytest.raises(local_pool.PoolAborted) as caught:
        local_pool.run_tasks([task], 1, progress, lambda: polls.append(progress.done), "no_space")
    assert str(caught.value).startswith(f"Job aborted: run p0000-s1 failed {sweep_dir.TASK_MAX_FAILURES} times; "
                                        "the last: "), caught.value
    assert "FileExistsError" in str(caught.value) or "NotADirectoryError" in str(caught.value), caught.value
    assert progress.done == 0 and polls


def test_workers_run_with_spark_s_hash_seed_and_the_driver_s_sources(tmp_path) -> None:
    path = write_sweep(tmp_path, "seeded", set=SHORT, seeds=[1, 2, 3])
    sweep = load_sweep(path)
    out = tmp_path / "out"
    sweep_dir.prepare(out, sweep_mod.manifest(sweep))
    results = local_pool.run_tasks(tasks(sweep, out), 2, local_pool.PoolProgress(), lambda: None, "no_space")
    assert [r["run_id"] for r in results] == ["p0000-s1", "p0000-s2", "p0000-s3"]  # task order
    assert {r["pythonhashseed"] for r in results} == {"0"} and {r["status"] for r in results} == {"ok"}
    assert len({r["pid"] for r in results}) == 2 and os.getpid() not in {r["pid"] for r in results}
    rows = read_runs(out)
    assert [rows[r]["trace_sha256"] for r in sorted(rows)] == [r["trace_sha256"] for r in results]


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_a_killed_driver_takes_its_workers_and_the_rerun_resumes(tmp_path) -> None:
    """SIGKILL to the driver alone (not its group): its workers die with it (no orphan writes on
    into the directory), and the same command then completes the sweep without redoing a run."""
    # runs of a few seconds each: a worker that outlived its driver would still be inside one
    path = write_sweep(tmp_path, "orphans", set={"duration_ms": "100s", "settle_ms": "3s", "faults": []},
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [240, 250]}}, seeds=3)
    out = tmp_path / "out"
    args = ["sweep", str(path), "--parallelism", "2", "--out", str(out)]
    tag = uuid.uuid4().hex
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen([*rmqsim_cmd(), *args], cwd=tmp_path, env=child_env(tag, tmp_path / "tmp"),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while len(visible(out / store.RUNS)) < 1:
                assert proc.poll() is None, (tmp_path / "first.log").read_text()
                assert time.monotonic() < deadline, "no run complete within 120 s"
                time.sleep(0.05)
            workers = [p for p in tagged_pids(tag) if p != proc.pid]
            assert len(workers) == 2, workers
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            at_kill = {p.stem for p in visible(out / store.RUNS)}
            time.sleep(1.0)  # the kernel's SIGKILL to the workers is immediate; a run takes seconds
            left = set(workers) & set(tagged_pids(tag))
        finally:
            kill_tree(proc, tag)
    assert not left, f"workers outlived their driver: {sorted(left)}"
    complete = {p.stem: p.stat().st_mtime_ns for p in visible(out / store.RUNS)}
    assert set(complete) == at_kill, "a run was written after its driver died"
    assert 1 <= len(complete) < 6
    rerun = run_rmqsim(args, tmp_path, 240)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"done: {6 - len(complete)} run(s)" in rerun.stdout and "Traceback" not in rerun.stderr
    assert sweep_dir.completed(out) == {f"p000{p}-s{s}": "ok" for p in (0, 1) for s in (1, 2, 3)}
    assert {rid: (out / store.RUNS / f"{rid}.parquet").stat().st_mtime_ns for rid in complete} == complete
    assert not [p for p in (out / store.RUNS).iterdir() if p.name.startswith(".")], "leftovers"
    assert json.loads((out / sweep_dir.MANIFEST).read_text())["runs"] == 6
