"""Availability and recovery as clients see them: how long producers could not write, how long a
stored message waited, and when each consumer group was back — per fault and for the whole run,
from the simulator's ground truth, with the mechanism behind each end (the summary's
`availability` section; docs/availability.md).

**Write outage** (per topic). An outage episode starts at the send() call (`born_us`) of a send
to the topic whose result was not SEND_OK (it failed, or the broker answered another status:
analysis/checkers/send_failures.py; ONEWAY sends know no result and do not count) and ends at the
result of the first send issued after it — by any producer of the topic — that returned SEND_OK
(for each producer, its first such send numbered after the failed one: sends are numbered in
send() call order, models/message.py; the earliest result among the producers). Episodes that
overlap merge. A topic's outage for a fault is its longest episode starting inside the fault's
window [fault start, horizon) — the horizon is the next fault's start, or the run's end for the
last; an episode in flight when the fault began (its failed send called just before) is the
fault's too. An episode with no later SEND_OK is *open* (`recovered` false, `until_ms` null, its
length to the run's end) when the producers went on calling send() for more than their send
timeout after it began; otherwise it ended with the producers' last sends (they stopped) and
says nothing either way: its length is to its last failed result, and it is not "not recovered". The whole run's
`write_outage_s.by_topic` is each topic's longest episode, whether or not a fault caused it.
Beside it, `broker_groups` gives the broker's view (`unwritable_s` inside the window,
analysis/checkers/failover_checker.py) and the failed sends whose last attempt went to the group.

**Read outage and recovery** (per consumption unit: a group, or a BROADCASTING member). For a
fault, over the unit's messages stored before the horizon and first consumed at or after the
fault's start:
- `read_outage_s`: the longest time one of them waited unconsumed from the fault's start on
  (first consumption − the later of its store and the fault's start);
- the *normal wait* is the longest store → first-consumption wait of the messages first consumed
  in the `PRE_FAULT_US` (5 s) before the fault, and at least `NORMAL_WAIT_FLOOR_US` (1 s: shorter
  stalls are not told apart from queueing); a message that waited longer is *late*;
- the unit is back (`recovered_ms`) at the latest of: the end of its topic's write outages that
  started in the window, and the first consumption of the last late message; never (null) when
  a write outage never ended or a message stored before the horizon was neither consumed, lost
  nor in the retry path or the DLQ when the run ended (`waiting`). `recovery_s` is from the fault's
  start to then.
A message counted lost is no backlog (it will never be consumed): the lag series leave it out
(analysis/checkers/consumer_metrics.py).

**Why**: one line per mechanism inside the window, from the rare records the witness kept
(analysis/checkers/availability_witness.py): elections and role changes, crashes and restarts,
a NameServer dropping a broker, the route update after which a topic's sends succeeded again,
the last late message of each unit and the last failed pull before it.

Simplified: a send's result time is its record's time (the producer's callback); a unit's late
messages are summarised by their Pareto frontier (wait, first consumption), which answers
"the last late message" for any normal wait exactly, in memory by the frontier's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.checkers.availability_witness import AvailabilityWitness
from analysis.checkers.ledger_codes import ACKED, SEQ_BITS, display_key
from models.records import (
    BROKER_ROLE,
    CONSUMER_PULL_FAILED,
    CONTROLLER_ELECTED,
    NAMESRV_BROKER_UNREGISTERED,
    PRODUCER_ROUTE_UPDATED,
)
from sim.trace import NODE_CRASHED, NODE_RESTARTED

PRE_FAULT_US = 5_000_000
NORMAL_WAIT_FLOOR_US = 1_000_000
NEVER = np.iinfo(np.int64).max  # an episode with no later SEND_OK
DEFAULT_SEND_TIMEOUT_US = 3_000_000  # DefaultMQProducer sendMsgTimeout
MAX_WHY = 12  # why lines per fault


def ms(us: int | float) -> float:
    return round(us / 1000, 3)


def seconds(us: int | float) -> float:
    return round(us / 1_000_000, 3)


# --- windows --------------------------------------------------------------------------------
def fault_windows_us(faults: list[dict[str, Any]], end_us: int) -> list[tuple[int, int]]:
    """[start, horizon) of each applied fault (summary `faults_applied`, in index order): the
    horizon is the next later fault's start, or `end_us`."""
    starts = sorted({round(f["start_ms"] * 1000) for f in faults})
    out = []
    for f in faults:
        start = round(f["start_ms"] * 1000)
        later = [s for s in starts if s > start]
        out.append((start, min(later[0], end_us) if later else end_us))
    return out


