"""The driver side of a sweep: where its runs execute, one task per run, progress, resume, determinism.

`run_sweep(sweep, out_dir, master=...)` expands nothing itself (see analysis/sweeps/spec.py); it
prepares `out_dir` (analysis/sweeps/directory.py: a new, empty or resumable directory of this sweep;
leftovers of an interrupted sweep removed, damaged run files redone), skips runs already
complete, sends each remaining (point, seed) as one task to `analysis.sweeps.task.execute`,
prints a live progress line, and with `verify_determinism=K` reruns K runs chosen at random
(seeded by the sweep digest) in the driver process and compares their digests with the
executors'.

Where the tasks run (`uses_spark`): with a local master (`local[N]`, `local[*]`, or none) in N
local worker processes and no JVM (analysis/sweeps/local_pool.py: a Spark session, its JVM and
its per-task scheduling cost seconds that a short sweep does not otherwise spend); with a cluster
master, under spark-submit, or with RMQSIM_SWEEP_ENGINE=spark, as one Spark task per run. Both run
the same `execute`, so the directory, its rows and files, resume and retries are the same; the
rest of this docstring describes the Spark path, and local_pool.py how the local one matches it.

A lost Python worker is retried: local masters run as `local[N,F]` and clusters with
`spark.task.maxFailures` = F (sweep_dir.TASK_MAX_FAILURES), and a run whose worker keeps dying
becomes a failed run (sweep_task.py). A Spark job that fails anyway (its executors gone, the
output directory unwritable) raises `SweepAborted` with a one-line reason: the complete runs
stay, and rerunning the command resumes. A job that failed because the disk is full raises
`OutputError` ("could not write ...: no space left on device"; the CLI's exit 2) instead: every
run that failed to write removed its files (analysis/sweeps/task.py), so the directory holds
only complete runs.

Executors get PYTHONHASHSEED=0 and, on a local master, the driver's Python and installed project.
On a cluster master (`spark://…`, `yarn`, `k8s://…`), they get a packed virtual environment of
the project, compiled, and its runtime dependencies through `spark.files`, unpacked once per host
and reused by later sweeps with the same content (analysis/sweeps/executor_env.py, executor_boot.py):
workers need only the same Python at the same path, and Spark. Under spark-submit the submitter
passes it (scripts/rmqsim_submit.py says how). Each run's row records Spark's task attempt that
wrote it (`attempt`, 0 for the first), and the outcome names the runs Spark retried after losing
an executor or a Python worker (`SweepOutcome.retried`).

A master rmqsim cannot use is `SparkMasterError` (the CLI's exit 2, naming the URL and why): a
form the installed Spark does not accept is refused before a JVM starts (`check_master`; Spark 4
has no Mesos), a `spark://` or `k8s://` master whose port takes no TCP connection within
CONNECT_TIMEOUT_S likewise (`check_reachable`: Spark would retry for a minute, then fail with a
Java stack trace), a session that does not start says why in one line, and a cluster job that has
had no executor for EXECUTOR_WAIT_S (Spark waits forever: no worker with a free core) is cancelled.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pyarrow.parquet as pq

from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import executor_env
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import Sweep, run_id
from sim import compiled
from sim.files import OutputError
from sim.sources import sources_sha256

SIMULATOR_PACKAGES = ("sim", "models")  # what a run's results (and digest) depend on


class SweepAborted(Exception):
    """The Spark job failed as a whole (a one-line reason); complete runs are kept."""


class SparkMasterError(Exception):
    """A Spark master rmqsim cannot use (the message names the URL and why; the CLI's exit 2):
    malformed (refused before a JVM starts), unreachable (a TCP connection to it fails within
    CONNECT_TIMEOUT_S), Spark failing to start with it, or a cluster that gives a sweep no
    executor for EXECUTOR_WAIT_S."""


@dataclass
class SweepOutcome:
    total: int
    skipped: int
    ran: int
    failed: list[str] = field(default_factory=list)  # run ids
    wall_s: float = 0.0
    spark_wall_s: float = 0.0  # from submitting the job to its last task
    mismatches: list[str] = field(default_factory=list)  # determinism check failures
    verified: list[str] = field(default_factory=list)
    compiled_runs: int = 0  # runs whose executor ran the compiled per-message modules (sim/compiled.py)
    retried: dict[str, int] = field(default_factory=dict)  # run id → Spark's attempt that ran it (> 0: retried)
    spark: Any = field(default=None, repr=False)  # the Spark session the runs used (a report reuses it); None: local workers


def manifest(sweep: Sweep) -> dict[str, Any]:
    return {"tool": sweep_dir.TOOL, "name": sweep.name, "source": sweep.source, "digest": sweep.digest(),
            "simulator_sha256": simulator_sha256(),
            "base": str(sweep.base_path), "params": {n: p.key for n, p in sweep.params.items()},
            "param_types": sweep.param_types, "grid": list(sweep.spec.grid), "zip": list(sweep.spec.zip),
            "points": [{"point": p.index, "point_key": p.key, "params": p.params} for p in sweep.points],
            "seeds": sweep.seeds, "keep": list(sweep.spec.keep),
            "timeline_run": run_id(*sweep.timeline_run()), "runs": sweep.n_runs,
            "report": sweep.spec.report.model_dump(),
            "lint": sweep.lint,  # the lint's warnings over the points (analysis/sweeps/lint_points.py)
            "base_scenario": sweep.base_data}  # diff rebuilds a point from it: `base` is never opened


def tasks(sweep: Sweep, out_dir: Path, digest: str | None = None) -> list[dict[str, Any]]:
    """One picklable task per run, in sweep order (the base scenario's JSON is one shared string)."""
    base = _display_path(sweep.base_path)
    base_json, digest = json.dumps(sweep.base_data), digest or sweep.digest()
    common = {"sweep": sweep.name, "sweep_digest": digest, "base_json": base_json, "keep": list(sweep.spec.keep),
              "out_dir": str(out_dir.resolve()), "param_types": sweep.param_types,
              "run_timeout_s": sweep.spec.run_timeout_s, "max_events": sweep.spec.run_max_events}
    out = []
    for point in sweep.iter_points():
        for seed in sweep.seeds:
            repro = f"rmqsim run {shlex.quote(base)} --seed {seed}" + "".join(
                f" --set {shlex.quote(item)}" for item in point.overrides)
            out.append({**common, "run_id": run_id(point.index, seed), "point": point.index, "point_key": point.key,
                        "params": point.params, "seed": seed, "overrides": point.overrides, "repro": repro})
    return out


def run_sweep(sweep: Sweep, out_dir: str | Path, master: str | None = None,
              parallelism: int | None = None, verify_determinism: int = 0,
              progress: TextIO | None = None, replace: bool = False) -> SweepOutcome:
    started = time.perf_counter()
    check_master(master)  # a malformed or unreachable master: refused before the directory is touched
    if master is not None:
        check_reachable(master)
    out_dir = Path(out_dir)
    log = progress or sys.stderr
    wanted = manifest(sweep)
    for note in sweep_dir.prepare(out_dir, wanted, replace):
        print(f"{out_dir}: {note}", file=log)
    all_tasks = tasks(sweep, out_dir, wanted["digest"])
    status = sweep_dir.completed(out_dir, wanted["digest"], {t["run_id"] for t in all_tasks}, log)
    pending = [t for t in all_tasks if status.get(t["run_id"]) != "ok"]
    outcome = SweepOutcome(total=len(all_tasks), skipped=len(all_tasks) - len(pending), ran=len(pending))
    if outcome.skipped:
        print(f"{out_dir}: {outcome.skipped} of {outcome.total} runs already complete, skipped", file=log)
    spark = uses_spark(master)
    if not pending and not (verify_determinism and spark):
        if verify_determinism:
            _verify(sweep, out_dir, all_tasks, verify_determinism, outcome, log)
        outcome.wall_s = time.perf_counter() - started
        return outcome
    if spark:
        outcome.spark = spark_session(master, parallelism, app=f"rmqsim-sweep-{sweep.name}")
    if pending:
        try:
            if spark:
                results, outcome.spark_wall_s = _submit(outcome.spark, pending, log, outcome.total, outcome.skipped)
            else:
                results, outcome.spark_wall_s = _run_local(pending, master, parallelism, log, outcome)
        finally:
            sweep_dir.clean_leftovers(out_dir)  # attempt markers, temporaries of killed workers
        outcome.failed = sorted(r["run_id"] for r in results if r["status"] != "ok")
        outcome.compiled_runs = sum(1 for r in results if r.get("compiled_modules"))
        outcome.retried = {r["run_id"]: r["attempt"] for r in sorted(results, key=lambda r: r["run_id"])
                           if r.get("attempt")}
    if verify_determinism:
        _verify(sweep, out_dir, all_tasks, verify_determinism, outcome, log)
    outcome.wall_s = time.perf_counter() - started
    return outcome


def _run_local(pending: list[dict], master: str | None, parallelism: int | None, log: TextIO,
               outcome: SweepOutcome) -> tuple[list[dict], float]:
    """The pending runs in local worker processes (analysis/sweeps/local_pool.py), no JVM; the
    results and the ways a sweep stops are the Spark path's (`_submit`)."""
    from analysis.sweeps import local_pool
    from analysis.sweeps.task import NO_SPACE

    progress = local_pool.PoolProgress()
    line = ProgressLine(log, outcome.total, outcome.skipped)
    started = time.perf_counter()
    try:
        results = local_pool.run_tasks(pending, local_pool.parallelism_of(master, parallelism), progress,
                                       lambda: line.update(progress.done, progress.failed), NO_SPACE)
    except local_pool.PoolAborted as exc:
        raise SweepAborted(str(exc)) from None
    line.update(progress.done, progress.failed, final=True)
    if progress.no_space:
        raise _no_space(pending[0]["out_dir"])
    return results, time.perf_counter() - started


def _no_space(out_dir: str) -> OutputError:
    return OutputError(f"could not write in {out_dir}: no space left on device (the sweep stopped); complete "
                       "runs are kept: free space and rerun the same command to resume")


ENGINE_ENV = "RMQSIM_SWEEP_ENGINE"  # `spark`: Spark even for a local master (sweep and report); `local`: the default


def uses_spark(master: str | None) -> bool:
    """Whether Spark runs a sweep (and reads its report) with this master: a cluster master (spark://,
    yarn, k8s://, local-cluster[...]), a session spark-submit started, or ENGINE_ENV=spark; a local
    master, or none, runs in local worker processes without a JVM (analysis/sweeps/local_pool.py)."""
    engine = os.environ.get(ENGINE_ENV, "local")
    if engine not in ("local", "spark"):
        raise SparkMasterError(f"{ENGINE_ENV}={engine[:40]!r}: give spark (Spark even on this machine) or local")
    if engine == "spark" or "PYSPARK_GATEWAY_PORT" in os.environ:
        return True
    if master is None:
        return False
    return master.startswith("local-cluster") or _LOCAL.fullmatch(master) is None


# A report's own session reads one row per run: no UI, the client JIT compiler (C1) and the serial
# collector start the JVM and answer the first queries about twice as fast on two loaded cores.
REPORT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(master: str | None, parallelism: int | None, app: str, purpose: str = "sweep",
                  keep_classes: bool = False) -> Any:
    """A SparkSession for sweeps: given master, or spark-submit's, or local[*]/local[N]. With
    `purpose="report"`, one for a report alone (REPORT_JAVA_OPTIONS, no web UI, Spark's classes
    mapped from a class archive if there is one — analysis/sweeps/spark_classes.py; `keep_classes`: make
    one if not, the caller then ends the session with `spark_classes.finish` — and no Python
    packages for executors: a report runs no Python on them). A session already running in this
    process is reused (Spark allows one), whatever it was started for. A master it cannot start
    with: SparkMasterError (module docstring)."""
    check_master(master)  # before a JVM starts
    given = master
    os.environ.setdefault("PYTHONHASHSEED", "0")  # local-mode Python workers inherit it
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if master is not None and SparkContext._active_spark_context is None:
        check_reachable(master)  # before a JVM starts (a running session is reused, whatever its master)
    builder = SparkSession.builder.appName(app)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: keep its master
    if master is None and not submitted:
        master = "local[*]"
    if master is not None and re.fullmatch(r"local(\[.*\])?", master):
        master = local_master(master, parallelism)
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):  # this interpreter, this installation
        if os.environ.get("PYSPARK_PYTHON") == executor_env.PYTHON:
            del os.environ["PYSPARK_PYTHON"]  # an earlier cluster session's
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    elif master is not None and purpose != "report":  # another host's executors: the packed environment
        for key, value in executor_env.spark_conf(executor_env.packed_env()).items():
            builder = builder.config(key, value)
        os.environ["PYSPARK_PYTHON"] = executor_env.PYTHON  # what PySpark hands the executors (SparkContext.pythonExec)
    if parallelism and master is not None and not master.startswith("local"):
        builder = builder.config("spark.cores.max", str(parallelism))
    log4j = Path(__file__).with_name("spark-log4j2.properties")
    java = f"-Dlog4j.configurationFile={log4j.as_uri()}"
    if purpose == "report":
        from analysis.sweeps import spark_classes

        builder = builder.config("spark.ui.enabled", "false")
        fresh = SparkContext._gateway is None  # a JVM to start: else the running one's options stand
        java = f"{java} {REPORT_JAVA_OPTIONS} {spark_classes.options(REPORT_JAVA_OPTIONS, keep_classes and fresh)}"
    builder = (builder.config("spark.executorEnv.PYTHONHASHSEED", "0")
               .config(f"spark.executorEnv.{compiled.PURE_ENV}", os.environ.get(compiled.PURE_ENV, ""))
               .config("spark.driver.extraJavaOptions", java)
               .config("spark.python.worker.reuse", "true")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.task.maxFailures", str(sweep_dir.TASK_MAX_FAILURES))
               .config("spark.sql.session.timeZone", "UTC"))
    spark = _start(builder, given)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _start(builder: Any, master: str | None) -> Any:
    """The session `builder` makes, or SparkMasterError saying why Spark did not start."""
    try:
        return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j's and PySpark's errors: no common class
        shown = shown_master(master) if master is not None else "(spark-submit's)"
        raise SparkMasterError(f"--master {shown}: Spark did not start: {_start_problem(master, exc)}") from None


def simulator_sha256() -> str:
    """Digest of the simulator's sources (sim/sources.py, read afresh): a sweep directory's runs
    must all come from one."""
    return sources_sha256(SIMULATOR_PACKAGES)


def _submit(spark: Any, pending: list[dict], log: TextIO, total: int, skipped: int) -> tuple[list[dict], float]:
    from analysis.sweeps.task import NO_SPACE, execute

    sc = spark.sparkContext
    done, failed, full = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)
    watch = ExecutorWatch(sc, executor_wait_s())

    def run(task: dict) -> dict:
        from pyspark import TaskContext

        context = TaskContext.get()
        result = execute(task, attempt=context.attemptNumber() if context is not None else 0)
        done.add(1)
        if result["status"] == NO_SPACE:
            full.add(1)
        elif result["status"] != "ok":
            failed.add(1)
        return result

    rdd = sc.parallelize(pending, numSlices=len(pending))  # one task per run
    box: dict[str, Any] = {}
    started = time.perf_counter()
    worker = threading.Thread(target=lambda: box.update(results=_collect(rdd.map(run), box)), daemon=True)
    worker.start()
    line = ProgressLine(log, total, skipped)
    cancelled = False
    while worker.is_alive():
        worker.join(timeout=1.0)
        line.update(done.value, failed.value)
        if (full.value or watch.starved()) and not cancelled:  # the disk is full: the other runs could not
            sc.cancelAllJobs()  # write either; no executor for long: Spark would wait for one forever
            cancelled = True
    line.update(done.value, failed.value, final=True)
    if watch.gone:
        raise SparkMasterError(watch.reason())
    text = str(box.get("error", ""))
    if full.value or any(r["status"] == NO_SPACE for r in box.get("results", [])) or \
            "No space left on device" in text or "errno 28" in text.lower():
        raise _no_space(pending[0]["out_dir"])
    if "error" in box:
        raise SweepAborted(_first_line(box["error"])) from None
    return box["results"], time.perf_counter() - started


