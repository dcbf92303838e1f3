"""Allocation strategies set from scenario files: validation (key path + reason) and whole runs
where a group's members own what the strategy gives them (models/consumer/allocate_setup.py)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from models.records import CONSUMER_CONSUMED
from rmqsim.runner import run_scenario
from rmqsim.scenario.spec import from_data
from sim.config import ConfigError
from sim.trace import field_index

SEED = 3


def scenario(brokers: list[dict], consumers: list[dict], queues: int = 4) -> dict:
    return {"name": "allocation", "duration_ms": "20s", "settle_ms": "20s",
            "cluster": {"brokers": brokers, "topics": [{"name": "T", "queues": queues}]},
            # the producer starts once the group has settled: members that start together race
            # (a NOTIFY_CONSUMER_IDS_CHANGED wakes a rebalance before the others' heartbeats are
            # in), and messages sent during that overlap are consumed twice (start-up redelivery)
            "producers": [{"name": "p", "topic": "T", "rate_per_s": 200, "start_ms": "3s"}],
            "consumers": consumers}


def run(data: dict):
    return run_scenario(from_data(data), seed=SEED, keep_records=True)


def owned(result, topic: str = "T") -> dict[str, set[tuple[str, int]]]:
    """Each consumer's queues of `topic` at the end of the run."""
    return {name: {(mq.broker_name, mq.queue_id) for mq in model.process_queues if mq.topic == topic}
            for name, model in result.world.models.items() if hasattr(model, "process_queues")}


def consumed_from(result) -> dict[str, set[str]]:
    """Broker → the consumers that consumed its messages."""
    node, broker = 1, field_index(CONSUMER_CONSUMED, "broker")
    out: dict[str, set[str]] = defaultdict(set)
    for rec in result.records:
        if rec[2] == CONSUMER_CONSUMED:
            out[rec[broker]].add(rec[node])
    return out


def nearby(resolver: str, inner: str = "AVG") -> dict:
    return {"allocate_message_queue_strategy": "MACHINE_ROOM_NEARBY", "machine_room_resolver": resolver,
            "machine_room_nearby_inner": inner}


@pytest.mark.parametrize("resolver, a, b, c, east, west", [
    ("ZONE", "broker-a", "broker-b", "broker-c", "east", "west"),
    ("NAMING", "z1@broker-a", "z2@broker-b", "z3@broker-c", "z1@east", "z2@west"),
])
def test_nearby_group_consumes_everything_each_member_owning_its_rooms_queues(resolver, a, b, c, east, west):
    """Rooms z1 (broker a, two members), z2 (broker b, one member), z3 (broker c, no member):
    a's queues are split between the z1 members, b's all go to the z2 member, and c's four are
    shared by all three (AVG over the sorted members: 2, 1, 1)."""
    data = scenario([{"name": a, "zone": "z1"}, {"name": b, "zone": "z2"}, {"name": c, "zone": "z3"}],
                    [{"name": east, "count": 2, "zone": "z1", "group": "g", "topic": "T", "client": nearby(resolver)},
                     {"name": west, "zone": "z2", "group": "g", "topic": "T", "client": nearby(resolver)}])
    result = run(data)
    s = result.summary
    assert s["stored"] > 3_000 and s["lost"] == 0 and s["consumed"] == s["stored"] and s["duplicates"] == 0
    e1, e2 = f"{east}-1", f"{east}-2"
    got = owned(result)
    assert got[e1] == {(a, 0), (a, 1), (c, 0), (c, 1)}
    assert got[e2] == {(a, 2), (a, 3), (c, 2)}
    assert got[west] == {(b, 0), (b, 1), (b, 2), (b, 3), (c, 3)}
    by_broker = consumed_from(result)
    assert by_broker[a] == {e1, e2} and by_broker[b] == {west} and by_broker[c] == {e1, e2, west}


def test_config_group_owns_exactly_its_list():
    """AllocateMessageQueueByConfig: the listed queues, the retry queue included, and no others."""
    queues = [{"broker": "broker-a", "queue_id": q} for q in range(4)] + [
        {"topic": "%RETRY%g", "broker": "broker-a", "queue_id": 0}]
    data = scenario([{"name": "broker-a"}], [{"name": "c", "group": "g", "topic": "T", "client": {
        "allocate_message_queue_strategy": "CONFIG", "message_queue_list": queues}}])
    result = run(data)
    assert result.summary["lost"] == 0 and result.summary["consumed"] == result.summary["stored"] > 0
    assert owned(result)["c"] == {("broker-a", q) for q in range(4)}
    assert owned(result, "%RETRY%g")["c"] == {("broker-a", 0)}


