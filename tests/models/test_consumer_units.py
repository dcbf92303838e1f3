"""Client units: allocation strategies (reference section 4), ProcessQueue (3.6),
TopicPublishInfo / ThreadLocalIndex (1.4)."""

from __future__ import annotations

import hashlib
import random
from bisect import bisect_left

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.client_instance import topic_route_data_to_publish_info
from models.consumer.allocate import (
    allocate,
    averagely,
    averagely_by_circle,
    by_config,
    by_machine_room,
    consistent_hash,
    md5_hash,
)
from models.consumer.process_queue import ProcessQueue
from models.message import MessageExt, MessageQueue, msg_id_of
from models.producer.fault_strategy import MQFaultStrategy
from models.protocol import BrokerData, QueueData, TopicRouteData
from models.thread_local_index import ThreadLocalIndex

TOPIC = "TopicTest"


def queues(n: int, brokers: tuple[str, ...] = ("broker-a",), topic: str = TOPIC) -> list[MessageQueue]:
    """n queues per broker, sorted like RebalanceImpl sorts mqAll."""
    return sorted(MessageQueue(topic, b, i) for b in brokers for i in range(n))


def cids(c: int) -> list[str]:
    return sorted(f"192.168.0.{i}@{i}" for i in range(c))


def allocation(strategy, mq_all, cid_all) -> dict[str, list[MessageQueue]]:
    return {cid: strategy("g", cid, mq_all, cid_all) for cid in cid_all}


