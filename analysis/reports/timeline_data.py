"""The cluster timeline of one run, read off its trace (Jepsen's timeline, the Dashboard's
consumer progress): who held which queue when, each queue's offsets, broker registrations,
failed sends, and when each node was down. The per-run report draws it
(analysis/reports/timeline_figures.py).

Everything comes from trace records, read on demand (`RunData.table`, with the checks
analysis/reports/run_data.py makes), string columns dictionary-encoded so that a run of millions of
records costs NumPy arrays, not Python objects:

- `outages`: node → [start, end) seconds it was down: `node.crashed` to the next
  `node.restarted` (which a broker records once it serves again), a `pause` fault window, and a
  consumer's graceful `consumer.shutdown` to the end of the run.
- `ownership`: for each queue of a subscribed topic (retry topics left out), per group, the
  intervals a consumer held it — `consumer.queue_started` to `consumer.queue_dropped`, or to the
  consumer's crash or shutdown, or the end of the run — with the broker's lock grants and
  refusals (`broker.lock_granted`, `broker.lock_refused`) for orderly groups, and the rebalances
  that moved queues (`consumer.rebalanced`).
- `masters`: each broker group's master over time — in controller mode from the `broker.role`
  records (a node is master from its role record until its next one or its crash), else the
  configured master — never while its node is down; the spans with no live master (the group's
  queues unwritable), and the elections (`controller.elected`) and role changes to mark.
- `queue_offsets`: per queue and group, sampled at the end of each time bin: the max offset (the
  newest `broker.stored` queue offset + 1 in the queue's broker group: only its master stores,
  so after a failover the new master's), the broker's committed offset (the current master's:
  its `broker.offset_committed`, `broker.offset_loaded` at its start,
  `broker.offset_rolled_back`, and what it synced from the old master while a slave,
  `broker.offset_synced`; detail kinds a run writes only with `--trace`: None when the trace has
  no commit) and each owner's consumed offset (the highest queue offset its listener took, + 1,
  from where it started the queue, over the intervals it held it). A bin that overlaps a span
  of the queue's group without a live master is NaN in every series, so a line breaks there
  instead of running through it.
- `broker_events`: per broker node, its registrations with the name server (`broker.registered`,
  the 30 s heartbeat), the name server dropping it (`namesrv.broker_unregistered`), consumer
  clients registering and leaving (`broker.client_registered` / `_unregistered`, detail kinds).
- `send_failures`: failed sends (`producer.send_failed`) per time bin by reason.
- `latency_p99_by_broker`: the send latency p99 per broker per second of send time, NaN in a
  second without a measured send to that broker (a gap, not a line through an outage).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.compute as pc

from analysis.reports import run_data as rd
from models.records import (
    BROKER_CLIENT_REGISTERED,
    BROKER_CLIENT_UNREGISTERED,
    BROKER_LOCK_GRANTED,
    BROKER_LOCK_REFUSED,
    BROKER_OFFSET_COMMITTED,
    BROKER_OFFSET_LOADED,
    BROKER_OFFSET_ROLLED_BACK,
    BROKER_OFFSET_SYNCED,
    BROKER_REGISTERED,
    BROKER_ROLE,
    BROKER_STORED,
    CONSUMER_CONSUMED,
    CONSUMER_QUEUE_DROPPED,
    CONSUMER_QUEUE_STARTED,
    CONSUMER_REBALANCED,
    CONSUMER_SHUTDOWN,
    CONTROLLER_ELECTED,
    NAMESRV_BROKER_UNREGISTERED,
    PRODUCER_SEND_FAILED,
)
from sim.trace import NODE_CRASHED, NODE_RESTARTED

MAX_BINS = 600  # time bins of a series: 1 s up to 10 minutes, coarser beyond
SYSTEM_TOPIC = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "SCHEDULE_TOPIC", "TRANS_")
_SLAVE_RE = re.compile(r"(?P<group>.+)-s[0-9]+")


@dataclass(frozen=True, order=True)
class Queue:
    group: str
    broker: str  # the broker group's name (its master node's)
    topic: str
    queue_id: int

    @property
    def label(self) -> str:
        return f"{self.broker} {self.topic} q{self.queue_id}"


@dataclass
class Ownership:
    queues: list[Queue]
    held: dict[Queue, list[tuple[str, float, float, int]]]  # queue → (consumer, start s, end s, start offset)
    locks: dict[Queue, list[tuple[float, str]]]  # queue → (s, how: new / renewed / expired / refused)
    rebalances: list[tuple[float, str, str]]  # (s, group, consumer) of rounds that moved queues
    consumers: list[str]


@dataclass
class Offsets:
    bin_s: float
    x: np.ndarray  # the end of each bin, simulated s
    queues: list[Queue]
    max_offset: dict[Queue, np.ndarray]
    committed: dict[Queue, np.ndarray] | None  # None: the trace has no offset commits
    consumed: dict[Queue, dict[str, np.ndarray]]  # queue → consumer → its consumed offset (NaN when not held)
    consumers: list[str] = field(default_factory=list)


def _strings(table: Any, name: str) -> np.ndarray:
    """A string column as an object array sharing one str per distinct value (dictionary-encoded)."""
    if table.num_rows == 0:
        return np.zeros(0, object)
    encoded = pc.dictionary_encode(table.column(name)).combine_chunks()
    labels = np.asarray(encoded.dictionary.to_pylist() + [""], dtype=object)
    codes = encoded.indices.fill_null(len(labels) - 1).to_numpy(zero_copy_only=False)
    return labels[codes]


def _numbers(table: Any, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def read_columns(data: rd.RunData, kind: str, cols: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The columns of a kind (strings as shared objects), None when the trace has no such file."""
    table = data.table(kind, cols)
    if table is None:
        return None
    types = rd.kind_schema(kind)
    return {c: _strings(table, c) if str(types.field(c).type) == "string" else _numbers(table, c) for c in cols}


