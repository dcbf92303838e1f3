"""Orderly consumption, component grain: the broker's RebalanceLockManager on a timeline (grant,
refusal, renewal, 60 s expiry, locks lost with the process), and an orderly consumer's timeline
(lock before the first pull, lockAll 1 s after start then every 20 s, a failing message suspending
its queue for suspendCurrentQueueTimeMillis, in place, never through the retry topic)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import rmqsim
from models.broker.rebalance_lock_manager import RebalanceLockManager
from models.message import MessageQueue
from models.protocol import LockBatchMQ, LockBatchResponse
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

S = 1_000_000
MQ = MessageQueue("orders", "broker-a", 0)


def _lock_world() -> tuple[SimEnv, Node, dict[str, Node]]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env, keep=True)
    net = Network(env, Constant(value=1.0))  # 1 ms one way
    broker = Node(env, "broker-a")
    RebalanceLockManager(broker)
    clients = {name: Node(env, name) for name in ("c1", "c2")}
    for node in (broker, *clients.values()):
        net.add_node(node)
        node.start()
    return env, broker, clients


def test_broker_lock_grant_refuse_renew_expire_and_loss_on_crash() -> None:
    env, broker, clients = _lock_world()
    answers: list[tuple[int, str, bool]] = []

    def ask(at_s: float, client: str) -> None:
        def go() -> None:
            clients[client].rpc("broker-a", LockBatchMQ("g", client, (MQ,)), S, lambda r: answers.append(
                (env.now, client, isinstance(r, LockBatchResponse) and MQ in r.locked)))
        env.call_later(int(at_s * S), go)

    ask(0, "c1")       # arrives 0.001: new
    ask(30, "c2")      # held by c1 (29 s old): refused
    ask(40, "c1")      # renewed at 40.001
    ask(99.9, "c2")    # 59.9 s after the renewal: refused
    ask(100.1, "c2")   # 60.1 s: c1's lock expired, taken over
    env.call_later(110 * S, broker.crash)
    env.call_later(111 * S, broker.restart)
    ask(120, "c1")     # c2's lock died with the process: new
    env.run(until=130 * S)
    assert answers == [(2_000, "c1", True), (30_002_000, "c2", False), (40_002_000, "c1", True),
                       (99_902_000, "c2", False), (100_102_000, "c2", True), (120_002_000, "c1", True)]
    env.tracer.close()
    grants = [(r[0], r[4], r[7]) for r in env.tracer.records if r[2] == "broker.lock_granted"]
    assert grants == [(1_000, "c1", "new"), (40_001_000, "c1", "renewed"), (100_101_000, "c2", "expired"),
                      (120_001_000, "c1", "new")]


SCENARIO = """
name: orderly_unit
duration_ms: 50s
settle_ms: 5s
network: {latency_ms: {dist: constant, value: 0.5}}
cluster:
  brokers: [{name: broker-a}]
  topics: [{name: orders, queues: 1}]
producers:
  - {name: p, topic: orders, rate_per_s: 2, start_ms: 3s, stop_ms: 20s, send_mode: ORDERLY, keys: 1, arrival: constant}
consumers:
  - {name: c, group: g, topic: orders, consume_mode: ORDERLY, start_ms: 1s, failure_probability: 0.5,
     consume_time_ms: {dist: constant, value: 1}}
"""


def _run(tmp_path: Path, seed: int) -> rmqsim.RunResult:
    path = tmp_path / "orderly_unit.yaml"
    path.write_text(textwrap.dedent(SCENARIO))
    return rmqsim.run(str(path), seed=seed, keep_records=True)


def test_orderly_consumer_timeline(tmp_path: Path) -> None:
    r = _run(tmp_path, 1)
    recs = r.records
    grants = [r_ for r_ in recs if r_[2] == "broker.lock_granted" and r_[5] == "orders"]
    first = grants[0]
    assert first[7] == "new"
    started = next(r_ for r_ in recs if r_[2] == "consumer.queue_started" and r_[4] == "orders")
    assert started[0] > first[0]  # locked before the queue is added
    # lockAll: 1 s after the client started (1 s; at 2 s the first rebalance has not added the
    # queue yet: nothing to lock), then every 20 s, each request arriving 0.5 ms later
    assert 2 * S <= first[0] < 2 * S + 10_000
    renewals = [r_[0] for r_ in grants if r_[7] == "renewed"]
    assert renewals == [22_000_500, 42_000_500]
    consumed = [r_ for r_ in recs if r_[2] == "consumer.consumed"]
    assert consumed and not any(r_[5].startswith("%") for r_ in consumed)  # never the retry topic
    failures = 0
    for before, after in zip(consumed, consumed[1:], strict=False):
        if not before[9]:  # SUSPEND: the same message again, 1000 ms + its 1 ms call later
            failures += 1
            assert (after[4], after[10]) == (before[4], before[10] + 1)
            assert after[0] - before[0] == 1_001_000
    assert failures >= 5
    # in order: first successful consumptions follow the send order of the one key
    ok_ids = [r_[4] for r_ in consumed if r_[9]]
    assert ok_ids == sorted(ok_ids) and len(set(ok_ids)) == r.summary["sent_ok"]
    assert r.summary["order_violations"] == 0 and r.summary["lost"] == 0 and r.summary["dlq"] == 0


def test_orderly_max_reconsume_times_goes_to_dlq(tmp_path: Path) -> None:
    """maxReconsumeTimes configured (2): a message failing 3 times goes to %DLQ%g via the inner
    producer's re-send, and its queue moves on."""
    path = tmp_path / "orderly_dlq.yaml"
    path.write_text(textwrap.dedent(SCENARIO).replace("failure_probability: 0.5", "failure_probability: 0.9")
                    .replace("settle_ms: 5s", "settle_ms: 60s")
                    .replace("consume_mode: ORDERLY,", "consume_mode: ORDERLY, client: {max_reconsume_times: 2},"))
    r = rmqsim.run(str(path), seed=1, keep_records=True)
    s = r.summary
    assert s["dlq"] > 0 and s["lost"] == 0 and s["pending_retry"] == 0
    attempts = {}
    for rec in r.records:
        if rec[2] == "consumer.consumed":
            attempts.setdefault(rec[4], []).append(rec[10])
    assert all(times == list(range(len(times))) and len(times) <= 3 for times in attempts.values())
