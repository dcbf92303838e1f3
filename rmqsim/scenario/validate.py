"""Checks that span a scenario's sections, on values already type-checked (assembly edge).

pydantic checks each value where it stands; what it cannot see is how sections refer to each
other: fault targets and network links must be nodes, producers and consumers must use declared
topics, members of a consumer group must subscribe (and consume) alike, disk faults need a node with a disk,
an `expect:` metric needs the feature that measures it (`_NEEDS`: `failovers` a controller, `timer.*`
timer messages, ...), no setting makes every send fail (`_check_impossible`: a replica count a broker
group cannot meet, a producer whose every send is refused), and the sane maxima of the scenario's
`limits:` section. These checks run on the raw document
(so they report alongside pydantic's problems), but every value they use is first read through
the model's own field definition (`FieldReader`): a value pydantic rejects is `INVALID` here,
and a check that needs it is skipped instead of tripping over a wrong type (`consumers: 5`,
`group: [g]`). pydantic reports the value itself.

A node whose name or instance count is invalid makes the set of node names uncertain: fault
targets are then checked only where no invalid entry could explain them.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from models.broker.config import BROKER_SERVICES
from models.consumer.allocate import java_split
from models.consumer.allocate_setup import naming_room
from models.message import record_bytes, retry_topic
from models.version import V4
from sim.config import render_path
from sim.faults import CLIENT_KINDS, DISK_KINDS
from sim.inputs import short
from sim.limits import DRAW_CAP, HARD_MAX_NODES

INVALID: Any = type("Invalid", (), {"__repr__": lambda self: "INVALID"})()
LISTED_NODES = 12  # node names shown in a "not a node here" message


class FieldReader:
    """Reads fields of raw (unvalidated) entries exactly as a model reads them: each through a
    model of that one field, its definition and the model's config copied (a TypeAdapter of the
    bare annotation would read a field differently: a distribution's before-validators apply to
    its union as a whole only inside a model). The one-field models are made once a process, for
    every reader (a sweep validates each of its points)."""

    _readers: dict[tuple[type, str], type[BaseModel]] = {}

    def get(self, model: type[BaseModel], entry: Any, name: str) -> Any:
        """The validated value of `name` in `entry`, its default when absent, else INVALID."""
        if not isinstance(entry, dict):
            return INVALID
        info = model.model_fields[name]
        key = info.alias or name
        if key not in entry:  # a required field missing: pydantic reports it
            return INVALID if info.is_required() else info.get_default(call_default_factory=True)
        reader = self._readers.get((model, name))
        if reader is None:
            one: dict[str, Any] = {name: (info.annotation, copy.copy(info))}
            reader = self._readers[(model, name)] = create_model(
                f"{model.__name__}_{name}", __config__=ConfigDict(**model.model_config), **one)
        try:
            return getattr(reader.model_validate({key: entry[key]}), name)
        except (ValidationError, TypeError, ValueError):
            return INVALID

    def entries(self, model: type[BaseModel], container: Any, name: str) -> Any:
        """The raw elements of a list field (its default's, dumped, when absent), else INVALID."""
        if not isinstance(container, dict):
            return INVALID
        info = model.model_fields[name]
        if name not in container:
            if info.is_required():
                return INVALID
            return [m.model_dump() if isinstance(m, BaseModel) else m
                    for m in info.get_default(call_default_factory=True)]
        raw = container[name]
        return raw if isinstance(raw, list) else INVALID

    def section(self, container: Any, name: str) -> Any:
        """A mapping section (empty when absent), else INVALID."""
        if not isinstance(container, dict):
            return INVALID
        raw = container.get(name, {})
        return raw if isinstance(raw, dict) else INVALID


@dataclass
class Nodes:
    """The node names a scenario defines, as far as they are known."""

    owner: dict[str, str] = field(default_factory=dict)  # node name → the section defining it
    kinds: dict[str, str] = field(default_factory=dict)  # node name → "namesrv" | "broker" | "client"
    wildcards: list[str] = field(default_factory=list)  # names whose instance count is invalid
    complete: bool = True  # False: some node's name is unknown (invalid entry)

    def may_exist(self, name: str) -> bool:
        if name in self.owner or not self.complete:
            return True
        return any(name == base or (name.startswith(f"{base}-") and name[len(base) + 1:].isdigit())
                   for base in self.wildcards)

    def listing(self) -> str:
        names = list(self.owner)
        more = f"; ... and {len(names) - LISTED_NODES} more" if len(names) > LISTED_NODES else ""
        return "; ".join(names[:LISTED_NODES]) + more


@dataclass
class Context:
    root: type[BaseModel]  # the Scenario model
    read: FieldReader
    nodes: Nodes
    topics: list[str] | None  # declared topic names; None if unknown
    lacking: dict[str, str] | None = None  # feature → why the scenario lacks it (`_lacking`), once read

    def model(self, *path: str) -> type[BaseModel]:
        """The model class of a (list) section, e.g. model('cluster', 'brokers') → BrokerSpec."""
        model = self.root
        for name in path:
            model = _element_model(model.model_fields[name].annotation)
        return model


def listing(names: Any) -> str:
    """Names for a message, at most LISTED_NODES of them (the rest counted)."""
    names = list(names)
    more = f", ... and {len(names) - LISTED_NODES} more" if len(names) > LISTED_NODES else ""
    return ", ".join(names[:LISTED_NODES]) + more


def _element_model(annotation: Any) -> type[BaseModel]:
    """The model class inside an annotation (`list[BrokerSpec]`, `ClusterSpec`, `X | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        try:
            return _element_model(arg)
        except TypeError:
            continue
    raise TypeError(f"no model in {annotation!r}")


def cross_check(data: dict, root: type[BaseModel]) -> list[str]:
    """Every cross-section problem of the scenario document `data` (root: the Scenario model)."""
    ctx = Context(root, FieldReader(), Nodes(), None)
    limits = ctx.read.get(root, data, "limits")
    if limits is INVALID:  # reported by pydantic; judge by the default maxima meanwhile
        limits = root.model_fields["limits"].get_default(call_default_factory=True)
    problems = _collect_nodes(data, ctx, limits)
    ctx.topics = _topic_names(data, ctx)
    for check in (_check_client_topics, _check_topic_brokers, _check_groups, _check_roles,
                  _check_fault_targets, _check_links, _check_expect, _check_actions, _check_allocation,
                  _check_client_version, _check_impossible):
        problems += check(data, ctx)
    return problems + _check_limits(data, ctx, limits)


_METRIC_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")  # e.g. latency_ms.p99
SHOWN_KEY_CHARS = 80  # an `expect:` key shown as written; a longer one (or an odd one) is quoted and cut


def _check_expect(data: dict, ctx: Context) -> list[str]:
    """Every `expect:` key must be a metric the summary has (analysis/checkers/verdict.py). A key is
    shown as written only when it is a short metric-like path; otherwise quoted and cut (a
    10,000-character key is not echoed whole). A key that is not a string is pydantic's to report."""
    expect: Any = data.get("expect")
    if not isinstance(expect, dict) or not expect:  # nothing to check: the checkers' modules stay unimported
        return []
    from analysis.checkers.verdict import (
        EXPECT_AVAILABILITY,
        EXPECT_GUARANTEES,
        EXPECTABLE_BROKER_METRICS,
        EXPECTABLE_METRICS,
    )

    problems = []
    brokers = _broker_names(ctx)
    for key in expect if isinstance(expect, dict) else ():
        if not isinstance(key, str):
            continue
        if key == EXPECT_GUARANTEES:  # not a metric: which guarantees should hold or break
            problems += _check_expected_guarantees(expect[key], data, ctx)
            continue
        if key == EXPECT_AVAILABILITY:  # bounds by topic or group: the names must be the scenario's
            problems += _check_expected_availability(expect[key], data, ctx)
            continue
        where = f"expect.{key}" if len(key) <= SHOWN_KEY_CHARS and _METRIC_PATH.fullmatch(key) else \
            render_path(("expect", key))
        prefix, _, broker = key.partition(".")
        if prefix in EXPECTABLE_BROKER_METRICS and broker:
            if brokers is not None and broker not in brokers:
                problems.append(f"{where}: {short(broker)} is not a broker here (brokers: {listing(brokers)})")
            else:
                problems += [f"{where}: not measured: {why}" for why in _unmeasurable(key, data, ctx)]
            continue
        if key not in EXPECTABLE_METRICS:
            hint = difflib.get_close_matches(key, (*EXPECTABLE_METRICS, EXPECT_GUARANTEES), n=1, cutoff=0.6) \
                if len(key) <= SHOWN_KEY_CHARS else []
            problems.append(f"{where}: not a metric an expectation can bound" +
                            (f" (did you mean {hint[0]!r}?)" if hint else
                             f" (metrics: {_grouped(EXPECTABLE_METRICS)})"))
            continue
        problems += [f"{where}: not measured: {why}" for why in _unmeasurable(key, data, ctx)]
    return problems


# --- expectations the scenario can measure -------------------------------------------------------
# A metric the summary leaves null for want of a feature (analysis/checkers/verdict.py judges it "not
# measured", exit 3), or a cause count only a missing feature can raise (always 0): each needs a
# feature, named here by the metric's exact path or its head (`txn` covers `txn.pending`).

@dataclass(frozen=True)
class _Need:
    feature: str  # a key of `_lacking`'s answer
    paths: tuple[str, ...] = ()  # exact metric paths
    heads: tuple[str, ...] = ()  # every metric `<head>.<rest>`
    lead: str = ""  # said before why the feature is missing (a cause count: what alone raises it)


_NEEDS: tuple[_Need, ...] = (
    _Need("transactional", ("txn_violations",), ("txn",)),
    _Need("transactional", ("duplicates_by_cause.txn_double_commit",), lead="only a transactional producer causes it: "),
    _Need("timer", (), ("timer", "timer_delay_error_ms")),
    _Need("timer", ("duplicates_by_cause.timer_redelivered",), lead="only timer messages cause it: "),
    _Need("pop", ("duplicates_by_cause.invisible_time_expired", "duplicates_by_cause.ack_lost"),
          lead="only POP consumption causes it: "),
    _Need("controller", ("failovers",), ("two_masters_s",)),
    _Need("orderly", ("order_violations",), ("order_violations_by_cause",)),
    _Need("consumer", (), ("latency_ms", "consume_latency_ms")),
    _Need("queue_owner", ("rebalances",)),
    _Need("clustering_owner", ("unowned_queue_s",)),
    _Need("send_result", (), ("send_latency_ms", "send_latency_ms_in_faults")),
    _Need("fault_window", (), ("send_latency_ms_in_faults", "send_share_by_broker_in_faults")),
)


def _unmeasurable(key: str, data: dict, ctx: Context) -> list[str]:
    """Why the scenario cannot measure the expectable metric `key` (empty: it can, or an entry
    it depends on is invalid, which pydantic reports)."""
    needs = [n for n in _NEEDS if key in n.paths or key.partition(".")[0] in n.heads]
    if not needs:
        return []
    lacking = _lacking(data, ctx)
    return [n.lead + lacking[n.feature] for n in needs if n.feature in lacking]


def _lacking(data: dict, ctx: Context) -> dict[str, str]:
    """Feature → why the scenario surely lacks it (read once per document). A feature it has, or
    whose entries are invalid, is absent."""
    if ctx.lacking is None:
        ctx.lacking = {**_producer_gaps(data, ctx), **_consumer_gaps(data, ctx), **_controller_gap(data, ctx),
                       **_fault_gap(data, ctx)}
    return ctx.lacking


def _read_all(ctx: Context, data: dict, section: str, names: tuple[str, ...]) -> list[tuple] | None:
    """Each entry of list section `section` as a tuple of its fields `names`, as the model reads
    them; None when the section or any of those fields is invalid."""
    entries = ctx.read.entries(ctx.root, data, section)
    if entries is INVALID:
        return None
    model = ctx.model(section)
    rows = [tuple(ctx.read.get(model, entry, n) for n in names) for entry in entries]
    return None if any(INVALID in row for row in rows) else rows


def _producer_gaps(data: dict, ctx: Context) -> dict[str, str]:
    rows = _read_all(ctx, data, "producers", ("transaction", "deliver_time_ms", "send_mode"))
    if rows is None:
        return {}
    gaps = {"transactional": "no producer here is transactional (producers[].transaction)",
            "timer": "no producer here sends timer messages (producers[].deliver_time_ms)",
            "send_result": "no producer here waits for a send's result (every one is ONEWAY)" if rows else
            "the scenario has no producer (producers)"}
    has = {"transactional": any(t is not None for t, _, _ in rows),
           "timer": any(d is not None for _, d, _ in rows),
           "send_result": any(mode != "ONEWAY" for _, _, mode in rows)}
    return {feature: why for feature, why in gaps.items() if not has[feature]}


def _consumer_gaps(data: dict, ctx: Context) -> dict[str, str]:
    """Consumer features, as rmqsim/runner.py consumer_groups reads them: a FIFO POP group
    (`pop.orderly`) is orderly too; a POP group owns no queue, a BROADCASTING member every one."""
    rows = _read_all(ctx, data, "consumers", ("consume_mode", "pop", "client"))
    if rows is None:
        return {}
    none = "the scenario has no consumer (consumers)"
    gaps = {"consumer": none,
            "orderly": "no consumer group here consumes ORDERLY (consumers[].consume_mode, or pop.orderly): "
                       "order is checked only there" if rows else none,
            "pop": "no consumer group here consumes by POP (consumers[].pop)" if rows else none,
            "queue_owner": "every consumer group here consumes by POP (consumers[].pop), which owns no queue "
                           "and never rebalances" if rows else none,
            "clustering_owner": "no CLUSTERING consumer group here owns queues (a BROADCASTING member owns "
                                "every queue, a POP group none)" if rows else none}
    has = {"consumer": bool(rows),
           "orderly": any(mode == "ORDERLY" or (pop is not None and pop.orderly) for mode, pop, _ in rows),
           "pop": any(pop is not None for _, pop, _ in rows),
           "queue_owner": any(pop is None for _, pop, _ in rows),
           "clustering_owner": any(pop is None and client.message_model == "CLUSTERING" for _, pop, client in rows)}
    return {feature: why for feature, why in gaps.items() if not has[feature]}


def _controller_gap(data: dict, ctx: Context) -> dict[str, str]:
    """Controller mode (rmqsim/runner.py failover_checker): the cluster's controller and a broker
    group with `enable_controller_mode`. A group in controller mode without a controller is
    `_check_roles`'s to report."""
    cluster = ctx.read.section(data, "cluster")
    if cluster is INVALID:
        return {}
    controller = ctx.read.get(ctx.model("cluster"), cluster, "controller")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "brokers")
    if INVALID in (controller, entries):
        return {}
    modes = [ctx.read.get(ctx.model("cluster", "brokers"), entry, "broker") for entry in entries]
    if INVALID in modes or any(broker.enable_controller_mode for broker in modes):
        return {}
    if controller is None:
        return {"controller": "the scenario has no controller (cluster.controller), so no master fails over"}
    return {"controller": "no broker group here runs in controller mode (cluster.brokers[].broker."
                          "enable_controller_mode), so no master fails over"}


