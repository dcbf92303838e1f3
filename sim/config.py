"""Typed configuration loading: value types with bounds, and errors that name file, key path, reason.

Scenario and sweep trees are pydantic models with `extra="forbid"`. `format_errors` turns a
`ValidationError` into one line per problem, `path.to[0].key: reason`, adding a "did you mean"
hint for unknown keys by walking the model tree to the offending level. All problems of a file
are reported together (`ConfigError` carries the list; `render` lists the first
`MAX_PROBLEMS` and counts the rest).

Value types for model fields (use them instead of bare `int`/`float`/`str`):
- `Int`, `Float`: pydantic's lax numbers (2.0 is 2, "5" is 5) except that a boolean is refused
  (`count: true` is a mistake, not 1);
- `PositiveIntMs`, `NonNegativeIntMs`: whole milliseconds of a model tunable, at most `MAX_TIME_MS`;
- `DurationMs`, `PositiveDurationMs`: 500, 1.5, 1e3, '500ms', '10s', '2min', '1h', '1d', '250us'
  ('250µs' and '250μs' too), '1.5e3s', in ms, at most `MAX_TIME_MS`; a positive duration is at
  least 1 µs, the clock's resolution. A duration string is decimal: '1:30' (minutes and
  seconds, or hours and minutes?) is refused with a hint, '017s' is 17 s, '0x1F' is no
  duration; YAML's own number forms are refused earlier (sim/inputs.py);
- `Name` (scenario and sweep names: they become directory names) and `NodeName` (node names:
  they become parts of random-stream names, `<node>.disk`, `net.<src>-><dst>`; an '@' is
  allowed after the first character, for RocketMQ's `<room>@<broker>` naming convention);
- `Tag`: a message tag, 1 to 128 printable characters: no control character (NUL, BEL, ESC, CR,
  DEL, C1), no format character (a zero-width space, a right-to-left override) and no space but
  ASCII's: characters a reader cannot see, or that garble the terminal, the report and every
  message that shows the tag (refused with the key path, `producers[0].tags[1]`).

Messages never show more of a value than `short` (sim/inputs.py) does.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Annotated, Any, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationError

from sim.inputs import short
from sim.limits import MAX_NAME_CHARS, MAX_PROBLEMS, MAX_TIME_MS

_UNIT_TO_MS = {"us": 0.001, "µs": 0.001, "μs": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0,
               "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}  # µ: the micro sign; μ: Greek mu
# digits with single underscores between them ('1_000', not '1_' or '1__0'), an optional
# fraction and exponent, then a unit
_DURATION_RE = re.compile(r"^\s*(-?[0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*([a-zµμ]*)\s*$", re.ASCII)
_DURATION_CHARS = 40  # no duration string needs more


class ConfigError(Exception):
    """Every problem found in one file: `problems` is a list of 'key.path: reason' lines."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{len(self.problems)} problem(s) in {self.source}:"]
        lines += [f"  {self.source}: {p}" for p in self.problems[:MAX_PROBLEMS]]
        if len(self.problems) > MAX_PROBLEMS:
            lines.append(f"  ... and {len(self.problems) - MAX_PROBLEMS} more problem(s)")
        return "\n".join(lines)


