"""The streaming Ledger equals the record-scan checker it replaced, on fuzzed record streams.

`oracle()` below is the pre-issue-9 checker algorithm (analysis/checkers/checks.py before the Ledger): one
pass over the records keeping per-message dicts, then per-unit verdicts, with the issue-9
vocabulary added (`pending_retry`, `dlq` apart from `lost`; `order_violations` null for groups
that do not consume orderly, and judged over keyed messages only; ties in first-consumption time taken in message-id order). It is
written for clarity, not speed: it is the definition the Ledger's NumPy arrays must reproduce.

Hypothesis generates record streams shaped like a run's: several producers and topics; SEND_OK,
other store statuses, ONEWAY, send failures and sends still in flight at the end; stores of one
message once, twice (a producer retry) or not at all; delayed and timer messages parked in
SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer (a timer message parked once or twice, put back by the
timer up to twice); %RETRY%, SCHEDULE_TOPIC_XXXX and %DLQ% copies after failed consumptions; failed and repeated consumptions by several groups, one of
them BROADCASTING (judged per member) and one orderly; records in time order with ties. The
stream is fed to the Ledger in chunks of random sizes, as the Tracer feeds it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.checkers.checks import LOSS_CAUSES, check, latency_samples
from analysis.checkers.ledger import DELIVERY_COUNT_CAP, Ledger, ProducerInfo, display_key
from analysis.checkers.ledger_codes import DESTROYED_FAILOVER, DESTROYED_POWER, GROUP_HAS_REPLICAS
from analysis.checkers.metrics import loss_causes
from models.message import SEQ_BITS, SEQ_MASK, msg_id_of
from models.records import (
    BROKER_STORED,
    COMMIT_LOG_DESTROYED,
    COMMIT_LOG_FLUSHED,
    CONSUMER_CONSUMED,
    CONSUMER_SENT_BACK,
    OFFSET_REUSED,
    PRODUCER_SEND_FAILED,
    PRODUCER_SENT,
    TIMER_DELIVERED,
)
from sim.trace import KINDS

PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))
INTERNAL = ("%", "SCHEDULE_", "RMQ_SYS", "rmq_sys_")
PARKING = ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer")
LOST_SAMPLE = 10


# --- the oracle: the old record-scan algorithm ----------------------------------------------------

def _field(record: tuple, name: str) -> Any:
    return record[3 + KINDS[record[2]].index(name)]


def _percentiles_ms(values_us: list[int]) -> dict[str, float | None]:
    if not values_us:
        return {name: None for name, _ in PERCENTILES} | {"max": None}
    ordered = sorted(values_us)
    n = len(ordered)
    out: dict[str, float | None] = {name: ordered[max(0, math.ceil(q * n) - 1)] / 1000 for name, q in PERCENTILES}
    out["max"] = ordered[-1] / 1000
    return out


def oracle(records: list[tuple], subscriptions: dict[str, str], producers: list[ProducerInfo],
           broadcasting: tuple[str, ...] = (), orderly: tuple[str, ...] = (),
           members: dict[str, list[str]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, details) of a record stream, by a straightforward scan; details are the
    delivery-count histogram and the sorted latency samples (unit, msg_id, born_us, latency_us)."""
    counts = {"sent_attempts": 0, "sent_ok": 0, "sent_not_ok": 0, "send_failed": 0}
    acked: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)  # topic -> id -> (born, shard)
    copies: dict[int, int] = defaultdict(int)  # stores under a user topic with reconsume_times 0
    scheduled: dict[int, int] = defaultdict(int)  # parked by their send (reconsume_times 0): times
    timer: dict[int, int] = defaultdict(int)  # timer.delivered records
    oneway: set[int] = set()
    status: dict[str, int] = defaultdict(int)
    reasons: dict[str, int] = defaultdict(int)
    by_broker: dict[str, int] = defaultdict(int)
    rts: list[int] = []
    retried = steered = 0
    dlq: set[tuple[str, int]] = set()  # (group, id) stored in %DLQ%group
    destroyed: dict[int, dict[str, Any]] = {}  # id -> facts about its destroyed user-topic copies
    reused: set[int] = set()  # ids stored at a reused user-topic offset
    retry_gone: dict[tuple[str, int], dict[str, Any]] = {}  # (group, id) -> facts of its destroyed retry copy
    retry_reused: set[tuple[str, int]] = set()
    # unit -> id -> [ok count, first ok time, attempts, failed]
    units: dict[str, dict[int, list]] = {}
    for group in subscriptions:
        for unit in ([f"{group}/{m}" for m in (members or {}).get(group, [])] if group in broadcasting else [group]):
            units[unit] = {}
    for r in records:
        kind = r[2]
        if kind in (PRODUCER_SENT, PRODUCER_SEND_FAILED):
            counts["sent_attempts"] += _field(r, "attempts")
            retried += _field(r, "attempts") > 1
            steered += _field(r, "steered") > 0
        if kind == PRODUCER_SENT:
            status[_field(r, "status")] += 1
            by_broker[_field(r, "broker")] += 1
            if _field(r, "status") == "SEND_OK":
                counts["sent_ok"] += 1
                acked[_field(r, "topic")][_field(r, "msg_id")] = (_field(r, "born_us"), _field(r, "shard"))
            else:
                counts["sent_not_ok"] += 1
            if _field(r, "status") == "ONEWAY":
                oneway.add(_field(r, "msg_id"))
            else:
                rts.append(r[0] - _field(r, "born_us"))
        elif kind == PRODUCER_SEND_FAILED:
            counts["send_failed"] += 1
            reasons[_field(r, "reason")] += 1
        elif kind == COMMIT_LOG_DESTROYED:
            topic, msg_id = _field(r, "topic"), _field(r, "msg_id")
            fault = _field(r, "fault")
            facts = {"failover": fault == "failover_truncated", "power": fault == "power_loss",
                     "crash": fault not in ("power_loss", "failover_truncated"),
                     "replicas": _field(r, "replicas") > 0, "replicated": _field(r, "replicated")}
            if topic.startswith("%RETRY%"):
                old = retry_gone.get((topic[7:], msg_id))
                retry_gone[(topic[7:], msg_id)] = facts if old is None else _merge(old, facts)
            elif topic == "rmq_sys_wheel_timer":  # a timer message's parked copy, not yet put back: its only one
                if not copies.get(msg_id):
                    destroyed[msg_id] = _merge(destroyed[msg_id], facts) if msg_id in destroyed else facts
            elif not topic.startswith(INTERNAL):
                destroyed[msg_id] = _merge(destroyed[msg_id], facts) if msg_id in destroyed else facts
        elif kind == TIMER_DELIVERED:
            timer[_field(r, "msg_id")] += 1
        elif kind == OFFSET_REUSED:
            topic = _field(r, "topic")
            if topic.startswith("%RETRY%"):
                retry_reused.add((topic[7:], _field(r, "msg_id")))
            elif not topic.startswith(INTERNAL):
                reused.add(_field(r, "msg_id"))
        elif kind == BROKER_STORED:
            topic = _field(r, "topic")
            if topic.startswith(("%RETRY%", "SCHEDULE_")):  # a retry copy stored again: on its way
                for key in [k for k in retry_gone if k[1] == _field(r, "msg_id")]:
                    del retry_gone[key]
            if topic.startswith("%DLQ%"):
                dlq.add((topic[len("%DLQ%"):], _field(r, "msg_id")))
            elif topic in PARKING and _field(r, "reconsume_times") == 0:
                scheduled[_field(r, "msg_id")] += 1
                if topic == "rmq_sys_wheel_timer" and not copies.get(_field(r, "msg_id")):
                    destroyed.pop(_field(r, "msg_id"), None)  # parked again: on its way again
            elif not topic.startswith(INTERNAL) and _field(r, "reconsume_times") == 0:
                copies[_field(r, "msg_id")] += 1
        elif kind == CONSUMER_CONSUMED:
            group = _field(r, "group")
            unit = f"{group}/{r[1]}" if group in broadcasting else group
            entry = units.setdefault(unit, {}).setdefault(_field(r, "msg_id"), [0, None, 0, False])
            entry[2] += 1
            if _field(r, "ok"):
                entry[0] += 1
                if entry[1] is None:
                    entry[1] = r[0]
            elif group not in broadcasting:
                entry[3] = True  # went down the retry path (send-back or local re-consumption)
    groups: dict[str, dict[str, Any]] = {}
    all_latencies: list[int] = []
    histogram = [0] * (DELIVERY_COUNT_CAP + 1)
    samples: list[tuple] = []
    names = [p.name for p in producers]
    # put back twice by the timer, parked once: stored twice, but redelivered, not a producer retry
    timer_twice = {m for m, n in timer.items() if n > 1 and scheduled.get(m, 0) < 2}
    for unit in sorted(units):
        group = unit.split("/", 1)[0]
        result, latencies = _oracle_unit(unit, units[unit], acked[subscriptions[group]], copies,
                                         dlq if group not in broadcasting else set(), group in orderly, names,
                                         lambda m: _cause(destroyed.get(m), m in reused),
                                         lambda m, g=group: ((g, m) in retry_gone or (g, m) in retry_reused,
                                                             _cause(retry_gone.get((g, m)), (g, m) in retry_reused)),
                                         scheduled, timer_twice, destroyed)
        groups[unit] = result
        all_latencies += latencies
        for msg_id, (born, _shard) in acked[subscriptions[group]].items():
            entry = units[unit].get(msg_id)
            ok = entry[0] if entry else 0
            histogram[min(ok, DELIVERY_COUNT_CAP)] += 1
            if ok:
                samples.append((unit, msg_id, born, entry[1] - born))
    total_sent = sum(by_broker.values())
    metrics = {
        **counts,
        "sends": counts["sent_ok"] + counts["sent_not_ok"] + counts["send_failed"],
        "send_retried": retried,
        "send_steered_away": steered,
        "send_status": dict(sorted(status.items())),
        "send_failures_by_reason": dict(sorted(reasons.items())),
        "send_latency_ms": _percentiles_ms(rts),
        "send_share_by_broker": {b: round(n / total_sent, 6) for b, n in sorted(by_broker.items())},
        "oneway_unstored": sum(1 for m in oneway if m not in scheduled and not copies.get(m)),
        "stored": sum(copies.values()),
        "stored_duplicates": sum(n - 1 for n in copies.values() if n > 1),
        "consumed": sum(g["consumed_ok_distinct"] + g["duplicates"] for g in groups.values()),
        **{key: sum(g[key] for g in groups.values())
           for key in ("lost", "unconsumed", "pending_retry", "pending_delay", "dlq", "duplicates",
                       "duplicated_messages")},
        "lost_by_cause": {cause: sum(g["lost_by_cause"][cause] for g in groups.values()) for cause in LOSS_CAUSES},
        "duplicate_causes": {cause: sum(g["duplicate_causes"][cause] for g in groups.values())
                             for cause in ("producer_retry", "redelivery")},
        "order_violations": (sum(g["order_violations"] for g in groups.values() if g["order_violations"] is not None)
                             if any(g["order_violations"] is not None for g in groups.values()) else None),
        "latency_ms": _percentiles_ms(all_latencies),
        "groups": groups,
    }
    return metrics, {"delivery_counts": histogram, "samples": sorted(samples)}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {key: a[key] or b[key] for key in a}