_read = read_columns


def cached(fn: Any) -> Any:
    """Compute once per RunData (several figures share an outage list, the ownership, the send
    latency per second): kept beside its trace tables, with a key no trace kind has."""
    import functools

    @functools.wraps(fn)
    def wrapper(data: rd.RunData, *args: Any) -> Any:
        key = (f"derived:{fn.__name__}", tuple(args))
        if key not in data.tables:
            data.tables[key] = fn(data, *args)
        return data.tables[key]
    return wrapper


def brokers_of(data: rd.RunData) -> list[str]:
    return [b["name"] for b in data.scenario.get("cluster", {}).get("brokers", []) if isinstance(b, dict)]


def broker_of_node(data: rd.RunData) -> dict[str, str]:
    """Broker node → its broker group (a master is named as its group, slaves `<group>-s<k>`)."""
    names = set(brokers_of(data))

    def of(node: str) -> str:
        match = _SLAVE_RE.fullmatch(node)
        return match.group("group") if node not in names and match and match.group("group") in names else node
    return _Memo(of)  # type: ignore[return-value]


class _Memo(dict):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: str) -> str:
        self[key] = value = self.fn(key)
        return value


def subscriptions(data: rd.RunData) -> dict[str, str]:
    """group → the topic it subscribes (resolved scenario)."""
    return {c["group"]: c["topic"] for c in data.scenario.get("consumers", [])}


def bins(data: rd.RunData) -> tuple[float, np.ndarray]:
    """(bin width s, end of each bin s): 1 s bins, coarser so that a run has at most MAX_BINS."""
    end = max(data.end_s, 1.0)
    width = float(max(1, math.ceil(end / MAX_BINS)))
    n = int(math.ceil(end / width))
    return width, np.minimum((np.arange(n) + 1) * width, end)


# ------------------------------------------------------------------------------ outages

@cached
def outages(data: rd.RunData) -> dict[str, list[tuple[float, float]]]:
    """node → the [start, end) simulated seconds it was down (module docstring), in time order."""
    events: list[tuple[float, int, str]] = []  # (s, 0 down / 1 up, node): at one instant, down first
    for kind, up in ((NODE_CRASHED, 0), (NODE_RESTARTED, 1), (CONSUMER_SHUTDOWN, 0)):
        cols = _read(data, kind, ("t_us", "node"))
        if cols:
            events += [(t / 1e6, up, str(n)) for t, n in zip(cols["t_us"].tolist(), cols["node"], strict=True)]
    out: dict[str, list[tuple[float, float]]] = {}
    down_since: dict[str, float] = {}
    for t, up, node in sorted(events):
        if not up and node not in down_since:
            down_since[node] = t
        elif up and node in down_since:
            out.setdefault(node, []).append((down_since.pop(node), t))
    for node, t in down_since.items():
        out.setdefault(node, []).append((t, data.end_s))
    for w in data.windows:
        if w["kind"] == "pause":
            out.setdefault(str(w["target"]), []).append((w["start_ms"] / 1000, w["end_ms"] / 1000))
    return {node: _merged(spans) for node, spans in sorted(out.items())}


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def down_mask(x: np.ndarray, width: float, spans: list[tuple[float, float]]) -> np.ndarray:
    """Bins (ending at `x`, `width` wide) that overlap any of `spans`."""
    mask = np.zeros(len(x), bool)
    for start, end in spans:
        mask |= (x > start) & (x - width < end)
    return mask


