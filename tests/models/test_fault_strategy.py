"""models/producer/fault_strategy.py: the producer's fault-tolerant selection of 4.9.8 and 5.3.3.

Hand-written cases per behaviour, then `JAVA_TRACES`: scripted call sequences whose expected
results and states were produced by running the real Java classes (see the comment there).
"""

from __future__ import annotations

import random

import pytest

from models.java import (
    INTEGER_MAX_VALUE,
    INTEGER_MIN_VALUE,
    LONG_MAX_VALUE,
    LONG_MIN_VALUE,
    JavaRandom,
    java_abs_int,
    java_int,
    java_long,
    java_rem,
    java_shuffle,
)
from models.message import MessageQueue
from models.perm_name import PERM_READ
from models.producer.fault_strategy import MQFaultStrategy
from models.thread_local_index import ThreadLocalIndex
from models.topic_publish_info import QueueData, TopicPublishInfo

T = 1_700_000_000_000  # a clock value in ms
BROKERS = ("broker-a", "broker-b", "broker-c")


def route(queues_per_broker: int = 4, brokers=BROKERS, **kw) -> TopicPublishInfo:
    """As topicRouteData2TopicPublishInfo builds it: (brokerName asc, queueId asc)."""
    mqs = [MessageQueue("T", b, q) for b in brokers for q in range(queues_per_broker)]
    qds = [QueueData(b, queues_per_broker, 6) for b in brokers]
    return TopicPublishInfo(message_queue_list=mqs, queue_datas=qds, **kw)


def strategy(version: str, enable: bool = True, **kw) -> MQFaultStrategy:
    return MQFaultStrategy(client_version=version, send_latency_fault_enable=enable, **kw)


# --- Java arithmetic and randomness ---------------------------------------------------------------

def test_java_arithmetic() -> None:
    assert java_int(INTEGER_MAX_VALUE + 1) == INTEGER_MIN_VALUE
    assert java_int(INTEGER_MIN_VALUE - 1) == INTEGER_MAX_VALUE
    assert java_long(LONG_MAX_VALUE + 1) == LONG_MIN_VALUE
    assert java_abs_int(INTEGER_MIN_VALUE) == INTEGER_MIN_VALUE
    assert java_abs_int(-5) == 5
    assert java_rem(-7, 3) == -1 and java_rem(7, -3) == 1 and java_rem(INTEGER_MIN_VALUE, 12) == -8
    with pytest.raises(ZeroDivisionError):
        java_rem(1, 0)


def test_java_random_is_bit_exact() -> None:
    # Produced by java.util.Random(42) / Collections.shuffle(list 0..5, new Random(-7)) on Java 17.
    r = JavaRandom(42)
    assert [r.next_int(), r.next_int(), r.next_int()] == [-1170105035, 234785527, -1360544799]
    assert [r.next_int(10), r.next_int(10), r.next_int(16), r.next_int(INTEGER_MAX_VALUE), r.next_int(3)] == [
        4, 0, 15, 595021505, 2]
    items = list(range(6))
    java_shuffle(items, JavaRandom(-7))
    assert items == [3, 1, 0, 5, 2, 4]


# --- ThreadLocalIndex -------------------------------------------------------------------------------

class _DrawsMinValue(JavaRandom):
    def next_int(self, bound=None):
        return INTEGER_MIN_VALUE if bound is None else super().next_int(bound)


def test_thread_local_index_unset_start_per_version() -> None:
    # 4.x: Math.abs(nextInt()) then +1; 5.x: nextInt() then +1 (JavaRandom(42).nextInt() = -1170105035)
    v4, v5 = ThreadLocalIndex("4.x", rng=JavaRandom(42)), ThreadLocalIndex("5.x", rng=JavaRandom(42))
    assert v4.increment_and_get() == 1170105036 and v4.value == 1170105036
    assert v5.value is None
    assert v5.increment_and_get() == -1170105034 & 0x7FFFFFFF and v5.value == -1170105034
    # 4.x Math.abs(Integer.MIN_VALUE) stays negative: stored MIN + 1, returned masked
    low = ThreadLocalIndex("4.x", rng=_DrawsMinValue(0))
    assert low.increment_and_get() == 1 and low.value == INTEGER_MIN_VALUE + 1


@pytest.mark.parametrize("version", ["4.x", "5.x"])
def test_thread_local_index_wraps_like_java_int(version: str) -> None:
    idx = ThreadLocalIndex(version, value=INTEGER_MAX_VALUE)
    assert idx.increment_and_get() == 0 and idx.value == INTEGER_MIN_VALUE
    assert idx.increment_and_get() == 1 and idx.value == INTEGER_MIN_VALUE + 1
    idx.value = -1
    assert idx.increment_and_get() == 0 and idx.value == 0
    idx.value = -2
    assert idx.increment_and_get() == INTEGER_MAX_VALUE and idx.value == -1
    with pytest.raises(ValueError):
        idx.value = INTEGER_MAX_VALUE + 1


def test_reset_is_5x_only_and_draws_abs_next_int_max() -> None:
    idx = ThreadLocalIndex("5.x", value=-3, rng=JavaRandom(42))
    expected = JavaRandom(42).next_int(INTEGER_MAX_VALUE)
    idx.reset()
    assert idx.value == expected
    with pytest.raises(TypeError):
        ThreadLocalIndex("4.x", value=1).reset()


