"""Nearest-rank latency percentiles in ms, the shape of every `*_ms` latency in the summary."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def percentiles_ms(values_us: Any, owned: bool = False) -> dict[str, float | None]:
    """Nearest-rank percentiles in ms (None when there is no sample). `owned`: the caller gives up
    `values_us` (a NumPy integer array it made for this), which is then reordered in place instead
    of sorted into a copy: the summary's peak memory over millions of samples (issue 41)."""
    values = np.asarray(values_us)
    if not owned or values.dtype.kind not in "iu":
        values = np.array(values, dtype=np.int64)
    n = len(values)
    if not n:
        return {name: None for name, _ in PERCENTILES} | {"max": None}
    ranks = {name: max(0, math.ceil(q * n) - 1) for name, q in PERCENTILES} | {"max": n - 1}
    values.partition(sorted(set(ranks.values())))  # each rank's value in its sorted place
    return {name: int(values[rank]) / 1000 for name, rank in ranks.items()}
