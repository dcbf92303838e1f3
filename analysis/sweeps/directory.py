"""A sweep's output directory: made, recognised, resumed, and replaced only when it is ours.

    DIR/sweep.json                   the manifest (tool, digest, simulator digest, points, seeds, the
                                     base scenario's tree `base_scenario`; `base` is its path, shown,
                                     never opened again: it may name any file by now; the report's
                                     question `report` and the lint's warnings `lint`, both updated
                                     on resume)
    DIR/runs/<run_id>.parquet        one row per run (analysis/sweeps/results_store.py)
    DIR/deliveries/, DIR/latencies/  per-message tables, when kept
    DIR/report/                      `rmqsim report`, with its own manifest (sim/files.py)
    DIR/repro/<run_id>.md            a failing run's repro card (analysis/sweeps/repro_card.py), listed by its row
    DIR/<table>/.<file>.tmp-<pid>    a write in progress (sim/files.py), or its leftover
    DIR/runs/.<run_id>.attempt-<k>   run attempt markers (a Python worker that dies mid-run)

Each `runs` row lists the run's per-message files with size and SHA-256 (`output_files`,
analysis/sweeps/results_store.py): that listing, written atomically with the row, is the sweep's
record of what it wrote, one run at a time (no directory-wide manifest to rewrite).

Rules, so that no user file is ever deleted, read as a result, or mixed into results:

- `sweep.json` and each `runs` row are read as hostile input (sim/readback.py): the
  manifest bounded in size and depth, every field of its declared type (`SWEEP_MANIFEST`), or
  the directory is refused with the key named; a row of another shape (`RUN_ROW`) is damaged.

- A new sweep starts only in a missing or empty directory, never a system directory.
- A directory is resumed only if its `sweep.json` is a manifest of this tool for the same
  sweep digest and simulator digest, and its table folders are folders (not symbolic links).
  Leftover temporary files and attempt markers are removed; a run whose `runs` file cannot be
  read or belongs to another sweep, or one of whose listed files is missing or has another size
  (truncated by a crash or a full disk), has its files removed so that it is redone. A file in
  a table folder that is no run of this sweep, or that is not a regular file (a FIFO, device,
  symbolic link, folder), is refused and never opened.
- `--replace` deletes only what it can prove rmqsim wrote: `sweep.json` (recognised), each
  `runs` file that reads as a row of that sweep (its `run_id` its name, its `sweep_digest`
  the manifest's), each per-message file listed by such a row with its size (or, left by an
  interrupted run, one whose Parquet schema is exactly that table's), leftover temporary
  files and markers, `report/` as its own manifest proves, then the folders. If anything else
  is there — a user's `report/my_notes.md`, `deliveries/my_query.sql`, a symbolic link, a
  damaged file — nothing is deleted and the refusal names it.

Attempts: `begin_attempt` is called by an executor when it starts a run. It creates the next
marker exclusively, so the count survives the worker: after `RUN_ATTEMPTS` starts that never
finished (the worker was killed, or ran out of memory), the next attempt records a failed run
instead of trying again, and Spark's task retries (`TASK_MAX_FAILURES`) leave room for it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.sweeps.results_store import DELIVERIES_SCHEMA, LATENCIES_SCHEMA, TABLES
from sim.files import (
    UnsafeFile,
    atomic_write_text,
    is_temporary,
    lstat_kind,
    read_json,
    regular_file,
    removal_plan,
    some,
    system_dir,
    writable_dir,
    write_error,
)
from sim.limits import MAX_MANIFEST_BYTES
from sim.readback import RUN_ROW, SWEEP_MANIFEST, missing, shape_problem

MANIFEST = "sweep.json"
TOOL = "rmqsim sweep"
REPRO = "repro"  # failing runs' repro cards, <run_id>.md, each listed in its row's `output_files`
CARD_HEADING = b"# Repro card: "  # how analysis/sweeps/repro_card.py begins a card
LEGACY_KEYS = {"name", "source", "digest", "base", "params", "points", "seeds", "runs"}  # manifests before `tool`
RUN_ATTEMPTS = 2  # starts of one run whose worker died, before it is recorded as failed
TASK_MAX_FAILURES = RUN_ATTEMPTS + 1  # Spark task attempts: the last one writes the failed row
_MARKER_RE = re.compile(r"\.(?P<run>[A-Za-z0-9_.-]+)\.attempt-(?P<k>[0-9]+)")
MAX_ROW_BYTES = 64 << 20  # one `runs` file (tens of KiB: one row)
ROW_COLUMNS = ["run_id", "status", "sweep_digest", "output_files"]


class ForeignDirectory(Exception):
    """The directory is not this sweep's, and will not be written to or deleted."""