def ids(mqs: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


# --- AVG ---------------------------------------------------------------------------------------

def test_avg_8_queues_3_consumers_contiguous_3_3_2():
    mq_all, cid_all = queues(8), cids(3)
    got = [ids(averagely("g", c, mq_all, cid_all)) for c in cid_all]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_avg_divisible():
    mq_all, cid_all = queues(8), cids(4)
    assert [ids(averagely("g", c, mq_all, cid_all)) for c in cid_all] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_avg_more_consumers_than_queues():
    mq_all, cid_all = queues(2), cids(4)
    assert [ids(averagely("g", c, mq_all, cid_all)) for c in cid_all] == [[0], [1], [], []]


def test_avg_10_queues_4_consumers():
    mq_all, cid_all = queues(10), cids(4)
    got = [ids(averagely("g", c, mq_all, cid_all)) for c in cid_all]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_avg_over_two_brokers_uses_sorted_order():
    mq_all, cid_all = queues(4, ("broker-a", "broker-b")), cids(3)
    got = allocation(averagely, mq_all, cid_all)
    assert [[(q.broker_name[-1], q.queue_id) for q in got[c]] for c in cid_all] == [
        [("a", 0), ("a", 1), ("a", 2)], [("a", 3), ("b", 0), ("b", 1)], [("b", 2), ("b", 3)]]


def test_precondition_checks():
    mq_all, cid_all = queues(4), cids(2)
    for strategy in (averagely, averagely_by_circle, consistent_hash(), by_machine_room(["r"])):
        with pytest.raises(ValueError):
            strategy("g", "", mq_all, cid_all)
        with pytest.raises(ValueError):
            strategy("g", cid_all[0], [], cid_all)
        with pytest.raises(ValueError):
            strategy("g", cid_all[0], mq_all, [])
        assert strategy("g", "stranger", mq_all, cid_all) == []


# --- AVG_BY_CIRCLE -------------------------------------------------------------------------------

def test_avg_by_circle_8_queues_3_consumers():
    mq_all, cid_all = queues(8), cids(3)
    got = [ids(averagely_by_circle("g", c, mq_all, cid_all)) for c in cid_all]
    assert got == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_avg_by_circle_more_consumers_than_queues():
    mq_all, cid_all = queues(2), cids(3)
    assert [ids(averagely_by_circle("g", c, mq_all, cid_all)) for c in cid_all] == [[0], [1], []]


# --- CONSISTENT_HASH -----------------------------------------------------------------------------

def reference_ring_owner(mq: MessageQueue, cid_all: list[str], vnodes: int = 10) -> str:
    """Independent re-implementation of ConsistentHashRouter with MD5Hash (bytes 0..3, big endian)."""
    def h(key: str) -> int:
        d = hashlib.md5(key.encode("utf-8")).digest()
        return (d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]

    ring = {}
    for cid in cid_all:
        for i in range(vnodes):
            ring[h(f"{cid}-{i}")] = cid
    keys = sorted(ring)
    text = f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"
    pos = bisect_left(keys, h(text))
    return ring[keys[pos % len(keys)]]


def test_message_queue_to_string_matches_java():
    assert str(MessageQueue("T", "broker-a", 3)) == "MessageQueue [topic=T, brokerName=broker-a, queueId=3]"


def test_md5_hash_is_unsigned_32bit_big_endian():
    d = hashlib.md5(b"abc").digest()
    assert md5_hash("abc") == int.from_bytes(d[:4], "big")
    assert 0 <= md5_hash("abc") < 2**32


def test_consistent_hash_matches_reference_router():
    mq_all, cid_all = queues(16, ("broker-a", "broker-b")), cids(5)
    got = allocation(consistent_hash(), mq_all, cid_all)
    for cid, mqs in got.items():
        assert mqs == [mq for mq in mq_all if reference_ring_owner(mq, cid_all) == cid]


def test_consistent_hash_covers_each_queue_exactly_once():
    mq_all, cid_all = queues(32, ("broker-a", "broker-b")), cids(4)
    got = allocation(consistent_hash(), mq_all, cid_all)
    flat = [mq for mqs in got.values() for mq in mqs]
    assert sorted(flat) == mq_all
    for mqs in got.values():  # output in mqAll order
        assert mqs == sorted(mqs)


def test_consistent_hash_stable_when_consumer_added():
    mq_all = queues(32, ("broker-a", "broker-b"))
    before_cids = cids(4)
    after_cids = sorted(before_cids + ["10.0.0.99@new"])
    strategy = consistent_hash()
    owner_before = {mq: c for c, mqs in allocation(strategy, mq_all, before_cids).items() for mq in mqs}
    owner_after = {mq: c for c, mqs in allocation(strategy, mq_all, after_cids).items() for mq in mqs}
    moved = [mq for mq in mq_all if owner_before[mq] != owner_after[mq]]
    assert all(owner_after[mq] == "10.0.0.99@new" for mq in moved)  # only to the new consumer
    assert len(moved) <= len(mq_all) // 2  # most queues keep their owner


def test_consistent_hash_virtual_node_count_validation():
    with pytest.raises(ValueError):
        consistent_hash(-1)


# --- CONFIG and MACHINE_ROOM ---------------------------------------------------------------------

def test_config_returns_configured_list_for_everyone():
    configured = [MessageQueue(TOPIC, "broker-b", 1), MessageQueue(TOPIC, "broker-a", 0)]
    strategy = by_config(configured)
    mq_all, cid_all = queues(4), cids(3)
    for cid in cid_all + ["not-a-member"]:
        assert strategy("g", cid, mq_all, cid_all) == configured
    assert strategy("g", "", [], []) == configured  # no check at all


def test_machine_room_non_contiguous_remainder():
    brokers = ("room1@b1", "room1@b2", "room2@b3", "b4", "room1@x@y")
    mq_all = queues(2, brokers) + [MessageQueue(TOPIC, "room1@b0", 0)]
    mq_all = sorted(mq_all)
    eligible = [mq for mq in mq_all if mq.broker_name in ("room1@b0", "room1@b1", "room1@b2")]
    assert len(eligible) == 5
    strategy = by_machine_room(["room1"])
    cid_all = cids(2)
    got = [strategy("g", c, mq_all, cid_all) for c in cid_all]
    # m=5, c=2: q=2, r=1 → c0: eligible[0:2] + eligible[4]; c1: eligible[2:4]
    assert got == [[eligible[0], eligible[1], eligible[4]], [eligible[2], eligible[3]]]


def test_machine_room_three_consumers():
    mq_all = queues(4, ("r@a", "r@b"))  # 8 eligible
    strategy = by_machine_room(["r"])
    cid_all = cids(3)
    got = [strategy("g", c, mq_all, cid_all) for c in cid_all]
    # q=2, r=2: c0 → [0,1] + [6]; c1 → [2,3] + [7]; c2 → [4,5]
    assert got == [[mq_all[0], mq_all[1], mq_all[6]], [mq_all[2], mq_all[3], mq_all[7]],
                   [mq_all[4], mq_all[5]]]


def test_allocate_strategy_names():
    mq_all, cid_all = queues(8), cids(3)
    assert allocate("AVG", "g", cid_all[1], mq_all, cid_all) == averagely("g", cid_all[1], mq_all, cid_all)
    assert allocate("AVG_BY_CIRCLE", "g", cid_all[1], mq_all, cid_all) == averagely_by_circle(
        "g", cid_all[1], mq_all, cid_all)
    configured = [MessageQueue(TOPIC, "a", 0)]
    assert allocate("CONFIG", "g", "x", [], [], message_queue_list=configured) == configured
    with pytest.raises(ValueError):
        allocate("NOPE", "g", "x", mq_all, cid_all)


@settings(max_examples=150, deadline=None)
@given(n_per_broker=st.integers(1, 16), n_brokers=st.integers(1, 3), c=st.integers(1, 12),
       name=st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]))
