"""Timer messages' Java-checked entry point and the TimerMessageStore's timeline (5.3.3).

`models.broker.timer_slot_ms` mirrors HookUtils.transformTimerMessage: vectors derived from its
code (`deliverMs > currentTimeMillis` else delivered at once; `deliverMs - now >
timerMaxDelaySec * 1000L` → WHEEL_TIMER_MSG_ILLEGAL; `deliverMs % precision == 0 ? deliverMs -
precision : deliverMs / precision * precision`, Java's truncating long division). The model
uses it: a send beyond the maximum delay is answered MESSAGE_ILLEGAL and not stored (D14), a
legal one is parked in the slot it computes. The get services' 100 ms polls
(TimerEnqueueGetService, TimerDequeueGetService: `waitForRunning(100L * precisionMs / 1000)`)
decide when a unit reaches the wheel and when a slot is read (D17).
"""

from __future__ import annotations

from typing import Any

import pytest

import models.broker as broker_pkg
import models.broker.timer_store as timer_store
from models.broker import TimerMessageIllegal, timer_slot_ms
from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.message import PROPERTY_TIMER_DELIVER_MS, TIMER_TOPIC, Message, msg_id_of, record_bytes
from models.protocol import MESSAGE_ILLEGAL, SUCCESS, SendMessage, SendResponse
from models.records import BROKER_SEND_REJECTED, BROKER_STORED, TIMER_DELIVERED, TIMER_ENQUEUED
from sim.disk import DiskConfig
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

S, MS = 1_000_000, 1_000
DAYS_3_S = 259_200  # timerMaxDelaySec
HALF = 500  # one-way latency µs
TOPIC = "T"

# (now_ms, deliver_ms, precision_ms, max_delay_s) → slot ms, or None (delivered at once)
VECTORS = [
    ((0, 0, 1000, DAYS_3_S), None),  # not after now
    ((1000, 999, 1000, DAYS_3_S), None),  # in the past
    ((1000, 1000, 1000, DAYS_3_S), None),  # deliverMs > now fails on equality
    ((1000, 1001, 1000, DAYS_3_S), 1000),
    ((0, 10_500, 1000, DAYS_3_S), 10_000),
    ((0, 10_000, 1000, DAYS_3_S), 9_000),  # on the dot: one precision earlier
    ((0, 1_000, 1000, DAYS_3_S), 0),
    ((0, 10_999, 1000, DAYS_3_S), 10_000),
    ((0, 250, 100, DAYS_3_S), 200),
    ((0, 300, 100, DAYS_3_S), 200),
    ((0, 700, 500, DAYS_3_S), 500),
    ((0, 1_000, 500, DAYS_3_S), 500),
    ((0, 259_200_000, 1000, DAYS_3_S), 259_199_000),  # exactly the maximum delay: allowed
    ((5_000, 15_000, 1000, 10), 14_000),  # a 10 s maximum, exactly 10 s ahead, on the dot
    ((1_700_000_000_123, 1_700_000_005_623, 1000, DAYS_3_S), 1_700_000_005_000),  # epoch milliseconds
    ((-5_000, -1_500, 1000, DAYS_3_S), -1_000),  # Java's long division truncates toward zero
    ((-5_000, -2_000, 1000, DAYS_3_S), -3_000),
]
ILLEGAL = [
    (0, 259_200_001, 1000, DAYS_3_S),  # one ms beyond 3 days
    (5_000, 15_001, 1000, 10),
    (1_700_000_000_000, 1_700_000_000_000 + 259_200_000 + 1, 1000, DAYS_3_S),
]


@pytest.mark.parametrize(("args", "want"), VECTORS)
def test_timer_slot_ms_vectors_from_hook_utils(args: tuple, want: int | None) -> None:
    assert timer_slot_ms(*args) == want


@pytest.mark.parametrize("args", ILLEGAL)
def test_timer_slot_ms_beyond_the_maximum_delay_is_illegal(args: tuple) -> None:
    with pytest.raises(TimerMessageIllegal):
        timer_slot_ms(*args)


def test_entry_points_are_exported_with_java_defaults() -> None:
    assert {"timer_slot_ms", "TimerMessageIllegal"} <= set(broker_pkg.__all__)
    assert issubclass(TimerMessageIllegal, ValueError)
    assert timer_slot_ms(0, 10_500) == 10_000  # precision_ms=1000
    assert timer_slot_ms(0, DAYS_3_S * 1000) == DAYS_3_S * 1000 - 1000  # max_delay_s=259200
    with pytest.raises(TimerMessageIllegal):
        timer_slot_ms(0, DAYS_3_S * 1000 + 1)
    assert MessageStoreConfig().timer_max_delay_sec == DAYS_3_S


def test_timer_precision_is_one_of_javas_candidates() -> None:
    for ok in (100, 200, 500, 1000):
        assert MessageStoreConfig(timer_precision_ms=ok).timer_precision_ms == ok
    with pytest.raises(ValueError, match="100, 200, 500 or 1000"):
        MessageStoreConfig(timer_precision_ms=300)


# --- the model --------------------------------------------------------------------------------------

def world(**store_kw: Any) -> tuple[SimEnv, Broker, Node, list]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=HALF / 1000))
    cfg = MessageStoreConfig(mapped_file_size_commit_log_bytes=1 << 20, **store_kw)
    b = Broker(env, "broker-a", "zone-a", cfg, BrokerConfig(), DiskConfig(), {TOPIC: 4}, [])
    client = Node(env, "client")
    for node in (b.node, client):
        net.add_node(node)
        node.start()
    replies: list[tuple[int, int, int]] = []
    return env, b, client, replies


