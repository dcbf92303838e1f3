"""Master availability per broker group, and the controller's elections: was there always one
writable master, never two, and how often did the master change? From the simulator's ground
truth (records), per broker group.

`FailoverChecker(groups, controller)`: `groups` maps each broker group's name (its brokerName) to
its broker nodes, the configured master first; `controller` says whether the groups run in 5.x
controller mode (automatic master failover: models/controller/, `enable_controller_mode`).

- Classic mode (`controller` false): no failover. A group is writable while its configured master
  (its first node) is up: up from the run's start, down from that node's `node.crashed` until its
  `node.restarted` (the restarted broker serving again). A slave never takes writes.
- Controller mode: a broker node is master from its latest `broker.role` record with role
  `master` until a later `broker.role` of it with another role (`slave`, `fenced`) or its
  `node.crashed`; a group is writable while at least one of its nodes is master.
  (A node that is not listed in `groups` counts for the group its `broker.role` names.)

Summary keys (`results(end_us)`, `end_us` the run's end):

- `failovers`: elections that moved a group's mastership to another node — `controller.elected`
  records whose `master` is not "" and differs from the group's previous master (the record's
  `old_master`, or, when that is "", the last master an earlier election of the group named):
  the start-up election and a master re-elected after a masterless gap are not failovers; null
  in classic mode (not checked: no controller);
- `unwritable_s`: group → seconds (3 decimals) with no writable master, counted from the group's
  first writable instant (the start-up election is not an outage) to `end_us`; a group never
  writable counts 0.0 and is in `unwritable_at_end`;
- `unwritable_at_end`: the groups without a writable master at `end_us`, sorted (a run that ends
  during an outage says so);
- `two_masters_s`: group → seconds (3 decimals) with more than one of its nodes in master role
  (a partitioned old master still acting while a new one is elected); null in classic mode;
- `elections`: the `controller.elected` records, in order, as {t_ms, broker_name, master,
  old_master, epoch, reason} (rare facts; the first 100 kept); empty in classic mode.

Whether what was written during a two-masters window survived is the Ledger's (analysis/checkers/ledger.py:
the loss cause `truncated_on_failover`).
"""

from __future__ import annotations

from typing import Any

from models.records import BROKER_ROLE, CONTROLLER_ELECTED
from sim.trace import NODE_CRASHED, NODE_RESTARTED

MAX_ELECTIONS = 100  # `elections` keeps the first ones
CLASSIC_KINDS = frozenset((NODE_CRASHED, NODE_RESTARTED))
CONTROLLER_KINDS = frozenset((NODE_CRASHED, BROKER_ROLE, CONTROLLER_ELECTED))
MASTER = "master"


class _Group:
    """One broker group's availability: who is master now, and the time accumulated so far."""

    __slots__ = ("masters", "first_us", "writable", "down_since", "unwritable_us", "two_since", "two_us", "spans")

    def __init__(self) -> None:
        self.masters: dict[str, None] = {}  # nodes acting as master now (classic: the master, while up)
        self.first_us: int | None = None  # the first writable instant
        self.writable = False
        self.down_since: int | None = None  # unwritable since (after the first writable instant)
        self.unwritable_us = 0
        self.two_since: int | None = None  # more than one master since
        self.two_us = 0
        self.spans: list[tuple[int, int]] = []  # closed [down, up) spans without a writable master

    def update(self, t: int) -> None:
        """Account the time up to `t` after the masters changed at `t`."""
        writable, two = bool(self.masters), len(self.masters) > 1
        if writable and self.first_us is None:
            self.first_us = t
        if self.writable and not writable:
            self.down_since = t
        elif writable and not self.writable and self.down_since is not None:
            self.unwritable_us += t - self.down_since
            self.spans.append((self.down_since, t))
            self.down_since = None
        self.writable = writable
        if two and self.two_since is None:
            self.two_since = t
        elif not two and self.two_since is not None:
            self.two_us += t - self.two_since
            self.two_since = None

    def unwritable_until(self, end_us: int) -> int:
        open_us = end_us - self.down_since if self.down_since is not None else 0
        return self.unwritable_us + max(0, open_us)

    def unwritable_in(self, start_us: int, stop_us: int) -> int:
        """µs without a writable master inside [start_us, stop_us) (an open outage runs to stop_us)."""
        spans = self.spans + ([(self.down_since, stop_us)] if self.down_since is not None else [])
        return sum(max(0, min(up, stop_us) - max(down, start_us)) for down, up in spans)

    def two_until(self, end_us: int) -> int:
        open_us = end_us - self.two_since if self.two_since is not None else 0
        return self.two_us + max(0, open_us)


