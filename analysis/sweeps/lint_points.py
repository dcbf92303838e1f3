"""The configuration lint (rmqsim/scenario/lint.py `lint`) on every point of a sweep: each distinct
warning once, with the points it applies to and the swept parameters it is about.

A single run's lint says "this setting decides little" (`offset-persist-decides-little` for a
changed `persist_consumer_offset_interval_ms`); a sweep that varies that setting spends its runs
on rows that cannot differ. So the sweep's validation (analysis/sweeps/checks.py) lints every
point's scenario it builds: up to `FULL_CHECK_POINTS` points, each point; beyond, the base with
`set` applied and each distinct value of each parameter alone (as the validation does; the
points a value's warning applies to are then those with that value). `Collector` gathers the
findings; `entries` gives one entry per distinct warning (check id and key path), as the sweep's
manifest keeps it (`sweep.json` `lint`) for `rmqsim sweep`, `--dry-run` and the report:

    {"id", "path", "message" (the first point's), "fix", "where" ("every point", "persist_ms=1000
     (2 of 4 points)", "points 0 (a=1, b=2), 3 (…)"), "points" (how many), "params" (swept
     parameters whose key path the warning names), "inert" (the check says the setting at its path
     changes little or nothing: `inert_check`)}

A warning is about a swept parameter when its key path and the parameter's name the same place,
or one holds the other (`consumers[0].client` and `consumers[0].client.pull_batch_size`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sim import keypath
from sim.readback import COUNT, FLAG, TEXT, ListOf, Record

# lint checks whose finding says the setting at its key path changes little or nothing, besides the
# silently useless parts (rmqsim/scenario/useless_parts.py: a part that does nothing is inert)
INERT_CHECKS = frozenset({"offset-persist-decides-little", "v5-only-setting", "slave-without-reader",
                          "retention-never-runs"})
MAX_POINTS_NAMED = 6  # points listed by key in `where`, when no parameter value describes them
# sweep.json's `lint`, as the report reads it back (sim/readback.py shapes)
LINT_ENTRY = Record({"id": TEXT, "path": TEXT, "message": TEXT, "fix": TEXT, "where": TEXT, "points": COUNT,
                     "params": ListOf(TEXT), "inert": FLAG}, required=("id", "path", "message", "where", "params"))
LINT_SHAPE = ListOf(LINT_ENTRY)


def inert_check(check_id: str) -> bool:
    """Whether a lint check's finding says its setting does little or nothing (module docstring)."""
    from rmqsim.scenario.lint import LINT_CHECKS

    useless = {c.id for c in LINT_CHECKS if getattr(c.find, "__module__", "").endswith("useless_parts")}
    return check_id in INERT_CHECKS or check_id in useless


@dataclass
class _Warning:
    id: str
    path: str
    message: str
    fix: str
    varies: bool = False  # the message differs from point to point (it quotes the point's values)
    points: set[int] = field(default_factory=set)
    values: dict[str, list[Any]] = field(default_factory=dict)  # value mode: parameter → values it applies to
    base: bool = False  # value mode: found with no parameter applied


@dataclass
class Collector:
    """Findings by (check id, key path), from points (`add_point`) or, in a big sweep, from the base
    (`add_base`) and single parameter values (`add_value`)."""

    warnings: dict[tuple[str, str], _Warning] = field(default_factory=dict)

    def _get(self, finding: Any) -> _Warning:
        key = (finding.id, finding.path)
        if key not in self.warnings:
            self.warnings[key] = _Warning(finding.id, finding.path, finding.message, finding.fix)
        warning = self.warnings[key]
        warning.varies = warning.varies or finding.message != warning.message
        return warning

    def add_point(self, index: int, findings: Iterable[Any]) -> None:
        for finding in findings:
            self._get(finding).points.add(index)

    def add_base(self, findings: Iterable[Any]) -> None:
        for finding in findings:
            self._get(finding).base = True

    def add_value(self, param: str, value: Any, findings: Iterable[Any]) -> None:
        for finding in findings:
            warning = self._get(finding)
            if not warning.base:
                warning.values.setdefault(param, []).append(value)

    def entries(self, points: list[Any] | None, params: dict[str, str], n_points: int) -> list[dict[str, Any]]:
        """One entry per warning (module docstring), in the order first found; `points`: the sweep's
        points (Point: index, params, key) when every one was linted, else None; `params`:
        parameter name → key path."""
        out = []
        for w in self.warnings.values():
            if points is not None:
                where, count = describe(sorted(w.points), points, n_points), len(w.points)
            else:
                where, count = _value_where(w, n_points)
            if w.varies:
                where += " (the message quotes the first of them)"
            out.append({"id": w.id, "path": w.path, "message": w.message, "fix": w.fix, "where": where,
                        "points": count, "params": about(w.path, params), "inert": inert_check(w.id)})
        return out


