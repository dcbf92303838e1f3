"""Per-message simulated times (µs) in 4 bytes a message while they fit, else 8.

The ledger keeps two times for every message a producer sends (its `born_us` and the store
time of its first copy), indexed by sequence number. An `int64` each is 16 bytes a stored
message, a fifth of what a 10^8-message backlog costs. A `TimeColumn` holds `t + 1` in a
`uint32` (0: not set) as long as every time written is below 2^32 − 1 µs (71.6 simulated
minutes, longer than almost every run), and widens itself once, in place, to `int64` (−1: not
set) when a later time does not fit. Values read back are the same either way: `view()` is an
`int64` array with −1 where nothing was written.
"""

from __future__ import annotations

from array import array

import numpy as np

_NARROW_LIMIT = 0xFFFFFFFF  # t + 1 must stay below this (0xFFFFFFFF itself is never stored)


class TimeColumn:
    """One producer's message times by sequence number (module docstring)."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = array("I")  # t + 1, 0 = unset; array("q") with t, -1 = unset once widened

    def __len__(self) -> int:
        return len(self.data)

    @property
    def wide(self) -> bool:
        return self.data.typecode == "q"

    def extend_to(self, length: int) -> None:
        """Make room for `length` messages (new slots unset)."""
        missing = length - len(self.data)
        if missing > 0:
            self.data.extend(array(self.data.typecode, [-1 if self.wide else 0]) * missing)

    def put(self, seqs: np.ndarray, times_us: np.ndarray) -> None:
        """times_us[k] becomes the time of message seqs[k] (NumPy assignment: the last of equal seqs wins)."""
        if not len(seqs):
            return
        if not self.wide:
            if int(times_us.max()) + 1 < _NARROW_LIMIT and int(times_us.min()) >= 0:
                np.frombuffer(self.data, np.uint32)[seqs] = times_us + 1
                return
            self._widen()
        np.frombuffer(self.data, np.int64)[seqs] = times_us

    def unset(self, seqs: np.ndarray) -> np.ndarray:
        """Which of messages `seqs` have no time yet."""
        if self.wide:
            return np.frombuffer(self.data, np.int64)[seqs] == -1
        return np.frombuffer(self.data, np.uint32)[seqs] == 0

    def at(self, index: np.ndarray, length: int | None = None) -> np.ndarray:
        """The times at `index` (sequence numbers, or a mask over the first `length` messages) as
        int64, −1 where unset: only the selected times are converted."""
        if self.wide:
            return np.frombuffer(self.data, np.int64)[:length][index]
        return np.frombuffer(self.data, np.uint32)[:length][index].astype(np.int64) - 1

    def is_set(self, length: int) -> np.ndarray:
        """Which of the first `length` messages have a time."""
        if self.wide:
            return np.frombuffer(self.data, np.int64)[:length] != -1
        return np.frombuffer(self.data, np.uint32)[:length] != 0

    def view(self, length: int) -> np.ndarray:
        """The first `length` times as int64, −1 where unset (a copy unless widened)."""
        if self.wide:
            return np.frombuffer(self.data, np.int64)[:length]
        return np.frombuffer(self.data, np.uint32)[:length].astype(np.int64) - 1

    def _widen(self) -> None:
        wide = np.frombuffer(self.data, np.uint32).astype(np.int64) - 1
        self.data = array("q", wide.tobytes())
