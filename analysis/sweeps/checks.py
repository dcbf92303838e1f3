"""Validation of a sweep beyond its schema: the base scenario, names, size, and every value.

Order and cost:
1. The base scenario is read like any scenario (a regular UTF-8 file of bounded size, YAML
   with limits). Its own problems are *summarised*, never listed: the base may be a file the
   sweep's author does not control (`base: /etc/shadow`), and its content must not come back in
   messages. `rmqsim validate <base>` lists them.
2. Names, zip lengths, seeds and size: the number of points and runs is computed from the
   lists' lengths, never by expanding them, and bounded (sim/limits.py: MAX_POINTS, MAX_RUNS).
3. Values: the base with the sweep's `set` applied is validated once; then each *distinct*
   value of each parameter is applied to it and validated once. A grid of 1,000 × 1,000 points
   costs 2,000 validations, not a million.
4. Interactions between parameters (a value valid alone but not with another) are checked by
   validating every point's whole scenario, when there are at most `FULL_CHECK_POINTS` points;
   a bigger sweep finds them when each run starts (a run whose scenario is invalid is a failed
   run, with its reproduction line).
5. The lint (rmqsim/scenario/lint.py) runs on each scenario built in 4 — every point — or, in a
   bigger sweep, on those of 3; analysis/sweeps/lint_points.py gathers its warnings.

With a `progress` stream, step 3 and 4 report how far they are, at most once a second.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from analysis.checkers.run_rows import MAP_PREFIXES, RESERVED_COLUMNS
from analysis.sweeps import results_store as store
from analysis.sweeps.lint_points import Collector
from analysis.sweeps.values import override_item, param_type
from rmqsim.scenario import spec as scenario_mod
from rmqsim.scenario.lint import lint
from sim import keypath
from sim.config import ConfigError, render_path
from sim.inputs import InputProblem, load_yaml, read_text, short
from sim.limits import FULL_CHECK_POINTS, MAX_POINTS, MAX_RUNS

PARAM_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
PROGRESS_AFTER = 200  # validations: fewer finish too fast to need a progress line


def check_sweep(spec: Any, base_path: Path | None, problems: list[str], progress: TextIO | None = None, *,
                points: Callable[[dict], Iterator[Any]], lints: Collector | None = None) -> dict | None:
    """Append every problem of the sweep (`spec`: its SweepSpec, analysis/sweeps/spec.py, which
    calls this) to `problems`; returns the base scenario's data. `points(base_data)`: the sweep's
    points in order over that data (`Sweep.iter_points`), for the check of every point. `lints`
    gathers the lint's findings on each scenario built (analysis/sweeps/lint_points.py): every
    point's when every point is checked (`every_point`), else the base's and each value's."""
    base_data = load_base(spec.base, base_path, problems) if base_path is not None else None
    problems += _check_names(spec) + _check_zip(spec) + _check_types(spec)
    sized = _check_size(spec, problems)
    if base_data is None:
        return None
    counter = Progress(progress)
    if sized:
        runs = spec.n_points() * len(spec.seed_list())
        counter.intro = f"sweep {spec.name}: {spec.n_points():,} points × {len(spec.seed_list()):,} seeds = {runs:,} runs"
    full = sized and every_point(spec)
    problems += check_values(base_data, spec, counter, None if full else lints)
    if full and not problems:
        problems += _check_points(base_data, spec, points, counter, lints)
    counter.done()
    return base_data


def every_point(spec: Any) -> bool:
    """Whether each point's whole scenario is validated (and linted): at most FULL_CHECK_POINTS."""
    return spec.n_points() <= FULL_CHECK_POINTS


def load_base(base: str, base_path: Path, problems: list[str]) -> dict | None:
    """The base scenario's data if it is a valid scenario; else a one-line, content-free problem."""
    shown = short(base, 80)
    try:
        data = load_yaml(read_text(base_path))
    except InputProblem as exc:
        if exc.where == "(file)":
            problems.append(f"base: {shown}: {exc.reason}")
        else:
            problems.append(f"base: {shown} is not valid YAML (at {exc.where}); check it with: "
                            f"rmqsim validate {shlex.quote(str(base_path))}")
        return None
    try:
        scenario_mod.from_data(copy.deepcopy(data if data is not None else {}), str(base_path))
    except ConfigError as exc:
        problems.append(f"base: {shown} is not a valid scenario ({len(exc.problems)} problem(s)); see them "
                        f"with: rmqsim validate {shlex.quote(str(base_path))}")
        return None
    return data if data is not None else {}