def executor_wait_s() -> float:
    """EXECUTOR_WAIT_S, or the environment's EXECUTOR_WAIT_ENV (a positive number of seconds)."""
    text = os.environ.get(EXECUTOR_WAIT_ENV)
    if text is None:
        return EXECUTOR_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise SparkMasterError(f"{EXECUTOR_WAIT_ENV}={text[:40]!r}: not a positive number of seconds")
    return value


class ExecutorWatch:
    """How long a cluster job has gone without any executor: Spark waits for one forever (a master
    with no worker, workers without a free core or the memory an executor asks, or all of them
    lost); `starved` once that has lasted `wait_s`. A local master always has its executor."""

    def __init__(self, sc: Any, wait_s: float) -> None:
        self.sc, self.wait_s = sc, wait_s
        self.cluster = not sc.master.startswith("local")
        self.since = time.monotonic()
        self.gone = False  # latched: once starved, the job is cancelled

    def starved(self) -> bool:
        if not self.cluster or self.gone:
            return self.gone
        if self._executors() > 0:
            self.since = time.monotonic()
        self.gone = time.monotonic() - self.since > self.wait_s
        return self.gone

    def _executors(self) -> int:
        try:  # block managers: the driver's and one per executor
            return self.sc._jsc.sc().getExecutorMemoryStatus().size() - 1
        except Exception:  # noqa: BLE001 - the JVM busy or going: count as present, the job's own error says more
            return 1

    def reason(self) -> str:
        return (f"--master {shown_master(self.sc.master)}: no executor for {self.wait_s:g} s (Spark would wait "
                "forever): no alive worker with a free core and the memory an executor asks (spark.executor.memory)? "
                "See the master's web UI, or `bash scripts/spark_standalone.sh status`; "
                f"{EXECUTOR_WAIT_ENV} sets how long to wait")


