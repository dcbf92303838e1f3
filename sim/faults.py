"""Fault kinds, scripted and seeded-random, and the injector that plays them.

| kind          | what it does                                                               | heals by |
|---------------|----------------------------------------------------------------------------|----------|
| process_crash | kill -9: heap state lost, page cache survives; peers see the socket close  | restart  |
| power_loss    | machine off: heap *and* page cache lost; nobody is told                     | restart  |
| restart       | start a crashed node again (runs its start-up / recovery logic)            | -        |
| partition     | cut links between groups (symmetric, or one-way from the first group)       | heal     |
| heal          | heal all partitions and link faults                                         | -        |
| link_latency  | add a latency distribution on a link (both ways by default)                 | duration |
| packet_loss   | TCP segment loss: retransmission delays (RTO 200 ms, doubling)              | duration |
| disk_slow     | multiply the node's disk times by `factor`                                  | duration |
| fsync_stall   | the node's disk completes nothing for `duration_ms`                        | self     |
| fsync_error   | every fsync of the node's disk that completes within `duration_ms` fails   | self     |
|               | (EIO; the pages stay clean in the page cache, never written: sim/disk.py)  |          |
| service_error | the node's service `service` throws for `duration_ms` (what it then does   | self     |
|               | is the model's: the runner maps (node, service) to the model's hook)        |          |
| pause         | GC / VM stall: the node does nothing for `duration_ms`                      | self     |
| shutdown      | graceful shutdown of a consumer or producer process, as `stop_ms`: consumer: | never    |
|               | consume pool stop, unlock orderly queues, persist offsets, unregister;      |          |
|               | producer: unregister; then the process exits and is not relaunched          |          |

A scripted fault with `duration_ms` heals itself after that time (a crash restarts); with
`jitter_ms` it happens at `at_ms` plus a uniform draw in [0, jitter_ms) from the injector's
stream `faults.jitter` (one draw per jittered fault, in `at_ms` order), so seeds spread a
fault over a cycle (a flush interval) instead of hitting one phase. Random
faults (`random_faults`) alternate up and down phases per entry: up for
`max(min_up_ms, Exp(rate_per_hour))`, then the fault for a `down_ms` draw, each entry with its
own stream `faults.<index>`. At the end of the scenario's duration `heal_all()` heals everything
(restarting crashed nodes) and the run settles before the checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim.config import DurationMs, Float, Name, NodeName, PositiveDurationMs
from sim.dist import Dist
from sim.limits import MAX_FAULT_RATE_PER_HOUR, MAX_SLOW_FACTOR, MAX_TIME_MS, MIN_FAULT_RATE_PER_HOUR
from sim.units import ms  # not sim.env: validating a scenario loads no SimPy

FaultKind = Literal["process_crash", "power_loss", "restart", "partition", "heal",
                    "link_latency", "packet_loss", "disk_slow", "fsync_stall", "fsync_error", "pause", "shutdown",
                    "service_error"]
NODE_KINDS = ("process_crash", "power_loss", "restart", "disk_slow", "fsync_stall", "fsync_error", "pause", "shutdown",
              "service_error")
CLIENT_KINDS = ("shutdown",)  # only producer and consumer nodes can take these
LINK_KINDS = ("link_latency", "packet_loss")
DISK_KINDS = ("disk_slow", "fsync_stall", "fsync_error")  # only nodes with a disk (brokers) can take these
SELF_HEALING = ("fsync_stall", "fsync_error", "pause", "service_error")  # over when duration_ms has passed: nothing to heal
MAX_DOWN_US = ms(MAX_TIME_MS)  # a random fault's down time (its draw saturates far beyond)
_NEEDS = {
    "process_crash": ("node",), "power_loss": ("node",), "restart": ("node",),
    "partition": ("groups",), "heal": (), "link_latency": ("src", "dst", "extra_latency_ms"),
    "packet_loss": ("src", "dst", "probability"), "disk_slow": ("node", "factor"),
    "fsync_stall": ("node", "duration_ms"), "fsync_error": ("node", "duration_ms"), "pause": ("node", "duration_ms"), "shutdown": ("node",),
    "service_error": ("node", "duration_ms", "service"),
}


class FaultSpec(BaseModel):
    """One scripted fault."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    at_ms: DurationMs = Field(description="ms when it happens (before duration_ms)")
    jitter_ms: DurationMs = Field(0, description=(
        "the fault happens at at_ms + U[0, jitter_ms), seeded (module docstring)"))
    kind: FaultKind = Field(description=(
        "process_crash, power_loss, restart, partition, heal, link_latency, packet_loss, disk_slow, fsync_stall, "
        "fsync_error, pause, shutdown or service_error"))
    node: NodeName | None = Field(None, description=(
        "the node (process_crash, power_loss, restart, disk_slow, fsync_stall, fsync_error, pause, shutdown, "
        "service_error)"))
    groups: list[list[NodeName]] | None = Field(None, description=(
        "partition: lists of nodes that can reach only their own group"))
    one_way: bool = Field(False, description="partition: cut only the links from the first group to the others")
    src: NodeName | None = Field(None, description="link_latency, packet_loss: sending node")
    dst: NodeName | None = Field(None, description="link_latency, packet_loss: receiving node")
    both_ways: bool = Field(True, description="link_latency, packet_loss: also dst -> src")
    duration_ms: PositiveDurationMs | None = Field(None, description=(
        "ms until it heals itself (required for fsync_stall, fsync_error, pause and service_error)"))
    service: Name | None = Field(None, description=(
        "service_error: the node's service that throws (brokers: transaction_check, the transaction check "
        "round: models/broker/transaction_check.py)"))
    factor: Float | None = Field(default=None, gt=0, le=MAX_SLOW_FACTOR, description=(
        "disk_slow: disk times multiplied by this"))
    extra_latency_ms: Dist | None = Field(None, description="link_latency: ms added per message (a distribution)")
    probability: Float | None = Field(default=None, gt=0, lt=1, description=(
        "packet_loss: chance a segment is lost (0 .. <1)"))

    @model_validator(mode="after")
    def _required(self) -> FaultSpec:
        missing = [f for f in _NEEDS[self.kind] if getattr(self, f) is None]
        if missing:
            raise ValueError(f"kind {self.kind!r} needs {', '.join(missing)}")
        if self.kind == "partition" and len(self.groups or []) < 2:
            raise ValueError("partition needs at least two groups")
        if self.kind == "shutdown" and self.duration_ms is not None:
            raise ValueError("shutdown is not healed: drop duration_ms (the process exits for good)")
        return self

    def node_names(self) -> list[str]:
        names = [self.node, self.src, self.dst] + [n for g in self.groups or [] for n in g]
        return [n for n in names if n is not None]


