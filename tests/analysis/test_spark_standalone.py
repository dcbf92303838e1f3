"""A sweep on a real Spark standalone cluster (one master, one worker, on 127.0.0.1) gives the
same runs, digest for digest, as the same sweep on local[2].

The master and worker are the ones shipped inside the pyspark package (`bin/spark-class`),
each in its own process group, with their work and log directories under tmp_path. Everything
started here carries a marker in its environment and is killed, and checked gone, at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from analysis import results_store as store
from tests.analysis.test_sweep import (
    CRASH,
    SHORT,
    assert_same_metrics,
    child_env,
    group_members,
    kill_tree,
    read_runs,
    rmqsim_cmd,
    tagged_pids,
    visible,
    write_sweep,
)
from tests.conftest import ROOT

CLUSTER_TIMEOUT_S = 90


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parent.parent) if java else None


def _master_state(webui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as resp:
            return json.loads(resp.read().decode())
    except (OSError, urllib.error.URLError, ValueError):
        return None


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def test_sweep_on_standalone_cluster_equals_local(tmp_path):
    spark_home = _spark_home()
    spark_class = spark_home / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.skip(f"no {spark_class}")
    if _java_home() is None:
        pytest.skip("no java")
    stray_work = [spark_home / "work", ROOT / "work"]
    stray_before = {p: p.exists() for p in stray_work}

    sweep = write_sweep(tmp_path, "cluster_test", set={**SHORT, "faults": CRASH},
                        grid={"rate": {"key": "producers[0].rate_per_s", "values": [100, 250]}},
                        seeds=[1, 2])
    work_dir, log_dir, conf_dir = tmp_path / "spark-work", tmp_path / "spark-logs", tmp_path / "spark-conf"
    for d in (work_dir, log_dir, conf_dir):
        d.mkdir()
    port, webui, worker_webui = _free_port(), _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_env = {"SPARK_HOME": str(spark_home), "SPARK_WORKER_DIR": str(work_dir), "SPARK_LOG_DIR": str(log_dir),
                 "SPARK_CONF_DIR": str(conf_dir), "JAVA_HOME": _java_home(),
                 "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}

    procs: list[tuple[subprocess.Popen, str]] = []  # each process tree has its own marker
    logs = {name: tmp_path / f"{name}.log" for name in ("master", "worker", "local", "cluster")}

    def start(name: str, cmd: list[str]) -> subprocess.Popen:
        tag = uuid.uuid4().hex
        env = child_env(tag, tmp_path / "tmp", **spark_env)
        env.pop("SPARK_MASTER_HOST", None)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        with open(logs[name], "w") as log:
            proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        procs.append((proc, tag))
        return proc

    try:
        started = time.monotonic()
        master = start("master", ["bash", str(spark_class), "org.apache.spark.deploy.master.Master",
                                  "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)])
        # the local[2] reference run goes meanwhile (the cluster mostly waits on JVM start-up)
        local = start("local", [*rmqsim_cmd(), "sweep", str(sweep), "--master", "local[2]",
                                "--out", str(tmp_path / "local")])
        while _master_state(webui) is None:
            assert time.monotonic() - started < CLUSTER_TIMEOUT_S, \
                f"Spark master did not come up in {CLUSTER_TIMEOUT_S} s:\n{_tail(logs['master'])}"
            assert master.poll() is None, f"Spark master exited:\n{_tail(logs['master'])}"
            time.sleep(0.25)
        worker = start("worker", ["bash", str(spark_class), "org.apache.spark.deploy.worker.Worker",
                                  "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
                                  "--webui-port", str(worker_webui), master_url])
        while (_master_state(webui) or {}).get("aliveworkers", 0) < 1:
            assert time.monotonic() - started < CLUSTER_TIMEOUT_S, \
                f"no worker registered in {CLUSTER_TIMEOUT_S} s:\n{_tail(logs['worker'])}"
            assert worker.poll() is None, f"Spark worker exited:\n{_tail(logs['worker'])}"
            time.sleep(0.25)

        cluster = start("cluster", [*rmqsim_cmd(), "sweep", str(sweep), "--master", master_url,
                                    "--parallelism", "2", "--out", str(tmp_path / "cluster")])
        assert cluster.wait(timeout=180) == 0, _tail(logs["cluster"])
        assert local.wait(timeout=180) == 0, _tail(logs["local"])

        # the sweep really ran as an application of this cluster, with executors on the worker
        state = _master_state(webui) or {}
        apps = state.get("completedapps", []) + state.get("activeapps", [])
        assert any(a.get("name") == "rmqsim-sweep-cluster_test" for a in apps), state
        assert any(p.name.startswith("app-") for p in work_dir.iterdir()), "no executor ran on the worker"

        on_cluster, on_local = read_runs(tmp_path / "cluster"), read_runs(tmp_path / "local")
        assert set(on_cluster) == set(on_local) == {"p0000-s1", "p0000-s2", "p0001-s1", "p0001-s2"}
        for rid, row in on_cluster.items():
            assert row["status"] == on_local[rid]["status"] == "ok", row["error"]
            assert (row["point"], row["seed"], row["rate"]) == \
                (on_local[rid]["point"], on_local[rid]["seed"], on_local[rid]["rate"])
            assert_same_metrics(row, on_local[rid], rid)
        assert len({r["trace_sha256"] for r in on_cluster.values()}) == 4
        assert all(not p.name.startswith(".") for p in (tmp_path / "cluster" / store.RUNS).iterdir())
        assert len(visible(tmp_path / "cluster" / store.RUNS)) == 4
    finally:
        for proc, tag in reversed(procs):  # sweeps, then worker (and its executors), then master
            kill_tree(proc, tag, sig=signal.SIGTERM, grace_s=5)
    for proc, tag in procs:
        assert tagged_pids(tag) == [], f"processes of {proc.args[:3]} survived"
        assert group_members(proc.pid) == [], f"process group {proc.pid} ({proc.args[:3]}) still has members"
    for path, existed in stray_before.items():
        assert path.exists() == existed, f"Spark left {path} outside tmp_path"