def _first_line(exc: BaseException) -> str:
    """The gist of a Spark job failure ("Job aborted due to stage failure: ... (crashed)")."""
    text = str(exc)
    match = re.search(r"(Job aborted[^\n]*|Python worker exited[^\n]*)", text)
    line = match.group(1) if match else (text.strip().splitlines() or [type(exc).__name__])[0]
    return line[:400]


def local_master(master: str, parallelism: int | None) -> str:
    """`local`, `local[N]`, `local[*]`, `local[N,F]` → `local[N,F]` with at least
    TASK_MAX_FAILURES task attempts (plain local mode retries nothing); `parallelism` sets N."""
    match = re.fullmatch(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*(\d+)\s*)?\])?", master)
    if match is None:
        return master
    threads = str(parallelism) if parallelism else (match.group(1) or "1")
    failures = max(int(match.group(2) or 0), sweep_dir.TASK_MAX_FAILURES)
    return f"local[{threads},{failures}]"


MASTER_FORMS = ("local, local[N], local[*], local[N,F], spark://HOST:PORT (HA: spark://HOST:PORT,HOST:PORT), "
                "yarn, k8s://[https://]HOST[:PORT]")
CONNECT_TIMEOUT_S = 5.0  # a cluster master's port must accept a TCP connection within this
EXECUTOR_WAIT_ENV = "RMQSIM_EXECUTOR_WAIT_S"  # overrides EXECUTOR_WAIT_S (a YARN queue may need longer)
EXECUTOR_WAIT_S = 300.0  # a cluster sweep with no executor this long stops (Spark itself would wait forever)
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
                        r"(?::(?P<port>[0-9]{1,5}))?")
