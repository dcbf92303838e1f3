"""A Spark master rmqsim cannot use (issue 37, item 6): `rmqsim report`, `rmqsim sweep` and
`rmqsim sweep --report` end with exit 2, a message naming the URL and the reason, and no
traceback, within seconds — a malformed URL (`bogus://x`, Mesos on Spark 4, a spark:// URL without
its port) before a JVM starts, a spark:// master where nothing listens by a TCP check before Spark
starts (Spark itself retries for a minute, then raises a Java NullPointerException), a Java
gateway that exits (a JAVA_HOME with no Java) in one line. A sweep so refused leaves no directory.

No test here starts a JVM but the serial one: a standalone master with no worker, on which a
sweep is stopped after RMQSIM_EXECUTOR_WAIT_S without an executor (Spark would wait forever).
The sweep report's directory is fabricated (tests/analysis/test_sweep_report.py), no run simulated.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from analysis.sweeps.sweep import SparkMasterError, check_master, check_reachable
from tests.analysis.test_sweep import SHORT, child_env, kill_tree, rmqsim_cmd, tagged_pids, write_sweep
from tests.analysis.test_sweep_report import fabricated_sweep
from tests.conftest import ROOT

REFUSED_IN_S = 30  # a refusal without a JVM: Python's imports and the check (seconds on a loaded machine)
CLOSED = "spark://127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory) -> Path:
    return fabricated_sweep(tmp_path_factory.mktemp("fabricated"))


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("sweep"), "masters", set=SHORT, seeds=1)


def _rmqsim(args: list[str], cwd: Path, **extra_env: str) -> tuple[subprocess.CompletedProcess, float]:
    """`rmqsim ARGS`, timed; nothing it started survives it."""
    tag = uuid.uuid4().hex
    env = child_env(tag, cwd / "tmp", **extra_env)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    started = time.monotonic()
    proc = subprocess.Popen([*rmqsim_cmd(), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=REFUSED_IN_S * 4)
    finally:
        kill_tree(proc, tag)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), time.monotonic() - started


def _assert_refused(proc: subprocess.CompletedProcess, wall_s: float, master: str, reason: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and "Exception in thread" not in out, out
    assert f"--master {master}: " in proc.stderr and reason in proc.stderr, proc.stderr
    assert wall_s < REFUSED_IN_S, f"took {wall_s:.1f} s"


@pytest.mark.parametrize(("master", "reason"), [
    ("bogus://x", "not a Spark master URL (forms: local, local[N]"),
    (CLOSED, "cannot reach it (127.0.0.1:1: connection refused)"),
])
def test_report_with_a_bad_master_is_exit_2(sweep_out, tmp_path, master, reason):
    proc, wall_s = _rmqsim(["report", str(sweep_out), "--master", master], tmp_path)
    _assert_refused(proc, wall_s, master, reason)
    assert "keeping Spark's parsed classes" not in proc.stderr  # no JVM ran


@pytest.mark.parametrize(("master", "reason"), [
    ("bogus://x", "not a Spark master URL"),
    (CLOSED, "cannot reach it (127.0.0.1:1: connection refused)"),
])
def test_sweep_with_a_bad_master_is_exit_2_and_writes_nothing(sweep_file, tmp_path, master, reason):
    out = tmp_path / "out"
    proc, wall_s = _rmqsim(["sweep", str(sweep_file), "--master", master, "--out", str(out), "--report"], tmp_path)
    _assert_refused(proc, wall_s, master, reason)
    assert proc.stderr.startswith("rmqsim sweep: "), proc.stderr
    assert not out.exists(), sorted(out.iterdir())


def test_sweep_dry_run_checks_the_master(sweep_file, tmp_path):
    proc, wall_s = _rmqsim(["sweep", str(sweep_file), "--master", "yarn-cluster", "--dry-run"], tmp_path)
    _assert_refused(proc, wall_s, "yarn-cluster", "Spark 3 removed this form: give --master yarn")


def test_a_java_gateway_that_exits_is_one_line(sweep_out, tmp_path):
    proc, wall_s = _rmqsim(["report", str(sweep_out), "--master", "local[1]"], tmp_path,
                           JAVA_HOME=str(tmp_path / "no-java"), RMQSIM_SWEEP_ENGINE="spark")  # else no JVM
    _assert_refused(proc, wall_s, "local[1]", "Spark did not start: the Java gateway exited before it started")


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[ 2 , 3 ]", "local-cluster[2,1,1024]",
                                   "spark://10.0.0.1:7077", "spark://a.example:7077,b.example:7078",
                                   "spark://[::1]:7077", "k8s://https://10.0.0.1:6443", "k8s://api.example"])
def test_masters_spark_accepts_pass(master):
    check_master(master)


@pytest.mark.parametrize(("master", "reason"), [
    ("", "not a Spark master URL"), ("local[0]", "local[0] runs nothing"), ("spark://h:0", "'h:0' is no HOST:PORT"),
    ("spark://127.0.0.1", "'127.0.0.1' is no HOST:PORT"), ("mesos://h:5050", "Spark 4 removed Mesos support"),
    ("spark://h:7077/", "is no HOST:PORT"), ("spark://h:7077,", "'' is no HOST:PORT"), ("k8s://", "no API server"),
    ("yarn", "HADOOP_CONF_DIR or YARN_CONF_DIR"), ("local[2]\nspark://x", "not a Spark master URL"),
])
def test_malformed_masters_raise_the_documented_error(monkeypatch, master, reason):
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(SparkMasterError, match="^--master ") as caught:
        check_master(master)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_an_unresolvable_host_is_refused_within_the_timeout():
    started = time.monotonic()
    with pytest.raises(SparkMasterError, match="cannot reach it") as caught:
        check_reachable("spark://no-such-host.invalid:7077,127.0.0.1:1", timeout_s=2.0)
    assert "no-such-host.invalid: no such host" in str(caught.value) and "127.0.0.1:1: connection refused" in \
        str(caught.value)
    assert time.monotonic() - started < 10


@pytest.mark.slow  # a JVM cluster, over 20 s: scripts/test.sh --slow (issue 41: the suite in CI)
@pytest.mark.serial  # a standalone master of its own (tests/analysis/test_spark_standalone.py)
def test_a_cluster_without_workers_stops_the_sweep(sweep_file, tmp_path):
    from tests.analysis.test_spark_standalone import JVM_QUICK, SCRIPT, _free_port, _sigkill

    if not (os.environ.get("JAVA_HOME") or shutil.which("java")) or not shutil.which("setsid"):
        pytest.skip("no java or setsid")
    port, tag = _free_port(), uuid.uuid4().hex
    env = child_env(tag, tmp_path / "tmp", RMQSIM_SPARK_DIR=str(tmp_path / "spark"), PYTHON=sys.executable,
                    SPARK_MASTER_PORT=str(port), SPARK_MASTER_WEBUI_PORT=str(_free_port()))
    env["JAVA_TOOL_OPTIONS"] += JVM_QUICK
    for var in ("SPARK_HOST", "SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT"):
        env.pop(var, None)
    master = f"spark://127.0.0.1:{port}"
    try:
        started = subprocess.run(["bash", SCRIPT, "start-master"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=150, stdin=subprocess.DEVNULL)
        assert started.returncode == 0, started.stderr
        proc, wall_s = _rmqsim(["sweep", str(sweep_file), "--master", master, "--out", str(tmp_path / "out")],
                               tmp_path, RMQSIM_EXECUTOR_WAIT_S="5", JAVA_TOOL_OPTIONS=env["JAVA_TOOL_OPTIONS"])
    finally:
        subprocess.run(["bash", SCRIPT, "stop"], cwd=ROOT, env=env, capture_output=True, timeout=150)
        _sigkill(tagged_pids(tag))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert f"--master {master}: no executor for 5 s (Spark would wait forever)" in proc.stderr, proc.stderr
    assert "complete runs are kept" in proc.stderr