def _fault_gap(data: dict, ctx: Context) -> dict[str, str]:
    """A fault window (analysis/checkers/run_rows.py fault_windows): any fault but an instant one."""
    from analysis.checkers.run_rows import INSTANT

    sections = [_read_all(ctx, data, section, ("kind",)) for section in ("faults", "random_faults")]
    if None in sections or any(row[0] not in INSTANT for rows in sections for row in rows):
        return {}
    return {"fault_window": "the scenario has no fault with a window (faults, random_faults; "
                            f"{' and '.join(INSTANT)} have none)"}


def _grouped(metrics: Iterable[str]) -> str:
    """The metric paths, those under one prefix written once: `latency_ms.{p50, p99, max}`."""
    groups: dict[str, list[str]] = {}
    for metric in metrics:
        head, _, rest = metric.partition(".")
        groups.setdefault(head, []).append(rest)
    return ", ".join(head if rests == [""] else f"{head}.{{{', '.join(r for r in rests if r)}}}"
                     for head, rests in groups.items())


def _check_expected_availability(section: Any, data: dict, ctx: Context) -> list[str]:
    """`expect.availability`: a bound given by name names a topic producers send to
    (`max_write_outage_s`) or a consumer group (`max_recovery_s`); the values are pydantic's."""
    if not isinstance(section, dict):
        return []
    known = _guarantee_holders(data, ctx)
    producers = data.get("producers")
    topics = sorted({p.get("topic", "TopicTest") for p in producers if isinstance(p, dict)}) \
        if isinstance(producers, list) else None
    names = {"max_write_outage_s": (topics, "topic producers send to", "topics"),
             "max_recovery_s": (known[0] if known else None, "consumer group", "groups")}
    problems = []
    for key, (valid, what, plural) in names.items():
        stated = section.get(key)
        if not isinstance(stated, dict) or valid is None:
            continue
        problems += [f"{render_path(('expect', 'availability', key, name))}: {short(name)} is not a {what} here "
                     f"({plural}: {listing(valid)})" for name in stated if isinstance(name, str) and name not in valid]
    return problems


