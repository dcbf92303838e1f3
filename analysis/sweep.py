"""The driver side of a sweep: Spark session, one task per run, progress, resume, determinism.

`run_sweep(sweep, out_dir, master=...)` expands nothing itself (see analysis/sweep_spec.py); it
prepares `out_dir` (analysis/sweep_dir.py: a new, empty or resumable directory of this sweep;
leftovers of an interrupted sweep removed, damaged run files redone), skips runs already
complete, sends one Spark task per remaining (point, seed) to `analysis.sweep_task.execute`,
prints a live progress line, and with `verify_determinism=K` reruns K runs chosen at random
(seeded by the sweep digest) in the driver process and compares their digests with the
executors'.

A lost Python worker is retried: local masters run as `local[N,F]` and clusters with
`spark.task.maxFailures` = F (sweep_dir.TASK_MAX_FAILURES), and a run whose worker keeps dying
becomes a failed run (sweep_task.py). A Spark job that fails anyway (its executors gone, the
output directory unwritable) raises `SweepAborted` with a one-line reason: the complete runs
stay, and rerunning the command resumes. A job that failed because the disk is full raises
`OutputError` ("could not write ...: no space left on device"; the CLI's exit 2) instead: every
run that failed to write removed its files (analysis/sweep_task.py), so the directory holds
only complete runs.

Executors get PYTHONHASHSEED=0 and, on a local master, the driver's Python and installed project.
On a cluster master (`spark://…`, `yarn`, `k8s://…`), they get a packed virtual environment of
the project, compiled, and its runtime dependencies through `spark.archives`
(analysis/executor_env.py): workers need only the same Python at the same path, and Spark.
Under spark-submit the submitter passes it (scripts/rmqsim_submit.py says how).
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

from analysis import executor_env, sweep_dir
from analysis import results_store as store
from analysis.sweep_spec import Sweep, run_id
from sim.kernel import compiled
from sim.kernel.files import OutputError
from sim.kernel.sources import sources_sha256

SIMULATOR_PACKAGES = ("sim", "models")  # what a run's results (and digest) depend on


class SweepAborted(Exception):
    """The Spark job failed as a whole (a one-line reason); complete runs are kept."""


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
    compiled_runs: int = 0  # runs whose executor ran the compiled per-message modules (sim/kernel/compiled.py)
    spark: Any = field(default=None, repr=False)  # the session the runs used (a report reuses it), if one started


def manifest(sweep: Sweep) -> dict[str, Any]:
    return {"tool": sweep_dir.TOOL, "name": sweep.name, "source": sweep.source, "digest": sweep.digest(),
            "simulator_sha256": simulator_sha256(),
            "base": str(sweep.base_path), "params": {n: p.key for n, p in sweep.params.items()},
            "param_types": sweep.param_types, "grid": list(sweep.spec.grid), "zip": list(sweep.spec.zip),
            "points": [{"point": p.index, "point_key": p.key, "params": p.params} for p in sweep.points],
            "seeds": sweep.seeds, "keep": list(sweep.spec.keep),
            "timeline_run": run_id(*sweep.timeline_run()), "runs": sweep.n_runs,
            "report": sweep.spec.report.model_dump()}


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
    if not pending and not verify_determinism:
        outcome.wall_s = time.perf_counter() - started
        return outcome
    spark = outcome.spark = spark_session(master, parallelism, app=f"rmqsim-sweep-{sweep.name}")
    if pending:
        try:
            results, outcome.spark_wall_s = _submit(spark, pending, log, outcome.total, outcome.skipped)
        finally:
            sweep_dir.clean_leftovers(out_dir)  # attempt markers, temporaries of killed workers
        outcome.failed = sorted(r["run_id"] for r in results if r["status"] != "ok")
        outcome.compiled_runs = sum(1 for r in results if r.get("compiled_modules"))
    if verify_determinism:
        _verify(sweep, out_dir, all_tasks, verify_determinism, outcome, log)
    outcome.wall_s = time.perf_counter() - started
    return outcome


# A report's own session reads one row per run: no UI, the client JIT compiler (C1) and the serial
# collector start the JVM and answer the first queries about twice as fast on two loaded cores.
REPORT_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(master: str | None, parallelism: int | None, app: str, purpose: str = "sweep",
                  keep_classes: bool = False) -> Any:
    """A SparkSession for sweeps: given master, or spark-submit's, or local[*]/local[N]. With
    `purpose="report"`, one for a report alone (REPORT_JAVA_OPTIONS, no web UI, Spark's classes
    mapped from a class archive if there is one — analysis/spark_classes.py; `keep_classes`: make
    one if not, the caller then ends the session with `spark_classes.finish` — and no Python
    packages for executors: a report runs no Python on them). A session already running in this
    process is reused (Spark allows one), whatever it was started for."""
    os.environ.setdefault("PYTHONHASHSEED", "0")  # local-mode Python workers inherit it
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: keep its master
    if master is None and not submitted:
        master = "local[*]"
    if master is not None and re.fullmatch(r"local(\[.*\])?", master):
        master = local_master(master, parallelism)
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):  # this interpreter, this installation
        if os.environ.get("PYSPARK_PYTHON", "").startswith(executor_env.PYTHON):
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
        from pyspark import SparkContext

        from analysis import spark_classes

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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def simulator_sha256() -> str:
    """Digest of the simulator's sources (sim/kernel/sources.py, read afresh): a sweep directory's runs
    must all come from one."""
    return sources_sha256(SIMULATOR_PACKAGES)


def _submit(spark: Any, pending: list[dict], log: TextIO, total: int, skipped: int) -> tuple[list[dict], float]:
    from analysis.sweep_task import NO_SPACE, execute

    sc = spark.sparkContext
    done, failed, full = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)

    def run(task: dict) -> dict:
        result = execute(task)
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
        if full.value and not cancelled:  # the disk is full: the other runs could not write either
            sc.cancelAllJobs()
            cancelled = True
    line.update(done.value, failed.value, final=True)
    text = str(box.get("error", ""))
    if full.value or any(r["status"] == NO_SPACE for r in box.get("results", [])) or \
            "No space left on device" in text or "errno 28" in text.lower():
        raise OutputError(f"could not write in {pending[0]['out_dir']}: no space left on device (the sweep "
                          "stopped); complete runs are kept: free space and rerun the same command to resume")
    if "error" in box:
        raise SweepAborted(_first_line(box["error"])) from None
    return box["results"], time.perf_counter() - started


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
    from analysis.sweep_task import rerun_digest

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
