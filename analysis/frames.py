"""One record kind as a pandas DataFrame with typed columns (notebooks: `RunResult.frame(kind)`).

Columns: `t_us`, `node`, then the kind's fields as declared (sim/trace.py, models/records.py),
with the Parquet trace's types (int64, string, double, boolean; nullable), read either from the
records kept in memory (`keep_records=True`) or from a Parquet trace (`trace_dir=`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.trace_store import kind_path, kind_schema
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


def records_frame(records: list[tuple], kind: str) -> Any:
    """The kept records of one kind as a DataFrame (columns t_us, node, then the kind's fields)."""
    check_kind(kind)
    schema = kind_schema(kind)
    names = [n for n in schema.names if n != "seq"]
    rows = [r for r in records if r[2] == kind]
    columns = {"t_us": [r[0] for r in rows], "node": [r[1] for r in rows]}
    for i, name in enumerate(names[2:]):
        columns[name] = [r[3 + i] for r in rows]
    table = pa.Table.from_pydict(columns, schema=pa.schema([schema.field(n) for n in names]))
    return table.to_pandas(types_mapper=_nullable)


def trace_frame(trace_dir: Path, kind: str) -> Any:
    """One kind of a Parquet trace as a DataFrame (the same columns; `seq` dropped)."""
    check_kind(kind)
    path = kind_path(Path(trace_dir), kind)
    if not path.is_file():  # the run emitted no record of this kind
        return records_frame([], kind)
    table = pq.read_table(path)
    return table.drop_columns(["seq"]).to_pandas(types_mapper=_nullable)


def _nullable(kind: pa.DataType) -> Any:
    import pandas as pd

    return {pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype(), pa.bool_(): pd.BooleanDtype(),
            pa.float64(): pd.Float64Dtype()}.get(kind)
