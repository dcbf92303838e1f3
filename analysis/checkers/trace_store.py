"""A run's trace as Parquet, one file per record kind, streamed in bounded row groups.

    DIR/trace/<kind>.parquet     e.g. trace/consumer.consumed.parquet, trace/producer.sent.parquet

Columns: `seq` (the record's position in the run's emission order), `t_us`, `node`, then the
kind's own fields with the types declared in sim/trace.py / models/records.py (int → int64,
str → string, float → double, bool → boolean; nullable). `TraceWriter` is a Tracer chunk
observer: it buffers at most `ROW_GROUP` rows per kind and writes them as a row group, so a
long run's trace never sits in memory. Files are written under hidden temporary names and
renamed into place when the run closes the writer (sim/files.py's convention). A write that
fails (a full disk) removes every file of the trace, temporary or renamed, and raises
`OutputError` ("could not write <file>: no space left on device"): never half a trace.

`read_trace(DIR)` merges the files back into emission order (by `seq`, streaming); `trace_digest`
recomputes the run digest from them (sim/trace.py `digest`), so a stored trace can be checked
against `trace_sha256`; `read_kind(PATH, kind, columns)` reads one kind's file as a pyarrow Table
(`RunResult.frame`, the run report).

Reading back trusts nothing in the folder. Every reader opens a kind file through `open_kind`:
the file is checked by lstat and opened with sim/files.py's `open_regular` (a regular file,
never a symbolic link, FIFO, device or folder, so nothing outside the run directory is opened),
at most `MAX_TRACE_FILE_BYTES`; its Parquet frame is checked before pyarrow parses anything (the
`PAR1` magic at both ends, a footer of at most `MAX_FOOTER_BYTES`, row groups of at most
`MAX_ROW_GROUP_BYTES`, so a sparse or hostile file is never read whole); its name must be a
declared kind and its schema that kind's (`kind_schema`: names and types). Anything else, and any
error pyarrow raises on the way, is a `TraceError` "could not read FILE: REASON" (the CLI's exit 2).
Reading one kind:

    pandas.read_parquet("runs/x/trace/consumer.consumed.parquet")
    duckdb.sql("SELECT node, count(*) FROM 'runs/x/trace/consumer.consumed.parquet' GROUP BY node")
    spark.read.parquet("runs/x/trace/producer.sent.parquet")
"""

from __future__ import annotations

import heapq
import os
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

import models.records  # noqa: F401  (declares the RocketMQ record kinds read back here)
from sim.files import UnsafeFile, lstat_kind, matches, regular_file, write_error
from sim.trace import KINDS, TYPES, digest

ROW_GROUP = 65_536  # rows buffered per kind before they are written
_ARROW = {int: pa.int64(), str: pa.string(), float: pa.float64(), bool: pa.bool_()}
# reading back: a record takes about 25 bytes in a kind file, so 64 GiB is billions of records of
# one kind, beyond a run within the default bounds; a row group rmqsim writes holds at most
# ROW_GROUP + DIGEST_CHUNK rows (a few MiB), its footer about 1 KiB a row group
MAX_TRACE_FILE_BYTES = 64 << 30
MAX_FOOTER_BYTES = 64 << 20
MAX_ROW_GROUP_BYTES = 256 << 20
_MAGIC = b"PAR1"
_READ_ERRORS = (pa.ArrowException, OSError, ValueError, MemoryError)  # what pyarrow raises on a damaged file
_ENVELOPE = ("seq", "t_us", "node")  # never null in a file rmqsim wrote