def _cause(facts: dict[str, Any] | None, reused: bool) -> str:
    """The loss cause of a message from its facts (the definition in analysis/checkers/metrics.py)."""
    if facts is not None and facts["failover"]:  # the failover truncation removed the last copy: first
        return "truncated_on_failover"
    if facts is not None and facts["power"]:
        return "replica_not_synced" if facts["replicas"] and not facts["replicated"] else "unflushed_at_power_loss"
    if facts is not None and facts["crash"]:
        return "truncated_on_recovery"
    return "offset_skipped_after_recovery" if reused else "other"


def _oracle_unit(unit: str, consumed: dict[int, list], acked: dict[int, tuple[int, int]], copies: dict[int, int],
                 dlq: set[tuple[str, int]], orderly: bool, names: list[str], cause_of: Any,
                 retry_gone: Any, scheduled: dict[int, int], timer_twice: set[int],
                 destroyed: dict[int, Any]) -> tuple[dict[str, Any], list[int]]:
    duplicates = duplicated = distinct = attempts = 0
    causes = {"producer_retry": 0, "redelivery": 0}
    for msg_id, (ok, _first, tries, _failed) in consumed.items():
        attempts += tries
        if ok:
            distinct += 1
        if ok > 1:
            duplicates += ok - 1
            duplicated += 1
            twice = copies.get(msg_id, 0) > 1 and msg_id not in timer_twice
            causes["producer_retry" if twice else "redelivery"] += ok - 1
    lost, pending, dead, delayed = [], 0, 0, 0
    by_cause = dict.fromkeys(LOSS_CAUSES, 0)
    latencies = []
    for msg_id, (born, _shard) in acked.items():
        entry = consumed.get(msg_id)
        if entry is not None and entry[0]:
            latencies.append(entry[1] - born)
        elif (unit, msg_id) in dlq:
            dead += 1
        elif entry is not None and entry[3]:
            gone, cause = retry_gone(msg_id)
            if gone:  # its retry copy was destroyed (or skipped) and not stored again: lost
                lost.append(msg_id)
                by_cause[cause] += 1
            else:
                pending += 1
        elif msg_id in scheduled and not copies.get(msg_id) and msg_id not in destroyed:  # a fact: lost
            delayed += 1
        else:
            lost.append(msg_id)
            by_cause[cause_of(msg_id)] += 1
    lost.sort(key=lambda m: (m & SEQ_MASK, m >> SEQ_BITS))
    return {
        "lost": len(lost),
        "lost_by_cause": by_cause,
        "lost_sample": [display_key(m, names) for m in lost[:LOST_SAMPLE]],
        "unconsumed": 0,  # only a run stopped at a bound has unconsumed messages
        "pending_retry": pending,
        "pending_delay": delayed,
        "dlq": dead,
        "duplicates": duplicates,
        "duplicated_messages": duplicated,
        "duplicate_causes": causes,
        "consumed_ok_distinct": distinct,
        "consume_attempts": attempts,
        "order_violations": _oracle_order(consumed, acked) if orderly else None,
        "latency_ms": _percentiles_ms(latencies),
    }, latencies