# ------------------------------------------------------------------------------ masters

ELECTION, ROLE = "election", "role"
MASTER = "master"
ROLE_MARK_GAP_S = 1.0  # a role change this close after an election that names the node is the election's
FENCED_MARK_S = 1.0  # a node fenced (started, no role from the controller yet) this long is marked


@dataclass(frozen=True)
class Mark:
    """An election (`controller.elected`) or a broker's role change (`broker.role`) to mark on a time axis."""

    t_s: float
    group: str  # the broker group
    kind: str  # ELECTION or ROLE
    text: str  # the label: "election: broker-a-s1 master of broker-a (epoch 2)"
    short: str  # for a small panel: "broker-a-s1 elected"
    startup: bool = False  # the group's first election (no master before it): not drawn


@dataclass
class Masters:
    """Each broker group's master over time (module docstring, `masters`)."""

    controller: bool  # roles from `broker.role` records (controller mode); else the configured masters
    spans: dict[str, list[tuple[float, float, str]]]  # group → (start s, end s, master node), in time order
    unavailable: dict[str, list[tuple[float, float]]]  # group → [start, end) s without a live master
    marks: list[Mark]  # in time order
    end_s: float  # the run's end (a span to it includes it)

    def drawn(self) -> list[Mark]:
        """The marks a figure draws: every election and role change but the start-up ones."""
        return [m for m in self.marks if not m.startup]

    def elections(self) -> list[Mark]:
        return [m for m in self.marks if m.kind == ELECTION]

    def master_at(self, group: str, x: np.ndarray) -> np.ndarray:
        """The master node of `group` at each time `x` (s), "" when it had none (a later master wins
        while two act at once)."""
        out = np.full(len(x), "", dtype=object)
        for start, end, node in sorted(self.spans.get(group, []), key=lambda s: s[0]):
            out[(x >= start) & ((x < end) | (end >= self.end_s))] = node
        return out


@cached
def masters(data: rd.RunData) -> Masters:
    """Who was each broker group's master when. Controller mode (the trace has `broker.role`
    records): a node is master from its `broker.role` master record until a later role record of
    it or its crash (analysis/checkers/failover_checker.py's rule). Otherwise each group's master is
    its configured master (the node named as the group). Either way a master is not live while its
    node is down (`outages`: crashed, paused). A group is unavailable (no live master) from its first
    master on whenever none is live; a group that never had one, the whole run. Marks: every
    election and every role change after a node's start-up."""
    roles = read_columns(data, BROKER_ROLE, ("t_us", "node", "broker_name", "role", "epoch"))
    elected = read_columns(data, CONTROLLER_ELECTED, ("t_us", "broker_name", "master", "old_master", "epoch"))
    down = outages(data)
    marks = _election_marks(elected)
    controller = False
    if roles and len(roles["t_us"]):
        controller = True
        spans = _role_spans(data, roles)
        marks += _role_marks(roles, elected, data.end_s)
    else:
        spans = {g: [(0.0, data.end_s, g)] for g in brokers_of(data)}
    spans = {g: _minus(s, down) for g, s in spans.items()}
    groups = sorted(set(spans) | set(brokers_of(data)))
    unavailable = {g: _uncovered(spans.get(g, []), data.end_s) for g in groups}
    return Masters(controller, {g: spans.get(g, []) for g in groups}, unavailable,
                   sorted(marks, key=lambda m: (m.t_s, m.kind != ELECTION)), data.end_s)


