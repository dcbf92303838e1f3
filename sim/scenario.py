"""Scenario files: the typed tree, loading, validation and cross-checks (assembly edge).

A scenario states only what differs from the defaults, and the defaults are RocketMQ's (the
model config classes carry them, Java names beside). `load()` reports every problem of a file
at once — YAML syntax, unknown keys with a "did you mean", wrong types, bad units, non-positive
rates and durations, unknown fault targets, undeclared topics — as a `ConfigError`.

Instances: a producer or consumer entry with `count: N > 1` becomes nodes `<name>-1 … <name>-N`;
with `count: 1` the node is `<name>`. Rates are per instance. Topic `queues` is per broker
(`writeQueueNums` = `readQueueNums`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from models.broker.config import BrokerConfig, MessageStoreConfig
from models.consumer.config import PushConsumerConfig
from models.producer.config import ProducerConfig
from sim.config import ConfigError, DurationMs, format_errors
from sim.disk import DiskConfig
from sim.dist import Constant, Dist, Lognormal
from sim.faults import FaultSpec, RandomFaultSpec

_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
MAX_INSTANCES = 1000  # `count` of one producer or consumer entry
Count = Annotated[int, Field(gt=0, le=MAX_INSTANCES)]  # instances of one producer/consumer entry


class NameServerSpec(BaseModel):
    model_config = _STRICT
    name: str = "namesrv"
    zone: str = "zone-a"


class BrokerSpec(BaseModel):
    """A broker group's master (brokerId 0) on its own host."""

    model_config = _STRICT
    name: str = "broker-a"
    zone: str = "zone-a"
    store: MessageStoreConfig = MessageStoreConfig()
    broker: BrokerConfig = BrokerConfig()
    disk: DiskConfig = DiskConfig()


class TopicSpec(BaseModel):
    model_config = _STRICT
    name: str = Field("TopicTest", min_length=1, max_length=127)
    queues: int = Field(4, gt=0, le=1024)  # per broker
    brokers: list[str] | None = None  # default: every broker


class ClusterSpec(BaseModel):
    model_config = _STRICT
    nameservers: list[NameServerSpec] = Field(default_factory=lambda: [NameServerSpec()], min_length=1)
    brokers: list[BrokerSpec] = Field(default_factory=lambda: [BrokerSpec()], min_length=1)
    topics: list[TopicSpec] = Field(default_factory=lambda: [TopicSpec()], min_length=1)


class ZoneLatencySpec(BaseModel):
    model_config = _STRICT
    zones: list[str] = Field(min_length=2, max_length=2)
    latency_ms: Dist


class LinkSpec(BaseModel):
    model_config = _STRICT
    src: str
    dst: str
    latency_ms: Dist
    both_ways: bool = True


class NetworkSpec(BaseModel):
    """One-way latencies. Default: a data-centre LAN (median 0.25 ms, p99 ≈ 0.7 ms)."""

    model_config = _STRICT
    latency_ms: Dist = Lognormal(dist="lognormal", median=0.25, sigma=0.45)
    zone_latency: list[ZoneLatencySpec] = []
    links: list[LinkSpec] = []


class ProducerSpec(BaseModel):
    model_config = _STRICT
    name: str = "producer"
    count: Count = 1
    zone: str = "zone-a"
    topic: str = "TopicTest"
    rate_per_s: float = Field(1000.0, gt=0)
    arrival: Literal["poisson", "constant"] = "poisson"
    message_bytes: Dist = Constant(value=1024)
    tags: list[str] = []
    keys: int = Field(0, ge=0, le=2**31 - 1)  # number of distinct sharding keys (0: none)
    send_mode: Literal["SYNC", "ONEWAY"] = "SYNC"
    start_ms: DurationMs = Field(1_000, ge=0)
    stop_ms: DurationMs | None = Field(None, gt=0)  # default: the scenario's duration
    client: ProducerConfig = ProducerConfig()


class ConsumerSpec(BaseModel):
    model_config = _STRICT
    name: str = "consumer"
    count: Count = 1
    zone: str = "zone-a"
    group: str = "please_rename_unique_group_name"
    topic: str = "TopicTest"
    tags: list[str] | None = None  # None: subscribe '*'
    consume_time_ms: Dist = Constant(value=1.0)
    failure_probability: float = Field(0.0, ge=0, lt=1)
    start_ms: DurationMs = Field(1_000, ge=0)
    client: PushConsumerConfig = PushConsumerConfig()


class ExpectBounds(BaseModel):
    """`{min: x, max: y}` (either may be left out) on one summary metric."""

    model_config = _STRICT
    min: float | None = None
    max: float | None = None

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