def _check_names(spec: Any) -> list[str]:
    problems = []
    for name in sorted(spec.grid.keys() & spec.zip.keys()):
        problems.append(f"zip.{name}: parameter name also used in grid")
    owner: dict[str, str] = {}
    fixed = {_canonical(k) for k in spec.set}
    reserved = RESERVED_COLUMNS | store.EXTRA_COLUMNS
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        for name, param in table.items():
            key, where = _canonical(param.key), render_path((section, name))
            if key in owner:
                problems.append(f"{where}.key: {_shown(param.key)} is already varied by {owner[key]}")
            owner.setdefault(key, where)
            if key in fixed:
                problems.append(f"{where}.key: {_shown(param.key)} is also fixed by set")
            if not PARAM_NAME_RE.match(name):
                problems.append(f"{where}: parameter names are lower_snake_case, at most 40 "
                                "characters (a column of the runs table)")
            elif name in reserved:
                problems.append(f"{section}.{name}: clashes with the runs-table column {name!r}; pick another name")
            elif name.startswith(tuple(MAP_PREFIXES)):
                prefix = next(p for p in MAP_PREFIXES if name.startswith(p))
                problems.append(f"{section}.{name}: names starting {prefix!r} are the runs table's map columns "
                                "(analysis/checkers/run_rows.py); pick another name")
    return problems


def _canonical(key: str) -> str:
    return keypath.render(keypath.parse(key))


def _shown(key: str) -> str:
    """A (valid) key path for a message, cut (sim/keypath.py: shown)."""
    return keypath.shown(keypath.parse(key))


