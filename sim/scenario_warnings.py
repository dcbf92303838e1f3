"""Warnings for scenarios that are valid but silently useless in part (assembly edge).

A scenario can pass every check and still not do what its author meant: a producer that starts
after the run ends sends nothing, a fault scheduled after `duration_ms` is never injected
(sim/faults.py skips it), a `restart` of a node that is up does nothing, a consumer that starts
after the run has settled never consumes, a warm-up as long as the run leaves no latency to
measure. `scenario_warnings` names each such entry by key path; `rmqsim run` and `rmqsim
validate` print them (`warning: ...` on stderr) and go on (exit code unchanged): the run still
means something, only less than the file suggests. Only scripted faults are followed; random
faults are drawn at run time.
"""

from __future__ import annotations

from typing import Any

from sim.scenario_checks import instance_names

DOWN = ("process_crash", "power_loss")  # faults after which a node is down until a `restart`


def scenario_warnings(sc: Any) -> list[str]:
    """Every silently useless part of a validated Scenario, as `key.path: what happens` lines."""
    return [*_producers(sc), *_consumers(sc), *_faults(sc), *_warmup(sc)]


def _s(value_ms: float) -> str:
    return f"{value_ms / 1000:g} s"


def _producers(sc: Any) -> list[str]:
    out = []
    for i, p in enumerate(sc.producers):
        if p.start_ms >= sc.duration_ms:
            out.append(f"producers[{i}].start_ms: {p.name!r} starts at {_s(p.start_ms)}, not before the end of "
                       f"the run (duration_ms {_s(sc.duration_ms)}): it sends nothing")
        elif p.stop_ms is not None and p.stop_ms <= p.start_ms:
            out.append(f"producers[{i}].stop_ms: {p.name!r} stops at {_s(p.stop_ms)}, not after it starts "
                       f"({_s(p.start_ms)}): it sends nothing")
    return out


def _consumers(sc: Any) -> list[str]:
    end_ms = sc.duration_ms + sc.settle_ms
    return [f"consumers[{i}].start_ms: {c.name!r} starts at {_s(c.start_ms)}, not before the run ends "
            f"(duration_ms + settle_ms = {_s(end_ms)}): it never consumes"
            for i, c in enumerate(sc.consumers) if c.start_ms >= end_ms]


def _faults(sc: Any) -> list[str]:
    out = []
    starts = {name: c.start_ms for c in sc.consumers for name in instance_names(c.name, c.count)}
    down_until: dict[str, float | None] = {}  # node → when it comes back (None: at a `restart`)
    order = sorted(range(len(sc.faults)), key=lambda i: sc.faults[i].at_ms)
    for i in order:
        f = sc.faults[i]
        if f.at_ms >= sc.duration_ms:
            out.append(f"faults[{i}].at_ms: {f.kind} at {_s(f.at_ms)} is not before the end of the run "
                       f"(duration_ms {_s(sc.duration_ms)}): it is never injected")
            continue
        if f.node is None:
            continue
        back = down_until.get(f.node, 0.0)
        is_down = back is None or back > f.at_ms or starts.get(f.node, 0.0) > f.at_ms
        if f.kind == "restart":
            if not is_down:
                out.append(f"faults[{i}]: restart of {f.node!r} at {_s(f.at_ms)}, which is up then (no crash "
                           "or power loss before it): it does nothing")
            down_until[f.node] = 0.0
        elif f.kind in DOWN:
            down_until[f.node] = f.at_ms + f.duration_ms if f.duration_ms is not None else None
    return out


def _warmup(sc: Any) -> list[str]:
    if sc.producers and sc.warmup_ms >= sc.duration_ms:
        return [f"warmup_ms: the warm-up ({_s(sc.warmup_ms)}) is not shorter than the run (duration_ms "
                f"{_s(sc.duration_ms)}): no message is measured for latency"]
    return []