class Scenario(BaseModel):
    model_config = _STRICT
    name: str = "scenario"
    seed: int = Field(1, ge=0)
    duration_ms: DurationMs = Field(60_000, gt=0)
    settle_ms: DurationMs = Field(30_000, ge=0)
    cluster: ClusterSpec = ClusterSpec()
    network: NetworkSpec = NetworkSpec()
    producers: list[ProducerSpec] = []
    consumers: list[ConsumerSpec] = []
    faults: list[FaultSpec] = []
    random_faults: list[RandomFaultSpec] = []
    expect: dict[str, Expectation] = {}  # metric key path -> bounds (analysis/verdict.py)

    def digest(self) -> str:
        """SHA-256 of the resolved tree (every default filled in), seed excluded."""
        data = self.model_dump(mode="json", exclude={"seed"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def instance_names(name: str, count: int) -> list[str]:
    return [name] if count == 1 else [f"{name}-{i}" for i in range(1, count + 1)]


def load(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, [f"(file): cannot read: {exc.strerror or exc}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        raise ConfigError(source, [f"{where}: YAML syntax error: {getattr(exc, 'problem', exc)}"]) from None
    return from_data(data if data is not None else {}, source, overrides)


def from_data(data: Any, source: str = "<scenario>", overrides: list[str] | None = None) -> Scenario:
    if not isinstance(data, dict):
        raise ConfigError(source, [f"(top level): expected a mapping of sections, got {type(data).__name__}"])
    problems: list[str] = []
    for item in overrides or []:
        problems += apply_override(data, item)
    scenario = None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems += format_errors(Scenario, exc)
    problems += cross_check(data)
    if problems:
        raise ConfigError(source, problems)
    return scenario


def apply_override(data: dict, item: str) -> list[str]:
    """`--set a.b[0].c=value`: the value is parsed as YAML; the path's parents must exist."""
    if "=" not in item:
        return [f"--set {item}: expected key.path=value"]
    path, raw = item.split("=", 1)
    value = yaml.safe_load(raw) if raw.strip() else ""
    parts = _split_path(path)
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        try:
            node = node[part] if not isinstance(node, dict) or part in node else node.setdefault(part, {})
        except (IndexError, KeyError, TypeError):
            return [f"--set {path}: no element {'.'.join(map(str, parts[:i + 1]))} in this scenario"]
    try:
        node[parts[-1]] = value
    except (IndexError, TypeError):
        return [f"--set {path}: cannot set {parts[-1]!r} here"]
    return []


def _split_path(path: str) -> list[Any]:
    parts: list[Any] = []
    for token in path.replace("]", "").split("."):
        name, *indexes = token.split("[")
        if name:
            parts.append(name)
        parts += [int(i) for i in indexes]
    return parts


def _names(items: Any, default: list[str]) -> list[str]:
    if not isinstance(items, list):
        return default
    return [str(i.get("name")) for i in items if isinstance(i, dict) and i.get("name") is not None]


def cross_check(data: dict) -> list[str]:
    """Checks that span sections; tolerant of malformed input (pydantic reports that)."""
    cluster = data.get("cluster") if isinstance(data.get("cluster"), dict) else {}
    brokers = _names(cluster.get("brokers"), ["broker-a"])
    namesrvs = _names(cluster.get("nameservers"), ["namesrv"])
    topics = _names(cluster.get("topics"), ["TopicTest"])
    problems: list[str] = []
    nodes: dict[str, str] = {}
    unknown_counts: list[str] = []  # names whose `count` is invalid: their instances are unknown
    for section, names in (("cluster.nameservers", namesrvs), ("cluster.brokers", brokers)):
        for name in names:
            problems += _claim(nodes, name, section)
    for section in ("producers", "consumers"):
        entries = data.get(section) if isinstance(data.get(section), list) else []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            count, base = _count(entry.get("count", 1)), str(entry.get("name", section[:-1]))
            if count is None:  # reported by pydantic; don't guess the node names
                unknown_counts.append(base)
            else:
                for name in instance_names(base, count):
                    problems += _claim(nodes, name, f"{section}[{i}]")
            topic = entry.get("topic", "TopicTest")
            if topic not in topics:
                problems.append(f"{section}[{i}].topic: topic {topic!r} is not declared in cluster.topics "
                                f"(declared: {', '.join(topics) or 'none'})")
    problems += _check_topic_brokers(cluster, brokers)
    problems += _check_groups(data)
    problems += _check_roles(cluster)
    problems += _check_fault_targets(data, nodes, unknown_counts)
    problems += _check_expect(data.get("expect"))
    return problems


def _check_expect(expect: Any) -> list[str]:
    """Every `expect:` key must be a metric the summary has (analysis/verdict.py)."""
    from analysis.verdict import EXPECTABLE_METRICS

    problems = []
    for key in expect if isinstance(expect, dict) else ():
        if key not in EXPECTABLE_METRICS:
            hint = difflib.get_close_matches(str(key), EXPECTABLE_METRICS, n=1, cutoff=0.6)
            problems.append(f"expect.{key}: not a metric an expectation can bound" +
                            (f" (did you mean {hint[0]!r}?)" if hint else
                             f" (metrics: {', '.join(EXPECTABLE_METRICS)})"))
    return problems


_COUNT = TypeAdapter(Count)  # the `count` fields' own rule


def _count(value: Any) -> int | None:
    """`value` as the scenario model will read a `count` (lax: 2.0 and "2" are 2), else None."""
    try:
        return _COUNT.validate_python(value)
    except ValidationError:
        return None


def _claim(nodes: dict[str, str], name: str, section: str) -> list[str]:
    if name in nodes:
        return [f"{section}: node name {name!r} is already used by {nodes[name]}"]
    nodes[name] = section
    return []


def _check_topic_brokers(cluster: dict, brokers: list[str]) -> list[str]:
    problems = []
    for i, topic in enumerate(cluster.get("topics") or []):
        if isinstance(topic, dict):
            for name in topic.get("brokers") or []:
                if name not in brokers:
                    problems.append(f"cluster.topics[{i}].brokers: {name!r} is not a broker here "
                                    f"(brokers: {', '.join(brokers)})")
    return problems


def _check_groups(data: dict) -> list[str]:
    seen: dict[str, tuple[Any, Any]] = {}
    problems = []
    for i, entry in enumerate(data.get("consumers") or []):
        if not isinstance(entry, dict):
            continue
        group = entry.get("group", "please_rename_unique_group_name")
        sub = (entry.get("topic", "TopicTest"), entry.get("tags"))
        if group in seen and seen[group] != sub:
            problems.append(f"consumers[{i}].group: members of group {group!r} must subscribe alike "
                            f"(got {sub} and {seen[group]})")
        seen.setdefault(group, sub)
    return problems


def _check_roles(cluster: dict) -> list[str]:
    problems = []
    for i, broker in enumerate(cluster.get("brokers") or []):
        store = broker.get("store") if isinstance(broker, dict) else None
        if isinstance(store, dict) and store.get("broker_role") == "SLAVE":
            problems.append(f"cluster.brokers[{i}].store.broker_role: SLAVE brokers (HA) are not modelled yet; "
                            "use ASYNC_MASTER or SYNC_MASTER")
    return problems


def _check_fault_targets(data: dict, nodes: dict[str, str], unknown_counts: list[str]) -> list[str]:
    problems = []
    listing = "; ".join(f"{k}" for k in nodes)
    for section in ("faults", "random_faults"):
        for i, fault in enumerate(data.get(section) or []):
            if not isinstance(fault, dict):
                continue
            refs = [("node", fault.get("node")), ("src", fault.get("src")), ("dst", fault.get("dst"))]
            refs += [(f"groups[{g}]", n) for g, grp in enumerate(fault.get("groups") or [])
                     if isinstance(grp, list) for n in grp]
            refs += [("nodes", n) for n in fault.get("nodes") or []]
            for key, name in refs:
                if name is not None and name not in nodes and not _may_be_instance(name, unknown_counts):
                    problems.append(f"{section}[{i}].{key}: {name!r} is not a node here (nodes: {listing})")
    return problems


def _may_be_instance(name: Any, bases: list[str]) -> bool:
    """`name` could be an instance of an entry whose count is invalid (`base` or `base-N`)."""
    return any(name == base or (isinstance(name, str) and name.startswith(f"{base}-")
                                and name[len(base) + 1:].isdigit()) for base in bases)


def reference_tree() -> dict[str, Any]:
    """The full resolved default tree, with one example element for each list section."""
    example = Scenario(producers=[ProducerSpec()], consumers=[ConsumerSpec()])
    return example.model_dump(mode="json", by_alias=True)


def dump_defaults() -> str:
    header = ("# Every scenario field with its default (generated by `rmqsim defaults`).\n"
              "# List sections show one element with its defaults; a scenario states only differences.\n")
    return header + yaml.safe_dump(reference_tree(), sort_keys=False, default_flow_style=False)
