"""POP long polling and dead channels (models/broker/pop_long_polling.py; 5.3.3 PopLongPollingService
.pollRemotingCommands and wakeUp): a parked pop whose client connection has closed is dropped when
woken, so what arrives after a POP consumer died goes to a live member instead of waiting out the
invisible time. A SimpleConsumer's receive, parked by the LOCAL-mode proxy on its in-process
channel, is not dropped: its result is popped and lost with the gRPC stream (the proxy's nack on a
failed write is not reached: its first write, the status, fails first).

A timeline on one broker with two remoting clients, and a story over seeds 1-3: a POP-mode push
consumer killed under load (scenarios/pop_vs_push_rebalance.yaml) leaves no message stored after
the broker heard its socket close for the revive service, and the rule fired; a SimpleConsumer
killed the same way (scenarios/pop_consumer_crash.yaml) still has messages stored after its death
revived."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import models.records as rec
import rmqsim
from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.broker.pop_long_polling import PopLongPollingService
from models.message import record_bytes
from models.protocol import POLLING_TIMEOUT, SUCCESS, PopMessage
from sim.disk import DiskConfig
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import NODE_CRASHED, Tracer, field_index
from tests.conftest import ROOT

S = 1_000_000
SEEDS = (1, 2, 3)
HEARD_US = 50_000  # the broker hears a dead client's socket close one network latency (< 50 ms) after the crash


def _timeline(proxy: bool) -> list[tuple]:
    """c parks a pop at 1 s and dies at 2 s; d parks one at 2.1 s; a message is stored at 3 s."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env)  # 0.5 ms one way
    broker = Broker(env, "broker-a", "zone-a", MessageStoreConfig(), BrokerConfig(), DiskConfig(), {"T": 1}, [],
                    pop=True)
    c, d = Node(env, "c"), Node(env, "d")
    for node in (broker.node, c, d):
        net.add_node(node)
        node.start()
    log: list[tuple] = []
    pop = PopMessage("g", "T", -1, 16, 60 * S, 15 * S, False, None, proxy)

    def answered(who: str, response: Any) -> None:
        log.append((env.now, who, response.code, [m.msg_id for m, _h in response.msgs]))

    env.call_later(1 * S, lambda: c.rpc("broker-a", pop, 20 * S, answered, "c"))
    env.call_later(2 * S, c.crash)
    env.call_later(2 * S + 100_000, lambda: d.rpc("broker-a", pop, 20 * S, answered, "d"))
    env.call_later(3 * S, lambda: broker.put_no_wait(7, "T", 0, record_bytes("T", 10, None), 10, None, 0, None))
    env.run(until=30 * S)
    return log


def test_a_message_passes_a_dead_clients_parked_pop_for_the_next_one() -> None:
    """Remoting: c's pop, parked first, is dropped (its channel closed at ~2 s); d's gets the message
    as it arrives (3 s + dispatch + one way back). Before the fix c's took it and d timed out."""
    assert _timeline(proxy=False) == [(3_001_500, "d", SUCCESS, [7])]


def test_the_proxys_parked_receive_of_a_dead_simple_consumer_still_takes_the_message() -> None:
    """LOCAL proxy: the in-process channel is active, so c's receive is popped (the message is lost
    with c's stream, invisible for 60 s); d waits out its poll time (15 s) empty."""
    assert _timeline(proxy=True) == [(17_101_000, "d", POLLING_TIMEOUT, [])]


