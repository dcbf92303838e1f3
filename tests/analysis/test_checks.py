"""Checkers over hand-written trace records (analysis/checkers/checks.py over analysis/checkers/ledger.py).

Messages are named by their display key `<producer>-<seq>` (sequence numbers start at 1, as the
workload numbers them) and recorded by their integer id, as the simulator records them.
"""

from __future__ import annotations

import math

import pytest

from analysis.checkers.checks import check, percentiles_ms
from analysis.checkers.ledger import ProducerInfo
from models.message import msg_id_of
from models.records import BROKER_LOCK_GRANTED, BROKER_STORED, CONSUMER_CONSUMED, PRODUCER_SEND_FAILED, PRODUCER_SENT
from sim.trace import KINDS, NODE_CRASHED

TOPIC = "orders"
PRODUCERS = [ProducerInfo("p", TOPIC), ProducerInfo("q", TOPIC), ProducerInfo("o", "other")]


def mid(key: str) -> int:
    """The message id of display key `<producer>-<seq>`."""
    producer, seq = key.rsplit("-", 1)
    return msg_id_of([info.name for info in PRODUCERS].index(producer), int(seq))


def record(t_us: int, node: str, kind: str, **fields) -> tuple:
    """A record tuple in the field order declared in sim.trace.KINDS (every field required)."""
    names = KINDS[kind]
    assert set(fields) == set(names), (set(fields) ^ set(names))
    return (t_us, node, kind, *(fields[n] for n in names))


def sent(t, key, status="SEND_OK", shard=-1, born=None, attempts=1, broker="broker-a", steered=0):
    producer = key.rsplit("-", 1)[0]
    topic = next(info.topic for info in PRODUCERS if info.name == producer)
    return record(t, producer, PRODUCER_SENT, msg_id=mid(key), topic=topic, shard=shard, broker=broker,
                  queue_id=0, status=status, attempts=attempts, born_us=t if born is None else born, steered=steered)


def send_failed(t, key, attempts=3, reason="timeout"):
    return record(t, key.rsplit("-", 1)[0], PRODUCER_SEND_FAILED, msg_id=mid(key), topic=TOPIC, shard=-1,
                  attempts=attempts, reason=reason, born_us=t, broker="broker-a", steered=0)


def stored(t, key, topic=TOPIC, reconsume=0):
    return record(t, "broker-a", BROKER_STORED, msg_id=mid(key), topic=topic, queue_id=0, queue_offset=0,
                  phys_offset=0, size_bytes=100, reconsume_times=reconsume)


def consumed(t, key, group="g", consumer="c", ok=True, reconsume=0):
    return record(t, consumer, CONSUMER_CONSUMED, group=group, msg_id=mid(key), topic=TOPIC, broker="broker-a",
                  queue_id=0, queue_offset=0, ok=ok, reconsume_times=reconsume)


def run_check(recs, subscriptions, **kw):
    return check(recs, subscriptions, producers=PRODUCERS, **kw)


def test_record_helper_uses_declared_field_order():
    r = sent(5, "p-2")
    assert r[:3] == (5, "p", "producer.sent")
    assert dict(zip(("t_us", "node", "kind") + KINDS[PRODUCER_SENT], r, strict=True))["status"] == "SEND_OK"


def test_clean_run():
    recs = [sent(1_000, "p-1"), stored(1_000, "p-1"), sent(2_000, "p-2"), stored(2_000, "p-2"),
            consumed(5_000, "p-1"), consumed(6_000, "p-2")]
    m = run_check(recs, {"g": TOPIC})
    assert (m["sent_ok"], m["stored"], m["consumed"], m["lost"], m["duplicates"]) == (2, 2, 2, 0, 0)
    assert m["groups"]["g"]["consumed_ok_distinct"] == 2


def test_lost_acked_but_never_consumed():
    recs = [sent(1_000, "p-1"), sent(2_000, "p-2"), sent(3_000, "p-3"), consumed(5_000, "p-2")]
    m = run_check(recs, {"g": TOPIC})
    assert m["lost"] == 2
    assert m["groups"]["g"]["lost_sample"] == ["p-1", "p-3"]


def test_lost_sample_sorted_by_sequence_number():
    recs = [sent(1_000, f"p-{i}") for i in (10, 2, 1)]
    assert run_check(recs, {"g": TOPIC})["groups"]["g"]["lost_sample"] == ["p-1", "p-2", "p-10"]