def test_python_random_streams_are_accepted_and_deterministic() -> None:
    a = ThreadLocalIndex("5.x", rng=random.Random(7))
    b = ThreadLocalIndex("5.x", rng=random.Random(7))
    assert a.increment_and_get() == b.increment_and_get()
    assert INTEGER_MIN_VALUE < a.value <= INTEGER_MAX_VALUE
    with pytest.raises(TypeError):
        ThreadLocalIndex("5.x", rng=object())


# --- computeNotAvailableDuration, updateFaultItem, isAvailable ------------------------------------

LATENCIES = [LONG_MIN_VALUE, -1, 0, 49, 50, 99, 100, 549, 550, 999, 1000, 1799, 1800, 1999, 2000, 2999, 3000,
             4999, 5000, 14999, 15000, 30000, LONG_MAX_VALUE]
# Produced by MQFaultStrategy.computeNotAvailableDuration of the 4.9.8 / 5.3.3 Java classes.
DURATIONS = {
    "4.x": [0, 0, 0, 0, 0, 0, 0, 0, 30000, 30000, 60000, 60000, 60000, 60000, 120000, 120000, 180000, 180000,
            180000, 180000, 600000, 600000, 600000],
    "5.x": [0, 0, 0, 0, 0, 0, 0, 0, 2000, 2000, 2000, 2000, 5000, 5000, 5000, 5000, 6000, 6000, 10000, 10000,
            30000, 30000, 30000],
}


@pytest.mark.parametrize("version", ["4.x", "5.x"])
def test_compute_not_available_duration_at_every_boundary(version: str) -> None:
    s = strategy(version)
    assert [s.compute_not_available_duration(x) for x in LATENCIES] == DURATIONS[version]


@pytest.mark.parametrize("version", ["4.x", "5.x"])
def test_update_does_nothing_when_fault_tolerance_is_off(version: str) -> None:
    s = strategy(version, enable=False)
    s.update_fault_item("broker-a", 5000, True, T, reachable=False)
    assert s.fault_item("broker-a") is None and dict(s.fault_item_table) == {}
    assert s.is_available("broker-a", T) and s.is_reachable("broker-a")


@pytest.mark.parametrize(("version", "latency", "isolated_ms"),
                         [("4.x", 550, 30000), ("4.x", 15000, 600000), ("5.x", 550, 2000), ("5.x", 15000, 30000)])
def test_availability_and_isolation_expiry(version: str, latency: int, isolated_ms: int) -> None:
    s = strategy(version)
    assert s.is_available("broker-a", T)  # no item: available
    s.update_fault_item("broker-a", latency, False, T)
    item = s.fault_item("broker-a")
    assert (item.current_latency, item.start_timestamp) == (latency, T + isolated_ms)
    assert not s.is_available("broker-a", T + isolated_ms - 1)
    assert s.is_available("broker-a", T + isolated_ms)
    assert s.is_available("broker-b", T)


@pytest.mark.parametrize(("version", "isolated_ms"), [("4.x", 600000), ("5.x", 10000)])
def test_isolation_uses_the_fixed_latency_but_stores_the_real_one(version: str, isolated_ms: int) -> None:
    s = strategy(version)
    s.update_fault_item("broker-a", 3, True, T)
    item = s.fault_item("broker-a")
    assert (item.current_latency, item.start_timestamp) == (3, T + isolated_ms)


def test_v4_overwrites_a_fast_success_ends_isolation() -> None:
    s = strategy("4.x")
    s.update_fault_item("broker-a", 0, True, T)
    assert not s.is_available("broker-a", T + 1000)
    s.update_fault_item("broker-a", 20, False, T + 1000)  # duration 0: startTimestamp = now
    assert s.fault_item("broker-a").start_timestamp == T + 1000 and s.is_available("broker-a", T + 1000)
    s.update_fault_item("broker-a", 1000, False, T + 2000)
    s.update_fault_item("broker-a", 550, False, T + 2001)  # shorter isolation replaces the longer one
    assert s.fault_item("broker-a").start_timestamp == T + 2001 + 30000


def test_v5_only_extends_isolation() -> None:
    s = strategy("5.x")
    s.update_fault_item("broker-a", 20, False, T)  # new item, duration 0: startTimestamp stays 0
    item = s.fault_item("broker-a")
    assert (item.start_timestamp, item.check_stamp, item.reachable_flag) == (0, 0, True)
    s.update_fault_item("broker-a", 0, True, T)
    assert item.start_timestamp == T + 10000
    s.update_fault_item("broker-a", 20, False, T + 1000)  # a fast success does not shorten it
    s.update_fault_item("broker-a", 600, False, T + 1000)  # nor does a shorter isolation
    assert (item.current_latency, item.start_timestamp) == (600, T + 10000)
    assert not s.is_available("broker-a", T + 9999)
    s.update_fault_item("broker-a", 15000, False, T + 1000)  # a longer one extends it
    assert item.start_timestamp == T + 31000


def test_v5_reachable_flag() -> None:
    s = strategy("5.x")
    s.update_fault_item("broker-a", 100, True, T, reachable=False)
    assert not s.is_reachable("broker-a") and s.fault_item("broker-a").reachable_flag is False
    # 5.3.3 isAvailable no longer reads reachableFlag
    assert s.is_available("broker-a", T + 10000)
    s.update_fault_item("broker-a", 100, False, T + 20000, reachable=True)
    assert s.is_reachable("broker-a")


