"""The runs table's numeric columns as metrics a sweep report can be asked about: each by its
summary key path (`latency_ms.max`, `availability.write_outage_s.max`,
`duplicates_by_cause.invisible_time_expired`), with its flat column (`latency_ms_max`), a label
and a unit.

A sweep file's `report: {focus: METRIC}` (analysis/sweeps/spec.py) and `rmqsim report --focus`
name one of the five focus words (`FOCUS_WORDS`: a correctness rate, or the merged latency
percentiles) or a numeric column. Where the names come from:

- the table's fixed columns: every integer or floating-point leaf of the runs table's nested
  schema (analysis/sweeps/results_store.py `nested_runs_schema`), named by its path (a struct's
  field joins its parent with `.`), but not the identity columns (`IDENTITY`: point, seed,
  attempt) nor the sweep's parameters (they are the x axis);
- the map columns a run adds (analysis/checkers/run_rows.py `MAP_PREFIXES`): `coverage.<point>`
  for every point of the coverage catalogue (models/coverage_points.py), and, named by the run's
  broker groups, topics and groups, `unwritable_s.<group>`,
  `availability.write_outage_s.by_topic.<topic>`, `availability.read_outage_s.by_group.<unit>`
  and `availability.recovery_s.by_group.<unit>` (the part after the prefix as its column has it:
  lower-case, `-` as `_`);
- at report time, any other numeric column the table has (`table_columns`).

A sweep file is checked before anything runs (`check_name`): a fixed column, a coverage point,
or a name under a map prefix (whose key only the runs know: the report checks it against the
table). A name that is none of these is refused with the nearest valid names (`nearest`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from analysis.checkers.run_rows import MAP_PREFIXES

FOCUS_WORDS = ("loss", "duplicates", "latency", "order", "transactions")
IDENTITY = frozenset({"point", "seed", "attempt"})
# the map columns' prefixes as key paths: flat prefix → dotted path
MAP_PATHS = {prefix: prefix.rstrip("_").replace("availability_", "availability.", 1)
             .replace("_by_topic", ".by_topic").replace("_by_group", ".by_group") for prefix in MAP_PREFIXES}
# the metrics an inferred focus considers besides the correctness rates: the tail and availability
TAIL_METRICS = ("latency_ms.max", "latency_ms.p999", "availability.write_outage_s.max",
                "availability.recovery_s.max", "availability.read_outage_s.max")

# what a metric's path names, for labels: path (or its first part) → words
BASES = {
    "latency_ms": "end-to-end latency (send → first consume)",
    "consume_latency_ms": "consume latency (stored → first consume)",
    "send_latency_ms": "send latency (send() → result)",
    "send_latency_ms_in_faults": "send latency during faults (send() → result)",
    "availability.write_outage_s": "write outage (as producers see it)",
    "availability.read_outage_s": "read outage (longest wait of a stored message after a fault)",
    "availability.recovery_s": "time to recover (from a fault until the group is back)",
    "availability.acked_ratio": "share of sends acknowledged",
    "availability.sends": "sends with an outcome",
    "availability.acked": "sends acknowledged",
    "unwritable_s": "time without a writable master (broker's view)",
    "duplicates_by_cause": "duplicate deliveries caused by",
    "lost_by_cause": "lost messages caused by",
    "duplicate_causes": "duplicate deliveries caused by",
    "order_violations": "order violations",
    "coverage": "times reached: rare state",
    "duplicates": "duplicate deliveries",
    "duplicated_messages": "messages delivered more than once",
    "lost": "lost messages",
    "sent_ok": "messages acknowledged",
    "consumed": "messages consumed",
    "lag_max": "largest consumer lag",
    "unowned_queue_s": "queue time without an owner",
    "rebalances": "rebalances",
    "retries": "consume retries",
    "failovers": "failovers",
    "wall_s": "wall time of a run",
    "simulate_wall_s": "wall time simulating",
    "sim_time_ms": "simulated time",
    "txn": "transactions:",
    "quiescence": "quiescence:",
    "loss_rate": "loss rate",
    "duplicate_rate": "duplicate-delivery rate",
}
STATS = {"max": "max", "min": "min", "p50": "p50", "p90": "p90", "p99": "p99", "p999": "p99.9"}
BY = {"by_topic": "topic", "by_group": "group"}


class FocusError(ValueError):
    """A focus name that is no focus word and no numeric column (the message names the nearest)."""


@dataclass(frozen=True)
class Column:
    """A numeric column of the runs table as a metric: `name` its key path, `column` the flat
    runs-table column, `label` words for figures and text, `unit` "ms", "s", "µs", "fraction"
    (shown in %) or "" (a count or a plain number)."""

    name: str
    column: str
    label: str
    unit: str

    @property
    def axis(self) -> str:
        """`end-to-end latency (send → first consume) max (ms)`: a figure's axis label."""
        unit = {"fraction": "%", "": ""}.get(self.unit, self.unit)
        return f"{self.label} ({unit})" if unit else self.label


