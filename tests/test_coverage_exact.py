"""Each coverage point counts the event its name says, exactly (models/coverage_points.py).

tests/test_coverage_points.py checks that every point is reached (a count of at least 1); a point
that counts the wrong event — a neighbouring branch, every attempt instead of every refusal, the
first election as well as the later ones — passes that. Here a small run makes a point's event
happen exactly N times and the summary's count must be N, where N is known:
- by design: the run is built so that the event happens a known number of times (two power
  losses; three failures a message with maxReconsumeTimes 2; a reset of eight queues; one message
  a held pull), or
- from a trace record the model writes for that very event, independently of the counter (a
  `broker.busy` per SYSTEM_BUSY answer, a `txn.discarded` per discarded half, a producer's send
  status, …), with no other source of that record in the run.
N is at least 2 wherever the event can be made to repeat. Points a run must not reach (a process
crash is not a power loss) are checked at 0. The POP and retention points are counted exactly in
tests/test_pop_revive_dlq.py and tests/test_retention_thresholds.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

import models.records as rec
import rmqsim
from models.protocol import SYSTEM_ERROR
from rmqsim.scenario.spec import from_data
from sim.trace import field_index
from tests.conftest import ROOT

# a push consumer whose listener always fails (maxReconsumeTimes 2): each message is consumed three
# times — reconsumeTimes 0 and 1 are sent back (delay levels 3 and 4: 10 s, 30 s), 2 goes to the DLQ
PUSH_FAILURES = {
    "name": "cov_push_failures", "seed": 1, "duration_ms": "10s", "settle_ms": "60s",
    "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 2}]},
    "producers": [{"name": "p", "topic": "orders", "rate_per_s": 1, "arrival": "constant", "start_ms": "5s",
                   "stop_ms": "8500ms"}],
    "consumers": [{"name": "c", "group": "billing", "topic": "orders", "failure_probability": 0.999999,
                   "client": {"max_reconsume_times": 2}}],
    "expect": {},
}
# one queue, one fast consumer subscribed to tag A, a message every 2 s tagged A or B, each 0.3 s or more
# from the hold service's 5 s scans: an A arrives while the queue's pull is held and wakes it
# (notifyMessageArriving, the tags code matched); a B does not, the next scan finds it and runs the
# pull again — that is not a wake by arrival
HELD_PULLS = {
    "name": "cov_held_pulls", "seed": 1, "duration_ms": "40s", "settle_ms": "1s",
    "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 1}]},
    "producers": [{"name": "p", "topic": "orders", "rate_per_s": 0.5, "arrival": "constant", "start_ms": "5300ms",
                   "stop_ms": "36s", "tags": ["A", "B"]}],
    "consumers": [{"name": "c", "group": "billing", "topic": "orders", "tags": ["A"]}],
}

# run id → (bundled scenario name or an inline scenario, seed, overrides)
RUNS: dict[str, tuple[str | dict, int, tuple[str, ...]]] = {
    "push_failures": (PUSH_FAILURES, 1, ()),
    "held_pulls": (HELD_PULLS, 1, ()),
    # two power losses of an ASYNC_FLUSH broker under load, and a process crash of the other broker
    "power_loss_twice": ("power_loss_async_flush", 1, (
        "faults=[{at_ms: 10s, kind: power_loss, node: broker-a, duration_ms: 3s}, "
        "{at_ms: 20s, kind: power_loss, node: broker-a, duration_ms: 3s}, "
        "{at_ms: 12s, kind: process_crash, node: broker-b, duration_ms: 3s}]",
        "duration_ms=30s", "consumers[0].start_ms=5s", "expect={}")),
    # two process crashes of a transientStorePoolEnable broker between commits
    "tsp_crash_twice": ("transient_store_pool_crash", 1, (
        "faults=[{at_ms: 10100ms, kind: process_crash, node: broker-a, duration_ms: 3s}, "
        "{at_ms: 20100ms, kind: process_crash, node: broker-a, duration_ms: 3s}]",
        "duration_ms=30s", "producers[0].rate_per_s=200", "expect={}")),
    "broker_busy": ("broker_busy", 1, ("duration_ms=30s", "producers[0].rate_per_s=300")),
    "fsync_stall": ("fsync_stall_sync_flush", 1, ("duration_ms=25s", "settle_ms=10s")),
    "reset": ("reset_offset_by_time", 1, ()),
    "txn_producers_down": ("txn_producers_down", 1, ()),
    "txn_unknown": ("txn_unknown_answers", 1, ()),
    "orderly_paused": ("orderly_broker_failure", 3, (
        "duration_ms=160s", "producers[0].rate_per_s=50",
        "faults=[{at_ms: 10s, kind: pause, node: c-1, duration_ms: 130s}]")),
    "sync_master_4x": ("power_loss_sync_master", 1, ("version=4.x", "producers[0].rate_per_s=100")),
    "min_in_sync": ("controller_master_power_loss", 1, (
        "cluster.brokers[0].store.min_in_sync_replicas=3",
        "faults=[{at_ms: 20s, kind: process_crash, node: broker-a-s1, duration_ms: 10s}]")),
    "controller_failover": ("controller_master_power_loss", 1, ()),
}


@functools.cache
def run(run_id: str) -> rmqsim.RunResult:
    source, seed, overrides = RUNS[run_id]
    if isinstance(source, dict):
        return rmqsim.run(from_data(source, run_id), seed=seed, keep_records=True)
    return rmqsim.run(ROOT / "scenarios" / f"{source}.yaml", seed=seed, overrides=list(overrides), keep_records=True)


def kind(r: rmqsim.RunResult, name: str) -> list[tuple]:
    return [x for x in r.records if x[2] == name]


def where(name: str, field: str, test: Callable[[object], bool]) -> Callable[[rmqsim.RunResult], int]:
    """N: the run's records of kind `name` whose `field` passes `test`."""
    i = field_index(name, field)
    return lambda r: sum(1 for x in kind(r, name) if test(x[i]))


