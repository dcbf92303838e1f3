"""Typed configuration loading: units for durations, and errors that name file, key path, reason.

Scenario and sweep trees are pydantic models with `extra="forbid"`. `format_errors` turns a
`ValidationError` into one line per problem, `path.to[0].key: reason`, adding a "did you mean"
hint for unknown keys by walking the model tree to the offending level. All problems of a file
are reported together (`ConfigError` carries the list).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import BaseModel, BeforeValidator, ValidationError

_UNIT_TO_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0,
               "min": 60_000.0, "h": 3_600_000.0}
_DURATION_RE = re.compile(r"^\s*(-?[0-9][0-9_]*(?:\.[0-9]+)?)\s*([a-zµ]*)\s*$")


class ConfigError(Exception):
    """Every problem found in one file: `problems` is a list of 'key.path: reason' lines."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.problems)} problem(s) in {self.source}:"]
        lines += [f"  {self.source}: {p}" for p in self.problems]
        return "\n".join(lines)


def parse_duration_ms(value: Any) -> Any:
    """Accept 500, 1.5, '500ms', '10s', '2min', '1h', '250us'; return milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration (a number of ms, or a string like '10s'), got a boolean")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if not match:
            raise ValueError(f"cannot read {value!r} as a duration (examples: 500, '500ms', '10s', '2min')")
        number, unit = float(match.group(1).replace("_", "")), match.group(2) or "ms"
        if unit not in _UNIT_TO_MS:
            raise ValueError(f"unknown unit {unit!r} in {value!r} (use one of us, ms, s, min, h)")
        return number * _UNIT_TO_MS[unit]
    raise ValueError(f"expected a duration, got {type(value).__name__}")


DurationMs = Annotated[float, BeforeValidator(parse_duration_ms)]


def render_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _strip(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return [_strip(a) for a in typing.get_args(tp)]
    return [tp]


def _step(tp: Any, part: Any) -> Any:
    """One level down the type tree along a pydantic error location; None if lost."""
    for member in _members(_strip(tp)):
        origin = typing.get_origin(member)
        if origin in (list, tuple) and isinstance(part, int):
            return typing.get_args(member)[0]
        if origin is dict:
            return typing.get_args(member)[1]
        if isinstance(member, type) and issubclass(member, BaseModel):
            field = member.model_fields.get(part)
            if field is not None:
                return field.annotation
            for name, f in member.model_fields.items():
                if f.alias == part:
                    return member.model_fields[name].annotation
            tag = member.model_fields.get("dist") or member.model_fields.get("kind")
            if tag is not None and part in typing.get_args(tag.annotation):
                return member
    return None


def _known_keys(root: type, loc: tuple) -> list[str]:
    tp: Any = root
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return []
    for member in _members(_strip(tp)):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return [f.alias or n for n, f in member.model_fields.items()]
    return []


def format_errors(root: type, error: ValidationError) -> list[str]:
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        path = render_path(_drop_tags(root, loc))
        if err["type"] == "extra_forbidden":
            known = _known_keys(root, loc[:-1])
            hint = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
            reason = "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else
                                      f" (known keys: {', '.join(sorted(known))})" if known else "")
        else:
            reason = err["msg"].removeprefix("Value error, ")
            if err["type"] not in ("missing",) and "input" in err and not isinstance(err["input"], (dict, list)):
                reason += f" (got {err['input']!r})"
        problems.append(f"{path}: {reason}")
    return problems


def _drop_tags(root: type, loc: tuple) -> tuple:
    """Remove discriminator tags and validator names that pydantic inserts into locations."""
    out, tp = [], root
    for part in loc:
        nxt = _step(tp, part)
        if nxt is not None and isinstance(part, str) and _is_tag(tp, part):
            tp = nxt
            continue
        if isinstance(part, str) and (part.startswith("function-") or "[" in part):
            continue
        out.append(part)
        tp = nxt if nxt is not None else tp
    return tuple(out)


def _is_tag(tp: Any, part: str) -> bool:
    for member in _members(_strip(tp)):
        if isinstance(member, type) and issubclass(member, BaseModel):
            if part in member.model_fields:
                return False
            tag = member.model_fields.get("dist") or member.model_fields.get("kind")
            if tag is not None and part in typing.get_args(tag.annotation):
                return True
    return False