def test_every_queue_allocated_exactly_once(n_per_broker, n_brokers, c, name):
    mq_all = queues(n_per_broker, tuple(f"broker-{i}" for i in range(n_brokers)))
    cid_all = cids(c)
    flat = [mq for cid in cid_all for mq in allocate(name, "g", cid, mq_all, cid_all)]
    assert sorted(flat) == mq_all


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), c=st.integers(1, 12))
def test_avg_sizes_differ_by_at_most_one(n, c):
    mq_all, cid_all = queues(n), cids(c)
    sizes = [len(averagely("g", cid, mq_all, cid_all)) for cid in cid_all]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the first n % c get the extra one


# --- ProcessQueue --------------------------------------------------------------------------------

def rec(offset: int, body: int = 10) -> MessageExt:
    """A stored message at queue offset `offset` (record size 100, body `body`)."""
    return MessageExt(msg_id=msg_id_of(0, offset + 1), topic=TOPIC, queue_id=0, queue_offset=offset,
                      phys_offset=offset * 100, size_bytes=100, store_us=0, tags=None, reconsume_times=0,
                      body_bytes=body, props=None)


def test_process_queue_sliding_window():
    pq = ProcessQueue(10, 0)
    pq.put([rec(o) for o in range(10, 15)])
    assert pq.queue_offset_max == 14 and pq.msg_count == 5 and pq.msg_size_bytes == 50
    assert pq.max_span() == 4
    assert pq.remove(12) == 10  # smallest still cached
    assert pq.remove(10) == 11
    assert pq.remove(11) == 13
    assert pq.remove(14) == 13
    assert pq.remove(13) == 15  # empty now: one past the highest fetched
    assert pq.msg_count == 0 and pq.msg_size_bytes == 0 and pq.max_span() == 0
    assert pq.remove(13) == -1  # already empty: no offset update


def test_process_queue_max_span_is_last_minus_first_cached_key():
    """getMaxSpan = msgTreeMap.lastKey() − firstKey(): consuming the highest cached message
    shrinks the span, although queueOffsetMax (the highest fetched) stays."""
    pq = ProcessQueue(10, 0)
    pq.put([rec(o) for o in range(10, 15)])
    assert pq.max_span() == 4
    assert pq.remove(14) == 10
    assert pq.queue_offset_max == 14 and pq.max_span() == 3
    assert pq.remove(10) == 11
    assert pq.max_span() == 2
    pq.put([rec(15)])
    assert pq.max_span() == 4  # 11..15


def test_process_queue_duplicate_put_not_counted_twice():
    pq = ProcessQueue(0, 0)
    pq.put([rec(0), rec(1)])
    pq.put([rec(1), rec(2)])
    assert pq.msg_count == 3 and pq.msg_size_bytes == 30 and pq.queue_offset_max == 2


def test_process_queue_offset_max_only_from_new_messages():
    pq = ProcessQueue(0, 0)
    pq.put([rec(5), rec(6)])
    pq.remove(5)
    pq.remove(6)  # empty; queue_offset_max 6
    pq.put([rec(3), rec(4), rec(6)])  # 6 is new again; fine
    assert pq.queue_offset_max == 6
    pq.put([rec(2), rec(6)])  # 2 new, 6 already cached → Java queueOffsetMax = 2
    assert pq.queue_offset_max == 2


