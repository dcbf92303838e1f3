"""The executor side of a sweep: one Spark task runs one (point, seed), checks it, writes rows.

`execute(task)` takes a plain dict (picklable, built by the driver in analysis/sweeps/sweep.py) and
returns a small dict; per-message data never travels back to the driver. An exception inside
the simulator or the checkers becomes a `runs` row with status "failed", the error and a
one-line reproduction command, so no run is silently dropped. So does a run stopped at a bound
(`run_timeout_s`, `run_max_events`: `stopped_by` says which; its partial counts are not kept),
and a run whose Python worker died `RUN_ATTEMPTS` times (analysis/sweeps/directory.py: each start is
recorded first, so the count survives the worker).

A task carries the base scenario's JSON (one string shared by every task of the driver) and
the point's overrides, not a scenario per run, so the driver's memory grows with the number
of runs only by a few hundred bytes each. The per-message tables a sweep keeps stream out as the
run goes: `deliveries` from the trace (a Tracer chunk observer, one row group per chunk),
`latencies` from the checkers' ledger at the end. The `runs` row, written last, lists them
(`output_files`, with size and SHA-256: analysis/sweeps/results_store.py). A run that fails, or whose
row cannot be written (a full disk), removes the per-message files it wrote, so no file is left
that no row lists. A run that hits a full disk (ENOSPC, EDQUOT) is no failed run — its own
fault is none — and raises nothing (Spark would log a traceback per attempt): it removes what it
wrote, writes no row and returns status "no_space", on which the driver stops the sweep
(analysis/sweeps/sweep.py); the rerun redoes it. A failing run (verdict invalid or unknown, stopped at a
bound, failed to run) also gets its repro card, `repro/<run_id>.md` (analysis/sweeps/repro_card.py),
listed in `output_files` like its tables. The row's `compiled` column says whether the run ran on
the compiled per-message modules (`ran_compiled`).
"""

from __future__ import annotations

import errno
import json
import os
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.checkers.ledger_codes import display_key
from analysis.checkers.metrics import latency_samples
from analysis.checkers.run_rows import runs_row
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.repro_card import sweep_card
from models.records import CONSUMER_CONSUMED
from sim import compiled
from sim.trace import field_index


def execute(task: dict[str, Any], attempt: int = 0) -> dict[str, Any]:
    """Run one task; `attempt`: Spark's task attempt number (TaskContext.attemptNumber(), 0 for the
    first try), recorded in the row's `attempt` column and returned, so a run Spark retried after
    losing an executor or Python worker is named (analysis/sweeps/sweep.py); no digest depends on it."""
    out_dir = Path(task["out_dir"])
    schema = store.runs_schema(task["param_types"])
    row = _identity(task)
    row["attempt"] = attempt
    written: list[Path] = []
    try:
        starts = sweep_dir.begin_attempt(out_dir, task["run_id"])  # this one included, however Spark counts
        if starts > sweep_dir.RUN_ATTEMPTS:
            row["status"] = "failed"
            row["error"] = (f"WorkerLost: the Python worker running this run died {starts - 1} times (killed, or "
                            "out of memory?); run it alone with the reproduction command to see why")
        else:
            written = _run(task, row, out_dir)
        written += sweep_card(out_dir, task, row, row.pop("_summary", None))  # a failing run's repro/<run_id>.md
        row["output_files"] = [store.output_entry(out_dir, path) for path in written]
        store.write_run_row(out_dir, row, schema)
    except BaseException as exc:
        _remove(written)  # no per-message file without the row that lists it
        if not no_space(exc):
            raise
        return {"run_id": row["run_id"], "status": NO_SPACE, "error": f"{type(exc).__name__}: {exc}"[:400],
                "pid": os.getpid(), "attempt": attempt}
    return {"run_id": row["run_id"], "status": row["status"], "trace_sha256": row.get("trace_sha256"),
            "wall_s": row.get("wall_s"), "pid": os.getpid(), "attempt": attempt,
            "pythonhashseed": os.environ.get("PYTHONHASHSEED"), "compiled_modules": len(compiled.status()["compiled"])}


