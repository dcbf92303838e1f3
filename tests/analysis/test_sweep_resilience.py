"""A sweep survives its Python workers dying, and resumes a damaged output directory (Spark, local[2]).

The test kills workers from outside, as an operator or the kernel's OOM killer would: each run
records its start in a marker file holding its worker's pid (analysis/sweeps/directory.py), and the
test SIGKILLs that pid. One run's worker is killed once: Spark retries the task (local[N,F])
and the run completes. Another's is killed every time: after two starts the third attempt
records a failed run (WorkerLost) with its reproduction line instead of aborting the sweep.
The rerun then resumes: the failed run, a truncated run file and leftover temporary files are
dealt with, and every run ends ok.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from tests.analysis.test_sweep import (
    child_env,
    kill_tree,
    read_runs,
    rmqsim_cmd,
    run_rmqsim,
    tagged_pids,
    write_sweep,
)

KILLS = {"p0000-s1": 2, "p0000-s2": 1}  # run → times its worker is killed
MARKER = re.compile(r"\.(p\d{4}-s\d+)\.attempt-(\d+)")


def _kill_workers(proc: subprocess.Popen, runs: Path, tag: str, timeout_s: float) -> list[tuple[str, int]]:
    """SIGKILL the worker of each new attempt of a run in KILLS (as often as KILLS says) until the
    sweep ends; returns (run, attempt) of every kill."""
    done: dict[str, int] = {}
    killed: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        assert time.monotonic() < deadline, f"sweep still running after {timeout_s} s"
        for entry in sorted(runs.iterdir()) if runs.is_dir() else []:
            match = MARKER.fullmatch(entry.name)
            if not match or (match.group(1), int(match.group(2))) in killed:
                continue
            run, attempt = match.group(1), int(match.group(2))
            if done.get(run, 0) >= KILLS.get(run, 0):
                continue
            pid = _marker_pid(entry)
            if pid and pid in tagged_pids(tag):  # our own worker, and only ours
                os.kill(pid, signal.SIGKILL)
                done[run] = done.get(run, 0) + 1
                killed.append((run, attempt))
        time.sleep(0.02)
    return killed


def _marker_pid(path: Path) -> int | None:
    for _ in range(50):  # the marker is created, then its pid written
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            return None
        if text:
            return int(text)
        time.sleep(0.01)
    return None


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_killed_workers_are_retried_or_recorded_then_resumed(tmp_path):
    path = write_sweep(tmp_path, "resilient", set={"duration_ms": "20s", "settle_ms": "3s", "faults": []},
                       grid={"rate": {"key": "producers[0].rate_per_s", "values": [250]}}, seeds=3)
    out = tmp_path / "out"
    args = ["sweep", str(path), "--parallelism", "2", "--out", str(out)]
    tag = uuid.uuid4().hex
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen([*rmqsim_cmd(), *args], cwd=tmp_path, env=child_env(tag, tmp_path / "tmp"),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            killed = _kill_workers(proc, out / store.RUNS, tag, timeout_s=240)
        finally:
            kill_tree(proc, tag)
    first = (tmp_path / "first.log").read_text()
    assert sorted(killed) == [("p0000-s1", 1), ("p0000-s1", 2), ("p0000-s2", 1)], (killed, first)
    assert proc.returncode == 1, first
    assert "Traceback" not in first and "failed: p0000-s1" in first and "1 failed" in first

    rows = read_runs(out)
    assert rows["p0000-s2"]["status"] == "ok" and rows["p0000-s3"]["status"] == "ok"  # retried, and untouched
    lost = rows["p0000-s1"]
    assert lost["status"] == "failed" and lost["error"].startswith("WorkerLost: the Python worker running this "
                                                                   "run died 2 times"), lost["error"]
    assert lost["repro"].startswith("rmqsim run ") and "--seed 1" in lost["repro"]
    # Spark's task attempt that wrote each row: the run killed once was retried (1), the untouched one was
    # not (0), the one killed twice was recorded failed by its third attempt (2); the output names both retried
    assert [rows[f"p0000-s{seed}"]["attempt"] for seed in (1, 2, 3)] == [2, 1, 0]
    assert ("retried after losing an executor or a worker process: p0000-s1 (attempt 2), p0000-s2 "
            "(attempt 1) (the runs table's `attempt` column)") in first, first
    assert not [p for p in (out / store.RUNS).iterdir() if p.name.startswith(".")], "markers left behind"

    # damage the directory as a crash would, then resume
    victim = out / store.RUNS / "p0000-s3.parquet"
    victim.write_bytes(victim.read_bytes()[:200])
    (out / store.RUNS / ".p0000-s2.parquet.tmp-99999").write_bytes(b"half a file")
    kept = (out / store.RUNS / "p0000-s2.parquet").stat().st_mtime_ns
    rerun = run_rmqsim(args, tmp_path, 240)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "removed 1 leftover temporary file(s)" in rerun.stderr
    assert "p0000-s3.parquet: unreadable or not a run of this sweep" in rerun.stderr
    assert "done: 2 run(s)" in rerun.stdout and "(1 already complete)" in rerun.stdout
    status = sweep_dir.completed(out, expected={"p0000-s1", "p0000-s2", "p0000-s3"})
    assert status == {"p0000-s1": "ok", "p0000-s2": "ok", "p0000-s3": "ok"}
    assert (out / store.RUNS / "p0000-s2.parquet").stat().st_mtime_ns == kept
    assert pq.read_table(victim).num_rows == 1
    assert sorted(p.name for p in (out / store.RUNS).iterdir()) == [f"p0000-s{s}.parquet" for s in (1, 2, 3)]