def test_v4_has_no_reachability() -> None:
    s = strategy("4.x")
    s.update_fault_item("broker-a", 100, True, T, reachable=False)
    item = s.fault_item("broker-a")
    assert s.is_reachable("broker-a") and item.reachable_flag is None and item.check_stamp is None


def test_long_wrap_of_the_clock() -> None:
    near = LONG_MAX_VALUE - 10
    s4 = strategy("4.x")
    s4.update_fault_item("broker-a", 550, False, near)  # now + 30000 wraps negative
    assert s4.fault_item("broker-a").start_timestamp == java_long(near + 30000) < 0
    assert not s4.is_available("broker-a", near)  # (now - start) >= 0 in long arithmetic
    s5 = strategy("5.x")
    s5.update_fault_item("broker-a", 550, False, near)  # now + 2000 wraps below 0: not > 0, unchanged
    assert s5.fault_item("broker-a").start_timestamp == 0 and s5.is_available("broker-a", near)


def test_remove() -> None:
    for version in ("4.x", "5.x"):
        s = strategy(version)
        s.update_fault_item("broker-a", 0, True, T, reachable=False)
        s.remove("broker-a")
        s.remove("broker-x")  # absent: nothing happens
        assert s.fault_item("broker-a") is None and s.is_available("broker-a", T) and s.is_reachable("broker-a")


# --- pickOneAtLeast -----------------------------------------------------------------------------

def test_v4_pick_one_at_least_rotates_over_the_better_half() -> None:
    s = strategy("4.x", which_item_worst=10)
    for name, latency in [("broker-d", 3000), ("broker-a", 1000), ("broker-c", 2000), ("broker-b", 550)]:
        s.update_fault_item(name, latency, False, T)
    # all isolated; sorted by currentLatency: b, a, c, d; half = 2; index = increment % 2
    picks = [s.pick_one_at_least(T) for _ in range(4)]
    assert picks == ["broker-a", "broker-b", "broker-a", "broker-b"]  # 11 % 2, 12 % 2, ...
    assert s.which_item_worst == 14
    # available items sort first, whatever their latency: a, c (available), then b, d
    s.update_fault_item("broker-b", 5, True, T + 120000)
    assert [s.pick_one_at_least(T + 120000) for _ in range(2)] == ["broker-c", "broker-a"]


def test_v4_pick_one_at_least_edges() -> None:
    s = strategy("4.x", which_item_worst=INTEGER_MAX_VALUE)
    assert s.pick_one_at_least(T) is None
    s.update_fault_item("broker-a", 600, False, T)
    assert s.pick_one_at_least(T) == "broker-a" and s.which_item_worst == INTEGER_MAX_VALUE  # half 0: no increment
    s.update_fault_item("broker-b", 700, False, T)
    s.update_fault_item("broker-c", 800, False, T)
    assert s.pick_one_at_least(T) == "broker-a" and s.which_item_worst == INTEGER_MIN_VALUE  # wraps, & mask = 0


def test_v4_pick_ties_follow_insertion_order() -> None:
    s = strategy("4.x", which_item_worst=-1)  # next increment returns 0
    for name in ("broker-z", "broker-y", "broker-x", "broker-w"):
        s.update_fault_item(name, 600, False, T)  # identical sort keys
    assert s.pick_one_at_least(T) == "broker-z"


def test_v5_pick_one_at_least_returns_only_reachable_items() -> None:
    s = strategy("5.x", rng=random.Random(3))
    assert s.pick_one_at_least(T) is None
    s.update_fault_item("broker-a", 100, True, T, reachable=False)
    assert s.pick_one_at_least(T) is None
    for name in ("broker-b", "broker-c"):
        s.update_fault_item(name, 100, True, T, reachable=True)
    picks = {s.pick_one_at_least(T) for _ in range(50)}
    assert picks == {"broker-b", "broker-c"}
    assert s.which_item_worst is None  # 5.x keeps whichItemWorst but never uses it


# --- selectOneMessageQueue, 4.x ----------------------------------------------------------------

def test_v4_select_first_available_from_one_increment_and_no_last_broker_avoidance() -> None:
    s, tpi = strategy("4.x"), route(send_which_queue=-1)  # next increment returns 0
    assert s.select_one_message_queue(tpi, "broker-a", T) == MessageQueue("T", "broker-a", 0)  # last not avoided
    assert tpi.send_which_queue == 0
    s.update_fault_item("broker-a", 600, False, T)
    # increment -> 1; probes 1, 2, 3 (broker-a, unavailable), 4 (broker-b): one increment in all
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-b", 0)
    assert tpi.send_which_queue == 1
    assert s.select_one_message_queue(tpi, "broker-b", T) == MessageQueue("T", "broker-b", 0)
    assert tpi.send_which_queue == 2


def test_v4_select_falls_back_to_pick_one_at_least_with_a_new_queue() -> None:
    s = strategy("4.x", which_item_worst=0)
    mqs = [MessageQueue("T", b, q) for b in ("broker-a", "broker-b") for q in range(2)]
    tpi = TopicPublishInfo(message_queue_list=mqs, queue_datas=[QueueData("broker-a", 2), QueueData("broker-b", 8)],
                           send_which_queue=10)
    s.update_fault_item("broker-a", 3000, False, T)
    s.update_fault_item("broker-b", 2000, False, T)  # lower latency: pickOneAtLeast's choice
    mq = s.select_one_message_queue(tpi, None, T)
    # increments: the probe start (11), the plain selection (12), the queue id (13 % 8 from writeQueueNums)
    assert tpi.send_which_queue == 13
    assert mq == MessageQueue("T", "broker-b", 5) and mq not in mqs
    assert s.which_item_worst == 1


