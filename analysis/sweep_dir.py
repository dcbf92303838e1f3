"""A sweep's output directory: made, recognised, resumed, and replaced only when it is ours.

    DIR/sweep.json                   the manifest (tool, digest, simulator digest, points, seeds)
    DIR/runs/<run_id>.parquet        one row per run (analysis/results_store.py)
    DIR/deliveries/, DIR/latencies/  per-message tables, when kept
    DIR/report/                      `rmqsim report`
    DIR/<table>/.<file>.tmp-<pid>    a write in progress (sim/files.py), or its leftover
    DIR/runs/.<run_id>.attempt-<k>   run attempt markers (a Python worker that dies mid-run)

Rules, so that no user file is ever deleted or mixed into results:

- A new sweep starts only in a missing or empty directory.
- A directory is resumed only if its `sweep.json` is a manifest of this tool for the same
  sweep digest and simulator digest. Leftover temporary files and attempt markers are removed;
  a run file that cannot be read, or that belongs to another sweep, is removed so that the run
  is redone; a file in a table folder that is not a run of this sweep is refused.
- `--replace` deletes only a directory whose `sweep.json` this tool recognises *and* whose
  every entry is one this tool writes (the list above). Anything else is refused, with the
  reason, and left untouched. Symbolic links are removed, never followed.

Attempts: `begin_attempt` is called by an executor when it starts a run. It creates the next
marker exclusively, so the count survives the worker: after `RUN_ATTEMPTS` starts that never
finished (the worker was killed, or ran out of memory), the next attempt records a failed run
instead of trying again, and Spark's task retries (`TASK_MAX_FAILURES`) leave room for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, TextIO

import pyarrow.parquet as pq

from sim.files import atomic_write_text, is_temporary, writable_dir
from sim.inputs import InputProblem, read_text
from sim.limits import MAX_MANIFEST_BYTES

MANIFEST = "sweep.json"
TOOL = "rmqsim sweep"
TABLES = ("runs", "deliveries", "latencies")
OURS = {MANIFEST, *TABLES, "report"}
LEGACY_KEYS = {"name", "source", "digest", "base", "params", "points", "seeds", "runs"}  # manifests before `tool`
RUN_ATTEMPTS = 2  # starts of one run whose worker died, before it is recorded as failed
TASK_MAX_FAILURES = RUN_ATTEMPTS + 1  # Spark task attempts: the last one writes the failed row
_MARKER_RE = re.compile(r"\.(?P<run>[A-Za-z0-9_.-]+)\.attempt-(?P<k>[0-9]+)")


class ForeignDirectory(Exception):
    """The directory is not this sweep's, and will not be written to or deleted."""


def prepare(out_dir: Path, manifest: dict[str, Any], replace: bool = False) -> list[str]:
    """Make DIR ready for `manifest`'s sweep; returns notes on what was cleaned up."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ForeignDirectory(f"{out_dir} exists and is not a directory")
    if (out_dir / MANIFEST).exists() or (out_dir / MANIFEST).is_symlink():
        existing = read_manifest(out_dir)
        problem = _foreign(out_dir, existing, manifest)
        if problem is None:
            return clean_leftovers(out_dir)
        if not replace:
            raise ForeignDirectory(f"{problem}; use another --out, remove it, or pass --replace")
        _clear(out_dir)
    elif out_dir.is_dir() and any(out_dir.iterdir()):
        raise ForeignDirectory(f"{out_dir} is not empty and holds no sweep (no {MANIFEST}); "
                               "choose a new or empty directory")
    writable_dir(out_dir)
    atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=1))
    return []


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """DIR's manifest; ForeignDirectory if it is unreadable or not one of this tool's."""
    path = out_dir / MANIFEST
    if path.is_symlink():
        raise ForeignDirectory(f"{path} is a symbolic link, not a sweep manifest; not touching {out_dir}")
    try:
        data = json.loads(read_text(path, MAX_MANIFEST_BYTES))
    except InputProblem as exc:
        raise ForeignDirectory(f"{path}: {exc.reason}; not touching {out_dir}") from None
    except ValueError:  # JSONDecodeError
        raise ForeignDirectory(f"{path} is not a readable sweep manifest (damaged JSON); not touching "
                               f"{out_dir}: remove it yourself if it is yours") from None
    if not isinstance(data, dict) or not (data.get("tool") == TOOL or LEGACY_KEYS <= data.keys()):
        raise ForeignDirectory(f"{path} is not a sweep manifest of rmqsim; not touching {out_dir}")
    return data


_SHAPE = {"name": str, "digest": str, "source": str, "base": str, "params": dict, "grid": list, "zip": list,
          "points": list, "seeds": list, "timeline_run": str}
_PARAM_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")  # as analysis/sweep_checks.py: SQL column names


def check_shape(out_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` if it has every field a report reads, with the right types; else ForeignDirectory.
    Parameter names become SQL column names in the report, so they must be plain names."""
    wrong = [key for key, kind in _SHAPE.items() if not isinstance(data.get(key), kind)]
    names = [*data.get("grid", []), *data.get("zip", [])] if not wrong else []
    if wrong or not all(isinstance(n, str) and _PARAM_NAME_RE.fullmatch(n) for n in names):
        raise ForeignDirectory(f"{out_dir / MANIFEST} lacks or garbles what a report needs "
                               f"({', '.join(wrong) or 'parameter names'}); rerun the sweep with --replace")
    return data


