"""`rmqsim explain RUN_DIR --fault K`: what fault K did, and every finding of the run attributed.

Faults are the summary's `faults_applied` (analysis/checkers/faults_applied.py): index K, kind, target,
actual start and end. Every lost message, duplicate delivery and order violation of the run
(analysis/checkers/message_causes.py) is attributed to one fault or to "no fault", so that the counts of
all faults and "no fault" add up to the summary's. A finding's mechanism has a time and often a
node (analysis/explain/reasons.py `event_us`, `node`: the copy a power loss destroyed, the
consumer whose crash ended its ownership, the crash before the broker restarted with older
offsets or read a timer slot again, the election before a rejoining replica's truncation, the
first reuse of an offset, the overtaking message's send for a `send_side` violation, ...). It
goes to the fault whose window holds that time — from its start to the latest of its end, its
target's restart after it (a node it took down is back) and the moment the cluster was back to
normal (the run's end if it never was) — preferring a fault on that node or its broker group (a
broker group's nodes stand for each other), then the latest to start; a finding without a time,
or outside every window, is "no fault".

Back to normal is the summary's (analysis/checkers/availability.py: the same numbers the summary
prints): the fault's `back_ms`, the latest of every topic's write outage end (sends succeed again)
and every consumer group's recovery (its topic writable again and its last late message consumed),
null when a topic or group never came back; the `why` lines are the summary's too. Beside them,
from the trace: when every queue that lost its owner in the fault's stretch had one again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import models.records as rec
from analysis.explain.reasons import Verdict, duplicate_verdict, lost_verdict, violation_verdict
from analysis.explain.source import ExplainError
from sim import trace

NO_FAULT = "no fault"


@dataclass
class Window:
    index: int
    kind: str
    target: str
    start_us: int
    end_us: int  # its effect's end (the run's end if it never ended)
    back_us: int | None = None  # back to normal (None: not by the end of the run)
    recovery: dict[str, int | None] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)  # the summary's why lines (analysis/checkers/availability.py)
    restart_us: int | None = None  # its target's restart after it ended (a node it took down: up again)
    run_end_us: int = 0  # the run's end: the window of a fault the cluster never recovered from

    @property
    def until_us(self) -> int:
        """The end of its window: the latest of its end, its target's restart and back to normal
        (the run's end when the cluster was not back by then)."""
        back = self.back_us if self.back_us is not None else max(self.run_end_us, self.end_us)
        return max(self.end_us, back, self.restart_us or 0)

    def title(self) -> str:
        return f"fault {self.index}: {self.kind} of {self.target}"


def windows(f: Any) -> list[Window]:
    """The run's faults with their recovery (module docstring)."""
    applied = f.run.summary.get("faults_applied")
    availability = f.run.summary.get("availability")
    if applied is None or availability is None:  # explain_fault refuses such a summary first
        raise ExplainError("this run's summary was written by an older rmqsim (no faults_applied or availability): "
                           "re-run it")
    end_us = f.run.summary["sim_time_ms"] * 1000
    by_index = {a["index"]: a for a in availability["faults"]}
    out = [Window(a["index"], a["kind"], a["target"], round(a["start_ms"] * 1000),
                  round(a["end_ms"] * 1000) if a["end_ms"] is not None else end_us, run_end_us=end_us)
           for a in applied]
    phase_end = round(f.run.scenario.duration_ms * 1000)
    starts = sorted(w.start_us for w in out)
    for w in out:
        horizon = min([s for s in starts if s > w.start_us] + [max(phase_end, w.end_us)])
        summary_fault = by_index.get(w.index)
        if summary_fault is None:
            raise ExplainError(f"this run's summary has no availability entry for fault {w.index}: re-run it")
        w.recovery = recovery(f, w, horizon, summary_fault)
        w.why = list(summary_fault["why"])
        back = summary_fault["back_ms"]
        w.back_us = None if back is None else round(back * 1000)
        w.restart_us = next((r[0] for r in f.collector.rare if r[2] == trace.NODE_RESTARTED and r[1] == w.target
                             and r[0] >= w.end_us), None)
    return out


def recovery(f: Any, w: Window, horizon_us: int, summary_fault: dict[str, Any]) -> dict[str, int | None]:
    """When sends succeeded again and every group was back (the summary's), and when every
    queue was owned again (the trace's)."""
    topics = [t for t in summary_fault["topics"].values() if t["from_ms"] is not None]
    sends = None if any(not t["recovered"] for t in summary_fault["topics"].values()) else \
        max([w.start_us] + [round(t["until_ms"] * 1000) for t in topics if t["until_ms"] is not None])
    groups = [g["recovered_ms"] for g in summary_fault["groups"].values()]
    back = None if None in groups else max([w.start_us] + [round(ms * 1000) for ms in groups])
    return {"sends_succeed_us": sends, "groups_back_us": back, "queues_owned_us": _owned(f, w.start_us, horizon_us)}


def _owned(f: Any, start: int, horizon: int) -> int | None:
    """When the last queue that lost its owner in [start, horizon) had one again."""
    owners: dict[tuple, set[str]] = {}
    node_queues: dict[str, set[tuple]] = {}
    lost_at: dict[tuple, int] = {}
    back = start
    for r in sorted(f.collector.rare, key=lambda r: r[0]):
        t, node, kind = r[0], r[1], r[2]
        if kind == rec.CONSUMER_QUEUE_STARTED:
            key = (r[3], r[4], r[5], r[6])
            if not owners.get(key) and key in lost_at:
                if start <= lost_at.pop(key) < horizon:
                    back = max(back, t)
            owners.setdefault(key, set()).add(node)
            node_queues.setdefault(node, set()).add(key)
        elif kind == rec.CONSUMER_QUEUE_DROPPED:
            _release(owners, lost_at, (r[3], r[4], r[5], r[6]), node, t)
        elif kind in (trace.NODE_CRASHED, rec.CONSUMER_SHUTDOWN):
            for key in sorted(node_queues.pop(node, ())):
                _release(owners, lost_at, key, node, t)
    if any(start <= t < horizon for t in lost_at.values()):
        return None  # a queue lost its owner then and never had one again
    return back


def _release(owners: dict, lost_at: dict, key: tuple, node: str, t: int) -> None:
    holders = owners.get(key, set())
    if node in holders:
        holders.discard(node)
        if not holders:
            lost_at[key] = t


def findings(f: Any) -> list[Verdict]:
    """Every lost message (per unit), duplicate delivery and order violation of the run."""
    out = [lost_verdict(f, unit, msg_id, cause) for unit, lost in sorted(f.causes.lost.items())
           for msg_id, cause in lost.items()]
    out += [duplicate_verdict(f, d) for d in f.causes.duplicates]
    out += [violation_verdict(f, v) for v in f.causes.violations]
    return out


def attribute(v: Verdict, faults: list[Window], broker_of: dict[str, str]) -> int | None:
    """The index of the fault a finding is attributed to, None for no fault (module docstring)."""
    if v.event_us is None:
        return None
    holding = [w for w in faults if w.start_us <= v.event_us <= w.until_us]
    if not holding:
        return None
    if v.node is not None:
        where = broker_of.get(v.node, v.node)  # a broker node stands for its group, the group for itself
        mine = [w for w in holding if broker_of.get(w.target, w.target) == where]
        holding = mine or holding
    return max(holding, key=lambda w: (w.start_us, w.index)).index


def attribution(f: Any) -> tuple[list[Window], dict[Any, dict[str, Counter]], list[tuple[Verdict, Any]]]:
    """(faults, counts by fault index or NO_FAULT → {lost, duplicates, order_violations} → cause
    counts, each finding with its attribution)."""
    faults = windows(f)
    counts: dict[Any, dict[str, Counter]] = {w.index: _empty() for w in faults} | {NO_FAULT: _empty()}
    attributed = []
    for v in findings(f):
        index = attribute(v, faults, f.collector.broker_of)
        owner = NO_FAULT if index is None else index
        counts[owner][{"lost": "lost", "duplicate": "duplicates"}.get(v.verdict, "order_violations")][v.cause] += 1
        attributed.append((v, owner))
    return faults, counts, attributed


def _empty() -> dict[str, Counter]:
    return {"lost": Counter(), "duplicates": Counter(), "order_violations": Counter()}