def test_process_queue_remove_unknown_offset():
    pq = ProcessQueue(0, 0)
    pq.put([rec(5), rec(6)])
    assert pq.remove(99) == 5
    assert pq.msg_count == 2


def test_process_queue_slow_message_pins_offset():
    pq = ProcessQueue(0, 0)
    pq.put([rec(o) for o in range(5)])
    results = [pq.remove(o) for o in (1, 2, 3, 4)]
    assert results == [0, 0, 0, 0]
    pq.put([rec(5), rec(6)])
    assert pq.remove(0) == 5


# --- TopicPublishInfo / ThreadLocalIndex ---------------------------------------------------------

def route(brokers: dict[str, int], masterless: tuple[str, ...] = (), readonly: tuple[str, ...] = ()) -> TopicRouteData:
    qds = tuple(QueueData(b, n, n, 4 if b in readonly else 6) for b, n in brokers.items())
    bds = tuple(BrokerData(b, ((1, f"{b}-slave"),) if b in masterless else ((0, b),)) for b in brokers)
    return TopicRouteData(TOPIC, qds, bds)


def publish_info(brokers: dict[str, int], **kw):
    return topic_route_data_to_publish_info(route(brokers, **kw), random.Random(1), "5.x")


def select(info, last_broker=None):
    """selectOneMessageQueue of a 5.x producer with fault tolerance off."""
    return MQFaultStrategy("5.x", False).select_one_message_queue(info, last_broker, 0)


def test_publish_queues_order_and_filters():
    info = publish_info({"broker-b": 2, "broker-a": 3, "broker-c": 1, "broker-d": 1},
                        masterless=("broker-c",), readonly=("broker-d",))
    assert [(q.broker_name, q.queue_id) for q in info.message_queue_list] == [
        ("broker-a", 0), ("broker-a", 1), ("broker-a", 2), ("broker-b", 0), ("broker-b", 1)]


def test_select_round_robin():
    info = publish_info({"broker-b": 2, "broker-a": 2})
    info.send_which_queue = -1  # next increment gives 0
    got = [(q.broker_name, q.queue_id) for q in (select(info) for _ in range(6))]
    assert got == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1),
                   ("broker-a", 0), ("broker-a", 1)]


def test_select_retry_avoids_last_broker():
    info = publish_info({"broker-a": 3, "broker-b": 2})
    info.send_which_queue = -1  # next probe index 0 → broker-a q0
    mq = select(info, "broker-a")
    assert (mq.broker_name, mq.queue_id) == ("broker-b", 0)
    assert info.send_which_queue == 3  # each probe consumed one increment (0, 1, 2, 3)
    mq = select(info, "broker-b")
    assert (mq.broker_name, mq.queue_id) == ("broker-a", 0)  # index 4 (b1) skipped, 5 % 5 = 0


def test_select_retry_with_single_broker_falls_back_to_plain_selection():
    info = publish_info({"broker-a": 2})
    info.send_which_queue = -1
    mq = select(info, "broker-a")
    # 2 probes (0, 1) all on broker-a, then one plain selection: index 2 → q0
    assert (mq.broker_name, mq.queue_id) == ("broker-a", 0)
    assert info.send_which_queue == 2


def test_thread_local_index_java_int_wrap():
    idx = ThreadLocalIndex("5.x", rng=random.Random(1))
    idx.value = 0x7FFFFFFF - 1
    assert idx.increment_and_get() == 0x7FFFFFFF
    assert idx.increment_and_get() == 0  # Integer.MIN_VALUE & 0x7FFFFFFF
    assert idx.value == -(1 << 31)
    assert idx.increment_and_get() == 1
    assert idx.value == -(1 << 31) + 1


def test_thread_local_index_negative_start_masked():
    idx = ThreadLocalIndex("5.x", rng=random.Random(1))
    idx.value = -10
    assert idx.increment_and_get() == (-9) & 0x7FFFFFFF


def test_thread_local_index_start_is_a_java_int():
    for seed in range(50):
        idx = ThreadLocalIndex("5.x", rng=random.Random(seed))
        idx.increment_and_get()
        assert -(1 << 31) <= idx.value <= (1 << 31) - 1