def _oracle_order(consumed: dict[int, list], acked: dict[int, tuple[int, int]]) -> int:
    firsts = sorted((e[1], msg_id) for msg_id, e in consumed.items()
                    if e[1] is not None and msg_id in acked and acked[msg_id][1] >= 0)  # keyed messages only
    highest: dict[tuple[int, int], int] = {}
    violations = 0
    for _t, msg_id in firsts:
        stream, seq = (msg_id >> SEQ_BITS, acked[msg_id][1]), msg_id & SEQ_MASK
        if seq < highest.get(stream, -1):
            violations += 1
        else:
            highest[stream] = seq
    return violations


# --- fuzzed record streams ------------------------------------------------------------------------

PRODUCERS = [ProducerInfo("p-a", "orders"), ProducerInfo("p-b", "orders"), ProducerInfo("p-c", "audit")]
SUBSCRIPTIONS = {"billing": "orders", "audit": "audit", "cache": "orders", "ledger": "orders"}
BROADCASTING = ("cache",)
ORDERLY = ("ledger",)
MEMBERS = {"billing": ["c-1", "c-2"], "audit": ["c-3"], "cache": ["c-4", "c-5"], "ledger": ["c-6"]}
OUTCOMES = ["SEND_OK", "SEND_OK", "SEND_OK", "FLUSH_DISK_TIMEOUT", "ONEWAY", "failed", "in_flight"]