def test_a_dead_clients_pop_whose_poll_time_runs_out_takes_nothing() -> None:
    """d parks at 1 s, c behind it at 1.1 s; c dies at 2 s; 20 messages arrive at once at 3 s: d's
    pop takes 16, and c's, at the front now, is not woken again. When its poll time runs out
    (16.1 s) wakeUp finds its channel inactive and drops it: the other 4 stay in the queue (the
    POP offset at 16, one checkpoint). Run, it would have popped them for a dead client."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env)
    broker = Broker(env, "broker-a", "zone-a", MessageStoreConfig(), BrokerConfig(), DiskConfig(), {"T": 1}, [],
                    pop=True)
    c, d = Node(env, "c"), Node(env, "d")
    for node in (broker.node, c, d):
        net.add_node(node)
        node.start()
    log: list[tuple] = []
    pop = PopMessage("g", "T", -1, 16, 60 * S, 15 * S, False, None, False)

    def answered(who: str, response: Any) -> None:
        log.append((env.now, who, response.code, len(response.msgs)))

    def burst() -> None:
        for i in range(20):
            broker.put_no_wait(100 + i, "T", 0, record_bytes("T", 10, None), 10, None, 0, None)

    env.call_later(1 * S, lambda: d.rpc("broker-a", pop, 20 * S, answered, "d"))
    env.call_later(1 * S + 100_000, lambda: c.rpc("broker-a", pop, 20 * S, answered, "c"))
    env.call_later(2 * S, c.crash)
    env.call_later(3 * S, burst)
    env.run(until=20 * S)
    assert log == [(3_001_500, "d", SUCCESS, 16)]
    assert broker.offsets.table[("g", "T", 0)] == 16 and len(broker.pop.revive.by_key) == 1


# --- stories ---------------------------------------------------------------------------------------
@functools.cache
def _story(path: str, crashed: str, seed: int, overrides: tuple[str, ...] = ()) -> tuple[list[tuple], int]:
    """The run's records and how often a woken parked pop was found on a dead channel."""
    dropped = [0]
    active = PopLongPollingService.channel_active

    def counting(self: PopLongPollingService, entry: list) -> bool:
        ok = active(self, entry)
        dropped[0] += not ok
        return ok

    PopLongPollingService.channel_active = counting  # type: ignore[method-assign]
    try:
        r = rmqsim.run(path, seed=seed, keep_records=True, overrides=list(overrides))
    finally:
        PopLongPollingService.channel_active = active  # type: ignore[method-assign]
    return r.records, dropped[0]


def _stored_after_and_revived(records: list[tuple], crashed: str, margin_us: int) -> tuple[set[int], set[int]]:
    """(messages stored more than `margin_us` after `crashed` died, those of them revived)."""
    crash_us = next(x[0] for x in records if x[2] == NODE_CRASHED and x[1] == crashed)
    msg = field_index(rec.BROKER_STORED, "msg_id")
    topic = field_index(rec.BROKER_STORED, "topic")
    late = {x[msg] for x in records if x[2] == rec.BROKER_STORED and x[0] > crash_us + margin_us
            and x[topic] == "orders"}
    revived = {x[field_index(rec.POP_REVIVED, "msg_id")] for x in records if x[2] == rec.POP_REVIVED}
    return late, late & revived


@pytest.mark.parametrize("seed", SEEDS)
def test_after_a_pop_push_consumer_dies_nothing_stored_later_waits_for_its_invisible_time(seed: int) -> None:
    records, dropped = _story(str(ROOT / "scenarios" / "pop_vs_push_rebalance.yaml"), "pop-1", seed)
    late, revived = _stored_after_and_revived(records, "pop-1", HEARD_US)
    assert late, "traffic went on after the crash"
    assert revived == set()  # each went to a live member's pop
    assert dropped >= 1  # the dead member's parked pops were passed by


def test_a_dead_simple_consumers_receive_still_takes_messages_stored_after_its_death() -> None:
    """The proxy path (5.3.3): over the seeds some messages stored after c-1 died were popped for a
    receive of its still parked (or on its way) and came back only through the revive service; no
    parked receive of it was passed by."""
    revived = set()
    for seed in SEEDS:
        records, dropped = _story(str(ROOT / "scenarios" / "pop_consumer_crash.yaml"), "c-1", seed)
        revived |= _stored_after_and_revived(records, "c-1", 0)[1]
        assert dropped == 0
    assert revived
