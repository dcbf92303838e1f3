"""Build a world from a scenario, run it, check it (assembly edge: the kernel meets the models).

Lifecycle: build (nodes in scenario order: nameservers, brokers, producers, consumers — equal-
time events then run in that order) → start → run `duration_ms` with faults → heal everything
→ settle `settle_ms` → checkers → summary. The summary holds only deterministic facts; wall time
and versions go to `RunResult.meta`.
"""

from __future__ import annotations

import gc
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.checks import check
from models.broker.broker import Broker
from models.consumer.config import MessageModel
from models.consumer.push_consumer import PushConsumer
from models.namesrv import NameServer
from models.producer.producer import Producer
from models.producer.workload import Workload
from sim import scenario as scenario_mod
from sim import trace
from sim.env import SimEnv, ms
from sim.faults import FaultInjector
from sim.network import Network
from sim.rng import Rng
from sim.scenario import Scenario, instance_names
from sim.trace import Tracer


@dataclass
class World:
    env: SimEnv
    scenario: Scenario
    nodes: dict[str, Any] = field(default_factory=dict)  # node name -> Node
    models: dict[str, Any] = field(default_factory=dict)  # node name -> model object
    injector: FaultInjector | None = None


@dataclass
class RunResult:
    summary: dict[str, Any]
    records: list[tuple]
    meta: dict[str, Any]
    world: World
    details: dict[str, Any] = field(default_factory=dict)  # per-message facts, when asked for


def build(sc: Scenario, seed: int) -> World:
    env = SimEnv()
    env.rng = Rng(seed)
    env.tracer = Tracer(env)
    network = Network(env, sc.network.latency_ms)
    world = World(env, sc)
    namesrvs = [n.name for n in sc.cluster.nameservers]
    for ns in sc.cluster.nameservers:
        _add(world, NameServer(env, ns.name, ns.zone))
    for b in sc.cluster.brokers:
        topics = {t.name: t.queues for t in sc.cluster.topics if t.brokers is None or b.name in t.brokers}
        _add(world, Broker(env, b.name, b.zone, b.store, b.broker, b.disk, topics, namesrvs))
    duration_us = ms(sc.duration_ms)
    for p in sc.producers:
        for name in instance_names(p.name, p.count):
            producer = Producer(env, name, p.zone, p.client, namesrvs, [p.topic], p.send_mode)
            stop = ms(p.stop_ms) if p.stop_ms is not None else duration_us
            Workload(producer, p.topic, p.rate_per_s, p.arrival, p.message_bytes, p.tags, p.keys,
                     ms(p.start_ms), min(stop, duration_us))
            _add(world, producer)
    for c in sc.consumers:
        for name in instance_names(c.name, c.count):
            _add(world, PushConsumer(env, name, c.zone, c.group, c.topic, c.tags, c.client, namesrvs,
                                     c.consume_time_ms, c.failure_probability))
    _wire_network(network, sc)
    world.injector = FaultInjector(env, world.nodes, list(sc.faults), list(sc.random_faults), duration_us)
    return world


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
            node.up = node.serving = False  # not yet launched: connections refused
            node.host_up = True
            env.call_later(starts[name], node.restart)
        else:
            node.start()
    world.injector.start()


def run_scenario(sc: Scenario | str | Path, seed: int | None = None,
                 overrides: list[str] | None = None, details: bool = False,
                 max_wall_s: float | None = None, max_events: int | None = None) -> RunResult:
    """Run one scenario; with `details`, `RunResult.details` gets the checkers' per-message facts
    (see analysis.checks.check). With `max_wall_s` or `max_events`, a run that reaches either
    bound stops there (sim/runner.py: run_bounded); it still gets a summary, of what happened
    so far, with `summary["stopped_by"]` naming the bound (None when the run completed) and
    `summary["stopped_at_ms"]` the simulated time it stopped at."""
    if not isinstance(sc, Scenario):
        sc = scenario_mod.load(sc, overrides)
    seed = sc.seed if seed is None else int(seed)
    wall_start = time.perf_counter()
    world = build(sc, seed)
    start(world)
    env = world.env
    end_us = ms(sc.duration_ms) + ms(sc.settle_ms)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the run and its checks allocate millions of small acyclic tuples; GC passes only cost time
    try:
        if max_wall_s is None and max_events is None:
            env.run(until=end_us)
            stopped_by = None
        else:
            stopped_by = run_bounded(env, end_us, max_events, wall_start + (max_wall_s or float("inf")))
        env.tracer.emit("run", trace.RUN_ENDED, "settled" if stopped_by is None else f"stopped_by_{stopped_by}")
        records = env.tracer.records
        sim_wall_s = time.perf_counter() - wall_start
        facts: dict[str, Any] | None = {} if details else None
        summary = summarize(world, seed, records, facts)
        summary["stopped_by"] = stopped_by
        summary["stopped_at_ms"] = env.now // 1000 if stopped_by else None
    finally:
        if gc_was_enabled:
            gc.enable()
    wall_s = time.perf_counter() - wall_start
    meta = {"wall_s": round(wall_s, 3), "simulate_wall_s": round(sim_wall_s, 3),
            "check_wall_s": round(wall_s - sim_wall_s, 3), "python": platform.python_version(), "pid": os.getpid(),
            "sim_to_wall": round(end_us / 1e6 / wall_s, 2) if wall_s else None,
            "random_streams": env.rng.names}
    return RunResult(summary, records, meta, world, facts or {})


SLICE_EVENTS = 20_000  # events per slice the bounded run aims at (the bounds are checked between slices)
SLICE_US_MAX = 10_000  # a slice covers at most 10 ms of simulated time, whatever the event rate


def run_bounded(env: SimEnv, end_us: int, max_events: int | None, deadline: float) -> str | None:
    """Run to `end_us` in slices of simulated time, stopping early at `max_events` (counted
    between slices, so a bound is overshot by at most about one slice) or when the wall clock
    passes `deadline`. Returns the bound that stopped the run ('max_events' or 'max_wall_s') or
    None. Slicing does not change the order of events, so a run that completes has the same
    digest as an unbounded one. The event count is read from the kernel's heap: each slice
    processes the events scheduled meanwhile plus those already queued minus those left (SimPy
    numbers heap entries with `env._eid`; skipping numbers keeps their order)."""
    events, slice_us = 0, 1_000
    while env.now < end_us:
        scheduled, queued = next(env._eid), len(env._queue)
        env.run(until=min(end_us, env.now + slice_us))
        done = next(env._eid) - scheduled - 1 + queued - len(env._queue)
        events += done
        if max_events is not None and events >= max_events and env.now < end_us:
            return "max_events"
        if time.perf_counter() > deadline and env.now < end_us:
            return "max_wall_s"
        slice_us = max(1, min(SLICE_US_MAX, slice_us * 2 if done < SLICE_EVENTS // 2 else
                              slice_us // 2 if done > SLICE_EVENTS else slice_us))
    return None


def summarize(world: World, seed: int, records: list[tuple],
              details: dict[str, Any] | None = None) -> dict[str, Any]:
    sc = world.scenario
    subscriptions = {c.group: c.topic for c in sc.consumers}
    broadcasting = [c.group for c in sc.consumers if c.client.message_model is MessageModel.BROADCASTING]
    metrics = check(records, subscriptions, broadcasting, orderly=(), details=details)
    return {
        "scenario": sc.name,
        "seed": seed,
        "scenario_sha256": sc.digest(),
        "trace_sha256": trace.digest(records),
        "records": len(records),
        "sim_time_ms": (ms(sc.duration_ms) + ms(sc.settle_ms)) // 1000,
        **metrics,
    }
