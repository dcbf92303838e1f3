"""`allocate` on generated inputs (reference section 4): what each strategy guarantees when every
member sees the same view, and what it does with odd views (unsorted, non-members, duplicates).
The exact results are checked against the Java classes in test_allocate_vectors.py."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.consumer.allocate import allocate, hash_ring, java_order, java_split, md5_hash
from models.consumer.allocate_setup import allocate_options, allocate_strategy, naming_room
from models.consumer.config import PushConsumerConfig
from models.message import MessageQueue

COVERING = ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]  # each queue to exactly one member
ROOMS = ["idc1", "idc2", "idc3"]


def view(r: random.Random, rooms: bool = False) -> tuple[list[MessageQueue], list[str]]:
    """A random group view: 1-4 brokers (named `<room>@broker-x` with `rooms`), 0-12 queues
    each (at least one queue in all), 1-15 distinct members, sorted as RebalanceImpl sorts."""
    brokers = [f"{r.choice(ROOMS)}@broker-{b}" if rooms else f"broker-{b}" for b in "abcd"[:r.randint(1, 4)]]
    mq_all = [MessageQueue("T", b, q) for b in brokers for q in range(r.randint(0, 12))] or [MessageQueue("T", "x", 0)]
    cids = [f"{r.choice(ROOMS)}@c-{i}" if rooms else f"10.0.0.{i}@{i}" for i in range(r.randint(1, 15))]
    return sorted(mq_all), sorted(cids)


def views(seed: int, n: int = 150, rooms: bool = False):
    r = random.Random(seed)
    return [view(r, rooms) for _ in range(n)]


def owners(strategy: str, mq_all: list, cid_all: list, **options) -> Counter:
    return Counter(mq for cid in cid_all for mq in allocate(strategy, "g", cid, mq_all, cid_all, **options))


def room_of(name: str) -> str:
    return name.split("@")[0]


NEARBY = {"broker_room": lambda mq: room_of(mq.broker_name), "consumer_room": room_of}


# --- the covering invariant ------------------------------------------------------------------

@pytest.mark.parametrize("strategy", COVERING)
def test_each_queue_exactly_once_when_all_see_the_same_view(strategy):
    for mq_all, cid_all in views(1):
        assert owners(strategy, mq_all, cid_all) == Counter(mq_all)


@pytest.mark.parametrize("strategy", COVERING)
def test_same_unsorted_view_still_covers_each_queue_once(strategy):
    """The strategies never sort: an unsorted view shared by all members still covers each
    queue once (the allocation differs from the sorted view's)."""
    r = random.Random(2)
    for mq_all, cid_all in views(2, 60):
        r.shuffle(mq_all)
        r.shuffle(cid_all)
        assert owners(strategy, mq_all, cid_all) == Counter(mq_all)


def test_machine_room_covers_exactly_the_eligible_queues():
    for mq_all, cid_all in views(3, rooms=True):
        idcs = ROOMS[:2]
        eligible = [mq for mq in mq_all if room_of(mq.broker_name) in idcs]
        assert owners("MACHINE_ROOM", mq_all, cid_all, consumeridcs=idcs) == Counter(eligible)


@pytest.mark.parametrize("inner", COVERING)
def test_nearby_each_queue_once_and_a_room_with_members_keeps_its_queues(inner):
    """Java's guarantee: with distinct members, one shared view and a covering inner strategy,
    each queue goes to exactly one member; a room's queues go to that room's members when it
    has any, else to some member of any room."""
    for mq_all, cid_all in views(4, rooms=True):
        member_rooms = {room_of(c) for c in cid_all}
        seen: Counter = Counter()
        for cid in cid_all:
            got = allocate("MACHINE_ROOM_NEARBY", "g", cid, mq_all, cid_all, inner=inner, **NEARBY)
            seen.update(got)
            for mq in got:
                room = room_of(mq.broker_name)
                assert room == room_of(cid) or room not in member_rooms
        assert seen == Counter(mq_all)


def test_nearby_order_is_own_room_then_memberless_rooms_by_name():
    mq_all = sorted(MessageQueue("T", f"{room}@b", q) for room in ("idc3", "idc1", "idc2") for q in range(2))
    got = allocate("MACHINE_ROOM_NEARBY", "g", "idc2@c", mq_all, ["idc2@c"], inner="AVG", **NEARBY)
    assert [mq.broker_name for mq in got] == ["idc2@b"] * 2 + ["idc1@b"] * 2 + ["idc3@b"] * 2


def test_nearby_room_order_is_java_string_order():
    """TreeMap orders rooms by UTF-16 code units: U+1F600 (a surrogate pair) before U+FFFD."""
    assert sorted(["\ufffd", "\U0001f600"], key=java_order) == ["\U0001f600", "\ufffd"]
    mq_all = [MessageQueue("T", "b1", 0), MessageQueue("T", "b2", 0)]
    rooms = {"b1": "\ufffd", "b2": "\U0001f600"}
    got = allocate("MACHINE_ROOM_NEARBY", "g", "c", mq_all, ["c"], broker_room=lambda mq: rooms[mq.broker_name],
                   consumer_room=lambda cid: "elsewhere")
    assert got == [mq_all[1], mq_all[0]]


# --- shapes of the split ------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 40), c=st.integers(1, 50))
def test_avg_blocks_are_contiguous_and_differ_by_at_most_one(n, c):
    mq_all = [MessageQueue("T", "b", q) for q in range(n)]
    cid_all = [f"c{i:02d}" for i in range(c)]
    blocks = [allocate("AVG", "g", cid, mq_all, cid_all) for cid in cid_all]
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    assert [mq for b in blocks for mq in b] == mq_all  # contiguous, in member order
    if c > n:
        assert sizes == [1] * n + [0] * (c - n)  # more consumers than queues: the last get none


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), c=st.integers(1, 20))
def test_avg_by_circle_deals_round_robin(n, c):
    mq_all = [MessageQueue("T", "b", q) for q in range(n)]
    cid_all = [f"c{i:02d}" for i in range(c)]
    for idx, cid in enumerate(cid_all):
        assert allocate("AVG_BY_CIRCLE", "g", cid, mq_all, cid_all) == mq_all[idx::c]


