"""Shared fixtures: a small world builder and a short baseline scenario."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test parametrized over seeds runs its first seed everywhere; its other seeds are marked
    `slow` (CI leaves them out; `scripts/test.sh --slow` runs them), as `first_seed_in_ci` does by
    hand. A story's bound is still checked over all its seeds, by the slow run. A `serial` test (a
    standalone Spark cluster of its own) is `slow` too: scripts/test.sh --slow runs it, alone."""
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.slow)
        callspec = getattr(item, "callspec", None)
        if callspec is None or "seed" not in callspec.params:
            continue
        first = _first_seed(item)
        if first is not None and callspec.params["seed"] != first:
            item.add_marker(pytest.mark.slow)


def _first_seed(item: pytest.Item) -> object | None:
    """The first `seed` value of the item's parametrization (None when it cannot be told)."""
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0] if isinstance(mark.args[0], (list, tuple)) else \
            [n.strip() for n in str(mark.args[0]).split(",")]
        if "seed" not in names or not mark.args[1]:
            continue
        first = mark.args[1][0]
        values = first.values if hasattr(first, "values") and not isinstance(first, dict) else \
            (first if len(names) > 1 else (first,))
        return values[list(names).index("seed")]
    return None


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def scratch_env(tmp: Path) -> dict[str, str]:
    """Temporary files of Python and of every JVM (Spark's block managers, native libraries) under
    `tmp`: a killed JVM runs no shutdown hook, and would leave them in /tmp."""
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(tmp), "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp} -XX:-UsePerfData"}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """The one local[2] SparkSession of this test process (an xdist worker runs several modules),
    for every module that reads through Spark (a sweep's tables, the sweep report) or runs a sweep
    the Spark way: the code reuses a running session whatever it was started for
    (analysis/sweeps/sweep.py spark_session), so one JVM serves them all instead of one per module.
    Started with a report's JVM options (sweep.py REPORT_JAVA_OPTIONS: about a quarter of the CPU
    time of a sweep's JVM to start on two cores), `local[2,F]` as a sweep's own session, the JVM's
    scratch files under a temporary folder (a killed JVM runs no shutdown hook); stopped, JVM
    included, when the session ends, so nothing is left."""
    import tempfile

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from analysis.sweeps.sweep import local_master, spark_session

    scratch = tmp_path_factory.mktemp("spark-scratch")
    with pytest.MonkeyPatch.context() as mp:  # only while the JVM starts: it and its Python workers keep them
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        for name, value in scratch_env(scratch).items():
            mp.setenv(name, value)
        mp.setattr(tempfile, "tempdir", str(scratch))
        session = spark_session("local[2]", 2, app="rmqsim-tests", purpose="report")
    assert session.sparkContext.master == local_master("local[2]", 2)  # not a session another test left running
    try:
        yield session
    finally:
        gateway = SparkContext._gateway
        session.stop()
        if gateway is not None:  # the py4j JVM outlives sc.stop(); end it so nothing is left
            proc = getattr(gateway, "proc", None)
            gateway.shutdown()
            SparkContext._gateway = SparkContext._jvm = None
            if proc is not None:
                proc.stdin.close()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        assert SparkSession.getActiveSession() is None


def short_baseline(duration_ms: int = 20_000, settle_ms: int = 10_000, rate: int = 500):
    """The bundled baseline, shortened (same topology) for tests that run it many times."""
    from rmqsim.scenario import spec as scenario

    return scenario.load(ROOT / "scenarios" / "baseline.yaml",
                         [f"duration_ms={duration_ms}", f"settle_ms={settle_ms}",
                          f"producers[0].rate_per_s={rate}"])


def first_seed_in_ci(seeds: tuple[int, ...]) -> tuple:
    """A story's seeds as pytest parameters: the first runs everywhere, the others are marked `slow`
    (scripts/test.sh --slow; CI leaves them out), with the same test ids ([1], [2], [3])."""
    return (seeds[0], *(pytest.param(s, marks=pytest.mark.slow, id=str(s)) for s in seeds[1:]))


def cli_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`rmqsim ARGS` through `rmqsim.cli.main`, in this process, as a finished child process would
    report it (exit code, stdout, stderr): the same code path without an interpreter's start-up
    (about 0.7 s a call). An exception the CLI lets through fails the test, as a traceback would."""
    import contextlib
    import io

    from rmqsim import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["rmqsim", *args], code, out.getvalue(), err.getvalue())


@functools.cache
def golden_script() -> ModuleType:
    """scripts/golden_digests.py as a module: the golden runs, their recorded digests
    (tests/data/golden_digests.json) and the message a changed digest fails with."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("golden_digests", ROOT / "scripts" / "golden_digests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def traced_run_dir(base: Path, scenario: str, seed: int, sets: tuple[str, ...]) -> Path:
    """`rmqsim run scenarios/<scenario>.yaml --seed N --trace` with `--set` overrides, in a directory
    under `base` named by the scenario, the seed and the overrides' digest (explain stories read it)."""
    import hashlib

    from rmqsim import cli

    out = base / f"{scenario}-{seed}-{hashlib.sha256(repr(sets).encode()).hexdigest()[:8]}"
    argv = ["run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--seed", str(seed), "--out", str(out), "--trace"]
    for item in sets:
        argv += ["--set", item]
    assert cli.main(argv) in (0, 1)
    return out
