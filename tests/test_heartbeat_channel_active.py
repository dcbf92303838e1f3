"""5.x clients' heartbeat on a newly active broker channel (models/client_instance.py; 5.3.3
ClientConfig.enableHeartbeatChannelEventListener, MQClientInstance's onChannelActive): when a
client's connection to a broker becomes active it heartbeats that broker and rebalances at once.
4.9.8 has no such listener: a restarted broker learns a client only at its next 30 s heartbeat.

The story (over seeds 1-3): broker-a loses power at 35 s and is back (serving) at 42 s; the NameServer,
told nothing, keeps it in the route, so the three consumers (started 8 s apart: their 30 s heartbeats
reach broker-a at 48, 62 and 70 s) go on pulling its queues (AVG_BY_CIRCLE gives each some). With the
listener each client's first pull on a new connection is followed by its heartbeat: broker-a knows
every member within a round trip of that pull and about a second of its restart, and queues spend far
less time unowned; without it (5.x with the setting off, or 4.x) broker-a knows nobody until 48 s."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import pytest

from models.client_instance import MQClientInstance, heartbeat_channel_listener_enabled
from models.protocol import (
    SUCCESS,
    BrokerData,
    CodeResponse,
    GetRouteInfo,
    Heartbeat,
    QueueData,
    TopicRouteData,
)
from models.records import BROKER_CLIENT_REGISTERED
from models.version import V4, V5
from rmqsim.runner import build, run_scenario, start
from rmqsim.scenario.spec import Scenario, from_data
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import NODE_RESTARTED, Tracer, field_index

SEEDS = (1, 2, 3)
S = 1_000_000
CLIENTS = ("c", "d", "e")
ROUND_TRIP_US = 10_000  # a pull's arrival, then the heartbeat sent right after it on the same connection
PERIODIC_FIRST_US = 48 * S  # the first 30 s heartbeat after the restart (e: started at 17 s, heartbeats at 18 + 30k s)


def scenario(listener: bool | None, version: str = V5) -> Scenario:
    member = {"group": "billing", "topic": "orders",
              "client": {"allocate_message_queue_strategy": "AVG_BY_CIRCLE",
                         "enable_heartbeat_channel_event_listener": listener}}
    return from_data({
        "name": "heartbeat_channel_active", "version": version, "duration_ms": 80_000, "settle_ms": 40_000,
        "cluster": {"brokers": [{"name": "broker-a", "store": {"flush_disk_type": "SYNC_FLUSH"}},
                                {"name": "broker-b"}],
                    "topics": [{"name": "orders", "queues": 4}]},
        "producers": [{"name": "p", "topic": "orders", "rate_per_s": 300, "start_ms": 3_000}],
        "consumers": [{"name": name, "start_ms": 1_000 + 8_000 * i, **member} for i, name in enumerate(CLIENTS)],
        "faults": [{"at_ms": 35_000, "kind": "power_loss", "node": "broker-a", "duration_ms": 5_000}]})


@pytest.mark.parametrize("setting, version, enabled", [
    (None, V5, True),  # 5.3.3's default
    (False, V5, False),
    (True, V5, True),
    (None, V4, False),  # 4.9.8 has no such listener
    (True, V4, False),
])
def test_the_listener_follows_the_setting_and_the_client_version(setting: bool | None, version: str,
                                                                 enabled: bool) -> None:
    assert heartbeat_channel_listener_enabled(setting, version) is enabled


@functools.cache
def arrivals(listener: bool | None, version: str, seed: int) -> dict[str, Any]:
    """Run the story; at broker-a after its restart: each client's first request and first heartbeat
    (arrival times), and its registration (broker.client_registered); every heartbeat broker-b got."""
    world = build(scenario(listener, version), seed, keep_records=True, detail=True)
    broker = world.nodes["broker-a"]
    first_request: dict[str, int] = {}
    heartbeats: dict[str, list[int]] = {}
    for payload_type, handler in list(broker.handlers.items()):
        def spy(src: str, req_id: int, req: Any, handler: Any = handler, beat: bool = payload_type is Heartbeat) -> None:
            if broker.epoch and (src in CLIENTS or src == "p"):  # the incarnation after the power loss
                first_request.setdefault(src, world.env.now)
                if beat:
                    heartbeats.setdefault(src, []).append(world.env.now)
            handler(src, req_id, req)
        broker.handlers[payload_type] = spy
    other = world.nodes["broker-b"]
    beats_b: list[int] = []
    beat_b = other.handlers[Heartbeat]
    other.handlers[Heartbeat] = lambda src, rid, req: (beats_b.append(world.env.now), beat_b(src, rid, req))
    start(world)
    world.env.run(until=75 * S)
    records = world.env.tracer.records + world.env.tracer.chunk
    serving = next(x[0] for x in records if x[2] == NODE_RESTARTED and x[1] == "broker-a")
    client = field_index(BROKER_CLIENT_REGISTERED, "client")
    registered = {x[client]: x[0] for x in records if x[2] == BROKER_CLIENT_REGISTERED and x[1] == "broker-a"
                  and x[0] >= serving}
    return {"serving": serving, "first_request": first_request, "heartbeats": heartbeats, "registered": registered,
            "heartbeats_b": beats_b}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_restarted_broker_knows_each_5x_client_within_a_round_trip_of_its_reconnection(seed: int) -> None:
    a = arrivals(None, V5, seed)
    assert set(a["registered"]) == set(CLIENTS)
    for name in CLIENTS:
        reconnected = a["first_request"][name]
        # the mechanism: a heartbeat right behind the first request on the new connection, not the 30 s one
        assert reconnected <= a["heartbeats"][name][0] <= reconnected + ROUND_TRIP_US
        assert a["registered"][name] <= reconnected + ROUND_TRIP_US
    assert max(a["registered"].values()) < a["serving"] + 3 * S  # every member within ~a pull retry
    # only the broker whose connection became active: broker-b, connected all along, hears nothing then
    assert not [t for t in a["heartbeats_b"] if a["serving"] <= t < a["serving"] + 3 * S]


@pytest.mark.parametrize("listener, version", [(False, V5), (None, V4)])
@pytest.mark.parametrize("seed", SEEDS)
def test_without_the_listener_a_restarted_broker_waits_for_the_periodic_heartbeats(seed: int, listener: bool | None,
                                                                                   version: str) -> None:
    a = arrivals(listener, version, seed)
    assert min(a["registered"].values()) >= PERIODIC_FIRST_US
    assert all(a["first_request"][n] < PERIODIC_FIRST_US - 3 * S for n in CLIENTS)  # they were pulling all along


@pytest.mark.parametrize("seed", SEEDS)
def test_a_5x_producer_heartbeats_the_restarted_broker_right_behind_its_first_send(seed: int) -> None:
    """The producer's side of the listener (5.3.3: every MQClientInstance, producers too): the restarted
    broker's ProducerManager knows the group again within a round trip (transaction check-back needs a
    channel of the group); a 4.9.8 producer heartbeats it only at its next 30 s heartbeat (61 s)."""
    five, four = arrivals(None, V5, seed), arrivals(None, V4, seed)
    sent = five["first_request"]["p"]
    assert sent <= five["heartbeats"]["p"][0] <= sent + ROUND_TRIP_US
    assert four["heartbeats"]["p"][0] - four["first_request"]["p"] > 10 * S  # its periodic heartbeat (61 s)


@functools.cache
def unowned_s(listener: bool | None, version: str, seed: int) -> float:
    return run_scenario(scenario(listener, version), seed=seed).summary["unowned_queue_s"]


@pytest.mark.parametrize("seed", SEEDS)
def test_queues_spend_less_time_unowned_with_the_listener(seed: int) -> None:
    """Members that ask broker-a for the group while it knows only some of them leave queues
    unowned; the listener shortens that window from tens of seconds to about one."""
    with_listener = unowned_s(None, V5, seed)
    assert with_listener < unowned_s(False, V5, seed)
    assert with_listener < unowned_s(None, V4, seed)


# --- the listener, alone: one client, one broker that answers heartbeats and notifies nobody -----
class _Rebalancer:
    def __init__(self, env: Any) -> None:
        self.env, self.wakeups = env, []

    def wakeup(self) -> None:
        self.wakeups.append(self.env.now)


class _Consumer:
    """What the client instance reads of a consumer: its subscriptions, its rebalancer, its route hooks."""

    def __init__(self, env: Any) -> None:
        self.subscriptions: dict[str, None] = {"orders": None}
        self.rebalancer = _Rebalancer(env)

    def update_topic_subscribe_info(self, topic: str, route: Any) -> None:
        pass

    def subscribe_topic_needs_update(self, topic: str) -> bool:
        return False

    def persist_consumer_offset(self) -> None:
        pass


class _Ping(NamedTuple):
    n: int


ROUTE = TopicRouteData("orders", (QueueData("broker-a", 4, 4),), (BrokerData("broker-a", ((0, "b"),)),))


def _client(enabled: bool, answer: int = SUCCESS) -> tuple[Any, Any, Any, Any, list[tuple[int, str, str]]]:
    """Client `c` with one consumer, NameServer `ns` (whose route puts broker-a at `b`; the client
    asks for it after 10 ms) and broker node `b` (0.5 ms one way), logging what arrives at `b` and
    the pings at `ns`: (time, sender, payload kind)."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    Network(env, Constant(value=0.5))
    c, b, ns = Node(env, "c"), Node(env, "b"), Node(env, "ns")
    for node in (c, b, ns):
        env.network.add_node(node)
    arrived: list[tuple[int, str, str]] = []
    b.handle(Heartbeat, lambda src, rid, req: (arrived.append((env.now, src, "heartbeat")),
                                               b.reply(src, rid, CodeResponse(answer))))
    ns.handle(GetRouteInfo, lambda src, rid, req: ns.reply(src, rid, ROUTE))
    for node in (b, ns):
        node.handle(_Ping, lambda src, rid, req, node=node: (arrived.append((env.now, src, f"ping {node.name}")),
                                                             node.reply(src, rid, CodeResponse(SUCCESS))))
    client = MQClientInstance(c, ["ns"], 30_000, 30_000, 3_000, enabled)
    client.register_consumer("billing", _Consumer(env), 5_000)
    for node in (c, b, ns):
        node.start()
    return env, client, c, b, arrived


