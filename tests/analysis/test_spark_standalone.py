"""The README's standalone cluster, run as written: `bash scripts/spark_standalone.sh start` (one
master, one worker, on 127.0.0.1), a sweep with `--master spark://127.0.0.1:PORT`, then
`bash scripts/spark_standalone.sh stop`; the sweep gives the same runs, digest for digest, as the
same sweep on local[2].

The script gets free ports and a state directory under tmp_path through the environment variables
it documents. Every process it starts carries a marker in its environment: after `stop` none may be
left (and, should the test fail half-way, `stop` and then SIGKILL clean up in a `finally`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from analysis.sweeps import results_store as store
from tests.analysis.test_sweep import (
    CRASH,
    SHORT,
    assert_same_metrics,
    child_env,
    kill_tree,
    read_runs,
    rmqsim_cmd,
    tagged_pids,
    visible,
    write_sweep,
)
from tests.conftest import ROOT

pytestmark = [pytest.mark.serial, pytest.mark.slow]  # alone, after the parallel part (scripts/test.sh): its daemons' timing

SCRIPT = "scripts/spark_standalone.sh"  # as the README runs it, from the checkout
SCRIPT_TIMEOUT_S = 150  # the script's own bound on start-up is 90 s per daemon
SWEEP_TIMEOUT_S = 180
# every JVM here (master, worker, executor, the two drivers) lives for seconds on 2 shared cores:
# C1 only and one GC thread cut the test's wall time by about a third; results are the same
JVM_QUICK = " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _sigkill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sweep_on_standalone_cluster_equals_local(tmp_path):
    spark_home = _spark_home()
    if not (spark_home / "bin" / "spark-class").exists():
        pytest.skip(f"no {spark_home / 'bin' / 'spark-class'}")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("no java")
    if not shutil.which("setsid"):
        pytest.skip("no setsid")
    # Spark's defaults would put these in the venv (pyspark/work, pyspark/logs) or the current directory
    stray = [spark_home / "work", spark_home / "logs", ROOT / "work", ROOT / "logs"]
    stray_before = {p: p.exists() for p in stray}

    sweep = write_sweep(tmp_path, "cluster_test", set={**SHORT, "faults": CRASH},
                        grid={"rate": {"key": "producers[0].rate_per_s", "values": [100, 250]}},
                        seeds=[1, 2])
    state = tmp_path / "rmqsim-spark"
    port, webui, worker_webui = _free_port(), _free_port(), _free_port()
    tag = uuid.uuid4().hex  # carried by the script and everything it starts
    script_env = child_env(tag, tmp_path / "tmp", RMQSIM_SPARK_DIR=str(state), PYTHON=sys.executable,
                           SPARK_MASTER_PORT=str(port), SPARK_MASTER_WEBUI_PORT=str(webui),
                           SPARK_WORKER_WEBUI_PORT=str(worker_webui),
                           SPARK_WORKER_CORES="2", SPARK_WORKER_MEMORY="1g")
    script_env["JAVA_TOOL_OPTIONS"] += JVM_QUICK
    for var in ("SPARK_HOST", "SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT"):
        script_env.pop(var, None)

    def script(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", SCRIPT, *args], cwd=ROOT, env=script_env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)

    sweeps: list[tuple[subprocess.Popen, str]] = []
    logs = {name: tmp_path / f"{name}.log" for name in ("local", "cluster")}

    def sweep_on(name: str, master: str) -> subprocess.Popen:
        sweep_tag = uuid.uuid4().hex
        env = child_env(sweep_tag, tmp_path / "tmp")
        env["JAVA_TOOL_OPTIONS"] += JVM_QUICK
        env.pop("PYSPARK_GATEWAY_PORT", None)
        with open(logs[name], "w") as log:
            proc = subprocess.Popen([*rmqsim_cmd(), "sweep", str(sweep), "--master", master,
                                     "--out", str(tmp_path / name)],
                                    cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        sweeps.append((proc, sweep_tag))
        return proc

    stopped = False
    try:
        # the local[2] reference sweep runs meanwhile (the cluster mostly waits on JVM start-up)
        local = sweep_on("local", "local[2]")
        started = script("start")
        assert started.returncode == 0, f"start failed:\n{started.stdout}\n{started.stderr}"
        master_url = started.stdout.split()[-1]
        assert master_url == f"spark://127.0.0.1:{port}", started.stdout
        status = script("status")
        assert status.returncode == 0 and f"master {master_url}: alive workers 1" in status.stdout, status

        cluster = sweep_on("cluster", master_url)
        assert cluster.wait(timeout=SWEEP_TIMEOUT_S) == 0, _tail(logs["cluster"])
        assert local.wait(timeout=SWEEP_TIMEOUT_S) == 0, _tail(logs["local"])

        # the executors ran on the worker, in the state directory's work/
        apps = [p for p in (state / "work").iterdir() if p.name.startswith("app-")]
        assert len(apps) == 1 and (apps[0] / "0" / "stderr").is_file(), sorted((state / "work").iterdir())

        on_cluster, on_local = read_runs(tmp_path / "cluster"), read_runs(tmp_path / "local")
        assert set(on_cluster) == set(on_local) == {"p0000-s1", "p0000-s2", "p0001-s1", "p0001-s2"}
        for rid, row in on_cluster.items():
            assert row["status"] == on_local[rid]["status"] == "ok", row["error"]
            assert (row["point"], row["seed"], row["rate"]) == \
                (on_local[rid]["point"], on_local[rid]["seed"], on_local[rid]["rate"])
            assert_same_metrics(row, on_local[rid], rid)
        assert len({r["trace_sha256"] for r in on_cluster.values()}) == 4
        assert len(visible(tmp_path / "cluster" / store.RUNS)) == 4

        assert tagged_pids(tag), "no process of the cluster is left to stop"
        stop = script("stop")
        stopped = True
        assert stop.returncode == 0, f"stop failed:\n{stop.stdout}\n{stop.stderr}"
        assert "stopped worker" in stop.stdout and "stopped master" in stop.stdout, stop.stdout
        assert tagged_pids(tag) == [], "processes the script started survived `stop`"
        assert not list(state.glob("*.pid"))
        again = script("stop")  # idempotent
        assert again.returncode == 0 and again.stdout == "", again
    finally:
        for proc, sweep_tag in sweeps:
            kill_tree(proc, sweep_tag)
        if not stopped:
            script("stop")
        _sigkill(tagged_pids(tag))
    for path, existed in stray_before.items():
        assert path.exists() == existed, f"Spark left {path} outside its state directory"
    assert (state / "logs" / "master.log").is_file() and (state / "logs" / "worker.log").is_file()
