"""A sweep's Parquet tables, written atomically per run (the directory itself: sweep_dir.py).

    DIR/runs/<run_id>.parquet      one row per run: metrics, parameters, verdicts, or the error;
                                   flat columns: a summary sub-tree `latency_ms.p99` is the column
                                   `latency_ms_p99` (`flatten_schema`, `flatten_row`);
                                   maps stay maps (`coverage`, `send_status`, ...), and the maps a
                                   question is asked of are also one column per key
                                   (`coverage_<point>`, `unwritable_s_<group>`, the availability
                                   section's by_topic / by_group: `map_fields`)
    DIR/deliveries/<run_id>.parquet  (kept on request) one row per consumption
    DIR/latencies/<run_id>.parquet   (kept on request) one row per acked, consumed message

Each file is written to a hidden temporary name in its folder and renamed into place
(sim/files.py), so a reader (Spark ignores names starting with '.' or '_') never sees half a file. The run's
per-message tables are renamed before its `runs` row, and the row lists them (`output_files`:
path, size in bytes and SHA-256 of each): a run is complete exactly when its `runs` file exists
with status "ok" and every file it lists is there with its size (a truncated `deliveries` file
makes the run redone, and a report refuses it; a file no row lists is none of the sweep's). A
rerun skips complete runs and retries failed ones.
Each `runs` row carries the sweep's digest (`sweep_digest`), so a row copied in from another
sweep is recognised. The directory must be visible to the driver and every executor (local
disk for `local[*]`, a shared filesystem for a cluster).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.metrics import LOSS_CAUSES
from analysis.checkers.run_rows import (
    AVAILABILITY_COUNTS,
    AVAILABILITY_MAXIMA,
    CAUSES,
    LATENCY_KEYS,
    MAP_PREFIXES,
    ORDER_COLUMNS,
    QUIESCENCE_KEYS,
    SEND_COUNTS,
    SEND_LATENCIES,
    SEND_SHARES,
    SEND_TALLIES,
    SUMMARY_COUNTS,
    TXN_COUNTS,
    TXN_FIGURES,
)
from sim.files import atomic_path, file_digest

TABLES = ("runs", "deliveries", "latencies")  # DIR/<table>/<run_id>.parquet (the directory: sweep_dir.py)
RUNS, DELIVERIES, LATENCIES = TABLES
EXTRA_COLUMNS = frozenset({"sweep_digest", "output_files", "attempt"})  # runs-table columns beyond run_rows.RESERVED_COLUMNS
OUTPUT_FILE = pa.struct([("path", pa.string()), ("bytes", pa.int64()), ("sha256", pa.string())])

_PARAM_TYPES = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
TXN_STRUCT = pa.struct([(k, pa.int64()) for k in TXN_COUNTS] + [(k, pa.float64()) for k in TXN_FIGURES]
                       + [("committed_lost_causes", pa.map_(pa.string(), pa.int64())),
                          ("checks_second", pa.list_(pa.int64())), ("checks_count", pa.list_(pa.int64())),
                          ("checks_hist", pa.list_(pa.int64()))])
_QUIESCENCE_TYPES = {"reached": pa.bool_(), "settle": pa.string(), "at_ms": pa.float64(), "window_ms": pa.float64()}
QUIESCENCE_STRUCT = pa.struct([(k, _QUIESCENCE_TYPES[k]) for k in QUIESCENCE_KEYS])
AVAILABILITY_STRUCT = pa.struct([(k, pa.int64()) for k in AVAILABILITY_COUNTS] + [("acked_ratio", pa.float64())]
                                + [(k, pa.struct([("max", pa.float64())])) for k in AVAILABILITY_MAXIMA])
FAULT_WINDOW = pa.struct([("kind", pa.string()), ("target", pa.string()), ("start_ms", pa.float64()),
                          ("end_ms", pa.float64())])


def flat_name(*parts: str) -> str:
    """A column name SQL engines accept unquoted: `latency_ms` + `p99` → `latency_ms_p99`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(parts)).lower()


def flatten_schema(schema: pa.Schema) -> pa.Schema:
    """Every struct column becomes flat columns `<column>_<field>` (recursively): a metric is then
    read by the same name in Spark SQL, DuckDB, pandas and Arrow, with no quoting or dots. Lists
    (of structs too: `fault_windows`) stay lists."""
    out: list[pa.Field] = []
    for f in schema:
        out += _flat_fields(f.name, f.type)
    return pa.schema(out)