class TraceError(Exception):
    """A trace file rmqsim will not read as its own: "could not read FILE: REASON" (module
    docstring); `path` and `reason` are kept for callers that word it their own way."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"could not read {path}: {reason}")
        self.path, self.reason = path, reason


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


# ------------------------------------------------------------------ reading back

_NOT_A_FILE = {None: "missing", "link": "a symbolic link (a trace file is read only as the regular file rmqsim wrote)",
               "dir": "a folder, not a trace file"}


class TraceProblem(Exception):
    """What is wrong inside a kind file (`open_kind` words it as a TraceError naming the file)."""


@contextmanager
def open_kind(path: Path, kind: str, columns: Sequence[str] | None = None) -> Iterator[pq.ParquetFile]:
    """`path`, a trace file of `kind`, as a ParquetFile checked as the module docstring says
    (`columns`: only these need the kind's types; None: the whole schema must be the kind's).
    Every error inside the block, pyarrow's included, is a TraceError naming the file."""
    what = lstat_kind(path)  # by lstat first: a link is refused before anything is opened
    if what != "file":
        raise TraceError(path, _NOT_A_FILE.get(what, "not a regular file (a FIFO, device or socket)"))
    if kind not in KINDS:
        raise TraceError(path, f"{kind!r} is not a record kind rmqsim writes (sim/trace.py, models/records.py), "
                               "so not a trace file of rmqsim: move it away")
    try:
        with regular_file(path) as handle:
            _check_frame(handle)
            parquet = pq.ParquetFile(handle)
            _check_contents(parquet, kind, columns)
            yield parquet
    except (UnsafeFile, TraceProblem) as exc:
        raise TraceError(path, str(exc)) from None
    except _READ_ERRORS as exc:
        raise TraceError(path, f"damaged (not readable Parquet: {_first_line(exc)}); rerun the run to rewrite "
                               "its trace") from None


def _check_frame(handle: BinaryIO) -> None:
    """The file's size and Parquet frame, by two small reads before pyarrow parses anything: at
    most MAX_TRACE_FILE_BYTES, `PAR1` at both ends, a footer that fits (MAX_FOOTER_BYTES)."""
    size = os.fstat(handle.fileno()).st_size
    if size > MAX_TRACE_FILE_BYTES:
        raise TraceProblem(f"larger than {MAX_TRACE_FILE_BYTES:,} bytes ({size:,}): not a trace file rmqsim wrote")
    if size < 2 * len(_MAGIC) + 4:
        raise TraceProblem(f"damaged (not Parquet: {size} bytes); rerun the run to rewrite its trace")
    head = handle.read(len(_MAGIC))
    handle.seek(size - 8)
    tail = handle.read(8)
    if head != _MAGIC or len(tail) != 8 or tail[4:] != _MAGIC:
        raise TraceProblem("damaged (not Parquet: no PAR1 magic at its start and end); rerun the run to rewrite "
                           "its trace")
    footer_bytes = struct.unpack("<I", tail[:4])[0]
    if footer_bytes > min(MAX_FOOTER_BYTES, size - 12):
        raise TraceProblem(f"damaged (a Parquet footer of {footer_bytes:,} bytes in a file of {size:,})")
    handle.seek(0)


