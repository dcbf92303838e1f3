"""Sweep files: a base scenario, parameters to vary, seeds, and which per-run tables to keep.

    name: consumer_offsets                 # a plain name: the default output is sweeps/<name>
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
    run_timeout_s: 3600                    # per-run wall-time bound (default 1 h): over it, a failed run
    run_max_events: 30000000               # per-run event bound (default as `rmqsim run`)
    report: {focus: loss}                  # the question the report opens with (default: inferred):
                                           # loss, duplicates, latency, order, transactions, or a
                                           # numeric column by its key path: latency_ms.max, ...

Points are numbered in expansion order (grid outermost first, then the zip rows); a run is
(point, seed) and its id `p<point>-s<seed>`. The number of points and runs is computed from the
file without expanding it (`Sweep.n_points`, `Sweep.n_runs`); points are expanded only when a
caller asks for them. Validation (analysis/sweeps/checks.py) reports every problem (file, key
path, reason) at once, and lints the points (`Sweep.lint`: analysis/sweeps/lint_points.py).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from analysis.sweeps.values import Scalar, override_item, param_type
from rmqsim.scenario import spec as scenario_mod
from sim import keypath
from sim.config import ConfigError, Float, Int, Name, format_errors
from sim.inputs import InputProblem, load_yaml, read_text
from sim.limits import DEFAULT_MAX_EVENTS, DEFAULT_MAX_WALL_S, MAX_PATH_CHARS, MAX_POINTS, MAX_SEED, MAX_SEEDS

KEEP_TABLES = ("deliveries", "latencies")
MAX_RUN_TIMEOUT_S = 30 * 86_400.0


def _key_path(text: str) -> str:
    keypath.parse(text)  # KeyPathError is a ValueError: pydantic reports it at this key
    return text


def _base_path(text: str) -> str:
    if "\0" in text:
        raise ValueError("the path contains a NUL byte")
    return text


KeyPath = Annotated[str, AfterValidator(_key_path)]
Seed = Annotated[Int, Field(ge=0, le=MAX_SEED)]


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    key: KeyPath  # scenario key path, as for `rmqsim run --set`
    values: list[Scalar] = Field(min_length=1, max_length=MAX_POINTS)


class Timeline(BaseModel):
    model_config = ConfigDict(extra="forbid")
    point: Int = Field(0, ge=0, le=MAX_POINTS)
    seed: Seed | None = None  # default: the first seed


def _focus_name(text: str) -> str:
    from analysis.sweeps.columns import check_name  # pyarrow: not for `rmqsim schema`'s models

    return check_name(text)  # FocusError is a ValueError: pydantic reports it at report.focus


FocusName = Annotated[str, Field(min_length=1, max_length=200,
                                 description="loss, duplicates, latency, order, transactions, or a numeric column "
                                             "of the runs table by its summary key path (latency_ms.max, "
                                             "availability.write_outage_s.max, ...)"),
                      AfterValidator(_focus_name)]


class ReportSpec(BaseModel):
    """What the sweep's report is for (analysis/reports/sweep_report.py)."""
    model_config = ConfigDict(extra="forbid")
    # the metric the report opens with (analysis/reports/focus.py); without it the report infers it
    # from what varies across the points
    focus: FocusName | None = None


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: Name
    base: Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS), AfterValidator(_base_path)]
    set: dict[KeyPath, Scalar | list | dict] = {}
    grid: dict[str, Param] = {}
    zip: dict[str, Param] = {}
    seeds: Annotated[Int, Field(ge=1, le=MAX_SEEDS)] | Annotated[list[Seed], Field(min_length=1, max_length=MAX_SEEDS)] = 3
    keep: list[Literal["deliveries", "latencies"]] = []
    timeline: Timeline = Timeline()
    run_timeout_s: Float = Field(DEFAULT_MAX_WALL_S, gt=0, le=MAX_RUN_TIMEOUT_S)  # wall time; over it a run fails
    run_max_events: Int = Field(DEFAULT_MAX_EVENTS, gt=0, le=10**12)  # events; over it a run fails
    report: ReportSpec = ReportSpec()

    def n_points(self) -> int:
        """Points, from the lists' lengths (grid sizes multiplied, times the zip rows)."""
        zip_rows = len(next(iter(self.zip.values())).values) if self.zip else 1
        return math.prod(len(p.values) for p in self.grid.values()) * zip_rows

    def seed_list(self) -> list[int]:
        return list(range(1, self.seeds + 1)) if isinstance(self.seeds, int) else list(self.seeds)


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
    """A validated sweep; points are expanded on first use."""

    source: str
    spec: SweepSpec
    base_path: Path
    base_data: dict
    params: dict[str, Param]  # grid then zip, in file order
    param_types: dict[str, str]  # name → "int" | "float" | "str" | "bool"
    seeds: list[int]
    _overrides: dict[tuple[str, Any], str] = field(default_factory=dict, repr=False)
    # the lint's warnings over the points (analysis/sweeps/lint_points.py), as sweep.json keeps them
    lint: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def n_points(self) -> int:
        return self.spec.n_points()

    @property
    def n_runs(self) -> int:
        return self.n_points * len(self.seeds)

    @cached_property
    def points(self) -> list[Point]:
        return list(self.iter_points())

    @cached_property
    def runs(self) -> list[tuple[int, int]]:
        """(point, seed) of every run, in order."""
        return [(p, s) for p in range(self.n_points) for s in self.seeds]

    def iter_points(self) -> Iterator[Point]:
        """The points in order, one at a time (a sweep's size is stated before this is used)."""
        spec = self.spec
        set_items = tuple(self.override(k, v) for k, v in spec.set.items())
        grid_axes = [[(name, p.key, v) for v in p.values] for name, p in spec.grid.items()]
        zip_rows = list(zip(*[[(name, p.key, v) for v in p.values] for name, p in spec.zip.items()],
                            strict=True)) or [()]
        index = 0
        for combo in itertools.product(*grid_axes):
            for row in zip_rows:
                chosen = (*combo, *row)
                yield Point(index, {name: v for name, _k, v in chosen},
                            set_items + tuple(self.override(k, v) for _n, k, v in chosen))
                index += 1

    def override(self, key: str, value: Any) -> str:
        """`key=value` (cached per distinct pair: a big grid repeats each value many times)."""
        cache_key = (key, json.dumps(value, sort_keys=True))
        text = self._overrides.get(cache_key)
        if text is None:
            text = self._overrides[cache_key] = override_item(key, value)
        return text

    def digest(self) -> str:
        """SHA-256 of what determines the results: base scenario, points, seeds, kept tables."""
        h = hashlib.sha256(json.dumps({"base": self.base_data, "seeds": self.seeds,
                                       "keep": sorted(self.spec.keep)}, sort_keys=True).encode())
        for point in self.iter_points():
            h.update(b"\n" + json.dumps(point.overrides).encode())
        return h.hexdigest()

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