def _value_where(w: _Warning, n_points: int) -> tuple[str, int]:
    if w.base and not w.values:
        return "every point (the base with `set`; each parameter value linted alone)", n_points
    if w.base:
        return "the base with `set`, and " + "; ".join(f"{p} = {', '.join(map(str, v))}" for p, v in w.values.items()), 0
    return "where " + "; or ".join(f"{p} = {', '.join(map(str, v))}" for p, v in w.values.items()) + \
        " (each parameter value linted alone)", 0


def describe(found: list[int], points: list[Any], n_points: int) -> str:
    """Where a warning applies, for people: `every point`, `persist_ms=1000 (2 of 4 points)`, or
    the points by key."""
    if len(found) == n_points:
        return "every point"
    chosen = set(found)
    for name in (points[0].params if points else {}):
        inside = {_key(p.params[name]) for p in points if p.index in chosen}
        outside = {_key(p.params[name]) for p in points if p.index not in chosen}
        if not inside & outside:
            shown = ", ".join(str(p.params[name]) for p in _first_by_value(points, name, inside))
            return f"{name}={shown} ({len(found)} of {n_points} points)"
    named = [f"{p.index} ({p.key})" for p in points if p.index in chosen][:MAX_POINTS_NAMED]
    more = len(found) - len(named)
    return f"points {', '.join(named)}" + (f" and {more} more" if more > 0 else "") + f" ({len(found)} of {n_points})"


def _key(value: Any) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def _first_by_value(points: list[Any], name: str, wanted: set[tuple[str, str]]) -> list[Any]:
    seen: dict[tuple[str, str], Any] = {}
    for p in points:
        key = _key(p.params[name])
        if key in wanted:
            seen.setdefault(key, p)
    return list(seen.values())


def about(path: str, params: dict[str, str]) -> list[str]:
    """The swept parameters a warning's key path names (the same place, or one holding the other)."""
    mine = _parts(path)
    if mine is None:
        return []
    out = []
    for name, key in params.items():
        theirs = _parts(key)
        if theirs is not None and (mine[:len(theirs)] == theirs or theirs[:len(mine)] == mine):
            out.append(name)
    return out


def _parts(path: str) -> list[str | int] | None:
    try:
        return keypath.parse(path)
    except keypath.KeyPathError:
        return None


def lines(entry: dict[str, Any], source: str) -> list[str]:
    """A sweep's warning as `rmqsim sweep` prints it: the lint's own line, where it applies (and
    the swept parameters it names), the fix."""
    out = [f"warning: {source}: {entry['path']}: {entry['message']} [{entry['id']}]", f"  at {entry['where']}"]
    if entry["params"]:
        verdict = "the lint calls it inert" if entry.get("inert") else "the lint warns about it"
        out[-1] += f"; swept parameter {', '.join(entry['params'])}: {verdict}"
    if entry.get("fix"):
        out.append(f"  fix: {entry['fix']}")
    return out


def inert_params(entries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Swept parameter → the warnings that call it inert."""
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if entry.get("inert"):
            for name in entry["params"]:
                out.setdefault(name, []).append(entry)
    return out
