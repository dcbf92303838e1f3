"""Build a world from a scenario, run it, check it (assembly edge: the kernel meets the models).

Lifecycle: build (nodes in scenario order: nameservers, brokers, producers, consumers — equal-
time events then run in that order) → start → run `duration_ms` with faults → heal everything
→ settle `settle_ms` → checkers → summary with a verdict. The summary holds only deterministic
facts; wall time and versions go to `RunResult.meta`.

Records stream through the Tracer (sim/trace.py) to the run digest and to the chunk observers
wired here: the Ledger (analysis/checkers/ledger.py, the checkers' ground truth), the transaction and timer
checkers where a producer sends such messages (analysis/checkers/txn_checker.py, analysis/checkers/timer_checker.py),
the fault log, and on request a Parquet trace writer or a caller's own observers. Nothing per
message is kept unless the caller asks (`keep_records`).

Bounds: `max_events` (events processed; default `sim.limits.DEFAULT_MAX_EVENTS`) and
`max_wall_s` (wall time) are checked between slices of simulated time; the watchdog
(sim/watchdog.py), a thread started before set-up, enforces wall time, resident memory
(`limits.max_rss_mb`) and livelock (`limits.max_step_wall_s`) also while a step never yields or
set-up runs long, by interrupting this thread; the run loop itself counts the events of each
simulated instant against `limits.max_events_per_instant` (sim/env.py, `InstantLivelock`).
A MemoryError stops the run like the memory bound. A stopped run still gets a summary of what
happened so far, with `stopped_by` naming the bound (`max_events`, `max_wall_s`, `max_rss_mb`,
`livelock`), `stopped_at_ms` the simulated time, `stopped_detail` one sentence (`livelock_owner`:
the code that looped), acknowledged messages not yet consumed counted as `unconsumed` instead of
lost, and the verdict `unknown`; a run stopped during set-up gets the summary of an empty run
(every count 0).

The analysis after the run (the checkers' judgement: `summarize`) runs under the memory bound
too (`Watchdog.watch_analysis`; a run the memory bound already stopped gets `ANALYSIS_HEADROOM`
of the bound more): an analysis that exceeds it, or a MemoryError in it, ends with the summary of
an empty run, the run's own trace digest, `stopped_by: max_rss_mb` and a `stopped_detail`
starting "while building the summary after the run". Fault windows end where the run ends
(analysis/checkers/faults_applied.py, analysis/checkers/metrics.py `fault_seconds`), so what the analysis builds
per second of a fault is bounded by the run's length, not the fault's.
"""

from __future__ import annotations

import gc
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.checkers.availability import Inputs, fault_windows_us
from analysis.checkers.availability import section as availability_section
from analysis.checkers.availability_witness import AvailabilityWitness
from analysis.checkers.failover_checker import FailoverChecker
from analysis.checkers.faults_applied import faults_applied
from analysis.checkers.ledger import Ledger, ProducerInfo
from analysis.checkers.metrics import judge_units, send_metrics_in_faults
from analysis.checkers.run_rows import fault_windows
from analysis.checkers.timer_checker import TimerChecker
from analysis.checkers.txn_checker import TxnLedger
from analysis.checkers.verdict import guarantees_for, judge
from models.admin import MQAdmin
from models.broker.broker import Broker
from models.broker.config import BrokerRole
from models.broker.pop_message_processor import PopMessageProcessor
from models.consumer.config import MessageModel
from models.consumer.lite_pull_consumer import LitePullConsumer
from models.consumer.orderly_push_consumer import OrderlyPushConsumer
from models.consumer.pop_consumer import PopConsumer
from models.consumer.push_consumer import PushConsumer
from models.controller.controller import Controller
from models.controller.raft import ControllerQuorum
from models.controller.replicas_info import ReplicasInfoManager
from models.coverage_points import counts as coverage_counts
from models.namesrv import NameServer
from models.producer.config import ProducerSpec
from models.producer.local_transaction import TransactionLog
from models.producer.producer import Producer
from models.producer.transaction_config import TransactionSpec
from models.producer.transaction_producer import TransactionMQProducer
from models.producer.workload import Workload
from rmqsim.quiescence import CHECK_EVERY_US, QuietWatch, idle_units, window_ms
from rmqsim.scenario import spec as scenario_mod
from rmqsim.scenario.spec import BrokerSpec, Scenario
from rmqsim.scenario.validate import broker_group_nodes, instance_names
from sim import compiled, trace
from sim.env import InstantLivelock, SimEnv, ms
from sim.faults import FaultInjector
from sim.limits import DEFAULT_MAX_EVENTS
from sim.network import Network
from sim.rng import Rng
from sim.sources import simulator_sha256
from sim.trace import Tracer
from sim.watchdog import RunInterrupted, Stop, Watchdog, default_max_rss_mb, rss_mb

SLICE_START_US = 1_000  # the first slice of simulated time between checks of the bounds
SLICE_MAX_US = 10_000_000
SLICE_EVENTS = 200_000  # slices grow or shrink to hold about this many events
EXACT_BELOW = 2_000_000  # with fewer events left than this, the loop counts them exactly
ANALYSIS_HEADROOM = 0.5  # the analysis of a run stopped above its memory bound: this share of the bound more


