"""One record kind as a pandas DataFrame with typed columns (notebooks: `RunResult.frame(kind)`).

Columns: `t_us`, `node`, then the kind's fields as declared (sim/trace.py, models/records.py),
with the Parquet trace's types (int64, string, double, boolean; nullable), read either from the
records kept in memory (`keep_records=True`) or from a Parquet trace (`trace_dir=`). Given the
producers' names, a kind with a `msg_id` column gets the message's display key `msg_key`
(`<producer>-<seq>`, as in the summary's samples and `rmqsim explain`) right beside it.

Errors: `FrameError` for a kind that is not declared or records that were not kept;
`analysis.checkers.trace_store.TraceError` ("could not read FILE: REASON") for a trace folder or kind file
that is not the one rmqsim wrote (a symbolic link, FIFO, folder, damaged or foreign Parquet, another
kind's columns): it is read through trace_store's checks, never opened as it stands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from analysis.checkers.trace_store import check_folder, kind_path, kind_schema, read_kind
from sim.files import lstat_kind
from sim.trace import KINDS


class FrameError(Exception):
    """The records of a kind are not available (unknown kind, or the run kept none)."""


def check_kind(kind: str) -> None:
    """Refuse an unknown kind, and say how to get pandas when it is missing (it is the `notebook` extra)."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise FrameError("RunResult.frame() needs pandas: pip install -e '.[notebook]' "
                         "(scripts/setup.sh installs it)") from None
    if kind not in KINDS:
        raise FrameError(f"unknown record kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")


def records_frame(records: list[tuple], kind: str, producers: list[str] | None = None) -> Any:
    """The kept records of one kind as a DataFrame (columns t_us, node, then the kind's fields;
    `msg_key` beside `msg_id` given the `producers`' names)."""
    check_kind(kind)
    schema = kind_schema(kind)
    names = [n for n in schema.names if n != "seq"]
    rows = [r for r in records if r[2] == kind]
    columns = {"t_us": [r[0] for r in rows], "node": [r[1] for r in rows]}
    for i, name in enumerate(names[2:]):
        columns[name] = [r[3 + i] for r in rows]
    table = pa.Table.from_pydict(columns, schema=pa.schema([schema.field(n) for n in names]))
    return _with_keys(table, producers)


def trace_frame(trace_dir: Path, kind: str, producers: list[str] | None = None) -> Any:
    """One kind of a Parquet trace as a DataFrame (the same columns; `seq` dropped). TraceError
    if the folder or the kind's file is not what rmqsim wrote (module docstring)."""
    check_kind(kind)
    trace_dir = Path(trace_dir)
    check_folder(trace_dir)
    path = kind_path(trace_dir, kind)
    if lstat_kind(path) is None:  # the run emitted no record of this kind
        return records_frame([], kind, producers)
    return _with_keys(read_kind(path, kind).drop_columns(["seq"]), producers)


def _with_keys(table: pa.Table, producers: list[str] | None) -> Any:
    """The table as a DataFrame, with `msg_key` (the display key) after `msg_id` when it has one."""
    if producers is not None and "msg_id" in table.column_names:
        from analysis.checkers.ledger_codes import display_key

        keys = [None if m is None else display_key(m, producers) for m in table.column("msg_id").to_pylist()]
        table = table.add_column(table.column_names.index("msg_id") + 1, pa.field("msg_key", pa.string()),
                                 pa.array(keys, pa.string()))
    return table.to_pandas(types_mapper=_nullable)


def _nullable(kind: pa.DataType) -> Any:
    import pandas as pd

    return {pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype(), pa.bool_(): pd.BooleanDtype(),
            pa.float64(): pd.Float64Dtype()}.get(kind)
