"""Checkers over one run's records, per consumer group (Maelstrom's queue vocabulary).

- lost: acknowledged SEND_OK, never consumed successfully by a subscribed group by the end of
  the settle period (a BROADCASTING group is judged per member instance);
- duplicates: successful consumptions of a uniq key beyond the first, in the same group; a
  redelivery after the listener itself failed is a retry, not a duplicate. Each duplicated key
  gets a cause: `producer_retry` when the broker stored it more than once (a send retried after
  a lost response), else `redelivery` (offset rollback: rebalance, crash, sliding window);
- order_violations (groups consuming orderly): per (producer, sharding key), messages whose
  first successful consumption comes after a later-sent message's;
- latency: send (first attempt) → first successful consumption, pooled over groups.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from models.records import BROKER_STORED, CONSUMER_CONSUMED, PRODUCER_SEND_FAILED, PRODUCER_SENT
from sim.trace import field_index

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def _ix(kind: str, *names: str) -> list[int]:
    return [field_index(kind, n) for n in names]


def percentiles_ms(values_us: list[int]) -> dict[str, float | None]:
    """Nearest-rank percentiles in ms (None when there is no sample)."""
    if not values_us:
        return {name: None for name, _ in PERCENTILES} | {"max": None}
    ordered = sorted(values_us)
    n = len(ordered)
    out: dict[str, float | None] = {}
    for name, q in PERCENTILES:
        out[name] = ordered[max(0, math.ceil(q * n) - 1)] / 1000
    out["max"] = ordered[-1] / 1000
    return out


def _seq(uniq_key: str) -> int:
    return int(uniq_key.rsplit("-", 1)[1])


DELIVERY_COUNT_CAP = 10  # delivery-count histograms put 10 and more in the last bin


def check(records: Iterable[tuple], subscriptions: dict[str, str], broadcasting: Iterable[str] = (),
          orderly: Iterable[str] = (), details: dict[str, Any] | None = None) -> dict[str, Any]:
    """`subscriptions`: group → topic. Returns the metrics of the run (see module docstring).

    With a `details` dict, also fills in per-message facts for sweeps and reports:
    `latency_samples` (unit, key, born_us, latency_us) for every acked message's first successful
    consumption, and `delivery_counts`, a histogram whose index is the number of successful
    consumptions of an acked message in a unit (0 = lost; the last bin counts
    `DELIVERY_COUNT_CAP` and more).
    """
    by_kind = _by_kind(records, (PRODUCER_SENT, PRODUCER_SEND_FAILED, BROKER_STORED, CONSUMER_CONSUMED))
    broadcasting, orderly = set(broadcasting), set(orderly)
    sent = _sent(by_kind[PRODUCER_SENT], by_kind[PRODUCER_SEND_FAILED])
    copies = _stored_copies(by_kind[BROKER_STORED])
    units = _consumption(by_kind[CONSUMER_CONSUMED], broadcasting)
    groups: dict[str, dict[str, Any]] = {}
    all_latencies: list[int] = []
    for unit, consumed in sorted(units.items()):
        group = unit.split("/", 1)[0]
        topic = subscriptions.get(group)
        acked = sent["acked"].get(topic, {})
        result = _judge_unit(consumed, acked, copies, group in orderly)
        all_latencies += result.pop("_latencies_us")
        groups[unit] = result
        if details is not None:
            _add_details(details, unit, consumed, acked)
    for group, topic in sorted(subscriptions.items()):
        if group not in broadcasting and group not in groups:  # subscribed, consumed nothing
            groups[group] = _judge_unit({}, sent["acked"].get(topic, {}), copies, group in orderly)
            groups[group].pop("_latencies_us")
            if details is not None:
                _add_details(details, group, {}, sent["acked"].get(topic, {}))
    consumed = sum(g["consumed_ok_distinct"] + g["duplicates"] for g in groups.values())  # Σ ok counts
    return _totals(sent, copies, consumed, groups, all_latencies)


def _add_details(details: dict[str, Any], unit: str, consumed: dict[str, list],
                 acked: dict[str, tuple]) -> None:
    samples = details.setdefault("latency_samples", [])
    counts = details.setdefault("delivery_counts", [0] * (DELIVERY_COUNT_CAP + 1))
    for key, (born_us, _producer, _shard) in acked.items():
        entry = consumed.get(key)
        ok = entry[0] if entry is not None else 0
        counts[min(ok, DELIVERY_COUNT_CAP)] += 1
        if ok:
            samples.append((unit, key, born_us, entry[1] - born_us))


def _by_kind(records: Iterable[tuple], kinds: tuple[str, ...]) -> dict[str, list[tuple]]:
    """One pass over the run: the records of each wanted kind, in emission order."""
    out: dict[str, list[tuple]] = {kind: [] for kind in kinds}
    get = out.get
    for r in records:
        bucket = get(r[2])
        if bucket is not None:
            bucket.append(r)
    return out


def _sent(sent_records: list[tuple], failed_records: list[tuple]) -> dict[str, Any]:
    key_i, topic_i, shard_i, status_i, attempts_i, born_i = _ix(
        PRODUCER_SENT, "key", "topic", "shard", "status", "attempts", "born_us")
    f_attempts_i = field_index(PRODUCER_SEND_FAILED, "attempts")
    acked: dict[str, dict[str, tuple]] = {}
    attempts = sent_ok = non_ok = 0
    for r in sent_records:
        attempts += r[attempts_i]
        if r[status_i] == "SEND_OK":
            sent_ok += 1
            per_topic = acked.get(r[topic_i])
            if per_topic is None:
                per_topic = acked[r[topic_i]] = {}
            per_topic[r[key_i]] = (r[born_i], r[1], r[shard_i])
        else:
            non_ok += 1
    attempts += sum(r[f_attempts_i] for r in failed_records)
    return {"acked": acked, "attempts": attempts, "sent_ok": sent_ok, "failed": len(failed_records),
            "non_ok": non_ok}


def _stored_copies(stored_records: list[tuple]) -> dict[str, int]:
    key_i, topic_i, reconsume_i = _ix(BROKER_STORED, "key", "topic", "reconsume_times")
    copies: dict[str, int] = {}
    internal = ("%", "SCHEDULE_", "RMQ_SYS")
    for r in stored_records:
        if r[reconsume_i] == 0 and not r[topic_i].startswith(internal):
            key = r[key_i]
            copies[key] = copies.get(key, 0) + 1
    return copies


def _consumption(consumed_records: list[tuple], broadcasting: set[str]) -> dict[str, dict[str, list]]:
    """unit → key → [ok count, first ok time µs, consume attempts]."""
    group_i, key_i, ok_i = _ix(CONSUMER_CONSUMED, "group", "key", "ok")
    units: dict[str, dict[str, list]] = {}
    for r in consumed_records:
        group = r[group_i]
        unit = f"{group}/{r[1]}" if group in broadcasting else group
        per_key = units.get(unit)
        if per_key is None:
            per_key = units[unit] = {}
        entry = per_key.get(r[key_i])
        if entry is None:
            entry = per_key[r[key_i]] = [0, None, 0]
        entry[2] += 1
        if r[ok_i]:
            entry[0] += 1
            if entry[1] is None:
                entry[1] = r[0]
    return units


def _judge_unit(consumed: dict[str, list], acked: dict[str, tuple], copies: dict[str, int],
                orderly: bool) -> dict[str, Any]:
    duplicates = duplicated = ok_distinct = attempts = 0
    causes = {"producer_retry": 0, "redelivery": 0}
    latencies: list[int] = []
    for key, (ok, first_ok_us, tries) in consumed.items():  # one pass: this runs per message
        attempts += tries
        if not ok:
            continue
        ok_distinct += 1
        sent = acked.get(key)
        if sent is not None:
            latencies.append(first_ok_us - sent[0])
        if ok > 1:
            duplicates += ok - 1
            duplicated += 1
            causes["producer_retry" if copies.get(key, 0) > 1 else "redelivery"] += ok - 1
    lost = [k for k in acked if k not in consumed or not consumed[k][0]]
    return {
        "lost": len(lost),
        "lost_sample": sorted(lost, key=_seq)[:10],
        "duplicates": duplicates,
        "duplicated_messages": duplicated,
        "duplicate_causes": causes,
        "consumed_ok_distinct": ok_distinct,
        "consume_attempts": attempts,
        "order_violations": _order_violations(consumed, acked) if orderly else 0,
        "latency_ms": percentiles_ms(latencies),
        "_latencies_us": latencies,
    }


def _order_violations(consumed: dict[str, list], acked: dict[str, tuple]) -> int:
    firsts = sorted((e[1], k) for k, e in consumed.items() if e[1] is not None and k in acked)
    highest: dict[tuple[str, str], int] = {}
    violations = 0
    for _t, key in firsts:
        producer, shard = acked[key][1], acked[key][2]
        stream_key, seq = (producer, shard), _seq(key)
        if seq < highest.get(stream_key, -1):
            violations += 1
        else:
            highest[stream_key] = seq
    return violations


def _totals(sent: dict[str, Any], copies: dict[str, int], consumed: int,
            groups: dict[str, dict[str, Any]], latencies: list[int]) -> dict[str, Any]:
    dup_causes = {"producer_retry": 0, "redelivery": 0}
    for g in groups.values():
        for cause, n in g["duplicate_causes"].items():
            dup_causes[cause] += n
    return {
        "sent_attempts": sent["attempts"],
        "sent_ok": sent["sent_ok"],
        "sent_not_ok": sent["non_ok"],
        "send_failed": sent["failed"],
        "stored": sum(copies.values()),
        "stored_duplicates": sum(n - 1 for n in copies.values() if n > 1),
        "consumed": consumed,
        "lost": sum(g["lost"] for g in groups.values()),
        "duplicates": sum(g["duplicates"] for g in groups.values()),
        "duplicated_messages": sum(g["duplicated_messages"] for g in groups.values()),
        "duplicate_causes": dup_causes,
        "order_violations": sum(g["order_violations"] for g in groups.values()),
        "latency_ms": percentiles_ms(latencies),
        "groups": groups,
    }
