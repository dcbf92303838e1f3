"""The question a sweep report answers first: its focus metric, declared or inferred.

A sweep file may name it (`report: {focus: METRIC}`, analysis/sweeps/spec.py; `rmqsim report
--focus METRIC` overrides it): one of the five words — `loss`, `duplicates`, `order`,
`transactions` (a correctness rate), `latency` (the merged percentiles) — or any numeric column
of the runs table by its summary key path (`latency_ms.max`, `availability.write_outage_s.max`,
`availability.recovery_s.max`, `duplicates_by_cause.invisible_time_expired`: analysis/sweeps/columns.py,
which gives its label and unit). A name that is neither is refused with the nearest valid names.

Without a declared focus the report infers it from what varies across the points:

- a correctness metric (loss, transaction violations, order violations, duplicates) is a
  candidate when it is not zero in every run and not the same in every run; its score is how
  much its pooled rate spreads across the points relative to its largest value ((max − min) /
  max: 1 when it is zero at some points and not at others); with a single point, the spread
  across runs (seeds);
- a tail or availability metric (`TAIL_METRICS`: the max and p99.9 latency, the longest write
  outage, recovery time and read outage of a run) is a candidate when the sweep has at least
  two points, the runs' mean at each point spreads by at least `MIN_TAIL_SPREAD` (20 %) of the
  largest, and the points' means lie further apart than twice the runs' typical spread within a
  point (the median of the points' standard deviations): a tail always moves a little from seed
  to seed, and that noise is not the question;
- the candidate with the largest score wins; scores within `TIE_SPREAD` (5 points) of it tie,
  and a tie goes to the question asked first (`ORDER`: loss, transactions, order, the write
  outage, the max latency, the recovery time, the read outage, duplicates, p99.9) — a consumer's
  crash moves the max latency, the recovery time and the read outage alike, and the max latency
  is the one every run has;
- with no candidate, latency (its p99 across points) is the focus: nothing else moved.

So a sweep of a POP consumer's invisible time, whose duplicates are zero and whose p99 is flat,
opens with the max latency, which grows with the invisible time (a message held by a crashed
consumer comes back when it ends). The report says which focus it took and why, and how to
declare one.

Besides the focus, `Focus` lists the other correctness metrics that are non-zero somewhere (drawn
after it), those that are zero in every run (one line, never drawn) and those no run checked
(order without an orderly group, transactions without a transactional producer).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.reports import fmt
from analysis.sweeps import aggregate
from analysis.sweeps.aggregate import METRICS, SweepData
from analysis.sweeps.columns import FOCUS_WORDS, TAIL_METRICS, Column, FocusError, find, refusal

SEVERITY = ("loss", "transactions", "order", "duplicates")  # correctness metrics, most severe first
# ties (scores within TIE_SPREAD of the best): the question a user asks first goes first
ORDER = ("loss", "transactions", "order", "availability.write_outage_s.max", "latency_ms.max",
         "availability.recovery_s.max", "availability.read_outage_s.max", "duplicates", "latency_ms.p999")
TIE_SPREAD = 0.05  # relative spreads this close do not tell which metric varies more
LABELS = {"loss": "loss", "duplicates": "duplicates", "order": "order violations",
          "transactions": "transaction violations", "latency": "latency"}
MIN_TAIL_SPREAD = 0.2  # a tail or availability metric's spread across points, relative to its largest
NOISE_FACTOR = 2.0  # its points' means must lie further apart than this × the runs' spread within a point

__all__ = ["FocusError", "Focus", "choose", "show", "zero_line", "unchecked_line"]


@dataclass
class Focus:
    name: str  # a key of METRICS, "latency", or a runs-table column's key path
    declared: bool
    reason: str  # one sentence for the page
    varying: list[str] = field(default_factory=list)  # other correctness metrics non-zero somewhere, by severity
    zero: list[str] = field(default_factory=list)  # measured, and zero in every run
    unchecked: dict[str, str] = field(default_factory=dict)  # metric → why no run measured it
    column: Column | None = None  # the runs-table column, when the focus is one

    @property
    def kind(self) -> str:
        """`rate` (a METRICS rate), `latency` (the merged percentiles) or `column`."""
        if self.column is not None:
            return "column"
        return "rate" if self.name in METRICS else "latency"

    @property
    def label(self) -> str:
        return self.column.label if self.column is not None else LABELS[self.name]


def show(column: Column, value: Any) -> str:
    """A value of `column` for people, in its unit: `74.4 s`, `850 µs`, `1.23 %`, `12,345`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return fmt.NA
    if column.unit == "ms":
        return fmt.duration_ms(value)
    if column.unit == "s":
        return fmt.duration_ms(value * 1000)
    if column.unit == "µs":
        return fmt.duration_ms(value / 1000)
    if column.unit == "fraction":
        return fmt.rate(value)
    return fmt.number(value)