def count(name: str) -> Callable[[rmqsim.RunResult], int]:
    return lambda r: len(kind(r, name))


def status(value: str) -> Callable[[rmqsim.RunResult], int]:
    return where(rec.PRODUCER_SENT, "status", lambda s: s == value)


def first_consumptions(r: rmqsim.RunResult) -> int:
    """Messages consumed at reconsumeTimes 0 (each message once)."""
    return len({x[field_index(rec.CONSUMER_CONSUMED, "msg_id")] for x in kind(r, rec.CONSUMER_CONSUMED)
                if x[field_index(rec.CONSUMER_CONSUMED, "reconsume_times")] == 0})


def times(k: int, n: Callable[[rmqsim.RunResult], int]) -> Callable[[rmqsim.RunResult], int]:
    return lambda r: k * n(r)


def constant(n: int) -> Callable[[rmqsim.RunResult], int]:
    return lambda _r: n


def new_masters(r: rmqsim.RunResult) -> int:
    """Elections of another broker than the group's previous master (not the group's first)."""
    m, old = field_index(rec.CONTROLLER_ELECTED, "master"), field_index(rec.CONTROLLER_ELECTED, "old_master")
    return sum(1 for x in kind(r, rec.CONTROLLER_ELECTED) if x[old] and x[m] != x[old])


