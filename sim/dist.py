"""Distributions declared in scenario files, sampled in integer microseconds.

YAML forms (values in milliseconds, like RocketMQ's settings):

    5                                         # a bare number: constant
    '2ms', '1.5s', '250us'                    # a duration with its unit: constant (sim/config.py)
    {dist: constant, value: 5}
    {dist: uniform, low: 1, high: 3}
    {dist: exponential, mean: 2}
    {dist: lognormal, median: 0.5, sigma: 0.4}
    {dist: lognormal, p50: 0.5, p99: 4}       # sigma derived from the two quantiles
    {dist: empirical, values: [1, 1, 2, 8]}   # each value equally likely

Time distributions accept the units of durations everywhere a number of ms goes (`'2ms'`,
`{dist: exponential, mean: '1.5s'}`), with one error naming the value when a unit is unknown.
Sizes in bytes (`SizeDist`, e.g. `message_bytes`) are plain numbers: a unit there is an error.

`sample_us(stream)` is the only place where a float draw becomes time; it rounds once and never
returns a negative value. The same specs serve for byte sizes (`sample_int`).

Bounds (sim/limits.py): every parameter is finite, at most `MAX_DIST_VALUE` (10^12 ms, or
bytes), and a lognormal's sigma (given, or derived from p50/p99) at most `MAX_LOGNORMAL_SIGMA`.
Every draw, after scaling, **saturates** at `DRAW_CAP` (10^15: 31 years in µs) rather than
overflowing: a NumPy float beyond int64 would otherwise wrap to a negative number when cast,
and a Python `int(round(inf))` raises. A saturated delay is longer than any run, so the event
it schedules simply never happens.

`sampler_us(stream)` and `sampler_int(stream)` bind a distribution to a stream for hot paths
(consume time; message size). The uniform, exponential and lognormal samplers draw `BATCH` values
at a time from a NumPy PCG64 generator seeded once from `stream` (one 128-bit draw), and hand them
out one by one: about 30× cheaper per value than a Python-level draw. The values are a
deterministic function of the stream's seed, consumed in order, so determinism and the
independence of streams are unchanged; only the owner of the sampler may use it.
`block_sampler(stream, scale)` exposes the blocks themselves (last draw first, so `list.pop()`
hands them out in draw order) for the hottest path, network latency, which pops without a call.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from sim.config import Float, parse_duration_ms
from sim.limits import DRAW_CAP, MAX_DIST_VALUE, MAX_LOGNORMAL_SIGMA

if TYPE_CHECKING:  # NumPy is imported where a sampler is made: validating a scenario does not load it
    import numpy as np

Z_99 = 2.3263478740408408  # standard normal quantile at 0.99
BATCH = 1024  # values drawn per NumPy call in the batched samplers


def _generator(stream: random.Random) -> np.random.Generator:
    import numpy as np

    return np.random.Generator(np.random.PCG64(stream.getrandbits(128)))


def _whole_reversed(draw_block: Callable[[], np.ndarray]) -> Callable[[], list[int]]:
    """Blocks of float draws → lists of whole numbers in [0, DRAW_CAP], last draw first."""
    import numpy as np

    return lambda: (np.clip(draw_block()[::-1], 0.0, DRAW_CAP) + 0.5).astype(np.int64).tolist()


def _whole(value: float) -> int:
    """One scaled draw as a whole number in [0, DRAW_CAP] (inf saturates too)."""
    return int(round(min(value, DRAW_CAP))) if value > 0 else 0


def _popping(next_block: Callable[[], list[int]]) -> Callable[[], int]:
    """A zero-argument sampler handing out the values of successive blocks, in draw order."""
    buffer: list[int] = []
    pop = buffer.pop

    def sample() -> int:
        try:
            return pop()
        except IndexError:
            buffer.extend(next_block())
            return pop()

    return sample


class _DistBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def sample(self, stream: random.Random) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def sample_us(self, stream: random.Random) -> int:
        """Draw in ms, return whole µs (≥ 0, saturating at DRAW_CAP)."""
        return _whole(self.sample(stream) * 1000)

    def sample_int(self, stream: random.Random) -> int:
        """Draw a count (e.g. bytes), rounded, at least 0 (saturating at DRAW_CAP)."""
        return _whole(self.sample(stream))

    def mean(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def sampler_us(self, stream: random.Random) -> Callable[[], int]:
        """A zero-argument function drawing whole µs from `stream` (hot paths bind it once)."""
        return self.sampler(stream, 1000)

    def sampler_int(self, stream: random.Random) -> Callable[[], int]:
        """The same for counts (e.g. bytes): the drawn value itself, rounded."""
        return self.sampler(stream, 1)

    def sampler(self, stream: random.Random, scale: float) -> Callable[[], int]:
        """Draws of `value × scale`, rounded to whole numbers, at least 0, at most DRAW_CAP."""
        sample = self.sample
        return lambda: _whole(sample(stream) * scale)

    def block_sampler(self, stream: random.Random, scale: float) -> Callable[[], list[int]]:
        """The next draws of `sampler(stream, scale)` per call, last draw first. Here one draw
        per call: a distribution drawn from `stream` itself must not run ahead of the other
        users of that stream (a link's extra-latency and loss draws share it)."""
        draw = self.sampler(stream, scale)
        return lambda: [draw()]


class _Batched(_DistBase):
    """Distributions drawn in NumPy blocks: `sampler` pops from `block_sampler`'s blocks."""

    def sampler(self, stream: random.Random, scale: float) -> Callable[[], int]:
        return _popping(self.block_sampler(stream, scale))


def _ms(value: object) -> object:
    """A parameter in ms: a number, a numeric string (YAML 1.1 reads `1e-3` as one), or a duration."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return parse_duration_ms(value)
    return value


# a parameter in ms (or bytes, `SizeDist`); duration strings read as ms
Param = Annotated[Float, BeforeValidator(_ms), Field(ge=0, le=MAX_DIST_VALUE)]  # may be 0
PositiveParam = Annotated[Float, BeforeValidator(_ms), Field(gt=0, le=MAX_DIST_VALUE)]


class Constant(_DistBase):
    dist: Literal["constant"] = Field("constant", description="constant: always `value`")
    value: Param = Field(description="the value (ms, or bytes for sizes)")

    def sample(self, stream: random.Random) -> float:
        return self.value

    def sample_us(self, stream: random.Random) -> int:
        return _whole(self.value * 1000)

    def mean(self) -> float:
        return self.value

    def sampler(self, stream: random.Random, scale: float) -> Callable[[], int]:
        value = _whole(self.value * scale)
        return lambda: value

    def block_sampler(self, stream: random.Random, scale: float) -> Callable[[], list[int]]:
        block = [_whole(self.value * scale)] * BATCH
        return block.copy


class Uniform(_Batched):
    dist: Literal["uniform"] = Field(description="uniform between low and high")
    low: Param = Field(description="lowest value (ms, or bytes)")
    high: Param = Field(description="highest value (ms, or bytes)")

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) is below low ({self.low})")
        return self

    def sample(self, stream: random.Random) -> float:
        return stream.uniform(self.low, self.high)

    def block_sampler(self, stream: random.Random, scale: float) -> Callable[[], list[int]]:
        gen, low, high = _generator(stream), self.low * scale, self.high * scale
        return _whole_reversed(lambda: gen.uniform(low, high, BATCH))

    def mean(self) -> float:
        return (self.low + self.high) / 2


class Exponential(_Batched):
    dist: Literal["exponential"] = Field(description="exponential with the given mean")
    mean_value: PositiveParam = Field(alias="mean", description="mean (ms, or bytes)")

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    def sample(self, stream: random.Random) -> float:
        return stream.expovariate(1.0 / self.mean_value)

    def block_sampler(self, stream: random.Random, scale: float) -> Callable[[], list[int]]:
        gen, mean = _generator(stream), self.mean_value * scale
        return _whole_reversed(lambda: gen.exponential(mean, BATCH))

    def mean(self) -> float:
        return self.mean_value


class Lognormal(_Batched):
    dist: Literal["lognormal"] = Field(description="lognormal: median + sigma, or p50 + p99")
    median: PositiveParam | None = Field(None, description="median (ms, or bytes)")
    sigma: Annotated[Float, Field(ge=0, le=MAX_LOGNORMAL_SIGMA)] | None = Field(None, description=(
        "sigma of the underlying normal (no unit)"))
    p50: PositiveParam | None = Field(None, description="median (ms, or bytes), with p99")
    p99: PositiveParam | None = Field(None, description="99th percentile (ms, or bytes), with p50")

    @model_validator(mode="after")
    def _one_form(self) -> Lognormal:
        given = {k for k in ("median", "sigma", "p50", "p99") if getattr(self, k) is not None}
        if given not in ({"median", "sigma"}, {"p50", "p99"}):
            raise ValueError("give either median+sigma or p50+p99")
        p50, p99 = self.p50, self.p99
        if p50 is None or p99 is None:  # the median+sigma form
            return self
        if p99 < p50:
            raise ValueError(f"p99 ({p99}) is below p50 ({p50})")
        if self.mu_sigma[1] > MAX_LOGNORMAL_SIGMA:
            raise ValueError(f"p99/p50 = {p99 / p50:.3g} is too wide a spread (sigma "
                             f"{self.mu_sigma[1]:.3g}; at most {MAX_LOGNORMAL_SIGMA:g}, a ratio of "
                             f"{math.exp(MAX_LOGNORMAL_SIGMA * Z_99):.3g})")
        return self

    @property
    def mu_sigma(self) -> tuple[float, float]:
        if self.median is not None:
            return math.log(self.median), float(self.sigma)  # type: ignore[arg-type]  # set with median: _one_form
        return math.log(self.p50), math.log(self.p99 / self.p50) / Z_99  # type: ignore[arg-type,operator]  # both set: _one_form

    def sample(self, stream: random.Random) -> float:
        mu, sigma = self.mu_sigma
        return math.exp(stream.gauss(mu, sigma))

    def block_sampler(self, stream: random.Random, scale: float) -> Callable[[], list[int]]:
        mu, sigma = self.mu_sigma
        mu_scaled = mu + math.log(scale)  # scale × exp(mu + x) = exp(mu + ln scale + x)
        gen = _generator(stream)
        return _whole_reversed(lambda: gen.lognormal(mu_scaled, sigma, BATCH))

    def mean(self) -> float:
        mu, sigma = self.mu_sigma
        return math.exp(mu + sigma * sigma / 2)


class Empirical(_DistBase):
    dist: Literal["empirical"] = Field(description="empirical: each of `values` equally likely")
    values: list[Param] = Field(min_length=1, description="the values (ms, or bytes)")

    def sample(self, stream: random.Random) -> float:
        return self.values[stream.randrange(len(self.values))]

    def mean(self) -> float:
        return sum(self.values) / len(self.values)


def index_sampler(stream: random.Random, n: int, blocks: bool = False) -> Callable[[], Any]:
    """Uniform whole numbers in [0, n), drawn in NumPy blocks like the batched distributions;
    with `blocks`, the function returns the next block (last draw first) instead of one draw."""
    gen = _generator(stream)
    block = lambda: gen.integers(0, n, BATCH)[::-1].tolist()  # noqa: E731
    return block if blocks else _popping(block)


MAX_ZIPF_SUPPORT = 1_000_000  # a skewed index sampler keeps its cumulative table (8 bytes each)


def zipf_index_sampler(stream: random.Random, n: int, exponent: float) -> Callable[[], list[int]]:
    """Blocks of whole numbers in [0, n) with P(i) ∝ 1 / (i + 1)^exponent (Zipf over a finite set;
    exponent 0 is uniform), last draw first, from a NumPy generator seeded once from `stream`.
    `n` is at most MAX_ZIPF_SUPPORT."""
    if not 1 <= n <= MAX_ZIPF_SUPPORT:
        raise ValueError(f"a skewed index sampler takes 1 to {MAX_ZIPF_SUPPORT} values, not {n}")
    import numpy as np

    gen = _generator(stream)
    cdf = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent)
    cdf /= cdf[-1]
    last = n - 1
    return lambda: np.minimum(np.searchsorted(cdf, gen.random(BATCH), side="right"), last)[::-1].tolist()


def _coerce(value: object) -> object:
    if isinstance(value, str):  # '2ms': a constant duration (ValueError naming a bad unit)
        value = _ms(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"dist": "constant", "value": value}
    return value


def _no_units(value: object) -> object:
    """A size distribution: plain numbers only (a duration unit on a byte count is a mistake)."""
    params = value.items() if isinstance(value, dict) else [("", value)]
    for key, item in params:
        for one in item if isinstance(item, list) else [item]:
            if key != "dist" and isinstance(one, str):
                raise ValueError(f"a size in bytes is a plain number; {one[:40]!r} is not (no units here)")
    return value


Dist = Annotated[
    Union[Constant, Uniform, Exponential, Lognormal, Empirical],
    Field(discriminator="dist"),
    BeforeValidator(_coerce),
]


SizeDist = Annotated[Dist, BeforeValidator(_no_units)]  # byte counts: no units


def constant(value: float) -> Constant:
    return Constant(value=value)
