"""The executors' environment is unpacked once per host and content, reused, and bounded (issue 37,
item 10).

The executor side runs as Spark runs it, without a cluster: the three files `spark.files` ships
(the launcher analysis/sweeps/executor_env.py writes, analysis/sweeps/executor_boot.py, an archive) are copied
into an application's work directory, and the launcher is started there with Spark's arguments.
The archive is a small one of the same shape (its `bin/python` a shell script that says where it
runs), so no 100 MB environment is built here; tests/analysis/test_spark_offhost.py runs the real
one on a worker. Then `scripts/spark_standalone.sh stop` removes the environments (no Java
needed: no daemon is running). (A run Spark retried, recorded in the `attempt` column and named in
the sweep's output: tests/analysis/test_sweep_resilience.py, whose sweep kills Python workers.)
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from analysis.sweeps import executor_boot
from analysis.sweeps.executor_env import BOOT, LAUNCHER, launcher_text
from tests.conftest import ROOT

KEYS = ("a" * 16, "b" * 16, "c" * 16)
FAKE_PYTHON = b'#!/bin/sh\necho "python $0 $*"\n'  # the unpacked environment's bin/python, as far as a test needs
FILLER_BYTES = 300_000  # per environment: three are 900 KB


def _pack(folder: Path, key: str) -> Path:
    """An archive of the real one's shape: bin/python (executable) and a library file."""
    path = folder / f"rmqsim-executor-env-{key}.pack"
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode in (("bin/python", FAKE_PYTHON, 0o755), ("lib/filler.bin", os.urandom(FILLER_BYTES), 0o644),
                                 ("pyvenv.cfg", b"home = /usr/bin\n", 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


def _app_dir(root: Path, name: str, pack: Path) -> Path:
    """An executor's work directory as Spark leaves it after fetching `spark.files`."""
    work = root / name / "0"
    work.mkdir(parents=True)
    shutil.copy(pack, work / pack.name)
    shutil.copy(executor_boot.__file__, work / BOOT)
    (work / LAUNCHER).write_text(launcher_text(pack.name))
    (work / LAUNCHER).chmod(0o755)  # Spark makes every fetched file executable
    return work


def _start_python(work: Path, cache: Path) -> subprocess.CompletedProcess:
    """What an executor does to start its Python worker daemon."""
    env = {k: v for k, v in os.environ.items() if k != executor_boot.CACHE_ENV}
    env[executor_boot.CACHE_ENV] = str(cache)
    return subprocess.run([f"./{LAUNCHER}", "-m", "pyspark.daemon"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_next_sweep_reuses_the_unpacked_environment(tmp_path):
    pack, cache = _pack(tmp_path, KEYS[0]), tmp_path / "cache"
    first = _start_python(_app_dir(tmp_path, "app-1", pack), cache)
    env = cache / KEYS[0]
    assert first.returncode == 0 and first.stdout == f"python {env}/bin/python -m pyspark.daemon\n", first
    planted = env / "lib" / "planted"  # bytecode an executor wrote, say: a re-unpacking would lose it
    planted.write_text("kept")
    inode = env.stat().st_ino

    second_work = _app_dir(tmp_path, "app-2", pack)  # the next sweep's executor
    second = _start_python(second_work, cache)
    assert second.returncode == 0 and second.stdout == first.stdout, second
    assert env.stat().st_ino == inode and planted.read_text() == "kept"
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [KEYS[0]]
    for work in (tmp_path / "app-1" / "0", second_work):  # the archive's copies: not kept per application
        assert not (work / pack.name).exists(), sorted(work.iterdir())


def test_unused_environments_go_oldest_first_past_the_size_bound(tmp_path):
    cache = tmp_path / "cache"
    packs = [_pack(tmp_path, key) for key in KEYS]
    for pack in packs[:2]:
        _env, held = executor_boot.ensure_env(pack, cache)
        os.close(held)
    os.utime(cache / KEYS[1], ns=(1, 1))  # the second started long ago: oldest
    in_use = executor_boot.hold_shared(cache / f"{KEYS[1]}.lock")  # ... but still running
    leftover = cache / f".tmp-{KEYS[2]}-99999"  # an unpacking that was killed
    (leftover / "lib").mkdir(parents=True)
    try:
        env, held = executor_boot.ensure_env(packs[2], cache, max_bytes=FILLER_BYTES * 3 // 2)
        os.close(held)
        assert env == cache / KEYS[2]
        left = sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))
        assert left == [KEYS[1], KEYS[2]], left  # the unused one gone; the one in use and the new one kept
    finally:
        os.close(in_use)
    _env, held = executor_boot.ensure_env(packs[2], cache, max_bytes=FILLER_BYTES * 3 // 2)
    os.close(held)
    assert sorted(p.name for p in cache.iterdir()) == [".lock", KEYS[2], f"{KEYS[2]}.lock"]


def test_an_environment_neither_unpacked_nor_shipped_is_one_line(tmp_path):
    work = _app_dir(tmp_path, "app-1", _pack(tmp_path, KEYS[0]))
    (work / f"rmqsim-executor-env-{KEYS[0]}.pack").unlink()
    proc = _start_python(work, tmp_path / "cache")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc
    assert proc.stderr.startswith("rmqsim executor: could not set up the environment from ") and \
        "its archive" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_stop_removes_the_executors_environments(tmp_path):
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    (state / "envs" / KEYS[0] / "bin").mkdir(parents=True)
    (state / "logs").mkdir()
    (state / "logs" / "worker.log").write_text("kept")
    (elsewhere / "mine").mkdir(parents=True)
    env = dict(os.environ, RMQSIM_SPARK_DIR=str(state))
    stop = subprocess.run(["bash", "scripts/spark_standalone.sh", "stop"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert stop.returncode == 0, stop
    assert stop.stdout == f"removed the executors' environments ({state}/envs)\n", stop.stdout
    assert not (state / "envs").exists() and (state / "logs" / "worker.log").read_text() == "kept"
    (state / "envs").symlink_to(elsewhere)  # not rmqsim's folder: left alone, and not followed
    again = subprocess.run(["bash", "scripts/spark_standalone.sh", "stop"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and again.stdout == "", again
    assert (elsewhere / "mine").is_dir() and (state / "envs").is_symlink()
