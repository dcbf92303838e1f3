"""The question a sweep report answers first: its focus metric, declared or inferred.

A sweep file may name it (`report: {focus: loss | duplicates | latency | order | transactions}`,
analysis/sweeps/spec.py). Without it the report infers it from what varies:

- a correctness metric (loss, transaction violations, order violations, duplicates) is a
  candidate when it is not zero in every run and not the same in every run;
- among candidates, the one whose pooled rate spreads most across the points, relative to its
  largest value ((max − min) / max: 1 when it is zero at some points and not at others) wins;
  with a single point, the spread across runs (seeds) is used instead; ties go to the more
  severe metric, in that order;
- with no candidate, latency (its p99 across points) is the focus: nothing else moved.

Latency always varies a little, so it is the focus only by declaration or when no correctness
metric varies: a sweep whose duplicates move is asked about duplicates, not about the noise in
its p99. The report says which focus it took and why, and how to declare one.

Besides the focus, `Focus` lists the other correctness metrics that are non-zero somewhere (drawn
after it), those that are zero in every run (one line, never drawn) and those no run checked
(order without an orderly group, transactions without a transactional producer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from analysis.reports import fmt
from analysis.sweeps import aggregate
from analysis.sweeps.aggregate import METRICS, SweepData

SEVERITY = ("loss", "transactions", "order", "duplicates")  # tie-break, most severe first
LABELS = {"loss": "loss", "duplicates": "duplicates", "order": "order violations",
          "transactions": "transaction violations", "latency": "latency"}


@dataclass
class Focus:
    name: str  # a key of METRICS, or "latency"
    declared: bool
    reason: str  # one sentence for the page
    varying: list[str] = field(default_factory=list)  # other correctness metrics non-zero somewhere, by severity
    zero: list[str] = field(default_factory=list)  # measured, and zero in every run
    unchecked: dict[str, str] = field(default_factory=dict)  # metric → why no run measured it


def spread(values: list[float | None]) -> float:
    """(max − min) / max of the measured values; 0 when none is above 0."""
    seen = [v for v in values if v is not None and not math.isnan(v)]
    if not seen or max(seen) <= 0:
        return 0.0
    return (max(seen) - min(seen)) / max(seen)


def choose(data: SweepData, stats: list[dict[str, Any]], declared: str | None, how: str = "") -> Focus:
    """The focus (declared, else inferred: module docstring) and the other metrics' standing;
    `how` says where a declared focus comes from."""
    per_run = {name: aggregate.run_rates(data, m).dropna() for name, m in METRICS.items()}
    unchecked = {name: m.unchecked or "no completed run" for name, m in METRICS.items() if per_run[name].empty}
    zero = [name for name in SEVERITY if name not in unchecked and per_run[name].max() == 0]
    nonzero = [name for name in SEVERITY if name not in unchecked and name not in zero]
    if declared is not None:
        reason = how or f"declared in the sweep file (report: {{focus: {declared}}})"
        return Focus(declared, True, reason, [n for n in nonzero if n != declared], zero, unchecked)
    points = len(stats) >= 2
    scores = {}
    for name in nonzero:
        if per_run[name].min() == per_run[name].max():
            continue  # the same in every run: nothing to ask of the parameters
        scores[name] = spread([s[name]["mean"] for s in stats]) if points else spread(per_run[name].tolist())
    if scores:
        name = max(scores, key=lambda n: (scores[n], -SEVERITY.index(n)))
        reason = _inferred_reason(name, scores, stats, per_run, points)
    else:
        name = "latency"
        quiet = ", ".join(LABELS[n] for n in SEVERITY if n not in unchecked) or "no correctness metric"
        p99 = [s["latency_ms"].get("p99") for s in stats]
        reason = (f"inferred: {quiet} {'does' if ',' not in quiet else 'do'} not vary across runs, so the "
                  f"latency is the question (p99 {_range(p99, fmt.duration_ms)} across points)")
    return Focus(name, False, reason, [n for n in nonzero if n != name], zero, unchecked)


def _inferred_reason(name: str, scores: dict[str, float], stats: list[dict[str, Any]],
                     per_run: dict[str, Any], points: bool) -> str:
    def span(metric: str) -> str:
        values = [s[metric]["mean"] for s in stats] if points else per_run[metric].tolist()
        return _range(values, fmt.rate)

    where = "across points" if points else "across runs (one point)"
    verb = "varies" if name in ("loss", "latency") else "vary"
    text = (f"inferred: {LABELS[name]} {verb} most {where} ({span(name)} of "
            f"{METRICS[name].of}, relative spread {scores[name]:.0%})")
    others = [f"{LABELS[n]} {span(n)} ({scores[n]:.0%})" for n in SEVERITY if n in scores and n != name]
    return text + (f"; also varying: {', '.join(others)}" if others else "")


def _range(values: list[Any], show: Any) -> str:
    seen = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not seen:
        return fmt.NA
    lo, hi = min(seen), max(seen)
    return show(lo) if lo == hi else f"{show(lo)} to {show(hi)}"


def zero_line(focus: Focus) -> str:
    """`zero in every run: duplicates, order violations` (empty if none)."""
    return f"zero in every run: {', '.join(LABELS[n] for n in focus.zero)}" if focus.zero else ""


def unchecked_line(focus: Focus) -> str:
    """`not checked in any run: order violations (no orderly consumer group), ...` (empty if none)."""
    if not focus.unchecked:
        return ""
    return "not checked in any run: " + ", ".join(f"{LABELS[n]} ({why})" for n, why in focus.unchecked.items())