def _check_expected_guarantees(section: Any, data: dict, ctx: Context) -> list[str]:
    """`expect.guarantees` names guarantees the scenario has (analysis/checkers/verdict.py): at_least_once
    needs a consumer group, per_key_order an ORDERLY one, transactions a transactional producer;
    a group key must be a group with that guarantee. The values are pydantic's to check."""
    from analysis.checkers.verdict import AT_LEAST_ONCE, EXPECT_GUARANTEES, GUARANTEES, PER_KEY_ORDER, TRANSACTIONS

    known = _guarantee_holders(data, ctx)
    if not isinstance(section, dict) or known is None:  # not a mapping, or an invalid entry: pydantic's
        return []
    groups, orderly, transactional = known
    holders = {AT_LEAST_ONCE: groups, PER_KEY_ORDER: orderly}
    missing = {AT_LEAST_ONCE: "no consumer group here", PER_KEY_ORDER: "no consumer group here consumes ORDERLY",
               TRANSACTIONS: "no producer here is transactional (producers[].transaction)"}
    problems = []
    for name, stated in section.items():
        where = render_path(("expect", EXPECT_GUARANTEES, name))
        if not isinstance(name, str):  # pydantic's to report
            continue
        if name not in GUARANTEES:
            hint = difflib.get_close_matches(str(name), GUARANTEES, n=1, cutoff=0.6)
            problems.append(f"{where}: not a guarantee" + (f" (did you mean {hint[0]!r}?)" if hint else
                                                            f" (guarantees: {', '.join(GUARANTEES)})"))
        elif not (transactional if name == TRANSACTIONS else holders[name]):
            problems.append(f"{where}: {missing[name]}, so nothing promises {name}")
        elif isinstance(stated, dict) and name == TRANSACTIONS:
            problems.append(f"{where}: transactions are judged over the whole run, not by group: give hold or break")
        elif isinstance(stated, dict):
            problems += [f"{render_path(('expect', EXPECT_GUARANTEES, name, group))}: {short(group)} is not a "
                         f"consumer group with {name} here (groups: {listing(holders[name])})"
                         for group in stated if isinstance(group, str) and group not in holders[name]]
    return problems


def _guarantee_holders(data: dict, ctx: Context) -> tuple[list[str], list[str], bool] | None:
    """(consumer groups, the ORDERLY ones — a FIFO POP group, `pop.orderly`, is one, as rmqsim/runner.py
    consumer_groups reads it — whether a producer is transactional); None when an entry is invalid
    (pydantic reports it, and the sets are uncertain)."""
    consumers, producers = (ctx.read.entries(ctx.root, data, section) for section in ("consumers", "producers"))
    if INVALID in (consumers, producers):
        return None
    groups: dict[str, bool] = {}
    model = ctx.model("consumers")
    for entry in consumers:
        group, mode, pop = (ctx.read.get(model, entry, name) for name in ("group", "consume_mode", "pop"))
        if INVALID in (group, mode, pop):
            return None
        groups[group] = groups.get(group, False) or mode == "ORDERLY" or (pop is not None and pop.orderly)
    model = ctx.model("producers")
    transaction = [ctx.read.get(model, entry, "transaction") for entry in producers]
    if INVALID in transaction:
        return None
    return list(groups), [g for g, orderly in groups.items() if orderly], any(t is not None for t in transaction)


SLAVE = "SLAVE"


def broker_group_nodes(name: str, zone: str, role: str, replicas: list[Any] | None) -> list[tuple[str, str, str, int]]:
    """(node name, role, zone, broker id) of a broker group's brokers, master first: without
    replicas the group is one master; with them, the master is node `name` (brokerId 0) and the
    slaves `name-s1`, `name-s2`, ... (brokerId 1, 2, ... in list order)."""
    if replicas is None:
        return [(name, str(role), zone, 0)]
    masters = [(name, str(r.role), r.zone or zone, 0) for r in replicas if str(r.role) != SLAVE]
    slaves = [r for r in replicas if str(r.role) == SLAVE]
    return masters + [(f"{name}-s{i}", SLAVE, r.zone or zone, i) for i, r in enumerate(slaves, 1)]