def _rec(t: int, node: str, kind: str, *fields: Any) -> tuple:
    assert len(fields) == len(KINDS[kind])
    return (t, node, kind, *fields)


class Genome:
    """Decisions read from one drawn byte string (a zero byte is the simplest choice, and an
    exhausted genome reads zeros), so Hypothesis draws once per stream and still shrinks it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int(self, low: int, high: int) -> int:
        byte = self.data[self.pos] if self.pos < len(self.data) else 0
        self.pos += 1
        return low + byte % (high - low + 1)

    def pick(self, options: list[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]


def message_records(g: Genome, p: int, seq: int) -> list[tuple]:
    """Every record one message causes: its send outcome, stores, consumptions, retry path."""
    info, msg_id = PRODUCERS[p], msg_id_of(p, seq)
    born = g.int(0, 30)
    t = born + g.int(0, 5)
    outcome = g.pick(OUTCOMES)
    shard = g.int(-1, 2)
    attempts = g.int(1, 3)
    out = []
    broker, steered = g.pick(["broker-a", "broker-a", "broker-b"]), g.pick([0, 0, 0, 1, 2])
    if outcome == "failed":
        out.append(_rec(t, info.name, PRODUCER_SEND_FAILED, msg_id, info.topic, shard, attempts,
                        g.pick(["timeout", "call_timeout"]), born, broker, steered))
    elif outcome != "in_flight":
        out.append(_rec(t, info.name, PRODUCER_SENT, msg_id, info.topic, shard, broker, 1, outcome, attempts,
                        born, steered))
    if g.int(0, 5) == 0:  # a delayed message: parked in SCHEDULE_TOPIC_XXXX (maybe never delivered)
        if g.int(0, 2) == 0:  # a timer message: parked once or twice, put back by the timer up to twice
            out.append(_rec(born, "broker-a", BROKER_STORED, msg_id, "rmq_sys_wheel_timer", 0, seq, 0, 150, 0))
            if g.int(0, 2) == 0:  # a fault destroyed the parked copy (lost, unless put back or parked again)
                out.append(_rec(born + 1, "broker-a", COMMIT_LOG_DESTROYED, msg_id, "rmq_sys_wheel_timer", 0, seq,
                                g.pick(["power_loss", "process_crash"]), g.pick([0, 1]), g.pick([False, True])))
            if g.int(0, 2) == 0:  # parked again by a retried send
                out.append(_rec(born + 1, "broker-a", BROKER_STORED, msg_id, "rmq_sys_wheel_timer", 0, seq, 0, 150, 0))
            for i in range(g.pick([0, 1, 2, 2])):
                out.append(_rec(born + 2 + i, "broker-a", TIMER_DELIVERED, msg_id, info.topic, 0, i > 0))
        else:
            out.append(_rec(born, "broker-a", BROKER_STORED, msg_id, "SCHEDULE_TOPIC_XXXX", 1, seq, 0, 150, 0))
    for i in range(g.pick([1, 1, 1, 2, 0, 3])):  # 2+ copies: a send retried after a lost response
        reconsume = g.pick([0, 0, 0, 1])
        out.append(_rec(born + i, "broker-a", BROKER_STORED, msg_id, info.topic, 1, seq, 100 * seq, 150, reconsume))
    fact = g.pick(["none", "none", "none", "destroyed", "reused"])  # loss-cause facts
    if fact == "destroyed":  # a failover truncation: of the only copy, or after another fault
        out.append(_rec(born + 1, "broker-a", COMMIT_LOG_DESTROYED, msg_id, info.topic, 1, seq,
                        g.pick(["power_loss", "process_crash", "failover_truncated"]), g.pick([0, 1]),
                        g.pick([False, True])))
    elif fact == "reused":
        out.append(_rec(born, "broker-a", OFFSET_REUSED, msg_id, info.topic, 1, seq))
    for group, topic in SUBSCRIPTIONS.items():
        if topic != info.topic and g.int(0, 9) != 9:  # rarely, a consumption of another topic
            continue
        nodes = MEMBERS[group] + (["c-9"] if group in BROADCASTING else [])  # c-9: not a known member
        failed = False
        for _ in range(g.pick([1, 1, 2, 0, 3])):
            ok = g.pick([True, True, False])
            when = born + g.int(1, 40)
            node = g.pick(nodes)
            out.append(_rec(when, node, CONSUMER_CONSUMED, group, msg_id, topic, "broker-a", 1, seq, ok, 0))
            failed = failed or not ok
        if failed and group not in BROADCASTING:
            when = born + g.int(1, 40)
            out.append(_rec(when, MEMBERS[group][0], CONSUMER_SENT_BACK, group, msg_id, 0, True))
            path = g.pick(["retry", "schedule", "dlq", "none"])
            if path in ("retry", "dlq"):
                out.append(_rec(when, "broker-a", BROKER_STORED, msg_id, f"%RETRY%{group}", 0, 0, 0, 150, 1))
            if path == "schedule":
                out.append(_rec(when, "broker-a", BROKER_STORED, msg_id, "SCHEDULE_TOPIC_XXXX", 2, 0, 0, 150, 1))
            if path == "dlq":
                out.append(_rec(when + 1, "broker-a", BROKER_STORED, msg_id, f"%DLQ%{group}", 0, 0, 0, 150, 17))
            gone = g.pick(["kept", "kept", "destroyed", "restored", "reused"])  # the retry copy's fate
            if gone in ("destroyed", "restored"):
                out.append(_rec(when + 2, "broker-a", COMMIT_LOG_DESTROYED, msg_id, f"%RETRY%{group}", 0, 0,
                                g.pick(["power_loss", "process_crash"]), 0, False))
            if gone == "restored":
                out.append(_rec(when + 3, "broker-a", BROKER_STORED, msg_id, f"%RETRY%{group}", 0, 1, 0, 150, 1))
            if gone == "reused":
                out.append(_rec(when + 2, "broker-a", OFFSET_REUSED, msg_id, f"%RETRY%{group}", 0, 0))
    return out


def build_stream(g: Genome) -> tuple[list[tuple], list[int]]:
    """(records in time order, chunk sizes summing to their number)."""
    records: list[tuple] = []
    for p in range(len(PRODUCERS)):
        for seq in range(1, g.int(0, 12) + 1):
            records += message_records(g, p, seq)
    records += [_rec(g.int(0, 80), "broker-a", COMMIT_LOG_FLUSHED, 4096) for _ in range(g.int(0, 2))]
    records.sort(key=lambda r: r[0])  # stable: ties keep their generation order
    sizes, left = [], len(records)
    while left:
        size = min(left, g.pick([left, 1, 2, 3, 7, 16, 64]))  # an exhausted genome: one chunk
        sizes.append(size)
        left -= size
    return records, sizes


def record_streams() -> st.SearchStrategy[tuple[list[tuple], list[int]]]:
    return st.binary(min_size=400, max_size=3_000).map(lambda data: build_stream(Genome(data)))


def ledger_results(records: list[tuple], chunk_sizes: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    ledger = Ledger(PRODUCERS, SUBSCRIPTIONS, BROADCASTING, ORDERLY, MEMBERS)
    start = 0
    for size in chunk_sizes:
        ledger.feed(records[start:start + size])
        start += size
    details: dict[str, Any] = {}
    return ledger.results(details), details


def _samples(details: dict[str, Any]) -> list[tuple]:
    cols = latency_samples(details)
    return sorted(zip(cols["unit"].tolist(), cols["msg_id"].tolist(), cols["born_us"].tolist(),
                      cols["latency_us"].tolist(), strict=True))


def _coverage(metrics: dict[str, Any], chunk_sizes: list[int]) -> list[str]:
    """The cases a stream exercises (the fuzzer must reach each of them often)."""
    cases = [key for key in ("lost", "pending_retry", "pending_delay", "dlq", "duplicates", "order_violations",
                             "send_failed", "sent_not_ok", "oneway_unstored", "send_steered_away") if metrics[key]]
    cases += [cause for cause, n in metrics["lost_by_cause"].items() if n and cause != "expired_file_deleted"]
    cases += ["producer_retry"] if metrics["duplicate_causes"]["producer_retry"] else []
    cases += ["unknown_member"] if any(unit.endswith("/c-9") for unit in metrics["groups"]) else []
    cases += ["chunks"] if len(chunk_sizes) > 1 else []
    return cases


def test_ledger_equals_the_record_scan_oracle():
    seen: dict[str, int] = defaultdict(int)

    @settings(max_examples=200, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(record_streams())
    def compare(stream: tuple[list[tuple], list[int]]) -> None:
        records, chunk_sizes = stream
        expected, expected_details = oracle(records, SUBSCRIPTIONS, PRODUCERS, BROADCASTING, ORDERLY, MEMBERS)
        got, details = ledger_results(records, chunk_sizes)
        seen["timer_twice"] += _timer_twice_stored_twice(records)
        assert _without_causes(got) == expected
        assert details.get("delivery_counts", [0] * (DELIVERY_COUNT_CAP + 1)) == expected_details["delivery_counts"]
        assert _samples(details) == expected_details["samples"]
        # check(): the same Ledger fed the whole stream at once
        assert _without_causes(check(records, SUBSCRIPTIONS, producers=PRODUCERS, broadcasting=BROADCASTING,
                                     orderly=ORDERLY, members=MEMBERS)) == expected
        for case in _coverage(expected, chunk_sizes):
            seen[case] += 1

    compare()
    # the generator reaches every case that matters (else the equality above proves little)
    assert all(seen[case] >= 10 for case in ("lost", "pending_retry", "pending_delay", "dlq", "duplicates",
                                             "order_violations", "send_failed", "sent_not_ok", "producer_retry",
                                             "unknown_member", "chunks", "oneway_unstored", "send_steered_away",
                                             "unflushed_at_power_loss", "replica_not_synced",
                                             "truncated_on_failover", "truncated_on_recovery",
                                             "offset_skipped_after_recovery",
                                             "other", "timer_twice")), dict(seen)


def _timer_twice_stored_twice(records: list[tuple]) -> bool:
    """A message the timer put back twice, parked once, stored twice in its topic: its duplicates
    are redeliveries in the two-way split, not producer retries."""
    count: dict[tuple[str, int], int] = defaultdict(int)
    for r in records:
        if r[2] == TIMER_DELIVERED:
            count["timer", r[3]] += 1
        elif r[2] == BROKER_STORED and _field(r, "reconsume_times") == 0:
            count["parked" if r[4] in PARKING else "stored", r[3]] += 1
    return any(n > 1 and count["parked", m] < 2 and count["stored", m] > 1 for (what, m), n in list(count.items())
               if what == "timer")


CONSUMER_KEYS = ("consume_latency_ms", "lag_max", "rebalances", "unowned_queue_s")


def _without_causes(got: dict[str, Any]) -> dict[str, Any]:
    """duplicates_by_cause and duplicates_by_second (analysis/checkers/duplicates.py) and the consumer metrics
    (analysis/checkers/consumer_metrics.py) are beyond the oracle: the causes must add up to duplicates,
    retries must be the failed attempts, per group and in total; the rest must equal the oracle's."""
    assert sum(got.pop("duplicates_by_cause").values()) == got["duplicates"]
    _pop_samples(got)
    _pop_order_causes(got)
    assert got.pop("retries") == sum(g["retries"] for g in got["groups"].values())
    for key in CONSUMER_KEYS:
        got.pop(key)
    for group in got["groups"].values():
        by_second = group.pop("duplicates_by_second")  # the same causes over time: they add up to them
        assert {c: sum(n for _s, n in pairs) for c, pairs in by_second.items()} == \
            {c: n for c, n in group["duplicates_by_cause"].items() if n}
        assert sum(group.pop("duplicates_by_cause").values()) == group["duplicates"]
        _pop_order_causes(group)
        assert group.pop("retries") == group["consume_attempts"] - group["consumed_ok_distinct"] - group["duplicates"]
        assert len(group.pop("lag_by_second")) >= 1
        for key in CONSUMER_KEYS:
            group.pop(key)
    return got