def flat(name: str) -> str:
    """A key path's flat column: `latency_ms.max` → `latency_ms_max` (results_store.flat_name's rule)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(name.split("."))).lower()


def unit_of(name: str, integer: bool = False) -> str:
    """The unit a key path's name says: the last part (from the end) ending `_ms`, `_s` or `_us`;
    a rate, ratio or share is a fraction; else none (a count)."""
    for part in reversed(name.split(".")):
        match = re.search(r"(?<!_per)_(ms|us|s)(?:_(?:p[0-9]+|max|min))?$", part)
        if match:
            return {"us": "µs"}.get(match.group(1), match.group(1))
    if re.search(r"(^|[._])(rate|ratio|share)([._]|$)|_rate_|_rate$|ratio", name) and not integer:
        return "fraction"
    return ""


def label_of(name: str) -> str:
    """Words for a key path: `latency_ms.max` → "end-to-end latency (send → first consume), max";
    `availability.write_outage_s.by_topic.orders` → "write outage (as producers see it), topic
    orders"; a name nothing describes is its path with spaces."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ".".join(parts[:cut])
        if base in BASES:
            rest = parts[cut:]
            words = BASES[base]
            if rest and rest[0] in BY and len(rest) >= 2:
                return f"{words}, {BY[rest[0]]} {'.'.join(rest[1:])}"
            if rest and (base.endswith("_by_cause") or base in ("duplicate_causes", "coverage")):
                return f"{words} {'.'.join(rest)}".strip()
            if len(rest) == 1 and rest[0] in STATS:
                return f"{words}, {STATS[rest[0]]}"
            joiner = " " if words.endswith(":") else ", "
            return f"{words}{joiner + ' '.join(rest) if rest else ''}"
    return name.replace("_", " ")


def make(name: str, column: str, integer: bool = False) -> Column:
    return Column(name, column, label_of(name), unit_of(name, integer))


def _numeric(kind: Any) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and not pa.types.is_boolean(kind)


def _leaves(name: str, kind: Any, out: dict[str, Column]) -> None:
    import pyarrow as pa

    if pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            _leaves(f"{name}.{kind.field(i).name}", kind.field(i).type, out)
    elif _numeric(kind):
        column = make(name, flat(name), pa.types.is_integer(kind))
        out[column.column] = column


def fixed_columns() -> dict[str, Column]:
    """The table's fixed numeric columns (module docstring), by flat column."""
    from analysis.sweeps.results_store import nested_runs_schema

    out: dict[str, Column] = {}
    for field in nested_runs_schema({}):
        if field.name not in IDENTITY:
            _leaves(field.name, field.type, out)
    return out


def coverage_columns() -> dict[str, Column]:
    """`coverage.<point>` of every point of the coverage catalogue, by flat column."""
    from models.coverage_points import POINTS

    return {flat(f"coverage.{p.name}"): make(f"coverage.{p.name}", flat(f"coverage.{p.name}"), True) for p in POINTS}


def map_column(column: str) -> Column | None:
    """A flat map column (`unwritable_s_broker_a`) as a metric (`unwritable_s.broker_a`), or None."""
    for prefix, path in MAP_PATHS.items():
        if column.startswith(prefix) and len(column) > len(prefix):
            return make(f"{path}.{column[len(prefix):]}", column, MAP_PREFIXES[prefix] == "int64")
    return None


def table_columns(arrow_schema: Any, params: list[str]) -> dict[str, Column]:
    """Every numeric column of a runs table (its unified Arrow schema), by flat column: the fixed
    ones by their key paths, the map columns by theirs, any other by its own name; not the
    identity columns nor the parameters."""
    import pyarrow as pa

    fixed = fixed_columns()
    out: dict[str, Column] = {}
    for field in arrow_schema:
        if field.name in IDENTITY or field.name in params or not _numeric(field.type):
            continue
        out[field.name] = fixed.get(field.name) or map_column(field.name) or \
            make(field.name, field.name, pa.types.is_integer(field.type))
    return out


def find(text: str, columns: dict[str, Column]) -> Column | None:
    """The column `text` names (its key path, or its flat column), or None."""
    by_path = {c.name: c for c in columns.values()}
    return by_path.get(text) or columns.get(text) or columns.get(flat(text))


def nearest(text: str, columns: dict[str, Column], n: int = 3) -> list[str]:
    """The valid names closest to `text`, best first: a focus word it nearly spells (`los` → loss),
    then key paths."""
    names = [*FOCUS_WORDS, *sorted(c.name for c in columns.values())]
    close = difflib.get_close_matches(text, FOCUS_WORDS, n=n, cutoff=0.75)
    close += [name for name in difflib.get_close_matches(text, names, n=n, cutoff=0.6) if name not in close]
    if len(close) < n:  # a misspelt last part: the names under the same first part
        head = text.split(".")[0]
        close += [name for name in difflib.get_close_matches(text, names, n=n, cutoff=0.4) if name not in close]
        close += [name for name in names if name.startswith(head + ".") and name not in close]
    return close[:n]


def refusal(text: str, columns: dict[str, Column], named: bool = True) -> str:
    """Why `text` is no focus, naming the nearest valid names (`named`: the text first; a sweep
    file's problem line quotes the input itself)."""
    near = nearest(text, columns)
    hint = f" (nearest: {', '.join(near)})" if near else ""
    return (f"{f'{text[:80]!r} is ' if named else ''}neither a focus word ({', '.join(FOCUS_WORDS)}) nor a numeric "
            f"column of the runs table{hint}; a column is named by its summary key path, e.g. latency_ms.max")


def check_name(text: str) -> str:
    """A sweep file's focus, checked before the sweep runs (module docstring): returned as given,
    or FocusError naming the nearest valid names."""
    if text in FOCUS_WORDS:
        return text
    columns = {**fixed_columns(), **coverage_columns()}
    if find(text, columns) is not None:
        return text
    prefix = next((p for p in MAP_PREFIXES if flat(text).startswith(p) and not p.startswith("coverage")
                   and len(flat(text)) > len(p)), None)
    if prefix is not None:
        return text  # a key only the runs know (a topic, a group): the report checks it against the table
    raise FocusError(refusal(text, columns, named=False))