def test_not_lost_when_send_not_ok_or_failed():
    recs = [sent(1_000, "p-1", status="FLUSH_DISK_TIMEOUT"), send_failed(2_000, "p-2")]
    m = run_check(recs, {"g": TOPIC})
    assert m["lost"] == 0
    assert (m["sent_ok"], m["sent_not_ok"], m["send_failed"], m["sent_attempts"]) == (0, 1, 1, 4)


def test_failed_consumption_is_not_a_consumption_but_pending_retry():
    """A clustering group's failed consumption sends the message down the retry path: it is not
    consumed, and not lost either while it waits there (`pending_retry`)."""
    recs = [sent(1_000, "p-1"), sent(1_000, "p-2"), consumed(2_000, "p-1", ok=False)]
    m = run_check(recs, {"g": TOPIC})
    assert (m["lost"], m["pending_retry"], m["dlq"], m["consumed"]) == (1, 1, 0, 0)
    assert m["groups"]["g"]["lost_sample"] == ["p-2"]
    assert m["groups"]["g"]["consumed_ok_distinct"] == 0 and m["groups"]["g"]["consume_attempts"] == 1


def test_failed_broadcasting_consumption_is_lost():
    """BROADCASTING has no retry path: a failed consumption is dropped, the member lost it."""
    recs = [sent(1_000, "p-1"), consumed(2_000, "p-1", group="b", consumer="c1", ok=False)]
    m = run_check(recs, {"b": TOPIC}, broadcasting=["b"], members={"b": ["c1"]})
    assert (m["lost"], m["pending_retry"]) == (1, 0)


def test_dead_letter_queue_is_reported_apart():
    recs = [sent(1_000, "p-1"), sent(1_000, "p-2"), stored(1_000, "p-1"), stored(1_000, "p-2"),
            consumed(2_000, "p-1", ok=False), stored(2_100, "p-1", topic="%RETRY%g", reconsume=1),
            consumed(3_000, "p-1", ok=False, reconsume=1), stored(3_100, "p-1", topic="%DLQ%g", reconsume=2),
            consumed(2_000, "p-2", ok=False), stored(2_100, "p-2", topic="%RETRY%g", reconsume=1),
            consumed(9_000, "p-2", reconsume=1),  # retried and consumed: neither pending nor DLQ
            consumed(2_500, "p-1", group="h")]
    m = run_check(recs, {"g": TOPIC, "h": TOPIC})
    g = m["groups"]["g"]
    assert (g["lost"], g["pending_retry"], g["dlq"], g["consumed_ok_distinct"]) == (0, 0, 1, 1)
    assert m["groups"]["h"]["dlq"] == 0 and m["groups"]["h"]["lost"] == 1  # another group's DLQ
    assert (m["lost"], m["pending_retry"], m["dlq"], m["stored"]) == (1, 0, 1, 2)


def test_group_that_consumed_nothing_loses_everything():
    recs = [sent(1_000, "p-1"), sent(1_000, "p-2"), consumed(2_000, "p-1", group="g1"),
            consumed(2_000, "p-2", group="g1")]
    m = run_check(recs, {"g1": TOPIC, "g2": TOPIC})
    assert m["groups"]["g1"]["lost"] == 0 and m["groups"]["g2"]["lost"] == 2 and m["lost"] == 2


def test_other_topic_not_counted():
    recs = [sent(1_000, "o-1")]
    assert run_check(recs, {"g": TOPIC})["lost"] == 0


def test_duplicate_redelivery():
    recs = [sent(1_000, "p-1"), stored(1_000, "p-1"), consumed(2_000, "p-1"), consumed(3_000, "p-1"),
            consumed(4_000, "p-1")]
    m = run_check(recs, {"g": TOPIC})
    assert (m["duplicates"], m["duplicated_messages"]) == (2, 1)
    assert m["duplicate_causes"] == {"producer_retry": 0, "redelivery": 2}


def test_failure_then_success_is_not_a_duplicate():
    recs = [sent(1_000, "p-1"), stored(1_000, "p-1"), consumed(2_000, "p-1", ok=False),
            consumed(12_000, "p-1", reconsume=1)]
    m = run_check(recs, {"g": TOPIC})
    assert m["duplicates"] == 0 and m["lost"] == 0
    assert m["groups"]["g"]["consume_attempts"] == 2