def spread(values: Sequence[float | None]) -> float:
    """(max − min) / max of the measured values; 0 when none is above 0."""
    seen = [v for v in values if v is not None and not math.isnan(v)]
    if not seen or max(seen) <= 0:
        return 0.0
    return (max(seen) - min(seen)) / max(seen)


def choose(data: SweepData, stats: list[dict[str, Any]], declared: str | None, how: str = "",
           columns: dict[str, Column] | None = None) -> Focus:
    """The focus (declared, else inferred: module docstring) and the other metrics' standing;
    `how` says where a declared focus comes from; `columns`: the runs table's numeric columns
    (analysis/sweeps/columns.py `table_columns`), for a declared column and the tail candidates.
    A declared name that is no focus: FocusError naming the nearest."""
    columns = columns or {}
    per_run = {name: aggregate.run_rates(data, m).dropna() for name, m in METRICS.items()}
    unchecked = {name: m.unchecked or "no completed run" for name, m in METRICS.items() if per_run[name].empty}
    zero = [name for name in SEVERITY if name not in unchecked and per_run[name].max() == 0]
    nonzero = [name for name in SEVERITY if name not in unchecked and name not in zero]
    if declared is not None:
        reason = how or f"declared in the sweep file (report: {{focus: {declared}}})"
        column = None if declared in FOCUS_WORDS else find(declared, columns)
        if declared not in FOCUS_WORDS and column is None:
            raise FocusError(refusal(declared, columns))
        return Focus(declared if column is None else column.name, True, reason,
                     [n for n in nonzero if n != declared], zero, unchecked, column)
    points = len(stats) >= 2
    scores: dict[str, float] = {}
    for name in nonzero:
        if per_run[name].min() == per_run[name].max():
            continue  # the same in every run: nothing to ask of the parameters
        scores[name] = spread([s[name]["mean"] for s in stats]) if points else spread(per_run[name].tolist())
    tails = _tail_candidates(data, columns) if points else {}
    scores.update({name: score for name, (score, _c, _m, _n) in tails.items()})
    if not scores:
        return _latency_focus(stats, nonzero, zero, unchecked)
    best = max(scores.values())
    name = min((n for n in scores if scores[n] >= best - TIE_SPREAD), key=ORDER.index)
    if name in tails:
        score, column, means, noise = tails[name]
        reason = _tail_reason(column, score, means, noise, scores)
        return Focus(column.name, False, reason, nonzero, zero, unchecked, column)
    reason = _inferred_reason(name, scores, stats, per_run, points, tails)
    return Focus(name, False, reason, [n for n in nonzero if n != name], zero, unchecked)


