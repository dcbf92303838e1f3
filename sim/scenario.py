"""Scenario files: the typed tree, and loading with every problem reported at once (assembly edge).

A scenario states only what differs from the defaults, and the defaults are RocketMQ's (the
model config classes carry them, Java names beside). `load()` reads the file (a regular UTF-8
file of bounded size, YAML with limits: sim/kernel/inputs.py), applies `--set` overrides
(sim/kernel/keypath.py), validates the tree with pydantic (types, units, bounds: unknown keys with a
"did you mean"), and then runs the cross-section checks on the values pydantic accepted
(sim/scenario_checks.py). Every problem is reported together as one `ConfigError`.

Instances: a producer or consumer entry with `count: N > 1` becomes nodes `<name>-1 … <name>-N`;
with `count: 1` the node is `<name>`. Rates are per instance. Topic `queues` is per broker
(`writeQueueNums` = `readQueueNums`).

Names: the scenario `name` becomes a directory (`runs/<name>/seed-<n>`), so it is a plain name
(sim/kernel/config.py: Name); node names become parts of random-stream names (NodeName); topic and
group names follow RocketMQ's character set (letters, digits, `_`, `-`), and topic names that
start like RocketMQ's system topics (`SCHEDULE_`, `RMQ_SYS_`) are refused.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    AfterValidator,
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
from models.broker.config import BrokerConfig, BrokerRole, MessageStoreConfig
from models.consumer.config import MessageModel, PushConsumerConfig
from models.producer.config import ProducerConfig
from models.producer.transaction_config import TransactionSpec
from sim.kernel import keypath
from sim.kernel.config import (
    ConfigError,
    DurationMs,
    Float,
    FloatS,
    Int,
    IntMiB,
    Name,
    NodeName,
    PositiveDurationMs,
    Tag,
    format_errors,
    parse_duration_ms,
    sizes_in_dist,
)
from sim.kernel.disk import DiskConfig
from sim.kernel.dist import MAX_ZIPF_SUPPORT, Constant, Dist, Lognormal, SizeDist
from sim.kernel.faults import FaultSpec, RandomFaultSpec
from sim.kernel.inputs import InputProblem, load_yaml, read_text
from sim.kernel.limits import (
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
    MIN_RATE_PER_S,
)
from sim.scenario_checks import cross_check, instance_names  # noqa: F401 - instance_names: API (runner)
from sim.setup_size import setup_problems

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
Count = Annotated[Int, Field(gt=0, le=HARD_MAX_INSTANCES)]  # instances of one producer/consumer entry
_RESERVED_TOPIC_PREFIXES = ("SCHEDULE_", "RMQ_SYS_", "%")  # TopicValidator's system topics
_ROCKETMQ_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


def _topic_name(value: str) -> str:
    if not (_ROCKETMQ_NAME_RE.fullmatch(value) and len(value) <= 127):
        raise ValueError("a topic name is 1 to 127 letters, digits, '_' or '-'")
    if value.startswith(_RESERVED_TOPIC_PREFIXES):
        raise ValueError(f"topic names starting with {' or '.join(_RESERVED_TOPIC_PREFIXES[:2])} are "
                         "RocketMQ's system topics")
    return value


def _group_name(value: str) -> str:
    if not (_ROCKETMQ_NAME_RE.fullmatch(value) and len(value) <= 255):
        raise ValueError("a group name is 1 to 255 letters, digits, '_' or '-'")
    return value


TopicName = Annotated[str, AfterValidator(_topic_name)]
GroupName = Annotated[str, AfterValidator(_group_name)]
Zone = NodeName


class Limits(BaseModel):
    """Sane maxima (sim/kernel/limits.py), raised deliberately by a scenario's own `limits:` section.
    `max_route_entries` is checked before the run (sim/setup_size.py); `max_rss_mb`,
    `max_events_per_instant` and `max_step_wall_s` during it (sim/kernel/watchdog.py), where a breach stops
    the run with `stopped_by` max_rss_mb or livelock, verdict unknown."""

    model_config = _STRICT
    max_sim_time_ms: PositiveDurationMs = DEFAULT_MAX_SIM_TIME_MS  # duration_ms + settle_ms; hard: MAX_TIME_MS
    max_rate_per_s: Float = Field(DEFAULT_MAX_RATE_PER_S, gt=0, le=HARD_MAX_RATE_PER_S)  # per producer instance
    max_instances: Int = Field(DEFAULT_MAX_INSTANCES, gt=0, le=HARD_MAX_INSTANCES)  # `count` of one entry
    max_nodes: Int = Field(DEFAULT_MAX_NODES, gt=0, le=HARD_MAX_NODES)  # every node of the scenario
    max_route_entries: Int = Field(DEFAULT_MAX_ROUTE_ENTRIES, gt=0, le=HARD_MAX_ROUTE_ENTRIES, description=(
        "most queues in all the topic routes set-up builds (sim/setup_size.py; ~0.4 KB each)"))
    max_rss_mb: IntMiB | None = Field(None, gt=0, le=HARD_MAX_RSS_MB, description=(
        "most MB of the run's resident memory (null: half the machine's memory)"))
    max_events_per_instant: Int = Field(DEFAULT_MAX_EVENTS_PER_INSTANT, gt=0, description=(
        "most events at one simulated instant (more: a livelock)"))
    max_step_wall_s: FloatS = Field(DEFAULT_MAX_STEP_WALL_S, gt=0, le=MAX_TIME_MS / 1000, description=(
        "most wall seconds of one event (longer: a livelock, a step that never yields)"))


class NameServerSpec(BaseModel):
    model_config = _STRICT
    name: NodeName = "namesrv"
    zone: Zone = "zone-a"


class ReplicaSpec(BaseModel):
    """One broker of a group: its role and host zone (default: the group's zone)."""

    model_config = _STRICT
    role: BrokerRole
    zone: Zone | None = None


class BrokerSpec(BaseModel):
    """A broker group (brokerName `name`). Without `replicas`, one master on its own host whose
    role is `store.broker_role`. With `replicas`, one node per replica, each on its own host,
    all sharing `store`/`broker`/`disk` except the role: the master (exactly one ASYNC_MASTER
    or SYNC_MASTER, brokerId 0) is node `name`, the SLAVEs are nodes `name-s1`, `name-s2`, ...
    (brokerId 1, 2, ... in list order). No automatic failover: a group whose master is down
    has no master until it restarts (the controller and DLedger modes are out of scope)."""

    model_config = _STRICT
    name: NodeName = "broker-a"
    zone: Zone = "zone-a"
    store: MessageStoreConfig = MessageStoreConfig()
    broker: BrokerConfig = BrokerConfig()
    disk: DiskConfig = DiskConfig()
    replicas: list[ReplicaSpec] | None = Field(None, min_length=1, max_length=64)


class TopicSpec(BaseModel):
    model_config = _STRICT
    name: TopicName = "TopicTest"
    queues: Int = Field(4, gt=0, le=1024)  # per broker
    brokers: list[NodeName] | None = None  # default: every broker


class ClusterSpec(BaseModel):
    model_config = _STRICT
    nameservers: list[NameServerSpec] = Field(default_factory=lambda: [NameServerSpec()], min_length=1)
    brokers: list[BrokerSpec] = Field(default_factory=lambda: [BrokerSpec()], min_length=1)
    topics: list[TopicSpec] = Field(default_factory=lambda: [TopicSpec()], min_length=1)


class ZoneLatencySpec(BaseModel):
    model_config = _STRICT
    zones: list[Zone] = Field(min_length=2, max_length=2)
    latency_ms: Dist


class LinkSpec(BaseModel):
    model_config = _STRICT
    src: NodeName
    dst: NodeName
    latency_ms: Dist
    both_ways: bool = True


class NetworkSpec(BaseModel):
    """One-way latencies. Default: a data-centre LAN (median 0.25 ms, p99 ≈ 0.7 ms)."""

    model_config = _STRICT
    latency_ms: Dist = Lognormal(dist="lognormal", median=0.25, sigma=0.45)
    zone_latency: list[ZoneLatencySpec] = []
    links: list[LinkSpec] = []


class ProducerSpec(BaseModel):
    """A producer entry: `count` client processes, each with one DefaultMQProducer and its own
    workload (models/producer/workload.py). `rate_per_s` is per producer instance."""

    model_config = _STRICT
    name: NodeName = "producer"
    count: Count = 1
    zone: Zone = "zone-a"
    group: GroupName = "DEFAULT_PRODUCER"  # producerGroup (MixAll.DEFAULT_PRODUCER_GROUP)
    topic: TopicName = "TopicTest"
    rate_per_s: Float = Field(1000.0, ge=MIN_RATE_PER_S, le=HARD_MAX_RATE_PER_S)  # per instance; limits.max_rate_per_s
    arrival: Literal["poisson", "constant", "bursts", "on_off"] = "poisson"
    burst_size: Int = Field(10, gt=0, le=100_000)  # arrival bursts: messages per burst
    on_ms: Dist = Constant(value=5_000)  # arrival on_off: length of an on period
    off_ms: Dist = Constant(value=5_000)  # arrival on_off: length of an off period
    message_bytes: Annotated[SizeDist, BeforeValidator(sizes_in_dist)] = Constant(value=1024)
    key_bytes: Annotated[SizeDist, BeforeValidator(sizes_in_dist)] | None = None  # length of the KEYS property (None: no KEYS, or `k<i>` of a sharding key)
    tags: list[Tag] = Field([], max_length=1_000)
    keys: Int = Field(0, ge=0, le=2**31 - 1)  # distinct sharding keys (orderly sends only)
    key_skew: Float = Field(0.0, ge=0, le=10)  # Zipf exponent of the sharding keys (0: uniform)
    send_mode: Literal["SYNC", "ASYNC", "ONEWAY", "ORDERLY"] = "SYNC"  # ORDERLY = SYNC + selector hash
    selector: Literal["hash", "random"] | None = None  # MessageQueueSelector (sendSelectImpl); None: sendDefaultImpl
    delay_level: Int = Field(0, ge=0, le=64)  # DELAY property (0: none; the broker caps it at its highest level)
    batch_size: Int = Field(1, gt=0, le=10_000)  # messages per send (> 1: MessageBatch)
    start_ms: DurationMs = 1_000
    stop_ms: PositiveDurationMs | None = None  # default: the scenario's duration
    client: ProducerConfig = ProducerConfig()
    transaction: TransactionSpec | None = None  # set: a TransactionMQProducer (sendMessageInTransaction)

    @model_validator(mode="after")
    def _send_options(self) -> ProducerSpec:
        problems = []
        if self.transaction is not None and (self.send_mode != "SYNC" or self.selector or self.batch_size > 1
                                             or self.delay_level):
            problems.append("a transactional producer sends one message at a time with sendMessageInTransaction "
                            "(SYNC, no selector, no batch, no delay level)")
        orderly = self.send_mode == "ORDERLY" or self.selector == "hash"
        if self.send_mode == "ORDERLY" and self.selector == "random":
            problems.append("send_mode ORDERLY selects by the sharding key's hash; drop selector: random")
        if orderly and not self.keys:
            problems.append("orderly sends (send_mode ORDERLY or selector: hash) need sharding keys: set keys > 0")
        if orderly and self.key_skew and self.keys > MAX_ZIPF_SUPPORT:
            problems.append(f"with key_skew, keys is at most {MAX_ZIPF_SUPPORT:,}")
        if self.batch_size > 1 and self.delay_level:
            problems.append("a batch cannot carry a delay level (MessageBatch: 'TimeDelayLevel is not supported "
                            "for batching')")
        if self.batch_size > 1 and (orderly or self.selector):
            problems.append("batch sends go through sendDefaultImpl: use no selector and no ORDERLY with batch_size > 1")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class ConsumerSpec(BaseModel):
    model_config = _STRICT
    name: NodeName = "consumer"
    count: Count = 1
    zone: Zone = "zone-a"
    group: GroupName = "please_rename_unique_group_name"
    topic: TopicName = "TopicTest"
    tags: list[Tag] | None = Field(None, max_length=1_000)  # None: subscribe '*'
    consume_time_ms: Dist = Constant(value=1.0)
    failure_probability: Float = Field(0.0, ge=0, lt=1)
    start_ms: DurationMs = 1_000
    stop_ms: PositiveDurationMs | None = None  # graceful shutdown (DefaultMQPushConsumer.shutdown) at this time
    # the listener registered: MessageListenerConcurrently, or MessageListenerOrderly (broker locks, one
    # batch at a time per queue; a failure suspends the queue)
    consume_mode: Literal["CONCURRENTLY", "ORDERLY"] = "CONCURRENTLY"
    client: PushConsumerConfig = PushConsumerConfig()

    @model_validator(mode="after")
    def _orderly_needs_clustering(self) -> ConsumerSpec:
        problems = []
        if self.consume_mode == "ORDERLY" and self.client.message_model is MessageModel.BROADCASTING:
            problems.append("consume_mode ORDERLY with message_model BROADCASTING is not modelled; use CLUSTERING")
        if self.consume_mode != "ORDERLY" and self.client.consume_message_batch_max_size != 1:
            problems.append("client.consume_message_batch_max_size > 1 is modelled for consume_mode ORDERLY only")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class ExpectBounds(BaseModel):
    """`{min: x, max: y}` (either may be left out) on one summary metric."""

    model_config = _STRICT
    min: Float | None = None
    max: Float | None = None

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
    that has it, or group → `hold` | `break` (analysis/verdict.py). Which names and groups the
    scenario has is checked with the other sections (sim/scenario_checks.py)."""

    model_config = ConfigDict(frozen=True)


@with_config(ConfigDict(extra="allow"))  # the extra items are the metric bounds, typed by extra_items
class ExpectSection(TypedDict, extra_items=Expectation):
    """`expect:`: metric key path → bounds, and `guarantees` → which guarantees hold or break."""

    guarantees: NotRequired[GuaranteeExpectations]


# Validated as ExpectSection (the key decides the type), declared as the dict it mostly is, so
# that error hints (sim/kernel/config.py walks declared types) offer `min`/`max` for a misspelt bound.
Expect = Annotated[dict[str, Expectation], GetPydanticSchema(lambda _tp, handler: handler(ExpectSection))]


def _settle(value: Any) -> Any:
    """`settle_ms`: `auto`, or a duration (sim/kernel/config.py's units)."""
    return value if value == "auto" else parse_duration_ms(value)


SettleMs = Annotated[Literal["auto"] | Annotated[float, Field(ge=0, le=MAX_TIME_MS)], BeforeValidator(_settle)]


class Scenario(BaseModel):
    model_config = _STRICT
    name: Name = "scenario"
    # the RocketMQ line the models follow where 4.x (4.9.8) and 5.x (5.3.3) differ; the clients
    # follow it unless `client_version` says otherwise
    version: Literal["5.x", "4.x"] = "5.x"
    seed: Int = Field(1, ge=0, le=MAX_SEED)
    duration_ms: PositiveDurationMs = 60_000
    # after duration_ms (faults healed, producers stopped), before the checks: a time, or `auto`:
    # go on until the cluster has been quiet for quiet_window_ms, at most max_settle_ms (sim/quiescence.py)
    settle_ms: SettleMs = 30_000.0
    quiet_window_ms: PositiveDurationMs | None = None  # null: one heartbeat + rebalance + offset persistence round
    max_settle_ms: PositiveDurationMs = DEFAULT_MAX_SETTLE_MS
    # messages sent before this simulated time are left out of latency and throughput statistics
    # (OMB's warmupDurationMinutes); every correctness check (lost, duplicates, order) still covers
    # them. The default covers client start-up: the default clients start at 1 s, fetch routes and
    # finish their first rebalance about 1.5 s later (sim/warmup.py).
    warmup_ms: DurationMs = 5_000
    cluster: ClusterSpec = ClusterSpec()
    network: NetworkSpec = NetworkSpec()
    producers: list[ProducerSpec] = []
    consumers: list[ConsumerSpec] = []
    faults: list[FaultSpec] = []
    random_faults: list[RandomFaultSpec] = []
    actions: list[ActionSpec] = []  # operator commands (models/admin.py), e.g. reset_offset
    expect: Expect = {}  # metric key path -> bounds; guarantees -> hold | break (analysis/verdict.py)
    limits: Limits = Limits()
    client_version: Literal["5.x", "4.x"] | None = None  # the clients' release (null: as `version`)

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
    scenario = None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems += _schema_problems(data, exc)
    problems += cross_check(data, Scenario)
    if scenario is not None:
        problems += setup_problems(scenario)  # how large set-up would be, against limits.max_route_entries
    if problems:
        raise ConfigError(source, problems)
    return scenario


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
    """`--set a.b[0].c=value` (sim/kernel/keypath.py): the value is read as YAML."""
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
    """Every field with its default and a trailing comment (sim/reference.py). Copied verbatim it
    is a valid scenario of one SYNC producer and one consumer: the other send modes are listed in
    comments below the producer, and the transactional producer of `reference_tree()` is shown
    commented out (its name, group and `transaction:` section), so copying the defaults never
    creates a transactional producer."""
    from sim.reference import dump_reference, header

    tree = reference_tree()
    plain = [p for p in tree["producers"] if p["transaction"] is None]
    alternatives = [{key: p[key] for key in ("name", "group", "transaction")}
                    for p in tree["producers"] if p["transaction"] is not None]
    lines = dump_reference({**tree, "producers": plain}, Scenario).splitlines(keepends=True)
    entry = dump_reference({"producers": alternatives}, Scenario).removeprefix(header()).splitlines(keepends=True)
    commented = [f"  # {line[2:]}" for line in entry[1:]]  # without the `producers:` line
    at = next(i for i, line in enumerate(lines) if line.startswith("consumers:"))
    return "".join(lines[:at] + [SEND_MODES_NOTE] + commented + lines[at:])
