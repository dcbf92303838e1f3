"""Sweep files: a base scenario, parameters to vary, seeds, and which per-run tables to keep.

    name: consumer_offsets
    base: ../restart_consumer.yaml        # relative to the sweep file
    set:                                   # applied to every run (key path → value)
      duration_ms: 20s
    grid:                                  # every combination, in file order
      persist_ms: {key: "consumers[0].client.persist_consumer_offset_interval_ms", values: [1000, 5000]}
      rate: {key: "producers[0].rate_per_s", values: [100, 200]}
    zip:                                   # varied together (equal lengths), crossed with the grid
      batch: {key: "consumers[0].client.pull_batch_size", values: [1, 32]}
      threads: {key: "consumers[0].client.consume_thread_max", values: [1, 20]}
    seeds: 5                               # seeds 1..5, or an explicit list [7, 11]
    keep: [deliveries, latencies]          # optional per-message tables
    timeline: {point: 0, seed: 1}          # the run whose latency-over-time the report draws
    run_timeout_s: 600                     # optional: a run over this wall time is a failed run

Points are numbered in expansion order (grid outermost first, then the zip rows); a run is
(point, seed) and its id `p<point>-s<seed>`. Validation loads the base scenario and every
point's scenario, and reports every problem (file, key path, reason) at once.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim import scenario as scenario_mod
from sim.config import ConfigError, format_errors

Scalar = int | float | str | bool
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
KEEP_TABLES = ("deliveries", "latencies")


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1)  # scenario key path, as for `rmqsim run --set`
    values: list[Scalar] = Field(min_length=1)


class Timeline(BaseModel):
    model_config = ConfigDict(extra="forbid")
    point: int = Field(0, ge=0)
    seed: int | None = None  # default: the first seed


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    base: str  # checked in load_sweep (a missing file is reported with the other problems)
    set: dict[str, Scalar | list | dict] = {}
    grid: dict[str, Param] = {}
    zip: dict[str, Param] = {}
    seeds: int | list[int] = Field(3)
    keep: list[Literal["deliveries", "latencies"]] = []
    timeline: Timeline = Timeline()
    run_timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)  # wall time; over it a run fails


@dataclass(frozen=True)
class Point:
    index: int
    params: dict[str, Scalar]  # parameter name → value
    overrides: tuple[str, ...]  # `key=value` items, sweep `set` first

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.params.items())


@dataclass
class Sweep:
    """A validated, expanded sweep."""

    source: str
    spec: SweepSpec
    base_path: Path
    base_data: dict
    params: dict[str, Param]  # grid then zip, in file order
    param_types: dict[str, str]  # name → "int" | "float" | "str" | "bool"
    points: list[Point]
    seeds: list[int]
    runs: list[tuple[int, int]] = field(default_factory=list)  # (point, seed), in order

    @property
    def name(self) -> str:
        return self.spec.name

    def digest(self) -> str:
        """SHA-256 of what determines the results: base scenario, points, seeds, kept tables."""
        doc = {"base": self.base_data, "points": [p.overrides for p in self.points],
               "seeds": self.seeds, "keep": sorted(self.spec.keep)}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def scenario_data(self, point: Point) -> dict:
        """The base scenario tree with the point's overrides applied (a fresh copy)."""
        data = copy.deepcopy(self.base_data)
        for item in point.overrides:
            scenario_mod.apply_override(data, item)
        return data

    def timeline_run(self) -> tuple[int, int]:
        t = self.spec.timeline
        return t.point, t.seed if t.seed is not None else self.seeds[0]


def run_id(point: int, seed: int) -> str:
    return f"p{point:04d}-s{seed}"