def test_v4_select_non_writable_queue_data_removes_the_item() -> None:
    s = strategy("4.x", which_item_worst=0)
    mqs = [MessageQueue("T", "broker-a", q) for q in range(2)]
    qds = [QueueData("broker-a", 2, PERM_READ)]  # readable, not writable
    tpi = TopicPublishInfo(message_queue_list=mqs, queue_datas=qds, send_which_queue=0)
    s.update_fault_item("broker-a", 3000, False, T)
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-a", 0)  # plain: 2 % 2
    assert tpi.send_which_queue == 2  # probe start + plain selection
    assert s.fault_item("broker-a") is None  # 4.9.8 getQueueIdByBroker saw no writable QueueData


def test_v4_select_probe_index_wraps_to_position_zero() -> None:
    # returned index 2^31-1 probes position 7, then the local index++ wraps to MIN_VALUE:
    # Math.abs(MIN_VALUE) % 12 = -8 -> position 0
    s, tpi = strategy("4.x"), route(send_which_queue=INTEGER_MAX_VALUE - 1)
    s.update_fault_item("broker-b", 600, False, T)
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-a", 0)
    assert tpi.send_which_queue == INTEGER_MAX_VALUE


def test_v4_select_with_fault_tolerance_off_avoids_the_last_broker() -> None:
    s, tpi = strategy("4.x", enable=False), route(send_which_queue=-1)
    s.update_fault_item("broker-a", 15000, True, T)  # ignored
    assert s.select_one_message_queue(tpi, "broker-a", T, reset_index=True) == MessageQueue("T", "broker-b", 0)
    assert tpi.send_which_queue == 4  # four probes: positions 1..4 (reset_index ignored in 4.x)
    only_a = route(brokers=("broker-a",), send_which_queue=0)
    assert s.select_one_message_queue(only_a, "broker-a", T) == MessageQueue("T", "broker-a", 1)
    assert only_a.send_which_queue == 5  # size probes + one plain selection


# --- selectOneMessageQueue, 5.x ----------------------------------------------------------------

def test_v5_select_available_and_not_last_broker() -> None:
    s, tpi = strategy("5.x"), route(send_which_queue=-1)
    assert s.select_one_message_queue(tpi, "broker-a", T) == MessageQueue("T", "broker-b", 0)
    assert tpi.send_which_queue == 4  # each probe one increment: positions 0..4
    s.update_fault_item("broker-c", 600, False, T)
    assert s.select_one_message_queue(tpi, "broker-b", T) == MessageQueue("T", "broker-a", 0)
    assert tpi.send_which_queue == 12  # positions 5..11 (b, c unavailable) then 0


def test_v5_select_reachable_pass_then_plain() -> None:
    s, tpi = strategy("5.x"), route(send_which_queue=-1)
    for b in BROKERS:
        s.update_fault_item(b, 100, True, T, reachable=(b == "broker-c"))
    # pass 1 fails (12 increments), pass 2 finds broker-c at position 8 (9 more)
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-c", 0)
    assert tpi.send_which_queue == 12 + 8
    tpi.send_which_queue = -1
    # broker-c is the last broker: both passes fail (24 increments), then one plain selection
    assert s.select_one_message_queue(tpi, "broker-c", T) == MessageQueue("T", "broker-a", 0)
    assert tpi.send_which_queue == 24


def test_v5_select_reset_index_only_with_fault_tolerance_on() -> None:
    tpi = route(send_which_queue=5, rng=JavaRandom(11))
    expected = JavaRandom(11).next_int(INTEGER_MAX_VALUE)
    strategy("5.x", enable=False).select_one_message_queue(tpi, None, T, reset_index=True)
    assert tpi.send_which_queue == 6
    strategy("5.x").select_one_message_queue(tpi, None, T, reset_index=True)
    assert tpi.send_which_queue == expected + 1


def test_v5_select_with_fault_tolerance_off() -> None:
    s, tpi = strategy("5.x", enable=False), route(send_which_queue=-1)
    s.update_fault_item("broker-b", 15000, True, T)  # ignored
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-a", 0)
    assert s.select_one_message_queue(tpi, "broker-a", T) == MessageQueue("T", "broker-b", 0)
    assert tpi.send_which_queue == 4
    only_a = route(brokers=("broker-a",), send_which_queue=0)
    assert s.select_one_message_queue(only_a, "broker-a", T) == MessageQueue("T", "broker-a", 1)
    assert only_a.send_which_queue == 5


@pytest.mark.parametrize("version", ["4.x", "5.x"])
def test_select_counter_wraps_at_max_and_min(version: str) -> None:
    s, tpi = strategy(version), route(send_which_queue=INTEGER_MAX_VALUE)
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-a", 0)  # MIN & mask = 0
    assert tpi.send_which_queue == INTEGER_MIN_VALUE
    assert s.select_one_message_queue(tpi, None, T) == MessageQueue("T", "broker-a", 1)
    assert tpi.send_which_queue == INTEGER_MIN_VALUE + 1


