"""Numbers for people: `32.7 s` rather than `3.266e+04`, `12,345` rather than `12345`.

Used by the report tables and the CLI summary; every function takes None and says `n/a`.
"""

from __future__ import annotations

import math
from typing import Any

NA = "n/a"


def count(value: Any) -> str:
    """A whole number with thousands separators: 12,345."""
    if value is None:
        return NA
    if isinstance(value, float) and not value.is_integer():
        return number(value)
    return f"{int(value):,}"


def number(value: Any, digits: int = 3) -> str:
    """A plain number to `digits` significant digits, never in e-notation below 10^15."""
    if value is None:
        return NA
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def duration_ms(value: Any) -> str:
    """A duration given in ms, in the unit that reads best: 850 µs, 2.49 ms, 32.7 s, 4.2 min, 2.5 h."""
    if value is None:
        return NA
    ms = float(value)
    magnitude = abs(ms)
    if magnitude == 0:
        return "0 ms"
    if magnitude < 1:
        return f"{number(ms * 1000)} µs"
    if magnitude < 1000:
        return f"{number(ms)} ms"
    if magnitude < 120_000:
        return f"{number(ms / 1000)} s"
    if magnitude < 7_200_000:
        return f"{number(ms / 60_000)} min"
    return f"{number(ms / 3_600_000)} h"


def rate(value: Any) -> str:
    """A rate as a percentage to 3 significant digits (0.0123 → 1.23 %); below 0.001 % in parts per
    million (4.2e-6 → 4.2 ppm); 0 as 0 %."""
    if value is None:
        return NA
    if value == 0:
        return "0 %"
    pct = float(value) * 100
    if abs(pct) < 0.001:
        return f"{number(pct * 10_000)} ppm"  # parts per million
    return f"{number(pct)} %"


def interval(rate_value: Any, lo: Any, hi: Any, fmt: Any = rate) -> str:
    """`1.2 % [0.8 %, 1.9 %]`."""
    if rate_value is None:
        return NA
    return f"{fmt(rate_value)} [{fmt(lo)}, {fmt(hi)}]"