# --- write outages --------------------------------------------------------------------------
@dataclass
class Episodes:
    """One topic's write outage episodes (module docstring), and its failed sends."""

    start_us: np.ndarray  # int64, sorted
    end_us: np.ndarray  # int64, NEVER = no later SEND_OK
    end_key: list[str]  # the send whose SEND_OK ended each episode ("" when none)
    fail_t_us: np.ndarray  # every failed or not-OK send of the topic: its result's time
    fail_reason: np.ndarray  # its reason index (SendFailures.reason_names)
    fail_broker: np.ndarray  # its last attempt's broker index (SendFailures.broker_names)
    last_fail_us: np.ndarray  # per episode: its last failed send's result
    open_: np.ndarray  # per episode: no later SEND_OK although the producers went on sending (`write_episodes`)
    window: np.ndarray | None = None  # each episode's fault window index, -1 for none (`assign`)

    def assign(self, windows_us: list[tuple[int, int]]) -> None:
        """Each episode goes to the window holding its start; one that began before the first fault
        and was still running at its start (a send in flight when the fault hit) goes to the first."""
        self.window = np.full(len(self.start_us), -1, np.int64)
        for k, (start, horizon) in enumerate(windows_us):
            self.window[(self.start_us >= start) & (self.start_us < horizon)] = k
        if windows_us:
            first = min(start for start, _h in windows_us)
            early = (self.start_us < first) & (self.end_us > first)
            self.window[early] = min(k for k, (start, _h) in enumerate(windows_us) if start == first)

    def rows(self, k: int | None) -> np.ndarray:
        """The episodes of window k (every episode for None)."""
        if k is None or self.window is None:
            return np.arange(len(self.start_us))
        return np.flatnonzero(self.window == k)


def write_episodes(ledger: Any, grace_us: dict[str, int] | None = None) -> dict[str, Episodes]:
    """Each topic with a failed or not-OK send: its episodes (module docstring). An episode with no
    later SEND_OK is *open* (not recovered) when the topic's producers went on calling send() for
    more than `grace_us[topic]` (the send timeout: sendMsgTimeout, 3 s by default) after it began;
    else it ended with the producers' last sends and says nothing either way."""
    log = ledger.failed_sends
    if not len(log):
        return {}
    cols = log.columns()
    producer = cols["msg_id"] >> SEQ_BITS
    topics = [info.topic for info in ledger.producers]
    names = [info.name for info in ledger.producers]
    out = {}
    for topic in sorted(set(topics)):
        mine = [p for p, t in enumerate(topics) if t == topic]
        rows = np.flatnonzero(np.isin(producer, mine))
        if not len(rows):
            continue
        order = rows[np.argsort(cols["born_us"][rows], kind="stable")]
        born = cols["born_us"][order]
        ends, keys = np.full(len(born), NEVER, np.int64), np.full(len(born), -1, np.int64)
        last_call = -1  # the topic's last send() call
        for p in mine:
            end, key, final_call = _next_ok(ledger, p, born)
            better = end < ends
            ends[better], keys[better] = end[better], key[better]
            last_call = max(last_call, final_call)
        start, stop, last, heads = _merge(born, ends)
        end_key = [display_key(int(keys[i]), names) if ends[i] != NEVER else "" for i in last]
        last_fail = np.maximum.reduceat(cols["t_us"][order], heads)
        grace = (grace_us or {}).get(topic, DEFAULT_SEND_TIMEOUT_US)
        open_ = (stop == NEVER) & (last_call - start > grace)
        out[topic] = Episodes(start, stop, end_key, cols["t_us"][rows], cols["reason"][rows], cols["broker"][rows],
                              last_fail, open_)
    return out


