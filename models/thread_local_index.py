"""client.common.ThreadLocalIndex, exact to 4.9.8 and 5.3.3: the round-robin index of queue selection.

The value of one thread (the simulator's producer sends from one thread). The draws of its unset
start and of 5.x `reset()` come from the `rng` it is given (models/java.py's `RandomSource`: a
`random.Random`, or a bit-exact `JavaRandom`).
"""

# compiled with Cython: the C declarations of this module's classes are in thread_local_index.pxd beside it

from __future__ import annotations

from operator import index as _as_int

from models.java import INTEGER_MAX_VALUE, INTEGER_MIN_VALUE, RandomSource, int_source, java_abs_int, java_int
from models.version import V4, V5, check_version

POSITIVE_MASK = 0x7FFFFFFF  # ThreadLocalIndex.POSITIVE_MASK


class ThreadLocalIndex:
    """client.common.ThreadLocalIndex, the value of one thread. `value` is the stored Integer
    (None: unset). `increment_and_get` stores `value + 1` (int wrap) and returns it `& 0x7FFFFFFF`
    (4.9.8 returns `Math.abs` of that, the same number). Unset start, drawn from `rng`:
    4.x `Math.abs(random.nextInt())` (Integer.MIN_VALUE stays negative), 5.x `random.nextInt()`.
    5.x `reset()` stores `Math.abs(random.nextInt(Integer.MAX_VALUE))`; 4.9.8 has no reset."""

    __slots__ = ("client_version", "_value", "_ints")

    def __init__(self, client_version: str = V5, value: int | None = None,
                 rng: RandomSource | None = None) -> None:
        self.client_version = check_version(client_version)
        self.value = value
        self._ints = int_source(rng)

    @property
    def value(self) -> int | None:
        return self._value

    @value.setter
    def value(self, value: int | None) -> None:
        if value is not None:
            value = _as_int(value)
            if not INTEGER_MIN_VALUE <= value <= INTEGER_MAX_VALUE:
                raise ValueError(f"a ThreadLocalIndex holds a Java int, not {value}")
        self._value = value

    def increment_and_get(self) -> int:
        v = self._value
        if v is None:
            v = self._ints.next_int()
            if self.client_version == V4:
                v = java_abs_int(v)
        v = java_int(v + 1)
        self._value = v
        return v & POSITIVE_MASK

    def reset(self) -> None:
        if self.client_version == V4:
            raise TypeError("ThreadLocalIndex.reset() does not exist in 4.9.8")
        self._value = java_abs_int(self._ints.next_int(INTEGER_MAX_VALUE))

    def __repr__(self) -> str:
        return f"ThreadLocalIndex({self.client_version!r}, value={self._value})"