# (run, point, N, the least N the run must reach)
EXACT: list[tuple[str, str, Callable[[rmqsim.RunResult], int], int]] = [
    # design: three listener calls a message, two sent back to delay levels, one to the DLQ
    ("push_failures", "consume_failure_sent_back", times(3, first_consumptions), 6),
    ("push_failures", "consume_failure_sent_back", count(rec.CONSUMER_SENT_BACK), 6),
    ("push_failures", "delay_level_delivered", times(2, first_consumptions), 4),
    ("push_failures", "delay_level_delivered", count(rec.SCHEDULE_DELIVERED), 4),
    ("push_failures", "dlq_by_send_back", first_consumptions, 2),
    ("push_failures", "dlq_by_send_back", where(rec.BROKER_STORED, "topic", lambda t: t == "%DLQ%billing"), 2),
    ("push_failures", "dlq_by_retry_send", constant(0), 0),
    ("push_failures", "send_back_resent_by_inner_producer", constant(0), 0),
    ("push_failures", "send_back_failed_local_retry", constant(0), 0),
    # design: every A message wakes the queue's held pull (each is consumed); the B messages, found by scans, do not
    ("held_pulls", "pull_held_woken_by_arrival", count(rec.CONSUMER_CONSUMED), 4),
    # design: two power losses, each with an unflushed tail; a process crash keeps the page cache
    ("power_loss_twice", "power_loss_unflushed_tail", constant(2), 2),
    ("power_loss_twice", "crash_write_buffer_lost", constant(0), 0),
    ("power_loss_twice", "queue_offset_reused", count(rec.OFFSET_REUSED), 2),
    ("power_loss_twice", "broker_offset_rolled_back", count(rec.BROKER_OFFSET_ROLLED_BACK), 2),
    ("power_loss_twice", "offset_illegal_corrected", count(rec.CONSUMER_OFFSET_MOVED), 2),
    # design: two crashes with uncommitted bytes in the write buffer; neither is a power loss
    ("tsp_crash_twice", "crash_write_buffer_lost", constant(2), 2),
    ("tsp_crash_twice", "power_loss_unflushed_tail", constant(0), 0),
    ("tsp_crash_twice", "queue_offset_reused", count(rec.OFFSET_REUSED), 2),
    ("broker_busy", "broker_busy_rejected", count(rec.BROKER_BUSY), 2),
    ("fsync_stall", "flush_disk_timeout", status("FLUSH_DISK_TIMEOUT"), 2),
    # design: a server-side reset of the group's 2 brokers × 4 queues, each taken by one pull
    ("reset", "server_side_reset_taken", constant(8), 8),
    ("reset", "server_side_reset_taken", lambda r: sum(x[field_index(rec.ADMIN_OFFSET_RESET, "queues")]
                                                       for x in kind(r, rec.ADMIN_OFFSET_RESET)), 8),
    ("reset", "offset_illegal_corrected", count(rec.CONSUMER_OFFSET_MOVED), 8),
    ("txn_producers_down", "txn_check_max_reached", count(rec.TXN_DISCARDED), 2),
    ("txn_producers_down", "txn_check_no_producer", where(rec.TXN_CHECKED, "producer", lambda p: p == ""), 2),
    ("txn_unknown", "txn_check_answered_unknow", where(rec.TXN_CHECK_ANSWERED, "state", lambda s: s == "UNKNOW"), 2),
    ("txn_unknown", "txn_check_max_reached", count(rec.TXN_DISCARDED), 2),
    ("txn_unknown", "txn_check_no_producer", where(rec.TXN_CHECKED, "producer", lambda p: p == ""), 0),
    ("txn_unknown", "txn_check_answered_unknow", lambda r: len(kind(r, rec.TXN_CHECKED)) - sum(
        1 for x in kind(r, rec.TXN_CHECK_ANSWERED) if x[field_index(rec.TXN_CHECK_ANSWERED, "state")] != "UNKNOW"), 2),
    ("orderly_paused", "orderly_lock_refused", count(rec.BROKER_LOCK_REFUSED), 2),
    ("orderly_paused", "orderly_lock_lost", count(rec.CONSUMER_LOCK_LOST), 2),
    ("sync_master_4x", "slave_not_available", status("SLAVE_NOT_AVAILABLE"), 2),
    ("min_in_sync", "in_sync_replicas_not_enough",
     where(rec.BROKER_SEND_REJECTED, "code", lambda c: c == SYSTEM_ERROR), 2),
    # one power loss of the master: one new master (the group's first election is not one)
    ("controller_failover", "controller_elected_new_master", new_masters, 1),
    ("controller_failover", "controller_elected_new_master", constant(1), 1),
]


@pytest.mark.parametrize(("run_id", "point", "expected", "least"), EXACT,
                         ids=[f"{r}-{p}-{i}" for i, (r, p, _e, _l) in enumerate(EXACT)])
def test_the_point_counts_exactly_its_events(run_id: str, point: str, expected, least: int) -> None:
    r = run(run_id)
    n = expected(r)
    assert n >= least, f"{run_id}: the run no longer makes {point}'s event happen {least}+ times (N = {n})"
    assert r.summary["coverage"][point] == n, (run_id, point, r.summary["coverage"][point], n)


def test_every_run_of_the_table_is_used() -> None:
    assert {r for r, *_ in EXACT} == set(RUNS)
