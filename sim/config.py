"""Typed configuration loading: value types with bounds, and errors that name file, key path, reason.

Scenario and sweep trees are pydantic models with `extra="forbid"`. `format_errors` turns a
`ValidationError` into one line per problem, `path.to[0].key: reason`, adding a "did you mean"
hint for unknown keys by walking the model tree to the offending level. All problems of a file
are reported together (`ConfigError` carries the list; `render` lists the first
`MAX_PROBLEMS` and counts the rest).

Value types for model fields (use them instead of bare `int`/`float`/`str`):
- `Int`, `Float`: pydantic's lax numbers (2.0 is 2, "5" is 5) except that a boolean is refused
  (`count: true` is a mistake, not 1);
- durations: a number in the field's unit, or a string with a unit: '500ms', '10s', '2min' (or
  '2m'), '1h', '1d', '250us' ('250µs' and '250μs' too), '1.5e3s'. A duration string is decimal:
  '1:30' (minutes and seconds, or hours and minutes?) is refused with a hint, '017s' is 17 s,
  '0x1F' is no duration; YAML's own number forms are refused earlier (sim/inputs.py).
  `DurationMs`, `PositiveDurationMs`: ms as a float, at most `MAX_TIME_MS` (a positive duration
  is at least 1 µs, the clock's resolution); `IntMs` (`PositiveIntMs`, `NonNegativeIntMs`: at
  most `MAX_TIME_MS`), `IntS`, `IntMin`: the whole number a Java setting holds, in ms, seconds or
  minutes; `FloatS`: seconds as a float;
- sizes: a number in the field's unit, or a string with a unit: '512B', '64KiB', '1MB' (KB, MB,
  GB, TB: powers of 1000; KiB, MiB, GiB, TiB: powers of 1024). `IntBytes`, `IntMiB`: whole bytes
  or MiB; `sizes_in_dist` reads the size strings of a size distribution (`message_bytes`);
- `Name` (scenario and sweep names: they become directory names) and `NodeName` (node names:
  they become parts of random-stream names, `<node>.disk`, `net.<src>-><dst>`; an '@' is
  allowed after the first character, for RocketMQ's `<room>@<broker>` naming convention);
- `Tag`: a message tag, 1 to 128 printable characters: no control character (NUL, BEL, ESC, CR,
  DEL, C1), no format character (a zero-width space, a right-to-left override) and no space but
  ASCII's: characters a reader cannot see, or that garble the terminal, the report and every
  message that shows the tag (refused with the key path, `producers[0].tags[1]`).

A unit string is converted exactly (decimal arithmetic, no float rounding on the way). A value
that is not a whole number of an integer field's unit ('1500us' or '0.5ms' for whole ms, '0.5KiB'
for whole MiB) is refused, saying what it came to, and so is a unit of the other dimension ('64KiB'
for a duration, '5s' for a size). Numbers without a unit reach the model unchanged (the digest of
a scenario without units does not move).

Messages never show more of a value than `short` (sim/inputs.py) does.
"""

from __future__ import annotations

import difflib
import math
import re
import types
import typing
from decimal import Decimal
from fractions import Fraction
from typing import Annotated, Any, NamedTuple, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationError
from pydantic_core import ErrorDetails

from sim.inputs import short
from sim.limits import MAX_NAME_CHARS, MAX_PROBLEMS, MAX_TIME_MS

_NUMBER = r"-?[0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"  # single underscores between digits
_QUANTITY_RE = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµμ]*)\s*$", re.ASCII)  # µ: the micro sign; μ: Greek mu
_QUANTITY_CHARS = 40  # no duration or size string needs more
_MAGNITUDE = 40  # decimal exponents beyond ±40 are out of every bound (and would make huge fractions)


class Dimension(NamedTuple):
    """What a unit measures: its units as multiples of one base unit (ms; bytes)."""

    name: str
    units: dict[str, Fraction]
    listed: str  # the units named in messages
    examples: str


DURATION = Dimension("duration", {
    "us": Fraction(1, 1000), "µs": Fraction(1, 1000), "μs": Fraction(1, 1000), "ms": Fraction(1),
    "s": Fraction(1000), "m": Fraction(60_000), "min": Fraction(60_000), "h": Fraction(3_600_000),
    "d": Fraction(86_400_000)}, "us, ms, s, min, h, d", "500, '500ms', '10s', '2min'")
SIZE = Dimension("size", {
    "B": Fraction(1), "KB": Fraction(10**3), "kB": Fraction(10**3), "MB": Fraction(10**6), "GB": Fraction(10**9),
    "TB": Fraction(10**12), "KiB": Fraction(2**10), "MiB": Fraction(2**20), "GiB": Fraction(2**30),
    "TiB": Fraction(2**40)}, "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB", "4096, '64KiB', '1MB'")
_UNIT_WORDS = {"B": "bytes", "s": "seconds", "min": "minutes"}  # a field's unit in a message


def unit_pattern(dimension: Dimension) -> str:
    """The strings `Units` of `dimension` reads, as a regular expression (for the JSON Schema)."""
    units = "|".join(sorted(dimension.units, key=lambda u: (-len(u), u)))
    return rf"^\s*{_NUMBER}\s*(?:{units})?\s*$"


