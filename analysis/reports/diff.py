"""`rmqsim diff A B`: what differs between two runs — the summary metrics that differ (only those),
grouped by section, causes included, and whether the resolved scenarios differ (which keys).

A side is a run directory (`rmqsim run` wrote its `summary.json` and `scenario.resolved.json`) or a
sweep point, `SWEEP_DIR:run_id` (its `runs` row; the resolved scenario is rebuilt from the base
scenario the sweep stored in its `sweep.json` and the row's `--set` items, and used only if its
digest is the row's: the sweep's `base` path, like any path inside a result file, is never
opened — it may name any file by now). Both become flat
metric names (`lost_by_cause_unflushed_at_power_loss`, as in a sweep's runs table:
analysis/sweeps/results_store.py), so a run directory compares with a sweep point; a name one side lacks
(a summary's per-group tree, a row's rates) is not compared. Identity (scenario, seed, digests,
verdict) is printed first for each side; wall times, message-id samples, the per-second and
histogram lists and the controller's `elections` are left out; so is the older two-way duplicate
split (`duplicate_causes`: the ten mechanisms say it).

Input that is not one of those is a `DiffError` (the CLI's exit 2, one line): a missing path, a
directory that is neither, a damaged file (the JSON files are read by sim/readback.py:
bounded in size and depth, each field diff reads of its declared type, and so is a `runs` row),
a run id the sweep does not have or a run that failed.
"""

from __future__ import annotations

import copy
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.reports import fmt
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from sim.files import UnsafeFile, lstat_kind, read_json, regular_file
from sim.inputs import short
from sim.readback import (
    MAX_JSON_DEPTH,
    RUN_ROW,
    SUMMARY,
    SUMMARY_IDENTITY,
    DocumentError,
    Record,
    describe,
    missing,
    parse_json,
    shape_problem,
)

MAX_JSON_BYTES = 64 << 20
RUN_ID_RE = re.compile(r"p[0-9]{4,}-s[0-9]+")
IDENTITY = ("scenario", "seed", "scenario_sha256", "trace_sha256", "verdict")
# never compared: identity (printed first), wall clock, bookkeeping, samples, long lists, the legacy split
SKIPPED = frozenset(("scenario", "seed", "scenario_sha256", "trace_sha256", "wall_s", "simulate_wall_s", "run_id",
                     "sweep", "sweep_digest", "point", "point_key", "output_files", "params_json", "status", "error",
                     "repro", "lat_hist_bucket", "lat_hist_count", "delivery_hist", "tl_second", "tl_p50_ms",
                     "tl_p99_ms", "tl_max_ms", "fault_windows", "txn_checks_second", "txn_checks_count",
                     "txn_checks_hist", "txn_checks_per_second", "txn_checks_histogram", "verdict_failures",
                     "elections"))
SKIPPED_PREFIXES = ("duplicate_causes", "dup_rate_", "lost_sample", "duplicate_sample", "order_violation_sample")
# section → flat-name prefixes, in print order (the first matching section takes a name)
SECTIONS = (
    ("verdict", ("verdict", "failures", "guarantees", "expectations", "stopped")),
    ("guarantees", ("lost", "loss_rate", "duplicate", "order_violations", "acked_deliveries", "unconsumed")),
    ("sends", ("sent_", "send", "oneway_unstored", "pending_delay")),
    ("store", ("stored",)),
    ("consumption", ("consume", "pending_retry", "dlq", "retries", "rebalances", "unowned_queue_s", "lag_max",
                     "groups")),
    ("latency", ("latency_ms", "warmup_ms")),
    ("transactions", ("txn", "transaction")),
    ("failover", ("failovers", "unwritable_s", "unwritable_at_end", "two_masters_s")),
    ("quiescence", ("quiescence",)),
    ("coverage", ("coverage",)),
    ("run", ("records", "sim_time_ms", "faults_applied", "livelock")),
)


ABSENT = object()  # a name one side does not have (a map key it never saw)


class DiffError(Exception):
    """An input `rmqsim diff` cannot read as a run (one line, exit 2)."""


