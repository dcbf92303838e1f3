"""The event heap's push and pop: `heapq`'s, with the entry comparison done on C integers when compiled.

Every heap entry starts `(time, priority, eid, ...)` (sim/env.py) and eids are unique, so two
entries compare as their first three fields do, and the order in which entries leave the heap
is fixed by that order alone. Pure, `heappush`/`heappop` are `heapq`'s. Compiled
(sim/compiled.py), they are the same algorithm, sift for sift (CPython's Modules/_heapqmodule.c,
so the list holds the same layout and `heapq` may work on it too), with `_before` comparing the
three integers in C instead of calling tuple comparison, which costs two rich comparisons of
Python ints per step (about 200 instructions; a sift takes about log2(heap size) steps, and a
simulated message about six pushes and six pops). An entry whose time, priority or eid is not an
exact int, or not one that fits a C long long, is compared as a tuple, as `heapq` would.
"""

# compiled with Cython: the C declarations of this module's classes are in event_queue.pxd beside it

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import cython


@cython.cfunc
@cython.inline
@cython.exceptval(-1, check=True)
@cython.returns(cython.int)
@cython.locals(a=tuple, b=tuple, i=cython.int, x=cython.longlong, y=cython.longlong)
def _before(a: Any, b: Any) -> int:
    """`a < b` for heap entries (module docstring)."""
    for i in range(3):
        p, q = a[i], b[i]
        if type(p) is not int or type(q) is not int:
            break
        try:
            x, y = p, q
        except OverflowError:  # beyond a C long long: Python compares it
            break
        if x != y:
            return x < y
    return 1 if a < b else 0


@cython.cfunc
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.exceptval(-1, check=True)
@cython.returns(cython.int)
@cython.locals(heap=list, startpos=cython.Py_ssize_t, pos=cython.Py_ssize_t, parentpos=cython.Py_ssize_t)
def _siftdown(heap: Any, startpos: int, pos: int) -> int:
    """Move the entry at `pos` up towards `startpos` (heapq's `_siftdown`)."""
    newitem = heap[pos]
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        if _before(newitem, parent):
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = newitem
    return 0


@cython.cfunc
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.exceptval(-1, check=True)
@cython.returns(cython.int)
@cython.locals(heap=list, pos=cython.Py_ssize_t, endpos=cython.Py_ssize_t, startpos=cython.Py_ssize_t,
               childpos=cython.Py_ssize_t, rightpos=cython.Py_ssize_t)
def _siftup(heap: Any, pos: int) -> int:
    """Move the smaller child up until a leaf is reached, then sift the entry from `pos` down
    into place (heapq's `_siftup`: fewer comparisons than a plain sift on a popped heap)."""
    endpos = len(heap)
    startpos = pos
    newitem = heap[pos]
    childpos = 2 * pos + 1
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not _before(heap[childpos], heap[rightpos]):
            childpos = rightpos
        heap[pos] = heap[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    heap[pos] = newitem
    return _siftdown(heap, startpos, pos)


@cython.locals(heap=list)
def _push(heap: Any, entry: tuple) -> None:
    heap.append(entry)
    _siftdown(heap, 0, len(heap) - 1)


@cython.locals(heap=list)
def _pop(heap: Any) -> tuple:
    last = heap.pop()  # IndexError on an empty heap, as heapq
    if heap:
        first = heap[0]
        heap[0] = last
        _siftup(heap, 0)
        return first
    return last


# typed for the checker: a heap is a list of entry tuples of any shape (env.py's, or SimPy's own)
heappush: Callable[[list[Any], tuple[Any, ...]], None] = _push if cython.compiled else heapq.heappush
heappop: Callable[[list[Any]], tuple[Any, ...]] = _pop if cython.compiled else heapq.heappop
