"""Reading back the JSON files rmqsim wrote as the hostile input they may have become: bounded
in depth, and of a declared shape.

sim/files.py `read_json(path, limit, error, damaged, shape)` is the one reader of
`summary.json`, `run_meta.json`, `scenario.resolved.json`, a sweep's `sweep.json` and the
manifests: a regular file of at most `limit` bytes (`read_bounded`: never a link, FIFO or
device), then here: UTF-8, nested at most `MAX_JSON_DEPTH` levels — counted on the raw bytes
before the parser starts (`parse_json`), since Python's parser recurses once per level and
200,000 `[` would be a RecursionError — then checked against its `shape` (`shape_problem`), if
given. Every failure is `error(text)`, the text naming the file and, for a wrong type, the key
path and what was expected:

    /runs/x/summary.json: trace_sha256: expected a string of 64 hex digits, got 5
    /runs/x/summary.json: written by an older rmqsim (no sim_time_ms): re-run it

A shape (`Leaf`, `Nullable`, `ListOf`, `MapOf`, `Record`) says the type of every field a reader
uses; fields it does not name are not checked (a reader does not use them), a field it names is
checked wherever it is present, and which fields must be present is each reader's own list
(`missing`): explain needs `sim_time_ms`, `rmqsim diff` only `trace_sha256`. The declared shapes
of the files are at the end: `SUMMARY`, `RUN_META`, `SWEEP_MANIFEST`, and `RUN_ROW` (a sweep's
`runs` row as diff and resume read it, from Parquet, checked with `shape_problem`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sim.limits import MAX_SEED, MAX_TIME_MS

MAX_JSON_DEPTH = 64  # nesting of lists and objects; rmqsim writes at most about 8 (a resolved scenario)
_PLAIN_SCAN = 1 << 16  # quotes and brackets counted in Python; more with NumPy
_SCAN_CHUNK = 1 << 22  # of them per NumPy pass (a few tens of MiB of temporaries)
_QUOTE, _OPENERS, _CLOSERS = ord('"'), (ord("["), ord("{")), (ord("]"), ord("}"))
_NOT_MARKS = bytes(b for b in range(256) if b not in b'"[]{}')
_SHOWN_CHARS = 40  # of a wrong value, in a message


class DocumentError(Exception):
    """Why a document is not JSON rmqsim could have written (a short reason, no content)."""


# ------------------------------------------------------------------ bounded parsing

def too_deep(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text `raw` nests lists and objects deeper than `limit` (brackets inside
    strings not counted), found without parsing it. Escapes first: a doubled backslash and then
    an escaped quote are dropped (left to right, as a JSON string pairs them), so every quote
    left opens or closes a string; the quotes and brackets left are counted, in Python for a
    small document and with NumPy, chunk by chunk, for a large one. For text that is not JSON
    the count may be off past its first error — where the parser stops anyway."""
    marks = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_MARKS)
    return (_deeper_plain if len(marks) <= _PLAIN_SCAN else _deeper_vectors)(marks, limit)


def _deeper_plain(marks: bytes, limit: int) -> bool:
    depth, inside = 0, False
    for code in marks:
        if code == _QUOTE:
            inside = not inside
        elif not inside:
            depth += 1 if code in _OPENERS else -1
            if depth > limit:
                return True
    return False


def _deeper_vectors(marks: bytes, limit: int) -> bool:
    import numpy as np  # only for a large document: a manifest of a few KiB (every `rmqsim run`) need not

    codes = np.frombuffer(marks, np.uint8)
    depth, inside = 0, 0
    for start in range(0, codes.size, _SCAN_CHUNK):
        chunk = codes[start:start + _SCAN_CHUNK]
        quotes = np.cumsum(chunk == _QUOTE, dtype=np.int64) + inside
        outside = (quotes & 1) == 0  # a bracket after an even number of quotes is outside any string
        opens = ((chunk == _OPENERS[0]) | (chunk == _OPENERS[1])) & outside
        closes = ((chunk == _CLOSERS[0]) | (chunk == _CLOSERS[1])) & outside
        levels = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int64) + depth
        if int(levels.max()) > limit:
            return True
        depth, inside = int(levels[-1]), int(quotes[-1]) & 1
    return False


def parse_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The value of the UTF-8 JSON text `raw`; DocumentError if it is not UTF-8, nests deeper
    than `max_depth` (checked before parsing: `too_deep`) or is not JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentError("not UTF-8 text") from None
    if too_deep(raw, max_depth):
        raise DocumentError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError; an integer beyond Python's 4,300-digit limit
        raise DocumentError((str(exc).splitlines() or ["not JSON"])[0][:80]) from None


# ------------------------------------------------------------------ shapes