@dataclass
class Side:
    given: str  # the argument as typed
    kind: str  # "run directory" or "sweep point <key>"
    metrics: dict[str, Any]  # flat name → value
    labels: dict[str, str]  # flat name → the summary's dotted name, where known
    identity: dict[str, Any]
    resolved: dict[str, Any] | None  # the resolved scenario tree, if it could be read
    resolved_note: str = ""  # why it could not, or a caveat
    extra: dict[str, Any] = field(default_factory=dict)


def read_side(text: str) -> Side:
    """A run directory, or `SWEEP_DIR:run_id`; DiffError otherwise."""
    path = Path(text)
    if lstat_kind(path) is None and ":" in text:
        folder, _, run = text.rpartition(":")
        return _sweep_point(text, Path(folder), run)
    if lstat_kind(path) is None:
        raise DiffError(f"{text}: no such run directory (a sweep point is written SWEEP_DIR:run_id, e.g. "
                        "sweeps/quick:p0001-s2)")
    if lstat_kind(path) == "link" and path.is_dir():  # runs/latest, runs/<scenario>/latest: rmqsim's own links
        path = path.resolve()
    if lstat_kind(path) != "dir":
        raise DiffError(f"{text} is not a directory: give a run directory or SWEEP_DIR:run_id")
    if lstat_kind(path / sweep_dir.MANIFEST) is not None:
        raise DiffError(f"{text} is a sweep directory: name one of its runs, {text}:p0000-s1 (ids in {text}/runs/)")
    if lstat_kind(path / "summary.json") is None:
        raise DiffError(f"{text} is not a run directory (no summary.json)")
    return _run_dir(text, path)


def _json(path: Path, shape: Record | None = None) -> Any:
    return read_json(path, MAX_JSON_BYTES, DiffError, "is damaged (not the JSON rmqsim writes)", shape)


def _run_dir(text: str, path: Path) -> Side:
    summary = _json(path / "summary.json", SUMMARY)
    if missing(summary, SUMMARY_IDENTITY):
        raise DiffError(f"{path / 'summary.json'} is not an rmqsim run summary (no trace_sha256)")
    resolved, note = None, ""
    if lstat_kind(path / "scenario.resolved.json") is None:
        note = "no scenario.resolved.json"
    else:
        resolved = _json(path / "scenario.resolved.json")
    metrics, labels = flatten(summary)
    return Side(text, "run directory", metrics, labels, {k: summary.get(k) for k in IDENTITY}, resolved, note)


def _sweep_point(text: str, folder: Path, run: str) -> Side:
    if not RUN_ID_RE.fullmatch(run):
        raise DiffError(f"{text}: {run!r} is not a run id (ids look like p0001-s2)")
    if lstat_kind(folder / sweep_dir.MANIFEST) is None:
        raise DiffError(f"{text}: {folder} is not a sweep output directory (no {sweep_dir.MANIFEST})")
    try:
        manifest = sweep_dir.read_manifest(folder)
    except sweep_dir.ForeignDirectory as exc:
        raise DiffError(str(exc)) from None
    row = _row(_path_of(folder, run), text)
    if row.get("status") != "ok":
        error = (row.get("error") or "").strip().splitlines()[:1]
        raise DiffError(f"{text}: the run failed to run ({error[0] if error else 'no error recorded'}); "
                        f"nothing to compare (reproduce: {row.get('repro')})")
    params = _params(_path_of(folder, run), row)  # the point's parameters: in its scenario, below
    metrics, labels = flatten({k: _map(v) for k, v in row.items() if k not in params})
    side = Side(text, f"sweep point {row.get('point_key') or '(base)'}", metrics, labels,
                {k: row.get(k) for k in IDENTITY}, None)
    side.resolved, side.resolved_note = _rebuilt_scenario(manifest, row)
    return side


def _path_of(folder: Path, run: str) -> Path:
    return folder / store.RUNS / f"{run}.parquet"


def _params(path: Path, row: dict[str, Any]) -> dict[str, Any]:
    """The row's `params_json`: an object (bounded in depth as every JSON rmqsim reads back)."""
    try:
        params = parse_json((row.get("params_json") or "{}").encode())
    except DocumentError as exc:
        raise DiffError(f"{path}: params_json is damaged (not the JSON rmqsim writes): {exc}") from None
    if not isinstance(params, dict):
        raise DiffError(f"{path}: params_json: expected an object, got {describe(params)}")
    return params