def test_stored_twice_is_producer_retry():
    recs = [sent(5_000, "p-1", attempts=2, born=1_000), stored(1_000, "p-1"), stored(4_000, "p-1"),
            consumed(6_000, "p-1"), consumed(7_000, "p-1")]
    m = run_check(recs, {"g": TOPIC})
    assert m["duplicates"] == 1
    assert m["duplicate_causes"] == {"producer_retry": 1, "redelivery": 0}
    assert (m["stored"], m["stored_duplicates"]) == (2, 1)


def test_retry_topic_copies_do_not_count_as_stored_twice():
    recs = [sent(1_000, "p-1"), stored(1_000, "p-1"), stored(2_000, "p-1", topic="%RETRY%g", reconsume=1),
            stored(3_000, "p-1", topic="SCHEDULE_TOPIC_XXXX"),
            consumed(2_000, "p-1"), consumed(5_000, "p-1")]
    m = run_check(recs, {"g": TOPIC})
    assert m["duplicate_causes"] == {"producer_retry": 0, "redelivery": 1}
    assert m["stored"] == 1


def test_duplicates_counted_per_group():
    recs = [sent(1_000, "p-1"), consumed(2_000, "p-1", group="g1"), consumed(2_000, "p-1", group="g2")]
    m = run_check(recs, {"g1": TOPIC, "g2": TOPIC})
    assert m["duplicates"] == 0 and m["lost"] == 0


def test_broadcasting_judged_per_member():
    recs = [sent(1_000, "p-1"), sent(1_000, "p-2"),
            consumed(2_000, "p-1", group="b", consumer="c1"), consumed(2_000, "p-2", group="b", consumer="c1"),
            consumed(2_000, "p-1", group="b", consumer="c2")]
    m = run_check(recs, {"b": TOPIC}, broadcasting=["b"])
    assert m["groups"]["b/c1"]["lost"] == 0 and m["groups"]["b/c2"]["lost"] == 1
    assert m["lost"] == 1 and m["duplicates"] == 0
    # a member that consumed nothing (known from the group's members) lost everything
    m = run_check(recs, {"b": TOPIC}, broadcasting=["b"], members={"b": ["c1", "c2", "c3"]})
    assert [m["groups"][f"b/{c}"]["lost"] for c in ("c1", "c2", "c3")] == [0, 1, 2]
    assert "b" not in m["groups"] and m["lost"] == 3


def test_order_violations_orderly_group():
    recs = [sent(1_000, "p-1", shard=1), sent(1_100, "p-2", shard=1), sent(1_200, "p-3", shard=1),
            sent(1_300, "p-4", shard=2), sent(1_400, "p-5", shard=2),
            consumed(5_000, "p-1"), consumed(5_100, "p-3"), consumed(5_200, "p-2"),  # p-2 after p-3
            consumed(5_300, "p-5"), consumed(5_400, "p-4")]  # p-4 after p-5
    assert run_check(recs, {"g": TOPIC}, orderly=["g"])["order_violations"] == 2
    m = run_check(recs, {"g": TOPIC})  # not an orderly group: order is not promised, not checked
    assert m["order_violations"] is None and m["groups"]["g"]["order_violations"] is None
    assert m["order_violations_by_cause"] is None


def consumed_at(t, key, consumer="c", queue_id=0, offset=0, reconsume=0, ok=True):
    return record(t, consumer, CONSUMER_CONSUMED, group="g", msg_id=mid(key), topic=TOPIC, broker="broker-a",
                  queue_id=queue_id, queue_offset=offset, ok=ok, reconsume_times=reconsume)


def granted(t, client, how, queue_id=0):
    return record(t, "broker-a", BROKER_LOCK_GRANTED, group="g", client=client, topic=TOPIC, queue_id=queue_id, how=how)


