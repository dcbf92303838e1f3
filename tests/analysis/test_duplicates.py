"""Duplicate causes (analysis/checkers/duplicates.py) on scripted record timelines: one story per cause."""

from __future__ import annotations

import json

import pytest

from analysis.checkers.checks import check
from analysis.checkers.ledger import ProducerInfo
from models.message import msg_id_of
from models.records import (
    BROKER_OFFSET_BEHIND_REPLICA,
    BROKER_OFFSET_ROLLED_BACK,
    BROKER_STORED,
    CONSUMER_CONSUMED,
    CONSUMER_OFFSET_MOVED,
    CONSUMER_QUEUE_DROPPED,
    CONSUMER_QUEUE_STARTED,
    CONSUMER_SHUTDOWN,
    PRODUCER_SENT,
    TIMER_DELIVERED,
)
from sim.trace import NODE_CRASHED

MSG = msg_id_of(0, 1)
PRODUCERS = [ProducerInfo("p", "orders")]


def base(copies: int = 1) -> list[tuple]:
    recs = [(0, "p", PRODUCER_SENT, MSG, "orders", -1, "broker-a", 0, "SEND_OK", copies, 0, 0)]
    recs += [(1 + i, "broker-a", BROKER_STORED, MSG, "orders", 0, 5 + i, 100 * i, 150, 0) for i in range(copies)]
    return recs


def started(t: int, node: str, offset: int = 5) -> tuple:
    return (t, node, CONSUMER_QUEUE_STARTED, "billing", "orders", "broker-a", 0, offset)


def consumed(t: int, node: str, offset: int = 5, reconsume: int = 0) -> tuple:
    return (t, node, CONSUMER_CONSUMED, "billing", MSG, "orders", "broker-a", 0, offset, True, reconsume)


def by_cause(records: list[tuple]) -> dict[str, int]:
    m = check(sorted(records, key=lambda r: r[0]), {"billing": "orders"}, PRODUCERS,
              members={"billing": ["c-1", "c-2"]})
    assert sum(m["duplicates_by_cause"].values()) == m["duplicates"]
    return {k: v for k, v in m["duplicates_by_cause"].items() if v}


HAND_OVER = [started(5, "c-1"), consumed(10, "c-1"), started(30, "c-2"), consumed(40, "c-2")]


@pytest.mark.parametrize(("extra", "cause"), [
    ([(20, "c-1", CONSUMER_QUEUE_DROPPED, "billing", "orders", "broker-a", 0, "rebalance")], "rebalance"),
    ([], "rebalance"),  # c-1 still owns the queue when c-2 re-reads it: two owners at once
    ([(20, "c-1", NODE_CRASHED, False)], "consumer_crash"),
    ([(20, "c-1", CONSUMER_SHUTDOWN, "billing", 1), (20, "c-1", NODE_CRASHED, False)], "consumer_shutdown"),
    ([(20, "c-1", CONSUMER_OFFSET_MOVED, "billing", "broker-a", 0, 9, 5)], "offset_reset"),
    ([(20, "broker-a", BROKER_OFFSET_ROLLED_BACK, "billing", "orders", 0, 6, 3),
      (21, "c-1", CONSUMER_QUEUE_DROPPED, "billing", "orders", "broker-a", 0, "rebalance")], "broker_offset_rollback"),
])
def test_a_reread_of_the_same_copy_gets_the_mechanism_that_rolled_the_offset_back(extra, cause):
    assert by_cause(base() + HAND_OVER + extra) == {cause: 1}


def test_a_batch_ending_on_a_dropped_queue_then_reread_by_the_same_consumer_is_rebalance():
    """The orderly removal waits for the listener call (500 ms in 5.x, 1 s in 4.x): the batch is
    consumed after its queue was dropped, its offset not committed, and the same consumer, owning
    the queue again later, re-reads it."""
    recs = base() + [started(5, "c-1"), (8, "c-1", CONSUMER_QUEUE_DROPPED, "billing", "orders", "broker-a", 0,
                                         "rebalance"), consumed(10, "c-1"), started(30, "c-1"), consumed(40, "c-1")]
    assert by_cause(recs) == {"rebalance": 1}


def behind(t: int, client: str, answered: int, held: int, node: str = "broker-a-s1") -> tuple:
    return (t, node, BROKER_OFFSET_BEHIND_REPLICA, "billing", "orders", "broker-a", 0, client, answered, held)


CRASH = [(20, "c-1", NODE_CRASHED, False)]