@pytest.mark.parametrize(("version", "increments"), [("4.x", 3), ("5.x", 1)])
def test_select_from_an_empty_list_raises_after_counting(version: str, increments: int) -> None:
    # Java: ArithmeticException (/ by zero); 4.9.8 catches the first one inside its fallback
    s = strategy(version)
    tpi = TopicPublishInfo(message_queue_list=[], queue_datas=[QueueData("broker-a", 4)], send_which_queue=10)
    s.update_fault_item("broker-a", 600, False, T)
    with pytest.raises(ZeroDivisionError):
        s.select_one_message_queue(tpi, None, T)
    assert tpi.send_which_queue == 10 + increments


def test_topic_publish_info_adopts_the_strategy_version() -> None:
    tpi = route()
    assert tpi.client_version is None
    strategy("4.x").select_one_message_queue(tpi, None, T)
    assert tpi.client_version == "4.x" and tpi.send_which_queue_index.client_version == "4.x"
    with pytest.raises(ValueError):
        strategy("5.x").select_one_message_queue(tpi, None, T)
    with pytest.raises(ValueError):
        MQFaultStrategy(client_version="6.x")


# --- 5.x detector -------------------------------------------------------------------------------

def test_detect_by_one_round() -> None:
    s = strategy("5.x", detect_interval_ms=2000)
    for b in BROKERS:
        s.update_fault_item(b, 100, True, T, reachable=False)
    calls = []
    addrs = {"broker-a": "10.0.0.1:10911", "broker-b": "10.0.0.2:10911", "broker-c": None}

    def resolve(name):
        calls.append(("resolve", name))
        return addrs[name]

    def probe(addr):
        calls.append(("probe", addr))
        return addr == "10.0.0.1:10911"

    s.detect_by_one_round(T, resolve, probe)
    assert calls == [("resolve", "broker-a"), ("probe", "10.0.0.1:10911"), ("resolve", "broker-b"),
                     ("probe", "10.0.0.2:10911"), ("resolve", "broker-c")]
    assert list(s.fault_item_table) == ["broker-a", "broker-b"]  # no master address: item removed
    assert s.is_reachable("broker-a") and not s.is_reachable("broker-b")
    assert s.fault_item("broker-a").check_stamp == s.fault_item("broker-b").check_stamp == T + 2000
    calls.clear()
    s.detect_by_one_round(T + 1999, resolve, probe)  # not due
    assert calls == []
    s.detect_by_one_round(T + 2000, resolve, lambda addr: False)  # a failed probe never clears the flag
    assert s.is_reachable("broker-a") and s.fault_item("broker-a").check_stamp == T + 4000
    s.detect_by_one_round(T + 4000, resolve, None)  # Java's null ServiceDetector: stamps only
    assert not s.is_reachable("broker-b") and s.fault_item("broker-b").check_stamp == T + 6000
    with pytest.raises(TypeError):
        strategy("4.x").detect_by_one_round(T, resolve, probe)


def test_detect_in_two_halves_applies_to_the_item_object() -> None:
    s = strategy("5.x")
    s.update_fault_item("broker-a", 100, True, T, reachable=False)
    item = s.fault_item("broker-a")
    addr = s.latency_fault_tolerance.detect_begin(item, T, lambda name: "addr")
    s.remove("broker-a")  # removed while the probe is in flight
    s.latency_fault_tolerance.detect_end(item, addr == "addr")
    assert item.reachable_flag and s.fault_item("broker-a") is None


def test_constructor_options() -> None:
    s = MQFaultStrategy(client_version="5.x", send_latency_fault_enable=True, start_detector_enable=True,
                        detect_timeout_ms=300, detect_interval_ms=4000)
    assert (s.start_detector_enable, s.detect_timeout_ms, s.detect_interval_ms) == (True, 300, 4000)
    assert MQFaultStrategy().send_latency_fault_enable is False
    d = MQFaultStrategy()
    defaults = (d.client_version, d.start_detector_enable, d.detect_timeout_ms, d.detect_interval_ms)
    assert defaults == ("5.x", False, 200, 2000)
    with pytest.raises(ValueError):
        MQFaultStrategy(client_version="4.x", start_detector_enable=True)


# --- Traces of the real Java classes ----------------------------------------------------------

QD3 = [("broker-a", 4, 6), ("broker-b", 4, 6), ("broker-c", 4, 6)]
MQ3 = [("T", b, q) for b, _, _ in QD3 for q in range(4)]