@dataclass
class World:
    env: SimEnv
    scenario: Scenario
    nodes: dict[str, Any] = field(default_factory=dict)  # node name -> Node
    models: dict[str, Any] = field(default_factory=dict)  # node name -> model object
    producers: list[ProducerInfo] = field(default_factory=list)  # by producer index (message ids)
    injector: FaultInjector | None = None
    admin: MQAdmin | None = None
    quorum: ControllerQuorum | None = None  # the controllers (controller mode), started with the nodes
    failover: FailoverChecker | None = None  # master availability (analysis/checkers/failover_checker.py), fed by _observe
    witness: AvailabilityWitness | None = None  # the records behind outages (analysis/checkers/availability_witness.py)

    @property
    def pops(self) -> list[PopMessageProcessor]:
        """The brokers' POP processors, in broker order (a scenario with a POP group; else none)."""
        return [m.pop for m in self.models.values() if isinstance(m, Broker) and m.pop is not None]


@dataclass
class RunResult:
    summary: dict[str, Any]
    meta: dict[str, Any]
    world: World
    records: list[tuple] = field(default_factory=list)  # every record, only with keep_records
    details: dict[str, Any] = field(default_factory=dict)  # per-message facts, when asked for
    fault_records: list[tuple] = field(default_factory=list)
    trace_dir: Path | None = None  # where the Parquet trace was streamed, if it was
    directory: Path | None = None  # the run's directory, for a run read back with `rmqsim.load`
    # `explain`'s implementation, given from above (analysis/explain/answer.py's `explain_result`, by `rmqsim.run`
    # and `rmqsim.load`): the runner is the assembly edge, and explain, above it, imports the runner
    explainer: Callable[[RunResult, int | str], dict[str, Any]] | None = field(default=None, repr=False,
                                                                               compare=False)

    def __repr__(self) -> str:
        """One line: scenario, seed, verdict, the counts that matter, p99, and the trace digest's start."""
        s = self.summary
        p99 = (s.get("latency_ms") or {}).get("p99")
        return (f"<RunResult {s['scenario']} seed={s['seed']} verdict={s['verdict']} sent_ok={s['sent_ok']:,} "
                f"lost={s['lost']:,} duplicates={s['duplicates']:,} p99={'n/a' if p99 is None else f'{p99:g} ms'} "
                f"trace={s['trace_sha256'][:12]}>")

    def frame(self, kind: str) -> Any:
        """The run's records of one kind (e.g. "producer.sent", "consumer.consumed") as a pandas
        DataFrame with typed columns: `t_us`, `node`, then the kind's fields. Needs the records:
        run with `keep_records=True` or `trace_dir=...`."""
        from analysis.checkers.frames import FrameError, check_kind, records_frame, trace_frame

        check_kind(kind)
        names = [p.name for p in self.world.producers]  # a `msg_id` column gets its display key `msg_key` beside it
        if self.trace_dir is not None:
            return trace_frame(self.trace_dir, kind, names)
        if self.records:
            return records_frame(self.records, kind, names)
        raise FrameError("this run kept no records: run it with keep_records=True or trace_dir=...")

    def explain(self, msg_id: int | str) -> dict[str, Any]:
        """The life of one message (its integer id or display key `p-1-42`) as `rmqsim explain
        --json` prints it: facts in time order, then its verdict and the rule behind its cause
        (analysis/explain/answer.py, through `explainer`). Replays the run when its records are not at hand."""
        if self.explainer is None:
            raise RuntimeError("this RunResult was given no explainer (analysis/explain/answer.py's explain_result, from "
                               "above: rmqsim.run and rmqsim.load give it; run_scenario takes it as explainer=...)")
        return self.explainer(self, msg_id)


