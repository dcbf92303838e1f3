"""Warnings for scenarios that are valid but silently useless in part (assembly edge).

A scenario can pass every check and still not do what its author meant: a producer that starts
after the run ends sends nothing, a fault scheduled after `duration_ms` is never injected
(sim/faults.py skips it), a `restart` of a node that is up does nothing, a crash of a node that is
already down does nothing either, a consumer that starts after the run has settled never consumes,
a group whose topic no producer feeds consumes nothing, a random fault whose mean interval is
hours in a one-minute run almost never fires, a warm-up as long as the run leaves no latency to
measure. Each finder here names such entries by key path and says what happens, as
`(key.path, message)` pairs; rmqsim/scenario/lint.py registers them, with an id and a fix, beside
the RocketMQ configuration traps, and `rmqsim run` / `rmqsim validate` print them all (`warning:
...` on stderr) and go on (exit code unchanged): the run still means something, only less than
the file suggests.

Only scripted faults are followed through time (`Timeline`); random faults are drawn at run time,
so only whether they can fire at all is looked at.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from rmqsim.scenario.validate import instance_names

DOWN = ("process_crash", "power_loss")  # faults after which a node is down until a `restart`
INSTANT_KINDS = (*DOWN, "shutdown")  # faults that act at one instant (and leave the node down)
Finding = tuple[str, str]  # (key path, message)
LIKELY_FIRE = 0.05  # a random fault entry that fires in fewer runs than this is "never"


def _s(value_ms: float) -> str:
    return f"{value_ms / 1000:g} s"


def producers_never_sending(sc: Any) -> list[Finding]:
    out = []
    for i, p in enumerate(sc.producers):
        if p.start_ms >= sc.duration_ms:
            out.append((f"producers[{i}].start_ms", f"{p.name!r} starts at {_s(p.start_ms)}, not before the end of "
                        f"the run (duration_ms {_s(sc.duration_ms)}): it sends nothing"))
        elif p.stop_ms is not None and p.stop_ms <= p.start_ms:
            out.append((f"producers[{i}].stop_ms", f"{p.name!r} stops at {_s(p.stop_ms)}, not after it starts "
                        f"({_s(p.start_ms)}): it sends nothing"))
    return out


def consumers_never_starting(sc: Any) -> list[Finding]:
    end_ms = sc.duration_ms + sc.settle_max_ms
    return [(f"consumers[{i}].start_ms", f"{c.name!r} starts at {_s(c.start_ms)}, not before the run ends "
             f"(duration_ms + settle_ms = {_s(end_ms)}): it never consumes")
            for i, c in enumerate(sc.consumers) if c.start_ms >= end_ms]


def faults_after_run(sc: Any) -> list[Finding]:
    return [(f"faults[{i}].at_ms", f"{f.kind} at {_s(f.at_ms)} is not before the end of the run "
             f"(duration_ms {_s(sc.duration_ms)}): it is never injected")
            for i, f in enumerate(sc.faults) if f.at_ms >= sc.duration_ms]


def restarts_of_up_nodes(sc: Any) -> list[Finding]:
    """A `restart` of a node that is up does nothing (Node.restart). A node is down after a crash or
    power loss (until its `duration_ms` or a restart), before a consumer's `start_ms` (the restart
    launches it early), and after a graceful shutdown — a `shutdown` fault or `stop_ms` — until a
    restart relaunches it (the end of the fault phase does not: sim/faults.py heal_all)."""
    out = []
    starts = {name: c.start_ms for c in sc.consumers for name in instance_names(c.name, c.count)}
    stops = sorted((stop, name) for name, (_start, stop) in client_windows(sc).items() if stop is not None)
    down_until: dict[str, float | None] = {}  # node → when it comes back (None: at a `restart`)
    k = 0
    for i in _in_time_order(sc):
        f = sc.faults[i]
        while k < len(stops) and stops[k][0] <= f.at_ms:  # stop_ms: the same graceful shutdown
            down_until[stops[k][1]] = None
            k += 1
        if f.node is None:
            continue
        back = down_until.get(f.node, 0.0)
        is_down = back is None or back > f.at_ms or starts.get(f.node, 0.0) > f.at_ms
        if f.kind == "restart":
            if not is_down:
                out.append((f"faults[{i}]", f"restart of {f.node!r} at {_s(f.at_ms)}, which is up then (no crash, "
                            "power loss or shutdown before it): it does nothing"))
            down_until[f.node] = 0.0
        elif f.kind in DOWN:
            down_until[f.node] = f.at_ms + f.duration_ms if f.duration_ms is not None else None
        elif f.kind == "shutdown" and not is_down:
            down_until[f.node] = None
    return out


def warmup_covering_run(sc: Any) -> list[Finding]:
    if sc.producers and sc.warmup_ms >= sc.duration_ms:
        return [("warmup_ms", f"the warm-up ({_s(sc.warmup_ms)}) is not shorter than the run (duration_ms "
                 f"{_s(sc.duration_ms)}): no message is measured for latency")]
    return []


def scenario_warnings(sc: Any) -> list[str]:
    """The first five kinds of silently useless part as `key.path: what happens` lines (the form
    before rmqsim/scenario/lint.py gave them ids; `lint()` returns these and every other finding)."""
    finders = (producers_never_sending, consumers_never_starting, faults_after_run, restarts_of_up_nodes,
               warmup_covering_run)
    return [f"{path}: {message}" for finder in finders for path, message in finder(sc)]


# --- the scripted timeline: when each node is down ----------------------------------------------

@dataclass(frozen=True)
class Outage:
    """A node down from `start_ms` until `end_ms` (math.inf: for good), and why, in words."""

    start_ms: float
    end_ms: float
    why: str
    source: int = -1  # the index in `faults` of the fault that took the node down (-1: none)

    def covers(self, start_ms: float, end_ms: float) -> bool:
        """Down for the whole of [start_ms, end_ms] (an instant when they are equal)."""
        return self.start_ms <= start_ms and (end_ms < self.end_ms if end_ms == start_ms else end_ms <= self.end_ms)


def _in_time_order(sc: Any) -> list[int]:
    """Indexes of the scripted faults before the end of the run, by time (file order on ties)."""
    return [i for i in sorted(range(len(sc.faults)), key=lambda i: sc.faults[i].at_ms)
            if sc.faults[i].at_ms < sc.duration_ms]


def client_windows(sc: Any) -> dict[str, tuple[float, float | None]]:
    """Producer and consumer node → (start_ms, stop_ms or None)."""
    return {name: (c.start_ms, c.stop_ms) for c in [*sc.producers, *sc.consumers]
            for name in instance_names(c.name, c.count)}


def _until_restart(back_ms: float) -> str:
    """`, restarted at 20 s` for a graceful shutdown a `restart` ends; nothing when none does."""
    return "" if back_ms == math.inf else f", restarted at {_s(back_ms)}"


def _next_at(times: list[tuple[float, int]], at_ms: float, pos: int, default: float) -> float:
    """The time of the first (time, position) entry after (at_ms, pos), else `default`."""
    k = bisect.bisect_right(times, (at_ms, pos))
    return times[k][0] if k < len(times) else default


class Timeline:
    """When each node is down in the fault phase: before a client starts; after it stops or is
    shut down until the next `restart` of it (the end of the fault phase does not relaunch a
    stopped process, FaultInjector.heal_all); and from each scripted crash or power loss of an up
    node until it is back (its `duration_ms`, the next `restart` of it, or the end of the fault
    phase). Lookups bisect, so a file of many faults is read in O(n log n)."""

    def __init__(self, sc: Any) -> None:
        self.sc = sc
        self.order = _in_time_order(sc)
        self.clients: dict[str, list[Outage]] = {}  # at most two a node, any order
        self.faults: dict[str, list[Outage]] = {}  # by time, never overlapping
        self.starts: dict[str, list[float]] = {}  # beside `faults`: their start times
        self._restarts: dict[str, list[tuple[float, int]]] = {}
        self._heals: list[tuple[float, int]] = []
        for pos, i in enumerate(self.order):
            f = sc.faults[i]
            if f.kind == "restart":
                self._restarts.setdefault(f.node, []).append((f.at_ms, pos))
            elif f.kind == "heal":
                self._heals.append((f.at_ms, pos))
        for name, (start, stop) in client_windows(sc).items():
            if start > 0:
                self.clients.setdefault(name, []).append(Outage(0.0, start, f"it starts at {_s(start)}"))
            if stop is not None:
                back = _next_at(self._restarts.get(name, []), stop, -1, math.inf)  # a restart at stop_ms is after it
                self.clients.setdefault(name, []).append(Outage(stop, back, f"it stops at {_s(stop)} (stop_ms)"
                                                                + _until_restart(back)))
        for pos, i in enumerate(self.order):
            f = sc.faults[i]
            if f.kind in INSTANT_KINDS and self.down(f.node, f.at_ms) is None:
                self._add(f.node, self._outage(f, i, pos))

    def _outage(self, f: Any, i: int, pos: int) -> Outage:
        if f.kind == "shutdown":  # down until a restart relaunches it: the end of the fault phase does not
            back = _next_at(self._restarts.get(f.node, []), f.at_ms, pos, math.inf)
            return Outage(f.at_ms, back, f"faults[{i}] shut it down at {_s(f.at_ms)}" + _until_restart(back), i)
        end = self.sc.duration_ms
        back = min(f.at_ms + f.duration_ms if f.duration_ms is not None else end, end,
                   _next_at(self._restarts.get(f.node, []), f.at_ms, pos, end))
        when = "at the end of the fault phase" if back >= end else f"at {_s(back)}"
        return Outage(f.at_ms, back, f"faults[{i}] took it down at {_s(f.at_ms)}, back {when}", i)

    def _add(self, node: str, outage: Outage) -> None:
        self.faults.setdefault(node, []).append(outage)
        self.starts.setdefault(node, []).append(outage.start_ms)

    def down(self, node: str | None, at_ms: float, until_ms: float | None = None, ignore: int = -1
             ) -> Outage | None:
        """The outage of `node` that covers [at_ms, until_ms] (just the instant without
        `until_ms`), other than the one the fault `ignore` caused."""
        end = at_ms if until_ms is None else until_ms
        k = bisect.bisect_right(self.starts.get(node or "", []), at_ms)
        latest = self.faults[node][k - 1:k] if k else []  # the only fault outage that can cover at_ms
        return next((o for o in [*self.clients.get(node or "", []), *latest]
                     if o.covers(at_ms, end) and (o.source < 0 or o.source != ignore)), None)

    def of(self, node: str) -> list[Outage]:
        """The outages scripted faults cause to `node`, by time."""
        return self.faults.get(node, [])

    def window_end(self, pos: int) -> float:
        """When the fault at `order[pos]` stops acting: at once (a crash), its duration, else (a
        partition or link fault) the next `heal`, else the end of the fault phase."""
        f = self.sc.faults[self.order[pos]]
        if f.kind in INSTANT_KINDS:
            return f.at_ms
        if f.duration_ms is not None:
            return min(f.at_ms + f.duration_ms, self.sc.duration_ms)
        if f.kind in ("partition", "link_latency", "packet_loss"):
            return _next_at(self._heals, f.at_ms, pos, self.sc.duration_ms)
        return self.sc.duration_ms


# --- faults that hit nothing ---------------------------------------------------------------------

def faults_on_down_nodes(sc: Any) -> list[Finding]:
    """A fault whose every target is down for all the time it acts: it changes nothing."""
    timeline, out = Timeline(sc), []
    for pos, i in enumerate(timeline.order):
        f = sc.faults[i]
        if f.kind in ("restart", "heal"):
            continue
        end = timeline.window_end(pos)
        if f.kind == "partition":
            for g, group in enumerate(f.groups or []):
                names = list(dict.fromkeys(group))  # groups built from YAML aliases repeat names
                first = timeline.down(names[0], f.at_ms, end, i) if names else None
                if first and all(timeline.down(n, f.at_ms, end, i) for n in names[1:]):
                    out.append((f"faults[{i}].groups[{g}]", f"partition at {_s(f.at_ms)}: every node of this "
                                f"group is down while it lasts ({names[0]!r}: {first.why}): it cuts nothing"))
            continue
        for key in ("node", "src", "dst"):
            node = getattr(f, key)
            outage = timeline.down(node, f.at_ms, end, i) if node is not None else None
            if outage is not None:
                out.append((f"faults[{i}].{key}", f"{f.kind} of {node!r} at {_s(f.at_ms)}, which is down then "
                            f"({outage.why}): it does nothing"))
                break
    return out


def fire_chance(sc: Any, r: Any) -> float:
    """The chance that random fault entry `r` fires at least once in the fault phase: its first
    fault comes after max(min_up_ms, Exp(rate_per_hour))."""
    if r.min_up_ms >= sc.duration_ms:
        return 0.0
    return 1 - math.exp(-sc.duration_ms * r.rate_per_hour / 3_600_000)


def random_faults_never_firing(sc: Any) -> list[Finding]:
    """A random fault entry waits max(min_up_ms, Exp(rate_per_hour)) before its first fault
    (sim/faults.py): with a mean interval far beyond the run it almost never fires; a target
    that only starts after the fault phase is never hit when drawn."""
    out, windows = [], client_windows(sc)
    for i, r in enumerate(sc.random_faults):
        mean_ms = 3_600_000 / r.rate_per_hour
        if r.min_up_ms >= sc.duration_ms:
            out.append((f"random_faults[{i}].min_up_ms", f"the first {r.kind} comes after min_up_ms "
                        f"({_s(r.min_up_ms)}), not before the end of the fault phase ({_s(sc.duration_ms)}): "
                        "it never fires"))
        elif (p := fire_chance(sc, r)) < LIKELY_FIRE:
            out.append((f"random_faults[{i}].rate_per_hour", f"{r.rate_per_hour:g} per hour is one {r.kind} "
                        f"every {_s(mean_ms)} on average; within the {_s(sc.duration_ms)} fault phase it fires "
                        f"in {p:.1%} of seeds"))
        late = [n for n in dict.fromkeys(r.nodes) if windows.get(n, (0.0, None))[0] >= sc.duration_ms]
        if late:
            out.append((f"random_faults[{i}].nodes", f"{late[0]!r} starts at {_s(windows[late[0]][0])}, after the "
                        f"fault phase ({_s(sc.duration_ms)}): a draw that picks it hits nothing"))
    return out


def groups_without_producer(sc: Any) -> list[Finding]:
    """A consumer group whose topic no producer sends to consumes nothing (once per group)."""
    fed = {p.topic for p in sc.producers}
    out, seen = [], set()
    for i, c in enumerate(sc.consumers):
        if c.topic in fed or c.group in seen:
            continue
        seen.add(c.group)
        out.append((f"consumers[{i}].topic", f"group {c.group!r} subscribes to {c.topic!r}, which no producer "
                    "sends to: it consumes nothing"))
    return out