_LOCAL = re.compile(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*(\d+)\s*)?\])?|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]")


def check_master(master: str | None) -> None:
    """Refuse, before a JVM starts, a master URL the installed Spark would not accept (spark-submit
    would exit with a Java stack trace, or Spark would fail after a minute); None (local[*], or
    spark-submit's own master) passes."""
    if master is None:
        return
    problem = _master_problem(master)
    if problem:
        raise SparkMasterError(f"--master {shown_master(master)}: {problem}")


def _master_problem(master: str) -> str | None:
    """Why `master` is no master URL Spark accepts (SparkSubmit's and SparkContext's forms), or None."""
    if _LOCAL.fullmatch(master):
        threads = _LOCAL.fullmatch(master).group(1)
        return "local[0] runs nothing: give local[N] with N >= 1, or local[*]" if threads == "0" else None
    scheme, sep, rest = master.partition("://")
    if master == "yarn":
        return None if os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR") else \
            "yarn needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the cluster's configuration"
    if master in ("yarn-client", "yarn-cluster"):
        return "Spark 3 removed this form: give --master yarn"
    if sep and scheme == "spark":
        bad = [hp for hp in rest.split(",") if _host_port(hp, None) is None]
        return f"{bad[0][:80]!r} is no HOST:PORT (forms: {MASTER_FORMS})" if bad else None
    if sep and scheme == "k8s":
        api = re.sub(r"^https?://", "", rest)
        return None if _host_port(api.rstrip("/"), 443) else f"no API server HOST[:PORT] after k8s:// (forms: {MASTER_FORMS})"
    if sep and scheme == "mesos":
        return f"Spark 4 removed Mesos support (this is pyspark {_pyspark_version()}); forms: {MASTER_FORMS}"
    return f"not a Spark master URL (forms: {MASTER_FORMS})"