def _override(key: str, value: Any) -> str:
    """`key=value` with the value in YAML flow style, read back by `apply_override` as the same
    value (1e-05 stays a float, 'ASYNC_FLUSH' a string, lists and mappings stay whole)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"))
    return f"{key}={text.removesuffix(chr(10)).removesuffix(chr(10) + '...')}"


def load_sweep(path: str | Path) -> Sweep:
    """Read, validate and expand a sweep file; raises ConfigError listing every problem."""
    source = str(path)
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(source, [f"(file): cannot read: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, [f"(file): YAML syntax error: {exc}"]) from None
    if not isinstance(raw, dict):
        raise ConfigError(source, ["(top level): expected a mapping (name, base, grid, zip, seeds, ...)"])
    problems: list[str] = []
    spec = _validate(raw, problems)
    if spec is None:
        raise ConfigError(source, problems)
    base_path = (Path(path).parent / spec.base).resolve()
    base_data = _load_base(base_path, problems) if spec.base else None
    params = {**spec.grid, **spec.zip}
    problems += _check_names(spec)
    problems += _check_zip(spec)
    seeds = list(range(1, spec.seeds + 1)) if isinstance(spec.seeds, int) else list(spec.seeds)
    problems += _check_seeds(spec, seeds)
    param_types = {}
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        for name, param in table.items():
            kind, problem = _param_type(param.values)
            param_types[name] = kind
            if problem:
                problems.append(f"{section}.{name}.values: {problem}")
    if problems:
        if base_data is not None:  # still check each `set` item and parameter value on its own
            problems += _check_values(base_data, spec)
        raise ConfigError(source, problems)
    points = _expand(spec)
    if base_data is not None:
        problems += _check_points(base_data, points, spec)
    if not problems and not 0 <= spec.timeline.point < len(points):
        problems.append(f"timeline.point: {spec.timeline.point} is not a point (0..{len(points) - 1})")
    if not problems and spec.timeline.seed is not None and spec.timeline.seed not in seeds:
        problems.append(f"timeline.seed: {spec.timeline.seed} is not one of the sweep's seeds")
    if problems:
        raise ConfigError(source, problems)
    sweep = Sweep(source, spec, base_path, base_data, params, param_types, points, seeds)
    sweep.runs = [(p.index, s) for p in points for s in seeds]
    return sweep


def _validate(raw: dict, problems: list[str]) -> SweepSpec | None:
    """The spec; on errors, record them and go on with the valid sections (so the semantic
    checks below still report their problems in the same run)."""
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        problems += format_errors(SweepSpec, exc)
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
    rest = {k: v for k, v in raw.items() if k in SweepSpec.model_fields and k not in bad}
    rest.setdefault("name", "?")
    rest.setdefault("base", "")
    try:
        return SweepSpec.model_validate(rest)
    except ValidationError:
        return None


def _load_base(base_path: Path, problems: list[str]) -> dict | None:
    if not base_path.is_file():
        problems.append(f"base: no scenario file at {base_path}")
        return None
    try:
        data = yaml.safe_load(base_path.read_text(encoding="utf-8")) or {}
        scenario_mod.from_data(copy.deepcopy(data), str(base_path))
    except yaml.YAMLError as exc:
        problems.append(f"base: {base_path} is not valid YAML: {exc}")
        return None
    except ConfigError as exc:
        problems += [f"base: {p}" for p in exc.problems]
        return None
    return data


def _check_names(spec: SweepSpec) -> list[str]:
    from analysis.run_rows import RESERVED_COLUMNS  # the runs table's own column names

    problems = []
    for name in sorted(spec.grid.keys() & spec.zip.keys()):
        problems.append(f"zip.{name}: parameter name also used in grid")
    owner: dict[str, str] = {}
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        for name, param in table.items():
            key = param.key.replace(" ", "")
            if key in owner:
                problems.append(f"{section}.{name}.key: {param.key} is already varied by {owner[key]}")
            owner.setdefault(key, f"{section}.{name}")
            if key in spec.set:
                problems.append(f"{section}.{name}.key: {param.key} is also fixed by set")
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        for name in table:
            if not NAME_RE.match(name):
                problems.append(f"{section}.{name}: parameter names are lower_snake_case (a column of the runs table)")
            elif name in RESERVED_COLUMNS:
                problems.append(f"{section}.{name}: clashes with the runs-table column {name!r}; pick another name")
    return problems


def _check_zip(spec: SweepSpec) -> list[str]:
    lengths = {name: len(p.values) for name, p in spec.zip.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{n}={n_values}" for n, n_values in lengths.items())
        return [f"zip: lists must have equal lengths (got {listed})"]
    return []


def _check_seeds(spec: SweepSpec, seeds: list[int]) -> list[str]:
    if isinstance(spec.seeds, int) and spec.seeds < 1:
        return ["seeds: must be at least 1"]
    if len(set(seeds)) != len(seeds):
        return ["seeds: listed more than once"]
    if any(s < 0 for s in seeds):
        return ["seeds: must be ≥ 0"]
    return []


def _param_type(values: list[Scalar]) -> tuple[str, str]:
    kinds = {("bool" if isinstance(v, bool) else type(v).__name__) for v in values}
    if kinds <= {"int"}:
        return "int", ""
    if kinds <= {"int", "float"}:
        return "float", ""
    if len(kinds) == 1:
        return kinds.pop(), ""
    return "str", f"values mix types ({', '.join(sorted(kinds))}); a parameter's values share one type"


def _expand(spec: SweepSpec) -> list[Point]:
    set_items = tuple(_override(k, v) for k, v in spec.set.items())
    grid_axes = [[(name, p.key, v) for v in p.values] for name, p in spec.grid.items()]
    zip_rows = list(zip(*[[(name, p.key, v) for v in p.values] for name, p in spec.zip.items()],
                        strict=True)) or [()]
    points = []
    for combo in itertools.product(*grid_axes):
        for row in zip_rows:
            chosen = list(combo) + list(row)
            points.append(Point(len(points), {name: v for name, _k, v in chosen},
                                set_items + tuple(_override(k, v) for _n, k, v in chosen)))
    return points


def _check_points(base_data: dict, points: list[Point], spec: SweepSpec) -> list[str]:
    """Every point's scenario must validate; each distinct problem is reported once."""
    seen: dict[str, str] = {}
    for point in points:
        try:
            scenario_mod.from_data(copy.deepcopy(base_data), "<point>", list(point.overrides))
        except ConfigError as exc:
            for problem in exc.problems:
                seen.setdefault(problem, point.key or "(every point)")
    return [f"point {where}: {_blame(problem, list(spec.set))}{problem}" for problem, where in seen.items()]


def _check_values(base_data: dict, spec: SweepSpec) -> list[str]:
    """Each `set` item and each parameter value applied alone to the base scenario."""
    problems: list[str] = []
    singles = [("set", k, v) for k, v in spec.set.items()]
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        singles += [(f"{section}.{name}", p.key, v) for name, p in table.items() for v in p.values]
    for where, key, value in singles:
        try:
            scenario_mod.from_data(copy.deepcopy(base_data), "<value>", [_override(key, value)])
        except ConfigError as exc:
            problems += [f"{where} ({key}={value!r}): {p}" for p in exc.problems if p not in problems]
    return list(dict.fromkeys(problems))


def _blame(problem: str, set_keys: list[str]) -> str:
    """Which `set` item a scenario problem comes from: its key path starts the problem."""
    for key in sorted(set_keys, key=len, reverse=True):
        if re.match(rf"{re.escape(key)}(?=[:.\[ ]|$)", problem):
            return f"set.{key} → "
    return ""
