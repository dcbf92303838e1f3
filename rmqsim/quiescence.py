"""Is the cluster quiet at the end of a run? (assembly edge: reads the models' state and the ledger)

A run's counts depend on when it ends while the cluster is still changing: an orderly group whose
broker restarted at the end of the fault phase is re-registered by the next heartbeat (30 s,
`heartbeatBrokerInterval`), the broker's `NOTIFY_CONSUMER_IDS_CHANGED` triggers a rebalance, and
queues move with offsets that a crash rolled back — hundreds of duplicates a minute after the
faults healed. This module says whether the cluster had settled when the run ended, and
`settle_ms: auto` (rmqsim/runner.py) keeps simulating until it has.

Quiet, at simulated time `now`, means both:

- **state** (`unsettled` kinds, counted now): every broker up and serving (`brokers_down`); for every CLUSTERING group with a live member, every
  queue of its topic and of its `%RETRY%` topic that a live member's route lists
  (`topicSubscribeInfoTable`) and whose master is up is owned by exactly one live member
  (`unowned_queues`, `queues_owned_twice`), its starting offset known (`queues_starting`), consumed
  up to the master's max offset (`backlog`: acknowledged messages not yet consumed and committed),
  and the broker's committed offset equals the owner's (`offsets_uncommitted`); a BROADCASTING
  member's offsets equal its offsets file; every up master's consumer offset table equals its
  consumerOffset.json (`offsets_unpersisted`); every stored half message resolved by an end, a
  discard at transactionCheckMax or a loss (`transactions_unresolved`); no request is in flight (`requests_in_flight`: a
  node's outstanding RPCs, except consumers' pulls and pops, which long polling holds by design).
- **no disturbance** within the last `window_ms`: no duplicate delivery (`duplicates`), no
  rebalance that moved a queue (`rebalances`), no offset rolled back or moved (`offset_rollbacks`:
  `broker.offset_rolled_back`, `consumer.offset_moved`), no failed send (`send_failures`), no fault
  injected or healed, crash, consumer start or stop, or operator action (`faults`). The end of the
  fault phase counts only if it healed something still faulty then (sim/faults.py).

Messages in the retry path (waiting in `SCHEDULE_TOPIC_XXXX` for their back-off) and in the DLQ
count as settled, as do messages lost (they will never be consumed); a group with no live member
(every consumer shut down) is not expected to drain. `at_ms` is when the quiet stretch began (the
last disturbance); the run ended quiet if its state was quiet at the end and that stretch lasted
`window_ms`. `settle_ms: auto` checks from the end of `duration_ms` on, so it ends there if the
cluster has been quiet for a window already.

The default window covers one heartbeat round, one rebalance round and one offset persistence
round, back to back: the largest `heartbeat_broker_interval_ms` of the consumers (Java
`heartbeatBrokerInterval`, 30 s) + RebalanceService's `waitInterval` (20 s) + the largest
`persist_consumer_offset_interval_ms` (5 s) + the largest broker `flush_consumer_offset_interval_ms`
(5 s) = 60 s with the defaults; with no consumer, the broker flush interval alone.

Simplified: oneway messages and responses travelling on links are not looked at (they are what
`requests_in_flight` waits for, or a rebalance or commit within the window shows); state
is sampled every `CHECK_EVERY_US` (1 s) by `settle_ms: auto`, and once at the end otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.broker.broker import Broker
from models.consumer.config import REBALANCE_WAIT_INTERVAL_US
from models.consumer.pop_consumer import PopConsumer
from models.consumer.push_consumer import PushConsumer
from models.message import MessageQueue
from models.records import (
    BROKER_OFFSET_ROLLED_BACK,
    CONSUMER_OFFSET_MOVED,
    CONSUMER_REBALANCED,
    CONSUMER_SHUTDOWN,
)
from sim import trace
from sim.env import ms

CHECK_EVERY_US = 1_000_000  # how often `settle_ms: auto` samples the state
STATE_KINDS = ("brokers_down", "backlog", "unowned_queues", "queues_owned_twice", "queues_starting", "offsets_uncommitted",
               "offsets_unpersisted", "requests_in_flight", "transactions_unresolved")
EVENT_KINDS = ("duplicates", "rebalances", "offset_rollbacks", "send_failures", "faults")
ADVICE = {  # one line each: what the kind means and what to do about it
    "brokers_down": "brokers were down or still starting (their queues are not judged)",
    "backlog": "messages were still waiting to be consumed",
    "unowned_queues": "queues had no owner (a rebalance was due)",
    "queues_owned_twice": "queues had two owners (a rebalance was half done)",
    "queues_starting": "queues were owned but their starting offset was not yet known",
    "offsets_uncommitted": "brokers' committed offsets lagged the consumers' (next persist or pull)",
    "offsets_unpersisted": "brokers' offset tables were not yet in consumerOffset.json",
    "requests_in_flight": "requests were still in flight",
    "transactions_unresolved": "half messages were still being checked back (transactionCheckInterval)",
    "duplicates": "duplicates were still being delivered",
    "rebalances": "rebalances still moved queues",
    "offset_rollbacks": "offsets were still rolled back or moved",
    "send_failures": "sends were still failing",
    "faults": "faults, crashes, restarts or consumer starts/stops happened",
}


def default_window_ms(sc: Any) -> int:
    """One heartbeat + one rebalance + one offset persistence round (module docstring)."""
    flush_ms = max((b.broker.flush_consumer_offset_interval_ms for b in sc.cluster.brokers), default=5_000)
    if not sc.consumers:
        return int(flush_ms)
    heartbeat_ms = max(c.client.heartbeat_broker_interval_ms for c in sc.consumers)
    persist_ms = max(c.client.persist_consumer_offset_interval_ms for c in sc.consumers)
    return int(heartbeat_ms + REBALANCE_WAIT_INTERVAL_US // 1000 + persist_ms + flush_ms)


def window_ms(sc: Any) -> int:
    return int(sc.quiet_window_ms) if sc.quiet_window_ms is not None else default_window_ms(sc)


@dataclass
class QuietWatch:
    """Follows a run's disturbances (from the ledger and the fault log, incrementally) and
    samples its state; `verdict(now_us)` gives the summary's `quiescence` entry."""

    world: Any
    ledger: Any
    window_us: int
    settle: str  # "auto" or "fixed"
    txn: Any = None  # the TxnLedger (analysis/checkers/txn_checker.py), for `transactions_unresolved`
    last_disturbance_us: int = 0
    _seen: dict[str, int] = field(default_factory=dict)  # how far each source was read (`_advance`)
    _fixed: list[int] = field(default_factory=list)  # scripted disturbance times (consumer starts/stops, actions)

    def __post_init__(self) -> None:
        sc = self.world.scenario
        self._fixed = sorted([ms(c.start_ms) for c in sc.consumers if c.start_ms] +
                             [ms(c.stop_ms) for c in sc.consumers if c.stop_ms is not None] +
                             [ms(a.at_ms) for a in sc.actions])

    def _sources(self) -> list[tuple[str, Any, Any]]:
        """(name, sequence, (record → its disturbance kind or None)) for every source, each
        sequence in time order and only ever appended to."""
        injector = self.world.injector
        log = injector.log if injector is not None else []
        final_counts = injector is not None and injector.final_heal_changed
        sources: list[tuple[str, Any, Any]] = [
            ("events", self.ledger.events, _event_kind),
            ("send_failed", self.ledger.send_failed_us, lambda t_us: "send_failures"),
            ("faults", log, lambda r: "faults" if r[3] != "all" or final_counts else None),
            ("fixed", self._fixed, lambda t_us: "faults"),
        ]
        sources += [(f"dups:{name}", unit.dups, lambda r: "duplicates") for name, unit in self.ledger.units.items()]
        return sources

    def _advance(self, now_us: int) -> None:
        """Fold the disturbances recorded since the last call (up to `now_us`) into
        `last_disturbance_us`: each source is read once over the whole run."""
        latest = self.last_disturbance_us
        for name, seq, kind_of in self._sources():
            i = self._seen.get(name, 0)
            while i < len(seq):
                item = seq[i]
                t_us = item if isinstance(item, int) else item[0]
                if t_us > now_us:
                    break
                if kind_of(item) is not None:
                    latest = max(latest, t_us)
                i += 1
            self._seen[name] = i
        self.last_disturbance_us = latest

    def disturbances_since(self, since_us: int, now_us: int) -> dict[str, int]:
        """Disturbances in (since_us, now_us] by kind (EVENT_KINDS); reads every source once more
        (the end of a run only)."""
        counts = dict.fromkeys(EVENT_KINDS, 0)
        for _name, seq, kind_of in self._sources():
            for item in seq:
                t_us = item if isinstance(item, int) else item[0]
                if since_us < t_us <= now_us:
                    kind = kind_of(item)
                    if kind is not None:
                        counts[kind] += 1
        return counts

    def state(self) -> dict[str, int]:
        """The state kinds (STATE_KINDS) counted now (module docstring)."""
        counts = dict.fromkeys(STATE_KINDS, 0)
        models = self.world.models
        masters = {m.broker_name: m for m in models.values()
                   if isinstance(m, Broker) and m.broker_id == 0 and m.node.up and not m.node.booting}
        counts["brokers_down"] = sum(1 for m in models.values()
                                     if isinstance(m, Broker) and (not m.node.up or m.node.booting))
        consumers = [m for m in models.values() if isinstance(m, PushConsumer)]
        groups: dict[str, list[PushConsumer]] = {}
        for c in consumers:
            groups.setdefault(c.group, []).append(c)
        for group, members in groups.items():
            live = [c for c in members if c.node.up and not c.node.booting and not c.node.stopped]
            if not live:
                continue
            if live[0].broadcasting:
                for c in live:
                    _broadcasting_member(c, masters, counts)
            else:
                _clustering_group(group, live, masters, counts)
        live_pop = {m.group for m in models.values() if isinstance(m, PopConsumer) and m.node.up
                    and not m.node.booting and not m.node.stopped}
        for pop in self.world.pops if live_pop else ():
            if pop.node.up and not pop.broker.slave:
                counts["backlog"] += pop.backlog(live_pop)
        for broker in masters.values():
            persisted = broker.offsets.persisted
            table = broker.offsets.table
            counts["offsets_unpersisted"] += sum(1 for key, off in table.items() if persisted.get(key) != off)
        for m in models.values():
            counts["requests_in_flight"] += _requests_in_flight(m)
        if self.txn is not None and self.txn.enabled:
            counts["transactions_unresolved"] = self.txn.unresolved()
        return counts

    def verdict(self, now_us: int, stopped: bool) -> dict[str, Any]:
        """The summary's `quiescence` entry at `now_us` (null `reached` for a stopped run)."""
        window = self.window_us
        self._advance(now_us)
        events = self.disturbances_since(max(0, now_us - window), now_us)
        state = self.state()
        start_us = self.last_disturbance_us
        quiet_state = not any(state.values())
        reached = None if stopped else (quiet_state and now_us - start_us >= window)
        unsettled = {k: n for k, n in {**state, **events}.items() if n}
        if reached is False and not unsettled:  # quiet now, but not for a whole window yet
            unsettled = {"quiet_for_ms": (now_us - start_us) // 1000}
        return {"reached": reached, "settle": self.settle, "window_ms": window // 1000,
                "at_ms": start_us // 1000 if reached else None, "checked_at_ms": now_us // 1000,
                "unsettled": unsettled}

    def quiet_now(self, now_us: int) -> bool:
        """For `settle_ms: auto`: quiet for a whole window at `now_us` (the ledger fed up to now)."""
        self._advance(now_us)
        start_us = self.last_disturbance_us
        return now_us - start_us >= self.window_us and not any(self.state().values())


def _event_kind(record: tuple) -> str | None:
    """The disturbance kind of one of the ledger's rare ownership records (ledger.events), if any."""
    kind = record[2]
    if kind == CONSUMER_REBALANCED:  # (t, node, kind, group, topic, queues, added, removed)
        return "rebalances" if record[6] or record[7] else None
    if kind in (BROKER_OFFSET_ROLLED_BACK, CONSUMER_OFFSET_MOVED):
        return "offset_rollbacks"
    if kind in (trace.NODE_CRASHED, CONSUMER_SHUTDOWN):
        return "faults"
    return None


def _clustering_group(group: str, live: list[PushConsumer], masters: dict[str, Broker],
                      counts: dict[str, int]) -> None:
    expected: dict[MessageQueue, None] = {}
    for c in live:
        for topic in c.subscriptions:  # the topic and %RETRY%group
            expected.update(dict.fromkeys(sorted(c.subscribe_info.get(topic, ()))))
    for mq in expected:
        master = masters.get(mq.broker_name)
        if master is None:
            continue
        owners = [c for c in live if (pq := c.process_queues.get(mq)) is not None and not pq.dropped]
        if not owners:
            counts["unowned_queues"] += 1
            continue
        if len(owners) > 1:
            counts["queues_owned_twice"] += 1
            continue
        offset = owners[0].offset_store.read_memory(mq)
        if offset < 0:
            counts["queues_starting"] += 1
            continue
        counts["backlog"] += max(0, master.store.max_offset(mq.topic, mq.queue_id) - offset)
        if master.offsets.query(group, mq.topic, mq.queue_id) != offset:
            counts["offsets_uncommitted"] += 1


def idle_units(world: Any) -> frozenset[str]:
    """The consumption units nobody is left to drain at the end: a group none of whose members is up
    (every one crashed for good or shut down), and a BROADCASTING member that is not up. Their
    never-consumed messages are `unconsumed`, not lost (analysis/checkers/metrics.py)."""
    members: dict[str, list[Any]] = {}
    for m in world.models.values():
        if isinstance(m, PushConsumer | PopConsumer):
            members.setdefault(m.group, []).append(m)
    idle: set[str] = set()
    for group, nodes in members.items():
        live = [m for m in nodes if m.node.up and not m.node.stopped]
        if not live:
            idle.add(group)
        idle.update(f"{group}/{m.node.name}" for m in nodes if m not in live and getattr(m, "broadcasting", False))
    return frozenset(idle)


def _broadcasting_member(c: PushConsumer, masters: dict[str, Broker], counts: dict[str, int]) -> None:
    store = c.offset_store
    for mq, pq in sorted(c.process_queues.items()):
        master = masters.get(mq.broker_name)
        if master is None or pq.dropped:
            continue
        offset = store.read_memory(mq)
        if offset < 0:
            counts["queues_starting"] += 1
            continue
        counts["backlog"] += max(0, master.store.max_offset(mq.topic, mq.queue_id) - offset)
        if store.read_local_file(mq) != offset:
            counts["offsets_unpersisted"] += 1


def _requests_in_flight(model: Any) -> int:
    node = model.node
    if not node.up:
        return 0
    pull = getattr(model, "_on_pull_bound", None)
    polls = getattr(model, "long_polls", ())  # a POP consumer's pops (models/consumer/pop_consumer.py)
    return sum(1 for entry in node._pending.values()
               if (entry[0] is not pull or pull is None) and entry[0] not in polls)


def warning_lines(q: dict[str, Any], fixed_settle_ms: int) -> list[str]:
    """What `rmqsim run` prints when a run with a fixed `settle_ms` ended unquiet."""
    if q.get("reached") is not False:
        return []
    moved = ", ".join(f"{kind} {n}" for kind, n in q["unsettled"].items())
    why = "; ".join(ADVICE[k] for k in q["unsettled"] if k in ADVICE) or \
        f"the cluster had been quiet for only {q['unsettled'].get('quiet_for_ms', 0) / 1000:g} s"
    return [f"the cluster was still changing when the run ended at {q['checked_at_ms'] / 1000:g} s "
            f"(quiet window {q['window_ms'] / 1000:g} s): {moved}",
            f"  {why}; the counts may change with a longer settle",
            f"  fix: settle_ms: auto (runs until quiet for {q['window_ms'] / 1000:g} s, at most max_settle_ms), "
            f"or a settle_ms longer than {fixed_settle_ms / 1000:g} s"]