def describe(value: Any) -> str:
    """A value as a message shows it: `5`, `'abc'`, `null`, `true`, `a list`, `an object`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 64 else \
        f"an integer of {value.bit_length()} bits"
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 1] + "…"


def _key(path: str, key: Any) -> str:
    plain = isinstance(key, str) and 0 < len(key) <= _SHOWN_CHARS and key.isprintable()
    shown = key if plain else describe(key)
    return f"{path}.{shown}" if path else shown


class Shape:
    """The declared type of a value (`expected`: how a message names it); `problem` names the
    first place a value is not of it."""

    expected: str

    def fits(self, value: Any) -> bool:
        """Whether `value` is of this kind at its top (its contents unchecked)."""
        raise NotImplementedError

    def problem(self, value: Any, path: str) -> str | None:
        raise NotImplementedError

    def wrong(self, value: Any, path: str) -> str:
        return f"{path or '(top level)'}: expected {self.expected}, got {describe(value)}"


@dataclass(frozen=True)
class Leaf(Shape):
    """A scalar: `test` says whether a value is one, `expected` how a message names it."""

    expected: str
    test: Callable[[Any], bool]

    def fits(self, value: Any) -> bool:
        return self.test(value)

    def problem(self, value: Any, path: str) -> str | None:
        return None if self.test(value) else self.wrong(value, path)


@dataclass(frozen=True)
class Nullable(Shape):
    inner: Shape

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"{self.inner.expected} or null"

    def fits(self, value: Any) -> bool:
        return value is None or self.inner.fits(value)

    def problem(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        return self.inner.problem(value, path) if self.inner.fits(value) else self.wrong(value, path)


@dataclass(frozen=True)
class ListOf(Shape):
    item: Shape

    @property
    def expected(self) -> str:  # type: ignore[override]
        return "a list"

    def fits(self, value: Any) -> bool:
        return isinstance(value, list)

    def problem(self, value: Any, path: str) -> str | None:
        if not isinstance(value, list):
            return self.wrong(value, path)
        return next((p for i, v in enumerate(value) if (p := self.item.problem(v, f"{path}[{i}]")) is not None), None)


@dataclass(frozen=True)
class MapOf(Shape):
    """An object whose values all have one shape (its keys are the data: group names, ...)."""

    value: Shape

    @property
    def expected(self) -> str:  # type: ignore[override]
        return "an object"

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def problem(self, value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        return next((p for k, v in value.items() if (p := self.value.problem(v, _key(path, k))) is not None), None)


@dataclass(frozen=True)
class Record(Shape):
    """An object with named fields: each one present is checked; `required` must be present
    (in a file's top-level shape the reader says instead which it needs: `missing`)."""

    fields: dict[str, Shape]
    required: tuple[str, ...] = ()

    @property
    def expected(self) -> str:  # type: ignore[override]
        return "an object"

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def problem(self, value: Any, path: str) -> str | None:
        if not isinstance(value, dict):
            return self.wrong(value, path)
        for key in self.required:
            if key not in value:
                return f"{_key(path, key)}: missing"
        return next((p for k, shape in self.fields.items() if k in value
                     and (p := shape.problem(value[k], _key(path, k))) is not None), None)


def shape_problem(data: Any, shape: Shape) -> str | None:
    """'KEY PATH: expected ..., got ...' for the first place `data` is not of `shape`, else None."""
    return shape.problem(data, "")


def missing(data: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """Which of `keys` the (already shape-checked) object `data` lacks."""
    return [key for key in keys if key not in data]


# ------------------------------------------------------------------ the declared shapes

def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_READ_TIME_MS = 2 * MAX_TIME_MS  # a run's end: duration_ms plus settle, each at most MAX_TIME_MS
MAX_READ_WALL_S = MAX_TIME_MS / 1000
MAX_READ_EVENTS = 1 << 62

TEXT = Leaf("a string", lambda v: isinstance(v, str))
HEX64 = Leaf("a string of 64 hex digits", lambda v: isinstance(v, str) and _HEX64.fullmatch(v) is not None)
FLAG = Leaf("true or false", lambda v: isinstance(v, bool))
COUNT = Leaf("a whole number ≥ 0", lambda v: type(v) is int and 0 <= v <= MAX_READ_EVENTS)
SEED = Leaf(f"an integer from 0 to {MAX_SEED}", lambda v: type(v) is int and 0 <= v <= MAX_SEED)
NUMBER = Leaf("a finite number", _number)
TIME_MS = Leaf(f"a number of milliseconds from 0 to {MAX_READ_TIME_MS:,}",
               lambda v: _number(v) and 0 <= v <= MAX_READ_TIME_MS)
WALL_S = Leaf(f"a number of seconds from 0 to {MAX_READ_WALL_S:,.0f}", lambda v: _number(v) and 0 <= v <= MAX_READ_WALL_S)
ANY = Leaf("a value", lambda v: True)

FAULT_APPLIED = Record({"index": COUNT, "kind": TEXT, "target": TEXT, "start_ms": TIME_MS,
                        "end_ms": Nullable(TIME_MS), "ends_after_run": FLAG, "random": FLAG, "detail": TEXT},
                       required=("index", "kind", "target", "start_ms", "end_ms"))

# one fault of the summary's availability section, as `explain --fault` reads it (analysis/checkers/availability.py)
AVAILABILITY_FAULT = Record({
    "index": COUNT, "start_ms": TIME_MS, "horizon_ms": TIME_MS, "back_ms": Nullable(TIME_MS),
    "topics": MapOf(Record({"from_ms": Nullable(TIME_MS), "until_ms": Nullable(TIME_MS), "recovered": FLAG,
                            "write_outage_s": NUMBER, "failed_sends": COUNT},
                           required=("from_ms", "until_ms", "recovered", "write_outage_s", "failed_sends"))),
    "groups": MapOf(Record({"recovered_ms": Nullable(TIME_MS), "recovery_s": Nullable(NUMBER), "read_outage_s": NUMBER},
                           required=("recovered_ms", "recovery_s", "read_outage_s"))),
    "why": ListOf(TEXT)}, required=("index", "start_ms", "back_ms", "topics", "groups", "why"))

# summary.json, as explain, diff and `rmqsim.load` (its repr) read it (rmqsim/runner.py `summarize` writes it)
SUMMARY = Record({
    "scenario": TEXT, "seed": SEED, "scenario_sha256": HEX64, "trace_sha256": HEX64, "verdict": TEXT,
    "sent_ok": COUNT, "lost": COUNT, "duplicates": COUNT, "order_violations": Nullable(COUNT),
    "latency_ms": Nullable(Record({"p99": Nullable(NUMBER)})), "sim_time_ms": TIME_MS,
    "stopped_by": Nullable(TEXT), "stopped_detail": Nullable(TEXT), "records": COUNT,
    "faults_applied": ListOf(FAULT_APPLIED),
    "groups": MapOf(Record({"lag_by_second": Nullable(ListOf(NUMBER))})),
    "availability": Record({"faults": ListOf(AVAILABILITY_FAULT)}, required=("faults",)),
    "quiescence": Record({"reached": Nullable(FLAG)}), "undrained_units": ListOf(TEXT),
})
# what every reader of a run needs: without these it is no summary of rmqsim (`rmqsim diff` needs no more)
SUMMARY_IDENTITY = ("trace_sha256",)
# what explain and `rmqsim.load` need besides (a summary of an older rmqsim may lack some)
SUMMARY_FOR_EXPLAIN = ("scenario", "seed", "scenario_sha256", "verdict", "sent_ok", "lost", "duplicates",
                       "sim_time_ms")

# run_meta.json (rmqsim/runner.py `_meta`): a replay's simulator and bounds come from it
RUN_META = Record({"simulator_sha256": HEX64, "wall_s": WALL_S, "events": COUNT})
RUN_META_FOR_REPLAY = ("simulator_sha256", "wall_s", "events")

# a sweep's sweep.json (analysis/sweeps/sweep.py `manifest`), as resume, report and diff read it
SWEEP_MANIFEST = Record({
    "tool": TEXT, "name": TEXT, "source": TEXT, "digest": TEXT, "simulator_sha256": Nullable(TEXT), "base": TEXT,
    "params": MapOf(TEXT), "param_types": MapOf(TEXT), "grid": ListOf(TEXT), "zip": ListOf(TEXT),
    "points": ListOf(Record({"point": COUNT, "point_key": TEXT, "params": MapOf(ANY)})), "seeds": ListOf(SEED),
    "keep": ListOf(TEXT), "timeline_run": TEXT, "runs": COUNT,
    "report": Nullable(Record({"focus": Nullable(TEXT)})), "base_scenario": MapOf(ANY),
})

# one row of a sweep's `runs` table (analysis/sweeps/results_store.py), as resume and diff read it
OUTPUT_FILE = Record({"path": TEXT, "bytes": COUNT, "sha256": TEXT}, required=("path", "bytes"))
RUN_ROW = Record({
    "run_id": TEXT, "status": TEXT, "sweep_digest": Nullable(TEXT), "output_files": Nullable(ListOf(OUTPUT_FILE)),
    "error": Nullable(TEXT), "repro": Nullable(TEXT), "params_json": Nullable(TEXT), "point_key": Nullable(TEXT),
    "scenario": Nullable(TEXT), "scenario_sha256": Nullable(TEXT), "trace_sha256": Nullable(TEXT),
    "seed": Nullable(SEED), "verdict": Nullable(TEXT),
})