# producer client options that exist only in 5.x (4.9.8 has no such field), with their "off" value
_V5_ONLY_PRODUCER_OPTIONS = (("start_detector_enable", False), ("send_msg_max_timeout_per_request_ms", -1),
                             ("enable_backpressure_for_async_mode", False))


def _check_client_version(data: dict, ctx: Context) -> list[str]:
    """5.x-only producer options are refused when the clients follow 4.x (4.9.8)."""
    version, client_version = (ctx.read.get(ctx.root, data, n) for n in ("version", "client_version"))
    resolved = client_version if client_version not in (None, INVALID) else version
    if resolved != V4:
        return []
    problems = []
    model = ctx.model("producers")
    client_model = _element_model(model.model_fields["client"].annotation)
    for i, entry in _client_entries(data, ctx, "producers"):
        client = ctx.read.section(entry, "client") if isinstance(entry, dict) else INVALID
        if client is INVALID:
            continue
        for name, off in _V5_ONLY_PRODUCER_OPTIONS:
            value = ctx.read.get(client_model, client, name)
            if value is not INVALID and value != off:
                problems.append(f"producers[{i}].client.{name}: a 5.x option (4.9.8 has none); the clients "
                                f"follow 4.x here (client_version / version)")
    return problems


def instance_names(name: str, count: int) -> list[str]:
    """Node names of a producer/consumer entry: `name`, or `name-1 … name-N` when count > 1."""
    return [name] if count == 1 else [f"{name}-{i}" for i in range(1, count + 1)]


def _collect_nodes(data: dict, ctx: Context, limits: Any) -> list[str]:
    """Register every node name (nameservers, brokers, then client instances); duplicates and
    the `count`/`max_nodes` maxima are problems."""
    read, nodes, problems = ctx.read, ctx.nodes, []
    declared: list[tuple[str, str, str]] = []  # (name, where, kind)
    cluster = read.section(data, "cluster")
    for section, kind in (("nameservers", "namesrv"), ("brokers", "broker")):
        model = ctx.model("cluster", section)
        entries = read.entries(ctx.model("cluster"), cluster, section) if cluster is not INVALID else INVALID
        declared += _declared(read, model, entries, f"cluster.{section}", kind, nodes)
        if section == "brokers" and entries is not INVALID:
            declared += _slave_nodes(read, model, entries)
    controller = read.section(cluster, "controller") if cluster is not INVALID else INVALID
    if isinstance(controller, dict) and controller:
        model = ctx.model("cluster", "controller")
        entries = read.entries(model, controller, "nodes")
        declared += _declared(read, ctx.model("cluster", "controller", "nodes"), entries,
                              "cluster.controller.nodes", "controller", nodes)
    clients: list[tuple[str, int, str]] = []  # (base name, count, where)
    for section in ("producers", "consumers"):
        model = ctx.model(section)
        entries = read.entries(ctx.root, data, section)
        if entries is INVALID:
            nodes.complete = False
            continue
        for i, entry in enumerate(entries):
            name, count = read.get(model, entry, "name"), read.get(model, entry, "count")
            if name is INVALID:
                nodes.complete = False
            elif count is INVALID:
                nodes.wildcards.append(name)  # reported by pydantic; its instances are unknown
            else:
                clients.append((name, count, f"{section}[{i}]"))
                if count > limits.max_instances:
                    problems.append(_over_limit(f"{section}[{i}].count", count, "max_instances",
                                                limits.max_instances, "instances"))
    total = len(declared) + sum(count for _name, count, _where in clients)
    if total > limits.max_nodes:
        problems.append(_over_limit("(top level)", total, "max_nodes", limits.max_nodes, "nodes in all"))
    if total > HARD_MAX_NODES:  # too many to list: fault targets cannot be checked
        nodes.complete = False
        return problems
    for name, where, kind in declared:
        problems += _claim(nodes, name, where, kind)
    for name, count, where in clients:
        for instance in instance_names(name, count):
            problems += _claim(nodes, instance, where, "client")
    return problems


def _declared(read: FieldReader, model: type[BaseModel], entries: Any, section: str, kind: str,
              nodes: Nodes) -> list[tuple[str, str, str]]:
    if entries is INVALID:
        nodes.complete = False
        return []
    out = []
    for i, entry in enumerate(entries):
        name = read.get(model, entry, "name")
        if name is INVALID:
            nodes.complete = False
        else:
            out.append((name, f"{section}[{i}]", kind))
    return out


def _slave_nodes(read: FieldReader, model: type[BaseModel], entries: list) -> list[tuple[str, str, str]]:
    """The slave nodes of each broker group with valid replicas (kind 'slave')."""
    out = []
    for i, entry in enumerate(entries):
        name, replicas = read.get(model, entry, "name"), read.get(model, entry, "replicas")
        if INVALID in (name, replicas) or replicas is None:
            continue
        for node, role, _zone, _id in broker_group_nodes(name, "", "", replicas):
            if role == SLAVE:
                out.append((node, f"cluster.brokers[{i}].replicas", "slave"))
    return out


def _claim(nodes: Nodes, name: str, where: str, kind: str) -> list[str]:
    if name in nodes.owner:
        return [f"{where}: node name {name!r} is already used by {nodes.owner[name]}"]
    nodes.owner[name] = where
    nodes.kinds[name] = kind
    return []


def _over_limit(path: str, value: float, limit_name: str, limit: float, what: str) -> str:
    return (f"{path}: {value:,g} {what} is above limits.{limit_name} ({limit:,g}); if that is meant, "
            f"raise it in the scenario's limits section (limits: {{{limit_name}: ...}})")


def _topic_names(data: dict, ctx: Context) -> list[str] | None:
    cluster = ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "topics") if cluster is not INVALID else INVALID
    if entries is INVALID:
        return None
    names = [ctx.read.get(ctx.model("cluster", "topics"), entry, "name") for entry in entries]
    return None if INVALID in names else names


def _client_entries(data: dict, ctx: Context, section: str) -> list[tuple[int, Any]]:
    entries = ctx.read.entries(ctx.root, data, section)
    return [] if entries is INVALID else list(enumerate(entries))


def _check_client_topics(data: dict, ctx: Context) -> list[str]:
    if ctx.topics is None:
        return []
    problems = []
    for section in ("producers", "consumers"):
        for i, entry in _client_entries(data, ctx, section):
            topic = ctx.read.get(ctx.model(section), entry, "topic")
            if topic is not INVALID and topic not in ctx.topics:
                problems.append(f"{section}[{i}].topic: topic {topic!r} is not declared in cluster.topics "
                                f"(declared: {listing(ctx.topics) or 'none'})")
    return problems


def _broker_names(ctx: Context) -> list[str] | None:
    if not ctx.nodes.complete:
        return None
    return [name for name, kind in ctx.nodes.kinds.items() if kind == "broker"]