def prepare(out_dir: Path, manifest: dict[str, Any], replace: bool = False) -> list[str]:
    """Make DIR ready for `manifest`'s sweep; returns notes on what was cleaned up."""
    why = system_dir(out_dir)
    if why is not None:
        raise ForeignDirectory(f"{why}; a sweep is written only into a directory of its own: choose another --out")
    if out_dir.exists() and not out_dir.is_dir():
        raise ForeignDirectory(f"{out_dir} exists and is not a directory")
    if (out_dir / MANIFEST).exists() or (out_dir / MANIFEST).is_symlink():
        existing = read_manifest(out_dir)
        problem = _foreign(out_dir, existing, manifest)
        if problem is None:
            check_folders(out_dir)
            _update_report_section(out_dir, existing, manifest)
            return clean_leftovers(out_dir)
        if not replace:
            raise ForeignDirectory(f"{problem}; use another --out, remove it, or pass --replace")
        _clear(out_dir, existing)
    elif out_dir.is_dir() and any(out_dir.iterdir()):
        raise ForeignDirectory(f"{out_dir} is not empty and holds no sweep (no {MANIFEST}); "
                               "choose a new or empty directory")
    writable_dir(out_dir)  # OutputError: the CLI's exit 2
    try:
        atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=1))
    except OSError as exc:
        raise write_error(out_dir / MANIFEST, exc) from None
    return []


UPDATED_KEYS = ("report", "lint")  # manifest keys a resume takes from the sweep file as it is now


def _update_report_section(out_dir: Path, existing: dict[str, Any], manifest: dict[str, Any]) -> None:
    """The sweep file's `report:` section changes no result (it is not in the digest), nor does the
    lint's reading of the points (`lint`, which a newer lint may read differently), so a resumed
    sweep takes the current ones: the next report asks the question the file now names."""
    changed = {k: manifest[k] for k in UPDATED_KEYS if k in manifest and existing.get(k) != manifest[k]}
    if changed:
        try:
            atomic_write_text(out_dir / MANIFEST, json.dumps({**existing, **changed}, indent=1))
        except OSError as exc:
            raise write_error(out_dir / MANIFEST, exc) from None


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """DIR's manifest; ForeignDirectory if it is unreadable (a link, too large, not JSON, nested
    too deep), not one of this tool's, or of another shape than rmqsim writes (the key named:
    sim/readback.py `SWEEP_MANIFEST`)."""
    path = out_dir / MANIFEST
    if path.is_symlink():
        raise ForeignDirectory(f"{path} is a symbolic link, not a sweep manifest; not touching {out_dir}")
    data = read_json(path, MAX_MANIFEST_BYTES, lambda text: ForeignDirectory(f"{text}; not touching {out_dir}"),
                     "is not a readable sweep manifest (damaged JSON)")
    if not isinstance(data, dict) or not (data.get("tool") == TOOL or LEGACY_KEYS <= data.keys()):
        raise ForeignDirectory(f"{path} is not a sweep manifest of rmqsim; not touching {out_dir}")
    problem = shape_problem(data, SWEEP_MANIFEST)
    if problem is not None:
        raise ForeignDirectory(f"{path}: {problem}: not the sweep manifest rmqsim writes; not touching {out_dir}: "
                               "remove it yourself if it is yours")
    return data


