"""The POP-mode push consumer audited against 5.3.3 (models/consumer/pop_consumer.py, rebalance.py
PopRebalancer): timelines on a one-broker world built from a small scenario, each assertion one a
pre-audit model fails.

- the first pop waits for the rebalance round (minInterval 1 s after start) + 500 ms
  (updateMessageQueueAssignment → dispatchPopPullRequest(list, 500)); it used to pop at once;
- a failed pop is retried after ClientConfig.pullTimeDelayMillsWhenException (1 s; the 3 s field
  default of DefaultMQPushConsumerImpl is overwritten in its constructor); it used to wait 3 s;
- pops go to the master only (findBrokerAddressInSubscribe(name, MASTER_ID, true)): with the master
  down no pop reaches its slave; it used to fall back to the slave;
- maxReconsumeTimes comes from the config and a failure at the limit goes through
  checkNeedAckOrDelay (acked: no copy is consumed past the limit); it used to be fixed at 16;
- initMode MIN (CONSUME_FROM_FIRST_OFFSET) travels on the pop and the broker starts a first pop
  there (PopMessageProcessor.getInitOffset); the broker used MAX for every pop;
- a PopProcessQueue not popped for 120 s is dropped and a new one pops 500 ms later
  (isPullExpired, CONSUME_PASSIVELY), one popped all along never is;
- FOUND → the next pop after pullInterval; FLOW_CONTROL → after 20 ms;
- a message skipped or ended after its pop timed out leaves no waitAckCounter behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import models.records as rec
from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.consumer.pop_consumer import (
    FLOW_CONTROL,
    POP_DELAY_LEVEL_S,
    PopConsumer,
    check_need_ack_or_delay,
    pop_delay_s,
)
from models.message import record_bytes
from models.protocol import SUCCESS, PopMessage, PopResponse
from rmqsim import runner
from rmqsim.scenario import spec as scenario_mod
from sim.disk import DiskConfig
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer, field_index

S = 1_000_000

SCENARIO = """
name: pop_audit
seed: 1
duration_ms: 60s
settle_ms: 0
cluster:
  brokers:
    - {name: broker-a}
  topics:
    - {name: T, queues: 2}
producers:
  - {name: p, topic: T, rate_per_s: 20, start_ms: 3s}
consumers:
  - {name: c, group: g, topic: T, pop: {client: push}}
