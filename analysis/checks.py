"""Checkers, per consumption unit (Maelstrom's queue vocabulary), over the Ledger's arrays.

A unit is a consumer group, or one member of a BROADCASTING group (each member must see every
message). For each unit, over the messages of its subscribed topic:

- lost: acknowledged SEND_OK, never consumed successfully, and not in the retry path or the DLQ
  when the run ended;
- pending_retry: acknowledged, not consumed successfully, but a consumption failed and the
  message went back through %RETRY% / SCHEDULE_TOPIC_XXXX (or a local re-consumption): it is
  still on its way, not lost;
- dlq: acknowledged, moved to the group's dead-letter queue after its retries (not lost, but not
  consumed by the group);
- duplicates: successful consumptions of a message beyond the first, in the same unit; a
  redelivery after the listener itself failed is a retry, not a duplicate. Each duplicated
  message gets a cause: `producer_retry` when the brokers stored it more than once (a send
  retried after a lost response), else `redelivery` (offset rollback: rebalance, crash, sliding
  window);
- order_violations (orderly groups only; null elsewhere: order is not promised there): per
  (producer, sharding key), messages whose first successful consumption comes after that of a
  later-sent message (ties in consumption time are taken in message-id order);
- latency: send (first attempt) → first successful consumption, pooled over units, of the
  messages sent at or after the warm-up (`Ledger.warmup_us`, the scenario's `warmup_ms`; the
  counts above cover every message).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from analysis.ledger import (
    ACKED,
    DELIVERY_COUNT_CAP,
    IN_DLQ,
    IN_RETRY,
    LOST_SAMPLE,
    PERCENTILES,
    SEQ_BITS,
    Ledger,
    display_key,
)


def percentiles_ms(values_us: Any) -> dict[str, float | None]:
    """Nearest-rank percentiles in ms (None when there is no sample)."""
    ordered = np.sort(np.asarray(values_us, dtype=np.int64))
    n = len(ordered)
    if not n:
        return {name: None for name, _ in PERCENTILES} | {"max": None}
    out: dict[str, float | None] = {}
    for name, q in PERCENTILES:
        out[name] = int(ordered[max(0, math.ceil(q * n) - 1)]) / 1000
    out["max"] = int(ordered[-1]) / 1000
    return out


def check(records: Iterable[tuple], subscriptions: dict[str, str], producers: list[Any],
          broadcasting: Iterable[str] = (), orderly: Iterable[str] = (),
          members: dict[str, list[str]] | None = None, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metrics of a record stream (tests, stored traces): a Ledger fed every record."""
    ledger = Ledger(list(producers), subscriptions, tuple(broadcasting), tuple(orderly), members)
    ledger.feed(list(records))
    return ledger.results(details)


def _view(arr: Any, dtype: Any, length: int) -> np.ndarray:
    """The first `length` values of a ledger array (shorter arrays read as the fill value)."""
    view = np.frombuffer(arr, dtype=dtype)
    return view[:length]


class _Producers:
    """NumPy views of the per-producer message arrays, cut to each producer's top sequence."""

    def __init__(self, ledger: Ledger) -> None:
        self.n = len(ledger.producers)
        self.length = [top + 1 if top else 0 for top in ledger.top_seq]
        self.born = [_view(ledger.born_us[p], np.int64, self.length[p]) for p in range(self.n)]
        self.state = [_view(ledger.state[p], np.uint8, self.length[p]) for p in range(self.n)]
        self.copies = [_view(ledger.copies[p], np.uint8, self.length[p]) for p in range(self.n)]
        self.topics = [info.topic for info in ledger.producers]


def _padded(arr: Any, dtype: Any, length: int, fill: int) -> np.ndarray:
    view = np.frombuffer(arr, dtype=dtype)[:length]
    if len(view) == length:
        return view
    return np.concatenate([view, np.full(length - len(view), fill, dtype=dtype)])


def judge_units(ledger: Ledger, details: dict[str, Any] | None = None) -> dict[str, Any]:
    prods = _Producers(ledger)
    groups: dict[str, dict[str, Any]] = {}
    latencies: list[np.ndarray] = []
    for name in sorted(ledger.units):
        result, unit_latencies = _judge_unit(ledger, ledger.units[name], prods, details)
        groups[name] = result
        latencies.append(unit_latencies)
    return _totals(ledger, prods, groups, np.concatenate(latencies) if latencies else np.zeros(0, np.int64))