def _check_topic_brokers(data: dict, ctx: Context) -> list[str]:
    brokers, cluster = _broker_names(ctx), ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "topics") if cluster is not INVALID else INVALID
    if brokers is None or entries is INVALID:
        return []
    problems = []
    for i, entry in enumerate(entries):
        names = ctx.read.get(ctx.model("cluster", "topics"), entry, "brokers")
        for name in [] if names is INVALID or names is None else dict.fromkeys(names):
            if name not in brokers:
                problems.append(f"cluster.topics[{i}].brokers: {name!r} is not a broker here "
                                f"(brokers: {listing(brokers)})")
    return problems


def _check_groups(data: dict, ctx: Context) -> list[str]:
    seen: dict[str, tuple[Any, Any]] = {}
    modes: dict[str, Any] = {}
    pops: dict[str, str | None] = {}
    problems = []
    model = ctx.model("consumers")
    for i, entry in _client_entries(data, ctx, "consumers"):
        group, topic, tags, mode = (ctx.read.get(model, entry, n) for n in ("group", "topic", "tags", "consume_mode"))
        if INVALID in (group, topic, tags):
            continue
        sub = (topic, tags)
        if group in seen and seen[group] != sub:
            problems.append(f"consumers[{i}].group: members of group {group!r} must subscribe alike "
                            f"(got {short(sub, 80)} and {short(seen[group], 80)})")
        seen.setdefault(group, sub)
        if mode is not INVALID and group in modes and modes[group] != mode:
            problems.append(f"consumers[{i}].consume_mode: members of group {group!r} consume alike "
                            f"(got {mode} and {modes[group]}): the order checker judges a group as one")
        modes.setdefault(group, mode)
        pop = ctx.read.get(model, entry, "pop")
        if pop is INVALID:
            continue
        kind = None if pop is None else pop.client
        if group in pops and pops[group] != kind:
            problems.append(f"consumers[{i}].pop: members of group {group!r} consume alike (POP with the same "
                            f"client, or pull): got {kind or 'pull'} and {pops[group] or 'pull'}")
        pops.setdefault(group, kind)
        if pop is not None and ctx.read.get(ctx.root, data, "version") == V4:
            problems.append(f"consumers[{i}].pop: POP consumption is 5.x only (version is 4.x)")
    return problems


def _check_roles(data: dict, ctx: Context) -> list[str]:
    """A broker group has exactly one master; a SLAVE needs one (give the group `replicas`); a
    controller-mode group needs the cluster's controllers, 5.x and no transient store pool."""
    cluster = ctx.read.section(data, "cluster")
    model = ctx.model("cluster", "brokers")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "brokers") if cluster is not INVALID else INVALID
    controller = ctx.read.get(ctx.model("cluster"), cluster, "controller") if cluster is not INVALID else INVALID
    version = ctx.read.get(ctx.root, data, "version")
    problems = []
    for i, entry in enumerate([] if entries is INVALID else entries):
        replicas = ctx.read.get(model, entry, "replicas")
        store = ctx.read.get(model, entry, "store")
        broker = ctx.read.get(model, entry, "broker")
        if broker is not INVALID and broker.enable_controller_mode:
            problems += _controller_mode_problems(f"cluster.brokers[{i}]", controller, version, store)
        if replicas is INVALID:
            continue
        if replicas is None:
            if store is not INVALID and str(store.broker_role) == SLAVE:
                problems.append(f"cluster.brokers[{i}].store.broker_role: a SLAVE needs a master in its broker "
                                "group; give the group replicas, e.g. replicas: [{role: ASYNC_MASTER}, {role: SLAVE}]")
            continue
        masters = sum(1 for r in replicas if str(r.role) != SLAVE)
        if masters != 1:
            problems.append(f"cluster.brokers[{i}].replicas: a broker group has exactly one master "
                            f"(ASYNC_MASTER or SYNC_MASTER), got {masters}")
    return problems


def _controller_mode_problems(where: str, controller: Any, version: Any, store: Any) -> list[str]:
    problems = []
    if controller is None:
        problems.append(f"{where}.broker.enable_controller_mode: controller mode needs the cluster's controllers; "
                        "add cluster.controller, e.g. controller: {nodes: [{name: controller-1}, {name: "
                        "controller-2}, {name: controller-3}]}")
    if version == V4:
        problems.append(f"{where}.broker.enable_controller_mode: controller mode is 5.x only (version is 4.x)")
    if store is not INVALID and store.transient_store_pool_enable:
        problems.append(f"{where}.store.transient_store_pool_enable: not modelled together with controller mode "
                        "(a role change would have to move the write buffer); turn one off")
    return problems


# --- settings under which no send can succeed ------------------------------------------------------
# Each is refused here although RocketMQ's broker (BrokerStartup) starts with it: every send it
# touches fails, so a run of it could only say so. Which settings count is the models' own reading
# of RocketMQ 5.3.3 (4.9.8 under `version: 4.x`): CommitLog.asyncPutMessage (the minInSyncReplicas
# gate, controller mode) and handleHA (inSyncReplicas acknowledgements, the master's own included;
# an elected master is always a SYNC_MASTER), 4.x HAService.isSlaveOK, and the send path's refusals.
# What makes writes fail only sometimes is the lint's (rmqsim/scenario/lint.py).

SYNC_MASTER = "SYNC_MASTER"
CONTAINER_RULE = ("RocketMQ's broker starts with it, its broker container refuses it at start-up "
                  "('invalid replicas number')")


def _check_impossible(data: dict, ctx: Context) -> list[str]:
    return _impossible_replicas(data, ctx) + _impossible_sends(data, ctx)


def _impossible_replicas(data: dict, ctx: Context) -> list[str]:
    """5.x: `in_sync_replicas` and `min_in_sync_replicas` at most the group's replica count (its
    master and slaves); 4.x: a SYNC_MASTER has a slave (else every send is SLAVE_NOT_AVAILABLE)."""
    version, cluster = ctx.read.get(ctx.root, data, "version"), ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "brokers") if cluster is not INVALID else INVALID
    if INVALID in (version, entries):
        return []
    model, problems = ctx.model("cluster", "brokers"), []
    for i, entry in enumerate(entries):
        name, store, broker, replicas = (ctx.read.get(model, entry, k) for k in ("name", "store", "broker", "replicas"))
        if INVALID in (name, store, broker, replicas):
            continue
        group = _Group(f"cluster.brokers[{i}]", name, store, broker, replicas)
        problems += _v4_sync_master_alone(group) if version == V4 else _replica_counts(group)
    return problems


@dataclass(frozen=True)
class _Group:
    """A broker group as validated: where the file defines it, its name and settings."""

    where: str
    name: str
    store: Any
    broker: Any
    replicas: Any  # list[ReplicaSpec] | None

    @property
    def size(self) -> int:
        """Its replicas: the master and the slaves (one without `replicas`)."""
        return 1 if self.replicas is None else len(self.replicas)

    @property
    def slaves(self) -> int:
        return 0 if self.replicas is None else sum(1 for r in self.replicas if str(r.role) == SLAVE)

    def master(self) -> tuple[str, str] | None:
        """(role, key path) of its one master; None when it has none or several (`_check_roles`)."""
        if self.replicas is None:
            return str(self.store.broker_role), f"{self.where}.store.broker_role"
        masters = [(str(r.role), f"{self.where}.replicas[{j}].role") for j, r in enumerate(self.replicas)
                   if str(r.role) != SLAVE]
        return masters[0] if len(masters) == 1 else None

    def counted(self) -> str:
        """`2 replicas (its master and 1 slave)`."""
        detail = f" (its master and {self.slaves} slave{'s' if self.slaves != 1 else ''})" if self.master() else ""
        return f"{self.size} replica{'s' if self.size != 1 else ''}{detail}"


