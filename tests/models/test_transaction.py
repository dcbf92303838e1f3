"""Transactional messages, component grain: the protocol's timeline for one message, op batching,
the check round's counters, and the atomicity checker on hand-written records."""

from __future__ import annotations

from pathlib import Path

import pytest

import rmqsim
from analysis.checkers.ledger import Ledger, ProducerInfo
from analysis.checkers.txn_checker import TxnLedger
from models.broker.transaction_check import _calculate_op_offset
from models.broker.transactional_message_service import TransactionalOpBatchService
from models.message import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, msg_id_of
from models.records import (
    BROKER_STORED,
    CONSUMER_CONSUMED,
    PRODUCER_SENT,
    TXN_CHECKED,
    TXN_DISCARDED,
    TXN_ENDED,
    TXN_HALF_LOST,
    TXN_LOCAL_DONE,
)
from rmqsim.scenario.spec import from_data
from sim.coverage import new_counter

ROOT = Path(__file__).resolve().parents[2]


def _one_producer(**txn) -> dict:
    return {"name": "t", "duration_ms": "3s", "settle_ms": "8s",
            "cluster": {"topics": [{"name": "orders", "queues": 2}]},
            "producers": [{"name": "p", "group": "tx", "topic": "orders", "rate_per_s": 5, "arrival": "constant",
                           "transaction": {"local_transaction_ms": 100, "commit_probability": 1.0, **txn}}],
            "consumers": [{"name": "c", "group": "g", "topic": "orders"}]}


def _records(data: dict, seed: int = 1) -> list[tuple]:
    return rmqsim.run(from_data(data), seed=seed, keep_records=True).records


def test_commit_timeline_half_then_real_then_op() -> None:
    """The half is stored under the half topic, queue 0; the real message only after the local
    transaction (100 ms) and the oneway COMMIT; consumption after that; the op record within
    two transactionOpBatchIntervals (3 s) of the commit: the service wakes every 3 s and writes a
    queue's buffer only once 3 s have passed since the queue's last write (or its creation)."""
    records = _records(_one_producer())
    first = msg_id_of(0, 1)
    half = [r for r in records if r[2] == BROKER_STORED and r[3] == first and r[4] == RMQ_SYS_TRANS_HALF_TOPIC]
    real = [r for r in records if r[2] == BROKER_STORED and r[3] == first and r[4] == "orders"]
    done = [r for r in records if r[2] == TXN_LOCAL_DONE and r[3] == first]
    ended = [r for r in records if r[2] == TXN_ENDED and r[3] == first]
    consumed = [r for r in records if r[2] == CONSUMER_CONSUMED and r[4] == first]
    assert len(half) == 1 and half[0][5] == 0  # queue 0
    assert len(done) == 1 and done[0][4:] == ("COMMIT", "COMMIT_MESSAGE")
    assert done[0][0] - half[0][0] >= 100_000  # the local transaction ran after the half was stored
    assert len(ended) == 1 and ended[0][4:] == ("COMMIT", False, 0)
    assert len(real) == 1 and ended[0][0] == real[0][0] and real[0][0] > done[0][0]
    assert consumed and consumed[0][0] > real[0][0]
    ops = [r for r in records if r[2] == BROKER_STORED and r[4] == RMQ_SYS_TRANS_OP_HALF_TOPIC]
    assert ops and 3_000_000 <= ops[0][0] - 1_100_000 and 0 < ops[0][0] - real[0][0] <= 6_000_000
    assert not [r for r in records if r[2] == TXN_CHECKED]  # resolved long before transactionTimeOut


def test_rollback_writes_no_real_message_and_is_never_consumed() -> None:
    records = _records(_one_producer(commit_probability=0.0))
    assert [r for r in records if r[2] == TXN_ENDED and r[4] == "ROLLBACK" and r[6] == 0]
    assert not [r for r in records if r[2] == BROKER_STORED and r[4] == "orders"]
    assert not [r for r in records if r[2] == CONSUMER_CONSUMED]


def test_unknow_end_is_ignored_and_the_check_resolves_it() -> None:
    """executeLocalTransaction returns UNKNOW: the broker does nothing with the end, and the first
    check round 30 s after broker start (halves > 6 s old) asks; the log answers COMMIT."""
    data = _one_producer(unknow_probability=1.0)
    data["settle_ms"] = "40s"
    records = _records(data)
    first = msg_id_of(0, 1)
    checks = [r for r in records if r[2] == TXN_CHECKED and r[3] == first]
    ended = [r for r in records if r[2] == TXN_ENDED and r[3] == first]
    assert len(checks) == 1 and checks[0][4] == 1 and checks[0][5] == "p"
    assert 30_000_000 <= checks[0][0] <= 32_000_000
    assert len(ended) == 1 and ended[0][4:] == ("COMMIT", True, 0)


class _Timer:
    def __init__(self, node, delay, fn):
        self.cancelled = False
        node.pending.append((node.env._now + delay, self, fn))

    def cancel(self):
        self.cancelled = True


class _Node:
    """Just enough of sim.node.Node for the op batch service: a clock and timers."""

    def __init__(self):
        self.env = type("E", (), {"_now": 0, "coverage": new_counter()})()
        self.pending, self.crash_hooks, self.start_hooks = [], [], []

    def timer(self, delay, fn):
        return _Timer(self, delay, fn)

    def on_crash(self, hook):
        self.crash_hooks.append(hook)

    def on_start(self, hook):
        self.start_hooks.append(hook)

    def advance(self, to_us):
        while True:
            due = sorted((t, i) for i, (t, timer, _f) in enumerate(self.pending) if not timer.cancelled and t <= to_us)
            if not due:
                break
            t, i = due[0]
            _t, timer, fn = self.pending.pop(i)
            self.env._now = t
            fn()
        self.env._now = to_us


