"""The executor side of a sweep: one Spark task runs one (point, seed), checks it, writes rows.

`execute(task)` takes a plain dict (picklable, built by the driver in analysis/sweep.py) and
returns a small dict; per-message data never travels back to the driver. An exception inside
the simulator or the checkers becomes a `runs` row with status "failed", the error and a
one-line reproduction command, so no run is silently dropped. So does a run stopped at a bound
(`run_timeout_s`, `run_max_events`: `stopped_by` says which; its partial counts are not kept),
and a run whose Python worker died `RUN_ATTEMPTS` times (analysis/sweep_dir.py: each start is
recorded first, so the count survives the worker).

A task carries the base scenario's JSON (one string shared by every task of the driver) and
the point's overrides, not a scenario per run, so the driver's memory grows with the number
of runs only by a few hundred bytes each.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

from analysis import results_store as store
from analysis import sweep_dir
from analysis.run_rows import runs_row
from models.records import CONSUMER_CONSUMED
from sim.trace import field_index


def execute(task: dict[str, Any]) -> dict[str, Any]:
    out_dir = Path(task["out_dir"])
    schema = store.runs_schema(task["param_types"])
    row = _identity(task)
    attempt = sweep_dir.begin_attempt(out_dir, task["run_id"])
    if attempt > sweep_dir.RUN_ATTEMPTS:
        row["status"] = "failed"
        row["error"] = (f"WorkerLost: the Python worker running this run died {attempt - 1} times (killed, or "
                        "out of memory?); run it alone with the reproduction command to see why")
    else:
        _run(task, row, out_dir)
    store.write_run_row(out_dir, row, schema)
    return {"run_id": row["run_id"], "status": row["status"], "trace_sha256": row.get("trace_sha256"),
            "wall_s": row.get("wall_s"), "pid": os.getpid(),
            "pythonhashseed": os.environ.get("PYTHONHASHSEED")}


def _run(task: dict[str, Any], row: dict[str, Any], out_dir: Path) -> None:
    try:
        result = _simulate(task)
        stopped_by = result.summary.get("stopped_by")
        if stopped_by:
            row.update(status="failed", stopped_by=stopped_by, error=_stopped(task, result.summary))
            return
        row.update(runs_row(result.summary, result.details, result.records, result.meta))
        row["status"] = "ok"
        _write_tables(out_dir, task, result)
    except Exception as exc:  # noqa: BLE001 - a run's failure is data, reported in its row
        row["status"] = "failed"
        row["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"


def _stopped(task: dict[str, Any], summary: dict[str, Any]) -> str:
    bound = (f"run_timeout_s = {task['run_timeout_s']} s of wall time" if summary["stopped_by"] == "max_wall_s"
             else f"run_max_events = {task['max_events']:,} events")
    return (f"StoppedAtBound: the run reached {bound} at simulated {summary['stopped_at_ms'] / 1000:g} s "
            f"(verdict unknown); raise the bound in the sweep file to run it whole")


def rerun_digest(task: dict[str, Any]) -> str:
    """Only the trace digest of a run (determinism checks)."""
    return _simulate(task).summary["trace_sha256"]


def _simulate(task: dict[str, Any]) -> Any:
    from sim import scenario as scenario_mod
    from sim.runner import run_scenario

    sc = scenario_mod.from_data(json.loads(task["base_json"]), task["repro"], list(task["overrides"]))
    return run_scenario(sc, seed=task["seed"], details=True, max_wall_s=task["run_timeout_s"],
                        max_events=task["max_events"])


def _identity(task: dict[str, Any]) -> dict[str, Any]:
    row = {"run_id": task["run_id"], "sweep": task["sweep"], "sweep_digest": task["sweep_digest"],
           "point": task["point"],
           "point_key": task["point_key"], "seed": task["seed"], "repro": task["repro"],
           "params_json": json.dumps(task["params"], sort_keys=True)}
    row.update(task["params"])
    return row


def _write_tables(out_dir: Path, task: dict[str, Any], result: Any) -> None:
    ident = {"run_id": task["run_id"], "point": task["point"], "seed": task["seed"]}
    if "deliveries" in task["keep"]:
        store.write_table(out_dir, store.DELIVERIES, task["run_id"],
                          _deliveries(result.records, ident), store.DELIVERIES_SCHEMA)
    if "latencies" in task["keep"]:
        samples = result.details.get("latency_samples", [])
        columns = _constant_columns(ident, len(samples))
        columns["unit"] = [s[0] for s in samples]
        columns["key"] = [s[1] for s in samples]
        columns["sent_ms"] = [s[2] / 1000 for s in samples]
        columns["latency_ms"] = [s[3] / 1000 for s in samples]
        store.write_table(out_dir, store.LATENCIES, task["run_id"], columns, store.LATENCIES_SCHEMA)


def _deliveries(records: list[tuple], ident: dict[str, Any]) -> dict[str, list]:
    names = ("group", "key", "ok", "reconsume_times", "broker", "queue_id", "queue_offset")
    index = {n: field_index(CONSUMER_CONSUMED, n) for n in names}
    rows = [r for r in records if r[2] == CONSUMER_CONSUMED]
    columns = _constant_columns(ident, len(rows))
    columns["unit"] = [r[index["group"]] for r in rows]
    columns["t_ms"] = [r[0] / 1000 for r in rows]
    columns["consumer"] = [r[1] for r in rows]
    for name in names[1:]:
        columns[name] = [r[index[name]] for r in rows]
    return columns


def _constant_columns(ident: dict[str, Any], n: int) -> dict[str, list]:
    return {name: [value] * n for name, value in ident.items()}