def test_machine_room_group_owns_only_its_rooms_queues():
    data = scenario([{"name": "idc1@broker-a"}, {"name": "idc2@broker-b"}], [
        {"name": "c", "count": 2, "group": "g", "topic": "T",
         "client": {"allocate_message_queue_strategy": "MACHINE_ROOM", "consumeridcs": ["idc1"]}}])
    got = owned(run(data))
    assert got["c-1"] | got["c-2"] == {("idc1@broker-a", q) for q in range(4)}
    assert not got["c-1"] & got["c-2"]


BROKERS = {"cluster": {"brokers": [{"name": "idc1@broker-a"}, {"name": "broker-b"}],
                       "topics": [{"name": "T", "queues": 4}]}}


@pytest.mark.parametrize("client, name, problem", [
    ({"allocate_message_queue_strategy": "CONFIG"}, "c",
     "consumers[0].client.message_queue_list: CONFIG allocates exactly the queues listed here, and none are"),
    ({"message_queue_list": [{"broker": "broker-x", "queue_id": 0}]}, "c",
     "consumers[0].client.message_queue_list[0].broker: 'broker-x' is not a broker here"),
    ({"message_queue_list": [{"broker": "broker-b", "queue_id": 4}]}, "c",
     "consumers[0].client.message_queue_list[0].queue_id: 4 is not a queue of 'T' on 'broker-b' (queue ids 0..3)"),
    ({"message_queue_list": [{"topic": "%RETRY%g", "broker": "broker-b", "queue_id": 1}]}, "c",
     "message_queue_list[0].queue_id: 1 is not a queue of '%RETRY%g' on 'broker-b' (its only queue id is 0)"),
    ({"message_queue_list": [{"topic": "U", "broker": "broker-b", "queue_id": 0}]}, "c",
     "message_queue_list[0].topic: 'U' is neither the consumer's topic 'T' nor its retry topic '%RETRY%g'"),
    ({"message_queue_list": [{"broker": "broker-b"}]}, "c",
     "consumers[0].client.message_queue_list[0].queue_id: Field required"),
    ({"allocate_message_queue_strategy": "MACHINE_ROOM"}, "c",
     "consumers[0].client.consumeridcs: MACHINE_ROOM allocates only queues of brokers named '<room>@<name>'"),
    ({"allocate_message_queue_strategy": "MACHINE_ROOM", "consumeridcs": ["idc1", "idc9"]}, "c",
     "consumers[0].client.consumeridcs[1]: 'idc9' is no broker's machine room (rooms of the topic's brokers: idc1)"),
    (nearby("NAMING", "MACHINE_ROOM_NEARBY"), "c",
     "consumers[0].client.machine_room_nearby_inner: the inner strategy of MACHINE_ROOM_NEARBY is one of the other"),
    (nearby("NAMING"), "c", "consumers[0].name: 'c' names no machine room"),
    (nearby("NAMING"), "idc1@c", "cluster.brokers[1].name: 'broker-b' names no machine room, and consumers[0] needs"),
    ({"machine_room_resolver": "DNS"}, "c", "consumers[0].client.machine_room_resolver: Input should be 'ZONE' or"),
    ({"virtual_node_cnt": -1}, "c", "consumers[0].client.virtual_node_cnt: Input should be greater than or equal to 0"),
])
def test_allocation_options_are_validated(client, name, problem):
    data = {**BROKERS, "consumers": [{"name": name, "group": "g", "topic": "T", "client": client}]}
    with pytest.raises(ConfigError) as err:
        from_data(data)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_valid_allocation_options_load():
    for client in (nearby("ZONE", "CONSISTENT_HASH"),
                   {"allocate_message_queue_strategy": "MACHINE_ROOM", "consumeridcs": ["idc1"]},
                   {"allocate_message_queue_strategy": "CONFIG", "message_queue_list": [
                       {"broker": "broker-b", "queue_id": 3}, {"topic": "%RETRY%g", "broker": "idc1@broker-a",
                                                               "queue_id": 0}]}):
        from_data({**BROKERS, "consumers": [{"name": "c", "group": "g", "topic": "T", "client": client}]})
