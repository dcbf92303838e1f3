"""Nearest-rank latency percentiles in ms, the shape of every `*_ms` latency in the summary."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def percentiles_ms(values_us: Any) -> dict[str, float | None]:
    """Nearest-rank percentiles in ms (None when there is no sample)."""
    ordered = np.sort(np.asarray(values_us, dtype=np.int64))
    n = len(ordered)
    if not n:
        return {name: None for name, _ in PERCENTILES} | {"max": None}
    out: dict[str, float | None] = {}
    for name, q in PERCENTILES:
        out[name] = int(ordered[max(0, math.ceil(q * n) - 1)]) / 1000
    out["max"] = int(ordered[-1]) / 1000
    return out