_REPORT_NEEDS = ("name", "digest", "source", "base", "params", "grid", "zip", "points", "seeds", "timeline_run")
_PARAM_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")  # as analysis/sweeps/checks.py: SQL column names


def check_shape(out_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a manifest `read_manifest` read, its fields of their declared types) if it has
    every field a report reads; else ForeignDirectory. Parameter names become SQL column names
    in the report, so they must be plain names."""
    wrong = missing(data, _REPORT_NEEDS)
    names = [*data.get("grid", []), *data.get("zip", [])] if not wrong else []
    if wrong or not all(_PARAM_NAME_RE.fullmatch(n) for n in names):
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


def _clear(out_dir: Path, existing: dict[str, Any]) -> None:
    """Delete a recognised sweep directory's entries, after proving every one of them rmqsim's
    (module docstring); otherwise ForeignDirectory naming the others, and nothing is deleted."""
    files: list[Path] = []
    folders: list[Path] = []
    foreign: list[str] = []
    digest = existing.get("digest") if existing.get("tool") == TOOL else None  # legacy rows carry none
    listed: dict[str, int] = {}
    names = sorted(os.listdir(out_dir))
    for table in TABLES:  # `runs` first: its rows list the per-message files
        if table not in names:
            continue
        folder = out_dir / table
        kind = lstat_kind(folder)
        if kind != "dir":
            foreign.append(f"{table} ({'a symbolic link' if kind == 'link' else 'not a folder'})")
            continue
        folders.append(folder)
        for name in sorted(os.listdir(folder)):
            path, rel = folder / name, f"{table}/{name}"
            kind = lstat_kind(path)
            if kind == "file" and _is_leftover(name):
                files.append(path)
            elif kind != "file":
                foreign.append(f"{rel} ({'a symbolic link' if kind == 'link' else 'not a regular file'})")
            elif table == TABLES[0] and (row := _own_row(path, digest)) is not None:
                files.append(path)
                listed.update({f["path"]: f["bytes"] for f in row.get("output_files") or []})
            elif table != TABLES[0] and _own_table_file(path, rel, table, listed):
                files.append(path)
            else:
                foreign.append(rel)
    for name in names:
        path = out_dir / name
        if name in (MANIFEST, *TABLES):
            continue
        kind = lstat_kind(path)
        if kind == "file" and _is_leftover(name):
            files.append(path)
        elif name == REPRO and kind == "dir":
            folders.append(path)
            for card in sorted(os.listdir(path)):
                rel, entry = f"{REPRO}/{card}", path / card
                if lstat_kind(entry) == "file" and (_is_leftover(card) or listed.get(rel) == entry.lstat().st_size
                                                    or _orphan_card(entry)):
                    files.append(entry)
                else:
                    foreign.append(rel)
        elif name == "report":
            plan = removal_plan(out_dir, ["report"], None)
            files += plan.files
            folders += plan.dirs
            foreign += plan.foreign
        else:
            foreign.append(name + ("/" if kind == "dir" else " (a symbolic link)" if kind == "link" else ""))
    if foreign:
        raise ForeignDirectory(f"--replace: {out_dir} holds {some([repr(n) for n in foreign])}, which rmqsim did not "
                               "write (or which changed since); nothing was deleted: move them away, or choose "
                               "another --out")
    try:
        for path in files:
            path.unlink(missing_ok=True)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            folder.rmdir()
        (out_dir / MANIFEST).unlink()  # last: until then the directory is still recognisably a sweep
    except OSError as exc:  # a file appeared meanwhile, or no permission: stop, and say where
        raise ForeignDirectory(f"--replace: could not delete {exc.filename}: {exc.strerror or exc}; {out_dir} "
                               "still holds the rest of the old sweep") from None


def _orphan_card(path: Path) -> bool:
    """A repro card an interrupted run wrote before its row (a run id's name, rmqsim's heading)."""
    try:
        with regular_file(path) as handle:
            head = handle.read(len(CARD_HEADING))
    except (OSError, UnsafeFile):
        return False
    return re.fullmatch(r"p[0-9]+-s[0-9]+\.md", path.name) is not None and head == CARD_HEADING


def _own_row(path: Path, digest: str | None) -> dict[str, Any] | None:
    """The row of a `runs` file rmqsim wrote for the sweep `digest` (any, for a legacy manifest), else None."""
    row = read_row(path, ["run_id", "sweep_digest", "output_files"] if digest else ["run_id"])
    if row is None or row["run_id"] != path.stem or (digest is not None and row["sweep_digest"] != digest):
        return None
    return row


def _own_table_file(path: Path, rel: str, table: str, listed: dict[str, int]) -> bool:
    """A per-message file a row lists with this size, or (an interrupted run's, no row yet) one
    whose schema is exactly the table's as rmqsim writes it."""
    if rel in listed:
        return path.lstat().st_size == listed[rel]
    try:
        with regular_file(path) as handle:
            schema = pq.read_schema(handle)
    except Exception:  # noqa: BLE001 - damaged or foreign: not provably ours
        return False
    return schema.equals({"deliveries": DELIVERIES_SCHEMA, "latencies": LATENCIES_SCHEMA}[table])


def arrow_copy(handle: Any, limit_bytes: int) -> Any:
    """The whole of an open regular file in a buffer of Arrow's own memory, or None if it holds more
    than `limit_bytes`. Arrow reads a Python file object on worker threads that keep Python-owned
    memory until they free their readers; one still doing so when the interpreter finalizes (a
    command that ends with an error just after the read) is ended by pthread_exit inside a C++
    destructor, and the process aborts (SIGABRT, "terminate called without an active exception").
    No Arrow thread holds Python memory when Arrow reads its own buffer."""
    size = os.fstat(handle.fileno()).st_size
    if size > limit_bytes:
        return None
    data = pa.allocate_buffer(size)
    if handle.readinto(memoryview(data)) != size:
        return None
    return data


def read_row(path: Path, columns: list[str], schemas: list[Any] | None = None) -> dict[str, Any] | None:
    """The one row of a `runs` file (those columns), or None if it is damaged, too large, not one
    row, lacks a column, or has one of another type than rmqsim writes (sim/readback.py
    `RUN_ROW`: a `run_id` that is no string, `output_files` entries without a path); UnsafeFile if it is not a regular file (never opened then). A row
    written before rows listed their files has `output_files` None (`legacy`). With `schemas`,
    the file's Arrow schema is added to it unless an equal one is there already."""
    with regular_file(path) as handle:
        data = arrow_copy(handle, MAX_ROW_BYTES)
    if data is None:
        return None
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        if schemas is not None and not any(parquet.schema_arrow.equals(s) for s in schemas):
            schemas.append(parquet.schema_arrow)
        present = [c for c in columns if c in parquet.schema_arrow.names]
        if any(c not in present for c in columns if c != "output_files"):
            return None
        rows = parquet.read(columns=present).to_pylist()
    except Exception:  # noqa: BLE001 - pyarrow raises several types for damaged or foreign files
        return None
    if len(rows) != 1 or shape_problem(rows[0], RUN_ROW) is not None:
        return None
    return {"output_files": None, **rows[0]}


def legacy(row: dict[str, Any]) -> bool:
    """A row of an older rmqsim, which did not list its per-message files."""
    return row["output_files"] is None


def check_folders(out_dir: Path) -> None:
    """The table folders and `report` are folders, not symbolic links (never followed)."""
    for name in (*TABLES, "report", REPRO):
        kind = lstat_kind(out_dir / name)
        if kind not in (None, "dir"):
            raise ForeignDirectory(f"{out_dir / name} is {'a symbolic link' if kind == 'link' else 'not a folder'}; "
                                   "rmqsim reads and writes only the folders it made: move it away")


def _is_leftover(name: str) -> bool:
    return is_temporary(name) or _MARKER_RE.fullmatch(name) is not None or name.startswith(".rmqsim-probe-")


def clean_leftovers(out_dir: Path) -> list[str]:
    """Remove temporary files and attempt markers left by interrupted work (resume): regular
    files only, in the directory and its table folders (never through a symbolic link)."""
    removed = 0
    for folder in (out_dir, *(out_dir / t for t in (*TABLES, REPRO))):
        if lstat_kind(folder) != "dir":
            continue
        for entry in folder.iterdir():
            if _is_leftover(entry.name) and lstat_kind(entry) == "file":
                entry.unlink(missing_ok=True)
                removed += 1
    return [f"removed {removed} leftover temporary file(s) of an interrupted sweep"] if removed else []


def completed(out_dir: Path, digest: str | None = None, expected: set[str] | None = None,
              log: TextIO | None = None) -> dict[str, str]:
    """run_id → status of every run with a readable `runs` row (of sweep `digest`, if given).

    A run whose `runs` file cannot be read or belongs to another sweep, or whose row lists a
    per-message file that is missing or has another size (truncated), has its files removed so
    that the run is redone, and said so on `log`. A file in a table folder that is not a regular
    file is refused (ForeignDirectory, never opened); so is, with `expected` run ids, a file that
    is no run of this sweep."""
    check_folders(out_dir)
    folder = out_dir / "runs"
    if not folder.is_dir():
        return {}
    status, unknown = {}, []
    for path in sorted(folder.iterdir()):
        if path.name.startswith((".", "_")):
            continue
        kind = lstat_kind(path)
        if kind != "file":
            unknown.append(f"{path.name} ({'a symbolic link' if kind == 'link' else 'not a regular file'})")
            continue
        if path.suffix != ".parquet" or (expected is not None and path.stem not in expected):
            unknown.append(path.name)
            continue
        state, why = _run_status(out_dir, path, digest)
        if state is None:
            _forget(out_dir, path.stem)
            if log is not None:
                print(f"{path}: {why}; removed, the run will be redone", file=log)
            continue
        status[path.stem] = state
    if unknown:
        raise ForeignDirectory(f"{folder} holds files that are no runs of this sweep ("
                               f"{', '.join(repr(n) for n in unknown[:5])}); remove them, or pass --replace")
    return status


def _run_status(out_dir: Path, path: Path, digest: str | None) -> tuple[str | None, str]:
    """(the row's status, "") — or (None, why) if the file is damaged, foreign or of another
    sweep, or a per-message file it lists is missing or has another size."""
    row = read_row(path, ROW_COLUMNS)
    if row is None or row["run_id"] != path.stem or not isinstance(row["status"], str):
        return None, "unreadable or not a run of this sweep (interrupted, or copied in?)"
    if digest is not None and row["sweep_digest"] != digest:
        return None, "a run of another sweep (copied in?)"
    for entry in row["output_files"] or []:
        listed = out_dir / entry["path"]
        if entry["path"] not in (*(f"{t}/{path.stem}.parquet" for t in TABLES[1:]), f"{REPRO}/{path.stem}.md"):
            return None, f"lists {entry['path']!r}, no file of this run"
        kind = lstat_kind(listed)
        if kind not in (None, "file"):
            raise ForeignDirectory(f"{listed} is {'a symbolic link' if kind == 'link' else 'not a regular file'}, "
                                   "not the file its run wrote; move it away")
        if kind is None or listed.lstat().st_size != entry["bytes"]:
            return None, (f"its {entry['path']} is {'missing' if kind is None else 'damaged'} (truncated by a crash "
                          "or a full disk?)")
    return row["status"], ""


def _forget(out_dir: Path, run_id: str) -> None:
    """Remove a run's files so that it is redone (regular files only: anything else is refused)."""
    paths = [out_dir / table / f"{run_id}.parquet" for table in TABLES] + [out_dir / REPRO / f"{run_id}.md"]
    odd = [p for p in paths if lstat_kind(p) not in (None, "file")]
    if odd:
        raise ForeignDirectory(f"{some([str(p) for p in odd])} not a regular file: not the run's, not removing "
                               "it; move it away")
    for path in paths:
        path.unlink(missing_ok=True)


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