def _pop_samples(metrics: dict[str, Any]) -> None:
    """The samples of the messages behind the counts (analysis/checkers/message_causes.py): up to 10 distinct
    display keys per cause that has any."""
    lost, dups = metrics.pop("lost_sample"), metrics.pop("duplicate_sample")
    order = metrics.pop("order_violation_sample")
    assert {c for c, n in metrics["lost_by_cause"].items() if n} == set(lost)
    assert sum(map(len, dups.values())) <= metrics["duplicates"] and (not dups) == (not metrics["duplicates"])
    assert sum(map(len, order.values())) <= (metrics["order_violations"] or 0)
    assert all(0 < len(keys) == len(set(keys)) <= 10 for sample in (lost, dups, order) for keys in sample.values())


def _pop_order_causes(metrics: dict[str, Any]) -> None:
    """order_violations_by_cause (analysis/checkers/order.py) must add up to order_violations (both null
    where order is not checked)."""
    by_cause = metrics.pop("order_violations_by_cause")
    assert (by_cause is None) == (metrics["order_violations"] is None)
    assert by_cause is None or sum(by_cause.values()) == metrics["order_violations"]


def test_empty_stream():
    expected, _ = oracle([], SUBSCRIPTIONS, PRODUCERS, BROADCASTING, ORDERLY, MEMBERS)
    got, details = ledger_results([], [])
    assert _without_causes(got) == expected
    assert got["order_violations"] == 0  # an orderly group with nothing to order is checked: 0
    assert got["groups"]["billing"]["order_violations"] is None


