"""A run's trace as Parquet, one file per record kind, streamed in bounded row groups.

    DIR/trace/<kind>.parquet     e.g. trace/consumer.consumed.parquet, trace/producer.sent.parquet

Columns: `seq` (the record's position in the run's emission order), `t_us`, `node`, then the
kind's own fields with the types declared in sim/kernel/trace.py / models/records.py (int → int64,
str → string, float → double, bool → boolean; nullable). `TraceWriter` is a Tracer chunk
observer: it buffers at most `ROW_GROUP` rows per kind and writes them as a row group, so a
long run's trace never sits in memory. Files are written under hidden temporary names and
renamed into place when the run closes the writer (sim/kernel/files.py's convention). A write that
fails (a full disk) removes every file of the trace, temporary or renamed, and raises
`OutputError` ("could not write <file>: no space left on device"): never half a trace.

`read_trace(DIR)` merges the files back into emission order (by `seq`, streaming); `trace_digest`
recomputes the run digest from them (sim/kernel/trace.py `digest`), so a stored trace can be checked
against `trace_sha256`. Reading one kind:

    pandas.read_parquet("runs/x/trace/consumer.consumed.parquet")
    duckdb.sql("SELECT node, count(*) FROM 'runs/x/trace/consumer.consumed.parquet' GROUP BY node")
    spark.read.parquet("runs/x/trace/producer.sent.parquet")
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import models.records  # noqa: F401  (declares the RocketMQ record kinds read back here)
from sim.kernel.files import regular_file, write_error
from sim.kernel.trace import KINDS, TYPES, digest

ROW_GROUP = 65_536  # rows buffered per kind before they are written
_ARROW = {int: pa.int64(), str: pa.string(), float: pa.float64(), bool: pa.bool_()}


def kind_schema(kind: str) -> pa.Schema:
    fields = [("seq", pa.int64()), ("t_us", pa.int64()), ("node", pa.string())]
    fields += [(name, _ARROW[tp]) for name, tp in zip(KINDS[kind], TYPES[kind], strict=True)]
    return pa.schema(fields)


def kind_path(directory: Path, kind: str) -> Path:
    return directory / f"{kind}.parquet"


class TraceWriter:
    """Tracer chunk observer: records → `directory/<kind>.parquet` (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.seq = 0
        self.buffers: dict[str, list[tuple]] = {}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.renamed: list[Path] = []

    def __call__(self, chunk: list[tuple]) -> None:
        seq = self.seq
        buffers = self.buffers
        for record in chunk:
            buffer = buffers.get(record[2])
            if buffer is None:
                buffer = buffers[record[2]] = []
            buffer.append((seq, record))
            seq += 1
        self.seq = seq
        for kind, buffer in buffers.items():
            if len(buffer) >= ROW_GROUP:
                self._write(kind, buffer)

    def _write(self, kind: str, buffer: list[tuple]) -> None:
        try:
            self._write_group(kind, buffer)
        except OSError as exc:
            self.discard()
            raise write_error(kind_path(self.directory, kind), exc) from None

    def _write_group(self, kind: str, buffer: list[tuple]) -> None:
        schema = kind_schema(kind)
        columns: list[list[Any]] = [[] for _ in schema.names]
        for seq, record in buffer:
            columns[0].append(seq)
            columns[1].append(record[0])
            columns[2].append(record[1])
            for i, value in enumerate(record[3:], start=3):
                columns[i].append(value)
        writer = self.writers.get(kind)
        if writer is None:
            writer = self.writers[kind] = pq.ParquetWriter(self._temp(kind), schema)
        writer.write_table(pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                                                schema=schema))
        buffer.clear()

    def _temp(self, kind: str) -> Path:
        return self.directory / f".{kind}.parquet.tmp-{os.getpid()}"

    def close(self) -> list[Path]:
        """Write what is buffered, close every file and rename it into place; returns the paths."""
        for kind, buffer in self.buffers.items():
            if buffer:
                self._write(kind, buffer)
        for kind, writer in sorted(self.writers.items()):
            final = kind_path(self.directory, kind)
            try:
                writer.close()
                os.replace(self._temp(kind), final)
            except OSError as exc:
                self.discard()
                raise write_error(final, exc) from None
            self.renamed.append(final)
        self.writers = {}
        return list(self.renamed)

    def discard(self) -> None:
        """Remove every file of this trace, temporary or already renamed (a failed write)."""
        for kind, writer in self.writers.items():
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - closing after a failed write may fail again; the file goes anyway
                pass
            self._temp(kind).unlink(missing_ok=True)
        for path in self.renamed:
            path.unlink(missing_ok=True)
        self.writers, self.renamed = {}, []
        self.buffers = {kind: [] for kind in self.buffers}


def _records(path: Path) -> Iterator[tuple[int, tuple]]:
    """(seq, record tuple) of one kind file, in file order, a row group at a time."""
    kind = path.name.removesuffix(".parquet")
    names = KINDS[kind]
    with regular_file(path) as handle:  # never a FIFO, device or link (sim/kernel/files.py)
        for batch in pq.ParquetFile(handle).iter_batches():
            columns = [batch.column(name).to_pylist() for name in ("seq", "t_us", "node", *names)]
            for row in zip(*columns, strict=True):
                yield row[0], (row[1], row[2], kind, *row[3:])


def read_trace(directory: Path) -> Iterator[tuple]:
    """Every record of a stored trace, in emission order (streaming merge of the kind files)."""
    files = sorted(p for p in Path(directory).glob("*.parquet") if not p.name.startswith("."))
    for _seq, record in heapq.merge(*(_records(p) for p in files), key=lambda item: item[0]):
        yield record


def trace_digest(directory: Path) -> str:
    """The run digest recomputed from a stored trace (compare with summary `trace_sha256`)."""
    return digest(read_trace(directory))