def build(sc: Scenario, seed: int, keep_records: bool = False, detail: bool = False) -> World:
    env = SimEnv()
    env.max_events_per_instant = sc.limits.max_events_per_instant  # counted by the run loop (sim/env.py)
    env.rng = Rng(seed)
    env.tracer = Tracer(env, keep=keep_records)
    env.tracer.detail = detail  # the detail kinds (sim/trace.py), read by the models as they are built
    network = Network(env, sc.network.latency_ms)
    world = World(env, sc)
    namesrvs = [n.name for n in sc.cluster.nameservers]
    for ns in sc.cluster.nameservers:
        _add(world, NameServer(env, ns.name, ns.zone))
    controllers = _build_controllers(world, sc)
    brokers = []
    for b in sc.cluster.brokers:
        brokers += _build_group(world, b, sc, namesrvs, controllers)
    duration_us = ms(sc.duration_ms)
    txn_logs: dict[str, TransactionLog] = {}  # producer group -> the application's shared transaction log
    infos = iter(producer_infos(sc))
    for p in sc.producers:
        selector = "hash" if p.send_mode == "ORDERLY" else p.selector
        for name in instance_names(p.name, p.count):
            producer: Producer
            if p.transaction is not None:
                producer = _transaction_producer(env, name, p, p.transaction, namesrvs, sc.resolved_client_version,
                                                 txn_logs)
            else:
                producer = Producer(env, name, p.zone, p.client, namesrvs, [p.topic], p.send_mode, group=p.group,
                                    client_version=sc.resolved_client_version, selector=selector)
            stop = ms(p.stop_ms) if p.stop_ms is not None else duration_us
            if p.transaction is not None and p.transaction.shutdown_ms is not None:
                stop = min(stop, ms(p.transaction.shutdown_ms))  # the application is gone
            Workload(producer, len(world.producers), p, ms(p.start_ms), min(stop, duration_us))
            world.producers.append(next(infos))
            _add(world, producer)
    zones = {b.name: b.zone for b in sc.cluster.brokers}  # MACHINE_ROOM_NEARBY by ZONE
    zones |= {name: c.zone for c in sc.consumers for name in instance_names(c.name, c.count)}
    for c in sc.consumers:
        for name in instance_names(c.name, c.count):
            consumer: PushConsumer | PopConsumer
            if c.consume_mode == "ORDERLY":  # the orderly path follows the clients' version (4.x / 5.x)
                consumer = OrderlyPushConsumer(env, name, c.zone, c.group, c.topic, c.tags, c.client, namesrvs,
                                               c.consume_time_ms, c.failure_probability, zones,
                                               client_version=sc.resolved_client_version)
            elif c.pop is not None:  # a SimpleConsumer or a POP-mode push consumer
                consumer = PopConsumer(env, name, c.zone, c.group, c.topic, c.tags, c.client, namesrvs,
                                       c.consume_time_ms, c.failure_probability, c.pop)
            elif c.lite_pull is not None:  # DefaultLitePullConsumer: pullBatchSize is its own (10)
                client = c.client.model_copy(update={"pull_batch_size": c.lite_pull.pull_batch_size})
                consumer = LitePullConsumer(env, name, c.zone, c.group, c.topic, c.tags, client, namesrvs,
                                            c.consume_time_ms, 0.0, zones, client_version=sc.resolved_client_version,
                                            lite=c.lite_pull)
            else:
                consumer = PushConsumer(env, name, c.zone, c.group, c.topic, c.tags, c.client, namesrvs,
                                        c.consume_time_ms, c.failure_probability, zones,
                                        client_version=sc.resolved_client_version, batch_failure=c.batch_failure)
            _add(world, consumer)
            if c.stop_ms is not None:
                env.call_later(ms(c.stop_ms), consumer.shutdown)
    _wire_network(network, sc)
    shutdowns = {name: m.shutdown if isinstance(m, PushConsumer | PopConsumer) else m.exit_gracefully
                 for name, m in world.models.items() if isinstance(m, PushConsumer | PopConsumer | Producer)}
    service_errors: dict[tuple[str, str], Callable[[int], None]] = {
        (b.node.name, "transaction_check"): b.transaction.check_service.throw_until
        for b in brokers if b.transaction is not None}  # models/broker/transaction_check.py
    world.injector = FaultInjector(env, world.nodes, list(sc.faults), list(sc.random_faults), duration_us, shutdowns,
                                   service_errors)
    world.admin = MQAdmin(env, brokers, {g: e["topic"] for g, e in consumer_groups(sc).items()})
    return world


def failover_checker(sc: Scenario) -> FailoverChecker:
    """Master availability per broker group (configured master first); elections in controller mode."""
    groups = {b.name: [n for n, *_ in broker_group_nodes(b.name, b.zone, b.store.broker_role, b.replicas)]
              for b in sc.cluster.brokers}
    controller = sc.cluster.controller is not None and any(b.broker.enable_controller_mode for b in sc.cluster.brokers)
    return FailoverChecker(groups, controller)


def producer_infos(sc: Scenario) -> list[ProducerInfo]:
    """Each producer instance's name, topic and kind, by producer index (message ids)."""
    return [ProducerInfo(name, p.topic, p.transaction is not None)
            for p in sc.producers for name in instance_names(p.name, p.count)]


def _transaction_producer(env: SimEnv, name: str, p: ProducerSpec, spec: TransactionSpec, namesrvs: list[str],
                          client_version: str, logs: dict[str, TransactionLog]) -> TransactionMQProducer:
    """A TransactionMQProducer (`spec`: the entry's `transaction:`); its application's log is the
    group's (a database) unless it is each instance's memory (`log_lost_on_crash`)."""
    log = TransactionLog() if spec.log_lost_on_crash else logs.setdefault(p.group, TransactionLog())
    return TransactionMQProducer(env, name, p.zone, p.client, namesrvs, [p.topic], group=p.group,
                                 client_version=client_version, spec=spec, log=log)


def _build_controllers(world: World, sc: Scenario) -> list[str]:
    """The controller nodes and their quorum (controller mode); their names, [] without them."""
    spec = sc.cluster.controller
    if spec is None:
        return []
    state = ReplicasInfoManager(spec.enable_elect_unclean_master)
    peers = []
    for n in spec.nodes:
        controller = Controller(world.env, n.name, n.zone, spec, state)
        _add(world, controller)
        peers.append(controller)
    world.quorum = ControllerQuorum(world.env, peers)
    for controller in peers:
        controller.quorum = world.quorum
    return [n.name for n in spec.nodes]