def _role_spans(data: rd.RunData, roles: dict[str, np.ndarray]) -> dict[str, list[tuple[float, float, str]]]:
    events = [(t, 1, str(n), str(g), str(r)) for t, n, g, r in
              zip(roles["t_us"].tolist(), roles["node"], roles["broker_name"], roles["role"], strict=True)]
    crashed = read_columns(data, NODE_CRASHED, ("t_us", "node"))
    if crashed:
        events += [(t, 0, str(n), "", "") for t, n in zip(crashed["t_us"].tolist(), crashed["node"], strict=True)]
    out: dict[str, list[tuple[float, float, str]]] = {}
    since: dict[str, tuple[float, str]] = {}  # node → (master since s, group)
    for t, _order, node, group, role in sorted(events, key=lambda e: (e[0], e[1])):
        if role == MASTER:
            since.setdefault(node, (t / 1e6, group))
            out.setdefault(group, [])
        elif node in since:
            start, g = since.pop(node)
            out[g].append((start, t / 1e6, node))
    for node, (start, g) in since.items():
        out[g].append((start, data.end_s, node))
    return {g: sorted(s) for g, s in out.items()}


def _minus(spans: list[tuple[float, float, str]], down: dict[str, list[tuple[float, float]]]
           ) -> list[tuple[float, float, str]]:
    """Master spans without the times their node was down (a paused master serves nobody)."""
    out = []
    for start, end, node in spans:
        pieces = [(start, end)]
        for d0, d1 in down.get(node, []):
            pieces = [p for a, b in pieces for p in ((a, min(b, d0)), (max(a, d1), b)) if p[1] > p[0]]
        out += [(a, b, node) for a, b in pieces]
    return sorted(out)


def _uncovered(spans: list[tuple[float, float, str]], end_s: float) -> list[tuple[float, float]]:
    """[start, end) s from the first span's start to `end_s` that no span covers; all of [0, end_s)
    without spans."""
    if not spans:
        return [(0.0, end_s)] if end_s > 0 else []
    merged = _merged([(a, b) for a, b, _n in spans])
    gaps = [(b, c) for (_a, b), (c, _d) in zip(merged, merged[1:], strict=False) if c > b]
    return gaps + ([(merged[-1][1], end_s)] if merged[-1][1] < end_s else [])


def _election_marks(elected: dict[str, np.ndarray] | None) -> list[Mark]:
    out: list[Mark] = []
    seen: set[str] = set()
    if not elected:
        return out
    for t, group, master, old, epoch in zip(elected["t_us"].tolist(), elected["broker_name"], elected["master"],
                                            elected["old_master"], elected["epoch"].tolist(), strict=True):
        group, master = str(group), str(master)
        startup = not str(old) and group not in seen
        seen.add(group)
        if master:
            text, short = f"election: {master} master of {group} (epoch {epoch})", f"{master} elected"
        else:
            text, short = f"election for {group}: no live member to elect (epoch {epoch})", f"{group}: none elected"
        out.append(Mark(int(t) / 1e6, group, ELECTION, text, short, startup))
    return out


def _role_marks(roles: dict[str, np.ndarray], elected: dict[str, np.ndarray] | None, end_s: float) -> list[Mark]:
    """A mark per role change after a node's start-up (its first role, and its first role after the
    start-up `fenced`, are not marked), but the new master's own promotion right after the election
    naming it, and a `fenced` shorter than FENCED_MARK_S (a restart's first instant)."""
    promoted: dict[tuple[str, int], float] = {}
    if elected:
        promoted = {(str(m), int(e)): t / 1e6 for t, m, e in
                    zip(elected["t_us"].tolist(), elected["master"], elected["epoch"].tolist(), strict=True)}
    rows = sorted(zip(roles["t_us"].tolist(), roles["node"], roles["broker_name"], roles["role"],
                      roles["epoch"].tolist(), strict=True), key=lambda r: r[0])
    nxt: dict[int, float] = {}
    last_seen: dict[str, int] = {}
    for i in range(len(rows) - 1, -1, -1):
        nxt[i] = rows[last_seen[rows[i][1]]][0] / 1e6 if rows[i][1] in last_seen else end_s
        last_seen[rows[i][1]] = i
    out: list[Mark] = []
    prev: dict[str, str] = {}
    settled: set[str] = set()  # nodes past their start-up (a role other than fenced)
    for i, (t, node, group, role, epoch) in enumerate(rows):
        node, group, role, t_s = str(node), str(group), str(role), t / 1e6
        before = prev.get(node)
        prev[node] = role
        startup = node not in settled
        if role != "fenced":
            settled.add(node)
        if startup or role == before:
            continue
        if role == MASTER and t_s - promoted.get((node, int(epoch)), -math.inf) <= ROLE_MARK_GAP_S:
            continue
        if role == "fenced":
            if nxt[i] - t_s < FENCED_MARK_S:
                continue
            text = f"{node} fenced: no role from the controller (takes no writes)"
        elif before == "fenced":
            text = f"{node} rejoined {group} as {role} (epoch {epoch})"
        else:
            text = f"{node}: {before} → {role} (epoch {epoch})"
        out.append(Mark(t_s, group, ROLE, text, f"{node} → {role}"))
    return out


