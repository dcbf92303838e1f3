"""PopReviveService's endTime (models/broker/pop_revive_service.py; 5.3.3 consumeReviveMessage,
mergeAndRevive): a checkpoint is revived once the scan's endTime is more than 2 s past its
reviveTime; endTime is the newest deliver time read, or `now` once that is more than 3 s old (an
idle revive queue). So an idle queue revives a checkpoint about 2 s after its reviveTime, a busy one
(records read up to a second behind `now`) about 3 s after, and an ack record (due at the
reviveTime) keeps an idle queue awake one second longer.

Timelines on one broker: the revive thread of queue 0 runs from t = 0 (wait 1 s, scan; an empty scan
polls 4.1 s, then 1, 2, 3 s of rest), so its scans run at [1, 5.1], [7.1, 11.2], [14.2, 18.3],
[22.3, 26.4] s; a checkpoint popped at 4 s with a 20.5 s invisible time (reviveTime 24.5 s, due
23.5 s, delivered by the timer at 24 s) is read by the fourth scan as it is delivered."""

from __future__ import annotations

from typing import Any

import pytest

from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.broker.pop_revive_service import checkpoint_due, record_visible_at_us, scan_end_time_us
from sim.disk import DiskConfig
from sim.env import SimEnv
from sim.network import Network
from sim.rng import Rng
from sim.trace import Tracer

S = 1_000_000
POP_AT = 4 * S
INVISIBLE = 20 * S + S // 2
REVIVE_AT = POP_AT + INVISIBLE  # 24.5 s


@pytest.mark.parametrize("deliver_us, visible_us", [
    (23_500_000, 24 * S),  # the slot [23 s, 24 s) is dequeued once 24 s has come
    (23 * S, 24 * S),  # on the slot's first instant: still the next second
    (23_999_999, 24 * S),
    (0, S),
])
def test_a_record_is_in_the_revive_queue_from_the_second_after_its_slot(deliver_us: int, visible_us: int) -> None:
    assert record_visible_at_us(deliver_us) == visible_us


@pytest.mark.parametrize("newest_us, now_us, end_us", [
    (23_500_000, 26_500_000, 23_500_000),  # exactly 3 s old: not yet (now - endTime > 3 s)
    (23_500_000, 26_500_001, 26_500_001),  # more than 3 s old: now
    (25 * S, 26 * S, 25 * S),  # fresh: the record's own time
    (-1, 26 * S, -1),  # nothing read: no endTime (5.3.3: endTime 0 is never moved)
])
def test_scan_end_time(newest_us: int, now_us: int, end_us: int) -> None:
    assert scan_end_time_us(newest_us, now_us) == end_us


@pytest.mark.parametrize("end_us, due", [(REVIVE_AT + 2 * S, False), (REVIVE_AT + 2 * S + 1, True)])
def test_a_checkpoint_is_due_strictly_after_two_seconds(end_us: int, due: bool) -> None:
    assert checkpoint_due(end_us, REVIVE_AT) is due


def _broker() -> tuple[SimEnv, Any, list[tuple[int, int]]]:
    """One 5.x broker with POP; the log of (time, reviveTime) of each checkpoint revived."""
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env)
    broker = Broker(env, "broker-a", "zone-a", MessageStoreConfig(), BrokerConfig(), DiskConfig(), {"T": 1}, [],
                    pop=True)
    net.add_node(broker.node)
    broker.node.start()
    revive = broker.pop.revive
    log: list[tuple[int, int]] = []
    revive_one = revive._revive

    def logged(ck: Any, replay: bool) -> None:
        log.append((env.now, ck.revive_us))
        revive_one(ck, replay)

    revive._revive = logged
    return env, revive, log


def test_an_idle_revive_queue_revives_about_two_seconds_after_the_revive_time() -> None:
    """Read at 24 s (endTime 23.5 s); at the first poll more than 3 s after that (26.6 s) endTime
    becomes now: 2.1 s past the reviveTime. (The model before this fix: 28 s, 3.5 s after.)"""
    env, revive, log = _broker()
    env.call_later(POP_AT, lambda: revive.add_ck("g", "T", 0, [0], INVISIBLE, 0))
    env.run(until=40 * S)
    assert log == [(26_600_000, REVIVE_AT)]


def test_a_checkpoint_delivered_while_the_thread_rests_waits_for_the_next_scan() -> None:
    """Popped at 4 s for 23.5 s (reviveTime 27.5 s), delivered at 27 s, after the fourth scan ended
    (26.4 s) and before the fifth (30.4 s, after 3 s of rest and the 1 s interval): the fifth scan
    reads it already more than 3 s old and revives it at once, 2.9 s after its reviveTime."""
    env, revive, log = _broker()
    env.call_later(POP_AT, lambda: revive.add_ck("g", "T", 0, [0], 23 * S + S // 2, 0))
    env.run(until=40 * S)
    assert log == [(30_400_000, 27_500_000)]


def test_an_ack_record_keeps_the_idle_queue_awake_a_second_longer() -> None:
    """One of two messages acked: the ack record, due at the reviveTime (24.5 s, delivered at 25 s),
    is the newest read, so endTime jumps to now only after 27.5 s: revived at 27.6 s."""
    env, revive, log = _broker()
    env.call_later(POP_AT, lambda: revive.add_ck("g", "T", 0, [0, 1], INVISIBLE, 0))
    env.call_later(10 * S, lambda: revive.ack("g", "T", 0, 0, POP_AT, 1))
    env.run(until=40 * S)
    assert log == [(27_600_000, REVIVE_AT)]


def test_a_busy_revive_queue_revives_on_the_records_it_reads() -> None:
    """Checkpoints due every 0.5 s keep the queue busy: endTime is the newest one read (a second
    behind now, the timer's slot), so the first is revived when one due after 26.5 s has been
    delivered (27 s, at 28 s): 3.5 s after its reviveTime, and never by the idle rule."""
    env, revive, log = _broker()
    env.call_later(POP_AT, lambda: revive.add_ck("g", "T", 0, [0], INVISIBLE, 0))
    for k in range(12):  # reviveTimes 25.0, 25.5, ... s: due 24.0, 24.5, ... s
        env.call_later(5 * S + k * S // 2, lambda k=k: revive.add_ck("g", "T", 0, [10 + k], 20 * S, 0))
    env.run(until=40 * S)
    assert log[0] == (28 * S, REVIVE_AT)
    assert all(at - revive_us > 2 * S for at, revive_us in log)