def _ping(env: Any, node: Any, dst: str, at_us: int) -> None:
    env.call_later(at_us, lambda: node.rpc(dst, _Ping(0), 3 * S, lambda r: None))


def test_a_new_connection_to_a_broker_is_followed_by_a_heartbeat_and_a_rebalance() -> None:
    """A request at 0.1 s opens the connection: the heartbeat follows it (arrives 0.5 ms later), its
    answer comes back after a round trip and the rebalance service is woken then. A second request
    on the open connection is just a request; a request to the NameServer heartbeats nobody."""
    env, client, c, _b, arrived = _client(True)
    _ping(env, c, "b", 100_000)
    _ping(env, c, "b", 200_000)
    _ping(env, c, "ns", 300_000)
    env.run(until=900_000)  # before the client's 1 s heartbeat round
    assert arrived == [(100_500, "c", "ping b"), (100_500, "c", "heartbeat"), (200_500, "c", "ping b"),
                       (300_500, "c", "ping ns")]
    assert client.consumers["billing"].rebalancer.wakeups == [101_000]


def test_the_listener_lets_the_heartbeat_lock_go_for_the_scheduled_round() -> None:
    """The listener's heartbeat holds the lock only until its answer: the client's scheduled round
    (first after 1 s) still heartbeats b."""
    env, _client_, c, _b, arrived = _client(True)
    _ping(env, c, "b", 100_000)
    env.run(until=1_500_000)
    assert [(t, kind) for t, _s, kind in arrived if kind == "heartbeat"] == [(100_500, "heartbeat"),
                                                                          (1_000_500, "heartbeat")]