class Units:
    """A before-validator of a duration or size field whose unit is `unit` (one of `dimension`'s).

    A number is in `unit`; a string is a number with an optional unit ('10s', '64KiB'; none: `unit`).
    With `whole`, the value must come to a whole number of `unit` and is returned as an int (the
    Java setting's integer); else a number passes unchanged and a string becomes the float nearest
    to its exact value. Instances are compared by identity (rmqsim/schema.py recognises them)."""

    def __init__(self, dimension: Dimension, unit: str, whole: bool) -> None:
        self.dimension, self.unit, self.whole = dimension, unit, whole
        self.word = _UNIT_WORDS.get(unit, unit)

    def __repr__(self) -> str:
        return f"Units({self.dimension.name}, {self.unit!r}, whole={self.whole})"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a {self.dimension.name} ({self.dimension.examples}), got a boolean")
        if isinstance(value, (int, float)):
            return self._number(value)
        if not isinstance(value, str):
            raise ValueError(f"expected a {self.dimension.name}, got {type(value).__name__}")
        amount = self.amount(value)
        if isinstance(amount, int):  # beyond every bound: the field's bound reports it
            return amount
        if not self.whole:
            return float(amount)
        if amount.denominator != 1:
            raise ValueError(self._not_whole(amount))
        return int(amount)

    def _number(self, value: int | float) -> int | float:
        if not self.whole or isinstance(value, int) or not math.isfinite(value):
            return value  # pydantic refuses a non-finite number itself
        if not value.is_integer():
            raise ValueError(self._not_whole(Fraction(value)))
        return int(value)

    def _not_whole(self, amount: Fraction) -> str:
        return (f"{_show(amount)} {self.unit} is not a whole number of {self.word} "
                f"(this setting counts whole {self.word})")

    def amount(self, text: str) -> Fraction | int:
        """`text` in `unit`, exactly; an int far beyond any bound for an exponent beyond ±40."""
        match = _QUANTITY_RE.match(text) if len(text) <= _QUANTITY_CHARS else None
        if not match:
            raise ValueError(self._unreadable(text))
        mantissa, _, exponent = match.group(1).replace("_", "").lower().partition("e")
        factor = self._factor(match.group(2), text)
        number = Decimal(mantissa)
        if not number:
            return Fraction(0)
        magnitude = number.adjusted() + int(exponent or 0)  # int(): at most 40 digits
        if magnitude > _MAGNITUDE:
            return 10 ** (_MAGNITUDE + 1) * (-1 if number < 0 else 1)
        if magnitude < -_MAGNITUDE:  # far below a microsecond or a byte
            if self.whole:
                raise ValueError(f"{short(text)} is not a whole number of {self.word} "
                                 f"(this setting counts whole {self.word})")
            return Fraction(0)
        return Fraction(number) * Fraction(10) ** int(exponent or 0) * factor

    def _factor(self, unit: str, text: str) -> Fraction:
        units = self.dimension.units
        if not unit:
            return Fraction(1)
        if unit in units:
            return units[unit] / units[self.unit]
        other = SIZE if self.dimension is DURATION else DURATION
        if unit in other.units:
            raise ValueError(f"{unit!r} is a unit of {other.name}, but this setting is a {self.dimension.name} "
                             f"in {self.word} (a number, or with a unit: {self.dimension.listed})")
        raise ValueError(f"unknown unit {unit!r} in {short(text)} (use one of {self.dimension.listed})")

    def _unreadable(self, text: str) -> str:
        if self.dimension is DURATION and ":" in text and len(text) <= _QUANTITY_CHARS:
            return (f"cannot read {short(text)} as a duration: minutes and seconds, or hours and "
                    "minutes? Write it with a unit ('90s', '90min', '1h')")
        return f"cannot read {short(text)} as a {self.dimension.name} (examples: {self.dimension.examples})"


def _show(amount: Fraction) -> str:
    """An exact decimal where there is a short one ('1.5', '307.2'), else 'about 0.0166667'."""
    for digits in range(13):
        scaled = amount * 10**digits
        if scaled.denominator == 1:
            text = f"{abs(scaled.numerator):0{digits + 1}d}"
            text = (text[:-digits] + "." + text[-digits:]) if digits else text
            return ("-" if amount < 0 else "") + text
    return f"about {float(amount):.6g}"


# a duration in ms for float fields and distribution parameters: a number passes unchanged
parse_duration_ms = Units(DURATION, "ms", whole=False)
parse_size_bytes = Units(SIZE, "B", whole=False)  # a size in bytes, the same way


def sizes_in_dist(value: Any) -> Any:
    """A size distribution with its size strings read as bytes: '64KiB' (a constant),
    {dist: uniform, low: 1KiB, high: 4KiB}, {dist: empirical, values: [1KB, 2KB]}."""
    if isinstance(value, str):
        return parse_size_bytes(value)
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        try:
            out[key] = item if key == "dist" else (
                [parse_size_bytes(x) if isinstance(x, str) else x for x in item] if isinstance(item, list)
                else parse_size_bytes(item) if isinstance(item, str) else item)
        except ValueError as exc:
            raise ValueError(f"{short(key)}: {exc}") from None
    return out


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


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


Int = Annotated[int, BeforeValidator(_no_bool)]
Float = Annotated[float, BeforeValidator(_no_bool)]
# Java-mirroring integers (bounds: the field's own; PositiveIntMs and NonNegativeIntMs at most MAX_TIME_MS)
IntMs = Annotated[int, BeforeValidator(Units(DURATION, "ms", whole=True))]
IntS = Annotated[int, BeforeValidator(Units(DURATION, "s", whole=True))]
IntMin = Annotated[int, BeforeValidator(Units(DURATION, "min", whole=True))]
IntBytes = Annotated[int, BeforeValidator(Units(SIZE, "B", whole=True))]
IntMiB = Annotated[int, BeforeValidator(Units(SIZE, "MiB", whole=True))]
FloatS = Annotated[float, BeforeValidator(Units(DURATION, "s", whole=False))]
PositiveIntMs = Annotated[IntMs, Field(gt=0, le=MAX_TIME_MS)]  # model tunables
NonNegativeIntMs = Annotated[IntMs, Field(ge=0, le=MAX_TIME_MS)]
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


def _reason(err: ErrorDetails) -> str:
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