def _build_group(world: World, b: BrokerSpec, sc: Scenario, namesrvs: list[str], controllers: list[str]) -> list[Broker]:
    """The brokers of one broker group, master first; slaves share the master's intern tables,
    and the master learns (for the loss checkers only) which records its slaves hold — in
    controller mode every replica does, any of them may be master; every replica's offset manager
    knows the others' (for the duplicate checker only)."""
    topics = {t.name: t.queues for t in sc.cluster.topics if t.brokers is None or b.name in t.brokers}
    nodes = broker_group_nodes(b.name, b.zone, b.store.broker_role, b.replicas)
    controller = b.broker.enable_controller_mode and bool(controllers)
    peers = {node: i for i, (node, _role, _zone, _id) in enumerate(nodes, 1)} if controller else None
    group: list[Broker] = []
    for node, role, zone, broker_id in nodes:
        store = b.store.model_copy(update={"broker_role": BrokerRole(role)})
        broker = Broker(world.env, node, zone, store, b.broker, b.disk, topics, namesrvs, broker_name=b.name,
                        broker_id=broker_id, version=sc.version, master=b.name if broker_id else None,
                        controllers=controllers if controller else None, peers=peers,
                        pop=any(c.pop is not None for c in sc.consumers))  # POP's processors (5.x)
        if broker_id:
            broker.commit_log.share_interns(group[0].commit_log)
        group.append(broker)
        _add(world, broker)
    for owner in (group if controller else group[:1]) if len(group) > 1 else ():
        logs = [s.commit_log for s in group if s is not owner]
        owner.commit_log.replica_has = lambda phys, msg_id, logs=logs: any(  # type: ignore[misc]  # logs bound
            log.holds(phys, msg_id) for log in logs)
        owner.commit_log.replicas = len(logs)
    if len(group) > 1:
        for broker in group:  # ground truth for the `failover` duplicate cause (models/broker/offsets.py)
            broker.offsets.peers = tuple(other.offsets for other in group if other is not broker)
            if broker.replicas is not None:  # and for queue offsets given out again after a failover
                broker.replicas.truth_peers = tuple(other for other in group if other is not broker)
    return group


def _add(world: World, model: Any) -> None:
    node = model.node
    world.env.network.add_node(node)
    world.nodes[node.name] = node
    world.models[node.name] = model


def _wire_network(network: Network, sc: Scenario) -> None:
    for zl in sc.network.zone_latency:
        network.set_zone_latency(zl.zones[0], zl.zones[1], zl.latency_ms)
    for link in sc.network.links:
        network.set_link_latency(link.src, link.dst, link.latency_ms)
        if link.both_ways:
            network.set_link_latency(link.dst, link.src, link.latency_ms)


def start(world: World) -> None:
    sc, env = world.scenario, world.env
    starts = {name: 0 for name in world.nodes}
    for c in sc.consumers:
        for name in instance_names(c.name, c.count):
            starts[name] = ms(c.start_ms)
    for name, node in world.nodes.items():
        if starts[name]:
            node.up = False  # not yet launched: connections refused
            node.set_serving(False)
            node.host_up = True
            env.call_later(starts[name], node.restart)
        else:
            node.start()
    if world.quorum is not None:
        world.quorum.start()
    assert world.injector is not None and world.admin is not None  # build() made them
    world.injector.start()
    world.admin.play(list(sc.actions), ms(sc.duration_ms))


def consumer_groups(sc: Scenario) -> dict[str, dict[str, Any]]:
    """group → its topic, message model, consume mode, POP or not, and members (node names)."""
    groups: dict[str, dict[str, Any]] = {}
    for c in sc.consumers:
        orderly = c.consume_mode == "ORDERLY" or (c.pop is not None and c.pop.orderly)  # a FIFO POP group too
        entry = groups.setdefault(c.group, {"topic": c.topic, "members": [], "orderly": orderly,
                                            "broadcasting": c.client.message_model is MessageModel.BROADCASTING,
                                            "pop": c.pop is not None})
        entry["members"] += instance_names(c.name, c.count)
    return groups


def make_ledger(world: World) -> Ledger:
    groups = consumer_groups(world.scenario)
    ledger = Ledger(world.producers, {g: e["topic"] for g, e in groups.items()},
                    broadcasting=tuple(g for g, e in groups.items() if e["broadcasting"]),
                    orderly=tuple(g for g, e in groups.items() if e["orderly"]),
                    members={g: e["members"] for g, e in groups.items()},
                    pop=tuple(g for g, e in groups.items() if e["pop"]))
    ledger.warmup_us = ms(world.scenario.warmup_ms)
    return ledger