@pytest.mark.parametrize(("extra", "cause"), [
    ([behind(25, "c-2", 3, 6)], "failover"),  # the slave answered 3, the master held 6: [3, 6) re-read
    ([behind(25, "c-2", 3, 6, node="broker-a")], "failover"),  # a master back without the slave's commits
    ([behind(25, "c-2", 3, 5)], "consumer_crash"),  # the master's offset did not cover the message
    ([behind(25, "c-2", 6, 9)], "consumer_crash"),  # the answer was above it
    ([behind(25, "c-1", 3, 6)], "consumer_crash"),  # another client's query
    ([behind(8, "c-2", 3, 6)], "consumer_crash"),  # before the first consumption
    ([behind(35, "c-2", 3, 6)], "consumer_crash"),  # after the re-reader's queue start
    ([(22, "broker-a", BROKER_OFFSET_ROLLED_BACK, "billing", "orders", 0, 6, 3), behind(25, "c-2", 3, 9)],
     "broker_offset_rollback"),  # the master's own rollback keeps its label
])
def test_a_reread_after_an_offset_answer_behind_another_replica_is_failover(extra, cause):
    assert by_cause(base() + HAND_OVER + CRASH + extra) == {cause: 1}


def test_a_rollback_that_does_not_cover_the_message_is_not_blamed():
    extra = [(20, "broker-a", BROKER_OFFSET_ROLLED_BACK, "billing", "orders", 0, 5, 3),  # rolled back over [3, 5) only
             (21, "c-1", NODE_CRASHED, False)]
    assert by_cause(base() + HAND_OVER + extra) == {"consumer_crash": 1}


def test_another_stored_copy_is_a_producer_retry():
    recs = base(copies=2) + [started(5, "c-1"), consumed(10, "c-1", 5), consumed(11, "c-1", 6)]
    assert by_cause(recs) == {"producer_retry": 1}


def test_another_copy_the_timer_put_back_is_timer_redelivered():
    """A timer message parked once in rmq_sys_wheel_timer, put back into `orders` twice (its slot read
    again after a broker restart): two stored copies, as a retried send would leave, but not one."""
    recs = base(copies=2) + [(0, "broker-a", BROKER_STORED, MSG, "rmq_sys_wheel_timer", 0, 0, 50, 200, 0),
                             (1, "broker-a", TIMER_DELIVERED, MSG, "orders", 0, False),
                             (2, "broker-a", TIMER_DELIVERED, MSG, "orders", 0, True),
                             started(5, "c-1"), consumed(10, "c-1", 5), consumed(11, "c-1", 6)]
    assert by_cause(recs) == {"timer_redelivered": 1}


def test_a_retry_copy_is_send_back():
    recs = base() + [started(5, "c-1"), consumed(10, "c-1", 5), consumed(20, "c-1", 0, reconsume=1)]
    assert by_cause(recs) == {"send_back": 1}


def test_no_duplicates_no_causes():
    assert by_cause(base() + [started(5, "c-1"), consumed(10, "c-1")]) == {}


def test_duplicates_by_second_is_sparse_and_sums_to_the_causes():
    t_dup = 2_500_000  # the re-read happens in simulated second 2
    recs = base() + [started(5, "c-1"), consumed(10, "c-1"), (20, "c-1", NODE_CRASHED, False),
                     started(30, "c-2"), consumed(t_dup, "c-2")]
    m = check(sorted(recs, key=lambda r: r[0]), {"billing": "orders"}, PRODUCERS, members={"billing": ["c-1", "c-2"]})
    g = m["groups"]["billing"]
    assert g["duplicates_by_second"] == {"consumer_crash": [[2, 1]]}
    assert all(sum(n for _s, n in pairs) == g["duplicates_by_cause"][c] for c, pairs in g["duplicates_by_second"].items())
    assert check(sorted(base() + [started(5, "c-1"), consumed(10, "c-1")], key=lambda r: r[0]), {"billing": "orders"},
                 PRODUCERS)["groups"]["billing"]["duplicates_by_second"] == {}


@pytest.mark.parametrize("seed", [1, 2])
def test_report_duplicates_over_time_match_the_summary_causes(seed, tmp_path):
    """The per-run report's 'duplicates over time by cause' holds exactly the summary's ten-way split."""
    import rmqsim
    from analysis.reports import run_data

    result = rmqsim.run("scenarios/restart_consumer.yaml", seed=seed, trace_dir=tmp_path / "trace")
    (tmp_path / "summary.json").write_text(json.dumps(result.summary))
    data = run_data.load_run(tmp_path)
    series = run_data.duplicates_by_cause(data)
    totals = {c: int(v.sum()) for c, v in series.items()}
    assert totals == {c: n for c, n in result.summary["duplicates_by_cause"].items() if n}
    assert sum(totals.values()) == result.summary["duplicates"] > 0
    assert all(len(v) == int(-(-result.summary["sim_time_ms"] // 1000)) + 1 for v in series.values())
