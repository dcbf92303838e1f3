"""TimeColumn: 4 bytes a time while times fit, widened in place to 8 without changing a value."""

from __future__ import annotations

import numpy as np

from analysis.checkers.time_column import TimeColumn

HOUR_US = 3_600_000_000


def test_unset_slots_read_as_minus_one_and_set_ones_as_written() -> None:
    col = TimeColumn()
    col.extend_to(6)
    col.put(np.array([1, 4]), np.array([0, 17_000_000]))
    assert not col.wide and len(col.data) * col.data.itemsize == 6 * 4
    assert col.view(6).tolist() == [-1, 0, -1, -1, 17_000_000, -1]
    assert col.unset(np.array([0, 1, 4, 5])).tolist() == [True, False, False, True]


def test_a_time_past_71_minutes_widens_the_column_and_keeps_every_value() -> None:
    col = TimeColumn()
    col.extend_to(4)
    col.put(np.array([0, 2]), np.array([5, HOUR_US]))
    col.put(np.array([3]), np.array([2 * HOUR_US]))  # 2^32 µs is 71.6 minutes
    assert col.wide
    assert col.view(4).tolist() == [5, -1, HOUR_US, 2 * HOUR_US]
    col.extend_to(6)  # new slots of a wide column are unset too
    assert col.view(6).tolist()[4:] == [-1, -1]
    assert col.unset(np.array([1, 3, 5])).tolist() == [True, False, True]


def test_equal_sequence_numbers_keep_the_last_write_as_numpy_does() -> None:
    col = TimeColumn()
    col.extend_to(2)
    col.put(np.array([1, 1]), np.array([30, 10]))
    assert col.view(2).tolist() == [-1, 10]