# ------------------------------------------------------------------------------ ownership

@cached
def ownership(data: rd.RunData) -> Ownership | None:
    """Queue ownership per consumer (module docstring); None when the trace has no queue starts."""
    started = _read(data, CONSUMER_QUEUE_STARTED, ("t_us", "node", "group", "topic", "broker", "queue_id", "offset"))
    if not started or not len(started["t_us"]):
        return None
    dropped = _read(data, CONSUMER_QUEUE_DROPPED, ("t_us", "node", "group", "topic", "broker", "queue_id")) or {}
    events: list[tuple[int, int, str, Queue | None, int]] = []  # (t_us, 0 end / 1 start, consumer, queue, offset)
    for cols, what in ((dropped, 0), (started, 1)):
        if not cols:
            continue
        offsets = cols["offset"].tolist() if what else [-1] * len(cols["t_us"])
        for t, node, group, topic, broker, qid, offset in zip(cols["t_us"].tolist(), cols["node"], cols["group"],
                                                              cols["topic"], cols["broker"], cols["queue_id"].tolist(),
                                                              offsets, strict=True):
            if not str(topic).startswith(SYSTEM_TOPIC):
                events.append((t, what, str(node), Queue(str(group), str(broker), str(topic), int(qid)), offset))
    for kind in (NODE_CRASHED, CONSUMER_SHUTDOWN):  # a consumer that crashes or shuts down holds nothing
        cols = _read(data, kind, ("t_us", "node"))
        events += [(t, 0, str(n), None, -1) for t, n in zip(cols["t_us"].tolist(), cols["node"], strict=True)] \
            if cols else []
    held: dict[Queue, list[tuple[str, float, float, int]]] = {}
    open_: dict[tuple[str, Queue], tuple[float, int]] = {}
    for t, what, node, queue, offset in sorted(events, key=lambda e: (e[0], e[1])):
        now = t / 1e6
        if what == 1:
            open_.setdefault((node, queue), (now, offset))  # started again without a drop: the first start holds
            continue
        for key in [k for k in open_ if k[0] == node and (queue is None or k[1] == queue)]:
            start, first = open_.pop(key)
            held.setdefault(key[1], []).append((node, start, now, first))
    for (node, queue), (start, first) in open_.items():
        held.setdefault(queue, []).append((node, start, data.end_s, first))
    subs = subscriptions(data)
    queues = sorted(set(held) | set(_stored_queues(data, subs)))
    locks = _locks(data)
    rebalanced = _read(data, CONSUMER_REBALANCED, ("t_us", "node", "group", "topic", "added", "removed")) or {}
    moves: list[tuple[float, str, str]] = []
    if rebalanced:
        moved = (rebalanced["added"] + rebalanced["removed"]) > 0
        moves = [(t / 1e6, str(g), str(n)) for t, g, n, topic, m in
                 zip(rebalanced["t_us"].tolist(), rebalanced["group"], rebalanced["node"], rebalanced["topic"],
                     moved.tolist(), strict=True) if m and not str(topic).startswith(SYSTEM_TOPIC)]
    consumers = sorted({h[0] for spans in held.values() for h in spans}, key=natural)
    return Ownership(queues, {q: sorted(held.get(q, []), key=lambda h: h[1]) for q in queues},
                     {q: locks.get(q, []) for q in queues}, moves, consumers)