def test_delivery_counts_cap_and_many_duplicates():
    """A message consumed more than DELIVERY_COUNT_CAP times lands in the last histogram bin,
    and every consumption beyond the first still counts as a duplicate."""
    msg_id = msg_id_of(0, 1)
    records = [_rec(0, "p-a", PRODUCER_SENT, msg_id, "orders", -1, "broker-a", 1, "SEND_OK", 1, 0, 0),
               _rec(1, "broker-a", BROKER_STORED, msg_id, "orders", 1, 0, 0, 150, 0)]
    records += [_rec(10 + i, "c-1", CONSUMER_CONSUMED, "billing", msg_id, "orders", "broker-a", 1, 0, True, 0)
                for i in range(DELIVERY_COUNT_CAP + 3)]
    got, details = ledger_results(records, [5, len(records) - 5])
    expected, expected_details = oracle(records, SUBSCRIPTIONS, PRODUCERS, BROADCASTING, ORDERLY, MEMBERS)
    assert _without_causes(got) == expected and got["groups"]["billing"]["duplicates"] == DELIVERY_COUNT_CAP + 2
    assert details["delivery_counts"] == expected_details["delivery_counts"]
    assert details["delivery_counts"][DELIVERY_COUNT_CAP] == 1  # billing; the other units lost it (bin 0)