def test_machine_room_remainder_is_not_contiguous():
    """m // c each in blocks, then the remainder one each from the tail (unlike AVG)."""
    mq_all = [MessageQueue("T", "idc1@b", q) for q in range(5)]
    got = [[mq.queue_id for mq in allocate("MACHINE_ROOM", "g", c, mq_all, ["a", "b"], consumeridcs=["idc1"])]
           for c in ("a", "b")]
    assert got == [[0, 1, 4], [2, 3]]


def test_machine_room_uses_java_split():
    """String.split drops trailing empty strings: 'idc1@b@' has two parts, 'idc1@@' one."""
    assert java_split("idc1@b@", "@") == ["idc1", "b"]
    assert java_split("idc1@@", "@") == ["idc1"]
    assert java_split("@b", "@") == ["", "b"]
    assert java_split("", "@") == [""]
    mq_all = [MessageQueue("T", name, 0) for name in ("idc1@b@", "idc1@@", "idc1@b@c", "idc1@b")]
    got = allocate("MACHINE_ROOM", "g", "c", mq_all, ["c"], consumeridcs=["idc1"])
    assert [mq.broker_name for mq in got] == ["idc1@b@", "idc1@b"]


# --- the hash ring ---------------------------------------------------------------------------

def test_a_duplicate_member_gets_further_replicas():
    """ConsistentHashRouter.addNode starts a node's replica numbers at the count it already has."""
    ring = hash_ring(["a", "a"], 3)
    assert sorted(ring) == sorted(md5_hash(f"a-{i}") for i in range(6))


def test_an_equal_hash_overwrites_and_lowers_the_earlier_members_count():
    a, b = "10.0.8.188@2188", "10.0.14.233@3733"  # md5(a-1) and md5(b-6) share their first 4 bytes
    h = md5_hash(f"{a}-1")
    assert md5_hash(f"{b}-6") == h
    assert hash_ring([a, b], 7)[h] == b and hash_ring([b, a], 7)[h] == a  # the later insert wins
    # a loses a-1 to b, so its second listing starts at replica 6 (not 7): a-6 … a-12
    ring = hash_ring([a, b, a], 7)
    assert sorted(k for k, v in ring.items() if v == a) == sorted(
        md5_hash(f"{a}-{i}") for i in (0, *range(2, 13)))


def test_virtual_node_count_zero_owns_nothing_and_negative_is_rejected_before_the_check():
    mq_all = [MessageQueue("T", "b", 0)]
    assert allocate("CONSISTENT_HASH", "g", "c", mq_all, ["c"], virtual_node_cnt=0) == []
    with pytest.raises(ValueError, match="virtualNodeCnt"):
        allocate("CONSISTENT_HASH", "g", "", [], [], virtual_node_cnt=-1)


def test_message_queue_string_is_javas():
    assert str(MessageQueue("T", "broker-a", 3)) == "MessageQueue [topic=T, brokerName=broker-a, queueId=3]"
    assert MessageQueue._fields == ("topic", "broker_name", "queue_id")


# --- checks, non-members, options ---------------------------------------------------------