def natural(name: str) -> tuple:
    """c-2 before c-10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", name))


def _stored_queues(data: rd.RunData, subs: dict[str, str]) -> list[Queue]:
    """The queues that stored messages of a subscribed topic, once per subscribing group."""
    stored = _read(data, BROKER_STORED, ("node", "topic", "queue_id"))
    if not stored or not len(stored["node"]):
        return []
    of = broker_of_node(data)
    seen = set(zip(stored["node"], stored["topic"], stored["queue_id"].tolist(), strict=True))
    return [Queue(g, of[str(n)], str(t), int(q)) for n, t, q in seen for g, topic in subs.items() if t == topic]


def _locks(data: rd.RunData) -> dict[Queue, list[tuple[float, str]]]:
    out: dict[Queue, list[tuple[float, str]]] = {}
    of = broker_of_node(data)
    for kind in (BROKER_LOCK_GRANTED, BROKER_LOCK_REFUSED):
        cols = _read(data, kind, ("t_us", "node", "group", "topic", "queue_id")
                     + (("how",) if kind == BROKER_LOCK_GRANTED else ()))
        if not cols:
            continue
        hows = cols["how"] if kind == BROKER_LOCK_GRANTED else ["refused"] * len(cols["t_us"])
        for t, node, group, topic, qid, how in zip(cols["t_us"].tolist(), cols["node"], cols["group"], cols["topic"],
                                                   cols["queue_id"].tolist(), hows, strict=True):
            if not str(topic).startswith(SYSTEM_TOPIC):
                out.setdefault(Queue(str(group), of[str(node)], str(topic), int(qid)), []).append((t / 1e6, str(how)))
    return out


def owned_counts(own: Ownership, x: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(consumer → queues it held at each time `x`, queues nobody held at `x`): the aggregated view."""
    counts = {c: np.zeros(len(x), np.int64) for c in own.consumers}
    anyone = np.zeros((len(own.queues), len(x)), bool)
    for i, q in enumerate(own.queues):
        for consumer, start, end, _offset in own.held[q]:
            inside = (x >= start) & (x < end)
            counts[consumer] += inside
            anyone[i] |= inside
    return counts, (~anyone).sum(axis=0)


# ------------------------------------------------------------------------------ offsets

def codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(integer code of each value, the distinct values by code, first seen first): a key for NumPy
    grouping (a hash per value; no sort of Python objects)."""
    items = values.tolist()
    uniques = list(dict.fromkeys(items))
    index = {v: i for i, v in enumerate(uniques)}
    found = np.fromiter((index[v] for v in items), np.int64, len(items))
    out = np.empty(len(uniques), dtype=object)
    out[:] = uniques
    return found, out


def key_runs(t_us: np.ndarray, keys: list[np.ndarray]) -> tuple[np.ndarray, dict[tuple, tuple[int, int]]]:
    """The order that sorts the rows by key (one value per array of `keys`), then time, and each
    distinct key's (start, end) run of rows in that order. Keys come back as tuples of values."""
    coded = [codes(k) for k in keys]
    order = np.lexsort((t_us, *[c for c, _u in reversed(coded)]))
    ks = [c[order] for c, _u in coded]
    change = np.zeros(len(order), bool)
    change[0] = True
    for k in ks:
        change[1:] |= k[1:] != k[:-1]
    starts = np.r_[np.flatnonzero(change), len(order)].tolist()
    return order, {tuple(u[k[s]] for k, (_c, u) in zip(ks, coded, strict=True)): (s, e)
                   for s, e in zip(starts[:-1], starts[1:], strict=True)}


def latest(t_us: np.ndarray, values: np.ndarray, keys: list[np.ndarray], x: np.ndarray) -> dict[tuple, np.ndarray]:
    """For each distinct key (one value per array of `keys`), the newest of `values` at or before
    each time `x` (s): NaN before its first. Keys come back as tuples of the keys' values."""
    if not len(t_us):
        return {}
    order, runs = key_runs(t_us, keys)
    t, v = t_us[order] / 1e6, values[order].astype(float)
    out = {}
    for key, (s, e) in runs.items():
        idx = np.searchsorted(t[s:e], x, side="right") - 1
        out[key] = np.where(idx >= 0, v[s:e][np.maximum(idx, 0)], np.nan)
    return out


def queue_offsets(data: rd.RunData, own: Ownership | None = None) -> Offsets | None:
    """Each queue's offsets per bin (module docstring); None when no message of a subscribed topic
    was stored."""
    subs = subscriptions(data)
    own = own if own is not None else ownership(data)
    stored = _read(data, BROKER_STORED, ("t_us", "node", "topic", "queue_id", "queue_offset"))
    queues = sorted(set(own.queues if own else []) | set(_stored_queues(data, subs)))
    if not queues or not stored or not len(stored["t_us"]):
        return None
    width, x = bins(data)
    who = masters(data)
    gap = {b: down_mask(x, width, who.unavailable.get(b, [])) for b in {q.broker for q in queues}}
    of = broker_of_node(data)
    group_of = np.fromiter((of[str(n)] for n in stored["node"].tolist()), object, len(stored["node"]))
    newest = latest(stored["t_us"], stored["queue_offset"] + 1, [group_of, stored["topic"], stored["queue_id"]], x)
    empty = np.full(len(x), np.nan)
    max_offset = {q: _gapped(newest.get((q.broker, q.topic, q.queue_id), empty), gap[q.broker]) for q in queues}
    committed = _committed(data, queues, x, gap, {b: who.master_at(b, x) for b in gap})
    consumed = _consumed(data, own, queues, x, width)
    return Offsets(width, x, queues, max_offset, committed,
                   {q: {c: _gapped(v, gap[q.broker]) for c, v in per.items()} for q, per in consumed.items()},
                   sorted({c for per in consumed.values() for c in per}, key=natural))


