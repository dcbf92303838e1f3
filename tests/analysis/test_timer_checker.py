"""The timer checker (analysis/checkers/timer_checker.py) on scripted record timelines, and what the Ledger
makes of timer messages: parked in rmq_sys_wheel_timer (pending_delay, not lost, until the timer
puts them back), and a message the timer put back twice consumed twice: `timer_redelivered`."""

from __future__ import annotations

from analysis.checkers.checks import check
from analysis.checkers.ledger import ProducerInfo
from analysis.checkers.timer_checker import TimerChecker
from models.message import TIMER_TOPIC, msg_id_of
from models.records import (
    BROKER_STORED,
    COMMIT_LOG_DESTROYED,
    CONSUMER_CONSUMED,
    PRODUCER_SENT,
    TIMER_DELIVERED,
    TIMER_ENQUEUED,
)

S = 1_000_000  # µs
A, B, C, D = (msg_id_of(0, seq) for seq in (1, 2, 3, 4))
E = msg_id_of(1, 1)  # another producer's


def enqueued(t: int, msg: int, deliver_us: int) -> tuple:
    return (t, "broker-a", TIMER_ENQUEUED, msg, "orders", deliver_us, deliver_us // S * S)


def delivered(t: int, msg: int, replay: bool = False) -> tuple:
    return (t, "broker-a", TIMER_DELIVERED, msg, "orders", t // S * S - S, replay)


def results(records: list[tuple], chunk: int = 2) -> dict:
    checker = TimerChecker()
    records = sorted(records, key=lambda r: r[0])
    for start in range(0, len(records), chunk):  # fed in chunks, as the Tracer does
        checker.feed(records[start:start + chunk])
    return checker.results()


def test_no_timer_message_no_summary() -> None:
    assert results([]) == {"timer": None, "timer_delay_error_ms": None}
    other = [(0, "p", PRODUCER_SENT, A, "orders", -1, "broker-a", 0, "SEND_OK", 1, 0, 0),
             (1, "broker-a", BROKER_STORED, A, "orders", 0, 0, 0, 150, 0)]
    assert results(other) == {"timer": None, "timer_delay_error_ms": None}


def test_delivered_once_twice_and_pending_with_the_delay_error_of_the_first_delivery() -> None:
    records = [
        enqueued(0, A, 10 * S), delivered(10 * S + 250_000, A),  # 250 ms late
        enqueued(1, B, 12 * S + 500), delivered(13 * S, B),  # 999.5 ms late
        delivered(20 * S, B, replay=True),  # again after a restart: only the first one counts for the error
        enqueued(2, C, 30 * S),  # never delivered: pending
        enqueued(3, E, 5 * S), delivered(5 * S + 1, E), delivered(6 * S, E),  # twice, replay false
    ]
    out = results(records)
    assert out["timer"] == {"messages": 4, "delivered": 3, "pending": 1, "delivered_twice": 2, "replays": 1}
    # errors 0.001, 250, 999.5 ms: nearest rank over 3 samples
    assert out["timer_delay_error_ms"] == {"p50": 250.0, "p90": 999.5, "p99": 999.5, "max": 999.5, "min": 0.001}


def test_percentiles_are_nearest_rank_in_ms_with_three_decimals() -> None:
    records = []
    for seq in range(1, 101):  # errors 1.4, 2, 3, ..., 100 ms
        msg = msg_id_of(0, seq)
        records += [enqueued(seq, msg, 10 * S), delivered(10 * S + seq * 1000 + (400 if seq == 1 else 0), msg)]
    error = results(records, chunk=7)["timer_delay_error_ms"]
    assert error == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0, "min": 1.4}
    assert all(isinstance(v, float) for v in error.values())


def test_timer_messages_none_delivered_yet() -> None:
    out = results([enqueued(0, A, 10 * S), enqueued(1, B, 20 * S)])
    assert out["timer"] == {"messages": 2, "delivered": 0, "pending": 2, "delivered_twice": 0, "replays": 0}
    assert out["timer_delay_error_ms"] == {"p50": None, "p90": None, "p99": None, "max": None, "min": None}


def test_a_send_stored_twice_in_the_timer_is_one_message() -> None:
    out = results([enqueued(0, A, 10 * S), enqueued(5, A, 10 * S), delivered(10 * S, A), delivered(10 * S + 1, A)])
    assert out["timer"] == {"messages": 1, "delivered": 1, "pending": 0, "delivered_twice": 1, "replays": 0}


# --- the Ledger: timer messages parked, put back, consumed -----------------------------------------

PRODUCERS = [ProducerInfo("p", "orders")]


def sent(msg: int, attempts: int = 1) -> tuple:
    return (0, "p", PRODUCER_SENT, msg, "orders", -1, "broker-a", 0, "SEND_OK", attempts, 0, 0)


def parked(t: int, msg: int, offset: int = 0) -> tuple:
    return (t, "broker-a", BROKER_STORED, msg, TIMER_TOPIC, 0, offset, 1000 + offset, 200, 0)


def put_back(t: int, msg: int, offset: int, replay: bool = False) -> list[tuple]:
    """The timer's put into the real topic: its stored copy and its timer.delivered record."""
    return [(t, "broker-a", BROKER_STORED, msg, "orders", 0, offset, 5000 + offset, 150, 0), delivered(t, msg, replay)]


def consumed(t: int, msg: int, offset: int) -> tuple:
    return (t, "c-1", CONSUMER_CONSUMED, "billing", msg, "orders", "broker-a", 0, offset, True, 0)


def judge(records: list[tuple]) -> dict:
    return check(sorted(records, key=lambda r: r[0]), {"billing": "orders"}, PRODUCERS)


def test_a_parked_timer_message_never_delivered_is_pending_delay_not_lost() -> None:
    m = judge([sent(A), parked(1, A), sent(B), parked(2, B, 1), *put_back(10 * S, B, 0), consumed(11 * S, B, 0)])
    assert (m["lost"], m["pending_delay"], m["consumed"]) == (0, 1, 1)
    assert (m["stored"], m["stored_duplicates"]) == (1, 0)  # the timer-topic copy is not a user-topic copy


def destroyed(t: int, msg: int, topic: str = TIMER_TOPIC, offset: int = 0) -> tuple:
    return (t, "broker-a", COMMIT_LOG_DESTROYED, msg, topic, 0, offset, "power_loss", 0, False)


def test_a_parked_copy_a_fault_destroyed_is_lost_with_the_faults_cause() -> None:
    """Nothing will deliver it: lost, not pending_delay (unless a retried send parked it again,
    or the timer had already put it back: then its real-topic copy is judged)."""
    m = judge([sent(A), parked(1, A), destroyed(2, A)])
    assert (m["lost"], m["pending_delay"], m["lost_by_cause"]["unflushed_at_power_loss"]) == (1, 0, 1)
    again = judge([sent(A, attempts=2), parked(1, A), destroyed(2, A), parked(3, A, 1)])
    assert (again["lost"], again["pending_delay"]) == (0, 1)
    late = judge([sent(A), parked(1, A), *put_back(10 * S, A, 0), consumed(11 * S, A, 0), destroyed(12 * S, A)])
    assert (late["lost"], late["pending_delay"], late["consumed"]) == (0, 0, 1)
    # a destroyed copy of the real topic is that topic's loss, as for any message
    real = judge([sent(A), parked(1, A), *put_back(10 * S, A, 0), destroyed(10 * S + 5, A, "orders")])
    assert (real["lost"], real["lost_by_cause"]["unflushed_at_power_loss"]) == (1, 1)


def test_a_message_the_timer_put_back_twice_consumed_twice_is_timer_redelivered() -> None:
    records = [sent(A), parked(1, A), *put_back(10 * S, A, 0), consumed(11 * S, A, 0),
               *put_back(20 * S, A, 1, replay=True), consumed(21 * S, A, 1)]
    m = judge(records)
    assert m["duplicates"] == 1 and m["stored_duplicates"] == 1
    assert {k: v for k, v in m["duplicates_by_cause"].items() if v} == {"timer_redelivered": 1}
    assert m["duplicate_causes"] == {"producer_retry": 0, "redelivery": 1}  # not sent twice
    # the same two stored copies without the timer's second put: a retried send's
    plain = [r for r in records if r[2] != TIMER_DELIVERED or r[0] < 20 * S]
    assert {k: v for k, v in judge(plain)["duplicates_by_cause"].items() if v} == {"producer_retry": 1}


def test_a_retried_send_parked_twice_then_put_back_twice_is_producer_retry() -> None:
    records = [sent(A, attempts=2), parked(1, A), parked(2, A, 1), *put_back(10 * S, A, 0), consumed(11 * S, A, 0),
               *put_back(10 * S + 1, A, 1), consumed(12 * S, A, 1)]
    m = judge(records)
    assert {k: v for k, v in m["duplicates_by_cause"].items() if v} == {"producer_retry": 1}
    assert m["duplicate_causes"] == {"producer_retry": 1, "redelivery": 0}