"""


def _world(tmp_path: Path, overrides: list[str] | None = None, seed: int = 1) -> runner.World:
    path = tmp_path / "pop_audit.yaml"
    path.write_text(SCENARIO)
    sc = scenario_mod.load(path, overrides or [])
    world = runner.build(sc, seed, keep_records=True)
    runner.start(world)
    return world


def _pop_calls(world: runner.World, node: str = "broker-a") -> list[int]:
    """Times a PopMessage reaches the broker node `node` (its handler wrapped)."""
    broker = world.models[node]
    seen: list[int] = []
    handler = broker.pop.on_pop if broker.pop is not None else None

    def spy(src: str, rid: int, req: PopMessage) -> None:
        seen.append(world.env.now)
        if handler is not None:
            handler(src, rid, req)

    broker.node.handle(PopMessage, spy)
    return seen


# --- the start -----------------------------------------------------------------------------------
def test_the_first_pop_waits_for_the_rebalance_round_and_500_ms(tmp_path: Path) -> None:
    """c starts at 1 s: the heartbeat's answer wakes the rebalance service, whose round waits for
    minInterval after the service started (2 s); the new PopProcessQueue's first pop is
    dispatched 500 ms later and reaches the broker one way (0.5 ms) after. Before: ~1.0 s."""
    world = _world(tmp_path)
    seen = _pop_calls(world)
    world.env.run(until=4 * S)
    assert seen and 2 * S + 500_000 < seen[0] < 2 * S + 510_000  # + one way


def test_a_steady_pop_consumer_rebalances_every_second(tmp_path: Path) -> None:
    """getRebalanceResultFromBroker returns `changed`, and doRebalance counts an unchanged topic as
    not balanced: the start round (2 s) adds the queue, balanced, so the next waits 20 s; from then
    on nothing changes and the rounds come every minInterval (1 s)."""
    world = _world(tmp_path)
    c = world.models["c"]
    rounds: list[int] = []
    run_round = c.rebalancer.run_round

    def counting() -> None:
        rounds.append(world.env.now)
        run_round()

    c.rebalancer.run_round = counting  # looked up when each round is scheduled
    world.env.run(until=27 * S + 1)
    assert rounds == [2 * S, 22 * S, 23 * S, 24 * S, 25 * S, 26 * S, 27 * S], rounds


# --- a failed pop ----------------------------------------------------------------------------------
def test_a_failed_pop_is_retried_after_one_second(tmp_path: Path) -> None:
    """broker-a is down from 5 s to 15 s: each pop fails at once (connection refused) and the next
    comes pullTimeDelayMillsWhenException (1 s) later. Before: 3 s."""
    world = _world(tmp_path, ["faults=[{at_ms: 5s, kind: process_crash, node: broker-a, duration_ms: 10s}]"])
    c = world.models["c"]
    tries: list[int] = []
    pop_message = c.pop_message

    def spy(pq: Any) -> None:
        tries.append(world.env.now)
        pop_message(pq)

    c.pop_message = spy  # the rebalance, the callbacks and the delayed retries all look it up
    world.env.run(until=14 * S)
    during = [t for t in tries if 6 * S <= t <= 14 * S]
    gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
    assert len(gaps) >= 4 and all(1 * S <= g <= 1 * S + 10_000 for g in gaps), gaps


# --- master only ------------------------------------------------------------------------------------
def test_no_pop_goes_to_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    """A master with a slave; the master dies at 5 s for 50 s, long enough for the route poll to
    drop it from the client's address table. findBrokerAddressInSubscribe(name, MASTER_ID, true):
    the slave is never asked (before: it was, from the first route poll without the master);
    pops reach the master again after its restart."""
    world = _world(tmp_path, ["cluster.brokers[0].replicas=[{role: ASYNC_MASTER}, {role: SLAVE}]",
                              "faults=[{at_ms: 5s, kind: process_crash, node: broker-a, duration_ms: 50s}]",
                              "duration_ms=90s"])
    to_slave = _pop_calls(world, "broker-a-s1")
    to_master = _pop_calls(world, "broker-a")
    world.env.run(until=90 * S)
    assert to_slave == []
    assert any(t > 55 * S for t in to_master)
    addrs = world.models["c"].client.broker_addr_table.get("broker-a", {})
    assert 0 in addrs  # the master is back in the route


# --- maxReconsumeTimes, checkNeedAckOrDelay -----------------------------------------------------------
def test_check_need_ack_or_delay_vectors() -> None:
    """From the Java loop: > 2 × 7200 s → ack; else one past the highest level elapsed; none → -1."""
    assert check_need_ack_or_delay(14_400_001) is None
    assert check_need_ack_or_delay(14_400_000) == 16
    assert check_need_ack_or_delay(7_200_000) == 16
    assert check_need_ack_or_delay(7_199_999) == 15
    assert check_need_ack_or_delay(30_000) == 2
    assert check_need_ack_or_delay(29_999) == 1
    assert check_need_ack_or_delay(10_000) == 1
    assert check_need_ack_or_delay(9_999) == -1
    assert pop_delay_s(0, 3) == POP_DELAY_LEVEL_S[3] == 120  # level 0: the message's reconsumeTimes
    assert pop_delay_s(0, 40) == pop_delay_s(16, 0) == 7200  # past the table: its last entry
    assert pop_delay_s(-1, 3) is None  # Java's index out of bounds: nothing sent


def test_a_copy_failing_at_max_reconsume_times_is_acked_not_consumed_again(tmp_path: Path) -> None:
    """maxReconsumeTimes 1: a first failure delays the message 10 s (popDelayLevel[0]) and it is
    revived once (reconsumeTimes 1); the copy failing again is at the limit, and
    checkNeedAckOrDelay acks it (a copy is taken as old enough): it is never revived, and nothing
    with reconsumeTimes 2 is consumed. Before: the limit was 16, the copy's failure delayed it 30 s
    and a third copy came back."""
    world = _world(tmp_path, ["consumers[0].failure_probability=0.9", "consumers[0].client.max_reconsume_times=1",
                              "producers[0].stop_ms=10s", "duration_ms=100s"])
    world.env.run(until=100 * S)
    group, re_, ok = (field_index(rec.CONSUMER_CONSUMED, f) for f in ("group", "reconsume_times", "ok"))
    consumed = [x for x in world.env.tracer.of_kind(rec.CONSUMER_CONSUMED) if x[group] == "g"]
    first_failures = sum(1 for x in consumed if x[re_] == 0 and not x[ok])
    assert any(x[re_] == 1 and not x[ok] for x in consumed)  # the limit was reached
    assert max(x[re_] for x in consumed) == 1
    assert sum(1 for _ in world.env.tracer.of_kind(rec.POP_REVIVED)) == first_failures > 0


# --- initMode -------------------------------------------------------------------------------------------
def test_the_push_consumer_asks_min_only_when_consuming_from_the_first_offset(tmp_path: Path) -> None:
    first = _world(tmp_path, ["consumers[0].client.consume_from_where=CONSUME_FROM_FIRST_OFFSET"])
    last = _world(tmp_path)
    assert first.models["c"]._pop_request().init_mode == "MIN"
    assert last.models["c"]._pop_request().init_mode == "MAX"


@pytest.mark.parametrize(("init_mode", "expected"), [("MIN", [0, 1, 2, 3, 4]), ("MAX", [4])])
def test_the_broker_starts_a_first_pop_at_the_requests_init_mode(init_mode: str, expected: list[int]) -> None:
    """Offset 0 out of the page cache (accessMessageInMemoryMaxRatio 0): MAX starts at the last
    message, MIN at the first (getInitOffset). Before, every first pop was MAX."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env)
    broker = Broker(env, "broker-a", "zone-a", MessageStoreConfig(access_message_in_memory_max_ratio=0),
                    BrokerConfig(), DiskConfig(), {"T": 1}, [], pop=True)
    c = Node(env, "c")
    for node in (broker.node, c):
        net.add_node(node)
        node.start()
    for i in range(5):
        broker.put_no_wait(100 + i, "T", 0, record_bytes("T", 10, None), 10, None, 0, None)
    got: list[Any] = []
    pop = PopMessage("g", "T", 0, 32, 60 * S, 0, False, None, False, init_mode)
    env.call_later(1 * S, lambda: c.rpc("broker-a", pop, 5 * S, got.append))
    env.run(until=3 * S)
    assert got and got[0].code == SUCCESS
    assert [m.queue_offset for m, _h in got[0].msgs] == expected


