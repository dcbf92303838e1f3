"""The summary's `faults_applied`: every fault a run injected, with its actual start and end.

A scripted fault starts at `at_ms` plus its jitter draw; a random fault when its up phase ran out
(sim/faults.py). Each entry names the fault by `index`: its position in the resolved scenario's
`faults`, random faults numbered after the scripted ones in firing order (`rmqsim explain
--fault K` takes that index). `end_ms` is when its effect ended, from the injector's own records:

- a fault with `duration_ms` (or a random one): its heal (a crashed node restarted, a partition
  or link fault removed, the disk's factor reset); `pause`, `fsync_stall`, `fsync_error` and `service_error`: start + duration,
  or the end of the fault phase if that came first (`heal_all` unpauses every node and clears
  every stall);
- `process_crash` / `power_loss` without a duration: the node's next scripted `restart`, else the
  end of the fault phase (`heal_all` restarts it); a `partition` or link fault without one: the
  next scripted `heal`, else the end of the fault phase;
- `restart` and `heal` are instants (end = start); `shutdown` is never healed (end null).

No window reaches past the run: `end_ms` is at most the run's end (`run_end_ms`: the simulated
time the run ended at, which the summary's `sim_time_ms` gives in whole ms). A fault still in
force when the run ended — one the run stopped at a bound before healing, or a self-timed one
whose duration outlasts a run that never reached the end of its fault phase — ends there, with
`ends_after_run: true` (false for every other entry; absent from summaries of an older rmqsim):
its `end_ms` is where the run stopped looking, not where the fault would have ended. A year-long
`pause` in a 5 s run ends at 5 s, where `heal_all` unpaused its node.
"""

from __future__ import annotations

from typing import Any

from sim.trace import FAULT_HEALED, FAULT_INJECTED

UNTIL_RESTART = ("process_crash", "power_loss")
UNTIL_HEAL = ("partition", "link_latency", "packet_loss")
INSTANT = ("restart", "heal")
SELF_TIMED = ("pause", "fsync_stall", "fsync_error", "service_error")


def faults_applied(log: list[tuple], log_index: list[int], scripted: int, run_end_ms: float) -> list[dict[str, Any]]:
    """The injected faults in firing order (module docstring); `log`: the injector's records,
    `log_index`: the fault index beside each, `scripted`: how many scripted faults the scenario
    has, `run_end_ms`: the simulated time the run ended at (every window is clipped there)."""
    entries: dict[int, dict[str, Any]] = {}
    open_: dict[int, dict[str, Any]] = {}
    for record, index in zip(log, log_index, strict=True):
        t_ms, kind, fault, target, detail = record[0] / 1000, record[2], record[3], record[4], record[5]
        if kind == FAULT_INJECTED:
            entry = {"index": index, "kind": fault, "target": target, "start_ms": t_ms, "end_ms": None,
                     "ends_after_run": False, "random": index >= scripted, "detail": detail}
            entries[index] = entry
            if fault in INSTANT:
                entry["end_ms"] = t_ms
                _close(open_, t_ms, lambda e, f=fault, t=target: (f == "restart" and e["kind"] in UNTIL_RESTART
                                                                  and e["target"] == t)
                       or (f == "heal" and e["kind"] in UNTIL_HEAL))
            elif fault in SELF_TIMED and detail.startswith("duration_ms="):
                entry["end_ms"] = t_ms + float(detail.split("=", 1)[1])
                open_[index] = entry  # until then, or an earlier end of the fault phase
            elif fault != "shutdown":
                open_[index] = entry
        elif kind == FAULT_HEALED:
            if index >= 0:
                _close(open_, t_ms, lambda e, i=index: e["index"] == i)
            elif fault == "all":
                _close(open_, t_ms, lambda e: True)
    for entry in entries.values():
        _clip(entry, run_end_ms)
    return list(entries.values())


def _close(open_: dict[int, dict[str, Any]], t_ms: float, matches: Any) -> None:
    """End the open faults `matches` picks at `t_ms`; a self-timed one keeps an earlier end of its own."""
    for index in [i for i, e in open_.items() if matches(e)]:
        entry = open_.pop(index)
        entry["end_ms"] = t_ms if entry["end_ms"] is None else min(entry["end_ms"], t_ms)


def _clip(entry: dict[str, Any], run_end_ms: float) -> None:
    """End a fault still in force at the run's end there, saying so (module docstring)."""
    if entry["kind"] == "shutdown":
        return
    if entry["end_ms"] is None or entry["end_ms"] > run_end_ms:
        entry["end_ms"], entry["ends_after_run"] = float(run_end_ms), True
