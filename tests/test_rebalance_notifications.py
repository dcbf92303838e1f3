"""Consumer-ids-changed notifications and the RebalanceService that answers them (models/broker/
consumer_manager.py, models/consumer/rebalance.py).

A join is notified once by every broker (ConsumerManager.registerConsumer: a new channel; the
joiner's later heartbeats on the same channel notify nobody), so each member gets one notification
per broker — two here, a fraction of a millisecond apart. What the model got wrong was the answer
of a 4.9.8 client to the second one: 5.2.0+ RebalanceService keeps rounds at least minInterval
(1 s) apart, so the second notification is a round 1 s later; 4.9.8's has no minInterval
(ServiceThread.waitForRunning returns at once after a wake-up), so it is a round at once. An
orderly member whose lock was refused at the join therefore tries again within milliseconds (the
second broker's notification) and then only at its next 20 s round — not 1 s later, when the old
owner may have let the lock go.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import models.records as rec
from models.client_instance import MQClientInstance
from models.consumer.rebalance import Rebalancer
from models.protocol import NotifyConsumerIdsChanged
from rmqsim.runner import build, start
from rmqsim.scenario.spec import load
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer, field_index
from tests.conftest import ROOT

S = 1_000_000
SEEDS = (1, 2, 3)
JOIN_US = 20 * S  # scenarios/consumer_joins_busy_group.yaml: `late` starts at 20 s
BROKERS = ("broker-a", "broker-b")
MEMBERS = ("c-1", "c-2", "late")


# --- RebalanceService, alone ---------------------------------------------------------------------
class _Consumer:
    """What a Rebalancer reads of its consumer, subscribed to nothing (a round does nothing)."""

    def __init__(self, node: Node, v4: bool) -> None:
        self.node, self.v4, self.subscriptions = node, v4, {}


def _rounds(v4: bool, wakeups_us: list[int]) -> list[int]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    Network(env)
    node = Node(env, "c")
    env.network.add_node(node)
    node.start()
    rebalancer = Rebalancer(_Consumer(node, v4), None)
    rounds: list[int] = []
    run_round = rebalancer.run_round
    rebalancer.run_round = lambda: (rounds.append(env.now), run_round())  # type: ignore[method-assign]
    rebalancer.start()
    for at in wakeups_us:
        env.call_later(at, rebalancer.wakeup)
    env.run(until=30 * S)
    return rounds


def test_a_4x_rebalance_service_answers_each_wakeup_at_once() -> None:
    """Two notifications 0.4 ms apart at 5 s: 4.9.8 runs two rounds then; the next comes 20 s after
    the last."""
    assert _rounds(True, [5 * S, 5 * S + 400]) == [5 * S, 5 * S + 400, 25 * S + 400]


def test_a_5x_rebalance_service_keeps_rounds_a_second_apart() -> None:
    """5.2.0+: the second wake-up is a round 1 s after the first (and the first one within a
    second of the start waits for it)."""
    assert _rounds(False, [5 * S, 5 * S + 400]) == [5 * S, 6 * S, 26 * S]
    assert _rounds(False, [500_000]) == [1 * S, 21 * S]


def test_a_4x_start_rebalances_even_when_no_heartbeat_went_out() -> None:
    """4.9.8 start(): rebalanceImmediately() whatever sendHeartbeatToAllBrokerWithLock returned; 5.x
    only if it returned true (here: no broker address known, nothing sent)."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    Network(env)
    node = Node(env, "c")
    env.network.add_node(node)
    client = MQClientInstance(node, ["namesrv"], 30_000, 30_000, 3_000)
    woken: list[str] = []
    client.send_heartbeat_to_all_broker_with_lock(lambda: woken.append("4.x"), always=True)
    client.send_heartbeat_to_all_broker_with_lock(lambda: woken.append("5.x"))
    assert woken == ["4.x"]


# --- a join, 4.x orderly ---------------------------------------------------------------------------
@functools.cache
def _join(seed: int) -> dict[str, Any]:
    """consumer_joins_busy_group, orderly, 4.x: the records, and the notifications each member got."""
    sc = load(ROOT / "scenarios" / "consumer_joins_busy_group.yaml",
              ["version=4.x", "consumers[0].consume_mode=ORDERLY", "consumers[1].consume_mode=ORDERLY",
               "duration_ms=30s", "settle_ms=25s"])
    world = build(sc, seed, keep_records=True, detail=True)
    notified: dict[str, list[tuple[int, str]]] = {}
    for name in MEMBERS:
        node = world.nodes[name]
        handler = node.handlers[NotifyConsumerIdsChanged]

        def spy(src: str, req_id: int, req: Any, name: str = name, handler: Any = handler) -> None:
            notified.setdefault(name, []).append((world.env.now, src))
            handler(src, req_id, req)

        node.handlers[NotifyConsumerIdsChanged] = spy
    start(world)
    world.env.run(until=55 * S)
    return {"records": world.env.tracer.records + world.env.tracer.chunk, "notified": notified}


@pytest.mark.parametrize("seed", SEEDS)
def test_each_broker_notifies_a_join_once(seed: int) -> None:
    j = _join(seed)
    reason = field_index(rec.BROKER_CONSUMER_IDS_CHANGED, "reason")
    changes = [(x[1], x[reason]) for x in j["records"] if x[2] == rec.BROKER_CONSUMER_IDS_CHANGED and x[0] >= JOIN_US]
    assert sorted(changes) == [(b, "registered") for b in BROKERS]
    for name in MEMBERS:  # one from each broker, nothing at the joiner's 30 s heartbeat (21 s, 51 s)
        got = [(t, src) for t, src in j["notified"].get(name, []) if t >= JOIN_US]
        assert sorted(src for _t, src in got) == list(BROKERS)
        assert all(t < JOIN_US + 100_000 for t, _src in got)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_4x_orderly_member_refused_at_a_join_waits_for_its_next_round(seed: int) -> None:
    """Every lock a rebalance round asks for after the join (refused, or granted to a new owner):
    a member's attempts on one queue come within the join's notifications (< 100 ms apart) or a
    20 s round later, never in between."""
    j = _join(seed)
    client, topic, queue = (field_index(rec.BROKER_LOCK_REFUSED, f) for f in ("client", "topic", "queue_id"))
    how = field_index(rec.BROKER_LOCK_GRANTED, "how")
    attempts: dict[tuple, list[int]] = {}
    for x in j["records"]:
        if x[0] >= JOIN_US and (x[2] == rec.BROKER_LOCK_REFUSED or (x[2] == rec.BROKER_LOCK_GRANTED and x[how] == "new")):
            attempts.setdefault((x[client], x[1], x[topic], x[queue]), []).append(x[0])
    refused = sum(1 for x in j["records"] if x[2] == rec.BROKER_LOCK_REFUSED and x[0] >= JOIN_US)
    assert refused, "a lock was still held when the join's first rounds asked for it"
    for key, times in attempts.items():
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert all(g < 100_000 or g >= 19_900_000 for g in gaps), (key, gaps)