# Produced by running the real Java classes of rocketmq-all-4.9.8 and rocketmq-all-5.3.3
# (MQFaultStrategy, LatencyFaultToleranceImpl, TopicPublishInfo, ThreadLocalIndex; the clock
# substituted for System.currentTimeMillis(), the Random objects seeded with the given seeds:
# whichItemWorst's with `wiw_seed`, Collections.shuffle's with `shuffle_seed`, sendWhichQueue's
# with the `tpi` step's seed). Each row: (call, Java's result, then the state after it:
# sendWhichQueue's stored value, whichItemWorst's, and the fault items in ConcurrentHashMap
# iteration order: name -> (currentLatency, startTimestamp[, checkStamp, reachableFlag])).
JAVA_TRACES = {
    'v4_fault_on': ('4.x', True, 7, 0, [
        (('tpi', 11, QD3, MQ3), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('swq', 2147483646), None, 2147483646, None, {}),
        (('select', None, False), ('T', 'broker-b', 3), 2147483647, None, {}),
        (('select', 'broker-a', False), ('T', 'broker-a', 0), -2147483648, None, {}),
        (('update', 'broker-a', 600, False, True), None, -2147483648, None, {'broker-a': (600, T + 30000)}),
        (('avail', 'broker-a'), False, -2147483648, None, {'broker-a': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-b', 0), -2147483647, None, {'broker-a': (600, T + 30000)}),
        (('select', 'broker-b', False), ('T', 'broker-b', 0), -2147483646, None, {'broker-a': (600, T + 30000)}),
        (('select', 'broker-b', False), ('T', 'broker-b', 0), -2147483645, None, {'broker-a': (600, T + 30000)}),
        (('update', 'broker-b', 120, True, True), None, -2147483645, None, {'broker-b': (120, T + 600000), 'broker-a': (600, T + 30000)}),
        (('update', 'broker-c', 1000, False, True), None, -2147483645, None, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('avail', 'broker-b'), False, -2147483645, None, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('avail', 'broker-c'), False, -2147483645, None, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('wiw', 2147483647), None, -2147483645, 2147483647, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('pick',), 'broker-b', -2147483645, -2147483648, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('pick',), 'broker-b', -2147483645, -2147483647, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-b', 2), -2147483642, -2147483646, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-b', 1), -2147483639, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('clock', T + 29999), None, -2147483639, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('avail', 'broker-a'), False, -2147483639, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('clock', T + 30000), None, -2147483639, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('avail', 'broker-a'), True, -2147483639, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-a', 0), -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (1000, T + 60000), 'broker-a': (600, T + 30000)}),
        (('update', 'broker-c', 20, False, True), None, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000), 'broker-a': (600, T + 30000)}),
        (('avail', 'broker-c'), True, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000), 'broker-a': (600, T + 30000)}),
        (('update', 'broker-a', 550, False, True), None, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000), 'broker-a': (550, T + 60000)}),
        (('update', 'broker-a', 549, False, True), None, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000), 'broker-a': (549, T + 30000)}),
        (('avail', 'broker-a'), True, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000), 'broker-a': (549, T + 30000)}),
        (('remove', 'broker-a'), None, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000)}),
        (('avail', 'broker-a'), True, -2147483638, -2147483645, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000)}),
        (('pick',), 'broker-c', -2147483638, -2147483644, {'broker-b': (120, T + 600000), 'broker-c': (20, T + 30000)}),
    ]),
    'v4_pick_fallback_not_writable': ('4.x', True, 3, 0, [
        (('tpi', 5, [('broker-a', 2, 6), ('broker-b', 2, 4)], [('T', 'broker-a', 0), ('T', 'broker-a', 1), ('T', 'broker-b', 0), ('T', 'broker-b', 1)]), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('swq', -2147483648), None, -2147483648, None, {}),
        (('update', 'broker-a', 3000, False, True), None, -2147483648, None, {'broker-a': (3000, T + 180000)}),
        (('update', 'broker-b', 2000, False, True), None, -2147483648, None, {'broker-b': (2000, T + 120000), 'broker-a': (3000, T + 180000)}),
        (('select', None, False), ('T', 'broker-b', 0), -2147483646, 1155099829, {'broker-a': (3000, T + 180000)}),
        (('select', None, False), ('T', 'broker-b', 1), -2147483645, 1155099829, {'broker-a': (3000, T + 180000)}),
        (('update', 'broker-a', 100, True, True), None, -2147483645, 1155099829, {'broker-a': (100, T + 600000)}),
        (('wiw', None), None, -2147483645, None, {'broker-a': (100, T + 600000)}),
        (('pick',), 'broker-a', -2147483645, None, {'broker-a': (100, T + 600000)}),
        (('select', None, False), ('T', 'broker-b', 0), -2147483644, None, {'broker-a': (100, T + 600000)}),
        (('select', 'broker-a', False), ('T', 'broker-b', 0), -2147483643, None, {'broker-a': (100, T + 600000)}),
        (('update', 'broker-b', 200, True, True), None, -2147483643, None, {'broker-b': (200, T + 600000), 'broker-a': (100, T + 600000)}),
        (('select', None, False), ('T', 'broker-a', 0), -2147483640, 1879439977, {'broker-b': (200, T + 600000), 'broker-a': (100, T + 600000)}),
        (('select', None, False), ('T', 'broker-a', 1), -2147483637, 1879439978, {'broker-b': (200, T + 600000), 'broker-a': (100, T + 600000)}),
        (('update', 'broker-a', 5000, True, True), None, -2147483637, 1879439978, {'broker-b': (200, T + 600000), 'broker-a': (5000, T + 600000)}),
        (('select', None, False), ('T', 'broker-a', 1), -2147483635, 1879439979, {'broker-a': (5000, T + 600000)}),
        (('pick',), 'broker-a', -2147483635, 1879439979, {'broker-a': (5000, T + 600000)}),
    ]),
    'v4_probe_wrap': ('4.x', True, 1, 0, [
        (('tpi', 9, QD3, MQ3), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('update', 'broker-b', 600, False, True), None, None, None, {'broker-b': (600, T + 30000)}),
        (('swq', 2147483646), None, 2147483646, None, {'broker-b': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-a', 0), 2147483647, None, {'broker-b': (600, T + 30000)}),
        (('update', 'broker-a', 600, False, True), None, 2147483647, None, {'broker-b': (600, T + 30000), 'broker-a': (600, T + 30000)}),
        (('swq', 2147483646), None, 2147483646, None, {'broker-b': (600, T + 30000), 'broker-a': (600, T + 30000)}),
        (('select', None, False), ('T', 'broker-c', 3), 2147483647, None, {'broker-b': (600, T + 30000), 'broker-a': (600, T + 30000)}),
    ]),
    'v4_fault_off': ('4.x', False, 1, 0, [
        (('tpi', 42, [('broker-a', 2, 6), ('broker-b', 2, 6)], [('T', 'broker-a', 0), ('T', 'broker-a', 1), ('T', 'broker-b', 0), ('T', 'broker-b', 1)]), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('update', 'broker-a', 5000, True, True), None, None, None, {}),
        (('avail', 'broker-a'), True, None, None, {}),
        (('select', None, False), ('T', 'broker-a', 0), 1170105036, None, {}),
        (('select', 'broker-a', False), ('T', 'broker-b', 0), 1170105038, None, {}),
        (('select', 'broker-b', False), ('T', 'broker-a', 0), 1170105040, None, {}),
        (('select', 'broker-x', True), ('T', 'broker-a', 1), 1170105041, None, {}),
        (('swq', 2147483647), None, 2147483647, None, {}),
        (('select', 'broker-a', False), ('T', 'broker-b', 0), -2147483646, None, {}),
        (('swq', -1), None, -1, None, {}),
        (('select', None, False), ('T', 'broker-a', 0), 0, None, {}),
    ]),
    'v5_fault_on': ('5.x', True, 7, 99, [
        (('tpi', 11, QD3, MQ3), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('swq', 2147483646), None, 2147483646, None, {}),
        (('select', None, False), ('T', 'broker-b', 3), 2147483647, None, {}),
        (('select', 'broker-a', False), ('T', 'broker-b', 0), -2147483644, None, {}),
        (('update', 'broker-a', 600, False, True), None, -2147483644, None, {'broker-a': (600, T + 2000, 0, True)}),
        (('avail', 'broker-a'), False, -2147483644, None, {'broker-a': (600, T + 2000, 0, True)}),
        (('reach', 'broker-a'), True, -2147483644, None, {'broker-a': (600, T + 2000, 0, True)}),
        (('update', 'broker-a', 20, False, True), None, -2147483644, None, {'broker-a': (20, T + 2000, 0, True)}),
        (('update', 'broker-a', 560, False, True), None, -2147483644, None, {'broker-a': (560, T + 2000, 0, True)}),
        (('select', None, False), ('T', 'broker-b', 1), -2147483643, None, {'broker-a': (560, T + 2000, 0, True)}),
        (('select', 'broker-b', False), ('T', 'broker-c', 0), -2147483640, None, {'broker-a': (560, T + 2000, 0, True)}),
        (('update', 'broker-b', 120, True, False), None, -2147483640, None, {'broker-b': (120, T + 10000, 0, False), 'broker-a': (560, T + 2000, 0, True)}),
        (('reach', 'broker-b'), False, -2147483640, None, {'broker-b': (120, T + 10000, 0, False), 'broker-a': (560, T + 2000, 0, True)}),
        (('avail', 'broker-b'), False, -2147483640, None, {'broker-b': (120, T + 10000, 0, False), 'broker-a': (560, T + 2000, 0, True)}),
        (('update', 'broker-c', 1800, False, True), None, -2147483640, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (1800, T + 5000, 0, True), 'broker-a': (560, T + 2000, 0, True)}),
        (('select', None, False), ('T', 'broker-c', 1), -2147483627, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (1800, T + 5000, 0, True), 'broker-a': (560, T + 2000, 0, True)}),
        (('select', 'broker-c', False), ('T', 'broker-a', 0), -2147483612, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (1800, T + 5000, 0, True), 'broker-a': (560, T + 2000, 0, True)}),
        (('select', 'broker-a', False), ('T', 'broker-c', 0), -2147483592, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (1800, T + 5000, 0, True), 'broker-a': (560, T + 2000, 0, True)}),
        (('update', 'broker-a', 100, True, False), None, -2147483592, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (1800, T + 5000, 0, True), 'broker-a': (100, T + 10000, 0, False)}),
        (('update', 'broker-c', 100, True, False), None, -2147483592, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (100, T + 10000, 0, False), 'broker-a': (100, T + 10000, 0, False)}),
        (('select', None, False), ('T', 'broker-c', 1), -2147483567, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (100, T + 10000, 0, False), 'broker-a': (100, T + 10000, 0, False)}),
        (('select', None, True), ('T', 'broker-b', 3), 1568394763, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (100, T + 10000, 0, False), 'broker-a': (100, T + 10000, 0, False)}),
        (('pick',), None, 1568394763, None, {'broker-b': (120, T + 10000, 0, False), 'broker-c': (100, T + 10000, 0, False), 'broker-a': (100, T + 10000, 0, False)}),
        (('detect', {'broker-a': '10.0.0.1:10911', 'broker-b': '10.0.0.2:10911', 'broker-c': None}, {'10.0.0.1:10911': True, '10.0.0.2:10911': False}), [('r', 'broker-b'), ('p', '10.0.0.2:10911'), ('r', 'broker-c'), ('r', 'broker-a'), ('p', '10.0.0.1:10911')], 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('reach', 'broker-a'), True, 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('pick',), 'broker-a', 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('pick',), 'broker-a', 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('clock', T + 1999), None, 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('detect', {'broker-a': '10.0.0.1:10911', 'broker-b': '10.0.0.2:10911'}, {'10.0.0.2:10911': True}), [], 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('clock', T + 2000), None, 1568394763, None, {'broker-b': (120, T + 10000, T + 2000, False), 'broker-a': (100, T + 10000, T + 2000, True)}),
        (('detect', {'broker-a': '10.0.0.1:10911', 'broker-b': '10.0.0.2:10911'}, {'10.0.0.2:10911': True}), [('r', 'broker-b'), ('p', '10.0.0.2:10911'), ('r', 'broker-a'), ('p', '10.0.0.1:10911')], 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('update', 'broker-c', 60, False, True), None, 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('pick',), 'broker-c', 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('pick',), 'broker-b', 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('pick',), 'broker-c', 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('clock', T + 9999), None, 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('avail', 'broker-b'), False, 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('clock', T + 10000), None, 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('avail', 'broker-b'), True, 1568394763, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('select', 'broker-b', False), ('T', 'broker-c', 0), 1568394764, None, {'broker-b': (120, T + 10000, T + 4000, True), 'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('remove', 'broker-b'), None, 1568394764, None, {'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('reach', 'broker-b'), True, 1568394764, None, {'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('wiw', 5), None, 1568394764, 5, {'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
        (('pick',), 'broker-a', 1568394764, 5, {'broker-c': (60, 0, 0, True), 'broker-a': (100, T + 10000, T + 4000, True)}),
    ]),
    'v5_fault_off': ('5.x', False, 1, 0, [
        (('tpi', 42, [('broker-a', 2, 6), ('broker-b', 2, 6)], [('T', 'broker-a', 0), ('T', 'broker-a', 1), ('T', 'broker-b', 0), ('T', 'broker-b', 1)]), None, None, None, {}),
        (('clock', T), None, None, None, {}),
        (('update', 'broker-a', 5000, True, False), None, None, None, {}),
        (('avail', 'broker-a'), True, None, None, {}),
        (('select', None, False), ('T', 'broker-b', 0), -1170105034, None, {}),
        (('select', 'broker-a', True), ('T', 'broker-b', 1), -1170105033, None, {}),
        (('select', 'broker-b', False), ('T', 'broker-a', 0), -1170105032, None, {}),
        (('select', 'broker-x', False), ('T', 'broker-a', 1), -1170105031, None, {}),
        (('swq', 2147483647), None, 2147483647, None, {}),
        (('select', 'broker-a', False), ('T', 'broker-b', 0), -2147483646, None, {}),
        (('swq', -2147483648), None, -2147483648, None, {}),
        (('select', None, False), ('T', 'broker-a', 1), -2147483647, None, {}),
    ]),
}