@pytest.mark.parametrize("strategy", ["AVG", "AVG_BY_CIRCLE", "MACHINE_ROOM", "CONSISTENT_HASH",
                                      "MACHINE_ROOM_NEARBY"])
def test_empty_inputs_raise_and_non_members_get_nothing(strategy):
    options = NEARBY if strategy == "MACHINE_ROOM_NEARBY" else {}
    mq_all, cid_all = [MessageQueue("T", "idc1@b", 0)], ["idc1@c"]
    for cid, mqs, cids in (("", mq_all, cid_all), (None, mq_all, cid_all), ("idc1@c", [], cid_all),
                           ("idc1@c", None, cid_all), ("idc1@c", mq_all, []), ("idc1@c", mq_all, None)):
        with pytest.raises(ValueError):
            allocate(strategy, "g", cid, mqs, cids, **options)
    assert allocate(strategy, "g", "idc1@stranger", mq_all, cid_all, **options) == []


def test_config_returns_its_list_to_anyone_without_checks():
    configured = [MessageQueue("T", "b", 7), MessageQueue("U", "b", 0)]
    assert allocate("CONFIG", "g", "", [], [], message_queue_list=configured) == configured
    assert allocate("CONFIG", "g", "x", [], ["y"]) == []  # never configured: Java's null


def test_nearby_resolver_without_a_room_raises_for_members_only():
    mq_all, cid_all = [MessageQueue("T", "b", 0)], ["c"]
    for broker_room, consumer_room in ((lambda mq: None, lambda c: "r"), (lambda mq: "r", lambda c: "")):
        with pytest.raises(ValueError, match="Machine room is null"):
            allocate("MACHINE_ROOM_NEARBY", "g", "c", mq_all, cid_all, broker_room=broker_room,
                     consumer_room=consumer_room)
        assert allocate("MACHINE_ROOM_NEARBY", "g", "x", mq_all, cid_all, broker_room=broker_room,
                        consumer_room=consumer_room) == []


def test_bad_calls():
    mq_all, cid_all = [MessageQueue("T", "b", 0)], ["c"]
    with pytest.raises(TypeError, match="broker_room"):
        allocate("MACHINE_ROOM_NEARBY", "g", "c", mq_all, cid_all)
    with pytest.raises(TypeError, match="virtual_nodes"):
        allocate("CONSISTENT_HASH", "g", "c", mq_all, cid_all, virtual_nodes=3)
    with pytest.raises(ValueError, match="unknown allocation strategy"):
        allocate("NOPE", "g", "c", mq_all, cid_all)
    with pytest.raises(ValueError, match="inner"):
        allocate("MACHINE_ROOM_NEARBY", "g", "c", mq_all, cid_all, inner="MACHINE_ROOM_NEARBY", **NEARBY)
    # options of other strategies are accepted and ignored (NEARBY passes them through)
    assert allocate("AVG", "g", "c", mq_all, cid_all, virtual_node_cnt=3, consumeridcs=["x"]) == mq_all


# --- from a scenario's consumer config ------------------------------------------------------

def test_naming_room():
    assert naming_room("idc1@broker-a") == "idc1"
    assert naming_room("idc1@c-1@x") == "idc1"
    assert naming_room("broker-a") is None


def test_config_queue_list_defaults_to_the_consumers_topic():
    cfg = PushConsumerConfig(allocate_message_queue_strategy="CONFIG", message_queue_list=[
        {"broker": "broker-a", "queue_id": 1}, {"topic": "%RETRY%g", "broker": "broker-a", "queue_id": 0}])
    assert allocate_options(cfg, "T", {})["message_queue_list"] == [
        MessageQueue("T", "broker-a", 1), MessageQueue("%RETRY%g", "broker-a", 0)]


@pytest.mark.parametrize("resolver, zones, expected", [
    ("ZONE", {"broker-a": "z1", "broker-b": "z2", "c1": "z1", "c2": "z2"}, {"c1": ["broker-a"], "c2": ["broker-b"]}),
    ("NAMING", {}, {"z1@c1": ["z1@broker-a"], "z2@c2": ["z2@broker-b"]}),
])
def test_nearby_resolvers_from_config(resolver, zones, expected):
    cfg = PushConsumerConfig(allocate_message_queue_strategy="MACHINE_ROOM_NEARBY", machine_room_resolver=resolver,
                             machine_room_nearby_inner="AVG_BY_CIRCLE")
    brokers = sorted({b for bs in expected.values() for b in bs})
    mq_all = [MessageQueue("T", b, q) for b in brokers for q in range(3)]
    strategy = allocate_strategy(cfg, "T", zones)
    cid_all = sorted(expected)
    for cid, owned in expected.items():
        assert {mq.broker_name for mq in strategy("g", cid, mq_all, cid_all)} == set(owned)
