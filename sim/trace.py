"""Trace records: flat, past-tense kinds declared once with typed fields; a streaming tracer; the digest.

A record is a flat tuple `(t_us, node, kind, *fields)`: no dict per record, since a run emits
several records per simulated message. Each kind, its field names and their types are declared
once with `declare()` (the kernel's kinds below; RocketMQ's in `models/records.py`), so sinks
and analysis can turn tuples into named, typed rows. Field values are restricted to str, int,
float, bool and None, whose encoding is identical in every process (no `hash()`/`id()`).

Streaming: the `Tracer` keeps only the current chunk of `DIGEST_CHUNK` records. When a chunk is
full (and at `close()`), it is hashed into the run digest and handed to the chunk observers (the
checkers' ledger, a Parquet trace writer, the fault log), then dropped, unless the caller asked
to keep every record (`keep=True`: tests, `rmqsim.run(..., keep_records=True)`). So a run's memory
does not grow with the number of records, and observers see every record, in emission order,
at most one chunk late.

The digest is SHA-256 over the canonical form of the records in emission order: consecutive
chunks of `DIGEST_CHUNK` records, each chunk a list of record tuples encoded with pickle protocol
4 **without its memo** (`Pickler.fast`). Without the memo the bytes depend on values only, never
on which equal strings happen to be one object, and the opcodes for str/int/float/bool/None/
tuple/list are fixed by the protocol (floats as big-endian IEEE 754), so the form is the same in
every process and on every platform. `digest(records)` recomputes it from any record iterable,
e.g. a stored trace read back in emission order.

Detail kinds (`declare_detail`, `DETAIL_KINDS`): facts only `rmqsim explain` needs (each send
attempt, every offset commit a broker takes, offset file writes and reloads, ...), emitted only by
a run that asks for them (`Tracer.detail`: a traced run, or explain's replay). They reach the
observers in emission order like any record, but they are left out of the digest and of `count`,
so a run has one digest and one summary whether it emitted them or not.
"""

# compiled with Cython: the C declarations of this module's classes are in trace.pxd beside it

from __future__ import annotations

import hashlib
import io
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

KINDS: dict[str, tuple[str, ...]] = {}  # kind -> field names
DETAIL_KINDS: set[str] = set()  # kinds emitted only with Tracer.detail; never in the digest (module docstring)
TYPES: dict[str, tuple[type, ...]] = {}  # kind -> field types (a value may also be None)
ENVELOPE = ("t_us", "node", "kind")
FIELD_TYPES = (str, int, float, bool)


def declare(kind: str, **fields: type) -> str:
    """Declare a record kind `<area>.<past_tense_verb>` and its typed fields (once)."""
    if "." not in kind:
        raise ValueError(f"record kind {kind!r} must look like area.verb_ed")
    names, types = tuple(fields), tuple(fields.values())
    if any(t not in FIELD_TYPES for t in types):
        raise ValueError(f"record kind {kind!r}: field types must be one of str, int, float, bool")
    if kind in KINDS and (KINDS[kind], TYPES[kind]) != (names, types):
        raise ValueError(f"record kind {kind!r} declared twice with different fields")
    KINDS[kind] = names
    TYPES[kind] = types
    return kind


def declare_detail(kind: str, **fields: type) -> str:
    """Declare a detail kind: emitted only by a run with `Tracer.detail`, left out of the digest."""
    DETAIL_KINDS.add(declare(kind, **fields))
    return kind


def field_index(kind: str, field: str) -> int:
    """Position of `field` inside a record tuple of `kind`."""
    return len(ENVELOPE) + KINDS[kind].index(field)


FAULT_INJECTED = declare("fault.injected", fault=str, target=str, detail=str)
FAULT_HEALED = declare("fault.healed", fault=str, target=str, detail=str)
NODE_CRASHED = declare("node.crashed", power_loss=bool)
NODE_RESTARTED = declare("node.restarted", incarnation=int)
NET_DROPPED = declare("net.dropped", src=str, dst=str, payload=str, reason=str)
NET_HELD = declare("net.held", src=str, dst=str, payload=str)  # kept by TCP through a partition
RUN_ENDED = declare("run.ended", phase=str)

DIGEST_CHUNK = 4096
DIGEST_PICKLE_PROTOCOL = 4

ChunkObserver = Callable[[list[tuple]], None]