def run_scenario(sc: Scenario | str | Path, seed: int | None = None, overrides: list[str] | None = None,
                 details: bool = False, keep_records: bool = False,
                 observers: tuple[Callable[[list[tuple]], None], ...] = (), trace_dir: str | Path | None = None,
                 max_events: int | None = None, max_wall_s: float | None = None,
                 progress: Callable[[dict[str, Any]], None] | None = None, detail: bool = False,
                 explainer: Callable[[RunResult, int | str], dict[str, Any]] | None = None,
                 release_store: bool = False) -> RunResult:
    """Run one scenario (a path or a loaded Scenario).

    `details`: `RunResult.details` gets the checkers' per-message facts (latency samples and
    delivery counts, analysis/checkers/metrics.py). `keep_records`: `RunResult.records` holds every record
    (tests; memory grows with the run). `observers`: extra Tracer chunk observers. `trace_dir`:
    stream the trace there as Parquet, one file per record kind (analysis/checkers/trace_store.py).
    Bounds: see the module docstring. `progress`: called between slices of simulated time
    (rmqsim/progress.py) with `sim_us`, `end_us`, `events`, `wall_s`, the ledger's send counts and
    its running send RT figures (`send_rt_count`, `send_rt_sum_us`, `send_rt_max_us`).
    `detail` (on for a traced run): also emit the detail kinds (sim/trace.py), outside the digest.
    `explainer`: `RunResult.explain`'s implementation, given from above (analysis/explain/answer.py's
    `explain_result`; the runner imports no explain).
    `release_store`: free the brokers' per-message store tables (CommitLog records, ConsumeQueue
    units: `MessageStore.release`) once the simulation is over, before the end-of-run analysis,
    which reads none of them; the run's peak memory is then the simulation's, not the simulation's
    plus the analysis's. `rmqsim run` (rmqsim/cli.py) releases; an in-process caller keeps the
    store by default (`result.world`'s brokers can be inspected after the run), and with
    `release_store=True` must not read their stores afterwards (empty).
    """
    if not isinstance(sc, Scenario):
        sc = scenario_mod.load(sc, overrides)
    seed = sc.seed if seed is None else int(seed)
    bounds = _Bounds(time.perf_counter(), max_events if max_events is not None else DEFAULT_MAX_EVENTS, max_wall_s)
    with _watchdog(sc, bounds) as watchdog:
        try:
            world = build(sc, seed, keep_records, detail or trace_dir is not None)
            ledger, txn_ledger, timer, writer = _observe(world, observers, trace_dir, progress is not None)
        except (RunInterrupted, MemoryError) as exc:
            result = _stopped_in_setup(sc, seed, _stop_of(watchdog, exc, None, sc), bounds, keep_records)
        else:
            result = _simulate(world, seed, watchdog, bounds, (ledger, txn_ledger, timer, writer), details,
                               progress, trace_dir, release_store)
    result.explainer = explainer
    return result


@dataclass(frozen=True)
class _Bounds:
    wall_start: float  # time.perf_counter() when the run began
    max_events: int
    max_wall_s: float | None


def _watchdog(sc: Scenario, bounds: _Bounds) -> Watchdog:
    limits = sc.limits
    return Watchdog(time.perf_counter, bounds.wall_start, max_wall_s=bounds.max_wall_s,
                    max_rss_mb=limits.max_rss_mb if limits.max_rss_mb is not None else default_max_rss_mb(),
                    max_events=bounds.max_events, max_step_wall_s=limits.max_step_wall_s)


def _observe(world: World, observers: tuple, trace_dir: str | Path | None,
             count_rt: bool) -> tuple[Ledger, TxnLedger, TimerChecker | None, Any]:
    """The checkers' ledgers and the trace writer, fed every chunk of records (the transaction and
    timer checkers only where a producer sends such messages: no timer checker, `timer` is null)."""
    ledger = make_ledger(world)
    ledger.count_rt = count_rt  # the progress line's Max/Average RT
    txn_ledger = TxnLedger(world.producers)
    timer = TimerChecker() if any(p.deliver_time_ms is not None for p in world.scenario.producers) else None
    world.failover = failover_checker(world.scenario)
    ledger.rare_observers.append(world.failover.feed)  # only the chunks holding its kinds (analysis/checkers/ledger.py)
    world.witness = AvailabilityWitness()
    ledger.rare_observers.append(world.witness.feed)
    writer = None
    if trace_dir is not None:  # pyarrow (~50 MB resident) is imported only for a traced run
        from analysis.checkers.trace_store import TraceWriter
        writer = TraceWriter(Path(trace_dir))
    world.env.tracer.observers += [ledger.feed, *([txn_ledger.feed] if txn_ledger.enabled else []),
                                   *([timer.feed] if timer is not None else []), *observers,
                                   *([writer] if writer is not None else [])]
    return ledger, txn_ledger, timer, writer


