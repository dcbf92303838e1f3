"""POP: reconsumeTimes + 1 on each revive, and the dead-letter queue at the limit (5.3.3).

PopReviveService.reviveRetry writes a popped message whose invisible time passed un-acked into the
group's POP retry topic (`%RETRY%<group>_<topic>`) with `reconsumeTimes + 1`. The proxy's receive
filter (PopMessageResultFilterImpl.filterMessage) sends a message whose reconsumeTimes is at least
`maxAttempts` — GrpcClientSettingsManager: the group's `retryMaxTimes` (16) + 1 = 17 — to
`%DLQ%<group>` and acks it instead of handing it out. So a message nobody ever acks in time is
delivered 17 times (reconsumeTimes 0, 1, …, 16), revived 17 times (the copies 1 … 17), and the
copy with reconsumeTimes 17 goes to the DLQ, once, and is never revived again.

Two SimpleConsumer groups on a small topic (three messages, one a second, invisible time 10 s,
one message a receive): one whose listener takes 11 s (each ack reaches the proxy after the
handle's invisible time: refused, INVALID_RECEIPT_HANDLE) and one whose listener fails (the
message is left un-acked). Counts come from the trace (`consumer.consumed`, `pop.revived`,
`broker.stored`), and the coverage counts must equal them exactly.
"""

from __future__ import annotations

import functools

import pytest

import rmqsim
from rmqsim.scenario.spec import from_data
from sim.trace import field_index

S = 1_000_000
MAX_ATTEMPTS = 17  # retryMaxTimes 16 + 1 (GrpcClientSettingsManager); the DLQ copy's reconsumeTimes
INVISIBLE_US = 10 * S
GROUP, TOPIC = "billing", "orders"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"  # KeyBuilder.buildPopRetryTopic (v1 name)
DLQ_TOPIC = f"%DLQ%{GROUP}"


def scenario(listener: str) -> dict:
    consumer: dict = {"name": "c", "group": GROUP, "topic": TOPIC,
                      "pop": {"client": "simple", "invisible_duration_ms": "10s", "threads": 3, "max_message_num": 1}}
    if listener == "slow":
        consumer["consume_time_ms"] = 11_000
    else:  # the listener fails (failure_probability must stay below 1: a success is checked absent)
        consumer.update(consume_time_ms=1, failure_probability=0.999999)
    return {"name": f"pop_revive_dlq_{listener}", "seed": 1, "duration_ms": "300s", "settle_ms": "auto",
            "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": TOPIC, "queues": 2}]},
            "producers": [{"name": "p", "topic": TOPIC, "rate_per_s": 1, "arrival": "constant", "start_ms": "1s",
                           "stop_ms": "3500ms"}],
            "consumers": [consumer], "expect": {}}


@functools.cache
def run(listener: str) -> rmqsim.RunResult:
    return rmqsim.run(from_data(scenario(listener), f"pop revive dlq {listener}"), seed=1, keep_records=True,
                      detail=True)


def kind(r: rmqsim.RunResult, name: str) -> list[tuple]:
    return [x for x in r.records if x[2] == name]


def acked_sends(r: rmqsim.RunResult) -> list[int]:
    mid, st = field_index("producer.sent", "msg_id"), field_index("producer.sent", "status")
    return [x[mid] for x in kind(r, "producer.sent") if x[st] == "SEND_OK"]


def per_message(rows: list[tuple], kind_name: str, *fields: str) -> dict[int, list[tuple]]:
    """msg id → the rows' (time, *fields), in time order."""
    mid = field_index(kind_name, "msg_id")
    idx = [field_index(kind_name, f) for f in fields]
    out: dict[int, list[tuple]] = {}
    for x in rows:
        out.setdefault(x[mid], []).append((x[0], *(x[i] for i in idx)))
    return out


LISTENERS = ["slow", "failing"]


@pytest.mark.parametrize("listener", LISTENERS)
def test_each_message_is_delivered_with_reconsume_times_0_to_16(listener: str) -> None:
    r = run(listener)
    msgs = acked_sends(r)
    assert len(msgs) >= 2
    consumed = per_message(kind(r, "consumer.consumed"), "consumer.consumed", "reconsume_times", "ok", "topic")
    assert set(consumed) == set(msgs)
    for m in msgs:
        assert [c[1] for c in consumed[m]] == list(range(MAX_ATTEMPTS)), (m, consumed[m])
        assert all(c[3] == TOPIC for c in consumed[m]), "the user topic, whichever copy"
    ok = [c for rows in consumed.values() for c in rows if c[2]]
    assert (len(ok) == len(msgs) * MAX_ATTEMPTS) if listener == "slow" else not ok


