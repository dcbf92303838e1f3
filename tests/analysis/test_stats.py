"""Rate intervals (Wilson, Poisson score, seeded bootstrap) and number formats for people."""

from __future__ import annotations

import math
import random

import pytest

from analysis.reports import fmt
from analysis.sweeps.stats import bootstrap_ratio, poisson_score, rate_interval, wilson


def test_wilson_is_bounded_and_defined_at_zero_events() -> None:
    lo, hi = wilson(0, 1000)
    assert lo == 0 and hi == pytest.approx(3.84 / 1003.84, rel=1e-3)  # z²/(n+z²): "none in n" has a bound
    assert wilson(1000, 1000)[1] == 1.0
    lo, hi = wilson(3, 100)  # published value (Newcombe 1998, method 3): 0.0103 – 0.0845
    assert (round(lo, 4), round(hi, 4)) == (0.0103, 0.0845)
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(5, 4)


def test_score_intervals_never_below_zero_and_contain_the_rate() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        n = rng.randint(1, 10**7)
        k = rng.randint(0, min(n, rng.choice([0, 1, 5, 100, n])))
        lo, hi = wilson(k, n)
        assert 0 <= lo <= k / n <= hi <= 1
        events = rng.randint(0, 3 * n)
        lo, hi = poisson_score(events, n)
        assert 0 <= lo <= events / n <= hi


def test_wilson_covers_at_tiny_rates_where_wald_collapses() -> None:
    """At p = 1e-3 and n = 500 the Wald interval is [0, 0] half the time; Wilson's coverage stays
    near 95 % (simulated, seeded)."""
    rng = random.Random(7)
    p, n, covered = 1e-3, 500, 0
    for _ in range(2000):
        k = sum(1 for _ in range(n) if rng.random() < p)
        lo, hi = wilson(k, n)
        covered += lo <= p <= hi
    assert covered / 2000 > 0.9


def test_rate_interval_without_exposure_is_not_measured() -> None:
    assert rate_interval(0, 0, True)["rate"] is None and rate_interval(None, 10, True)["lo"] is None
    r = rate_interval(12, 10, False)  # more duplicates than messages: a Poisson rate, not a proportion
    assert r["rate"] == 1.2 and 0 < r["lo"] < 1.2 < r["hi"]


def test_bootstrap_is_seeded_and_non_negative() -> None:
    a = bootstrap_ratio([0, 3, 1, 0], [100, 120, 90, 110], seed=5)
    assert a == bootstrap_ratio([0, 3, 1, 0], [100, 120, 90, 110], seed=5)
    assert 0 <= a[0] <= 4 / 420 <= a[1]


@pytest.mark.parametrize(("value", "text"), [
    (32_660, "32.7 s"), (2.489, "2.49 ms"), (0.25, "250 µs"), (0, "0 ms"), (250_000, "4.17 min"),
    (None, "n/a")])
def test_durations_for_people(value, text) -> None:
    assert fmt.duration_ms(value) == text


def test_numbers_and_rates_for_people() -> None:
    assert fmt.count(1_234_567) == "1,234,567" and fmt.number(3.266e4) == "32,660"
    assert fmt.number(0.000123) == "0.000123" and fmt.rate(0.0123) == "1.23 %" and fmt.rate(4.2e-6) == "4.20 ppm"
    assert fmt.interval(0.0, 0.0, 0.0037) == "0 % [0 %, 0.370 %]"
    for value in (1e-9, 3.3e-7, 12345.678, 9.99e14):
        assert "e" not in fmt.number(value) and "e" not in fmt.rate(value), value
    assert not math.isnan(float(fmt.number(2.5)))
