"""Consumer-side metrics per consumption unit, from the Ledger's arrays and ownership records.

- `consume_latency_ms`: broker store time of a message's first stored copy → its first
  successful consumption by the unit (percentiles; the queueing a consumer adds, without the
  send path);
- `lag_max` / `lag_by_second`: the backlog — messages of the unit's topic stored (first copies)
  but not yet consumed successfully by the unit, leaving out the messages counted lost (they will
  never be consumed: they are no backlog) — sampled at the end of every simulated second
  (the series is cut to `LAG_POINTS` points by taking the maximum over equal spans);
- `rebalances`: rebalance rounds of the group's members (of the member, for a BROADCASTING
  unit) that changed their queue set (`consumer.rebalanced`); `unowned_queue_s`: summed over the group's queues (user and retry
  topic), the time after a queue was first owned during which no member owned it (a drop, a
  crash or a shutdown until the next owner's start); null for BROADCASTING members (every member
  owns every queue); both null for a POP group (models/consumer/pop_consumer.py: it owns no queue
  and never rebalances);
- `retries`: failed listener calls (RECONSUME_LATER: each goes down the retry path); the DLQ
  count is `dlq`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from analysis.checkers.availability import ReadWindows
from analysis.checkers.percentiles import percentiles_ms
from analysis.checkers.time_column import TimeColumn
from models.records import CONSUMER_QUEUE_DROPPED, CONSUMER_QUEUE_STARTED, CONSUMER_REBALANCED, CONSUMER_SHUTDOWN
from sim.trace import NODE_CRASHED

LAG_POINTS = 600  # at most this many points in a unit's lag series
SEC_US = 1_000_000


class SecondCounts:
    """How many times fall in each whole second 0..seconds−1 of a run ending at `end_us`, counted
    part by part (a producer's times at a time): the lag series needs the counts, not the times,
    so no array of every message's time is ever built (issue 41: the summary's peak memory)."""

    def __init__(self, end_us: int) -> None:
        self.seconds = max(1, -(-end_us // SEC_US))
        self.counts = np.zeros(self.seconds + 1, np.int64)  # the last bin: at or after the run's end

    def add(self, times_us: np.ndarray) -> None:
        if len(times_us):
            bins = np.clip(times_us // SEC_US, 0, self.seconds)
            self.counts += np.bincount(bins, minlength=self.seconds + 1)

    def before_edges(self) -> np.ndarray:
        """For each second k: the times before (k + 1) s."""
        return np.cumsum(self.counts[:self.seconds])


def lag_by_second(stored: SecondCounts, consumed: SecondCounts) -> list[int]:
    """Backlog at the end of each second 0..end: stored so far − consumed so far (at most
    `LAG_POINTS` points: the maximum over equal spans)."""
    lag = np.maximum(stored.before_edges() - consumed.before_edges(), 0)
    if len(lag) > LAG_POINTS:
        span = -(-len(lag) // LAG_POINTS)
        pad = (-len(lag)) % span
        lag = np.concatenate([lag, np.zeros(pad, lag.dtype)]).reshape(-1, span).max(axis=1)
    return [int(v) for v in lag]


def ownership(events: list[tuple]) -> dict[str, dict[str, Any]]:
    """Per group: rebalance rounds and the unowned time of its queues, from the ownership records."""
    rebalances: dict[str, int] = defaultdict(int)  # by group, and by "<group>/<node>" (broadcasting units)
    owners: dict[tuple, dict[str, int]] = defaultdict(dict)  # (group, topic, broker, qid) → node → since
    unowned_since: dict[tuple, int] = {}
    unowned_us: dict[str, int] = defaultdict(int)
    node_queues: dict[str, set] = defaultdict(set)

    def release(key: tuple, node: str, t: int) -> None:
        holders = owners[key]
        if holders.pop(node, None) is not None and not holders:
            unowned_since[key] = t

    for r in sorted(events, key=lambda e: e[0]):
        kind, t, node = r[2], r[0], r[1]
        if kind == CONSUMER_REBALANCED:
            rebalances[r[3]] += 1
            rebalances[f"{r[3]}/{node}"] += 1
        elif kind == CONSUMER_QUEUE_STARTED:
            key = (r[3], r[4], r[5], r[6])
            if not owners[key] and key in unowned_since:
                unowned_us[r[3]] += t - unowned_since.pop(key)
            owners[key][node] = t
            node_queues[node].add(key)
        elif kind == CONSUMER_QUEUE_DROPPED:
            release((r[3], r[4], r[5], r[6]), node, t)
        elif kind in (NODE_CRASHED, CONSUMER_SHUTDOWN):
            for key in sorted(node_queues.pop(node, ())):
                release(key, node, t)
    return {"rebalances": rebalances, "unowned_us": unowned_us, "open": unowned_since}


def cat(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one array: the part itself if there is one (no copy), so a caller that owns
    its parts may change the result in place."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def unit_metrics(unit: Any, prods: Any, first_ok: Any, store_us: list[TimeColumn], own: dict,
                 end_us: int, broadcasting: bool, pop: bool = False, lost: dict[int, np.ndarray] | None = None,
                 read: ReadWindows | None = None) -> dict[str, Any]:
    """`first_ok[p]`: producer p's first successful consumption times (µs, −1: none), read once
    per producer. `pop`: a POP group owns no queue and never rebalances: both read null (not applicable).
    `lost`: producer → a mask over its messages, true for the unit's lost ones (no backlog); `read`: the
    fault windows' read facts to fill (analysis/checkers/availability.py)."""
    latencies = []
    stored_count, consumed_count = SecondCounts(end_us), SecondCounts(end_us)
    for p in range(prods.n):
        if prods.topics[p] != unit.topic:
            continue
        stored, first, length = store_us[p], first_ok[p], prods.length[p]
        has_store = stored.is_set(length)
        if lost and p in lost:
            has_store[lost[p]] = False
        stored_count.add(stored.at(has_store, length))
        done = has_store & (first >= 0)
        consumed = first[done]
        consumed_count.add(consumed)
        stored_done = stored.at(done, length)
        latency = consumed - stored_done
        if read is not None:
            retry = np.frombuffer(unit.retry[p], np.uint8)[:length]  # the retry path or the DLQ: on its way
            waiting = has_store & (first < 0)
            waiting[:len(retry)] &= retry == 0
            read.add(p, np.flatnonzero(done), stored_done, consumed, np.flatnonzero(waiting),
                     stored.at(waiting, length))
        latencies.append(np.maximum(latency, 0, out=latency))
    lag = lag_by_second(stored_count, consumed_count)
    latencies_us = cat(latencies)
    group = unit.group
    if broadcasting or pop:
        unowned = None
    else:
        open_us = sum(end_us - since for key, since in own["open"].items() if key[0] == group)
        unowned = (own["unowned_us"].get(group, 0) + open_us) / 1e6
    return {
        "consume_latency_ms": percentiles_ms(latencies_us, owned=True),  # fresh arrays, pooled later as a multiset
        "lag_max": max(lag) if lag else 0,
        "lag_by_second": lag,
        "rebalances": None if pop else own["rebalances"].get(unit.name if broadcasting else group, 0),
        "unowned_queue_s": None if unowned is None else round(unowned, 6),
        "_consume_latencies_us": latencies_us,  # pooled into the summary's, then dropped
    }