def _simulate(world: World, seed: int, watchdog: Watchdog, bounds: _Bounds,
              feeds: tuple[Ledger, TxnLedger, TimerChecker | None, Any],
              details: bool, progress: Callable[[dict[str, Any]], None] | None,
              trace_dir: str | Path | None, release_store: bool = False) -> RunResult:
    """Start, run to the end or to a bound, summarize (after `release_stores` if `release_store`)."""
    sc, env, tracer = world.scenario, world.env, world.env.tracer
    ledger, txn_ledger, timer, writer = feeds
    wall_start = bounds.wall_start
    end_us = ms(sc.duration_ms) + ms(sc.settle_max_ms)
    watch = QuietWatch(world, ledger, ms(window_ms(sc)), "auto" if sc.settle_auto else "fixed", txn_ledger)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the run allocates millions of short-lived acyclic objects; GC passes only cost time
    try:
        report = None if progress is None else (lambda: progress({
            "sim_us": env.clock.now_us, "end_us": end_us, "events": env.processed(), "wall_s": time.perf_counter() - wall_start,
            **ledger.counts, "send_rt_count": ledger.rt_count, "send_rt_sum_us": ledger.rt_sum_us,
            "send_rt_max_us": ledger.rt_max_us}))
        try:
            start(world)
            watchdog.watch(env, env.processed())
            stopped_by = _run_and_settle(world, watch, end_us, bounds, report)
            watchdog.stop()
            stop = None if stopped_by is None else _slice_stop(stopped_by, bounds)
        except (RunInterrupted, MemoryError, InstantLivelock) as exc:
            stop = _stop_of(watchdog, exc, env, sc)
        tracer.emit("run", trace.RUN_ENDED, "settled" if stop is None else f"stopped:{stop.bound}")
        digest = tracer.close()
        if writer is not None:
            writer.close()
        sim_wall_s = time.perf_counter() - wall_start
        facts: dict[str, Any] | None = {} if details else None
        quiet = watch.verdict(env.clock.now_us, stopped=stop is not None)
        if release_store:
            release_stores(world)
        watchdog.watch_analysis(_analysis_rss_mb(world.scenario))
        try:
            summary = summarize(world, seed, ledger, digest, tracer.count, env.clock.now_us, stop.bound if stop else None,
                                facts, txn_ledger, stop, quiet, timer)
            watchdog.stop()
            analysis_stop = None
        except (RunInterrupted, MemoryError) as exc:  # the partial analysis goes with `exc` at the block's end
            analysis_stop = _stop_of(watchdog, exc, None, sc)
        if analysis_stop is not None:
            facts = {} if details else None
            summary = _stopped_in_analysis(world, seed, digest, tracer.count, analysis_stop)
    finally:
        if gc_was_enabled:
            gc.enable()
    return RunResult(summary, _meta(env, wall_start, sim_wall_s), world, tracer.records, facts or {},
                     world.injector.log if world.injector is not None else [],
                     Path(trace_dir) if trace_dir is not None else None)


def release_stores(world: World) -> None:
    """Free every broker's per-message store tables (`MessageStore.release`): after the
    simulation and its quiescence verdict, before the analysis (`run_scenario`'s `release_store`)."""
    for model in world.models.values():
        if isinstance(model, Broker):
            model.store.release()


def _analysis_rss_mb(sc: Scenario) -> float | None:
    """The memory bound of the run's analysis (`Watchdog.watch_analysis`): the run's own
    (`limits.max_rss_mb`, or its default), or where the run already stands above it (a run the
    memory bound stopped) its resident memory now plus `ANALYSIS_HEADROOM` of the bound: the summary
    of what ran needs some memory of its own."""
    limit = sc.limits.max_rss_mb if sc.limits.max_rss_mb is not None else default_max_rss_mb()
    rss = rss_mb()
    if limit is None or rss is None or rss <= limit:
        return limit
    return rss + limit * ANALYSIS_HEADROOM


def _stopped_in_analysis(world: World, seed: int, digest: str, records: int, stop: Stop) -> dict[str, Any]:
    """The summary of a run whose analysis reached a bound (its memory): the summary of an empty
    run, as for a stop during set-up (every count 0: nothing could be judged), with the run's own
    trace digest, record count and simulated time, `stopped_by` the bound and `stopped_detail`
    saying that the analysis, not the simulation, was stopped."""
    stop = Stop(stop.bound, f"while building the summary after the run (the counts are an empty run's): "
                            f"{stop.detail}", stop.owner)
    empty = World(world.env, world.scenario, producers=world.producers)
    return summarize(empty, seed, make_ledger(empty), digest, records, world.env.clock.now_us, stop.bound, None, None, stop)


def _meta(env: SimEnv, wall_start: float, sim_wall_s: float) -> dict[str, Any]:
    wall_s = time.perf_counter() - wall_start
    return {"wall_s": round(wall_s, 3), "simulate_wall_s": round(sim_wall_s, 3),
            "check_wall_s": round(wall_s - sim_wall_s, 3), "python": platform.python_version(), "pid": os.getpid(),
            "events": env.processed(), "sim_to_wall": round(env.clock.now_us / 1e6 / wall_s, 2) if wall_s else None,
            "random_streams": env.rng.names, "compiled_modules": len(compiled.status()["compiled"] or ()),
            "simulator_sha256": simulator_sha256()}  # `rmqsim explain` replays only on the same simulator


def _slice_stop(stopped_by: str, bounds: _Bounds) -> Stop:
    """A bound the slice loop (`_run`) reached."""
    if stopped_by == "max_events":
        return Stop(stopped_by, f"{bounds.max_events:,} events processed (max_events)")
    return Stop(stopped_by, f"{time.perf_counter() - bounds.wall_start:.1f} s of wall time, above max_wall_s "
                            f"({bounds.max_wall_s:g} s)")