def load_sweep(path: str | Path, progress: TextIO | None = None) -> Sweep:
    """Read and validate a sweep file; raises ConfigError listing every problem. With
    `progress`, a long validation (a big grid) reports how far it is."""
    from analysis.sweeps.checks import check_sweep, every_point  # pyarrow (results_store): not for `rmqsim schema`
    from analysis.sweeps.lint_points import Collector

    source = str(path)
    try:
        raw = load_yaml(read_text(path))
    except InputProblem as exc:
        raise ConfigError(source, [str(exc)]) from None
    if not isinstance(raw, dict):
        raise ConfigError(source, ["(top level): expected a mapping (name, base, grid, zip, seeds, ...)"])
    problems: list[str] = []
    spec, base_usable = _validate(raw, problems)
    if spec is None:
        raise ConfigError(source, problems)
    base_path = resolve_base(Path(path).parent, spec.base) if base_usable else None
    lints = Collector()
    # every point's whole scenario is checked (and linted) over the points a Sweep of the base expands to
    base_data = check_sweep(spec, base_path, problems, progress, points=lambda data: Sweep(
        "<sweep>", spec, Path("."), data, {}, {}, spec.seed_list()).iter_points(), lints=lints)
    if problems:
        raise ConfigError(source, problems)
    params = {**spec.grid, **spec.zip}
    sweep = Sweep(source, spec, base_path, base_data, params,
                  {n: param_type(p.values)[0] for n, p in params.items()}, spec.seed_list())
    sweep.lint = lints.entries(sweep.points if every_point(spec) else None, {n: p.key for n, p in params.items()},
                               sweep.n_points)
    return sweep


def resolve_base(folder: Path, base: str) -> Path:
    """The base scenario's path (relative to the sweep file's folder), resolved if possible."""
    path = folder / base
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, say: reading it will tell
        return path


def _validate(raw: dict, problems: list[str]) -> tuple[SweepSpec | None, bool]:
    """The spec and whether its `base` is usable; on errors, record them and go on with the
    valid sections (so the semantic checks still report their problems in the same run)."""
    try:
        return SweepSpec.model_validate(raw), True
    except ValidationError as exc:
        problems += format_errors(SweepSpec, exc)
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
    rest = {k: v for k, v in raw.items() if k in SweepSpec.model_fields and k not in bad}
    base_usable = "base" in rest
    rest.setdefault("name", "unnamed")
    rest.setdefault("base", "-")  # a placeholder: not read
    try:
        return SweepSpec.model_validate(rest), base_usable
    except ValidationError:
        return None, False

