"""A broker answers SUBSCRIPTION_NOT_EXIST to a push consumer's pull of a group it does not know
(PullMessageProcessor.processRequest, 5.3.3 and 4.9.8: no FLAG_SUBSCRIPTION on the pull, so the
subscription comes from the ConsumerManager, and `getConsumerGroupInfo(group)` is null until a member's
heartbeat arrives; models/broker/broker.py `on_pull_without_subscription`, models/pull_sys_flag.py).
A lite pull carries its subscription and is served whatever the broker knows.

The component tests put one client node before a broker and log each answer's arrival time and code.
The story (seeds 1-3): broker-a loses power at 35 s and serves again at 42 s; the NameServer keeps it
in the route, so the three consumers of `billing` (started 8 s apart: their 30 s heartbeats reach
broker-a at 48, 62 and 70 s) go on pulling its queues. 4.x: broker-a refuses the group's pulls until
the first of those heartbeats (48 s), and nothing of broker-a is consumed before it; 5.x: a client's
first pull on its new connection is refused, its heartbeat follows it on that connection (the channel
listener) and consumption resumes within about a second of the restart."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from models.protocol import (
    PULL_NOT_FOUND,
    SYSTEM_BUSY,
    Heartbeat,
    NotifyConsumerIdsChanged,
    UnregisterClient,
    new_pull_message,
)
from models.pull_sys_flag import SUBSCRIPTION_NOT_EXIST, new_pull_message_without_subscription
from models.records import BROKER_CLIENT_REGISTERED, CONSUMER_CONSUMED, CONSUMER_PULL_FAILED
from models.version import V4, V5
from rmqsim.runner import build, start
from rmqsim.scenario.spec import from_data
from sim.node import Node
from sim.trace import NODE_RESTARTED, field_index

S = 1_000_000
RPC_TIMEOUT_US = 3 * S
GROUP, TOPIC = "billing", "orders"


# --- component: one client node `c` in front of one broker group ------------------------------------
def _world(version: str, slave: bool = False, slave_read: bool = False) -> tuple[Any, Node, list[tuple[int, str, Any]]]:
    broker: dict[str, Any] = {"name": "broker-a"}
    if slave:
        broker["replicas"] = [{"role": "ASYNC_MASTER"}, {"role": "SLAVE"}]
        broker["broker"] = {"slave_read_enable": slave_read}
    world = build(from_data({"name": "pull_subscription", "version": version, "duration_ms": 10_000,
                             "cluster": {"brokers": [broker], "topics": [{"name": TOPIC, "queues": 1}]},
                             "producers": [], "consumers": []}), 1)
    client = Node(world.env, "c")
    world.env.network.add_node(client)
    client.handle(NotifyConsumerIdsChanged, lambda src, rid, req: None)
    start(world)
    client.start()
    return world, client, []


def _at(world: Any, client: Node, log: list, at_us: int, dst: str, what: str, payload: Any) -> None:
    def answered(response: Any) -> None:
        log.append((world.env.now, what, getattr(response, "code", response)))

    world.env.call_later(at_us, lambda: client.rpc(dst, payload, RPC_TIMEOUT_US, answered))


def _push_pull(commit_offset: int = -1) -> Any:
    return new_pull_message_without_subscription((GROUP, TOPIC, 0, 0, 32, commit_offset, 0, None))


def _lite_pull() -> Any:
    return new_pull_message((GROUP, TOPIC, 0, 0, 32, -1, 0, None))


BEAT = Heartbeat("c", ((GROUP, (TOPIC,)),))


@pytest.mark.parametrize("version", [V4, V5])
def test_an_unknown_group_is_refused_until_a_heartbeat_and_again_once_every_member_left(version: str) -> None:
    """Timeline (one way 0.5 ms with jitter: each answer ~1 ms after its request): a push pull before
    any heartbeat → SUBSCRIPTION_NOT_EXIST, a lite pull then → served; heartbeat; push pull → served;
    the member unregisters (the group is gone with its last member); push pull → refused again."""
    world, client, log = _world(version)
    _at(world, client, log, 2_000_000, "broker-a", "push", _push_pull())
    _at(world, client, log, 2_100_000, "broker-a", "lite", _lite_pull())
    _at(world, client, log, 2_200_000, "broker-a", "heartbeat", BEAT)
    _at(world, client, log, 2_300_000, "broker-a", "push", _push_pull())
    _at(world, client, log, 2_400_000, "broker-a", "unregister", UnregisterClient("c", consumer_group=GROUP))
    _at(world, client, log, 2_500_000, "broker-a", "push", _push_pull())
    world.env.run(until=3 * S)
    assert [(t // 100_000, what, code) for t, what, code in log] == [
        (20, "push", SUBSCRIPTION_NOT_EXIST), (21, "lite", PULL_NOT_FOUND), (22, "heartbeat", 0),
        (23, "push", PULL_NOT_FOUND), (24, "unregister", 0), (25, "push", SUBSCRIPTION_NOT_EXIST)]


def test_a_refused_pull_commits_nothing() -> None:
    """The piggy-backed commit offset is applied after the subscription check (storeOffsetEnable at
    the end of processRequest): a refused pull leaves the offset table alone."""
    world, client, log = _world(V4)
    _at(world, client, log, 2_000_000, "broker-a", "push", _push_pull(commit_offset=7))
    world.env.run(until=3 * S)
    assert [code for _t, _w, code in log] == [SUBSCRIPTION_NOT_EXIST]
    assert (GROUP, TOPIC, 0) not in world.models["broker-a"].offsets.table


@pytest.mark.parametrize("version, slave_read, code", [
    (V5, False, SYSTEM_BUSY),  # rejectRequest at the remoting layer comes first
    (V5, True, SUBSCRIPTION_NOT_EXIST),
    (V4, False, SUBSCRIPTION_NOT_EXIST),  # a 4.x slave serves pulls: processRequest runs
])
def test_a_slave_checks_the_group_where_it_runs_the_processor(version: str, slave_read: bool, code: int) -> None:
    world, client, log = _world(version, slave=True, slave_read=slave_read)
    slave = next(name for name in world.nodes if name.startswith("broker-a") and name != "broker-a")
    _at(world, client, log, 2_000_000, slave, "push", _push_pull())
    world.env.run(until=3 * S)
    assert [c for _t, _w, c in log] == [code]


# --- the story: a broker restart ---------------------------------------------------------------------
SEEDS = (1, 2, 3)
CLIENTS = ("c", "d", "e")
FIRST_PERIODIC_HEARTBEAT_US = 48 * S  # e started at 17 s: its heartbeats at 18 + 30k s
PULL_RETRY_US = 1 * S  # pullTimeDelayMillsWhenException: ClientConfig's 1000 (the impl's 3000 is overwritten)


def _scenario(version: str) -> Any:
    return from_data({
        "name": "pull_refused_after_restart", "version": version, "duration_ms": 80_000, "settle_ms": 40_000,
        "cluster": {"brokers": [{"name": "broker-a", "store": {"flush_disk_type": "SYNC_FLUSH"}},
                                {"name": "broker-b"}],
                    "topics": [{"name": TOPIC, "queues": 4}]},
        "producers": [{"name": "p", "topic": TOPIC, "rate_per_s": 300, "start_ms": 3_000}],
        "consumers": [{"name": name, "group": GROUP, "topic": TOPIC, "start_ms": 1_000 + 8_000 * i}
                      for i, name in enumerate(CLIENTS)],
        "faults": [{"at_ms": 35_000, "kind": "power_loss", "node": "broker-a", "duration_ms": 5_000}]})


@functools.cache
def _story(version: str, seed: int) -> dict[str, Any]:
    """After broker-a serves again: when the group became known there (its first member registered),
    each client's first message consumed from broker-a, and the pulls refused as SUBSCRIPTION_NOT_EXIST."""
    world = build(_scenario(version), seed, keep_records=True, detail=True)
    start(world)
    world.env.run(until=75 * S)
    records = world.env.tracer.records + world.env.tracer.chunk
    serving = next(r[0] for r in records if r[2] == NODE_RESTARTED and r[1] == "broker-a")
    known = min(r[0] for r in records if r[2] == BROKER_CLIENT_REGISTERED and r[1] == "broker-a" and r[0] >= serving)
    broker = field_index(CONSUMER_CONSUMED, "broker")
    first: dict[str, int] = {}
    for r in records:
        if r[2] == CONSUMER_CONSUMED and r[broker] == "broker-a" and r[0] >= serving:
            first.setdefault(r[1], r[0])
    failed_from, reason = field_index(CONSUMER_PULL_FAILED, "broker"), field_index(CONSUMER_PULL_FAILED, "reason")
    queue = field_index(CONSUMER_PULL_FAILED, "queue_id")
    refused_rows = [r for r in records if r[2] == CONSUMER_PULL_FAILED and r[failed_from] == "broker-a"
                    and r[reason] == "subscription_not_exist"]
    by_queue: dict[tuple[str, int], list[int]] = {}
    for r in refused_rows:
        by_queue.setdefault((r[1], r[queue]), []).append(r[0])
    return {"serving": serving, "known": known, "first": first, "refused": [r[0] for r in refused_rows],
            "refused_by_queue": by_queue}