def _v4_sync_master_alone(g: _Group) -> list[str]:
    master = g.master()
    if master is None or master[0] != SYNC_MASTER or g.slaves:
        return []
    return [f"{master[1]}: a 4.x SYNC_MASTER without a slave answers every send SLAVE_NOT_AVAILABLE "
            "(HAService.isSlaveOK: no slave connected; the message is stored but never acknowledged SEND_OK), "
            f"so no send to {g.name!r} can succeed; give the group a slave (replicas: [{{role: SYNC_MASTER}}, "
            "{role: SLAVE}]), or use ASYNC_MASTER"]


def _replica_counts(g: _Group) -> list[str]:
    """5.x: each count above the group's replicas, with what it does there: every send to the
    group fails where the count acts; where 5.3.3 ignores it, no group of that size can meet it."""
    problems = []
    for key in ("in_sync_replicas", "min_in_sync_replicas"):
        value = getattr(g.store, key)
        if value > g.size:
            effect = _isr_effect(g, value) if key == "in_sync_replicas" else _min_isr_effect(g, value)
            problems.append(f"{g.where}.store.{key}: {value} is above the {g.counted()} of broker group {g.name!r}: "
                            f"{effect}; {CONTAINER_RULE}: set it to at most {g.size}, or add slaves (replicas)")
    return problems


def _isr_effect(g: _Group, value: int) -> str:
    """CommitLog.handleHA: a send waits for `inSyncReplicas` acknowledgements, the master's own
    included — a SYNC_MASTER's, or an elected master's (always SYNC_MASTER) unless
    allAckInSyncStateSet makes it wait for every SyncStateSet member instead."""
    controller, master = g.broker.enable_controller_mode, g.master()
    if controller and g.store.all_ack_in_sync_state_set:
        return ("5.3.3 ignores it here (all_ack_in_sync_state_set makes a send wait for every SyncStateSet member "
                f"instead), but no group of {g.size} can meet it")
    if not controller and (master is None or master[0] != SYNC_MASTER):
        return f"5.3.3 ignores it here (an ASYNC_MASTER waits for no slave), but no group of {g.size} can meet it"
    seconds = g.store.slave_timeout_ms / 1000
    wait = f"slave_timeout_ms ({seconds:g} s) for {value} acknowledgements that {g.size} replicas cannot give"
    if controller and g.store.min_in_sync_replicas > g.size:  # refused before by minInSyncReplicas
        return f"were min_in_sync_replicas met, every send to it would still wait {wait}, then answer FLUSH_SLAVE_TIMEOUT"
    return f"every send to it waits {wait}, then answers FLUSH_SLAVE_TIMEOUT: no send to {g.name!r} can succeed"


def _min_isr_effect(g: _Group, value: int) -> str:
    """CommitLog.asyncPutMessage in controller mode: fewer SyncStateSet members than
    minInSyncReplicas refuse the send before it is stored; outside it 5.3.3 reads the count only
    with enableSlaveActingMaster (not modelled)."""
    if not g.broker.enable_controller_mode:
        return (f"5.3.3 reads it only in controller mode (broker.enable_controller_mode; or with enableSlaveActingMaster, "
                f"not modelled), but no group of {g.size} can meet it")
    return (f"its SyncStateSet never has {value} members, so every send to it is refused before it is stored "
            f"(SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH): no send to {g.name!r} can succeed")


def _impossible_sends(data: dict, ctx: Context) -> list[str]:
    """A producer every send of which is refused: its topic hosted by no broker (`brokers: []`), its
    smallest message above the client's or every host's maximum size, its half messages refused by
    every host (reject_transaction_message), or (5.x) its timer messages by every host
    (timer_wheel_enable false: HookUtils.handleScheduleMessage answers SYSTEM_ERROR)."""
    hosting, brokers = _topic_hosting(data, ctx), _broker_settings(data, ctx)
    version = ctx.read.get(ctx.root, data, "version")
    if hosting is None or brokers is None or version is INVALID:
        return []
    model, problems = ctx.model("producers"), []
    names = ("topic", "message_bytes", "batch_size", "client", "transaction", "deliver_time_ms", "delay_level")
    for i, entry in _client_entries(data, ctx, "producers"):
        values = [ctx.read.get(model, entry, n) for n in names]
        if INVALID in values or values[0] not in hosting:
            continue
        topic, body, batch, client, transaction, deliver, delay = values
        at, hosts = hosting[topic]
        where = f"producers[{i}]"
        if not hosts:
            problems.append(f"{where}.topic: topic {topic!r} is hosted by no broker (cluster.topics[{at}].brokers is "
                            "empty): the producer finds no route, so no send of it can succeed")
            continue
        settings = [(b, *brokers[b]) for b in hosts]
        problems += _too_large(where, topic, _least_draw(body), batch, client, settings, version == V4)
        if transaction is not None and all(broker.reject_transaction_message for _b, _s, broker in settings):
            problems.append(f"{where}.transaction: every broker hosting {topic!r} ({listing(hosts)}) has "
                            "broker.reject_transaction_message: true and answers each half message NO_PERMISSION: "
                            "no send of this transactional producer can succeed")
        if version != V4 and deliver is not None and not delay and \
                not any(store.timer_wheel_enable for _b, store, _broker in settings):
            problems.append(f"{where}.deliver_time_ms: every broker hosting {topic!r} ({listing(hosts)}) has "
                            "store.timer_wheel_enable: false, and 5.3.3 then refuses every message with a delivery "
                            "time (SYSTEM_ERROR 'accurate timer message is not enabled'): no send of this producer "
                            "can succeed")
    return problems


def _topic_hosting(data: dict, ctx: Context) -> dict[str, tuple[int, list[str]]] | None:
    """Declared topic → (its index in cluster.topics, the broker groups hosting it); a topic whose
    `brokers` names none of the groups (a misspelt name: `_check_topic_brokers`) is left out."""
    brokers, cluster = _broker_names(ctx), ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "topics") if cluster is not INVALID else INVALID
    if brokers is None or entries is INVALID:
        return None
    model = ctx.model("cluster", "topics")
    out: dict[str, tuple[int, list[str]]] = {}
    for at, entry in enumerate(entries):
        name, hosts = ctx.read.get(model, entry, "name"), ctx.read.get(model, entry, "brokers")
        if INVALID in (name, hosts):
            return None
        named = brokers if hosts is None else [b for b in brokers if b in hosts]
        if named or not hosts:
            out.setdefault(name, (at, named))
    return out