def send(env: SimEnv, client: Node, replies: list, seq: int, at_us: int, deliver_us: int) -> None:
    """A timer message sent at `at_us` (it reaches the broker at + 0.5 ms) asking for `deliver_us`."""
    props = {PROPERTY_TIMER_DELIVER_MS: deliver_us}
    m = Message(msg_id_of(0, seq), TOPIC, None, -1, 100, at_us, record_bytes(TOPIC, 100, None, 0, props), 0, 0, props)
    env.call_later(at_us - env.now, client.rpc, "broker-a", SendMessage(m, 0), 10 * S,
                   lambda r: replies.append((env.now, seq, r.code if isinstance(r, SendResponse) else None)))


def of(env: SimEnv, kind: str) -> list[tuple]:
    return list(env.tracer.of_kind(kind))


def test_a_delay_beyond_timer_max_delay_sec_is_refused_message_illegal_and_not_stored() -> None:
    env, b, client, replies = world(timer_max_delay_sec=60)
    at = 2 * S
    arrive_ms = (at + HALF) // MS
    send(env, client, replies, 1, at, (arrive_ms + 60_000) * MS + 999)  # exactly 60 s ahead in ms: parked
    send(env, client, replies, 2, at, (arrive_ms + 60_001) * MS)  # 1 ms more: refused
    env.run(until=3 * S)
    assert sorted(replies) == [(at + 2 * HALF, 1, SUCCESS), (at + 2 * HALF, 2, MESSAGE_ILLEGAL)]
    refused = [(r[3], r[5]) for r in of(env, BROKER_SEND_REJECTED)]
    assert refused == [(msg_id_of(0, 2), MESSAGE_ILLEGAL)]
    stored = [(r[3], r[4]) for r in of(env, BROKER_STORED)]
    assert stored == [(msg_id_of(0, 1), TIMER_TOPIC)]  # nothing of message 2 reached the CommitLog
    (parked,) = of(env, TIMER_ENQUEUED)
    assert parked[6] == timer_slot_ms(arrive_ms, arrive_ms + 60_000, 1000, 60) * MS  # the entry point's slot


def test_the_model_takes_its_slot_from_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """The TimerMessageStore calls timer_slot_ms (its logic, not a copy): replacing it moves the slot."""
    monkeypatch.setattr(timer_store, "timer_slot_ms", lambda now, deliver, p, m: 4_000)
    env, _b, client, replies = world()
    send(env, client, replies, 1, 2 * S, 9 * S + 300 * MS)
    env.run(until=3 * S)
    (parked,) = of(env, TIMER_ENQUEUED)
    assert parked[6] == 4 * S


def test_a_slot_is_read_at_the_first_dequeue_poll_after_it_ends() -> None:
    """TimerDequeueGetService reads slot s once currReadTimeMs < formatTimeMs(now): at the first of
    its 100 ms polls at or after s + precision (its grid starts with the thread, at a drawn phase)."""
    env, b, client, replies = world()
    deliver = [5 * S + 300 * MS, 6 * S, 7 * S + 999 * MS, 12 * S + 1 * MS]
    for i, d in enumerate(deliver):
        send(env, client, replies, i + 1, 2 * S + i * 10 * MS, d)
    env.run(until=20 * S)
    timer, poll = b.timer, 100 * MS
    assert timer.poll_us == poll
    got = {r[3]: (r[0], r[5]) for r in of(env, TIMER_DELIVERED)}
    for i, d in enumerate(deliver):
        slot = timer_slot_ms(0, d // MS) * MS
        due = slot + S
        read_at = due + (timer.dequeue_origin_us - due) % poll
        assert got[msg_id_of(0, i + 1)] == (read_at, slot)
        assert d <= read_at < d + S + poll  # never early, at most a precision and a poll late
    assert timer.dequeue_origin_us % poll != 0  # the grid is not aligned to the slots: each read is late


def test_a_unit_whose_slot_passed_before_the_enqueue_poll_is_delivered_by_that_poll() -> None:
    """TimerEnqueueGetService finds the unit at its next 100 ms poll; on a master a slot already
    behind currWriteTimeMs goes straight to the put queue (putMessageToTimerWheel)."""
    env, b, client, replies = world()
    timer, poll = b.timer, 100 * MS
    env.run(until=1 * S)
    # a send reaching the broker after the enqueue thread's last poll of a second, asking for a
    # time later in that second: its slot (the second before) has passed by the next poll
    boundary = next(x * S for x in range(5, 20) if timer._last_poll_us(timer.enqueue_origin_us, x * S) < x * S - 2 * MS)
    last_poll = timer._last_poll_us(timer.enqueue_origin_us, boundary)
    arrive = max(last_poll + 1, boundary - 1_500)
    send(env, client, replies, 1, arrive - HALF, boundary - 500)
    env.run(until=boundary + 3 * S)
    ((t, _node, _kind, _msg, _topic, slot, replay),) = of(env, TIMER_DELIVERED)
    assert (t, slot, replay) == (last_poll + poll, boundary - S, False)  # the enqueue poll, not a dequeue poll
    assert of(env, TIMER_ENQUEUED)[0][6] == boundary - S