@pytest.mark.parametrize("seed", SEEDS)
def test_4x_consumers_read_nothing_from_a_restarted_broker_until_their_heartbeat(seed: int) -> None:
    s = _story(V4, seed)
    assert s["known"] >= FIRST_PERIODIC_HEARTBEAT_US  # no channel listener in 4.9.8: the 30 s round
    assert s["refused"], "the mechanism: broker-a refused the group's pulls"
    assert all(s["serving"] <= t <= s["known"] for t in s["refused"])
    # each refused pull is sent again after pullTimeDelayMillsWhenException (1 s) plus a round trip. The
    # record names the queue id only: `orders` q0 and `%RETRY%billing` q0 are two chains under one key
    chains = 2
    for times in s["refused_by_queue"].values():
        later = [t for t in times if t >= times[0] + PULL_RETRY_US]
        assert all(any(PULL_RETRY_US <= t - e <= PULL_RETRY_US + 20_000 for e in times) for t in later), times
        assert len(times) <= chains * ((s["known"] - s["serving"]) // PULL_RETRY_US + 1), times
    assert any(len(times) > chains for times in s["refused_by_queue"].values())  # some were retried
    assert s["first"], "consumption from broker-a resumed"
    assert min(s["first"].values()) >= s["known"]
    # each refused pull is retried after pullTimeDelayMillsWhenException (1 s): resumed within it
    assert min(s["first"].values()) <= s["known"] + 1_500_000


@pytest.mark.parametrize("seed", SEEDS)
def test_5x_consumers_resume_within_about_a_second_of_the_restart(seed: int) -> None:
    s = _story(V5, seed)
    assert s["refused"], "the mechanism: the first pull on the new connection precedes the heartbeat"
    assert all(t <= s["known"] + 10_000 for t in s["refused"])  # refused only before the group was known
    assert s["known"] <= s["serving"] + 1_500_000
    assert s["first"] and min(s["first"].values()) <= s["serving"] + 1_500_000


@pytest.mark.parametrize("version, slave_read, committed", [(V5, True, True), (V4, False, False)])
def test_a_known_group_s_pull_goes_on_to_the_slave_s_own_processor(version: str, slave_read: bool,
                                                                    committed: bool) -> None:
    """After a heartbeat the slave serves the pull with its own rules: the piggy-backed commit offset
    is applied by a 5.x slave, never by a 4.x one (slave_read.py)."""
    world, client, log = _world(version, slave=True, slave_read=slave_read)
    slave = next(name for name in world.nodes if name.startswith("broker-a") and name != "broker-a")
    _at(world, client, log, 2_000_000, slave, "heartbeat", BEAT)
    _at(world, client, log, 2_100_000, slave, "push", _push_pull(commit_offset=7))
    world.env.run(until=3 * S)
    assert [(what, code != SUBSCRIPTION_NOT_EXIST) for _t, what, code in log] == [("heartbeat", True), ("push", True)]
    assert ((GROUP, TOPIC, 0) in world.models[slave].offsets.table) is committed