def _broker_settings(data: dict, ctx: Context) -> dict[str, tuple[Any, Any]] | None:
    """Broker group name → (store, broker) settings; None when an entry is invalid."""
    cluster = ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "brokers") if cluster is not INVALID else INVALID
    if entries is INVALID:
        return None
    model = ctx.model("cluster", "brokers")
    out: dict[str, tuple[Any, Any]] = {}
    for entry in entries:
        name, store, broker = (ctx.read.get(model, entry, k) for k in ("name", "store", "broker"))
        if INVALID in (name, store, broker):
            return None
        out.setdefault(name, (store, broker))
    return out


def _least_draw(dist: Any) -> int:
    """A lower bound of the whole numbers `dist` draws (sim/dist.py rounds each draw, caps it at
    DRAW_CAP): a constant's value, a uniform's low end, an empirical's least value; 0 otherwise."""
    kind = getattr(dist, "dist", None)
    values = [dist.value] if kind == "constant" else [dist.low] if kind == "uniform" else \
        list(dist.values) if kind == "empirical" else [0]
    return max(0, math.floor(min(min(values), DRAW_CAP)))


def _too_large(where: str, topic: str, body: int, batch: int, client: Any,
               settings: list[tuple[str, Any, Any]], v4: bool) -> list[str]:
    """The producer's smallest send above its maxMessageSize (Validators.checkMessage: a message's
    body, a batch's encoded messages, at least their bodies), or above every host's: 5.3.3
    (MessageExtEncoder) measures a message's body and a batch's body, 4.9.8 a message's whole record
    (CommitLog's encoder) and a batch's body (DefaultMessageStore.putMessages)."""
    checked = body if batch == 1 else batch * body
    send, measure = ("message", f"has a {body:,}-byte body") if batch == 1 else \
        (f"batch ({batch} messages)", f"holds {checked:,} bytes of bodies")
    if checked > client.max_message_size_bytes:
        return [f"{where}.message_bytes: its smallest {send} {measure}, above client.max_message_size_bytes "
                f"({client.max_message_size_bytes:,}): the client refuses every send (MESSAGE_ILLEGAL), so none can "
                "succeed"]
    if v4 and batch == 1:  # no tag, key or property: the least a record can be
        checked, measure = record_bytes(topic, body), f"is a {record_bytes(topic, body):,}-byte record"
    if all(checked > store.max_message_size_bytes for _b, store, _broker in settings):
        limits = ", ".join(f"{b}: {store.max_message_size_bytes:,}" for b, store, _broker in settings[:LISTED_NODES])
        return [f"{where}.message_bytes: its smallest {send} {measure}, above store.max_message_size_bytes of every "
                f"broker hosting {topic!r} ({limits}): each refuses it (MESSAGE_ILLEGAL), so no send of this producer "
                "can succeed"]
    return []


def _check_actions(data: dict, ctx: Context) -> list[str]:
    """An action names a consumer group of the scenario (and a declared topic, if it gives one)."""
    groups = {}
    for _i, entry in _client_entries(data, ctx, "consumers"):
        group, topic = (ctx.read.get(ctx.model("consumers"), entry, n) for n in ("group", "topic"))
        if group is not INVALID:
            groups.setdefault(group, topic)
    problems = []
    model = ctx.model("actions")
    for i, action in _client_entries(data, ctx, "actions"):
        group, topic = ctx.read.get(model, action, "group"), ctx.read.get(model, action, "topic")
        if group is not INVALID and group not in groups:
            problems.append(f"actions[{i}].group: {group!r} is not a consumer group here "
                            f"(groups: {listing(groups) or 'none'})")
        if topic not in (INVALID, None) and ctx.topics is not None and topic not in ctx.topics:
            problems.append(f"actions[{i}].topic: topic {topic!r} is not declared in cluster.topics "
                            f"(declared: {listing(ctx.topics) or 'none'})")
    return problems


def _fault_refs(ctx: Context, model: type[BaseModel], fault: Any) -> list[tuple[str, str]]:
    """(key, node name) pairs a fault names, each typed value read as the model reads it."""
    refs = []
    for key in ("node", "src", "dst", "nodes", "groups"):
        if key not in model.model_fields:
            continue
        value = ctx.read.get(model, fault, key)
        if value is INVALID or value is None:
            continue
        if key == "groups":
            refs += [(f"groups[{g}]", name) for g, group in enumerate(value) for name in dict.fromkeys(group)]
        elif key == "nodes":
            refs += [("nodes", name) for name in dict.fromkeys(value)]
        else:
            refs.append((key, value))
    return refs


def _check_fault_targets(data: dict, ctx: Context) -> list[str]:
    """Each name a fault gives must be a node (a disk fault's, a broker's). An unknown name is
    reported once per fault, and past LISTED_NODES of them the rest are counted: groups built
    from YAML aliases can repeat a name thousands of times."""
    problems = []
    for section in ("faults", "random_faults"):
        model = ctx.model(section)
        for i, fault in _client_entries(data, ctx, section):
            kind = ctx.read.get(model, fault, "kind")
            unknown: dict[str, str] = {}  # name → the first key naming it
            for key, name in _fault_refs(ctx, model, fault):
                if not ctx.nodes.may_exist(name):
                    unknown.setdefault(name, key)
                elif kind in DISK_KINDS and key in ("node", "nodes") and \
                        ctx.nodes.kinds.get(name, "broker") not in ("broker", "slave"):
                    problems.append(f"{section}[{i}].{key}: {kind} needs a node with a disk (a broker); "
                                    f"{name!r} is a {ctx.nodes.kinds[name]}")
                elif kind in CLIENT_KINDS and key == "node" and ctx.nodes.kinds.get(name, "client") != "client":
                    problems.append(f"{section}[{i}].{key}: {kind} needs a producer or consumer node; "
                                    f"{name!r} is a {ctx.nodes.kinds[name]}")
                elif kind == "service_error" and key == "node":
                    problems += _service_problem(f"{section}[{i}]", name, ctx.read.get(model, fault, "service"),
                                                 ctx.nodes.kinds.get(name, "broker"))
            problems += _unknown_targets(f"{section}[{i}]", unknown, ctx.nodes)
    return problems