# --- pull-expired ------------------------------------------------------------------------------------------
def test_a_pop_queue_not_popped_for_120_s_is_dropped_and_replaced(tmp_path: Path) -> None:
    """A PopProcessQueue whose last pop is more than 120 s old is dropped at the next round and a
    new one pops 500 ms later (the push consumer is CONSUME_PASSIVELY)."""
    world = _world(tmp_path, ["producers[0].stop_ms=4s"])  # idle: a pop parked at 19 s stays until 34 s
    world.env.run(until=21 * S)  # the rounds: 2 s (the queue added), then 22 s
    c: PopConsumer = world.models["c"]
    old = c.pqs["broker-a"]
    old.last_pop_us = world.env.now - 120 * S - 1
    seen = _pop_calls(world)
    start = world.env.now
    world.env.run(until=start + 3 * S)
    assert old.dropped and c.pqs["broker-a"] is not old
    new_first = c.pqs["broker-a"].last_pop_us
    assert seen and start < new_first <= start + 1 * S + 500_000


def test_after_found_the_next_pop_waits_pull_interval(tmp_path: Path) -> None:
    """pullInterval 700 ms: after a FOUND pop the next one is dispatched 700 ms later (a POLLING
    answer would re-pop at once). With 20 messages a second every pop finds some, so from 4 s on
    the pops reach the broker 700 ms + the round trip apart. Before: pullInterval was ignored."""
    world = _world(tmp_path, ["consumers[0].client.pull_interval_ms=700"])
    seen = _pop_calls(world)
    world.env.run(until=12 * S)
    gaps = [b - a for a, b in zip(seen, seen[1:], strict=False) if a >= 4 * S]
    assert len(gaps) >= 8 and all(700_000 < g < 720_000 for g in gaps), gaps


def test_a_steadily_popped_queue_is_never_dropped(tmp_path: Path) -> None:
    """Each popMessage stamps lastPopTimestamp: a queue popped all along (long polls of 15 s) is
    still the same PopProcessQueue after 150 s, past the 120 s pull-expiry."""
    world = _world(tmp_path, ["producers[0].stop_ms=10s", "duration_ms=150s"])
    world.env.run(until=5 * S)
    c: PopConsumer = world.models["c"]
    first = c.pqs["broker-a"]
    world.env.run(until=150 * S)
    assert c.pqs["broker-a"] is first and not first.dropped


def test_a_flow_controlled_pop_is_retried_after_20_ms(tmp_path: Path) -> None:
    """PopCallback.onException with an MQBrokerException FLOW_CONTROL (215): the next pop comes
    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL (20 ms) later, not after the exception delay."""
    world = _world(tmp_path)
    broker = world.models["broker-a"]
    seen: list[int] = []

    def refuse(src: str, rid: int, _req: PopMessage) -> None:
        seen.append(world.env.now)
        broker.node.reply(src, rid, PopResponse(FLOW_CONTROL))

    broker.node.handle(PopMessage, refuse)
    world.env.run(until=4 * S)
    gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert len(gaps) >= 20 and all(20_000 < g < 25_000 for g in gaps), gaps


def test_messages_skipped_for_pop_timeout_leave_no_wait_ack_count(tmp_path: Path) -> None:
    """One thread, 3 s a message, 5 s invisible time: most messages of a batch are visible again
    before a thread takes them (isPopTimeout: skipped, decFoundMsg) or end after it (no ack,
    decFoundMsg); once all is revived and consumed, the queue's waitAckCounter is back at 0 (it
    would otherwise grow to the 96 of flow control and stop the pops)."""
    world = _world(tmp_path, ["consumers[0].pop={client: push, invisible_duration_ms: 5s}",
                              "consumers[0].consume_time_ms={dist: exponential, mean: 3000}",
                              "consumers[0].client.consume_thread_max=1", "producers[0].rate_per_s=2",
                              "producers[0].stop_ms=8s", "duration_ms=400s"])
    world.env.run(until=400 * S)
    c: PopConsumer = world.models["c"]
    assert sum(1 for _ in world.env.tracer.of_kind(rec.POP_REVIVED)) > 0  # pops timed out
    assert not c.queue and c.busy == 0
    assert [pq.wait_ack for pq in c.pqs.values()] == [0]