@pytest.mark.parametrize("listener", LISTENERS)
def test_each_revive_adds_one_to_the_revived_copys_reconsume_times(listener: str) -> None:
    r = run(listener)
    msgs = acked_sends(r)
    revived = per_message(kind(r, "pop.revived"), "pop.revived", "reconsume_times", "topic", "from_topic", "replay")
    popped = per_message(kind(r, "pop.received"), "pop.received", "topic", "pop_time_us", "invisible_us")
    stored = per_message([x for x in kind(r, "broker.stored") if x[1] == "broker-a"], "broker.stored", "topic",
                         "reconsume_times")
    for m in msgs:
        rev = revived[m]
        assert [x[1] for x in rev] == list(range(1, MAX_ATTEMPTS + 1)), (m, rev)
        assert [x[3] for x in rev] == [TOPIC] + [RETRY_TOPIC] * (MAX_ATTEMPTS - 1), "revived from the copy popped"
        assert all(x[2] == RETRY_TOPIC and not x[4] for x in rev)
        # the k-th revive follows the k-th pop's invisible time, and the (k+1)-th pop takes its copy
        assert len(popped[m]) == MAX_ATTEMPTS
        for k, x in enumerate(rev):
            assert x[0] >= popped[m][k][2] + popped[m][k][3] == popped[m][k][2] + INVISIBLE_US
            if k + 1 < MAX_ATTEMPTS:
                assert popped[m][k + 1][1] == RETRY_TOPIC and popped[m][k + 1][0] > x[0]
        # the stored copies: the original (0), each revived copy (1..17), the DLQ copy (17)
        assert [(t, n) for _, t, n in stored[m]] == [(TOPIC, 0)] + [(RETRY_TOPIC, k) for k in range(1, MAX_ATTEMPTS + 1)] \
            + [(DLQ_TOPIC, MAX_ATTEMPTS)]


@pytest.mark.parametrize("listener", LISTENERS)
def test_the_copy_at_reconsume_times_17_goes_to_the_dlq_once_and_is_never_revived(listener: str) -> None:
    r = run(listener)
    msgs = acked_sends(r)
    stored = per_message([x for x in kind(r, "broker.stored") if x[1] == "broker-a"], "broker.stored", "topic",
                         "reconsume_times")
    dlq = {m: [x for x in rows if x[1] == DLQ_TOPIC] for m, rows in stored.items()}
    assert all(len(dlq[m]) == 1 and dlq[m][0][2] == MAX_ATTEMPTS for m in msgs), dlq
    assert sum(len(v) for v in dlq.values()) == len(msgs)
    last_revive = {m: rows[-1][0] for m, rows in per_message(kind(r, "pop.revived"), "pop.revived").items()}
    assert all(dlq[m][0][0] > last_revive[m] for m in msgs), "the DLQ copy comes from the last revived copy"
    consumed = per_message(kind(r, "consumer.consumed"), "consumer.consumed", "reconsume_times")
    assert all(max(c[1] for c in consumed[m]) == MAX_ATTEMPTS - 1 for m in msgs), "never handed out at 17"
    assert r.summary["quiescence"]["reached"] is True, "acked at the DLQ: nothing left to revive"


@pytest.mark.parametrize("listener", LISTENERS)
def test_the_coverage_counts_each_revive_and_each_refused_ack_exactly(listener: str) -> None:
    r = run(listener)
    msgs = acked_sends(r)
    cov = r.summary["coverage"]
    assert cov["pop_revived"] == len(kind(r, "pop.revived")) == len(msgs) * MAX_ATTEMPTS
    late = len(kind(r, "pop.ack_late"))
    if listener == "slow":  # every delivery's ack comes after its handle's invisible time: the proxy refuses it
        assert cov["pop_ack_expired_handle"] == late == len(msgs) * MAX_ATTEMPTS
    else:  # a failed message is never acked: nothing to refuse
        assert cov["pop_ack_expired_handle"] == late == 0
    assert cov["pop_ack_after_revive"] == 0 and cov["pop_order_queue_blocked"] == 0