def _stop_of(watchdog: Watchdog, exc: BaseException, env: SimEnv | None, sc: Scenario) -> Stop:
    """Why the run stopped: the watchdog's bound, or (a MemoryError) the memory bound."""
    stop = watchdog.stop(exc, env)
    if stop is not None:
        return stop
    rss, limit = rss_mb(), sc.limits.max_rss_mb if sc.limits.max_rss_mb is not None else default_max_rss_mb()
    return Stop("max_rss_mb", f"MemoryError: an allocation failed at {'?' if rss is None else f'{rss:,.0f}'} MB "
                              f"resident, below limits.max_rss_mb ({'?' if limit is None else f'{limit:,}'} MB): "
                              "the machine or the process's address-space limit ran out first")


def _stopped_in_setup(sc: Scenario, seed: int, stop: Stop, bounds: _Bounds, keep_records: bool) -> RunResult:
    """The result of a run stopped while its world was being built: the summary of an empty run
    (every count 0, nothing ran), `stopped_by` the bound, `stopped_detail` saying so."""
    stop = Stop(stop.bound, f"during set-up: {stop.detail}", stop.owner)
    env = SimEnv()
    env.rng = Rng(seed)
    env.tracer = Tracer(env, keep=keep_records)
    world = World(env, sc, producers=producer_infos(sc))
    env.tracer.emit("run", trace.RUN_ENDED, f"stopped:{stop.bound}")
    digest = env.tracer.close()
    summary = summarize(world, seed, make_ledger(world), digest, env.tracer.count, 0, stop.bound, None, None, stop)
    return RunResult(summary, _meta(env, bounds.wall_start, time.perf_counter() - bounds.wall_start), world,
                     env.tracer.records)


def _run_and_settle(world: World, watch: QuietWatch, end_us: int, bounds: _Bounds,
                    report: Callable[[], None] | None) -> str | None:
    """Run to `end_us`; with `settle_ms: auto`, run to `duration_ms`, then on in steps of
    `CHECK_EVERY_US` until the cluster is quiet (rmqsim/quiescence.py) or `end_us` (duration +
    max_settle_ms). Returns the bound that stopped the run, or None."""
    env, sc = world.env, world.scenario
    first = env.processed()

    def run_to(target_us: int) -> str | None:
        left = bounds.max_events - (env.processed() - first)
        return _run(env, target_us, bounds.wall_start, max(left, 0), bounds.max_wall_s, report)

    if not sc.settle_auto:
        return run_to(end_us)
    # the first check after the end of the fault phase has healed everything (FaultInjector.heal_all)
    stopped_by = run_to(min(end_us, ms(sc.duration_ms) + CHECK_EVERY_US))
    while stopped_by is None and env.clock.now_us < end_us:
        env.tracer.sync()  # the ledger up to now
        if watch.quiet_now(env.clock.now_us):
            break
        stopped_by = run_to(min(end_us, env.clock.now_us + CHECK_EVERY_US))
    return stopped_by