def _latency_focus(stats: list[dict[str, Any]], nonzero: list[str], zero: list[str],
                   unchecked: dict[str, str]) -> Focus:
    quiet = ", ".join(LABELS[n] for n in SEVERITY if n not in unchecked) or "no correctness metric"
    p99 = [s["latency_ms"].get("p99") for s in stats]
    reason = (f"inferred: {quiet} {'does' if ',' not in quiet else 'do'} not vary across runs, nor does a tail or "
              f"availability metric across points, so the latency is the question (p99 {_range(p99, fmt.duration_ms)} "
              "across points)")
    return Focus("latency", False, reason, list(nonzero), zero, unchecked)


def point_values(data: SweepData, column: str) -> list[list[float]]:
    """Each point's runs' values of a column (ok runs with a value), by point."""
    ok = data.ok
    if column not in ok.columns:
        return []
    out = []
    for _point, group in ok.groupby("point", sort=True):
        values = pd.to_numeric(group[column], errors="coerce").dropna().tolist()
        if values:
            out.append([float(v) for v in values])
    return out


def _tail_candidates(data: SweepData, columns: dict[str, Column]) -> dict[str, tuple[float, Column, list[float], float]]:
    """name → (score, column, the points' means, the runs' spread within a point) of each tail or
    availability metric that varies with the parameters (module docstring)."""
    out = {}
    for name in TAIL_METRICS:
        column = find(name, columns)
        if column is None:
            continue
        by_point = point_values(data, column.column)
        if len(by_point) < 2:
            continue
        means = [statistics.fmean(v) for v in by_point]
        spreads = [statistics.stdev(v) for v in by_point if len(v) >= 2]
        noise = statistics.median(spreads) if spreads else 0.0
        score = spread(means)
        if score >= MIN_TAIL_SPREAD and max(means) - min(means) > NOISE_FACTOR * noise:
            out[name] = (score, column, means, noise)
    return out


def _tail_reason(column: Column, score: float, means: list[float], noise: float, scores: dict[str, float]) -> str:
    text = (f"inferred: {column.label} varies most across points (the runs' mean {_range(means, lambda v: show(column, v))}, "
            f"relative spread {score:.0%}; within a point the runs differ by about {show(column, noise)})")
    others = [f"{LABELS.get(n, n)} ({scores[n]:.0%})" for n in ORDER if n in scores and n != column.name]
    return text + (f"; also varying: {', '.join(others)}" if others else "; nothing else varies")


def _inferred_reason(name: str, scores: dict[str, float], stats: list[dict[str, Any]],
                     per_run: dict[str, Any], points: bool, tails: dict[str, Any]) -> str:
    def span(metric: str) -> str:
        values = [s[metric]["mean"] for s in stats] if points else per_run[metric].tolist()
        return _range(values, fmt.rate)

    where = "across points" if points else "across runs (one point)"
    verb = "varies" if name in ("loss", "latency") else "vary"
    text = (f"inferred: {LABELS[name]} {verb} most {where} ({span(name)} of "
            f"{METRICS[name].of}, relative spread {scores[name]:.0%})")
    others = [f"{LABELS[n]} {span(n)} ({scores[n]:.0%})" for n in SEVERITY if n in scores and n != name]
    others += [f"{tails[n][1].name} ({scores[n]:.0%})" for n in ORDER if n in tails]
    return text + (f"; also varying: {', '.join(others)}" if others else "")


def _range(values: list[Any], show_value: Any) -> str:
    seen = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not seen:
        return fmt.NA
    lo, hi = min(seen), max(seen)
    return show_value(lo) if lo == hi else f"{show_value(lo)} to {show_value(hi)}"


def zero_line(focus: Focus) -> str:
    """`zero in every run: duplicates, order violations` (empty if none)."""
    return f"zero in every run: {', '.join(LABELS[n] for n in focus.zero)}" if focus.zero else ""


def unchecked_line(focus: Focus) -> str:
    """`not checked in any run: order violations (no orderly consumer group), ...` (empty if none)."""
    if not focus.unchecked:
        return ""
    return "not checked in any run: " + ", ".join(f"{LABELS[n]} ({why})" for n, why in focus.unchecked.items())