def parse_duration_ms(value: Any) -> Any:
    """Accept 500, 1.5, '500ms', '10s', '2min', '1h', '1d', '250us'; return milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration (a number of ms, or a string like '10s'), got a boolean")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        match = _DURATION_RE.match(value) if len(value) <= _DURATION_CHARS else None
        if not match and ":" in value:
            raise ValueError(f"cannot read {short(value)} as a duration: minutes and seconds, or hours and "
                             "minutes? Write it with a unit ('90s', '90min', '1h')")
        if not match:
            raise ValueError(f"cannot read {short(value)} as a duration (examples: 500, '500ms', '10s', '2min')")
        number, unit = float(match.group(1).replace("_", "")), match.group(2) or "ms"
        if unit not in _UNIT_TO_MS:
            raise ValueError(f"unknown unit {unit!r} in {short(value)} (use one of us, ms, s, min, h, d)")
        return number * _UNIT_TO_MS[unit]
    raise ValueError(f"expected a duration, got {type(value).__name__}")


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]
PositiveIntMs = Annotated[int, BeforeValidator(_no_bool), Field(gt=0, le=MAX_TIME_MS)]  # model tunables
NonNegativeIntMs = Annotated[int, BeforeValidator(_no_bool), Field(ge=0, le=MAX_TIME_MS)]
DurationMs = Annotated[float, BeforeValidator(parse_duration_ms), Field(ge=0, le=MAX_TIME_MS)]
PositiveDurationMs = Annotated[float, BeforeValidator(parse_duration_ms), Field(ge=0.001, le=MAX_TIME_MS)]
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NODE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_@-]*")


def _name(value: str) -> str:
    if not (len(value) <= MAX_NAME_CHARS and _NAME_RE.fullmatch(value)):
        raise ValueError(f"a name is 1 to {MAX_NAME_CHARS} letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return value


def _node_name(value: str) -> str:
    if not (len(value) <= MAX_NAME_CHARS and _NODE_NAME_RE.fullmatch(value)):
        raise ValueError(f"a node name is 1 to {MAX_NAME_CHARS} letters, digits, '_', '-' or '@', "
                         "starting with a letter or digit")
    return value


def _printable(value: str) -> str:
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise ValueError(f"{_character(bad)} is not allowed here (printable characters only)")
    return value


def _character(c: str) -> str:
    """'ESC (U+001B)', 'U+200B' for a character a message must not print raw."""
    names = {"\0": "NUL", "\a": "BEL", "\b": "BS", "\t": "TAB", "\n": "LF", "\r": "CR", "\x1b": "ESC", "\x7f": "DEL"}
    return f"{names[c]} (U+{ord(c):04X})" if c in names else f"the character U+{ord(c):04X}"


Name = Annotated[str, AfterValidator(_name)]
NodeName = Annotated[str, AfterValidator(_node_name)]
Tag = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_printable)]


_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def render_path(loc: tuple) -> str:
    """`cluster.brokers[0].store`; a key that is not a plain identifier is shown quoted, `['a b']`
    (so a hostile key cannot break the one-problem-per-line output)."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _KEY_RE.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{short(part)}]"
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
            reason = _reason(err)
        problems.append(f"{path}: {reason}")
    return problems


_QUOTED = re.compile(r"(?<!\w)'([^'\n]{40,})'(?!\w)")  # a long input pydantic quotes whole
MAX_REASON_CHARS = 1_000  # pydantic's own text of one problem (its longest lists a Literal's values)


def _reason(err: dict[str, Any]) -> str:
    msg = err["msg"].removeprefix("Value error, ")
    ctx = err.get("ctx") or {}
    if err["type"] == "union_tag_invalid" and "tag" in ctx:  # the tag as str(): a list of 10,000 names
        tag = str(ctx["tag"])
        msg = (f"Input tag '{tag if len(tag) <= 36 else tag[:35] + '…'}' found using {ctx.get('discriminator')} "
               f"does not match any of the expected tags: {ctx.get('expected_tags')}")
    reason = safe_text(msg)
    if err["type"] != "missing" and "input" in err and not isinstance(err["input"], (dict, list)):
        reason += f" (got {short(err['input'])})"
    return reason


def safe_text(text: str) -> str:
    """`text` fit for one line of a message: a long quoted value cut, every character that is not
    printable escaped (pydantic quotes some inputs as they are: `Input tag '\\u200bconstant'`), at
    most MAX_REASON_CHARS characters."""
    text = _QUOTED.sub(lambda m: short(m.group(1)), text)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 1] + "…"


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