def test_unsubscribed_group_is_judged_the_same_whatever_the_chunking():
    a1, c1 = msg_id_of(0, 1), msg_id_of(2, 1)  # an "orders" and an "audit" message
    records = [_rec(0, "p-a", PRODUCER_SENT, a1, "orders", -1, "broker-a", 1, "SEND_OK", 1, 0, 0),
               _rec(0, "p-c", PRODUCER_SENT, c1, "audit", -1, "broker-a", 1, "SEND_OK", 1, 0, 0),
               _rec(5, "c-1", CONSUMER_CONSUMED, "billing", a1, "orders", "broker-a", 1, 0, True, 0),
               _rec(6, "c-7", CONSUMER_CONSUMED, "stranger", c1, "audit", "broker-a", 1, 0, True, 0)]
    whole, _ = ledger_results(records, [4])
    split, _ = ledger_results(records, [3, 1])
    assert whole["groups"]["stranger"] == split["groups"]["stranger"]
    assert whole["groups"]["stranger"]["lost"] == 0


LATE_US = 3 * 3_600_000_000  # three hours: past the 71.6 minutes a 4-byte time column holds


def _stretched(records: list[tuple], from_us: int) -> list[tuple]:
    """Every time at or after `from_us` moved LATE_US later, so that a run's ledger columns start
    narrow and widen part way through the stream; a send outcome moves with its born time (a send
    RT stays what it was: the ledger caps RTs at RT_CAP_US, 71.6 minutes). Re-sorted by time."""
    out = []
    for r in records:
        r = list(r)
        if r[2] in (PRODUCER_SENT, PRODUCER_SEND_FAILED):
            i = 3 + KINDS[r[2]].index("born_us")
            shift = LATE_US if r[i] >= from_us else 0
            r[0], r[i] = r[0] + shift, r[i] + shift
        elif r[0] >= from_us:
            r[0] += LATE_US
        out.append(tuple(r))
    return sorted(out, key=lambda r: r[0])  # stable


def test_times_past_71_minutes_widen_the_ledger_columns_with_the_same_results(monkeypatch):
    """The ledger keeps born and store times in 4 bytes while they fit (analysis/checkers/time_column.py):
    a stream whose times cross 2^32 µs part way equals the oracle, and every metric (consumer
    latency and lag included, which the oracle does not compute) equals that of a ledger whose
    columns are 8 bytes from the start."""
    import analysis.checkers.time_column as time_column

    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(record_streams())
    def compare(stream: tuple[list[tuple], list[int]]) -> None:
        records, chunk_sizes = stream
        records = _stretched(records, 20)
        expected, _ = oracle(records, SUBSCRIPTIONS, PRODUCERS, BROADCASTING, ORDERLY, MEMBERS)
        narrow, narrow_details = ledger_results(records, chunk_sizes)
        with monkeypatch.context() as m:
            m.setattr(time_column, "_NARROW_LIMIT", 0)  # every column widens at its first write
            wide, wide_details = ledger_results(records, chunk_sizes)
        assert narrow == wide and _samples(narrow_details) == _samples(wide_details)
        assert _without_causes(narrow) == expected

    compare()


