"""A sweep on a standalone cluster whose worker cannot see the checkout or the project's venv:
executors run from the packed environment the driver ships (analysis/sweeps/executor_env.py), compiled,
with the digests of local runs.

The worker runs in a mount namespace of its own (`unshare --mount`, or `unshare -Urm` without
root) where the checkout, and with it `.venv`, is hidden under an empty tmpfs; it sees Spark's jars
only through a bind mount of the pyspark directory elsewhere (a cluster host has its own Spark),
and the base interpreter (a host with the same Python at the same path, nothing installed).
Where no mount namespace can be made, the worker runs unmasked and the test still shows the
executors' interpreter is the archive's: their modules come from the unpacked archive.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.analysis.test_spark_standalone import JVM_QUICK, SCRIPT, _free_port, _sigkill, _spark_home, _tail
from tests.analysis.test_sweep import (
    CRASH,
    SHORT,
    child_env,
    direct_summary,
    read_runs,
    rmqsim_cmd,
    tagged_pids,
    write_sweep,
)
from tests.conftest import ROOT

pytestmark = [pytest.mark.serial, pytest.mark.slow]

TIMEOUT_S = 150


def _namespace() -> list[str] | None:
    """The unshare command that gives a private mount namespace here, or None."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return None
    for command in (["unshare", "--mount", "--propagation", "private"], ["unshare", "-Urm", "--propagation", "private"]):
        probe = subprocess.run([*command, "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True)
        if probe.returncode == 0:
            return command
    return None


def _masked_worker(namespace: list[str] | None, spark_src: Path, spark_dst: Path, master: str, state: Path,
                   env: dict[str, str], log: Path) -> subprocess.Popen:
    """The Worker class through spark-class, with the checkout hidden when `namespace` is given."""
    worker = (f'exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 '
              f'--port {_free_port()} --webui-port {_free_port()} --cores 2 --memory 1g '
              f'--work-dir "{state / "work"}" {master}')
    if namespace is None:
        script, env["SPARK_HOME"] = worker, str(spark_src)
    else:
        spark_dst.mkdir(parents=True)
        env["SPARK_HOME"] = str(spark_dst)
        script = (f'mount --bind "{spark_src}" "{spark_dst}" && mount -t tmpfs -o size=1m tmpfs "{ROOT}" '
                  f'&& test ! -e "{ROOT / ".venv"}" && {worker}')
    with open(log, "w") as out:
        return subprocess.Popen([*(namespace or []), "bash", "-c", script], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_registered(master_log: Path, proc: subprocess.Popen, worker_log: Path) -> None:
    deadline = time.monotonic() + 90
    while "Registering worker" not in _tail(master_log, 100_000):
        assert proc.poll() is None, f"the worker exited:\n{_tail(worker_log)}"
        assert time.monotonic() < deadline, f"the worker did not register:\n{_tail(worker_log)}"
        time.sleep(0.5)


def test_executors_on_a_host_without_the_project_run_compiled(tmp_path):
    spark_home = _spark_home()
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")) or not shutil.which("setsid"):
        pytest.skip("no java or setsid")
    namespace = _namespace()
    sweep = write_sweep(tmp_path, "offhost", set={**SHORT, "faults": CRASH},
                        grid={"rate": {"key": "producers[0].rate_per_s", "values": [100, 250]}}, seeds=[1, 2])
    state, port, tag = tmp_path / "spark", _free_port(), uuid.uuid4().hex
    env = child_env(tag, tmp_path / "tmp", RMQSIM_SPARK_DIR=str(state), PYTHON=sys.executable,
                    SPARK_MASTER_PORT=str(port), SPARK_MASTER_WEBUI_PORT=str(_free_port()))
    env["JAVA_TOOL_OPTIONS"] += JVM_QUICK
    for var in ("SPARK_HOST", "SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT"):
        env.pop(var, None)
    # (bytecode written where the executors import from: the evidence below)
    worker_env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHON", "PYTHONDONTWRITEBYTECODE")}
    worker_env.update(SPARK_CONF_DIR=str(state / "conf"), SPARK_LOCAL_IP="127.0.0.1",
                      SPARK_WORKER_OPTS="-Dspark.port.maxRetries=0", RMQSIM_EXECUTOR_ENV_CACHE=str(state / "envs"))
    worker_log = tmp_path / "worker.log"
    master = f"spark://127.0.0.1:{port}"
    try:
        started = subprocess.run(["bash", SCRIPT, "start-master"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert started.returncode == 0, started.stderr
        worker = _masked_worker(namespace, spark_home, tmp_path / "spark-home", master, state, worker_env, worker_log)
        _wait_registered(state / "logs" / "master.log", worker, worker_log)
        swept = subprocess.run([*rmqsim_cmd(), "sweep", str(sweep), "--master", master, "--out", str(tmp_path / "out")],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                               stdin=subprocess.DEVNULL)
        assert swept.returncode == 0, swept.stdout + swept.stderr + _tail(worker_log)
        # the executors ran in the environment unpacked once into the host's cache (the script's envs/), keyed
        # by its digest: its modules were imported there (bytecode written); the work directory keeps no copy
        unpacked = [path.parent.parent for path in (state / "envs").glob("*/bin/python")]
        assert len(unpacked) == 1, sorted((state / "envs").iterdir())
        assert not [p for p in (state / "work").rglob("*") if p.name == "lib" or p.suffix == ".pack"]
        site = unpacked[0] / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        assert (site / "sim" / "__pycache__").is_dir() and (site / "sim" / "env.pxd").is_file()
    finally:
        subprocess.run(["bash", SCRIPT, "stop"], cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT_S)
        _sigkill(tagged_pids(tag))
    assert re.search(r"\b4 on compiled modules\b", swept.stdout + swept.stderr), swept.stdout + swept.stderr
    assert not (state / "envs").exists()  # `stop` removed the executors' environments
    runs = read_runs(tmp_path / "out")
    assert sorted(runs) == ["p0000-s1", "p0000-s2", "p0001-s1", "p0001-s2"]
    from analysis.sweeps.spec import load_sweep

    spec = load_sweep(sweep)
    for run_id, row in runs.items():
        assert row["status"] == "ok", row.get("error")
        point, seed = int(run_id[1:5]), int(run_id.split("-s")[1])
        assert row["trace_sha256"] == direct_summary(spec, point, seed)["trace_sha256"], run_id
    print(f"worker masked from the checkout: {namespace is not None}")
