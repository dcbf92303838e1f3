"""Configuration lint: RocketMQ traps that give a wrong conclusion silently (assembly edge).

A scenario can be valid, run, and answer a question other than the one its author asked: a 5.x
SYNC_MASTER with the default `inSyncReplicas` 1 acknowledges like a lone master, a `version: 4.x`
broker keeps the 5.x transaction check interval, a consumer's offset persistence interval is
varied although every pull already carries the offset. Each such trap is a registered
`LintCheck` (a stable kebab-case id, one line saying the trap, one line saying the fix) in
`LINT_CHECKS`, beside the silently useless parts of rmqsim/scenario/useless_parts.py: one registry, which
the README and docs list is generated from. `lint(sc)` returns every finding of a validated
Scenario, each with its check id, the key path it concerns and a message specific to the file;
`rmqsim run` and `rmqsim validate` print them on stderr (`warning: <file>: <key.path>:
<message> [<id>]`, then `  fix: <fix>`) and go on, the exit code unchanged.

Settings under which no send can succeed at all (an `in_sync_replicas` above the group's replicas,
a 4.x SYNC_MASTER without a slave, ...) are not lint: validation refuses them
(rmqsim/scenario/validate.py `_check_impossible`); the lint warns where writes fail only sometimes.

Checks read only the validated tree (and `model_fields_set`, to tell a value the file wrote from
a default it left). Scripted faults are followed through time (rmqsim/scenario/useless_parts.py:
`Timeline`); random faults count where they can fire at all. Where the RocketMQ behaviour
depends on the line, `version` decides (4.x = 4.9.8, 5.x = 5.3.3, as in models/broker/broker.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from models.broker.config import clamp_ratio, delete_hours
from models.consumer.config import BROKER_SUSPEND_MAX_TIME_US, REBALANCE_WAIT_INTERVAL_US, MessageModel
from models.version import V4, V5
from rmqsim.scenario import useless_parts as useless

Finding = tuple[str, str]  # (key path, message)
SLAVE, SYNC_MASTER = "SLAVE", "SYNC_MASTER"
REBALANCE_WAIT_MS = REBALANCE_WAIT_INTERVAL_US // 1000  # RebalanceService waitInterval
HOLD_MS = BROKER_SUSPEND_MAX_TIME_US // 1000  # the longest a pull is held by long polling
MAX_PER_CHECK = 10  # findings printed per check; the rest are counted


@dataclass(frozen=True)
class LintCheck:
    """One registered check: `id` (stable, kebab-case), `summary` (the trap, one line), `fix` (how
    to fix it, one line); `find(sc)` gives its (key path, message) findings."""

    id: str
    summary: str
    fix: str
    find: Callable[[Any], Iterable[Finding]] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Lint:
    """One finding: the check's id, the key path, the message for this file, the check's fix;
    `more` > 0: this one stands for that many more findings of its check, past MAX_PER_CHECK."""

    id: str
    path: str
    message: str
    fix: str
    more: int = 0

    def lines(self, source: str) -> list[str]:
        """The two lines printed on stderr."""
        return [f"warning: {source}: {self.path}: {self.message} [{self.id}]", f"  fix: {self.fix}"]


def lint(sc: Any) -> list[Lint]:
    """Every finding of every registered check on a validated Scenario, in registry order; past
    MAX_PER_CHECK findings of one check the rest are counted in one more (a file of a thousand
    faults in the warm-up gets eleven warnings, not a thousand)."""
    out = []
    for check in LINT_CHECKS:
        found = list(check.find(sc))
        out += [Lint(check.id, path, message, check.fix) for path, message in found[:MAX_PER_CHECK]]
        if len(found) > MAX_PER_CHECK:
            more = len(found) - MAX_PER_CHECK
            out.append(Lint(check.id, found[MAX_PER_CHECK][0], f"and {more} more like the above, from this one on",
                            check.fix, more))
    return out


def _changed(config: Any, name: str) -> bool:
    """Does the file give `name` a value other than its default? (Writing a default out, as
    `rmqsim defaults` does, is not a choice to warn about.)"""
    return getattr(config, name) != type(config).model_fields[name].default


def _t(value_ms: float) -> str:
    return f"{value_ms:.3g} ms" if value_ms < 1000 else f"{value_ms / 1000:g} s"


# --- the cluster's shape ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Group:
    """A broker group: its index in cluster.brokers, spec, master role and where the file says it,
    and its slaves as (key path, node name)."""

    index: int
    spec: Any
    role: str
    role_path: str
    slaves: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def controller(self) -> bool:
        """Controller mode: the controllers elect the master, its slaves are there for failover."""
        return self.spec.broker.enable_controller_mode

    def awaits_slave(self, version: str) -> bool:
        """Does a send wait for a slave? 4.x SYNC_MASTER always; 5.x only with inSyncReplicas ≥ 2."""
        return self.role == SYNC_MASTER and (version == V4 or self.spec.store.in_sync_replicas > 1)


def _groups(sc: Any) -> list[Group]:
    out = []
    for i, b in enumerate(sc.cluster.brokers):
        if b.replicas is None:
            out.append(Group(i, b, str(b.store.broker_role), f"cluster.brokers[{i}].store.broker_role", ()))
            continue
        j = next(j for j, r in enumerate(b.replicas) if str(r.role) != SLAVE)
        slave_at = [j for j, r in enumerate(b.replicas) if str(r.role) == SLAVE]
        slaves = tuple((f"cluster.brokers[{i}].replicas[{j}]", f"{b.name}-s{k}") for k, j in enumerate(slave_at, 1))
        out.append(Group(i, b, str(b.replicas[j].role), f"cluster.brokers[{i}].replicas[{j}].role", slaves))
    return out


def _hosts(sc: Any) -> dict[str, list[str]]:
    """Topic → the broker groups hosting it."""
    return {t.name: [b.name for b in sc.cluster.brokers if t.brokers is None or b.name in t.brokers]
            for t in sc.cluster.topics}


def _consumed(sc: Any) -> dict[str, None]:
    """The broker groups hosting a topic some consumer reads (a dict used as an ordered set)."""
    hosts = _hosts(sc)
    return {name: None for c in sc.consumers for name in hosts[c.topic]}


def _master_downs(sc: Any, master: str, timeline: useless.Timeline) -> list[str]:
    """The faults that take `master` down, in words ("faults[0] at 15 s", "random_faults[1]")."""
    out = [f"faults[{o.source}] at {_t(o.start_ms)}" for o in timeline.of(master)]
    return out + [f"random_faults[{i}]" for i, r in _random_downs(sc) if master in r.nodes]


def _random_downs(sc: Any) -> list[tuple[int, Any]]:
    """The random crash and power-loss entries that may well fire in the run."""
    return [(i, r) for i, r in enumerate(sc.random_faults)
            if r.kind in useless.DOWN and useless.fire_chance(sc, r) >= useless.LIKELY_FIRE]


# --- SYNC_MASTER and slaves ------------------------------------------------------------------------

def _sync_master_no_isr(sc: Any) -> list[Finding]:
    return [(f"cluster.brokers[{g.index}].store.in_sync_replicas",
             f"{g.name!r} is a SYNC_MASTER with {len(g.slaves)} slave(s) but in_sync_replicas is "
             f"{g.spec.store.in_sync_replicas}: 5.x counts the master itself and waits for no slave, so it "
             "acknowledges every send like an ASYNC_MASTER")
            for g in _groups(sc)
            if sc.version == V5 and g.role == SYNC_MASTER and g.slaves and g.spec.store.in_sync_replicas <= 1
            and not g.controller]


def _sync_master_no_slave(sc: Any) -> list[Finding]:
    """A 5.x SYNC_MASTER alone that waits for no slave (in_sync_replicas 1). Alone under 4.x, or with
    in_sync_replicas above its one replica, no send can succeed: refused at validation
    (rmqsim/scenario/validate.py `_check_impossible`)."""
    return [(g.role_path, f"{g.name!r} is a SYNC_MASTER without a slave in its group: with in_sync_replicas 1, "
             "5.x acknowledges like an ASYNC_MASTER")
            for g in _groups(sc) if sc.version == V5 and g.role == SYNC_MASTER and not g.slaves
            and g.spec.store.in_sync_replicas <= 1]


def _replica_downs(sc: Any, g: Group, timeline: useless.Timeline) -> str:
    """`; here faults[0] at 20 s takes 'broker-a-s1' down`: the first fault taking a replica of `g` down."""
    for node in (g.name, *(name for _path, name in g.slaves)):
        downs = _master_downs(sc, node, timeline)
        if downs:
            return f"; here {downs[0]} takes {node!r} down"
    return ""


def _min_isr_every_replica(sc: Any) -> list[Finding]:
    """Controller mode (5.x): minInSyncReplicas equal to the group's replicas refuses every send while
    any of them is out of the SyncStateSet (CommitLog.asyncPutMessage). An election resets the set to
    the new master, so after a failover writes wait for the old master too."""
    out, timeline = [], useless.Timeline(sc)
    for g in _groups(sc):
        size, need = 1 + len(g.slaves), g.spec.store.min_in_sync_replicas
        if sc.version != V5 or not g.controller or not g.slaves or need != size:
            continue
        lag = _t(g.spec.store.ha_max_time_slave_not_catchup_ms)
        out.append((f"cluster.brokers[{g.index}].store.min_in_sync_replicas",
                    f"min_in_sync_replicas {need} is every replica of {g.name!r} (the master and {len(g.slaves)} "
                    "slave(s)): a send is refused (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH) whenever one of them is "
                    f"out of the SyncStateSet — a slave down, restarting or more than {lag} behind "
                    "(ha_max_time_slave_not_catchup_ms) — and after a failover until the old master is back and "
                    "caught up; enableAutoInSyncReplicas does not lower it in controller mode"
                    + _replica_downs(sc, g, timeline)))
    return out


def _min_isr_above_isr(sc: Any) -> list[Finding]:
    """Controller mode (5.x), allAckInSyncStateSet off: a send is refused below minInSyncReplicas
    members but, accepted, waits for only inSyncReplicas acknowledgements. RocketMQ's broker
    container refuses the pair at start-up ('invalid replicas number'); BrokerStartup runs it."""
    out = []
    for g in _groups(sc):
        store = g.spec.store
        if sc.version != V5 or not g.controller or store.all_ack_in_sync_state_set or \
                not store.in_sync_replicas < store.min_in_sync_replicas < 1 + len(g.slaves):
            continue
        waits = "no slave" if store.in_sync_replicas <= 1 else f"{store.in_sync_replicas - 1} slave(s)"
        out.append((f"cluster.brokers[{g.index}].store.min_in_sync_replicas",
                    f"min_in_sync_replicas {store.min_in_sync_replicas} is above in_sync_replicas "
                    f"{store.in_sync_replicas} in {g.name!r}: sends are refused (SYSTEM_ERROR) while fewer than "
                    f"{store.min_in_sync_replicas} replicas are in the SyncStateSet, yet an accepted send waits for "
                    f"{waits}: writes stop without the acknowledged messages being on more replicas (RocketMQ's broker "
                    "container refuses this pair at start-up, 'invalid replicas number'; the broker runs it)"))
    return out


def _slaves_without_reader(sc: Any) -> list[Finding]:
    out, timeline = [], useless.Timeline(sc)
    for g in _groups(sc):
        if not g.slaves or g.spec.broker.slave_read_enable or g.awaits_slave(sc.version) or g.controller or \
                _master_downs(sc, g.name, timeline):
            continue
        path, slave = g.slaves[0]
        refuses = "; 5.x slaves refuse every pull without slave_read_enable anyway" if sc.version == V5 else ""
        out.append((path, f"{slave!r} is never read: slave_read_enable is false and no fault takes its master "
                    f"{g.name!r} down (consumers turn to a slave only then{refuses}), and no send waits for it "
                    f"({g.role}): it changes nothing this run measures"))
    return out


def _slave_read_disabled(sc: Any) -> list[Finding]:
    out, timeline, consumed = [], useless.Timeline(sc), _consumed(sc)
    for g in _groups(sc):
        if sc.version != V5 or not g.slaves or g.spec.broker.slave_read_enable or g.name not in consumed or \
                g.controller:
            continue
        downs = _master_downs(sc, g.name, timeline)
        if downs:
            out.append((f"cluster.brokers[{g.index}].broker.slave_read_enable",
                        f"{g.name!r} goes down ({downs[0]}) and 5.x slaves refuse pulls while slave_read_enable "
                        f"is false: its queues are not consumed until it is back, although {g.slaves[0][1]!r} "
                        "holds their messages (4.x would read it)"))
    return out


# --- version: 4.x ----------------------------------------------------------------------------------

# (section, field, what 4.x does instead) for the 5.x settings a 4.x broker does not have
V5_ONLY = (
    ("store", "in_sync_replicas", "a 4.x SYNC_MASTER always waits for its slave"),
    ("store", "min_in_sync_replicas", "4.x has no controller mode, where 5.x reads it"),
    ("store", "all_ack_in_sync_state_set", "4.x has no controller mode, where 5.x reads it"),
    ("store", "wake_flush_when_put_message", "4.x wakes the flush thread on every put"),
    ("store", "wake_commit_when_put_message", "4.x wakes the commit thread on every put"),
    ("broker", "use_server_side_reset_offset", "4.x resets offsets through the clients"),
    ("broker", "transaction_op_batch_interval_ms", "4.x writes each op message at once"),
    ("broker", "transaction_op_msg_max_size_bytes", "4.x writes each op message at once"),
)


def _v5_only_settings(sc: Any) -> list[Finding]:
    out = []
    for i, b in enumerate(sc.cluster.brokers if sc.version == V4 else []):
        for section, name, instead in V5_ONLY:
            if _changed(getattr(b, section), name):
                out.append((f"cluster.brokers[{i}].{section}.{name}",
                            f"a 5.x setting (4.9.8 has none); under version 4.x rmqsim ignores it: {instead}"))
    return out


# --- clients ---------------------------------------------------------------------------------------

def _pull_period_ms(sc: Any, c: Any) -> tuple[float, str]:
    """About how often a queue of `c`'s topic is pulled, and how that was reckoned: a held pull
    returns when a message arrives (long polling), so once per message, at least pull_interval_ms
    apart and at most BROKER_SUSPEND_MAX_TIME apart."""
    rate = sum(p.rate_per_s * p.count * p.batch_size for p in sc.producers if p.topic == c.topic)
    spec = next(t for t in sc.cluster.topics if t.name == c.topic)
    queues = spec.queues * len(_hosts(sc)[c.topic])
    arrival_ms = 1000 * queues / rate if rate else math.inf
    period = max(c.client.pull_interval_ms, min(arrival_ms, HOLD_MS))
    how = (f"{rate:g} messages/s over {queues} queues" if rate else "no producer: each pull held 15 s") + \
        f", pull_interval_ms {c.client.pull_interval_ms:g}"
    return period, how


def _offset_persist(sc: Any) -> list[Finding]:
    out = []
    for i, c in enumerate(sc.consumers):
        persist = c.client.persist_consumer_offset_interval_ms
        if not _changed(c.client, "persist_consumer_offset_interval_ms") or \
                c.client.message_model is MessageModel.BROADCASTING:
            continue
        period, how = _pull_period_ms(sc, c)
        if persist > period:
            out.append((f"consumers[{i}].client.persist_consumer_offset_interval_ms",
                        f"{_t(persist)} is longer than the pulls of {c.name!r} (one a queue about every {_t(period)}: "
                        f"{how}); each pull carries the consumed offset to the broker (commitOffset), so the "
                        "broker's offsets follow the pulls and this interval decides little"))
    return out


def _orderly_without_orderly_send(sc: Any) -> list[Finding]:
    out, seen = [], set()
    for i, c in enumerate(sc.consumers):
        feeding = [p for p in sc.producers if p.topic == c.topic]
        fifo_pop = c.pop is not None and c.pop.orderly  # a FIFO POP group keeps the order of a queue too
        if (c.consume_mode != "ORDERLY" and not fifo_pop) or c.group in seen or not feeding:
            continue
        seen.add(c.group)
        if not any(p.send_mode == "ORDERLY" or p.selector == "hash" for p in feeding):
            out.append((f"consumers[{i}].pop.orderly" if fifo_pop else f"consumers[{i}].consume_mode",
                        f"group {c.group!r} consumes {c.topic!r} ORDERLY, but no producer sends to it orderly: "
                        "the messages of a key are spread over every queue, and an orderly listener keeps only "
                        "the order within one queue"))
    return out


POP_BATCH_SHARE_OF_INVISIBLE = 0.8  # pop-invisible-time-short: a batch's mean time above this share warns


def _pop_invisible_time_short(sc: Any) -> list[Finding]:
    """A POP consumer whose mean time to process what one receive returns is above 80 % of the
    invisible time: a batch that takes longer than the mean (listener times vary) has its last
    messages revived and consumed twice."""
    out = []
    for i, c in enumerate(sc.consumers):
        if c.pop is None:
            continue
        mean_ms = c.consume_time_ms.mean()
        # a SimpleConsumer thread processes its batch one by one; the push consumer's pool spreads it
        batch_ms = mean_ms * c.pop.batch if c.pop.client == "simple" else \
            mean_ms * max(1.0, c.pop.batch / c.client.consume_thread_max)
        if batch_ms > POP_BATCH_SHARE_OF_INVISIBLE * c.pop.invisible_duration_ms:
            out.append((f"consumers[{i}].pop.invisible_duration_ms",
                        f"{c.name!r} needs about {_t(batch_ms)} for the {c.pop.batch} messages of a receive "
                        f"(consume_time_ms mean {mean_ms:g} ms) but hides them for {_t(c.pop.invisible_duration_ms)}: "
                        "a slower batch's last messages are revived before their ack and consumed twice "
                        "(invisible_time_expired)"))
    return out


def _reconsume_zero(sc: Any) -> list[Finding]:
    return [(f"consumers[{i}].client.max_reconsume_times",
             f"{c.name!r} fails {c.failure_probability:.0%} of its consumptions and max_reconsume_times is 0: "
             f"every failed message goes to %DLQ%{c.group} at its first failure, never retried")
            for i, c in enumerate(sc.consumers) if c.failure_probability > 0 and c.client.max_reconsume_times == 0]


# --- time: warm-up, settle ---------------------------------------------------------------------------

def _faults_in_warmup(sc: Any) -> list[Finding]:
    if not sc.producers:
        return []
    return [(f"faults[{i}].at_ms", f"{f.kind} at {_t(f.at_ms)} is inside the warm-up (warmup_ms "
             f"{_t(sc.warmup_ms)}): messages sent before then are left out of latency statistics, so part of its "
             "effect is not measured, and the clients are still starting (routes, first rebalance)")
            for i, f in enumerate(sc.faults)
            if f.at_ms < sc.warmup_ms and f.at_ms < sc.duration_ms and f.kind not in ("heal", "restart", "shutdown")]


def _settle_before_reregister(sc: Any) -> list[Finding]:
    """A broker that restarts keeps no consumer registrations: they come back with each consumer's
    next heartbeat, and the rebalance that follows moves queues (rmqsim/quiescence.py)."""
    if sc.settle_auto or not sc.consumers:
        return []
    consumed = _consumed(sc)
    masters = [g.name for g in _groups(sc) if g.name in consumed]
    timeline = useless.Timeline(sc)
    backs = [(o.end_ms, f"{node!r} is back at {_t(o.end_ms)} (faults[{o.source}])")
             for node in masters for o in timeline.of(node)]
    backs += [(sc.duration_ms, f"{hit[0]!r} may be back only at the end of the fault phase "
                               f"({_t(sc.duration_ms)}, random_faults[{i}])")
              for i, r in _random_downs(sc) if (hit := [n for n in r.nodes if n in masters])]
    if not backs:
        return []
    back, what = max(backs)
    heartbeat = max(c.client.heartbeat_broker_interval_ms for c in sc.consumers)
    left = sc.duration_ms + sc.settle_ms - back
    if left >= heartbeat + REBALANCE_WAIT_MS:
        return []
    return [("settle_ms", f"{what}, {_t(left)} before the run ends: the consumers re-register with it only at "
             f"their next heartbeat (heartbeat_broker_interval_ms {_t(heartbeat)}) and the rebalance after that "
             f"moves queues, so the counts depend on settle_ms ({_t(sc.settle_ms)})")]


# --- expectations ------------------------------------------------------------------------------------

def _disk_holds_few_files(sc: Any) -> list[Finding]:
    out = []
    for g in _groups(sc):
        size, file = g.spec.disk.size_bytes, g.spec.store.mapped_file_size_commit_log_bytes
        warning = round(clamp_ratio(g.spec.store.disk_space_warning_level_ratio, 35, 90) * 100)
        if size is not None and 2 * file * 100 > size * warning:
            out.append((f"cluster.brokers[{g.index}].disk.size_bytes",
                        f"{g.name!r}'s disk ({size} bytes) holds fewer than two CommitLog files ({file} bytes each) "
                        f"below its disk-full mark ({warning} %): the clean task never deletes the file being written, "
                        "so once the disk is marked full nothing frees it and every send is refused"))
    return out


def _retention_never_runs(sc: Any) -> list[Finding]:
    out = []
    hours_run = {h % 24 for h in range(int(sc.duration_ms // 3_600_000) + 1)}
    for g in _groups(sc):
        store = g.spec.store
        if "file_reserved_time_ms" not in store.model_fields_set or store.file_reserved_time_ms >= sc.duration_ms \
                or g.spec.disk.size_bytes is not None:
            continue
        if not delete_hours(store) & hours_run:
            out.append((f"cluster.brokers[{g.index}].store.delete_when",
                        f"file_reserved_time_ms is {_t(store.file_reserved_time_ms)} but expired files are deleted only "
                        f"in the hours {store.delete_when!r} of the simulated day (the run starts at 00:00 and lasts "
                        f"{_t(sc.duration_ms)}), and no disk size can force it: no file is ever deleted"))
    return out


def _loss_stated(sc: Any) -> bool:
    """Does `expect` say acknowledged messages may be lost (at_least_once: break, or a `lost` bound
    that allows some)?"""
    stated = sc.expect.get("guarantees")
    outcome = (stated.root if stated is not None else {}).get("at_least_once", "hold")
    if outcome == "break" or (isinstance(outcome, dict) and "break" in outcome.values()):
        return True
    return any((key == "lost" or key.startswith("lost_by_cause.")) and (b.max is None or b.max > 0)
               for key, b in sc.expect.items() if key != "guarantees")


def _sending_near(sc: Any, senders: list[Any], group: Any, at_ms: float) -> bool:
    """One of `senders` (the producers to the group's topics) sends within a thorough-flush
    interval before `at_ms`: what could still be unflushed then."""
    since = at_ms - group.spec.store.flush_commit_log_thorough_interval_ms
    return any(p.start_ms <= at_ms and (p.stop_ms or sc.duration_ms) >= since for p in senders)


def _lossy(group: Any, kind: str) -> str | None:
    """Why `kind` on this master loses acknowledged messages by design, or None."""
    store = group.spec.store
    if str(store.flush_disk_type) != "ASYNC_FLUSH":
        return None
    if kind == "power_loss":
        return "ASYNC_FLUSH loses what was not yet flushed with the page cache"
    if kind == "process_crash" and store.transient_store_pool_enable:
        return "the transient store pool loses what was not yet committed to the page cache"
    return None


def _expected_loss_not_stated(sc: Any) -> list[Finding]:
    if _loss_stated(sc):
        return []
    consumed, hosts = _consumed(sc), _hosts(sc)
    groups = {g.name: g for g in _groups(sc) if not g.awaits_slave(sc.version) and g.name in consumed}
    senders = {name: [p for p in sc.producers if name in hosts[p.topic]] for name in groups}
    out = []
    for i, f in enumerate(sc.faults):
        g = groups.get(f.node or "")
        why = _lossy(g, f.kind) if g is not None and f.at_ms < sc.duration_ms else None
        if why and g is not None and _sending_near(sc, senders[g.name], g, f.at_ms):
            out.append((f"faults[{i}]", f"{f.kind} of {f.node!r} at {_t(f.at_ms)}: {why}, and expect does not say "
                        "acknowledged messages may be lost: the run will be judged invalid (at_least_once breaks)"))
    for i, r in enumerate(sc.random_faults):
        hit = [groups[n] for n in r.nodes if n in groups and _lossy(groups[n], r.kind)]
        if hit and useless.fire_chance(sc, r) >= useless.LIKELY_FIRE and senders[hit[0].name]:
            out.append((f"random_faults[{i}]", f"{r.kind} of {hit[0].name!r}: {_lossy(hit[0], r.kind)}, and expect "
                        "does not say acknowledged messages may be lost: the run will be judged invalid"))
    return out


# --- controller mode ----------------------------------------------------------------------------------

def _controller_even_quorum(sc: Any) -> list[Finding]:
    spec = sc.cluster.controller
    if spec is None or len(spec.nodes) % 2 or not any(g.controller for g in _groups(sc)):
        return []
    n = len(spec.nodes)
    return [("cluster.controller.nodes", f"{n} controllers need {n // 2 + 1} for a majority, so they survive "
             f"{n // 2 - 1} failure(s), as {n - 1} would: the extra one adds a node to lose, not safety")]


def _controller_acks_ahead(sc: Any) -> list[Finding]:
    """A controller-mode master taken down or cut off while sends and reads run ahead of the slaves."""
    if _loss_stated(sc):
        return []
    out, timeline, spec, consumed = [], useless.Timeline(sc), sc.cluster.controller, _consumed(sc)
    masters = {g.name: g for g in _groups(sc) if g.controller and g.slaves and g.name in consumed
               and not g.spec.store.all_ack_in_sync_state_set and g.spec.store.in_sync_replicas <= 1}
    for i, f in enumerate(sc.faults):
        nodes = f.node_names() if f.kind == "partition" else [f.node or ""]
        hit = next((masters[n] for n in nodes if n in masters), None)
        if hit is None or f.kind not in ("process_crash", "power_loss", "partition") or f.at_ms >= sc.duration_ms:
            continue
        down = sum(1 for n in spec.nodes if timeline.down(n.name, f.at_ms) is not None)
        if len(spec.nodes) - down > len(spec.nodes) // 2:  # no quorum: no election, no failover to lose in
            out.append((f"faults[{i}]", f"{f.kind} of {hit.name!r}'s master at {_t(f.at_ms)} under controller mode "
                        "with all_ack_in_sync_state_set off: SEND_OK and the consumers' reads run ahead of the "
                        "slaves, so the failover can lose acknowledged messages, and expect does not say so"))
    return out


# --- the registry --------------------------------------------------------------------------------------

LINT_CHECKS: tuple[LintCheck, ...] = (
    LintCheck("producer-never-sends", "a producer starts after the run ends, or stops before it starts: it sends "
              "nothing", "start it before duration_ms and stop it after it starts", useless.producers_never_sending),
    LintCheck("consumer-never-starts", "a consumer starts after the run (and its settle phase) ends: it never "
              "consumes", "start it before duration_ms + settle_ms", useless.consumers_never_starting),
    LintCheck("fault-after-run", "a scripted fault at or after duration_ms is never injected",
              "move at_ms before duration_ms, or lengthen duration_ms", useless.faults_after_run),
    LintCheck("restart-of-up-node", "a restart of a node that is up (no crash, power loss or shutdown before "
              "it) does nothing", "crash, power off or shut down the node before restarting it, or drop the restart",
              useless.restarts_of_up_nodes),
    LintCheck("warmup-covers-run", "the warm-up is as long as the run: no message is measured for latency",
              "make warmup_ms shorter than duration_ms", useless.warmup_covering_run),
    LintCheck("fault-on-down-node", "a fault hits a node that is down (crashed, not yet started, stopped or shut "
              "down and not restarted since) for as long as the fault lasts: it does nothing",
              "schedule it while the node is up, or target a node that is up", useless.faults_on_down_nodes),
    LintCheck("random-fault-never-fires", "a random fault can (almost) never fire within the run: its mean "
              "interval or min_up_ms is beyond duration_ms, or its target starts after the fault phase",
              "raise rate_per_hour (about 3600 / duration in s per hour for one fault a run), lower min_up_ms, or "
              "use a scripted fault", useless.random_faults_never_firing),
    LintCheck("group-without-producer", "a consumer group subscribes to a topic no producer sends to: it "
              "consumes nothing", "add a producer for the topic, or subscribe the group to a topic that has one",
              useless.groups_without_producer),
    LintCheck("sync-master-no-isr", "a 5.x SYNC_MASTER with in_sync_replicas <= 1 acknowledges sends without "
              "waiting for a slave, like an ASYNC_MASTER (RocketMQ 5's inSyncReplicas default 1)",
              "set store.in_sync_replicas: 2 (the master and one slave) to wait for a slave, or say ASYNC_MASTER",
              _sync_master_no_isr),
    LintCheck("sync-master-no-slave", "a 5.x SYNC_MASTER without a slave and with in_sync_replicas 1 acknowledges "
              "like an ASYNC_MASTER (without a slave, 4.x or in_sync_replicas >= 2 fail every send: refused by validation)",
              "give the group a slave (replicas: [{role: SYNC_MASTER}, {role: SLAVE}]), or use ASYNC_MASTER",
              _sync_master_no_slave),
    LintCheck("min-isr-every-replica", "a 5.x controller-mode min_in_sync_replicas equal to the group's replica "
              "count: one replica out of the SyncStateSet (down, restarting, behind) refuses every send, and a "
              "failover leaves writes refused until the old master is back", "set min_in_sync_replicas below the "
              "replica count (2 of 3 survives one replica down), or add a slave", _min_isr_every_replica),
    LintCheck("min-isr-above-isr", "a 5.x controller-mode min_in_sync_replicas above in_sync_replicas "
              "(all_ack_in_sync_state_set off): sends are refused when slaves drop out, yet accepted ones wait for "
              "fewer acknowledgements", "raise in_sync_replicas to min_in_sync_replicas, or set "
              "all_ack_in_sync_state_set: true, or lower min_in_sync_replicas", _min_isr_above_isr),
    LintCheck("slave-without-reader", "a slave that no consumer reads (slave_read_enable false, its master never "
              "down) and no send waits for: it changes nothing the run measures", "take its master down in faults "
              "(5.x also needs broker.slave_read_enable: true), make the master wait for it, or drop the slave",
              _slaves_without_reader),
    LintCheck("slave-read-disabled", "a 5.x master goes down while its slaves refuse pulls (slave_read_enable "
              "false, the default): its queues stall until it is back", "set broker.slave_read_enable: true for "
              "consumers to read the slave meanwhile (as 4.x does), or expect the stall", _slave_read_disabled),
    LintCheck("v5-only-setting", "version 4.x with a 5.x-only broker setting: 4.9.8 has no such setting and "
              "rmqsim ignores it", "drop the setting, or use version: 5.x", _v5_only_settings),
    LintCheck("offset-persist-decides-little", "persist_consumer_offset_interval_ms is changed but longer than the pull "
              "interval, while every pull carries the commit offset: the interval decides little",
              "to make it decide, pull less often (pull_interval_ms above it); to bound re-reads after a broker "
              "crash, tune the broker's flush_consumer_offset_interval_ms", _offset_persist),
    LintCheck("orderly-without-orderly-send", "an ORDERLY consumer group whose topic has no orderly producer "
              "(send_mode ORDERLY or selector: hash): a key's messages are spread over queues, so order is not "
              "kept", "send with send_mode: ORDERLY (and keys > 0) to the topic, or consume CONCURRENTLY",
              _orderly_without_orderly_send),
    LintCheck("reconsume-times-zero", "max_reconsume_times 0 with consumption failures: every failed message goes "
              "to the DLQ at once, never retried", "leave max_reconsume_times at -1 (16 retries) or set the "
              "retries you mean", _reconsume_zero),
    LintCheck("pop-invisible-time-short", "a POP consumer takes on average more than 80 % of the invisible "
              "time to process one receive's batch: a slower batch's last messages come back before they are acked",
              "raise pop.invisible_duration_ms above the batch's processing time, or lower pop.max_message_num "
              "(or give the consumer more threads)", _pop_invisible_time_short),
    LintCheck("fault-in-warmup", "a fault inside the warm-up: its effect on latency is partly left out of the "
              "statistics, and it hits clients that are still starting", "schedule it after warmup_ms, or shorten "
              "warmup_ms", _faults_in_warmup),
    LintCheck("settle-before-reregister", "a fixed settle_ms ends before the consumers' next heartbeat and "
              "rebalance after a broker restart: the counts depend on when the run ends", "use settle_ms: auto, "
              "or settle one heartbeat and one rebalance round (50 s by default) past the last broker restart",
              _settle_before_reregister),
    LintCheck("disk-holds-few-files", "a disk (disk.size_bytes) smaller than two CommitLog files below its "
              "disk-full mark: the file being written is never deleted, so a full disk stays full",
              "make store.mapped_file_size_commit_log_bytes at most a tenth of the disk (1MiB for a 16MiB disk), "
              "or enlarge disk.size_bytes", _disk_holds_few_files),
    LintCheck("retention-never-runs", "a shortened file_reserved_time_ms while the run never reaches a delete_when "
              "hour (run time 0 is 00:00) and no disk size forces deletion: retention deletes nothing",
              "add the run's hours to store.delete_when (e.g. '00'), or give the broker a disk.size_bytes",
              _retention_never_runs),
    LintCheck("controller-even-quorum", "an even number of controllers: a majority of 2k needs k+1, so 2k "
              "controllers survive no more failures than 2k-1", "use an odd number (3 or 5)", _controller_even_quorum),
    LintCheck("controller-acks-ahead", "a controller-mode master goes down or is cut off with "
              "all_ack_in_sync_state_set off: acknowledged messages can be lost in the failover, and the "
              "expectation does not say so", "set store.all_ack_in_sync_state_set: true (sends wait for every "
              "SyncStateSet member, consumers read only what all hold), or state the loss (expect: {guarantees: "
              "{at_least_once: break}})", _controller_acks_ahead),
    LintCheck("expected-loss-not-stated", "a fault that loses acknowledged messages by design (power loss under "
              "ASYNC_FLUSH, a crash with the transient store pool) without an expectation saying so",
              "state it (expect: {guarantees: {at_least_once: break}}), or use SYNC_FLUSH / a SYNC_MASTER that "
              "waits", _expected_loss_not_stated),
)