class _Bridge:
    def __init__(self, node):
        self.node, self.ops = node, []

    def write_op(self, queue_id, body):
        self.ops.append((self.node.env._now, queue_id, body))


def _op_service(batched=True):
    node = _Node()
    bridge = _Bridge(node)
    cfg = type("C", (), {"transaction_op_batch_interval_ms": 3000, "transaction_op_msg_max_size_bytes": 4096})()
    service = TransactionalOpBatchService(node, bridge, cfg, batched)
    for hook in node.start_hooks:
        hook()
    return node, bridge, service


def test_op_batch_waits_for_the_interval_then_writes_one_op_message() -> None:
    node, bridge, service = _op_service()
    node.advance(3_500_000)  # first wake-up at 3 s: nothing buffered
    for offset in (7, 8, 9):
        service.delete_prepare_message(0, offset)
    node.advance(8_999_999)
    assert bridge.ops == []  # at 6 s the buffer (created at 3.5 s) is only 2.5 s old: skipped
    node.advance(9_000_000)
    assert bridge.ops == [(9_000_000, 0, "7,8,9,")]  # the next wake-up, 3 s later


def test_op_batch_over_size_wakes_the_service_at_once_and_a_crash_loses_the_buffer() -> None:
    node, bridge, service = _op_service()
    node.advance(1_000)
    for offset in range(1000, 2000):  # 5 bytes each: over 4096 after 820
        service.delete_prepare_message(0, offset)
    node.advance(2_000)
    assert bridge.ops and bridge.ops[0][0] == 1_000 and len(bridge.ops[0][2]) >= 4096
    service.delete_prepare_message(0, 5)
    for hook in node.crash_hooks:
        hook()
    assert service.delete_context == {}  # buffered op records die with the broker


def test_4x_writes_each_op_at_once() -> None:
    node, bridge, service = _op_service(batched=False)
    service.delete_prepare_message(0, 3)
    assert bridge.ops == [(0, 0, "3,")]


def test_op_offset_advances_over_the_contiguous_done_run() -> None:
    assert _calculate_op_offset([5, 3, 4, 7], 3) == 6
    assert _calculate_op_offset([4], 3) == 3


def _ledgers():
    producers = [ProducerInfo("p", "orders", True)]
    return Ledger(producers, {"g": "orders"}), TxnLedger(producers)


def _sent(seq, t=0):
    return (t, "p", PRODUCER_SENT, msg_id_of(0, seq), "orders", -1, "broker-a", 0, "SEND_OK", 1, t, 0)


def _half(seq, t=1):
    return (t, "broker-a", BROKER_STORED, msg_id_of(0, seq), RMQ_SYS_TRANS_HALF_TOPIC, 0, seq, 0, 200, 0)


def test_checker_classifies_each_message_with_its_cause() -> None:
    """1 committed+consumed; 2 rolled back, hidden; 3 committed, discarded; 4 committed, half lost;
    5 never decided (crash), yet committed by a check answer and consumed: rolled_back_visible;
    6 committed, still unresolved: pending; 7 committed twice."""
    ledger, txn = _ledgers()
    m = [msg_id_of(0, s) for s in range(8)]
    records = [r for s in range(1, 8) for r in (_sent(s), _half(s))]
    records += [(5, "p", TXN_LOCAL_DONE, m[s], "COMMIT", "COMMIT_MESSAGE") for s in (1, 3, 4, 6, 7)]
    records += [(5, "p", TXN_LOCAL_DONE, m[2], "ROLLBACK", "ROLLBACK_MESSAGE")]
    records += [(9, "broker-a", TXN_ENDED, m[1], "COMMIT", False, 0), (9, "broker-a", TXN_ENDED, m[2], "ROLLBACK", False, 0),
                (9, "broker-a", TXN_ENDED, m[7], "COMMIT", False, 0), (40, "broker-a", TXN_ENDED, m[7], "COMMIT", True, 0),
                (30, "broker-a", TXN_CHECKED, m[3], 15, ""), (60, "broker-a", TXN_DISCARDED, m[3], 15),
                (20, "broker-a", TXN_HALF_LOST, m[4]), (30, "broker-a", TXN_CHECKED, m[5], 1, "p"),
                (31, "broker-a", TXN_ENDED, m[5], "COMMIT", True, 0)]
    records += [(50, "c", CONSUMER_CONSUMED, "g", m[s], "orders", "broker-a", 0, s, True, 0) for s in (1, 5, 7, 7)]
    ledger.feed(records)
    txn.feed(records)
    out = txn.results(ledger)
    t = out["txn"]
    assert (t["transactions"], t["committed_visible"], t["rolled_back_hidden"], t["pending"]) == (7, 2, 1, 1)
    assert t["committed_lost_causes"] == {"real_message_lost": 0, "rolled_back": 0, "discarded": 1, "half_lost": 1}
    assert t["rolled_back_visible_causes"] == {"commit_by_check": 1, "commit_by_producer": 0}
    assert out["txn_violations"] == 3 and t["discarded"] == 1 and t["double_commits"] == 1
    assert t["checks_max"] == 1 and t["checks"] == 2
    assert t["resolution_ms_max"] == pytest.approx(0.06)  # the discard at 60 µs, born at 0


def test_checker_is_null_without_a_transactional_producer() -> None:
    producers = [ProducerInfo("p", "orders")]
    assert TxnLedger(producers).results(Ledger(producers, {"g": "orders"})) == {"txn": None, "txn_violations": None}
