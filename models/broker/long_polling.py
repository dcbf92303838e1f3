"""broker.longpolling.PullRequestHoldService: pulls that found nothing wait for new data.

A suspended pull is parked under (topic, queue id) until (a) dispatch reports a new max offset
beyond the request's offset (`notify_message_arriving`), or (b) the periodic scan (every 5 s with
long polling) finds data or sees the suspend time elapsed. Either way the request is executed
again, never held twice, and answered even if still nothing is found. Held requests live in heap
memory: a broker crash loses them and the clients' 30 s RPC timeout fires.

On arrival a held pull with a tag subscription wakes only if a new unit's tags code is one of
its subscription's codes (`isMatchedByConsumeQueue`); the periodic scan knows no tags code and
wakes it whatever arrived.
"""

# compiled with Cython: the C declarations of this module's classes are in long_polling.pxd beside it

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import cython

from models.broker.config import HOLD_SCAN_INTERVAL_US
from models.broker.consume_queue import ConsumeQueue
from models.coverage_points import COV_PULL_HELD_WOKEN_BY_ARRIVAL, COV_PULL_HOLD_EXPIRED_EMPTY
from sim.env import Clock

# the one point reached about once a message, its index typed when compiled: Cython then indexes
# the counter list directly (baseline: ~190 instructions a message, ~800 with the index untyped;
# models/coverage_points.py)
WOKEN_BY_ARRIVAL = cython.declare(cython.Py_ssize_t, COV_PULL_HELD_WOKEN_BY_ARRIVAL)


class PullRequestHoldService:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("clock", "cov", "execute", "held", "node", "queue_of", "scan_interval_us")

    def __init__(self, node: Any, queue_of: Callable[[str, int], Any],
                 execute: Callable[..., None], scan_interval_us: int = HOLD_SCAN_INTERVAL_US) -> None:
        self.node = node
        self.clock: Clock = node.env.clock
        self.cov: list[int] = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.queue_of = queue_of  # (topic, queue id) -> ConsumeQueue or None
        self.execute = execute  # re-run a held pull: (src, req_id, request[, allow_suspend, cq]) → replies
        self.scan_interval_us = scan_interval_us
        self.held: dict[tuple[str, int], list[tuple]] = {}
        node.on_crash(self.held.clear)
        node.add_service(self.run)

    @cython.ccall
    @cython.locals(cq=ConsumeQueue)
    def suspend(self, src: str, req_id: int, request: Any, timeout_us: int, cq: Any = None) -> None:
        key = cq.ident if cq is not None else (request.topic, request.queue_id)
        entry = (src, req_id, request, self.clock.now_us + timeout_us)
        waiting = self.held.get(key)
        if waiting is None:
            self.held[key] = [entry]
        else:
            waiting.append(entry)

    @cython.locals(cq=ConsumeQueue)
    def notify_message_arriving(self, cq: Any) -> None:
        """New units in `cq` (a ConsumeQueue): execute the held pulls they satisfy."""
        waiting = self.held.get(cq.ident)
        if not waiting:
            return
        max_offset = cq.max_offset
        keep = []
        for entry in waiting:
            request = entry[2]
            # a PullMessage cast to tuple: unpacked in C when compiled (see Broker.process_send)
            _group, _topic, _queue_id, queue_offset, _nums, _commit, _suspend, tag_codes = (
                cython.cast(tuple, request) if cython.compiled else request)
            if max_offset > queue_offset and (tag_codes is None or self._matches(cq, request)):
                self.cov[WOKEN_BY_ARRIVAL] += 1
                self.execute(entry[0], entry[1], request, False, cq)
            else:
                keep.append(entry)
        # in place: no second lookup of the (topic, queue id) key, whose tuple hash is not cached
        # (a held pull executed here is answered, never held again: allow_suspend is False)
        waiting[:] = keep

    @staticmethod
    def _matches(cq: Any, request: Any) -> bool:
        """A unit from the request's offset on carries a tags code of its subscription."""
        codes = request.tag_codes
        return any(cq.unit(offset)[2] in codes for offset in range(max(request.queue_offset, cq.min_offset),
                                                                   cq.max_offset))

    def run(self) -> Generator[Any, Any, None]:
        while True:
            yield self.node.sleep_us(self.scan_interval_us)
            self.scan()

    def scan(self) -> None:
        now = self.clock.now_us
        for key in list(self.held):
            cq = self.queue_of(*key)
            max_offset = cq.max_offset if cq is not None else 0
            keep = []
            for entry in self.held[key]:
                if max_offset > entry[2].queue_offset:
                    self.execute(entry[0], entry[1], entry[2])
                elif now >= entry[3]:  # the suspend time ran out with nothing new
                    self.cov[COV_PULL_HOLD_EXPIRED_EMPTY] += 1
                    self.execute(entry[0], entry[1], entry[2])
                else:
                    keep.append(entry)
            self.held[key] = keep