def _run(task: dict[str, Any], row: dict[str, Any], out_dir: Path) -> list[Path]:
    """Simulate and check; fills `row`; returns the per-message files written (none if it failed)."""
    deliveries = None
    written: list[Path] = []
    try:
        sc = _scenario(task)
        if "deliveries" in task["keep"]:
            deliveries = DeliveriesWriter(out_dir, task, _producer_names(sc))
        result = _simulate(task, (deliveries,) if deliveries is not None else (), sc)
        row["_summary"] = result.summary  # for the repro card (execute pops it; no column)
        stopped_by = result.summary.get("stopped_by")
        if stopped_by:
            row.update(status="failed", stopped_by=stopped_by, error=_stopped(task, result.summary))
            if deliveries is not None:
                deliveries.discard()
            return []
        row.update(runs_row(result.summary, result.details, result.fault_records, result.meta))
        row["compiled"] = ran_compiled()
        row["status"] = "ok"
        if deliveries is not None:
            written.append(deliveries.close())
        if "latencies" in task["keep"]:
            written.append(_write_latencies(out_dir, task, result))
        return written
    except Exception as exc:  # noqa: BLE001 - a run's failure is data, reported in its row
        if deliveries is not None:
            deliveries.discard()
        _remove(written)
        if no_space(exc):
            raise  # not the run's failure: execute() reports it, the sweep stops
        row["status"] = "failed"
        row["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
        return []


def ran_compiled() -> bool:
    """Whether this process ran the run on the compiled per-message modules: it imported some
    compiled and none pure (sim/compiled.py `status`; a stale build that could not be rebuilt, or
    RMQSIM_PURE=1, runs every one pure). The runs table's `compiled` column."""
    status = compiled.status()
    return bool(status["compiled"]) and not status["pure"]


NO_SPACE = "no_space"  # a task's status when the disk (or quota) was full: no row written


def no_space(exc: BaseException) -> bool:
    """A write failed for want of space: ENOSPC or EDQUOT (pyarrow's OSError says so in its text)."""
    if not isinstance(exc, OSError):
        return False
    text = str(exc)
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in text or "errno 28" in text


def _remove(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _stopped(task: dict[str, Any], summary: dict[str, Any]) -> str:
    stopped_by = summary["stopped_by"]
    if stopped_by not in ("max_wall_s", "max_events"):  # livelock, max_rss_mb: the watchdog says why
        return (f"StoppedAtBound: {stopped_by} at simulated {summary['stopped_at_ms'] / 1000:g} s: "
                f"{summary.get('stopped_detail') or 'see the run'} (verdict unknown)")
    bound = (f"run_timeout_s = {task['run_timeout_s']} s of wall time" if stopped_by == "max_wall_s"
             else f"run_max_events = {task['max_events']:,} events")
    return (f"StoppedAtBound: the run reached {bound} at simulated {summary['stopped_at_ms'] / 1000:g} s "
            f"(verdict unknown); raise the bound in the sweep file to run it whole")


def rerun_digest(task: dict[str, Any]) -> str:
    """Only the trace digest of a run (determinism checks)."""
    return _simulate(task).summary["trace_sha256"]


def _scenario(task: dict[str, Any]) -> Any:
    from rmqsim.scenario import spec as scenario_mod

    return scenario_mod.from_data(json.loads(task["base_json"]), task["repro"], list(task["overrides"]))


def _producer_names(sc: Any) -> list[str]:
    """Producer node names by producer index (the order rmqsim/runner.py gives message ids)."""
    from rmqsim.scenario.validate import instance_names

    return [name for p in sc.producers for name in instance_names(p.name, p.count)]


def _simulate(task: dict[str, Any], observers: tuple = (), sc: Any = None) -> Any:
    from rmqsim.runner import run_scenario

    return run_scenario(sc if sc is not None else _scenario(task), seed=task["seed"], details=True,
                        observers=observers, max_wall_s=task["run_timeout_s"], max_events=task["max_events"])


def _identity(task: dict[str, Any]) -> dict[str, Any]:
    row = {"run_id": task["run_id"], "sweep": task["sweep"], "sweep_digest": task["sweep_digest"],
           "point": task["point"],
           "point_key": task["point_key"], "seed": task["seed"], "repro": task["repro"],
           "params_json": json.dumps(task["params"], sort_keys=True)}
    row.update(task["params"])
    return row


def _write_latencies(out_dir: Path, task: dict[str, Any], result: Any) -> Path:
    samples = latency_samples(result.details)
    names = [p.name for p in result.world.producers]
    n = len(samples["msg_id"])
    columns = {"run_id": [task["run_id"]] * n, "point": [task["point"]] * n, "seed": [task["seed"]] * n,
               "unit": samples["unit"].tolist(),
               "key": [display_key(int(m), names) for m in samples["msg_id"]],
               "sent_ms": (samples["born_us"] / 1000).tolist(), "latency_ms": (samples["latency_us"] / 1000).tolist()}
    return store.write_table(out_dir, store.LATENCIES, task["run_id"], columns, store.LATENCIES_SCHEMA)


class DeliveriesWriter:
    """A Tracer chunk observer streaming `consumer.consumed` records into the run's deliveries
    table (one row group per chunk; the file is renamed into place by `close`)."""

    def __init__(self, out_dir: Path, task: dict[str, Any], producer_names: list[str]) -> None:
        folder = out_dir / store.DELIVERIES
        folder.mkdir(parents=True, exist_ok=True)
        self.final = folder / f"{task['run_id']}.parquet"
        self.tmp = folder / f".{task['run_id']}.parquet.tmp-{os.getpid()}"
        self.ident = {"run_id": task["run_id"], "point": task["point"], "seed": task["seed"]}
        self.writer = pq.ParquetWriter(self.tmp, store.DELIVERIES_SCHEMA)
        self.names = producer_names  # by producer index, for display keys
        self.index = {n: field_index(CONSUMER_CONSUMED, n) for n in
                      ("group", "msg_id", "ok", "reconsume_times", "broker", "queue_id", "queue_offset")}

    def __call__(self, chunk: list[tuple]) -> None:
        rows = [r for r in chunk if r[2] == CONSUMER_CONSUMED]
        if not rows:
            return
        ix = self.index
        columns = {name: [value] * len(rows) for name, value in self.ident.items()}
        columns["unit"] = [r[ix["group"]] for r in rows]
        columns["key"] = [display_key(r[ix["msg_id"]], self.names) for r in rows]
        columns["t_ms"] = [r[0] / 1000 for r in rows]
        columns["consumer"] = [r[1] for r in rows]
        for name in ("ok", "reconsume_times", "broker", "queue_id", "queue_offset"):
            columns[name] = [r[ix[name]] for r in rows]
        self.writer.write_table(pa.Table.from_pydict(columns, schema=store.DELIVERIES_SCHEMA))

    def close(self) -> Path:
        self.writer.close()
        os.replace(self.tmp, self.final)
        return self.final

    def discard(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing after a failed write (a full disk) may fail again
            pass
        self.tmp.unlink(missing_ok=True)
