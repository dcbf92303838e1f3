"""sim/event_queue.py: the compiled push and pop keep heapq's heap, entry for entry."""

from __future__ import annotations

import heapq
import random

import pytest

from sim import compiled, event_queue


def _entry(rng: random.Random, eid: int) -> tuple:
    """A heap entry `(time, priority, eid, ...)`; times collide often, and a few are floats,
    bools or too large for a C long long, which take the tuple comparison."""
    time: object = rng.randrange(40)
    roll = rng.random()
    if roll < 0.03:
        time = float(rng.randrange(40))
    elif roll < 0.05:
        time = rng.random() < 0.5
    elif roll < 0.07:
        time = 2**70 + rng.randrange(3)
    return (time, rng.randrange(2), eid, "payload", (eid,))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_push_and_pop_leave_the_same_list_as_heapq(seed: int) -> None:
    rng = random.Random(seed)
    ours: list[tuple] = []
    theirs: list[tuple] = []
    for eid in range(3000):
        entry = _entry(rng, eid)
        event_queue.heappush(ours, entry)
        heapq.heappush(theirs, entry)
        assert ours == theirs
        while theirs and rng.random() < 0.45:
            assert event_queue.heappop(ours) == heapq.heappop(theirs)
            assert ours == theirs
    popped = [event_queue.heappop(ours) for _ in range(len(ours))]
    assert popped == sorted(theirs)


def test_an_empty_heap_pops_an_index_error_as_heapq() -> None:
    with pytest.raises(IndexError):
        event_queue.heappop([])


def test_the_compiled_functions_are_the_ones_in_use() -> None:
    """After setup the compiled push and pop run (the figures in bench/ rely on them)."""
    if compiled.pure_requested():
        pytest.skip(f"{compiled.PURE_ENV} is set: the pure (heapq) functions are in use")
    assert event_queue.heappush is not heapq.heappush
    assert event_queue.heappop is not heapq.heappop