class Tracer:
    """Streams records in chunks to the digest and the chunk observers (see module docstring)."""

    def __init__(self, env: Any, keep: bool = True) -> None:
        self.env = env
        self.keep = keep
        self.records: list[tuple] = []  # every record, only when `keep`
        self.count = 0  # records emitted (and flushed)
        self.chunk: list[tuple] = []
        self.observers: list[ChunkObserver] = []
        self.detail = False  # emit the detail kinds (set before the models are built; module docstring)
        self._main: list[tuple] = []  # with `detail`: records of the digest awaiting a whole chunk
        self._streaming = False  # set by `sync`: every flush hands all records to the observers at once
        self._sha = hashlib.sha256()
        self._digest: str | None = None

    def emit(self, node: str, kind: str, *fields: Any) -> None:
        """Record `(now, node, kind, *fields)`. The per-message hot paths append the tuple to
        `chunk` themselves and call `flush()` when it holds `DIGEST_CHUNK` records (the same thing
        without a call and an argument tuple): `chunk` is one list for the whole run."""
        chunk = self.chunk
        chunk.append((self.env._now, node, kind, *fields))
        if len(chunk) >= DIGEST_CHUNK:
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Hash the full chunks of `DIGEST_CHUNK` records (with `final`, also the partial rest),
        hand those records to the observers, and drop them (or keep them). Digest chunk
        boundaries are exact whatever the caller's flush timing, so a stored trace rechunked by
        `digest()` gives the same digest."""
        if self.detail or self._streaming:
            return self._flush_detail(final)
        chunk = self.chunk
        n = len(chunk)
        ready = n if final else n - n % DIGEST_CHUNK
        if not ready:
            return
        batch = chunk[:ready]
        del chunk[:ready]  # the same list: hot paths hold on to it
        self.count += ready
        for start in range(0, ready, DIGEST_CHUNK):
            self._sha.update(canonical_bytes(batch[start:start + DIGEST_CHUNK]))
        for observe in self.observers:
            observe(batch)
        if self.keep:
            self.records += batch

    def _flush_detail(self, final: bool) -> None:
        """`flush` of a run that emits detail kinds: every record goes to the observers now, in
        emission order; the others are hashed in whole chunks of `DIGEST_CHUNK` as without them."""
        chunk = self.chunk
        if not chunk and not final:
            return
        batch = chunk[:]
        del chunk[:]
        main = self._main
        main += [r for r in batch if r[2] not in DETAIL_KINDS]
        ready = len(main) if final else len(main) - len(main) % DIGEST_CHUNK
        self.count += ready
        for start in range(0, ready, DIGEST_CHUNK):
            self._sha.update(canonical_bytes(main[start:start + DIGEST_CHUNK]))
        del main[:ready]
        if batch:
            for observe in self.observers:
                observe(batch)
            if self.keep:
                self.records += batch

    def sync(self) -> None:
        """Hand every record emitted so far to the observers now (the quiescence checks of a
        settling run read the ledger up to the present: rmqsim/quiescence.py). From then on the
        tracer flushes as a detail run does: the observers see each record at once, the digest
        still hashes whole chunks of `DIGEST_CHUNK`, so the digest does not depend on when or
        whether `sync` was called."""
        self._streaming = True
        self._flush_detail(False)

    def close(self) -> str:
        """Flush the last (partial) chunk; returns the run digest (of everything emitted so far:
        call it when the run is over)."""
        if self._digest is None:
            self.flush(final=True)
            self._digest = self._sha.hexdigest()
        return self._digest

    def of_kind(self, kind: str) -> Iterator[tuple]:
        """Records of one kind (kept records plus the current chunk)."""
        return (r for r in (*self.records, *self.chunk) if r[2] == kind)


def canonical_bytes(records: list[tuple]) -> bytes:
    """The value-only encoding of a list of records (pickle protocol 4, memo off)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=DIGEST_PICKLE_PROTOCOL)
    pickler.fast = True  # no memo: equal values encode equally whatever their identity
    pickler.dump(records)
    return buffer.getvalue()


def digest(records: Iterable[tuple]) -> str:
    """The run digest of a record stream in emission order (chunked as the Tracer does; detail
    kinds left out)."""
    h = hashlib.sha256()
    chunk: list[tuple] = []
    for record in records:
        if record[2] in DETAIL_KINDS:
            continue
        chunk.append(tuple(record))
        if len(chunk) == DIGEST_CHUNK:
            h.update(canonical_bytes(chunk))
            chunk = []
    if chunk:
        h.update(canonical_bytes(chunk))
    return h.hexdigest()


def as_dict(record: tuple) -> dict[str, Any]:
    names = ENVELOPE + KINDS[record[2]]
    return dict(zip(names, record, strict=True))