def test_a_refused_connection_opens_nothing_and_the_next_one_does() -> None:
    """b's process is down at 0.1 s (connection refused): no heartbeat; back at 0.3 s, the next
    request opens the connection and the heartbeat follows."""
    env, _client_, c, b, arrived = _client(True)
    env.call_later(50_000, b.crash)
    env.call_later(250_000, b.restart)
    _ping(env, c, "b", 100_000)
    _ping(env, c, "b", 400_000)
    env.run(until=900_000)
    assert arrived == [(400_500, "c", "ping b"), (400_500, "c", "heartbeat")]


def test_the_heartbeat_lock_held_by_a_round_skips_the_listener() -> None:
    """sendHeartbeatToBroker(..., false) only tryLocks: while a heartbeat round holds the lock (its
    own heartbeat opening the connection, here) the listener sends nothing and wakes nobody."""
    env, client, c, _b, arrived = _client(True)
    client._heartbeat_running = True
    _ping(env, c, "b", 100_000)
    env.run(until=900_000)
    assert arrived == [(100_500, "c", "ping b")]
    assert client.consumers["billing"].rebalancer.wakeups == []


def test_a_refused_heartbeat_wakes_nobody() -> None:
    env, client, c, _b, arrived = _client(True, answer=1)  # SYSTEM_ERROR
    _ping(env, c, "b", 100_000)
    env.run(until=900_000)
    assert [kind for _t, _s, kind in arrived] == ["ping b", "heartbeat"]
    assert client.consumers["billing"].rebalancer.wakeups == []


def test_without_the_listener_a_new_connection_is_just_a_request() -> None:
    env, client, c, _b, arrived = _client(False)
    _ping(env, c, "b", 100_000)
    env.run(until=900_000)
    assert arrived == [(100_500, "c", "ping b")]
    assert client.consumers["billing"].rebalancer.wakeups == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_starting_5x_consumer_heartbeats_each_broker_once(seed: int) -> None:
    """At start the client's own heartbeat round opens its broker connections and holds the lock:
    the listener adds no heartbeat (each broker gets one from each consumer in its first second)."""
    world = build(scenario(None), seed, keep_records=True)
    beats: list[tuple[str, str, int]] = []
    for name in ("broker-a", "broker-b"):
        node = world.nodes[name]
        handler = node.handlers[Heartbeat]

        def spy(src: str, req_id: int, req: Any, name: str = name, handler: Any = handler) -> None:
            beats.append((name, src, world.env.now))
            handler(src, req_id, req)

        node.handlers[Heartbeat] = spy
    start(world)
    world.env.run(until=25 * S)
    for i, client in enumerate(CLIENTS):
        started = 1_000_000 + 8_000_000 * i
        first_second = sorted(b for b, src, t in beats if src == client and started <= t < started + S)
        assert first_second == ["broker-a", "broker-b"]