def _check_contents(parquet: pq.ParquetFile, kind: str, columns: Sequence[str] | None) -> None:
    """The file's schema is the kind's (`kind_schema`: every column with its type, and no other;
    with `columns`, those), and its row groups are no larger than rmqsim writes them."""
    expected, schema = kind_schema(kind), parquet.schema_arrow
    wanted = expected.names if columns is None else list(columns)
    wrong = [c for c in wanted if c not in schema.names or c not in expected.names
             or schema.field(c).type != expected.field(c).type]
    extra = [c for c in schema.names if c not in expected.names] if columns is None else []
    if wrong or extra:
        why = "; ".join(part for part in (f"{', '.join(wrong)} missing or of another type" if wrong else "",
                                          f"{', '.join(extra)} not of this kind" if extra else "") if part)
        raise TraceProblem(f"not a trace file of {kind} as rmqsim writes it (columns {why})")
    meta = parquet.metadata
    for i in range(meta.num_row_groups):
        size_bytes = meta.row_group(i).total_byte_size
        if size_bytes > MAX_ROW_GROUP_BYTES:
            raise TraceProblem(f"row group {i} holds {size_bytes:,} bytes, more than rmqsim writes in one "
                               f"({MAX_ROW_GROUP_BYTES:,})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def read_kind(path: Path, kind: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The `columns` (None: all) of the trace file `path` of `kind`, checked (`open_kind`)."""
    with open_kind(path, kind, columns) as parquet:
        return parquet.read(columns=None if columns is None else list(columns))


def _records(path: Path) -> Iterator[tuple[int, tuple]]:
    """(seq, record tuple) of one kind file, in file order, a row group at a time; TraceError
    if it is not a trace file of rmqsim (`open_kind`) or has rows without seq, time or node."""
    kind = path.name.removesuffix(".parquet")
    with open_kind(path, kind) as parquet:
        names = ("seq", "t_us", "node", *KINDS[kind])
        for batch in parquet.iter_batches():
            if any(batch.column(name).null_count for name in _ENVELOPE):
                raise TraceProblem("damaged (rows without seq, t_us or node)")
            columns = [batch.column(name).to_pylist() for name in names]
            for row in zip(*columns, strict=True):
                yield row[0], (row[1], row[2], kind, *row[3:])


def check_folder(directory: Path) -> None:
    """TraceError unless `directory` is a folder itself (not a symbolic link to one, not missing)."""
    what = lstat_kind(directory)
    if what != "dir":
        raise TraceError(directory, {None: "missing", "link": "a symbolic link (a trace is read only from the folder "
                                                              "rmqsim wrote)"}.get(what, "not a folder"))


def trace_files(directory: Path) -> list[Path]:
    """The kind files of a trace folder (hidden temporary files left out), sorted; TraceError if
    the folder is not one (`check_folder`)."""
    directory = Path(directory)
    check_folder(directory)
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise TraceError(directory, exc.strerror or str(exc)) from None
    return sorted(directory / n for n in names if n.endswith(".parquet") and not n.startswith("."))


def read_trace(directory: Path, *, listed: dict[str, Any] | None = None,
               sha256: str | None = None) -> Iterator[tuple]:
    """Every record of a stored trace, in emission order (streaming merge of the kind files).
    TraceError (module docstring) for a folder or file that is not a trace rmqsim wrote: every
    file is checked before the first record is given.

    A caller that knows what the run wrote checks the contents too, still before any record is
    given: `listed`, the run manifest's entries of its trace files keyed by file name
    (`{"producer.sent.parquet": {"size": ..., "sha256": ...}}`): every file listed and unchanged,
    every listed file there; `sha256`, the summary's `trace_sha256`: the digest is recomputed first
    (one more pass, in bounded memory) and must be it. So well-formed Parquet with foreign values
    never reaches the caller's observers (the digest leaves detail kinds out: `listed` covers them)."""
    files = trace_files(directory)
    for path in files:  # refuse a bad name, link, frame or schema before any record goes out
        with open_kind(path, path.name.removesuffix(".parquet")):
            pass
    if listed is not None:
        _check_listed(Path(directory), files, listed)
    if sha256 is not None:
        found = digest(_merged(files))
        if found != sha256:
            raise TraceError(Path(directory), f"its records have trace digest {found[:12]}…, not the summary's "
                                              f"{sha256[:12]}…: not this run's trace")
    yield from _merged(files)


def _merged(files: list[Path]) -> Iterator[tuple]:
    for _seq, record in heapq.merge(*(_records(p) for p in files), key=lambda item: item[0]):
        yield record


def _check_listed(directory: Path, files: list[Path], listed: dict[str, Any]) -> None:
    """Each file is in `listed` with its size and SHA-256 (read once, in chunks), and each listed one is there."""
    for path in files:
        entry = listed.get(path.name)
        if entry is None:
            raise TraceError(path, "not a trace file rmqsim wrote for this run (its manifest does not list it); "
                                   "move it away")
        if not matches(path, entry):
            raise TraceError(path, "differs from what rmqsim wrote (damaged or edited since): rerun the run")
    missing = sorted(set(listed) - {p.name for p in files})
    if missing:
        raise TraceError(directory / missing[0], "missing (the run's manifest lists it): rerun the run")


def trace_digest(directory: Path) -> str:
    """The run digest recomputed from a stored trace (compare with summary `trace_sha256`)."""
    return digest(read_trace(directory))