def _gapped(series: np.ndarray, gap: np.ndarray) -> np.ndarray:
    return np.where(gap, np.nan, series)


def _committed(data: rd.RunData, queues: list[Queue], x: np.ndarray, gap: dict[str, np.ndarray],
               master: dict[str, np.ndarray]) -> dict[Queue, np.ndarray] | None:
    """The committed offset per queue and group on the group's master at each time `x` (`master`:
    group → its master node at each `x`): each node's own series (its commits, the offsets it
    loaded at a start, rolled back, or synced from its master while a slave — what a slave
    promoted by an election starts with), taken from the node that was master then; None when the
    trace records no commit."""
    parts = []
    for kind, value in ((BROKER_OFFSET_COMMITTED, "offset"), (BROKER_OFFSET_LOADED, "offset"),
                        (BROKER_OFFSET_ROLLED_BACK, "to_offset"), (BROKER_OFFSET_SYNCED, "offset")):
        cols = _read(data, kind, ("t_us", "node", "group", "topic", "queue_id", value))
        if cols:
            parts.append((kind, cols, value))
    if not any(kind == BROKER_OFFSET_COMMITTED for kind, _c, _v in parts):
        return None
    cat = {c: np.concatenate([cols[c] for _k, cols, _v in parts]) for c in ("t_us", "node", "group", "topic",
                                                                          "queue_id")}
    values = np.concatenate([cols[v] for _k, cols, v in parts])
    newest = latest(cat["t_us"], values, [cat["node"], cat["group"], cat["topic"], cat["queue_id"]], x)
    out = {}
    for q in queues:
        series = np.full(len(x), np.nan)
        for node in set(master[q.broker].tolist()) - {""}:
            at = master[q.broker] == node
            series[at] = newest.get((node, q.group, q.topic, q.queue_id), series)[at]
        out[q] = _gapped(series, gap[q.broker])
    return out


def _consumed(data: rd.RunData, own: Ownership | None, queues: list[Queue], x: np.ndarray,
              width: float) -> dict[Queue, dict[str, np.ndarray]]:
    """queue → consumer → the highest queue offset it consumed + 1 (from its start offset), over
    the bins it held the queue; NaN elsewhere."""
    cols = _read(data, CONSUMER_CONSUMED, ("t_us", "node", "group", "topic", "broker", "queue_id", "queue_offset"))
    if own is None:
        return {}
    slices: dict[tuple, tuple[int, int]] = {}
    t = off = np.zeros(0)
    if cols and len(cols["t_us"]):
        order, slices = key_runs(cols["t_us"], [cols["node"], cols["group"], cols["broker"], cols["topic"],
                                                cols["queue_id"]])
        t, off = cols["t_us"][order] / 1e6, (cols["queue_offset"][order] + 1).astype(float)
    wanted = set(queues)
    out: dict[Queue, dict[str, np.ndarray]] = {}
    for q, spans in own.held.items():
        if q not in wanted:
            continue
        for consumer, start, end, start_offset in spans:
            s, e = slices.get((consumer, q.group, q.broker, q.topic, q.queue_id), (0, 0))
            times, offs = t[s:e], off[s:e]
            inside = (times >= start) & (times < end + 1.0)  # a batch in the listener at the drop still counts
            times, offs = times[inside], np.maximum.accumulate(offs[inside]) if inside.any() else offs[:0]
            idx = np.searchsorted(times, x, side="right") - 1
            level = np.where(idx >= 0, offs[np.maximum(idx, 0)] if len(offs) else np.nan, np.nan)
            if start_offset >= 0:
                level = np.where(np.isnan(level), float(start_offset), np.maximum(level, start_offset))
            held = (x > start) & (x - width < end)
            series = out.setdefault(q, {}).setdefault(consumer, np.full(len(x), np.nan))
            series[held] = level[held]
    return out


