"""Intervals for rates that cannot mislead: bounded, defined at zero events, never below 0.

Why a score interval on pooled counts (and not mean ± t·sd over seeds, nor a bootstrap):

- A rate such as the loss rate is a *proportion* (lost / acknowledged deliveries). The Wilson
  score interval (Wilson 1927) inverts the binomial score test, so it lies inside [0, 1] by
  construction, is defined when nothing happened (0 of n gives [0, z²/(n+z²)], about 3.8/n:
  "no loss seen in n messages" still has an upper bound), and keeps close to its nominal
  coverage at the tiny rates a messaging system has (the normal "Wald" interval collapses to
  [0, 0] there, and a t interval over seeds goes below zero whenever the seeds disagree).
- A rate that may exceed 1 (duplicate deliveries per acknowledged delivery: one message can
  be delivered three times) is a *Poisson rate* per unit of exposure; its score interval
  (the same construction for the Poisson likelihood) is never below 0 either.
- Both need only two sums per point (events, exposure), which Spark SQL computes exactly; no
  random resampling, so reports stay deterministic.

What they assume: events independent across messages. A fault loses or duplicates messages in
bursts, so counts pooled over one run overstate the information; the report therefore gives
the number of runs beside each interval, and the per-seed spread is in the runs table. A
seeded bootstrap over runs is the honest alternative when between-run variance dominates;
`bootstrap_ratio` is kept for that (deterministic: seeded).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

Z95 = 1.959963984540054  # standard normal quantile at 0.975: a two-sided 95 % interval


def wilson(events: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion `events / trials`, within [0, 1]; None without trials."""
    if trials <= 0:
        return None
    if not 0 <= events <= trials:
        raise ValueError(f"a proportion needs 0 <= events <= trials, got {events} of {trials}")
    p = events / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    lo = 0.0 if events == 0 else max(0.0, centre - half)
    hi = 1.0 if events == trials else min(1.0, centre + half)
    return lo, hi


def poisson_score(events: int, exposure: float, z: float = Z95) -> tuple[float, float] | None:
    """Score interval of a Poisson rate `events / exposure` (events may exceed exposure); >= 0."""
    if exposure <= 0:
        return None
    if events < 0:
        raise ValueError(f"a count of events cannot be negative: {events}")
    z2 = z * z
    root = z * math.sqrt(4 * events + z2)
    lo = 0.0 if events == 0 else max(0.0, (2 * events + z2 - root) / (2 * exposure))
    return lo, (2 * events + z2 + root) / (2 * exposure)


def rate_interval(events: int | None, exposure: int | None, proportion: bool) -> dict[str, float | int | None]:
    """`{rate, lo, hi, events, exposure}` of a pooled rate: Wilson for a proportion, the Poisson
    score interval for a rate that may exceed 1; every value None without exposure."""
    if events is None or not exposure:
        return {"rate": None, "lo": None, "hi": None, "events": events, "exposure": exposure}
    events, exposure = int(events), int(exposure)
    bounds = wilson(min(events, exposure), exposure) if proportion else poisson_score(events, exposure)
    assert bounds is not None
    return {"rate": events / exposure, "lo": bounds[0], "hi": bounds[1], "events": events, "exposure": exposure}


def bootstrap_ratio(events: Sequence[int], exposure: Sequence[int], seed: int = 0, resamples: int = 2000,
                    level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap over runs of the pooled ratio sum(events) / sum(exposure), seeded;
    never below 0 (every resampled ratio is >= 0). None without exposure."""
    n = len(events)
    if n == 0 or sum(exposure) <= 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        total = sum(exposure[i] for i in picks)
        ratios.append(sum(events[i] for i in picks) / total if total else 0.0)
    ratios.sort()
    tail = (1 - level) / 2
    return ratios[int(tail * (resamples - 1))], ratios[int(math.ceil((1 - tail) * (resamples - 1)))]