def _impose_order(s: MQFaultStrategy, names: list[str]) -> None:
    """Give the table Java's iteration order (the module documents insertion order instead)."""
    table = s.latency_fault_tolerance.fault_item_table
    if list(table) != names and set(table) == set(names):
        reordered = {n: table[n] for n in names}
        table.clear()
        table.update(reordered)


def _call(s: MQFaultStrategy, tpi: TopicPublishInfo | None, now: int, step: tuple):
    op, *args = step
    if op == "update":
        return s.update_fault_item(args[0], args[1], args[2], now, reachable=args[3])
    if op == "select":
        mq = s.select_one_message_queue(tpi, args[0], now, reset_index=args[1])
        return tuple(mq)
    if op == "avail":
        return s.is_available(args[0], now)
    if op == "reach":
        return s.is_reachable(args[0])
    if op == "pick":
        return s.pick_one_at_least(now)
    if op == "remove":
        return s.remove(args[0])
    if op == "detect":
        calls = []

        def resolve(name):
            calls.append(("r", name))
            return args[0].get(name)

        def probe(addr):
            calls.append(("p", addr))
            return args[1].get(addr, False)

        s.detect_by_one_round(now, resolve, probe)
        return calls
    raise AssertionError(op)


@pytest.mark.parametrize("name", list(JAVA_TRACES))
def test_matches_java_traces(name: str) -> None:
    version, enable, wiw_seed, shuffle_seed, rows = JAVA_TRACES[name]
    s = strategy(version, enable, rng=JavaRandom(wiw_seed), shuffle_rng=JavaRandom(shuffle_seed))
    tpi, now, order = None, 0, []
    for i, (step, result, swq, wiw, items) in enumerate(rows):
        _impose_order(s, order)
        op = step[0]
        if op == "tpi":
            _, seed, qds, mqs = step
            tpi = TopicPublishInfo(message_queue_list=[MessageQueue(*m) for m in mqs],
                                   queue_datas=[QueueData(*q) for q in qds], rng=JavaRandom(seed))
            got = None
        elif op == "clock":
            now, got = step[1], None
        elif op == "swq":
            tpi.send_which_queue, got = step[1], None
        elif op == "wiw":
            s.which_item_worst, got = step[1], None
        else:
            got = _call(s, tpi, now, step)
        where = f"{name} row {i}: {step}"
        assert got == result, where
        assert (tpi.send_which_queue, s.which_item_worst) == (swq, wiw), where
        extra = (lambda it: (it.check_stamp, it.reachable_flag)) if version == "5.x" else (lambda it: ())
        state = {n: (it.current_latency, it.start_timestamp) + extra(it) for n, it in s.fault_item_table.items()}
        assert state == items, where
        order = list(items)