def _service_problem(where: str, node: str, service: Any, node_kind: str) -> list[str]:
    """A `service_error` names a service the node runs (BROKER_SERVICES: a master broker's)."""
    if node_kind != "broker":
        return [f"{where}.node: service_error needs a master broker (its services: "
                f"{', '.join(BROKER_SERVICES)}); {node!r} is a {node_kind}"]
    if isinstance(service, str) and service not in BROKER_SERVICES:
        hint = difflib.get_close_matches(service, BROKER_SERVICES, n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        return [f"{where}.service: a broker has no service {service!r} that can throw{did}; "
                f"one of: {', '.join(BROKER_SERVICES)}"]
    return []


def _unknown_targets(where: str, unknown: dict[str, str], nodes: Nodes) -> list[str]:
    names = list(unknown)
    out = [f"{where}.{unknown[name]}: {name!r} is not a node here (nodes: {nodes.listing()})"
           for name in names[:LISTED_NODES]]
    if len(names) > LISTED_NODES:
        out.append(f"{where}: {len(names) - LISTED_NODES} more names are not nodes here")
    return out


def _check_links(data: dict, ctx: Context) -> list[str]:
    network = ctx.read.section(data, "network")
    model = ctx.model("network", "links")
    entries = ctx.read.entries(ctx.model("network"), network, "links") if network is not INVALID else INVALID
    problems = []
    for i, link in enumerate([] if entries is INVALID else entries):
        for key in ("src", "dst"):
            name = ctx.read.get(model, link, key)
            if name is not INVALID and not ctx.nodes.may_exist(name):
                problems.append(f"network.links[{i}].{key}: {name!r} is not a node here "
                                f"(nodes: {ctx.nodes.listing()})")
    return problems


def _check_limits(data: dict, ctx: Context, limits: Any) -> list[str]:
    problems = []
    duration, settle, most = (ctx.read.get(ctx.root, data, n) for n in ("duration_ms", "settle_ms", "max_settle_ms"))
    settle = most if settle == "auto" else settle  # `auto` settles for at most max_settle_ms
    if INVALID not in (duration, settle) and duration + settle > limits.max_sim_time_ms:
        problems.append(_over_limit("duration_ms", duration + settle, "max_sim_time_ms", limits.max_sim_time_ms,
                                    "ms of simulated time (duration_ms + settle_ms, or max_settle_ms for auto)"))
    for i, entry in _client_entries(data, ctx, "producers"):
        rate = ctx.read.get(ctx.model("producers"), entry, "rate_per_s")
        if rate is not INVALID and rate > limits.max_rate_per_s:
            problems.append(_over_limit(f"producers[{i}].rate_per_s", rate, "max_rate_per_s",
                                        limits.max_rate_per_s, "messages per second"))
    return problems


# --- allocation strategies (models/consumer/allocate_setup.py) -------------------------------------

def _topic_hosts(data: dict, ctx: Context) -> dict[str, tuple[int, list[str]]] | None:
    """Declared topic → (queues per broker, the brokers hosting it); None if not known."""
    brokers, cluster = _broker_names(ctx), ctx.read.section(data, "cluster")
    entries = ctx.read.entries(ctx.model("cluster"), cluster, "topics") if cluster is not INVALID else INVALID
    if brokers is None or entries is INVALID:
        return None
    model, out = ctx.model("cluster", "topics"), {}
    for entry in entries:
        name, queues, hosts = (ctx.read.get(model, entry, key) for key in ("name", "queues", "brokers"))
        if INVALID in (name, queues, hosts):
            return None
        out[name] = (queues, brokers if hosts is None else [b for b in brokers if b in hosts])
    return out


def _check_allocation(data: dict, ctx: Context) -> list[str]:
    """A consumer's allocation options must name what exists: CONFIG's queues, MACHINE_ROOM's
    rooms, and for MACHINE_ROOM_NEARBY by NAMING a room in every broker's and member's name."""
    hosts = _topic_hosts(data, ctx)
    if hosts is None:
        return []
    model, problems = ctx.model("consumers"), []
    for i, entry in _client_entries(data, ctx, "consumers"):
        name, group, topic, client = (ctx.read.get(model, entry, k) for k in ("name", "group", "topic", "client"))
        if INVALID in (name, group, topic, client) or topic not in hosts:
            continue
        where = f"consumers[{i}].client"
        problems += _check_queue_list(where, client, group, topic, hosts, _broker_names(ctx) or [])
        if client.message_model == "CLUSTERING":
            problems += _check_rooms(where, client, hosts[topic][1])
            problems += _check_naming(f"consumers[{i}]", name, client, hosts[topic][1], ctx)
    return problems


def _uses(client: Any, strategy: str) -> bool:
    """Whether `client` allocates with `strategy`, itself or as MACHINE_ROOM_NEARBY's inner one."""
    return client.allocate_message_queue_strategy == strategy or (
        client.allocate_message_queue_strategy == "MACHINE_ROOM_NEARBY" and client.machine_room_nearby_inner == strategy)


def _check_queue_list(where: str, client: Any, group: str, topic: str,
                      hosts: dict[str, tuple[int, list[str]]], brokers: list[str]) -> list[str]:
    problems = []
    if _uses(client, "CONFIG") and client.message_model == "CLUSTERING" and not client.message_queue_list:
        problems.append(f"{where}.message_queue_list: CONFIG allocates exactly the queues listed here, and none "
                        "are: the group would consume nothing (list {broker, queue_id} entries)")
    retry = retry_topic(group)
    for j, q in enumerate(client.message_queue_list):
        path, name = f"{where}.message_queue_list[{j}]", q.topic or topic
        if name not in (topic, retry):
            problems.append(f"{path}.topic: {short(name)} is neither the consumer's topic {topic!r} nor its retry topic "
                            f"{retry!r}")
        elif q.broker not in brokers:
            problems.append(f"{path}.broker: {q.broker!r} is not a broker here (brokers: {listing(brokers)})")
        elif q.broker not in hosts[topic][1]:
            problems.append(f"{path}.broker: {q.broker!r} does not host topic {topic!r} "
                            f"(hosts: {listing(hosts[topic][1]) or 'none'})")
        else:
            count = 1 if name == retry else hosts[topic][0]  # retry topics: SubscriptionGroupConfig.retryQueueNums
            if q.queue_id >= count:
                problems.append(f"{path}.queue_id: {q.queue_id} is not a queue of {name!r} on {q.broker!r} "
                                f"({'its only queue id is 0' if count == 1 else f'queue ids 0..{count - 1}'})")
    return problems


def _machine_room(broker: str) -> str | None:
    """The room AllocateMessageQueueByMachineRoom reads from a `<room>@<name>` broker name."""
    parts = java_split(broker, "@")
    return parts[0] if len(parts) == 2 else None


def _check_rooms(where: str, client: Any, brokers: list[str]) -> list[str]:
    if not _uses(client, "MACHINE_ROOM"):
        return []
    rooms = list(dict.fromkeys(r for r in map(_machine_room, brokers) if r is not None))
    known = f"rooms of the topic's brokers: {listing(rooms)}" if rooms else \
        "no broker of the topic is named '<room>@<name>'"
    if not client.consumeridcs:
        return [f"{where}.consumeridcs: MACHINE_ROOM allocates only queues of brokers named '<room>@<name>' whose "
                f"room is listed here, and none is ({known})"]
    return [f"{where}.consumeridcs[{k}]: {short(room)} is no broker's machine room ({known})"
            for k, room in enumerate(client.consumeridcs) if room not in rooms]


def _check_naming(where: str, name: str, client: Any, brokers: list[str], ctx: Context) -> list[str]:
    if client.allocate_message_queue_strategy != "MACHINE_ROOM_NEARBY" or client.machine_room_resolver != "NAMING":
        return []
    rule = "MACHINE_ROOM_NEARBY by NAMING reads the room before the first '@'"
    problems = [f"{where}.name: {name!r} names no machine room ({rule}: name it '<room>@{name}')"] \
        if naming_room(name) is None else []
    return problems + [f"{ctx.nodes.owner.get(b, 'cluster.brokers')}.name: {b!r} names no machine room, and "
                       f"{where} needs one ({rule}: name it '<room>@{b}')" for b in brokers if naming_room(b) is None]
