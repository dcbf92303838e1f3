"""ConsumerOrderInfoManager's persistence (5.3.3; models/broker/consumer_order_info.py): the
orderly POP table is written to consumerOrderInfo.json every 10 s (BrokerController's scheduled
persist, first at 10 s) and read back at start-up, where ConsumerOrderInfoLockManager.recover arms
the lock-free timer of each queue still blocked. A timeline over a broker crash.
"""

from __future__ import annotations

from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.broker.consumer_order_info import CONSUMER_ORDER_INFO_FILE
from sim.disk import DiskConfig
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.rng import Rng
from sim.trace import Tracer

S = 1_000_000
TOPIC, GROUP = "T", "g"
INVISIBLE_US = 60 * S


def test_a_crash_keeps_what_the_last_persist_blocked_and_forgets_what_followed() -> None:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=0.5))
    b = Broker(env, "broker-a", "zone-a", MessageStoreConfig(mapped_file_size_commit_log_bytes=1 << 20),
               BrokerConfig(startup_ms=1_000), DiskConfig(), {TOPIC: 4}, [], pop=True)
    net.add_node(b.node)
    b.node.start()
    orders = b.pop.orders
    woken: list[tuple[int, str, str]] = []
    orders.wake = lambda topic, group: woken.append((env.now, topic, group))
    # queue 0: popped at 2 s (persisted at 10 s); queue 1: popped at 2 s, its first offset acked at
    # 12 s (after the persist); queue 2: popped at 12 s (never persisted)
    env.call_later(2 * S, orders.update, TOPIC, GROUP, 0, [0, 1], 2 * S, INVISIBLE_US)
    env.call_later(2 * S, orders.update, TOPIC, GROUP, 1, [0, 1], 2 * S, INVISIBLE_US)
    env.call_later(12 * S, orders.ack, TOPIC, GROUP, 1, 0, 2 * S, 0)
    env.call_later(12 * S, orders.update, TOPIC, GROUP, 2, [5], 12 * S, INVISIBLE_US)
    env.run(until=15 * S)
    persisted = b.node.disk.files.read(CONSUMER_ORDER_INFO_FILE)
    assert set(persisted) == {(TOPIC, GROUP, 0), (TOPIC, GROUP, 1)}  # the 10 s persist
    assert persisted[(TOPIC, GROUP, 1)][4] == 0  # before the ack
    b.node.crash()
    assert not orders.table
    env.call_later(1 * S, b.node.restart)  # serving again at 17 s (startup 1 s)
    env.run(until=20 * S)
    blocked = {q: orders.blocked(TOPIC, GROUP, q, env.now) for q in range(3)}
    assert blocked == {0: True, 1: True, 2: False}  # the ack after the persist is forgotten
    assert orders.table[(TOPIC, GROUP, 1)].acked == 0
    env.run(until=63 * S)
    # the lock-free timers recovered at the restart fire at the invisible time (2 s + 60 s)
    assert (62 * S, TOPIC, GROUP) in woken
    assert not orders.blocked(TOPIC, GROUP, 0, env.now)


def test_the_persist_runs_every_ten_seconds_from_the_start_and_again_after_a_restart() -> None:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=0.5))
    b = Broker(env, "broker-a", "zone-a", MessageStoreConfig(mapped_file_size_commit_log_bytes=1 << 20),
               BrokerConfig(startup_ms=1_000), DiskConfig(), {TOPIC: 4}, [], pop=True)
    net.add_node(b.node)
    b.node.start()
    orders = b.pop.orders
    writes: list[int] = []
    persist = orders.persist
    orders.persist = lambda: (writes.append(env.now), persist())  # type: ignore[method-assign]
    env.call_later(25 * S, b.node.crash)
    env.call_later(26 * S, b.node.restart)  # serving at 27 s
    env.run(until=50 * S)
    assert writes == [10 * S, 20 * S, 37 * S, 47 * S]