def _judge_unit(ledger: Ledger, unit: Any, prods: _Producers,
                details: dict[str, Any] | None) -> tuple[dict[str, Any], np.ndarray]:
    lost_ids: list[np.ndarray] = []
    latencies: list[np.ndarray] = []
    c = {"lost": 0, "pending_retry": 0, "dlq": 0, "duplicates": 0, "duplicated_messages": 0,
         "consumed_ok_distinct": 0, "producer_retry": 0, "redelivery": 0}
    order_rows: list[tuple[np.ndarray, ...]] = []
    for p in range(prods.n):
        length = prods.length[p]
        ok = _padded(unit.ok_count[p], np.uint16, length, 0).astype(np.int64)
        first = _padded(unit.first_ok_us[p], np.int64, length, -1)
        retry = _padded(unit.retry[p], np.uint8, length, 0)
        consumed = ok > 0
        extra = np.maximum(ok - 1, 0)
        c["consumed_ok_distinct"] += int(consumed.sum())
        c["duplicates"] += int(extra.sum())
        c["duplicated_messages"] += int((ok > 1).sum())
        stored_twice = prods.copies[p] > 1
        c["producer_retry"] += int(extra[stored_twice].sum())
        c["redelivery"] += int(extra[~stored_twice].sum())
        if prods.topics[p] != unit.topic:
            continue
        acked = (prods.state[p] & ACKED) != 0
        missing = acked & ~consumed
        c["lost"] += int((missing & (retry == 0)).sum())
        c["pending_retry"] += int((missing & (retry == IN_RETRY)).sum())
        c["dlq"] += int((missing & (retry == IN_DLQ)).sum())
        lost_seqs = np.nonzero(missing & (retry == 0))[0][:LOST_SAMPLE]
        lost_ids.append((lost_seqs.astype(np.int64), np.full(len(lost_seqs), p, np.int64)))
        delivered = acked & consumed
        seqs = np.nonzero(delivered)[0]
        unit_lat = first[seqs] - prods.born[p][seqs]
        latencies.append(unit_lat[prods.born[p][seqs] >= ledger.warmup_us])  # warm-up: not measured
        if unit.orderly:
            order_rows.append((first[seqs], np.full(len(seqs), p, np.int64), seqs,
                               np.asarray(ledger.shard[p])[seqs]))
        if details is not None:
            _add_details(details, unit.name, p, acked, ok, seqs, prods.born[p][seqs], unit_lat)
    unit_latencies = np.concatenate(latencies) if latencies else np.zeros(0, np.int64)
    result = {
        "lost": c["lost"],
        "lost_sample": _lost_sample(ledger, lost_ids),
        "pending_retry": c["pending_retry"],
        "dlq": c["dlq"],
        "duplicates": c["duplicates"],
        "duplicated_messages": c["duplicated_messages"],
        "duplicate_causes": {"producer_retry": c["producer_retry"], "redelivery": c["redelivery"]},
        "consumed_ok_distinct": c["consumed_ok_distinct"],
        "consume_attempts": unit.attempts,
        "order_violations": _order_violations(order_rows) if unit.orderly else None,
        "latency_ms": percentiles_ms(unit_latencies),
    }
    return result, unit_latencies


def _lost_sample(ledger: Ledger, lost_ids: list[tuple[np.ndarray, np.ndarray]]) -> list[str]:
    """The first lost messages by sequence number (then producer), as display keys."""
    pairs = sorted((int(s), int(p)) for seqs, ps in lost_ids for s, p in zip(seqs, ps, strict=True))
    names = [info.name for info in ledger.producers]
    return [display_key(p << SEQ_BITS | s, names) for s, p in pairs[:LOST_SAMPLE]]


def _order_violations(rows: list[tuple[np.ndarray, ...]]) -> int:
    if not rows:
        return 0
    first, producer, seq, shard = (np.concatenate(col) for col in zip(*rows, strict=True))
    msg_id = (producer << SEQ_BITS) | seq
    order = np.lexsort((msg_id, first))
    highest: dict[tuple[int, int], int] = {}
    violations = 0
    for i in order.tolist():
        stream, s = (int(producer[i]), int(shard[i])), int(seq[i])
        if s < highest.get(stream, -1):
            violations += 1
        else:
            highest[stream] = s
    return violations


def _add_details(details: dict[str, Any], unit: str, p: int, acked: np.ndarray, ok: np.ndarray,
                 seqs: np.ndarray, born: np.ndarray, latency: np.ndarray) -> None:
    counts = details.setdefault("delivery_counts", [0] * (DELIVERY_COUNT_CAP + 1))
    histogram = np.bincount(np.minimum(ok[acked], DELIVERY_COUNT_CAP), minlength=DELIVERY_COUNT_CAP + 1)
    for i, n in enumerate(histogram.tolist()):
        counts[i] += n
    parts = details.setdefault("_latency_parts", [])
    parts.append((unit, (np.int64(p) << SEQ_BITS) | seqs.astype(np.int64), born, latency))


def latency_samples(details: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every acknowledged message's first successful consumption, per unit, as columns:
    `unit` (object), `msg_id`, `born_us`, `latency_us` (int64); empty arrays without samples."""
    parts = details.get("_latency_parts", [])
    if not parts:
        return {"unit": np.zeros(0, object), "msg_id": np.zeros(0, np.int64), "born_us": np.zeros(0, np.int64),
                "latency_us": np.zeros(0, np.int64)}
    return {"unit": np.concatenate([np.full(len(p[1]), p[0], dtype=object) for p in parts]),
            "msg_id": np.concatenate([p[1] for p in parts]), "born_us": np.concatenate([p[2] for p in parts]),
            "latency_us": np.concatenate([p[3] for p in parts])}


def _totals(ledger: Ledger, prods: _Producers, groups: dict[str, dict[str, Any]],
            latencies: np.ndarray) -> dict[str, Any]:
    causes = {"producer_retry": 0, "redelivery": 0}
    for g in groups.values():
        for cause, n in g["duplicate_causes"].items():
            causes[cause] += n
    orderly = [g["order_violations"] for g in groups.values() if g["order_violations"] is not None]
    stored_duplicates = sum(int(np.maximum(c.astype(np.int64) - 1, 0).sum()) for c in prods.copies)
    return {
        **ledger.counts,
        "stored_duplicates": stored_duplicates,
        "consumed": sum(g["consumed_ok_distinct"] + g["duplicates"] for g in groups.values()),
        "lost": sum(g["lost"] for g in groups.values()),
        "pending_retry": sum(g["pending_retry"] for g in groups.values()),
        "dlq": sum(g["dlq"] for g in groups.values()),
        "duplicates": sum(g["duplicates"] for g in groups.values()),
        "duplicated_messages": sum(g["duplicated_messages"] for g in groups.values()),
        "duplicate_causes": causes,
        "order_violations": sum(orderly) if orderly else None,
        "latency_ms": percentiles_ms(latencies),
        "groups": groups,
    }