def _next_ok(ledger: Any, p: int, born_q: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """For each time in `born_q`: the result time of producer p's first SEND_OK send issued after
    it (NEVER if none), and that message's id (-1); and p's last send() call (-1: none)."""
    n = ledger.top_seq[p] + 1 if ledger.top_seq[p] else 0
    if not n:
        return np.full(len(born_q), NEVER, np.int64), np.full(len(born_q), -1, np.int64), -1
    born = np.maximum.accumulate(ledger.born_us[p].view(n))  # unset (-1): a send with no result yet
    ok = (np.frombuffer(ledger.state[p], np.uint8)[:n] & ACKED) != 0
    first = np.searchsorted(born, born_q, side="right")
    nxt = _next_true(ok, first)
    has = nxt < n
    at = np.minimum(nxt, n - 1)
    rt = np.frombuffer(ledger.rt_us[p], np.uint32)[:n].astype(np.int64)
    end = np.where(has, born[at] + rt[at], NEVER)
    return end, np.where(has, (np.int64(p) << SEQ_BITS) | at.astype(np.int64), -1), int(born[-1])


def _next_true(flags: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each index in `first`: the first index ≥ it where `flags` is true (len(flags) if none),
    in memory by the number of false flags."""
    gaps = np.flatnonzero(~flags)
    if not len(gaps):
        return first
    run_break = np.flatnonzero(np.diff(gaps) != 1)  # the last element of each run of consecutive gaps
    run_last = np.r_[run_break, len(gaps) - 1]
    j = np.searchsorted(gaps, first)
    inside = (j < len(gaps)) & (gaps[np.minimum(j, len(gaps) - 1)] == first)
    last_of_run = run_last[np.searchsorted(run_last, np.minimum(j, len(gaps) - 1))]
    return np.where(inside, gaps[last_of_run] + 1, first)


def _merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """Merge the intervals [start, end] (sorted by start): (starts, ends, each merged interval's
    row whose end is its end, each merged interval's first row)."""
    reach = np.maximum.accumulate(end)
    new = np.r_[True, start[1:] > reach[:-1]]
    heads = np.flatnonzero(new)
    tails = np.r_[heads[1:] - 1, len(start) - 1]
    last = [int(h + np.argmax(end[h:t + 1])) for h, t in zip(heads.tolist(), tails.tolist(), strict=True)]
    return start[heads], reach[tails], last, heads


# --- read side ------------------------------------------------------------------------------
@dataclass
class ReadWindow:
    """One unit's read facts for one fault window (module docstring)."""

    outage_us: int = 0
    pre_wait_us: int = 0
    frontier: list[tuple[int, int, int]] = field(default_factory=list)  # (wait, first consumption, msg id)
    waiting: int = 0
    waiting_id: int = -1

    def last_late(self) -> tuple[int, int, int] | None:
        """The late message (wait above the normal wait) consumed last: (wait, consumed, id)."""
        normal = max(self.pre_wait_us, NORMAL_WAIT_FLOOR_US)
        late = [f for f in self.frontier if f[0] > normal]
        return max(late, key=lambda f: (f[1], f[2])) if late else None


class ReadWindows:
    """A unit's `ReadWindow` per fault window, fed producer by producer
    (analysis/checkers/consumer_metrics.py unit_metrics)."""

    def __init__(self, windows_us: list[tuple[int, int]]) -> None:
        self.windows_us = windows_us
        self.read = [ReadWindow() for _ in windows_us]

    def add(self, p: int, seqs: np.ndarray, stored_us: np.ndarray, consumed_us: np.ndarray,
            waiting_seqs: np.ndarray, waiting_stored_us: np.ndarray) -> None:
        """Producer p's consumed messages (`seqs`, their store and first-consumption times) and its
        stored messages neither consumed nor lost (`waiting_*`)."""
        wait = consumed_us - stored_us
        for (start, horizon), read in zip(self.windows_us, self.read, strict=True):
            before = (consumed_us >= start - PRE_FAULT_US) & (consumed_us < start)
            if before.any():
                read.pre_wait_us = max(read.pre_wait_us, int(wait[before].max()))
            inside = (consumed_us >= start) & (stored_us < horizon)
            if inside.any():
                from_start = consumed_us[inside] - np.maximum(stored_us[inside], start)
                read.outage_us = max(read.outage_us, int(from_start.max()))
                late = inside & (wait > NORMAL_WAIT_FLOOR_US)
                if late.any():
                    read.frontier = _frontier(read.frontier, wait[late], consumed_us[late],
                                              (np.int64(p) << SEQ_BITS) | seqs[late].astype(np.int64))
            held = waiting_stored_us < horizon
            if held.any():
                read.waiting += int(held.sum())
                if read.waiting_id < 0:
                    read.waiting_id = int((np.int64(p) << SEQ_BITS) | int(waiting_seqs[held][0]))


def _frontier(kept: list[tuple[int, int, int]], wait: np.ndarray, consumed: np.ndarray,
              ids: np.ndarray) -> list[tuple[int, int, int]]:
    """The points (wait, consumed, id) no other point beats on both wait and consumption time."""
    order = np.lexsort((-consumed, -wait))  # by wait, then consumption, both descending
    best = np.maximum.accumulate(consumed[order])
    keep = order[np.r_[True, best[1:] > best[:-1]]]
    points = kept + list(zip(wait[keep].tolist(), consumed[keep].tolist(), ids[keep].tolist(), strict=True))
    points.sort(key=lambda f: (-f[0], -f[1]))
    out: list[tuple[int, int, int]] = []
    for f in points:
        if not out or f[1] > out[-1][1]:
            out.append(f)
    return out


# --- the section ----------------------------------------------------------------------------
@dataclass
class Inputs:
    """What the section is computed from (rmqsim/runner.py summarize gathers it)."""

    ledger: Any
    faults: list[dict[str, Any]]  # the summary's faults_applied
    units: dict[str, dict[str, Any]]  # unit → {"topic": str | None, "read": ReadWindows | None}
    end_us: int
    broker_view: Any  # FailoverChecker (unwritable_in)
    witness: AvailabilityWitness | None
    poll_ms: dict[str, int]  # producer node → its route poll interval (pollNameServerInterval)
    send_timeout_us: dict[str, int] = field(default_factory=dict)  # topic → its producers' longest sendMsgTimeout


def section(inp: Inputs) -> dict[str, Any]:
    """The summary's `availability` section (module docstring; docs/availability.md)."""
    ledger = inp.ledger
    counts = ledger.counts
    oneway = ledger.send_status.get("ONEWAY", 0)
    sends = counts["sent_ok"] + counts["sent_not_ok"] + counts["send_failed"] - oneway
    episodes = write_episodes(ledger, inp.send_timeout_us)
    topics = sorted({info.topic for info in ledger.producers})
    by_topic = {t: _longest(episodes.get(t), None, inp.end_us)[0] for t in topics}
    windows = fault_windows_us(inp.faults, inp.end_us)
    for ep in episodes.values():
        ep.assign(windows)
    faults = [_fault(inp, f, w, k, episodes, topics) for k, (f, w) in enumerate(zip(inp.faults, windows, strict=True))]
    return {
        "sends": sends,
        "acked": counts["sent_ok"],
        "acked_ratio": round(counts["sent_ok"] / sends, 6) if sends else None,
        "write_outage_s": {"max": max(by_topic.values()) if by_topic else None, "by_topic": by_topic},
        **_unit_totals(inp, faults),
        "faults": faults,
    }


def _unit_totals(inp: Inputs, faults: list[dict[str, Any]]) -> dict[str, Any]:
    """read_outage_s, recovery_s and not_recovered over the faults."""
    read: dict[str, float] = {}
    recovery: dict[str, float | None] = {}
    never: set[str] = set()
    for f in faults:
        for unit, g in f["groups"].items():
            read[unit] = max(read.get(unit, 0.0), g["read_outage_s"])
            if g["recovery_s"] is None:
                recovery[unit] = None
                never.add(f"group {unit}")
            elif unit not in recovery or recovery[unit] is not None:
                recovery[unit] = max(recovery.get(unit) or 0.0, g["recovery_s"])
        never.update(f"topic {t}" for t, w in f["topics"].items() if not w["recovered"])
    known = [v for v in recovery.values() if v is not None]
    return {"read_outage_s": {"max": max(read.values()) if read else None, "by_group": dict(sorted(read.items()))},
            "recovery_s": {"max": max(known) if known else None, "by_group": dict(sorted(recovery.items()))},
            "not_recovered": sorted(never)}


def _lengths(ep: Episodes, rows: np.ndarray, end_us: int) -> np.ndarray:
    """Each episode's length: to its end; an open one to the run's end; one that ended with the
    producers' last sends to its last failed result."""
    ended = ep.end_us[rows] != NEVER
    stop = np.where(ended, ep.end_us[rows], np.where(ep.open_[rows], end_us, ep.last_fail_us[rows]))
    return stop - ep.start_us[rows]


def _longest(ep: Episodes | None, k: int | None, end_us: int) -> tuple[float, int | None, int | None, str]:
    """(seconds, from µs, until µs or None, the ending send) of the longest episode of window k
    (of the run for None); (0.0, None, None, "") when none."""
    if ep is None:
        return 0.0, None, None, ""
    rows = ep.rows(k)
    if not len(rows):
        return 0.0, None, None, ""
    lengths = _lengths(ep, rows, end_us)
    j = int(rows[int(np.argmax(lengths))])
    until = None if ep.end_us[j] == NEVER else int(ep.end_us[j])
    return seconds(int(lengths.max())), int(ep.start_us[j]), until, ep.end_key[j]


def _topic_window(inp: Inputs, ep: Episodes | None, k: int, start: int, horizon: int) -> dict[str, Any]:
    outage, from_us, until_us, _key = _longest(ep, k, inp.end_us)
    never = ep is not None and bool(ep.open_[ep.rows(k)].any())
    entry: dict[str, Any] = {"write_outage_s": outage, "from_ms": None if from_us is None else ms(from_us),
                             "until_ms": None if until_us is None else ms(until_us), "recovered": not never,
                             "failed_sends": 0, "send_timeouts": 0, "failed_by_reason": {}}
    if ep is not None:
        inside = (ep.fail_t_us >= start) & (ep.fail_t_us < horizon)
        reasons = np.bincount(ep.fail_reason[inside], minlength=len(inp.ledger.failed_sends.reason_names))
        names = inp.ledger.failed_sends.reason_names
        entry["failed_sends"] = int(inside.sum())
        entry["send_timeouts"] = int(reasons[inp.ledger.failed_sends.timeouts()].sum()) if len(names) else 0
        entry["failed_by_reason"] = {names[i]: int(n) for i, n in enumerate(reasons.tolist()) if n}
    return entry


def _writes_back(ep: Episodes | None, k: int, start: int) -> int | None:
    """When the topic's outages of window k had all ended (`start` if none; None: an open one); an
    episode that ended with the producers' last sends counts to its last failed result."""
    if ep is None:
        return start
    rows = ep.rows(k)
    if not len(rows):
        return start
    if ep.open_[rows].any():
        return None
    ended = ep.end_us[rows] != NEVER
    return max([start, *np.where(ended, ep.end_us[rows], ep.last_fail_us[rows]).tolist()])


def _broker_groups(inp: Inputs, start: int, horizon: int) -> dict[str, Any]:
    log = inp.ledger.failed_sends
    out: dict[str, Any] = {}
    for name, unwritable in inp.broker_view.unwritable_in(start, horizon).items():
        out[name] = {"unwritable_s": unwritable, "failed_sends": 0, "first_failed_ms": None, "last_failed_ms": None}
    if name_index := {n: i for i, n in enumerate(log.broker_names)}:
        cols = log.columns()
        inside = (cols["t_us"] >= start) & (cols["t_us"] < horizon)
        for name, entry in out.items():
            mine = inside & (cols["broker"] == name_index[name]) if name in name_index else None
            if mine is not None and mine.any():
                entry["failed_sends"] = int(mine.sum())
                entry["first_failed_ms"] = ms(int(cols["born_us"][mine].min()))
                entry["last_failed_ms"] = ms(int(cols["t_us"][mine].max()))
    return out


def _unit_window(inp: Inputs, unit: str, k: int, start: int, horizon: int,
                 episodes: dict[str, Episodes]) -> dict[str, Any]:
    info = inp.units[unit]
    read: ReadWindow = info["read"].read[k] if info.get("read") is not None else ReadWindow()
    back = _writes_back(episodes.get(info["topic"]), k, start) if info["topic"] else start
    late = read.last_late()
    if back is not None and late is not None:
        back = max(back, late[1])
    if read.waiting:
        back = None
    return {"read_outage_s": seconds(read.outage_us), "recovery_s": None if back is None else seconds(back - start),
            "recovered_ms": None if back is None else ms(back),
            "normal_wait_ms": ms(max(read.pre_wait_us, NORMAL_WAIT_FLOOR_US)),
            "last_late": None if late is None else _key(inp, late[2]),
            "last_late_ms": None if late is None else ms(late[1]),
            "waiting": read.waiting, "first_waiting": None if read.waiting_id < 0 else _key(inp, read.waiting_id)}


def _key(inp: Inputs, msg_id: int) -> str:
    return display_key(msg_id, [info.name for info in inp.ledger.producers])


def _fault(inp: Inputs, f: dict[str, Any], window: tuple[int, int], k: int, episodes: dict[str, Episodes],
           topics: list[str]) -> dict[str, Any]:
    start, horizon = window
    entry: dict[str, Any] = {"index": f["index"], "kind": f["kind"], "target": f["target"], "start_ms": ms(start),
                             "horizon_ms": ms(horizon)}
    entry["topics"] = {t: _topic_window(inp, episodes.get(t), k, start, horizon) for t in topics}
    entry["broker_groups"] = _broker_groups(inp, start, horizon)
    entry["groups"] = {u: _unit_window(inp, u, k, start, horizon, episodes) for u in sorted(inp.units)}
    ends = [w["until_ms"] for w in entry["topics"].values() if w["from_ms"] is not None]
    ends += [g["recovered_ms"] for g in entry["groups"].values()]
    never = any(not w["recovered"] for w in entry["topics"].values()) or None in ends
    entry["back_ms"] = None if never else max([ms(start), *ends])
    entry["why"] = why_lines(inp, entry, episodes, start, horizon)
    return entry


# --- why --------------------------------------------------------------------------------------
def why_lines(inp: Inputs, entry: dict[str, Any], episodes: dict[str, Episodes], start: int,
              horizon: int) -> list[str]:
    """The mechanisms inside the window, in time order, then what ended each outage."""
    lines: list[tuple[int, str]] = []
    w = inp.witness
    if w is not None:
        lines += [(r[0], text) for kind in (CONTROLLER_ELECTED, NODE_CRASHED, NODE_RESTARTED,
                                            NAMESRV_BROKER_UNREGISTERED)
                  for r in w.of(kind) if start <= r[0] < horizon and (text := _record_line(r))]
        lines += _role_lines(w, start, horizon)
    for topic, t in entry["topics"].items():
        if t["from_ms"] is not None:
            lines.append((round(t["from_ms"] * 1000), _write_line(inp, topic, t, episodes.get(topic))))
    for unit, g in entry["groups"].items():
        if g["last_late"] is not None or g["waiting"]:
            at_ms = g["last_late_ms"] if g["last_late_ms"] is not None else entry["horizon_ms"]
            lines.append((round(at_ms * 1000), _read_line(inp, unit, g, start)))
    lines.sort(key=lambda x: x[0])
    out = [text for _t, text in lines]
    return out[:MAX_WHY] + ([f"… {len(out) - MAX_WHY} more"] if len(out) > MAX_WHY else [])


def _record_line(r: tuple) -> str:
    t, node, kind = r[0], r[1], r[2]
    at = f"{seconds(t):.3f} s"
    if kind == CONTROLLER_ELECTED:
        if not r[4]:
            return f"election at {at}: no master for {r[3]} ({r[7]})"
        return (f"election at {at}: {r[4]} became master of {r[3]} (epoch {r[6]}, {r[7]}"
                f"{f'; was {r[5]}' if r[5] else ''})")
    if kind == NODE_CRASHED:
        return f"{node} went down at {at}{' (power loss)' if r[3] else ''}"
    if kind == NODE_RESTARTED:
        return f"{node} was back at {at}"
    if kind == NAMESRV_BROKER_UNREGISTERED:
        return f"{node} dropped {r[3]} from its routes at {at} ({r[4]})"
    return ""


def _role_lines(w: AvailabilityWitness, start: int, horizon: int) -> list[tuple[int, str]]:
    """A broker taking the master role that no election inside the window named (the election's
    line tells the others)."""
    elected = {(r[4], r[6]) for r in w.of(CONTROLLER_ELECTED) if start <= r[0] < horizon}
    return [(r[0], f"{r[1]} took the master role of {r[3]} at {seconds(r[0]):.3f} s (epoch {r[5]})")
            for r in w.of(BROKER_ROLE) if start <= r[0] < horizon and r[4] == "master" and (r[1], r[5]) not in elected]


def _write_line(inp: Inputs, topic: str, t: dict[str, Any], ep: Episodes | None) -> str:
    head = (f"{topic}: sends failed from {t['from_ms'] / 1000:.3f} s ({t['failed_sends']:,} failed, "
            f"{t['send_timeouts']:,} timed out)")
    if t["until_ms"] is None:
        return f"{head}; no send returned SEND_OK after it by the run's end"
    until_us = round(t["until_ms"] * 1000)
    ended_by = ""
    if ep is not None:
        k = np.flatnonzero(ep.end_us == until_us)
        ended_by = f" ({ep.end_key[int(k[0])]})" if len(k) else ""
    line = f"{head} until a send returned SEND_OK at {t['until_ms'] / 1000:.3f} s{ended_by}"
    route = _route_before(inp, topic, round(t["from_ms"] * 1000), until_us)
    return f"{line}; {route}" if route else line


def _route_before(inp: Inputs, topic: str, from_us: int, until_us: int) -> str:
    """The last route update of the topic by one of its producers inside the outage."""
    if inp.witness is None:
        return ""
    mine = {info.name for info in inp.ledger.producers if info.topic == topic}
    updates = [r for r in inp.witness.of(PRODUCER_ROUTE_UPDATED) if r[1] in mine and r[3] == topic
               and from_us <= r[0] <= until_us]
    if not updates:
        return ""
    r = updates[-1]
    poll = inp.poll_ms.get(r[1])
    every = f"; its route poll runs every {poll / 1000:g} s (pollNameServerInterval)" if poll else ""
    return f"{r[1]} took a new route of {topic} ({r[4]} queues) at {seconds(r[0]):.3f} s{every}"


def _read_line(inp: Inputs, unit: str, g: dict[str, Any], start: int) -> str:
    if g["waiting"]:
        return (f"{unit}: {g['waiting']:,} stored message(s) were never consumed by the run's end "
                f"(the first: {g['first_waiting']})")
    line = (f"{unit}: the last late message ({g['last_late']}, waited more than the normal "
            f"{g['normal_wait_ms'] / 1000:g} s) was consumed at {g['last_late_ms'] / 1000:.3f} s")
    if g["recovered_ms"] is None:
        line += "; not back: its topic's sends never succeeded again"
    pull = _pull_before(inp, unit, start, round(g["last_late_ms"] * 1000))
    return f"{line}; {pull}" if pull else line


def _pull_before(inp: Inputs, unit: str, start: int, until_us: int) -> str:
    """The last failed pull of the unit's group inside [start, until_us]."""
    if inp.witness is None:
        return ""
    group = unit.split("/", 1)[0]
    pulls = [r for r in inp.witness.of(CONSUMER_PULL_FAILED) if r[3] == group and start <= r[0] <= until_us]
    if not pulls:
        return ""
    r = pulls[-1]
    return f"the last failed pull before it: {r[1]}'s from {r[4]} at {seconds(r[0]):.3f} s ({r[6]})"