def _run(env: SimEnv, end_us: int, wall_start: float, max_events: int | None, max_wall_s: float | None,
         report: Callable[[], None] | None = None) -> str | None:
    """Run to `end_us`, or to a bound; returns the bound that stopped the run, or None.

    The run goes in slices of simulated time, sized to hold about `SLICE_EVENTS` events, so the
    bounds are checked often whatever the event rate, while the loop itself counts nothing
    (`SimEnv.processed`); near the event bound the last stretch is counted exactly."""
    budget = max_events if max_events is not None else DEFAULT_MAX_EVENTS
    first = env.processed()
    slice_us = SLICE_START_US
    while env.clock.now_us < end_us:
        done = env.processed() - first
        left = budget - done
        target = min(end_us, env.clock.now_us + slice_us)
        if left <= EXACT_BELOW:
            if left <= 0 or env.run(until=target, max_events=left):
                return "max_events"
        else:
            env.run(until=target)
        slice_events = env.processed() - first - done
        slice_us = max(1, slice_us // 2) if slice_events > 4 * SLICE_EVENTS else \
            min(SLICE_MAX_US, slice_us * 2) if slice_events < SLICE_EVENTS // 4 else slice_us
        elapsed = time.perf_counter() - wall_start
        if report is not None:
            report()
        if env.clock.now_us >= end_us:
            break
        if max_wall_s is not None and elapsed > max_wall_s:
            return "max_wall_s"
    return None


def summarize(world: World, seed: int, ledger: Ledger, digest: str, records: int, now_us: int,
              stopped_by: str | None, details: dict[str, Any] | None = None,
              txn_ledger: TxnLedger | None = None, stop: Stop | None = None,
              quiescence: dict[str, Any] | None = None, timer: TimerChecker | None = None) -> dict[str, Any]:
    sc = world.scenario
    applied = [] if world.injector is None else \
        faults_applied(world.injector.log, world.injector.log_index, len(sc.faults), now_us / 1000)
    windows_us = fault_windows_us(applied, now_us)
    not_quiet = quiescence is not None and quiescence.get("reached") is False
    # a run stopped at a bound, or ended before the cluster was quiet: what was not yet consumed is unconsumed
    idle = idle_units(world)  # groups nobody was left to drain: their never-consumed messages are unconsumed
    metrics = judge_units(ledger, details, stopped=stopped_by is not None or not_quiet, windows_us=windows_us,
                          idle=idle)
    metrics["undrained_units"] = sorted(idle)
    reads = {name: g.pop("_read") for name, g in metrics["groups"].items()}
    metrics.update((txn_ledger or TxnLedger(world.producers)).results(ledger))  # txn, txn_violations
    if metrics["txn"] is not None:  # arrivals still waiting for an application thread (transaction_producer.py)
        metrics["txn"]["waiting_at_end"] = sum(m.waiting_count() for m in world.models.values()
                                               if isinstance(m, TransactionMQProducer))
    metrics.update((timer or TimerChecker()).results())  # timer, timer_delay_error_ms
    # failovers, unwritable_s, unwritable_at_end, two_masters_s, elections
    broker_view = world.failover or failover_checker(sc)
    metrics.update(broker_view.results(now_us))
    windows = fault_windows(world.injector.log, now_us / 1000) if world.injector is not None else []
    metrics.update(send_metrics_in_faults(ledger, windows, now_us / 1000))  # windows clipped at the run's end
    metrics["faults_applied"] = applied
    units = {name: {"topic": ledger.units[name].topic, "read": read} for name, read in reads.items()}
    metrics["availability"] = availability_section(Inputs(
        ledger, applied, units, now_us, broker_view, world.witness,
        {name: p.client.poll_name_server_interval_ms for p in sc.producers for name in instance_names(p.name, p.count)},
        _send_timeouts_us(sc)))
    for key in ("send_share_by_broker", "send_share_by_broker_in_faults"):  # brokers sent nothing: 0
        if metrics[key] is not None:
            metrics[key] = {b.name: metrics[key].get(b.name, 0.0) for b in sc.cluster.brokers} | metrics[key]
    summary = {
        "scenario": sc.name,
        "seed": seed,
        "scenario_sha256": sc.digest(),
        "trace_sha256": digest,
        "records": records,
        "sim_time_ms": now_us // 1000,
        "warmup_ms": sc.warmup_ms,
        "stopped_by": stopped_by,
        "stopped_at_ms": now_us // 1000 if stopped_by else None,
        "stopped_detail": stop.detail if stop is not None else None,
        "livelock_owner": stop.owner if stop is not None and stop.bound == "livelock" else None,
        **metrics,
    }
    promises = guarantees_for(consumer_groups(sc))
    expect = {path: bounds.model_dump(exclude_none=True) for path, bounds in sc.expect.items()}
    summary["quiescence"] = quiescence or {"reached": None, "settle": "auto" if sc.settle_auto else "fixed",
                                           "window_ms": window_ms(sc), "at_ms": None, "checked_at_ms": now_us // 1000,
                                           "unsettled": {}}
    summary["coverage"] = coverage_counts(world.env.coverage)  # every declared point, in order (models/coverage_points.py)
    summary.update(judge(summary, promises, expect, stopped_by, None if sc.settle_auto else not_quiet_line(summary)))
    _judge_quiescence(summary, sc)
    return summary


def _send_timeouts_us(sc: Scenario) -> dict[str, int]:
    """Topic → the longest sendMsgTimeout of its producers (an open write outage: analysis/checkers/availability.py)."""
    out: dict[str, int] = {}
    for p in sc.producers:
        out[p.topic] = max(out.get(p.topic, 0), ms(p.client.send_msg_timeout_ms))
    return out


def not_quiet_line(summary: dict[str, Any]) -> str | None:
    """Why at-least-once cannot be judged: the run ended before the cluster was quiet (its
    quiescence check at the end) with acknowledged messages not yet consumed (`unconsumed`: they
    may still be); None otherwise (a run that consumed everything is judged as it stands)."""
    q = summary["quiescence"]
    if q.get("reached") is not False or not summary.get("unconsumed"):
        return None
    moved = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in q["unsettled"].items())
    return (f"the run ended before the cluster was quiet ({moved or 'still changing'}); "
            f"{summary.get('unconsumed', 0):,} acknowledged message(s) not yet consumed are unconsumed, not lost")


def _judge_quiescence(summary: dict[str, Any], sc: Scenario) -> None:
    """`settle_ms: auto` that never got quiet: the counts are of a cluster still changing, so
    the verdict is `unknown`, with what kept moving."""
    q = summary["quiescence"]
    if not sc.settle_auto or q["reached"] is not False:
        return
    moved = ", ".join(f"{kind} {n}" for kind, n in q["unsettled"].items())
    summary["verdict"] = "unknown"
    summary["failures"] = [*summary["failures"], f"quiescence: the cluster was not quiet for {q['window_ms'] / 1000:g} s "
                           f"within max_settle_ms ({sc.max_settle_ms / 1000:g} s after duration_ms); still "
                           f"moving in the last window: {moved}"]
