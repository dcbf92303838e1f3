"""The data of the per-run report's availability figure (`availability.png`,
analysis/reports/availability_figures.py): how long producers could not write, as they saw it, and
how long until each consumer group was back.

- Per topic, the sends per second of their outcome (the record's time): `SEND_OK`
  (`producer.sent`), stored with another status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
  SLAVE_NOT_AVAILABLE: `producer.sent`; ONEWAY sends have no outcome and are left out), and failed
  (`producer.send_failed`), all read off the trace.
- Per topic and fault, the write outage as clients saw it: the summary's
  `availability.faults[k].topics[topic]` (`from_ms`, `until_ms`, `write_outage_s`; an outage that
  never ended runs to the run's end), analysis/checkers/availability.py's numbers.
- Per consumption unit (the summary's `groups` keys), the lag: `groups[unit].lag_by_second` (stored,
  not yet consumed, at each second's end; a series cut to its points, each the maximum over an
  equal span of seconds), or, from a summary without it, the trace's backlog per group
  (analysis/reports/run_data.py `backlog_by_group`); and per fault the recovery:
  `availability.faults[k].groups[unit]` (`recovered_ms`, `recovery_s`, null: never).

A summary written before the `availability` section existed has no outages or recoveries:
`Availability.section` is False and the figure says so instead of shading anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.reports import run_data as rd
from analysis.reports import timeline_data as td

SEND_OK, ONEWAY = "SEND_OK", "ONEWAY"


@dataclass(frozen=True)
class Outage:
    """One topic's write outage after one fault (the summary's numbers)."""

    fault: int  # index into faults_applied
    what: str  # "power_loss broker-a"
    from_s: float
    until_s: float | None  # None: never recovered (runs to the run's end)
    outage_s: float


@dataclass(frozen=True)
class Recovery:
    """One consumption unit's recovery from one fault (the summary's numbers)."""

    fault: int
    what: str
    start_s: float  # the fault's start
    recovered_s: float | None  # None: never recovered
    recovery_s: float | None


@dataclass
class TopicSends:
    ok: np.ndarray  # SEND_OK per second of the outcome
    not_ok: np.ndarray  # stored, another status
    failed: np.ndarray  # producer.send_failed
    outages: list[Outage] = field(default_factory=list)


@dataclass
class GroupLag:
    x: np.ndarray  # the end of each point, simulated s
    lag: np.ndarray  # messages stored, not yet consumed
    from_summary: bool  # groups[unit].lag_by_second (else the trace's backlog)
    recoveries: list[Recovery] = field(default_factory=list)


@dataclass
class Availability:
    topics: dict[str, TopicSends]
    groups: dict[str, GroupLag]
    section: bool  # the summary has an `availability` section
    faults: int  # faults in that section


def availability(data: rd.RunData) -> Availability | None:
    """The figure's data (module docstring); None when nothing was sent and no group consumed."""
    section = data.summary.get("availability")
    faults = section.get("faults", []) if isinstance(section, dict) else []
    topics = topic_sends(data)
    for topic, outages in _outages(faults).items():
        if topic in topics:
            topics[topic].outages = outages
    groups = group_lag(data)
    for unit, recoveries in _recoveries(faults).items():
        if unit in groups:
            groups[unit].recoveries = recoveries
    if not topics and not groups:
        return None
    return Availability(topics, groups, isinstance(section, dict), len(faults))


def topic_sends(data: rd.RunData) -> dict[str, TopicSends]:
    """topic → its sends per second by outcome (module docstring), topics in natural order."""
    sent = td.read_columns(data, rd.PRODUCER_SENT, ("t_us", "topic", "status"))
    failed = td.read_columns(data, rd.PRODUCER_SEND_FAILED, ("t_us", "topic"))
    names = set(sent["topic"].tolist() if sent else []) | set(failed["topic"].tolist() if failed else [])
    empty = np.zeros(0, np.int64)
    out = {}
    for topic in sorted(names, key=td.natural):
        mine = sent["topic"] == topic if sent else np.zeros(0, bool)
        ok = mine & (sent["status"] == SEND_OK) if sent else mine
        other = mine & (sent["status"] != SEND_OK) & (sent["status"] != ONEWAY) if sent else mine
        out[str(topic)] = TopicSends(
            rd.per_second(sent["t_us"][ok] if sent else empty, data.end_s),
            rd.per_second(sent["t_us"][other] if sent else empty, data.end_s),
            rd.per_second(failed["t_us"][failed["topic"] == topic] if failed else empty, data.end_s))
    return out


def group_lag(data: rd.RunData) -> dict[str, GroupLag]:
    """unit → its lag over time: the summary's `lag_by_second`, else the trace's backlog per group."""
    groups = data.summary.get("groups") or {}
    series = {u: g["lag_by_second"] for u, g in groups.items() if isinstance(g.get("lag_by_second"), list)}
    if series:
        seconds = max(1, math.ceil(data.summary["sim_time_ms"] / 1000))
        out = {}
        for unit, lag in sorted(series.items(), key=lambda e: td.natural(e[0])):
            span = max(1, math.ceil(seconds / len(lag))) if lag else 1
            out[unit] = GroupLag((np.arange(len(lag)) + 1.0) * span, np.asarray(lag, float), True)
        return out
    return {g: GroupLag(np.arange(len(v)) + 1.0, v.astype(float), False)
            for g, v in sorted(rd.backlog_by_group(data).items(), key=lambda e: td.natural(e[0]))}


def _what(fault: dict[str, Any]) -> str:
    return f"{fault['kind']} {fault['target']}"


def _outages(faults: list[dict[str, Any]]) -> dict[str, list[Outage]]:
    """topic → its write outages, one per fault that had one (a topic without a failed send after the
    fault has `from_ms` null: no outage)."""
    out: dict[str, list[Outage]] = {}
    for f in faults:
        for topic, t in (f.get("topics") or {}).items():
            if t.get("from_ms") is None:
                continue
            never = t.get("recovered") is False or t.get("until_ms") is None
            out.setdefault(topic, []).append(Outage(f["index"], _what(f), t["from_ms"] / 1000,
                                                    None if never else t["until_ms"] / 1000,
                                                    float(t.get("write_outage_s") or 0.0)))
    return out


def _recoveries(faults: list[dict[str, Any]]) -> dict[str, list[Recovery]]:
    out: dict[str, list[Recovery]] = {}
    for f in faults:
        for unit, g in (f.get("groups") or {}).items():
            at = g.get("recovered_ms")
            out.setdefault(unit, []).append(Recovery(f["index"], _what(f), f["start_ms"] / 1000,
                                                     None if at is None else at / 1000, g.get("recovery_s")))
    return out


def failed_in(sends: TopicSends, start_s: float, end_s: float) -> int:
    """Failed or not-SEND_OK sends with an outcome in the seconds [start_s, end_s)."""
    lo, hi = max(0, int(math.floor(start_s))), max(0, int(math.ceil(end_s)))
    return int(sends.failed[lo:hi].sum() + sends.not_ok[lo:hi].sum())