def _host_port(text: str, default_port: int | None) -> tuple[str, int] | None:
    """(host, port) of `HOST:PORT` (IPv6 in brackets), the port 1 to 65535 (`default_port` if
    omitted and allowed), or None."""
    match = _HOST_PORT.fullmatch(text.strip())
    if match is None or (match.group("port") is None and default_port is None):
        return None
    port = int(match.group("port") or default_port or 0)
    return (match.group("host").strip("[]"), port) if 0 < port < 65536 else None


def _pyspark_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark")
    except PackageNotFoundError:
        return "not installed"


def check_reachable(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A `spark://` master (one of an HA list) or a `k8s://` API server must accept a TCP connection
    within `timeout_s` (name lookup included): else Spark would retry for a minute and fail with
    a Java stack trace. Other masters pass."""
    scheme, _, rest = master.partition("://")
    if scheme == "spark":
        targets = [_host_port(hp, None) for hp in rest.split(",")]
    elif scheme == "k8s":
        targets = [_host_port(re.sub(r"^https?://", "", rest).rstrip("/"), 443)]
    else:
        return
    reasons = [_connect_problem(host, port, timeout_s) for host, port in filter(None, targets)]
    if reasons and all(reasons):
        raise SparkMasterError(f"--master {shown_master(master)}: cannot reach it ({'; '.join(reasons)[:400]}): is the "
                               "master running, and this machine allowed to reach it? (a standalone cluster: "
                               "`bash scripts/spark_standalone.sh status`)")


def _connect_problem(host: str, port: int, timeout_s: float) -> str | None:
    """Why a TCP connection to host:port fails within `timeout_s`, or None. In a daemon thread: a
    name lookup has no timeout of its own, and a hung one must not keep the process alive."""
    import socket

    box: dict[str, str | None] = {}

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            box["reason"] = None
        except socket.gaierror as exc:
            box["reason"] = f"{host}: no such host ({exc.strerror})"
        except OSError as exc:
            box["reason"] = f"{host}:{port}: {(exc.strerror or str(exc) or 'failed').lower()}"

    worker = threading.Thread(target=connect, name="rmqsim-master-check", daemon=True)
    worker.start()
    worker.join(timeout_s + 1.0)
    return box["reason"] if "reason" in box else f"{host}:{port}: no answer within {timeout_s:g} s"


def shown_master(master: str) -> str:
    """A master URL as a message quotes it: as given, or repr'd (and cut) if it holds anything unprintable."""
    return master if master.isprintable() and len(master) <= 200 else repr(master[:200])


def _start_problem(master: str | None, exc: BaseException) -> str:
    """Why a SparkSession did not start, in one line: the Java gateway that exited (no Java, or Spark
    refused an option: its own message is printed above), or the first line of Spark's exception."""
    text = str(exc).strip()
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return ("the Java gateway exited before it started (no Java, a JAVA_HOME that is not one, or Spark "
                "refused the options: the lines above say which)")
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            text = str(java.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone as well
            pass
    line = (text.splitlines() or [type(exc).__name__])[0].strip()[:300]
    if master is not None and master.startswith("spark://"):
        return f"the master did not accept the application (Spark gave up registering with it: {line})"
    return line


def _collect(rdd: Any, box: dict) -> list[dict]:
    try:
        return rdd.collect()
    except Exception as exc:  # noqa: BLE001 - re-raised in the driver thread
        box["error"] = exc
        return []


class ProgressLine:
    """`runs 7/12 · 1 failed · 5.3 runs/min · ETA 0:45`, redrawn in place on a terminal."""

    def __init__(self, out: TextIO, total: int, skipped: int) -> None:
        self.out, self.total, self.skipped = out, total, skipped
        self.started = time.perf_counter()
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.last = ""
        self.last_print = 0.0

    def update(self, done: int, failed: int, final: bool = False) -> None:
        elapsed = time.perf_counter() - self.started
        rate = done / elapsed * 60 if elapsed > 0 else 0.0
        left = self.total - self.skipped - done
        eta = _clock(left / rate * 60) if rate > 0 else "?"
        text = (f"runs {self.skipped + done}/{self.total} · {failed} failed · {rate:.1f} runs/min · "
                f"ETA {eta if left else '0:00'}")
        if self.tty:
            self.out.write("\r" + text.ljust(len(self.last)) + ("\n" if final else ""))
        elif final or (text != self.last and elapsed - self.last_print >= 10):
            self.out.write(text + "\n")
            self.last_print = elapsed
        self.out.flush()
        self.last = text


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def _verify(sweep: Sweep, out_dir: Path, all_tasks: list[dict], k: int, outcome: SweepOutcome,
            log: TextIO) -> None:
    """Rerun K random complete runs here, in the driver, and compare with the executors' digests."""
    from analysis.sweeps.task import rerun_digest

    status = sweep_dir.completed(out_dir)
    ok = [t for t in all_tasks if status.get(t["run_id"]) == "ok"]
    chosen = random.Random(sweep.digest()).sample(ok, min(k, len(ok)))
    for task in chosen:
        path = out_dir / store.RUNS / f"{task['run_id']}.parquet"
        recorded = pq.read_table(path, columns=["trace_sha256"]).column(0)[0].as_py()
        again = rerun_digest(task)
        outcome.verified.append(task["run_id"])
        if again != recorded:
            outcome.mismatches.append(task["run_id"])
        print(f"determinism {task['run_id']}: executor {recorded[:16]} driver {again[:16]} "
              f"{'same' if again == recorded else 'DIFFERENT'}", file=log)


def _display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