def _flat_fields(name: str, kind: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(kind):
        return [g for i in range(kind.num_fields) for g in _flat_fields(flat_name(name, kind.field(i).name),
                                                                         kind.field(i).type)]
    return [pa.field(name, kind)]


def flatten_row(row: dict[str, Any], keep: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """A row whose dict values (summary sub-trees) are spread into `<key>_<sub>` columns; a key in
    `keep` (a map column of the schema) stays as it is."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict) and key not in keep:
            out.update(flatten_row({flat_name(key, str(k)): v for k, v in value.items()}))
        else:
            out[key] = value
    return out


def runs_schema(param_types: dict[str, str]) -> pa.Schema:
    """The `runs` table's columns (flat: `flatten_schema`); a row adds its map columns (`map_fields`)."""
    return flatten_schema(nested_runs_schema(param_types))


def nested_runs_schema(param_types: dict[str, str]) -> pa.Schema:
    """The `runs` table's columns before flattening: a summary sub-tree is a struct (`latency_ms`
    with `p99`, ...), which names the metric by its summary key path (analysis/sweeps/columns.py)."""
    fields = [("run_id", pa.string()), ("sweep", pa.string()), ("sweep_digest", pa.string()),
              ("point", pa.int32()), ("point_key", pa.string()), ("seed", pa.int64()),
              ("output_files", pa.list_(OUTPUT_FILE))]
    fields += [(name, _PARAM_TYPES[kind]) for name, kind in param_types.items()]
    fields += [("params_json", pa.string()), ("status", pa.string()), ("stopped_by", pa.string()),
               ("error", pa.string()),
               ("repro", pa.string()), ("scenario", pa.string()), ("scenario_sha256", pa.string()),
               ("trace_sha256", pa.string())]
    fields += [(name, pa.int64()) for name in SUMMARY_COUNTS + ORDER_COLUMNS]
    fields += [("latency_ms", pa.struct([(k, pa.float64()) for k in LATENCY_KEYS])),
               ("duplicate_causes", pa.struct([(c, pa.int64()) for c in CAUSES])),
               ("duplicates_by_cause", pa.struct([(c, pa.int64()) for c in DUPLICATE_CAUSES])),
               ("retries", pa.int64()), ("rebalances", pa.int64()), ("unowned_queue_s", pa.float64()),
               ("lag_max", pa.int64()),
               ("consume_latency_ms", pa.struct([(k, pa.float64()) for k in LATENCY_KEYS])),
               ("lost_by_cause", pa.struct([(c, pa.int64()) for c in LOSS_CAUSES])),
               ("transaction_violations", pa.int64()),
               ("duplicate_rate", pa.float64()), ("loss_rate", pa.float64())]
    fields += [(f"dup_rate_{c}", pa.float64()) for c in CAUSES]
    fields += [("verdict", pa.string()), ("verdict_failures", pa.string()),
               ("wall_s", pa.float64()), ("simulate_wall_s", pa.float64()),
               ("attempt", pa.int32()),  # Spark's task attempt that wrote the row (0: the first; outside digests)
               ("lat_hist_bucket", pa.list_(pa.int32())), ("lat_hist_count", pa.list_(pa.int64())),
               ("delivery_hist", pa.list_(pa.int64())), ("tl_second", pa.list_(pa.int64())),
               ("tl_p50_ms", pa.list_(pa.float64())), ("tl_p99_ms", pa.list_(pa.float64())),
               ("tl_max_ms", pa.list_(pa.float64())), ("fault_windows", pa.list_(FAULT_WINDOW))]
    fields += [(name, pa.int64()) for name in SEND_COUNTS]
    fields += [(name, pa.struct([(k, pa.float64()) for k in LATENCY_KEYS])) for name in SEND_LATENCIES]
    fields += [(name, pa.map_(pa.string(), pa.float64())) for name in SEND_SHARES]
    fields += [(name, pa.map_(pa.string(), pa.int64())) for name in SEND_TALLIES]
    fields += [("txn_violations", pa.int64()), ("txn", TXN_STRUCT)]
    fields += [("acked_deliveries", pa.int64()), ("warmup_ms", pa.float64())]
    fields += [("coverage", pa.map_(pa.string(), pa.int64())), ("quiescence", QUIESCENCE_STRUCT),
               ("quiescence_unsettled", pa.map_(pa.string(), pa.int64()))]
    fields += [("failovers", pa.int64()), ("unwritable_s", pa.map_(pa.string(), pa.float64()))]
    fields += [("availability", AVAILABILITY_STRUCT), ("availability_not_recovered", pa.list_(pa.string()))]
    fields += [("compiled", pa.bool_())]  # the run ran on the compiled per-message modules (sim/compiled.py)
    return pa.schema(fields)


def map_fields(row: dict[str, Any], schema: pa.Schema) -> list[pa.Field]:
    """The flat map columns of a row (analysis/checkers/run_rows.py `map_columns`: `coverage_<point>`,
    `unwritable_s_<group>`, ...) that `schema` lacks, sorted: their names depend on the run, so each
    row's file carries its own, and a reader unifies them (a column a row lacks reads as null)."""
    have = set(schema.names)
    out = []
    for name in sorted(row):
        prefix = next((p for p in MAP_PREFIXES if name.startswith(p)), None)
        if prefix is not None and name not in have:
            out.append(pa.field(name, pa.int64() if MAP_PREFIXES[prefix] == "int64" else pa.float64()))
    return out


DELIVERIES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("point", pa.int32()), ("seed", pa.int64()), ("unit", pa.string()),
    ("key", pa.string()), ("t_ms", pa.float64()), ("ok", pa.bool_()), ("reconsume_times", pa.int32()),
    ("broker", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
    ("consumer", pa.string())])
LATENCIES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("point", pa.int32()), ("seed", pa.int64()), ("unit", pa.string()),
    ("key", pa.string()), ("sent_ms", pa.float64()), ("latency_ms", pa.float64())])


def write_table(out_dir: Path, table: str, run_id: str, columns: dict[str, list],
                schema: pa.Schema) -> Path:
    folder = out_dir / table
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{run_id}.parquet"
    with atomic_path(final) as tmp:
        pq.write_table(pa.Table.from_pydict(columns, schema=schema), tmp)
    return final


def output_entry(out_dir: Path, path: Path) -> dict[str, Any]:
    """A per-message file's entry in its run's `output_files`: path relative to DIR, size, SHA-256."""
    digest = file_digest(path)
    return {"path": path.relative_to(out_dir).as_posix(), "bytes": digest["size"], "sha256": digest["sha256"]}


def write_run_row(out_dir: Path, row: dict[str, Any], schema: pa.Schema) -> None:
    """The commit point of a run (see module docstring); the row's map columns join `schema`."""
    flat = flatten_row(row, keep=set(schema.names))
    schema = pa.schema([*schema, *map_fields(flat, schema)])
    columns = {name: [flat.get(name)] for name in schema.names}
    write_table(out_dir, RUNS, row["run_id"], columns, schema)