def test_column_extraction_matches_an_itemgetter_over_the_records():
    """`_int_column`/`_column` (C loops when compiled) give what np.fromiter/list over an
    itemgetter give, and a field that is not an integer is refused, as np.fromiter refuses it."""
    from operator import itemgetter

    import numpy as np
    import pytest

    from analysis.checkers.ledger import _column, _int_column

    records = tuple((t, "n", "k", t * 7 - 3, 2**40 + t, True, None) for t in range(50))
    for c in (0, 3, 4, 5):
        got = _int_column(records, c, np.int64)
        assert got.dtype == np.int64
        assert got.tolist() == [int(r[c]) for r in records]
    assert _int_column(records, 3, np.int32).tolist() == [r[3] for r in records]
    flags = tuple((t, "n", "k", t % 3 == 0, t % 4) for t in range(20))
    for c in (3, 4):
        got = _int_column(flags, c, np.bool_)
        assert got.dtype == np.bool_ and got.tolist() == [bool(r[c]) for r in flags]
    assert _column(records, 1) == list(map(itemgetter(1), records))
    assert _int_column((), 0, np.int64).tolist() == []
    with pytest.raises(TypeError):
        _int_column(records, 6, np.int64)


def test_a_copy_a_failover_truncation_cut_is_lost_with_its_cause_which_wins_over_the_others():
    """`commit_log.destroyed` with fault `failover_truncated` (a broker rejoining as a slave cut its
    CommitLog to the epochs' consistent point): the acknowledged message whose only copy it cut is
    lost with cause `truncated_on_failover`, which takes precedence over a power loss's cause on the
    same message (whichever came first), on a retry-path copy too."""
    a, b, c, d, e = (msg_id_of(0, seq) for seq in (1, 2, 3, 4, 5))

    def sent(t: int, m: int) -> tuple:
        return _rec(t, "p-a", PRODUCER_SENT, m, "orders", -1, "broker-a", 1, "SEND_OK", 1, t, 0)

    def stored(t: int, m: int, topic: str = "orders", reconsume: int = 0) -> tuple:
        return _rec(t, "broker-a", BROKER_STORED, m, topic, 0, m & SEQ_MASK, 100 * (m & SEQ_MASK), 150, reconsume)

    def destroyed(t: int, m: int, fault: str, topic: str = "orders") -> tuple:
        return _rec(t, "broker-a", COMMIT_LOG_DESTROYED, m, topic, 0, m & SEQ_MASK, fault, 1, False)

    records = [sent(1, a), stored(1, a), destroyed(10, a, "failover_truncated"),  # the only copy, cut
               sent(2, b), stored(2, b), destroyed(5, b, "power_loss"), destroyed(20, b, "failover_truncated"),
               sent(3, c), stored(3, c), destroyed(6, c, "failover_truncated"), destroyed(21, c, "power_loss"),
               sent(4, d), stored(4, d), destroyed(7, d, "power_loss"),  # no failover: replica_not_synced
               sent(5, e), stored(5, e),  # consumed, failed, its retry copy cut by the truncation
               _rec(8, "c-1", CONSUMER_CONSUMED, "billing", e, "orders", "broker-a", 0, 5, False, 0),
               _rec(9, "c-1", CONSUMER_SENT_BACK, "billing", e, 0, True),
               stored(9, e, "%RETRY%billing", 1), destroyed(30, e, "failover_truncated", "%RETRY%billing")]
    records.sort(key=lambda r: r[0])
    m = check(records, {"billing": "orders"}, producers=[ProducerInfo("p-a", "orders")])
    assert m["lost"] == 5 and m["pending_retry"] == 0
    assert {cause: n for cause, n in m["lost_by_cause"].items() if n} == {"truncated_on_failover": 4,
                                                                          "replica_not_synced": 1}
    assert list(m["lost_by_cause"])[:4] == ["unflushed_at_power_loss", "replica_not_synced", "truncated_on_failover",
                                            "truncated_on_recovery"]
    assert m["lost_sample"]["truncated_on_failover"] == ["p-a-1", "p-a-2", "p-a-3", "p-a-5"]
    # the fact bits themselves: the failover bit beside the power bit, and the cause it selects
    ledger = Ledger([ProducerInfo("p-a", "orders")], {"billing": "orders"})
    ledger.feed(records)
    assert ledger.destroyed[b] == DESTROYED_FAILOVER | DESTROYED_POWER | GROUP_HAS_REPLICAS
    assert ledger.destroyed[a] == DESTROYED_FAILOVER | GROUP_HAS_REPLICAS
    causes = loss_causes(np.array([ledger.destroyed[b], DESTROYED_POWER | GROUP_HAS_REPLICAS]), np.array([True, False]))
    assert [LOSS_CAUSES[i] for i in causes] == ["truncated_on_failover", "replica_not_synced"]