def _foreign(out_dir: Path, existing: dict[str, Any], manifest: dict[str, Any]) -> str | None:
    if existing.get("digest") != manifest["digest"]:
        return (f"{out_dir} holds results of another sweep ({str(existing.get('name'))[:64]!r}, digest "
                f"{str(existing.get('digest'))[:12]})")
    if existing.get("simulator_sha256") != manifest.get("simulator_sha256"):
        return (f"{out_dir} holds runs made by another version of the simulator (sim/, models/: "
                f"{str(existing.get('simulator_sha256'))[:12]}, now {str(manifest.get('simulator_sha256'))[:12]}), "
                "whose results would not mix with new runs")
    return None


def _clear(out_dir: Path) -> None:
    """Delete a recognised sweep directory's own entries, after checking there is nothing else."""
    entries = sorted(out_dir.iterdir())
    others = [e.name for e in entries if e.name not in OURS and not _is_leftover(e.name)]
    if others:
        listed = ", ".join(repr(n) for n in others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ForeignDirectory(f"{out_dir} also holds {listed}, which rmqsim did not write; not deleting it")
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _is_leftover(name: str) -> bool:
    return is_temporary(name) or _MARKER_RE.fullmatch(name) is not None or name.startswith(".rmqsim-probe-")


def clean_leftovers(out_dir: Path) -> list[str]:
    """Remove temporary files and attempt markers left by interrupted work (resume)."""
    removed = 0
    for folder in (out_dir, *(out_dir / t for t in TABLES)):
        if not folder.is_dir() or folder.is_symlink():
            continue
        for entry in folder.iterdir():
            if _is_leftover(entry.name) and (entry.is_file() or entry.is_symlink()):
                entry.unlink(missing_ok=True)
                removed += 1
    return [f"removed {removed} leftover temporary file(s) of an interrupted sweep"] if removed else []


def completed(out_dir: Path, digest: str | None = None, expected: set[str] | None = None,
              log: TextIO | None = None) -> dict[str, str]:
    """run_id → status of every run with a readable `runs` row (of sweep `digest`, if given).

    A run file that cannot be read, or whose row belongs to another sweep, is removed (with its
    per-message files) so that the run is redone, and said so on `log`. With `expected` run
    ids, a file that is no run of this sweep is refused (ForeignDirectory)."""
    folder = out_dir / "runs"
    if not folder.is_dir():
        return {}
    status, unknown = {}, []
    for path in sorted(folder.iterdir()):
        if path.name.startswith((".", "_")):
            continue
        if path.suffix != ".parquet" or (expected is not None and path.stem not in expected):
            unknown.append(path.name)
            continue
        state = _run_status(path, digest)
        if state is None:
            _forget(out_dir, path.stem)
            if log is not None:
                print(f"{path}: unreadable or not a run of this sweep (interrupted, or copied in?); "
                      "removed, the run will be redone", file=log)
            continue
        status[path.stem] = state
    if unknown:
        raise ForeignDirectory(f"{folder} holds files that are no runs of this sweep ("
                               f"{', '.join(repr(n) for n in unknown[:5])}); remove them, or pass --replace")
    return status


def _run_status(path: Path, digest: str | None) -> str | None:
    """The row's status, or None if the file is damaged, foreign or of another sweep."""
    try:
        row = pq.read_table(path, columns=["run_id", "status", "sweep_digest"]).to_pylist()
    except Exception:  # noqa: BLE001 - pyarrow raises several types for damaged or foreign files
        return None
    if len(row) != 1 or row[0]["run_id"] != path.stem or not isinstance(row[0]["status"], str):
        return None
    if digest is not None and row[0]["sweep_digest"] != digest:
        return None
    return row[0]["status"]


def _forget(out_dir: Path, run_id: str) -> None:
    for table in TABLES:
        (out_dir / table / f"{run_id}.parquet").unlink(missing_ok=True)


def begin_attempt(out_dir: Path, run_id: str) -> int:
    """Record that a run starts (an exclusive marker file); returns its attempt number, 1-based."""
    folder = out_dir / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    k = 1
    while True:
        try:
            fd = os.open(folder / f".{run_id}.attempt-{k}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            k += 1
            continue
        with os.fdopen(fd, "w") as marker:
            marker.write(str(os.getpid()))  # the worker: what an operator (or a test) would kill
        return k
