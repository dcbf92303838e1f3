"""Scenario files: the typed tree, and loading with every problem reported at once (assembly edge).

A scenario states only what differs from the defaults, and the defaults are RocketMQ's (the
model config classes carry them, Java names beside). The sections a model reads are the models'
own, typed where they live (models/broker/config.py, models/controller/config.py, and the client
entries: models/producer/config.py's ProducerSpec, models/consumer/config.py's ConsumerSpec with
its LitePullSpec and PopSpec); this module assembles them into the scenario tree.

`load()` reads the file (a regular UTF-8 file of bounded size, YAML with limits: sim/inputs.py),
applies `--set` overrides (sim/keypath.py), validates the tree with pydantic (types, units,
bounds: unknown keys with a "did you mean"), and then runs the cross-section checks on the values
pydantic accepted (rmqsim/scenario/validate.py). Every problem is reported together as one `ConfigError`.

Instances: a producer or consumer entry with `count: N > 1` becomes nodes `<name>-1 … <name>-N`;
with `count: 1` the node is `<name>`. Rates are per instance. Topic `queues` is per broker
(`writeQueueNums` = `readQueueNums`).

Names: the scenario `name` becomes a directory (`runs/<name>/seed-<n>`), so it is a plain name
(sim/config.py: Name); node names become parts of random-stream names (NodeName); topic and
group names follow RocketMQ's character set (letters, digits, `_`, `-`), and topic names that
start like RocketMQ's system topics (`SCHEDULE_`, `RMQ_SYS_`) are refused (models/names.py).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    RootModel,
    ValidationError,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict  # `extra_items` (PEP 728): typing has it from Python 3.15

from models.admin import ActionSpec
from models.broker.config import V4_DEFAULTS, BrokerConfig, BrokerRole, MessageStoreConfig
from models.consumer.config import ConsumerSpec
from models.controller.config import ControllerConfig
from models.names import TopicName, Zone
from models.producer.config import ProducerSpec
from models.producer.transaction_config import TransactionSpec
from models.version import V4
from rmqsim.scenario.setup_size import setup_problems
from rmqsim.scenario.validate import cross_check, instance_names  # noqa: F401 - instance_names: API (runner)
from sim import keypath
from sim.config import (
    ConfigError,
    DurationMs,
    Float,
    FloatS,
    Int,
    IntMiB,
    Name,
    NodeName,
    PositiveDurationMs,
    format_errors,
    parse_duration_ms,
)
from sim.disk import DiskConfig
from sim.dist import Dist, Lognormal
from sim.faults import FaultSpec, RandomFaultSpec
from sim.inputs import InputProblem, load_yaml, read_text
from sim.limits import (
    DEFAULT_MAX_EVENTS_PER_INSTANT,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_NODES,
    DEFAULT_MAX_RATE_PER_S,
    DEFAULT_MAX_ROUTE_ENTRIES,
    DEFAULT_MAX_SETTLE_MS,
    DEFAULT_MAX_SIM_TIME_MS,
    DEFAULT_MAX_STEP_WALL_S,
    HARD_MAX_INSTANCES,
    HARD_MAX_NODES,
    HARD_MAX_RATE_PER_S,
    HARD_MAX_ROUTE_ENTRIES,
    HARD_MAX_RSS_MB,
    MAX_SEED,
    MAX_TIME_MS,
)

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Limits(BaseModel):
    """Sane maxima (sim/limits.py), raised deliberately by a scenario's own `limits:` section.
    `max_route_entries` is checked before the run (rmqsim/scenario/setup_size.py); `max_rss_mb` and
    `max_step_wall_s` during it (sim/watchdog.py; `max_rss_mb` during its analysis too), and
    `max_events_per_instant` counted exactly by the run loop (sim/env.py), where a breach stops
    the run with `stopped_by` max_rss_mb or livelock, verdict unknown."""

    model_config = _STRICT
    # hard maximum: MAX_TIME_MS
    max_sim_time_ms: PositiveDurationMs = Field(DEFAULT_MAX_SIM_TIME_MS, description=(
        "most ms of duration_ms + settle_ms (default 7 days)"))
    max_rate_per_s: Float = Field(DEFAULT_MAX_RATE_PER_S, gt=0, le=HARD_MAX_RATE_PER_S, description=(
        "most messages per second of one producer instance"))
    max_instances: Int = Field(DEFAULT_MAX_INSTANCES, gt=0, le=HARD_MAX_INSTANCES, description=(
        "most instances (`count`) of one producer or consumer entry"))
    max_nodes: Int = Field(DEFAULT_MAX_NODES, gt=0, le=HARD_MAX_NODES, description="most nodes in the scenario")
    max_route_entries: Int = Field(DEFAULT_MAX_ROUTE_ENTRIES, gt=0, le=HARD_MAX_ROUTE_ENTRIES, description=(
        "most queues in all the topic routes set-up builds (rmqsim/scenario/setup_size.py; ~0.4 KB each)"))
    max_rss_mb: IntMiB | None = Field(None, gt=0, le=HARD_MAX_RSS_MB, description=(
        "most MB of the run's resident memory (null: half the machine's memory)"))
    max_events_per_instant: Int = Field(DEFAULT_MAX_EVENTS_PER_INSTANT, gt=0, description=(
        "most events at one simulated instant (more: a livelock)"))
    max_step_wall_s: FloatS = Field(DEFAULT_MAX_STEP_WALL_S, gt=0, le=MAX_TIME_MS / 1000, description=(
        "most wall seconds of one event (longer: a livelock, a step that never yields)"))


class NameServerSpec(BaseModel):
    model_config = _STRICT
    name: NodeName = Field("namesrv", description="node name")
    zone: Zone = Field("zone-a", description="zone (machine room) of the host")


class ReplicaSpec(BaseModel):
    """One broker of a group: its role and host zone (default: the group's zone)."""

    model_config = _STRICT
    role: BrokerRole = Field(description="ASYNC_MASTER, SYNC_MASTER or SLAVE (brokerRole)")
    zone: Zone | None = Field(None, description="zone of this replica's host (null: the group's zone)")


class BrokerSpec(BaseModel):
    """A broker group (brokerName `name`). Without `replicas`, one master on its own host whose
    role is `store.broker_role`. With `replicas`, one node per replica, each on its own host,
    all sharing `store`/`broker`/`disk` except the role: the master (exactly one ASYNC_MASTER
    or SYNC_MASTER, brokerId 0) is node `name`, the SLAVEs are nodes `name-s1`, `name-s2`, ...
    (brokerId 1, 2, ... in list order). No automatic failover unless `broker.enable_controller_mode`
    (with `cluster.controller`): then the listed master is only the first to start, and the
    controllers elect the group's master (models/broker/replicas_manager.py); DLedger mode is out of
    scope."""

    model_config = _STRICT
    name: NodeName = Field("broker-a", description=(
        "brokerName (also the node name; <room>@<name> for machine-room strategies)"))
    zone: Zone = Field("zone-a", description="zone (machine room) of the host")
    store: MessageStoreConfig = Field(MessageStoreConfig(), description=(
        "MessageStoreConfig: CommitLog, flush and read settings"))
    broker: BrokerConfig = Field(BrokerConfig(), description="BrokerConfig: broker-level settings")
    disk: DiskConfig = Field(DiskConfig(), description="the host's disk (simulator, not a Java setting)")
    replicas: list[ReplicaSpec] | None = Field(None, min_length=1, max_length=64, description=(
        "roles of the group's brokers: master node <name>, SLAVEs <name>-s1.. (null: one master)"))


class TopicSpec(BaseModel):
    model_config = _STRICT
    name: TopicName = Field("TopicTest", description="topic name (letters, digits, _ and -)")
    queues: Int = Field(4, gt=0, le=1024, description="queues per broker (writeQueueNums = readQueueNums)")
    brokers: list[NodeName] | None = Field(None, description="brokers hosting it (null: every broker)")


class ClusterSpec(BaseModel):
    model_config = _STRICT
    nameservers: list[NameServerSpec] = Field(default_factory=lambda: [NameServerSpec()], min_length=1, description=(
        "NamesrvController instances (every client and broker knows all)"))
    brokers: list[BrokerSpec] = Field(default_factory=lambda: [BrokerSpec()], min_length=1, description=(
        "broker groups: each a master (brokerId 0) on its own host"))
    topics: list[TopicSpec] = Field(default_factory=lambda: [TopicSpec()], min_length=1, description=(
        "topics, created on their brokers at start"))
    controller: ControllerConfig | None = Field(None, description=(
        "5.x controllers (DLedger group) electing the masters of groups with broker.enable_controller_mode "
        "(null: none, the classic deployment)"))


class ZoneLatencySpec(BaseModel):
    model_config = _STRICT
    zones: list[Zone] = Field(min_length=2, max_length=2, description="the two zones")
    latency_ms: Dist = Field(description="one-way latency between them, ms (a distribution)")


class LinkSpec(BaseModel):
    model_config = _STRICT
    src: NodeName = Field(description="sending node")
    dst: NodeName = Field(description="receiving node")
    latency_ms: Dist = Field(description="one-way latency, ms (a distribution)")
    both_ways: bool = Field(True, description="also set dst -> src")


class NetworkSpec(BaseModel):
    """One-way latencies. Default: a data-centre LAN (median 0.25 ms, p99 ≈ 0.7 ms)."""

    model_config = _STRICT
    latency_ms: Dist = Field(Lognormal(dist="lognormal", median=0.25, sigma=0.45), description=(
        "one-way latency of every link, ms (a distribution)"))
    zone_latency: list[ZoneLatencySpec] = Field([], description=(
        "one-way latency between two zones: {zones: [a, b], latency_ms: ...}"))
    links: list[LinkSpec] = Field([], description="one-way latency of one link: {src, dst, latency_ms, both_ways}")


class ExpectBounds(BaseModel):
    """`{min: x, max: y}` (either may be left out) on one summary metric."""

    model_config = _STRICT
    min: Float | None = Field(None, description="lowest acceptable value")
    max: Float | None = Field(None, description="highest acceptable value")

    @model_validator(mode="after")
    def _some_bound(self) -> ExpectBounds:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


def _exact(value: Any) -> Any:
    """`lost: 0` means exactly 0: {min: 0, max: 0}."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"min": value, "max": value}
    return value


Expectation = Annotated[ExpectBounds, BeforeValidator(_exact)]
GuaranteeOutcome = Literal["hold", "break"]


def _outcomes(value: Any) -> Any:
    """`break`, or `{group: break, ...}`; checked here so that a wrong value is one problem,
    not one for each form pydantic would try."""
    stated = list(value.values()) if isinstance(value, dict) else [value]
    bad = [v for v in stated if v not in ("hold", "break")]
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        raise ValueError("a consumer group's name is a string")
    if not isinstance(value, str | dict) or bad:
        got = f" (got {bad[0]!r})" if isinstance(value, dict) else ""  # else pydantic shows the input
        raise ValueError(f"expected hold or break, or a mapping of consumer group to hold or break{got}")
    return value


class GuaranteeExpectations(RootModel[dict[str, Annotated[GuaranteeOutcome | dict[str, GuaranteeOutcome],
                                                          BeforeValidator(_outcomes)]]]):
    """`expect.guarantees`: guarantee → `hold` (the default) or `break`, for every consumer group
    that has it, or group → `hold` | `break` (analysis/checkers/verdict.py). Which names and groups the
    scenario has is checked with the other sections (rmqsim/scenario/validate.py)."""

    model_config = ConfigDict(frozen=True)


NonNegativeS = Annotated[Float, Field(ge=0)]


class AvailabilityExpectations(BaseModel):
    """`expect.availability`: bounds on the summary's availability section (analysis/checkers/
    availability.py), each for every topic / consumer group, or by name (`{orders: 45}`); which
    names the scenario has is checked with the other sections (rmqsim/scenario/validate.py)."""

    model_config = _STRICT
    max_write_outage_s: NonNegativeS | dict[str, NonNegativeS] | None = Field(None, description=(
        "longest client-visible write outage of a topic, in s (every topic, or topic → s)"))
    max_recovery_s: NonNegativeS | dict[str, NonNegativeS] | None = Field(None, description=(
        "longest time from a fault's start until a consumer group was back, in s (every group, or group → s); "
        "a group that never recovered fails it"))
    min_acked_ratio: Annotated[Float, Field(ge=0, le=1)] | None = Field(None, description=(
        "lowest share of sends (ONEWAY aside) that returned SEND_OK"))

    @model_validator(mode="after")
    def _some_bound(self) -> AvailabilityExpectations:
        if self.max_write_outage_s is None and self.max_recovery_s is None and self.min_acked_ratio is None:
            raise ValueError("give max_write_outage_s, max_recovery_s or min_acked_ratio")
        return self


@with_config(ConfigDict(extra="allow"))  # the extra items are the metric bounds, typed by extra_items
class ExpectSection(TypedDict, extra_items=Expectation):  # type: ignore[call-arg]  # PEP 728: mypy lacks it
    """`expect:`: metric key path → bounds, `guarantees` → which guarantees hold or break, and
    `availability` → bounds on outages, recovery and the acknowledged share."""

    guarantees: NotRequired[GuaranteeExpectations]
    availability: NotRequired[AvailabilityExpectations]


# Validated as ExpectSection (the key decides the type), declared as the dict it mostly is, so
# that error hints (sim/config.py walks declared types) offer `min`/`max` for a misspelt bound.
Expect = Annotated[dict[str, Expectation], GetPydanticSchema(lambda _tp, handler: handler(ExpectSection))]


def _settle(value: Any) -> Any:
    """`settle_ms`: `auto`, or a duration (sim/config.py's units)."""
    return value if value == "auto" else parse_duration_ms(value)


SettleMs = Annotated[Literal["auto"] | Annotated[float, Field(ge=0, le=MAX_TIME_MS)], BeforeValidator(_settle)]


class Scenario(BaseModel):
    model_config = _STRICT
    name: Name = Field("scenario", description="the run's name; output goes to runs/<name>/")
    # 4.x is 4.9.8, 5.x is 5.3.3; the clients follow it unless `client_version` says otherwise
    version: Literal["5.x", "4.x"] = Field("5.x", description=(
        "RocketMQ behaviour followed where 4.x and 5.x differ: 5.x or 4.x"))
    seed: Int = Field(1, ge=0, le=MAX_SEED, description="default seed of the run (`--seed` overrides); 0 .. 2^63-1")
    duration_ms: PositiveDurationMs = Field(60_000, description=(
        "ms of traffic and faults (units: 500ms, 10s, 2min); then everything heals"))
    # by then the faults are healed and the producers stopped
    settle_ms: SettleMs = Field(30_000.0, description=(
        "ms after duration_ms with no faults, before the checks; `auto`: until the cluster is quiet for "
        "quiet_window_ms (rmqsim/quiescence.py), at most max_settle_ms"))
    quiet_window_ms: PositiveDurationMs | None = Field(None, description=(
        "how long the cluster must be quiet (null: one consumer heartbeat + one rebalance + one offset persistence "
        "round, 60 s with the defaults)"))
    max_settle_ms: PositiveDurationMs = Field(DEFAULT_MAX_SETTLE_MS, description=(
        "the longest `settle_ms: auto` goes on; a run still not quiet then is `unknown`"))
    # messages sent before this simulated time are left out of latency and throughput statistics
    # (OMB's warmupDurationMinutes); every correctness check (lost, duplicates, order) still covers
    # them. The default covers client start-up: the default clients start at 1 s, fetch routes and
    # finish their first rebalance about 1.5 s later (sim/warmup.py).
    warmup_ms: DurationMs = Field(5_000, description=(
        "ms; messages sent earlier are left out of latency statistics (OMB warmupDurationMinutes)"))
    cluster: ClusterSpec = Field(ClusterSpec(), description="name servers, broker groups and topics")
    network: NetworkSpec = Field(NetworkSpec(), description="one-way latencies of the network")
    producers: list[ProducerSpec] = Field([], description=(
        "producer entries; count N makes nodes <name>-1..<name>-N (rates per instance)"))
    consumers: list[ConsumerSpec] = Field([], description=(
        "push-consumer entries; count N makes nodes <name>-1..<name>-N"))
    faults: list[FaultSpec] = Field([], description="scripted faults at at_ms (kinds and their fields: header)")
    random_faults: list[RandomFaultSpec] = Field([], description=(
        "faults drawn at a seeded rate per hour on one of `nodes` (header)"))
    actions: list[ActionSpec] = Field([], description="operator commands (models/admin.py), e.g. reset_offset")
    # guarantees -> hold | break (analysis/checkers/verdict.py)
    expect: Expect = Field({}, description=(
        "bounds on summary metrics by key path: {lost: 0, latency_ms.p99: {max: 50}}"))
    limits: Limits = Field(Limits(), description="sane maxima, raised deliberately; not part of the scenario digest")
    client_version: Literal["5.x", "4.x"] | None = Field(None, description="the clients' release (null: as `version`)")

    @property
    def settle_auto(self) -> bool:
        return self.settle_ms == "auto"

    @property
    def settle_max_ms(self) -> float:
        """The longest the settle phase lasts: `settle_ms`, or `max_settle_ms` for `auto`."""
        return self.max_settle_ms if self.settle_ms == "auto" else self.settle_ms

    @property
    def resolved_client_version(self) -> str:
        return self.client_version or self.version

    def digest(self) -> str:
        """SHA-256 of the resolved tree (every default filled in), seed and limits excluded
        (neither changes what a run does with the seed it is given)."""
        data = self.model_dump(mode="json", exclude={"seed", "limits"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def load(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, override and validate a scenario file; ConfigError lists every problem."""
    source = str(path)
    try:
        data = load_yaml(read_text(path))
    except InputProblem as exc:
        raise ConfigError(source, [str(exc)]) from None
    return from_data(data if data is not None else {}, source, overrides)


def from_data(data: Any, source: str = "<scenario>", overrides: list[str] | None = None) -> Scenario:
    """Validate a scenario tree (plain data; `data` is modified by the overrides)."""
    if not isinstance(data, dict):
        raise ConfigError(source, [f"(top level): expected a mapping of sections, got {type(data).__name__}"])
    problems: list[str] = []
    for item in overrides or []:
        problems += apply_override(data, item)
    _version_defaults(data)
    scenario = None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems += _schema_problems(data, exc)
    problems += cross_check(data, Scenario)
    if scenario is not None:
        problems += setup_problems(scenario)  # how large set-up would be, against limits.max_route_entries
    if problems or scenario is None:  # no scenario: pydantic's problems are listed
        raise ConfigError(source, problems)
    return scenario


def _version_defaults(data: dict) -> None:
    """A `version: 4.x` scenario gets 4.9.8's defaults where they differ from 5.3.3's
    (models/broker/config.py V4_DEFAULTS), for every field its broker groups leave out; a
    malformed tree is left as it is, for validation to report."""
    if data.get("version") != V4:
        return
    cluster = data.setdefault("cluster", {})
    if isinstance(cluster, dict) and "brokers" not in cluster:
        cluster["brokers"] = [{}]  # the default group, written out to carry the 4.9.8 defaults
    if not isinstance(cluster, dict) or not isinstance(cluster.get("brokers"), list):
        return
    for entry in cluster["brokers"]:
        if not isinstance(entry, dict):
            continue
        for section, fields in V4_DEFAULTS.items():
            block = entry.setdefault(section, {})
            if isinstance(block, dict):
                for name, value in fields.items():
                    block.setdefault(name, value)


def _schema_problems(data: dict, exc: ValidationError) -> list[str]:
    """pydantic's problems; a document none of whose top-level keys is a scenario section is
    said to be one, rather than listing (and so echoing) each of its keys."""
    known = [f.alias or n for n, f in Scenario.model_fields.items()]
    unknown = [k for k in data if k not in known]
    if len(unknown) >= 2 and len(unknown) == len(data) and not any(
            isinstance(k, str) and difflib.get_close_matches(k, known, n=1, cutoff=0.6) for k in unknown):
        return [f"(top level): none of its {len(unknown)} top-level keys is a scenario section "
                f"(sections: {', '.join(known)}); is this a scenario file?"]
    return format_errors(Scenario, exc)


def apply_override(data: dict, item: str) -> list[str]:
    """`--set a.b[0].c=value` (sim/keypath.py): the value is read as YAML."""
    return keypath.apply_override(data, item)


def reference_tree() -> dict[str, Any]:
    """The full resolved default tree, with one example element for each list section."""
    example = Scenario(producers=[ProducerSpec(), ProducerSpec(name="txn-producer", group="txn_producer_group",
                                                               transaction=TransactionSpec())],
                       consumers=[ConsumerSpec()])
    return example.model_dump(mode="json", by_alias=True)


SEND_MODES_NOTE = """\
  # send_mode, one of: SYNC (send: waits for the result; retries, on another broker), ASYNC (send
  #   with a SendCallback; retry_times_when_send_async_failed), ONEWAY (sendOneway: no result, no
  #   retry; never counted as lost), ORDERLY (SYNC through a MessageQueueSelector on the sharding
  #   key's hash: needs keys > 0; pair it with a consumer's consume_mode: ORDERLY).
  # Transactional (TransactionMQProducer.sendMessageInTransaction: SYNC, one message at a time,
  #   visible iff its local transaction commits): an entry with a `transaction:` section. To add
  #   one, remove the `# ` that starts each line below.
"""


def dump_defaults() -> str:
    """Every field with its default and a trailing comment (rmqsim/scenario/reference.py). Copied verbatim it
    is a valid scenario of one SYNC producer and one consumer: the other send modes are listed in
    comments below the producer, and the transactional producer of `reference_tree()` is shown
    commented out (its name, group and `transaction:` section), so copying the defaults never
    creates a transactional producer."""
    from rmqsim.scenario.reference import dump_reference, header

    tree = reference_tree()
    plain = [p for p in tree["producers"] if p["transaction"] is None]
    alternatives = [{key: p[key] for key in ("name", "group", "transaction")}
                    for p in tree["producers"] if p["transaction"] is not None]
    lines = dump_reference({**tree, "producers": plain}, Scenario).splitlines(keepends=True)
    entry = dump_reference({"producers": alternatives}, Scenario).removeprefix(header()).splitlines(keepends=True)
    commented = [f"  # {line[2:]}" for line in entry[1:]]  # without the `producers:` line
    at = next(i for i, line in enumerate(lines) if line.startswith("consumers:"))
    return "".join(lines[:at] + [SEND_MODES_NOTE] + commented + lines[at:])