# ------------------------------------------------------------------------------ brokers, sends

def broker_events(data: rd.RunData) -> dict[str, dict[str, list[float] | list[tuple[float, str]]]]:
    """broker node → {"registered": [s], "unregistered": [(s, reason)], "client_registered":
    [(s, client)], "client_unregistered": [(s, client)]} (module docstring); only brokers."""
    of = broker_of_node(data)
    nodes = set(brokers_of(data))
    out: dict[str, dict[str, Any]] = {}

    def slot(node: str) -> dict[str, Any]:
        return out.setdefault(node, {"registered": [], "unregistered": [], "client_registered": [],
                                     "client_unregistered": []})
    registered = _read(data, BROKER_REGISTERED, ("t_us", "node"))
    for t, node in zip(*(registered or {"t_us": [], "node": []}).values(), strict=True):
        slot(str(node))["registered"].append(t / 1e6)
    gone = _read(data, NAMESRV_BROKER_UNREGISTERED, ("t_us", "broker", "reason"))
    for t, broker, reason in zip(*(gone or {"t_us": [], "broker": [], "reason": []}).values(), strict=True):
        slot(str(broker))["unregistered"].append((t / 1e6, str(reason)))
    for kind, key in ((BROKER_CLIENT_REGISTERED, "client_registered"), (BROKER_CLIENT_UNREGISTERED,
                                                                          "client_unregistered")):
        cols = _read(data, kind, ("t_us", "node", "client"))
        for t, node, client in zip(*(cols or {"t_us": [], "node": [], "client": []}).values(), strict=True):
            slot(str(node))[key].append((t / 1e6, str(client)))
    for node in nodes:
        slot(node)
    return {n: out[n] for n in sorted(out, key=lambda n: (of[n], natural(n)))}


@cached
def send_failures(data: rd.RunData) -> dict[str, np.ndarray] | None:
    """reason → failed sends per second (None: the trace has no failed-send file, i.e. none failed)."""
    cols = _read(data, PRODUCER_SEND_FAILED, ("t_us", "reason"))
    if not cols or not len(cols["t_us"]):
        return None
    found, reasons = codes(cols["reason"])
    return {str(r): rd.per_second(cols["t_us"][found == i], data.end_s)
            for i, r in sorted(enumerate(reasons), key=lambda e: -int((found == e[0]).sum()))}


def failures_by_broker(data: rd.RunData) -> dict[str, np.ndarray]:
    """broker of the last attempt ("" none made) → failed sends per second."""
    cols = _read(data, PRODUCER_SEND_FAILED, ("t_us", "broker"))
    if not cols or not len(cols["t_us"]):
        return {}
    found, brokers = codes(cols["broker"])
    return {str(b): rd.per_second(cols["t_us"][found == i], data.end_s) for i, b in enumerate(brokers)}


@cached
def latency_p99_by_broker(data: rd.RunData, q: float = 0.99) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(second centres, broker → quantile `q` of the send latency (ms) of the sends born in each
    second, the same over all brokers): NaN in a second without such a send (a gap)."""
    sent = rd.measured_sends(data)
    n = int(math.ceil(max(data.end_s, 1.0))) + 1
    x = np.arange(n) + 0.5
    if not sent or not len(sent["t_us"]):
        return x, {}, np.full(n, np.nan)
    second = np.minimum((sent["born_us"] // 1_000_000).astype(np.int64), n - 1)
    latency = (sent["t_us"] - sent["born_us"]) / 1000
    found, brokers = codes(sent["broker"])
    per = {str(b): quantile_per_second(second[found == i], latency[found == i], q, n)
           for i, b in sorted(enumerate(brokers), key=lambda e: natural(str(e[1])))}
    return x, per, quantile_per_second(second, latency, 0.5, n)


def quantile_per_second(second: np.ndarray, values: np.ndarray, q: float, n: int) -> np.ndarray:
    """Nearest-rank quantile per second (NaN for a second without values)."""
    out = np.full(n, np.nan)
    if not len(values):
        return out
    order = np.lexsort((values, second))
    second, values = second[order], values[order]
    starts = np.r_[0, np.flatnonzero(second[1:] != second[:-1]) + 1]
    counts = np.diff(np.r_[starts, len(second)])
    pick = starts + np.maximum(0, np.ceil(q * counts).astype(np.int64) - 1)
    out[second[starts]] = values[pick]
    return out
