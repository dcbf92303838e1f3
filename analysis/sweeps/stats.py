"""Intervals for a sweep's rates and metrics, with the run as the unit first.

**Run-level intervals (shown first).** A fault loses or duplicates messages in bursts (hundreds
at once when a queue has two owners), so the messages of one run are not independent draws: what
varies from one run to the next is the information. `ratio_t_interval` treats each run as one
observation: the pooled rate R = Σ events / Σ exposure over the runs, and a 95 % Student-t
interval from the runs' spread around it — the linearised variance of a ratio of sums, runs as
clusters (se = √(Σ (eᵢ − R·xᵢ)² / (n(n−1))) / x̄, R ± t₀.₉₇₅(n−1)·se), clipped at 0 (and at 1
for a proportion). Student-t, not a bootstrap: with the three to five seeds a sweep point usually
has, a percentile bootstrap over runs cannot reach past the runs' own range (every resampled
pooled rate is a weighted mean of the run rates) and covers far less than 95 %; the t interval
is wide when few runs disagree, which is what they say. It needs two runs; with every run at
zero events it is [0, 0] and says nothing, so the per-message bound is shown instead.
`mean_t_interval` is the same for a per-run value (a max latency, a write outage): mean ± t·sd/√n.

**Per-message score intervals (only where the runs agree with them).** They assume independent
messages, and are right when the runs' counts spread as that assumption predicts:

- A *proportion* (lost / acknowledged deliveries) gets the Wilson score interval (Wilson 1927):
  inside [0, 1] by construction, defined when nothing happened (0 of n gives [0, z²/(n+z²)],
  about 3.8/n: "no loss seen in n messages" still has an upper bound), close to its nominal
  coverage at the tiny rates a messaging system has (the normal "Wald" interval collapses to
  [0, 0] there).
- A rate that may exceed 1 (duplicate deliveries per acknowledged delivery) is a *Poisson rate*
  per unit of exposure; its score interval is never below 0 either.

`runs_agree` tests that assumption on the runs themselves: the dispersion statistic
D = Σ (eᵢ − R·xᵢ)² / Var₀(eᵢ) (Var₀ = R·xᵢ for a Poisson rate, R(1−R)·xᵢ for a proportion) is
χ²-distributed with n − 1 degrees of freedom when messages are independent; the runs agree when
D is at most its 95 % quantile (`chi2_95`). Bursts make D hundreds of times larger, and the
per-message interval is then not shown. Everything here is deterministic (no random resampling);
`bootstrap_ratio`, seeded, is kept for checks (tests/analysis/test_sweep_run_stats.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

Z95 = 1.959963984540054  # standard normal quantile at 0.975: a two-sided 95 % interval
# two-sided 95 % Student t quantiles (t_0.975) by degrees of freedom
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
         18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
         26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
# 95 % quantiles of the chi-square distribution by degrees of freedom (beyond 30: Wilson-Hilferty)
_CHI2_95 = (3.841, 5.991, 7.815, 9.488, 11.070, 12.592, 14.067, 15.507, 16.919, 18.307, 19.675, 21.026, 22.362,
            23.685, 24.996, 26.296, 27.587, 28.869, 30.144, 31.410, 32.671, 33.924, 35.172, 36.415, 37.652,
            38.885, 40.113, 41.337, 42.557, 43.773)
Z95_ONE_SIDED = 1.6448536269514722


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


def t975(df: int) -> float:
    """Student t quantile for a two-sided 95 % interval (interpolated in 1/df beyond the table)."""
    if df in _T975:
        return _T975[df]
    keys = sorted(_T975)
    if df > keys[-1]:
        lo, hi, t_lo, t_hi = 1 / keys[-1], 0.0, _T975[keys[-1]], Z95
    else:
        below = max(k for k in keys if k < df)
        above = min(k for k in keys if k > df)
        lo, hi, t_lo, t_hi = 1 / below, 1 / above, _T975[below], _T975[above]
    return t_lo + (1 / df - lo) * (t_hi - t_lo) / (hi - lo)


def chi2_95(df: int) -> float:
    """The 95 % quantile of the chi-square distribution with `df` >= 1 degrees of freedom."""
    if df <= len(_CHI2_95):
        return _CHI2_95[df - 1]
    a = 2 / (9 * df)
    return df * (1 - a + Z95_ONE_SIDED * math.sqrt(a)) ** 3


def ratio_t_interval(events: Sequence[float], exposure: Sequence[float],
                     proportion: bool) -> dict[str, float | int] | None:
    """`{rate, lo, hi, runs}`: the pooled rate Σ events / Σ exposure with a 95 % Student-t interval
    from the runs' spread around it (module docstring), clipped at 0 (and 1 for a proportion);
    None with fewer than two runs or no exposure."""
    n = len(events)
    total = float(sum(exposure))
    if n < 2 or total <= 0:
        return None
    rate = float(sum(events)) / total
    mean_exposure = total / n
    residual = sum((e - rate * x) ** 2 for e, x in zip(events, exposure, strict=True))
    se = math.sqrt(residual / (n * (n - 1))) / mean_exposure
    half = t975(n - 1) * se
    return {"rate": rate, "lo": max(0.0, rate - half), "hi": min(1.0, rate + half) if proportion else rate + half,
            "runs": n}


def dispersion(events: Sequence[float], exposure: Sequence[float], proportion: bool) -> float:
    """D = Σ (eᵢ − R·xᵢ)² / Var₀(eᵢ) over the runs (module docstring); 0 when R is 0 (or 1)."""
    total = float(sum(exposure))
    rate = float(sum(events)) / total if total > 0 else 0.0
    if rate <= 0 or (proportion and rate >= 1):
        return 0.0
    spread = rate * (1 - rate) if proportion else rate
    return sum((e - rate * x) ** 2 / (spread * x) for e, x in zip(events, exposure, strict=True) if x > 0)


def runs_agree(events: Sequence[float], exposure: Sequence[float], proportion: bool) -> bool | None:
    """Whether the runs' counts spread no more than independent messages would make them (D at most
    the χ² 95 % quantile with n − 1 degrees of freedom): the per-message interval then holds;
    None with fewer than two runs with exposure (nothing to compare)."""
    runs = [(e, x) for e, x in zip(events, exposure, strict=True) if x > 0]
    if len(runs) < 2:
        return None
    return dispersion([e for e, _x in runs], [x for _e, x in runs], proportion) <= chi2_95(len(runs) - 1)


def mean_t_interval(values: Sequence[float]) -> dict[str, float | int | None]:
    """`{mean, lo, hi, n, min, max}` of per-run values: the mean with a 95 % Student-t interval
    (mean ± t·sd/√n; lo and hi None with fewer than two values); every value None without any."""
    n = len(values)
    if n == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0, "min": None, "max": None}
    mean = float(sum(values)) / n
    if n < 2:
        return {"mean": mean, "lo": None, "hi": None, "n": 1, "min": float(values[0]), "max": float(values[0])}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": n, "min": float(min(values)),
            "max": float(max(values))}
