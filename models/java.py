"""Java's value semantics where the models must match them bit for bit: int and long arithmetic,
and `java.util.Random`.

Arithmetic: ints and longs wrap (`java_int`, `java_long`), `Math.abs(Integer.MIN_VALUE)` stays
negative (`java_abs_int`) and `%` truncates toward zero (`java_rem`). A `%` by zero raises
ZeroDivisionError where Java throws ArithmeticException.

Randomness: where Java draws from an unseeded `java.util.Random`, a model draws from the `rng` it
is given (`RandomSource`): a `random.Random` (the simulator passes a named stream; same
distributions as Java, not the same numbers) or a `JavaRandom`, which is bit-exact
`java.util.Random`, so a seeded Java object and a seeded `JavaRandom` draw the same values.
`int_source` gives either one `nextInt()` / `nextInt(bound)`; without an `rng`, a
`random.Random(0)`, so a run is deterministic either way. `java_shuffle` is
`Collections.shuffle(list, rnd)`.
"""

# compiled with Cython: the C declarations of this module's classes are in java.pxd beside it

from __future__ import annotations

import random

INTEGER_MIN_VALUE = -(2**31)
INTEGER_MAX_VALUE = 2**31 - 1
LONG_MIN_VALUE = -(2**63)
LONG_MAX_VALUE = 2**63 - 1


# --- arithmetic --------------------------------------------------------------------------------

def java_int(x: int) -> int:
    """`(int) x`: two's-complement wrap to 32 bits."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def java_long(x: int) -> int:
    """`(long) x`: two's-complement wrap to 64 bits."""
    return ((x + 2**63) & 0xFFFFFFFFFFFFFFFF) - 2**63


def java_abs_int(x: int) -> int:
    """`Math.abs(int)`: Integer.MIN_VALUE stays Integer.MIN_VALUE."""
    return x if x == INTEGER_MIN_VALUE else abs(x)


def java_rem(a: int, b: int) -> int:
    """Java `a % b`: the sign of the dividend (truncation toward zero); b == 0 raises ZeroDivisionError."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


# --- random sources ----------------------------------------------------------------------------

class JavaRandom:
    """java.util.Random, bit-exact (the 48-bit LCG of `next(bits)`, `nextInt()`, `nextInt(bound)`).

    `JavaRandom(s)` draws what `new Random(s)` draws; use it where a test or a checker seeds the
    Java object too. The simulator normally passes a `random.Random` instead."""

    _MULTIPLIER = 0x5DEECE66D
    _ADDEND = 0xB
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        self._seed = (java_long(seed) ^ self._MULTIPLIER) & self._MASK

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * self._MULTIPLIER + self._ADDEND) & self._MASK
        return java_int(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """`nextInt()` without a bound, else `nextInt(bound)` (the legacy algorithm Random keeps)."""
        if bound is None:
            return self._next(32)
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return java_int((bound * r) >> 31)
        u = r
        r = u % bound
        while java_int(u - r + m) < 0:
            u = self._next(31)
            r = u % bound
        return r


class PythonInts:
    """Java's `nextInt()` / `nextInt(bound)` drawn from a random.Random: the same distributions."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def next_int(self, bound: int | None = None) -> int:
        if bound is None:
            return java_int(self.rng.getrandbits(32))
        if bound <= 0:
            raise ValueError("bound must be positive")
        return self.rng.randrange(bound)


RandomSource = random.Random | JavaRandom
IntSource = JavaRandom | PythonInts  # what draws `nextInt()` / `nextInt(bound)`


def int_source(rng: RandomSource | None) -> IntSource:
    """The `nextInt` source of `rng` (module docstring); None: a `random.Random(0)`."""
    if rng is None:
        return PythonInts(random.Random(0))
    if isinstance(rng, JavaRandom):
        return rng
    if isinstance(rng, random.Random):
        return PythonInts(rng)
    raise TypeError(f"rng must be a random.Random or a JavaRandom, not {type(rng).__name__}")


def java_shuffle(items: list, ints: IntSource) -> None:
    """Collections.shuffle(list, rnd): `for i = size .. 2: swap(i - 1, rnd.nextInt(i))`."""
    for i in range(len(items), 1, -1):
        j = ints.next_int(i)
        items[i - 1], items[j] = items[j], items[i - 1]