def _check_zip(spec: Any) -> list[str]:
    lengths = {name: len(p.values) for name, p in spec.zip.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{n}={n_values}" for n, n_values in lengths.items())
        return [f"zip: lists must have equal lengths (got {listed})"]
    return []


def _check_types(spec: Any) -> list[str]:
    problems = []
    for section, table in (("grid", spec.grid), ("zip", spec.zip)):
        for name, param in table.items():
            problem = param_type(param.values)[1]
            if problem:
                problems.append(f"{section}.{name}.values: {problem}")
    return problems


def _check_size(spec: Any, problems: list[str]) -> bool:
    """Points and runs within bounds, and the timeline run one of them; False if not."""
    points, seeds = spec.n_points(), spec.seed_list()
    runs = points * len(seeds)
    before = len(problems)
    if points > MAX_POINTS:
        problems.append(f"grid: {_count(points)} points (lengths of the grid's lists multiplied, times the zip "
                        f"rows), more than {MAX_POINTS:,}")
    elif runs > MAX_RUNS:
        problems.append(f"seeds: {points:,} points × {len(seeds):,} seeds = {runs:,} runs, more than {MAX_RUNS:,}")
    if len(set(seeds)) != len(seeds):
        problems.append("seeds: listed more than once")
    if not spec.timeline.point < points:
        problems.append(f"timeline.point: {spec.timeline.point} is not a point (0..{_count(points - 1)})")
    if spec.timeline.seed is not None and spec.timeline.seed not in seeds:
        problems.append(f"timeline.seed: {spec.timeline.seed} is not one of the sweep's seeds")
    return len(problems) == before


def _count(n: int) -> str:
    """`n` for a message: a product of list lengths can pass Python's 4,300-digit str() limit."""
    if n < 10**15:
        return f"{n:,}"
    return f"about {float(n):.3g}" if n < 10**308 else f"more than 10^{int(math.log10(2) * (n.bit_length() - 1))}"


def _scenario(base_data: dict, items: list[str]) -> tuple[Any, list[str]]:
    """The scenario of the base with `items` applied, or None and its problems."""
    try:
        return scenario_mod.from_data(copy.deepcopy(base_data), "<sweep>", items), []
    except ConfigError as exc:
        return None, exc.problems


def check_values(base_data: dict, spec: Any, counter: Progress, lints: Collector | None = None) -> list[str]:
    """The base with `set` applied, then each distinct parameter value applied to that alone;
    `lints` gathers the lint's findings on each (a sweep too big to lint every point)."""
    set_items = [override_item(k, v) for k, v in spec.set.items()]
    base, common = _scenario(base_data, set_items)
    if lints is not None and base is not None:
        lints.add_base(lint(base))
    problems = [f"{_blame(p, list(spec.set))}{p}" for p in common]
    singles = [(render_path((section, name)), name, param, value) for section, table in
               (("grid", spec.grid), ("zip", spec.zip)) for name, param in table.items() for value in _distinct(param)]
    counter.add(len(singles) + 1)
    counter.step()
    for where, name, param, value in singles:
        sc, found = _scenario(base_data, [*set_items, override_item(param.key, value)])
        for problem in found:
            if problem not in common:
                problems.append(f"{where} ({_shown(param.key)}={short(value)}): {problem}")
        if lints is not None and sc is not None:
            lints.add_value(name, value, lint(sc))
        counter.step()
    return list(dict.fromkeys(problems))


def _distinct(param: Any) -> list[Any]:
    """Each value once (1 and 1.0 and True stay apart: they are different YAML)."""
    seen: dict[tuple[str, str], Any] = {}
    for value in param.values:
        seen.setdefault((type(value).__name__, repr(value)), value)
    return list(seen.values())


def _check_points(base_data: dict, spec: Any, points: Callable[[dict], Iterator[Any]],
                  counter: Progress, lints: Collector | None = None) -> list[str]:
    """Every point's whole scenario; each distinct problem is reported once; `lints` gathers the
    lint's findings on each."""
    counter.add(spec.n_points())
    seen: dict[str, str] = {}
    for point in points(base_data):
        sc, found = _scenario(base_data, list(point.overrides))
        for problem in found:
            seen.setdefault(problem, ",".join(f"{k}={_shown_value(v)}" for k, v in point.params.items())
                            or "(every point)")
        if lints is not None and sc is not None:
            lints.add_point(point.index, lint(sc))
        counter.step()
    return [f"point {where}: {_blame(problem, list(spec.set))}{problem}" for problem, where in seen.items()]


def _shown_value(value: Any) -> str:
    """A parameter value as Point.key writes it, unless that could garble a message line."""
    text = short(value) if isinstance(value, str) else f"{value}"
    return value if isinstance(value, str) and text[1:-1] == value else text


def _blame(problem: str, set_keys: list[str]) -> str:
    """Which `set` item a scenario problem comes from: its key path starts the problem."""
    for key in sorted(set_keys, key=len, reverse=True):
        if re.match(rf"{re.escape(key)}(?=[:.\[ ]|$)", problem):
            return f"set.{_shown(key)} → "
    return ""


class Progress:
    """`validating sweep: 1,200/5,000 scenarios`, at most once a second, on a stream."""

    def __init__(self, out: TextIO | None) -> None:
        self.out, self.total, self.current = out, 0, 0
        self.last = time.monotonic()
        self.shown = False
        self.intro = ""  # the sweep's size, said before a long validation starts

    def add(self, n: int) -> None:
        self.total += n
        if self.out is not None and self.intro and self.total >= PROGRESS_AFTER:
            self.out.write(f"{self.intro}; validating (each distinct value once)\n")
            self.out.flush()
            self.intro = ""

    def step(self) -> None:
        self.current += 1
        now = time.monotonic()
        if self.out is not None and self.total >= PROGRESS_AFTER and now - self.last >= 1.0:
            self.last = now
            self.shown = True
            self.out.write(f"validating sweep: {self.current:,}/{self.total:,} scenarios\n")
            self.out.flush()

    def done(self) -> None:
        if self.shown and self.out is not None:
            self.out.write(f"validating sweep: {self.current:,}/{self.total:,} scenarios, done\n")
            self.out.flush()