def _row(path: Path, text: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.sweeps.directory import MAX_ROW_BYTES, arrow_copy

    if lstat_kind(path) is None:
        raise DiffError(f"{text}: the sweep has no run {path.stem} (its runs are in {path.parent}/)")
    try:
        with regular_file(path) as handle:
            data = arrow_copy(handle, MAX_ROW_BYTES)
        if data is None:
            raise DiffError(f"{path} is larger than a run's row ({MAX_ROW_BYTES:,} bytes): not a row rmqsim wrote")
        rows = pq.read_table(pa.BufferReader(data)).to_pylist()
    except (UnsafeFile, DiffError) as exc:
        if isinstance(exc, DiffError):
            raise
        raise DiffError(f"{text}: {exc}") from None
    except Exception:  # noqa: BLE001 - pyarrow raises several types for damaged files
        raise DiffError(f"{path} is damaged (not readable Parquet): rerun the sweep command to redo it") from None
    if len(rows) != 1:
        raise DiffError(f"{path} is not one run's row")
    problem = shape_problem(rows[0], RUN_ROW)
    if problem is not None:
        raise DiffError(f"{path}: {problem}")
    return rows[0]


def _map(value: Any) -> Any:
    """A Parquet map (a list of key/value pairs) as a dict, like the summary's."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return dict(value)
    return value


def _rebuilt_scenario(manifest: dict[str, Any], row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The point's resolved scenario: the base scenario stored in the sweep's manifest with the
    row's `--set` items, if that gives the scenario the run ran (its digest); the base file the
    manifest names is never opened."""
    from rmqsim.scenario import spec as scenario_mod
    from sim.config import ConfigError

    base = manifest.get("base_scenario")
    if not isinstance(base, dict):
        return None, "its sweep.json holds no base scenario (written by an older rmqsim)"
    try:
        words = shlex.split(row.get("repro") or "")
    except ValueError:
        words = []
    sets = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set"]
    try:
        sc = scenario_mod.from_data(copy.deepcopy(base), "sweep.json base_scenario", sets)
    except ConfigError as exc:
        return None, f"cannot rebuild it from the sweep's stored base scenario ({len(exc.problems)} problem(s))"
    if sc.digest() != row.get("scenario_sha256"):
        return None, "the sweep's stored base scenario with the run's --set items is not the scenario it ran"
    return sc.model_dump(mode="json"), ""


def flatten(tree: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Flat metric names (results_store.flat_name) → values, and → the dotted summary names."""
    metrics: dict[str, Any] = {}
    labels: dict[str, str] = {}

    def walk(value: Any, dotted: str, depth: int = 0) -> None:
        if isinstance(value, dict):  # an empty map adds no name: its keys are absent, as on the other side
            if depth >= MAX_JSON_DEPTH:  # a JSON file cannot be deeper (readback); a Parquet row could
                raise DiffError(f"{short(dotted.split('.')[0])} nests deeper than {MAX_JSON_DEPTH} levels: not what "
                                "rmqsim writes")
            for key, sub in value.items():
                walk(sub, f"{dotted}.{key}" if dotted else str(key), depth + 1)
            return
        flat = store.flat_name(*dotted.split("."))
        if not _skipped(flat):
            metrics[flat], labels[flat] = value, dotted

    walk(tree, "")
    return metrics, labels


def _skipped(flat: str) -> bool:
    return flat in SKIPPED or flat.startswith(SKIPPED_PREFIXES)


def section(flat: str) -> str:
    for name, prefixes in SECTIONS:
        if flat.startswith(prefixes):
            return name
    return "other"


def same(a: Any, b: Any) -> bool:
    """Equal values (absent, None, NaN and an empty list are one thing; 3 == 3.0)."""
    def missing(v: Any) -> bool:
        return v is ABSENT or v is None or (isinstance(v, float) and math.isnan(v)) or v == []

    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b


def scenario_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(key path, A's value, B's value) of every leaf that differs, in tree order."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in [*a, *[k for k in b if k not in a]]:
            out += scenario_diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in scenario_diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [(path, a, b)]


def show(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return fmt.number(value)
    text = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _pair(a: Any, b: Any) -> str:
    """`A → B`, numbers with as many digits as it takes to tell them apart (0.50004 → 0.49996)."""
    numeric = all(isinstance(v, float) for v in (a, b))
    for digits in range(3, 12 if numeric else 4):
        left, right = (fmt.number(a, digits), fmt.number(b, digits)) if numeric else (show(a), show(b))
        if left != right:
            break
    return f"{left} → {right}"


def _delta(a: Any, b: Any) -> str:
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numeric or max(abs(a), abs(b)) > 1e300:  # beyond: a difference of thousands of digits
        return ""
    d = b - a
    return f"  ({'+' if d > 0 else '−'}{fmt.number(abs(d))})"


def diff_text(a: Side, b: Side) -> str:
    """The whole report (module docstring)."""
    lines = []
    for name, side in (("A", a), ("B", b)):
        i = side.identity
        lines.append(f"{name}: {side.given}  ({side.kind})")
        lines.append(f"   scenario {i.get('scenario')} · seed {i.get('seed')} · resolved sha256 "
                     f"{str(i.get('scenario_sha256'))[:16]} · trace sha256 {str(i.get('trace_sha256'))[:16]} · "
                     f"verdict {i.get('verdict')}")
    lines += _scenario_lines(a, b)
    if a.identity.get("trace_sha256") == b.identity.get("trace_sha256"):
        lines.append("same trace sha256: the two runs are the same run")
    if a.kind.split()[0] == b.kind.split()[0]:  # same kind of input: a name on one side only is a difference
        common = [*a.metrics, *[k for k in b.metrics if k not in a.metrics]]
    else:  # a summary and a runs row name different things: compare what both have
        common = [k for k in a.metrics if k in b.metrics]
    differ = [k for k in common if not same(a.metrics.get(k, ABSENT), b.metrics.get(k, ABSENT))]
    by_section: dict[str, list[str]] = {}
    for key in differ:
        by_section.setdefault(section(key), []).append(key)
    order = [name for name, _p in SECTIONS] + ["other"]
    width = max((len(max((a.labels.get(k, k), b.labels.get(k, k)), key=lambda t: t.count("."))) for k in differ),
                default=0)
    for name in order:
        if name not in by_section:
            continue
        lines.append(f"\n{name}")
        for key in by_section[name]:
            label = max((a.labels.get(key, key), b.labels.get(key, key)), key=lambda t: t.count("."))  # dotted
            va, vb = a.metrics.get(key, ABSENT), b.metrics.get(key, ABSENT)
            lines.append(f"  {(label or key).ljust(width)}  {_pair(va, vb)}{_delta(va, vb)}")
    only = len(set(a.metrics) ^ set(b.metrics)) if len(common) < len(set(a.metrics) | set(b.metrics)) else 0
    lines.append(f"\n{len(differ):,} metric(s) differ, {len(common) - len(differ):,} equal (not shown)"
                 + (f"; {only:,} present on one side only (not compared)" if only else ""))
    return "\n".join(lines)


def _scenario_lines(a: Side, b: Side) -> list[str]:
    notes = [f"   {n}: {s.resolved_note}" for n, s in (("A", a), ("B", b)) if s.resolved_note]
    if a.identity.get("scenario_sha256") == b.identity.get("scenario_sha256") and a.identity.get("scenario_sha256"):
        return ["resolved scenarios: the same"]
    if a.resolved is None or b.resolved is None:
        return ["resolved scenarios: differ (their digests); the keys cannot be listed:", *notes]
    keys = scenario_diff(a.resolved, b.resolved)
    out = [f"resolved scenarios differ in {len(keys)} key(s):", *notes]
    out += [f"  {path}: {show(x)} → {show(y)}" for path, x, y in keys[:50]]
    if len(keys) > 50:
        out.append(f"  ... and {len(keys) - 50} more")
    return out