def test_order_violation_causes_from_ground_truth():
    """Each violation is labelled by comparing the late message with the one that overtook it;
    redeliveries and failed calls do not count; messages without a sharding key are not judged."""
    sends = [sent(1_000 + i, f"p-{i}", shard=7) for i in range(1, 9)] + [sent(2_000, "q-1"), sent(2_001, "q-2")]
    recs = sends + [
        consumed_at(5_000, "p-2", queue_id=1),               # p-2 in another queue, first
        consumed_at(5_100, "p-1", queue_id=0),               # p-1 late: send_side
        consumed_at(5_200, "p-1", queue_id=0),               # a redelivery: not a violation
        consumed_at(5_300, "p-4", reconsume=1),              # p-4 from %RETRY%
        consumed_at(5_350, "p-3", ok=False),                 # a failed call: not a consumption
        consumed_at(5_400, "p-3"),                           # p-3 late: retry_path
        granted(6_000, "c1", "new"), record(7_000, "broker-a", NODE_CRASHED, power_loss=False),
        granted(8_000, "c2", "new"),                         # the restarted broker grants anew
        consumed_at(9_000, "p-6", consumer="c2", offset=6),  # c2 (start offset past p-5) overtakes
        consumed_at(9_100, "p-5", consumer="c1", offset=5),  # p-5 late: broker_lost_locks
        granted(10_000, "c1", "expired"),                    # c1 takes over an expired lock
        consumed_at(11_000, "p-8", consumer="c1", offset=8),
        consumed_at(11_100, "p-7", consumer="c2", offset=7),  # p-7 late: lock_expired
        consumed_at(12_000, "q-2"), consumed_at(12_100, "q-1"),  # no sharding key: not judged
    ]
    m = run_check(recs, {"g": TOPIC}, orderly=["g"])
    assert m["order_violations_by_cause"] == {"send_side": 1, "retry_path": 1, "broker_lost_locks": 1,
                                              "lock_expired": 1, "other": 0}
    assert m["order_violations"] == 4 == m["groups"]["g"]["order_violations"]


def test_order_judged_per_producer_and_shard():
    recs = [sent(1_000, "p-1", shard=1), sent(1_100, "p-2", shard=2),
            sent(1_000, "q-1", shard=1), sent(1_100, "q-2", shard=1),
            consumed(5_000, "p-2"), consumed(5_100, "p-1"),  # different shards: fine
            consumed(5_200, "q-2"), consumed(5_300, "q-1"),  # same producer+shard: violation
            ]
    assert run_check(recs, {"g": TOPIC}, orderly=["g"])["order_violations"] == 1


def test_order_uses_first_successful_consumption():
    recs = [sent(1_000, "p-1", shard=0), sent(1_100, "p-2", shard=0),
            consumed(5_000, "p-1", ok=False), consumed(5_100, "p-2"), consumed(6_000, "p-1"),
            consumed(7_000, "p-2")]  # redelivery of p-1 later does not matter
    assert run_check(recs, {"g": TOPIC}, orderly=["g"])["order_violations"] == 1


def test_latency_from_born_to_first_success():
    recs = [sent(3_000, "p-1", born=1_000), consumed(2_000, "p-1", ok=False), consumed(11_000, "p-1"),
            consumed(20_000, "p-1")]
    m = run_check(recs, {"g": TOPIC})
    assert m["latency_ms"]["p50"] == 10.0 and m["latency_ms"]["max"] == 10.0


def test_percentiles_nearest_rank():
    values = [i * 1000 for i in range(1, 101)]  # 1 … 100 ms
    p = percentiles_ms(values)
    assert p == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 100.0, "max": 100.0}
    assert percentiles_ms([7_000]) == {"p50": 7.0, "p90": 7.0, "p99": 7.0, "p999": 7.0, "max": 7.0}
    four = percentiles_ms([4_000, 1_000, 3_000, 2_000])  # ceil(q·n) − 1
    assert (four["p50"], four["p90"], four["p99"]) == (2.0, 4.0, 4.0)
    assert percentiles_ms([]) == {"p50": None, "p90": None, "p99": None, "p999": None, "max": None}


def test_latency_pooled_over_groups():
    recs = [sent(0, "p-1"), consumed(1_000, "p-1", group="g1"), consumed(3_000, "p-1", group="g2")]
    m = run_check(recs, {"g1": TOPIC, "g2": TOPIC})
    assert (m["latency_ms"]["p50"], m["latency_ms"]["max"]) == (1.0, 3.0)
    assert m["groups"]["g2"]["latency_ms"]["p50"] == 3.0


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_percentile_rank_formula(n):
    values = list(range(1, n + 1))
    p = percentiles_ms(values)
    assert p["p99"] == values[max(0, math.ceil(0.99 * n) - 1)] / 1000