class RandomFaultSpec(BaseModel):
    """Faults drawn at a seeded random rate on one of `nodes` (uniformly chosen)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: Literal["process_crash", "power_loss", "partition", "link_latency", "packet_loss",
                  "disk_slow", "fsync_stall", "fsync_error", "pause"] = Field(description="any fault kind but restart and heal")
    nodes: list[NodeName] = Field(min_length=1, description="candidates, one chosen uniformly per fault")
    rate_per_hour: Float = Field(ge=MIN_FAULT_RATE_PER_HOUR, le=MAX_FAULT_RATE_PER_HOUR, description=(
        "faults per simulated hour of healthy time, for the whole entry (not per node)"))
    min_up_ms: DurationMs = Field(0, description=(
        "ms each healthy phase lasts at least: max(min_up_ms, Exp(rate_per_hour))"))
    down_ms: Dist = Field(description="ms each fault lasts (a distribution)")
    factor: Float | None = Field(default=None, gt=0, le=MAX_SLOW_FACTOR, description=(
        "disk_slow: disk times multiplied by this"))
    extra_latency_ms: Dist | None = Field(None, description="link_latency: ms added per message (a distribution)")
    probability: Float | None = Field(default=None, gt=0, lt=1, description="packet_loss: chance a segment is lost")

    @model_validator(mode="after")
    def _required(self) -> RandomFaultSpec:
        needs = {"disk_slow": "factor", "link_latency": "extra_latency_ms",
                 "packet_loss": "probability"}.get(self.kind)
        if needs and getattr(self, needs) is None:
            raise ValueError(f"kind {self.kind!r} needs {needs}")
        return self


class FaultInjector:
    """Plays scripted faults, draws random ones, and heals everything at the end."""

    def __init__(self, env: Any, nodes: dict[str, Any], scripted: list[FaultSpec],
                 random_specs: list[RandomFaultSpec], duration_us: int,
                 shutdowns: dict[str, Callable[[], None]] | None = None,
                 service_errors: dict[tuple[str, str], Callable[[int], None]] | None = None) -> None:
        """`shutdowns`: client node name → its graceful shutdown (the `shutdown` kind);
        `service_errors`: (node name, service) → the hook that makes the service throw until the
        simulated µs it is given (0: no longer; the `service_error` kind)."""
        self.env = env
        self.nodes = nodes
        self.shutdowns = shutdowns or {}
        self.service_errors = service_errors or {}
        self._erring: dict[tuple[str, str], int] = {}  # service → µs its error ends (the heal check)
        self.network = env.network
        # (index in the scenario's `faults`, spec) by time; stable: file order on ties
        self.scripted = sorted(enumerate(scripted), key=lambda item: item[1].at_ms)
        self.random_specs = random_specs
        self.duration_us = duration_us
        self.active = True
        self.final_heal_changed = False  # set by heal_all
        self.log: list[tuple] = []  # the fault records it emitted (fault windows for reports)
        # beside each `log` entry, the fault it belongs to: its index in the scenario's `faults`, random
        # faults numbered after them in firing order; -1 for the end of the fault phase (summary `faults_applied`)
        self.log_index: list[int] = []
        self._random_fired = 0

    def start(self) -> None:
        jitter = self.env.rng.stream("faults.jitter") if any(s.jitter_ms for _i, s in self.scripted) else None
        for index, spec in self.scripted:
            at_us = ms(spec.at_ms)
            if spec.jitter_ms and jitter is not None:
                at_us += int(jitter.random() * ms(spec.jitter_ms))
            if at_us < self.duration_us:
                self.env.call_later(at_us, self.inject, spec, index)
        for index, random_spec in enumerate(self.random_specs):
            self.env.process(self._random_loop(index, random_spec))
        self.env.call_later(self.duration_us, self.heal_all)

    def _emit(self, kind: str, fault: str, target: str, detail: str, index: int = -1) -> None:
        self.env.tracer.emit("faults", kind, fault, target, detail)
        self.log.append((self.env.now, "faults", kind, fault, target, detail))
        self.log_index.append(index)

    def inject(self, spec: FaultSpec, index: int = -1) -> None:
        if not self.active:
            return
        from sim import trace  # here, and in the heals: validating a scenario (its fault specs) loads no tracer

        target, detail = self._apply(spec)
        self._emit(trace.FAULT_INJECTED, spec.kind, target, detail, index)
        if spec.duration_ms is not None and spec.kind not in SELF_HEALING:
            self.env.call_later(ms(spec.duration_ms), self.heal_one, spec, index)

    def _apply(self, spec: FaultSpec) -> tuple[str, str]:
        # the fields each kind needs are set (FaultSpec._required), `name` and `node` for NODE_KINDS:
        # the `set` ignores below
        kind, name = spec.kind, spec.node or ""
        node: Any = self.nodes.get(name)
        if kind in ("process_crash", "power_loss"):
            node.crash(power_loss=kind == "power_loss")
        elif kind == "restart":
            node.restart()
        elif kind == "partition":
            self.network.partition(spec.groups, spec.one_way)
            return "|".join(",".join(g) for g in spec.groups), "one_way" if spec.one_way else ""  # type: ignore[union-attr]  # set
        elif kind == "heal":
            self.network.heal()
            self.network.reset_link_faults()
            return "network", ""
        elif kind in LINK_KINDS:
            for link in self._links(spec):
                if kind == "link_latency":
                    link.extra = spec.extra_latency_ms
                else:
                    link.loss_probability = spec.probability
            return f"{spec.src}->{spec.dst}", "both_ways" if spec.both_ways else ""
        elif kind == "disk_slow":
            node.disk.slow_factor = spec.factor
            return name, f"factor={spec.factor}"
        elif kind == "fsync_stall":
            node.disk.stall_until_us = self.env.now + ms(spec.duration_ms)  # type: ignore[arg-type]  # set
        elif kind == "fsync_error":
            node.disk.fsync_error_until_us = self.env.now + ms(spec.duration_ms)  # type: ignore[arg-type]  # set
        elif kind == "pause":
            node.pause(ms(spec.duration_ms))  # type: ignore[arg-type]  # set
        elif kind == "shutdown":
            self.shutdowns[name]()
        elif kind == "service_error":
            key = (name, spec.service or "")
            self._erring[key] = self.env.now + ms(spec.duration_ms)  # type: ignore[arg-type]  # set
            self.service_errors[key](self._erring[key])
        detail = f"duration_ms={spec.duration_ms}" if spec.duration_ms is not None else ""
        return name, detail

    def _links(self, spec: FaultSpec) -> list[Any]:
        links = [self.network.link(spec.src, spec.dst)]
        if spec.both_ways:
            links.append(self.network.link(spec.dst, spec.src))
        return links

    def heal_one(self, spec: FaultSpec, index: int = -1) -> None:
        if not self.active:
            return
        kind = spec.kind
        if kind in ("process_crash", "power_loss"):
            self.nodes[spec.node].restart()  # type: ignore[index]  # set (FaultSpec._required)
        elif kind == "partition":
            self.network.heal()
        elif kind in LINK_KINDS:
            for link in self._links(spec):
                link.extra, link.loss_probability = None, 0.0
        elif kind == "disk_slow":
            self.nodes[spec.node].disk.slow_factor = 1.0  # type: ignore[index]  # set (FaultSpec._required)
        target = spec.node or (f"{spec.src}->{spec.dst}" if spec.src else
                               "|".join(",".join(g) for g in spec.groups or []))
        from sim import trace

        self._emit(trace.FAULT_HEALED, kind, target, "", index)

    def _random_loop(self, index: int, spec: RandomFaultSpec) -> Any:
        stream = self.env.rng.stream(f"faults.{index}")
        mean_up_us = 3_600_000_000 / spec.rate_per_hour
        while True:
            up_us = max(ms(spec.min_up_ms), int(stream.expovariate(1.0 / mean_up_us)))
            yield self.env.timeout(up_us)
            if not self.active:
                return
            target = spec.nodes[stream.randrange(len(spec.nodes))]
            down_us = min(max(1, spec.down_ms.sample_us(stream)), MAX_DOWN_US)  # a FaultSpec duration
            index = len(self.scripted) + self._random_fired
            self._random_fired += 1
            self.inject(self._as_scripted(spec, target, down_us), index)
            yield self.env.timeout(down_us)

    def _as_scripted(self, spec: RandomFaultSpec, target: str, down_us: int) -> FaultSpec:
        fields: dict[str, Any] = {"at_ms": self.env.now / 1000, "kind": spec.kind,
                                  "duration_ms": down_us / 1000}
        if spec.kind == "partition":
            others = [n for n in self.nodes if n != target]
            fields["groups"] = [[target], others]
        elif spec.kind in LINK_KINDS:
            peer = [n for n in spec.nodes if n != target] or [n for n in self.nodes if n != target]
            fields.update(src=target, dst=peer[0], extra_latency_ms=spec.extra_latency_ms,
                          probability=spec.probability)
        else:
            fields.update(node=target, factor=spec.factor)
        return FaultSpec(**fields)

    def _anything_faulty(self) -> bool:
        now = self.env.now
        links = any(link.cut or link.extra or link.loss_probability for link in self.network.links.values())
        nodes = any((not node.up and not node.stopped) or node.paused_until > now
                    or (node.disk is not None and (node.disk.slow_factor != 1.0 or node.disk.stall_until_us > now
                                                  or node.disk.fsync_error_until_us > now))
                    for node in self.nodes.values())
        services = any(until > now for until in self._erring.values())
        return links or nodes or services

    def heal_all(self) -> None:
        """End of the fault phase: heal the network and disks, unpause, restart crashed nodes.
        `final_heal_changed` says whether anything was still faulty then (a cut or impaired link,
        a paused node, a slow or stalled disk, a node down): the quiescence check counts this
        heal as a disturbance only then (rmqsim/quiescence.py)."""
        self.active = False
        self.final_heal_changed = self._anything_faulty()
        self.network.heal()
        self.network.reset_link_faults()
        for key in self._erring:  # insertion order: deterministic
            self.service_errors[key](0)
        self._erring.clear()
        for node in self.nodes.values():
            node.unpause()
            if node.disk is not None:
                node.disk.heal()
            if not node.up and not node.stopped:  # a shut-down consumer stays down
                node.restart()
        from sim import trace

        self._emit(trace.FAULT_HEALED, "all", "cluster", "end of fault phase")