class FailoverChecker:
    """Fed the chunks that hold its kinds (`feed`: a Ledger rare observer, analysis/checkers/ledger.py; any
    chunk may be fed, it reads only those kinds), judged once at the end (`results`); module docstring."""

    def __init__(self, groups: dict[str, list[str]], controller: bool) -> None:
        self.controller = controller
        self.groups = {name: _Group() for name in sorted(groups)}
        self.group_of = {node: name for name, nodes in groups.items() for node in nodes}
        self.masters_of = {name: nodes[0] for name, nodes in groups.items() if nodes}  # configured masters
        self.kinds = CONTROLLER_KINDS if controller else CLASSIC_KINDS
        self.failovers = 0
        self.last_master: dict[str, str] = {}  # broker name → the last master an election named
        self.elections: list[dict[str, Any]] = []
        if not controller:  # the configured masters are up from the run's start
            for name, node in self.masters_of.items():
                group = self.groups[name]
                group.masters[node] = None
                group.update(0)

    def feed(self, chunk: list[tuple]) -> None:
        kinds = self.kinds
        for r in [r for r in chunk if r[2] in kinds]:
            kind = r[2]
            if kind == CONTROLLER_ELECTED:  # (t, node, kind, broker_name, master, old_master, epoch, reason)
                self._elected(r)
            elif kind == BROKER_ROLE:  # (t, node, kind, broker_name, role, epoch)
                name = self.group_of.get(r[1], r[3])
                group = self.groups.get(name)
                if group is None:
                    continue
                self.group_of.setdefault(r[1], name)
                if r[4] == MASTER:
                    group.masters[r[1]] = None
                else:
                    group.masters.pop(r[1], None)
                group.update(r[0])
            else:  # node.crashed, and node.restarted (classic mode only)
                name = self.group_of.get(r[1])
                if name is None:
                    continue
                group = self.groups[name]
                if kind == NODE_CRASHED:
                    group.masters.pop(r[1], None)
                elif r[1] == self.masters_of[name]:
                    group.masters[r[1]] = None
                group.update(r[0])

    def _elected(self, r: tuple) -> None:
        t, _node, _kind, broker_name, master, old_master, epoch, reason = r
        previous = old_master or self.last_master.get(broker_name, "")
        if master and previous and master != previous:
            self.failovers += 1
        if master:
            self.last_master[broker_name] = master
        if len(self.elections) < MAX_ELECTIONS:
            self.elections.append({"t_ms": round(t / 1000, 3), "broker_name": broker_name, "master": master,
                                   "old_master": old_master, "epoch": epoch, "reason": reason})

    def unwritable_in(self, start_us: int, stop_us: int) -> dict[str, float]:
        """Per broker group: seconds (3 decimals) without a writable master inside [start_us, stop_us)
        (the broker's view of a fault's window: analysis/checkers/availability.py)."""
        return {name: _seconds(g.unwritable_in(start_us, stop_us)) for name, g in self.groups.items()}

    def results(self, end_us: int) -> dict[str, Any]:
        """`failovers`, `unwritable_s`, `unwritable_at_end`, `two_masters_s`, `elections` (module
        docstring); the accumulated state is left as it is (a later call gives the same answer)."""
        return {
            "failovers": self.failovers if self.controller else None,
            "unwritable_s": {name: _seconds(g.unwritable_until(end_us)) for name, g in self.groups.items()},
            "unwritable_at_end": [name for name, g in self.groups.items() if not g.writable],
            "two_masters_s": {name: _seconds(g.two_until(end_us)) for name, g in self.groups.items()}
            if self.controller else None,
            "elections": list(self.elections),
        }


def _seconds(us: int) -> float:
    return round(us / 1_000_000, 3)
