"""Pull expiry (ProcessQueue.isPullExpired, issue 25): a queue whose last pull is more than
PULL_MAX_IDLE_TIME (120 s) old is dropped by the next rebalance round (`pull_expired`) and re-added;
what its in-flight listener calls consumed is consumed again, and the duplicates are `rebalance`.

Reference: ../shared/reference/rocketmq-semantics.md 3.3 (updateProcessQueueTableInRebalance: owned
queues still in the target set but pull-expired are dropped and re-added) and the client constants
(`isPullExpired`: now - lastPullTimestamp > 120000, strictly greater).

How a run gets there: nothing in the pull loop leaves a queue unpulled for long (a failed pull is
retried after 3 s, a held one answers within ~20 s), so the story uses a GC-like `pause` of the
consumer: timers and deliveries that fall due during a pause run when it ends, in their original
order. A BROADCASTING consumer (its rebalance needs no broker round trip) of one queue holds
five messages in 60 s listener calls; it is paused at 50 s, after its pull at ~45 s and before
its 62 s rebalance round (which comes before that pull's answer and before the listener calls
end). The pause ends exactly 120 s, or 120 s + 1 µs, after the last pull: the round then runs
first and sees the queue idle for exactly that long. A tiny world: each run takes well under a
second of wall time for 270 s of simulated time.
"""

from __future__ import annotations

import pytest

from analysis.checkers.checks import check
from analysis.checkers.ledger import ProducerInfo
from models.message import msg_id_of
from models.records import (
    BROKER_STORED,
    CONSUMER_CONSUMED,
    CONSUMER_QUEUE_DROPPED,
    CONSUMER_QUEUE_STARTED,
    PRODUCER_SENT,
)
from rmqsim.runner import build, run_scenario, start
from rmqsim.scenario.spec import from_data
from sim.trace import field_index

PULL_MAX_IDLE_TIME_US = 120_000_000  # ProcessQueue.PULL_MAX_IDLE_TIME (Java), not read from the model
PAUSE_AT_US = 50_000_000
MESSAGES = 5  # 1/s, constant arrivals, 3 s .. 8 s
SEEDS = (1, 2, 3)


def world(pause_us: int) -> dict:
    return {
        "name": "pull_expiry",
        "duration_ms": 200_000,
        "settle_ms": 70_000,
        "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 1}]},
        "producers": [{"name": "p", "topic": "orders", "rate_per_s": 1, "arrival": "constant",
                       "start_ms": 3_000, "stop_ms": 8_000}],
        "consumers": [{"name": "c", "group": "billing", "topic": "orders",
                       "consume_time_ms": {"dist": "constant", "value": 60_000},
                       "client": {"message_model": "BROADCASTING"}}],
        "faults": [{"at_ms": PAUSE_AT_US / 1000, "kind": "pause", "node": "c", "duration_ms": pause_us / 1000}],
    }


def last_pull_before_pause(seed: int) -> int:
    """The orders queue's lastPullTimestamp when the pause begins (the pause's length changes
    nothing before it)."""
    w = build(from_data(world(1_000), "pull_expiry probe"), seed)
    start(w)
    w.env.run(until=PAUSE_AT_US)
    (pq,) = [pq for mq, pq in w.models["c"].process_queues.items() if mq.topic == "orders"]
    return pq.last_pull_us


def rounds_and_records(seed: int, idle_us: int) -> tuple[int, list[tuple[int, int]], list[tuple]]:
    """Run the story with the pause ending `idle_us` after the last pull; returns the pause's end,
    (time, idle time seen) of every rebalance round over the orders queue, and the queue
    ownership records."""
    t_pull = last_pull_before_pause(seed)
    pause_end = t_pull + idle_us
    w = build(from_data(world(pause_end - PAUSE_AT_US), "pull_expiry"), seed, keep_records=True)
    consumer = w.models["c"]
    rebalancer = consumer.rebalancer
    seen: list[tuple[int, int]] = []
    update_table = rebalancer.update_table

    def noted(topic, target) -> None:  # an observer: notes what the round sees, changes nothing
        now = w.env._now
        seen.extend((now, now - pq.last_pull_us) for mq, pq in consumer.process_queues.items() if mq.topic == topic)
        update_table(topic, target)

    rebalancer.update_table = noted
    start(w)
    w.env.run(until=270_000_000)
    tracer = w.env.tracer
    return pause_end, [s for s in seen if s[0] >= PAUSE_AT_US], \
        [*tracer.of_kind(CONSUMER_QUEUE_DROPPED), *tracer.of_kind(CONSUMER_QUEUE_STARTED)]


def hand_overs(records: list[tuple]) -> list[tuple]:
    reason = field_index(CONSUMER_QUEUE_DROPPED, "reason")
    return [(r[0], "dropped", r[reason]) for r in records if r[2] == CONSUMER_QUEUE_DROPPED] + \
        [(r[0], "started", "") for r in records if r[2] == CONSUMER_QUEUE_STARTED]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_queue_idle_for_exactly_120s_is_not_expired(seed: int) -> None:
    pause_end, seen, records = rounds_and_records(seed, PULL_MAX_IDLE_TIME_US)
    assert seen[0] == (pause_end, PULL_MAX_IDLE_TIME_US)  # the round ran first and saw exactly 120 s
    assert all(idle <= PULL_MAX_IDLE_TIME_US for _t, idle in seen)
    assert [h for h in hand_overs(records) if h[0] >= PAUSE_AT_US] == []  # nothing dropped, nothing re-added


@pytest.mark.parametrize("seed", SEEDS)
def test_a_queue_idle_for_120s_and_1us_is_dropped_as_pull_expired_and_re_added(seed: int) -> None:
    pause_end, seen, records = rounds_and_records(seed, PULL_MAX_IDLE_TIME_US + 1)
    assert seen[0] == (pause_end, PULL_MAX_IDLE_TIME_US + 1)
    assert sorted(h for h in hand_overs(records) if h[0] >= PAUSE_AT_US) == \
        [(pause_end, "dropped", "pull_expired"), (pause_end, "started", "")]
    offset = field_index(CONSUMER_QUEUE_STARTED, "offset")
    restarted = [r for r in records if r[2] == CONSUMER_QUEUE_STARTED and r[0] == pause_end]
    assert [r[offset] for r in restarted] == [0]  # the in-flight calls' offsets were never committed


@pytest.mark.parametrize("seed", SEEDS)
def test_what_a_pull_expired_queue_had_in_flight_is_consumed_again_as_rebalance_duplicates(seed: int) -> None:
    """End to end: the five listener calls in flight when the queue expired end on a dropped
    queue (their offsets are not committed); the re-added queue reads the five again. The
    summary calls every one of those duplicates `rebalance`; with exactly 120 s idle there are none."""
    t_pull = last_pull_before_pause(seed)
    expired = run_scenario(from_data(world(t_pull + PULL_MAX_IDLE_TIME_US + 1 - PAUSE_AT_US), "pull_expiry"),
                           seed=seed).summary
    assert expired["sent_ok"] == MESSAGES and expired["lost"] == 0
    assert {k: v for k, v in expired["duplicates_by_cause"].items() if v} == {"rebalance": MESSAGES}
    kept = run_scenario(from_data(world(t_pull + PULL_MAX_IDLE_TIME_US - PAUSE_AT_US), "pull_expiry"),
                        seed=seed).summary
    assert kept["sent_ok"] == MESSAGES and kept["lost"] == 0 and kept["duplicates"] == 0


# --- the label, on scripted records (analysis/checkers/duplicates.py) ------------------------------------

MSG = msg_id_of(0, 1)


def _started(t: int, node: str) -> tuple:
    return (t, node, CONSUMER_QUEUE_STARTED, "billing", "orders", "broker-a", 0, 5)


def _consumed(t: int, node: str) -> tuple:
    return (t, node, CONSUMER_CONSUMED, "billing", MSG, "orders", "broker-a", 0, 5, True, 0)


def _dropped(t: int, node: str, reason: str) -> tuple:
    return (t, node, CONSUMER_QUEUE_DROPPED, "billing", "orders", "broker-a", 0, reason)


def _causes(records: list[tuple]) -> dict[str, int]:
    base = [(0, "p", PRODUCER_SENT, MSG, "orders", -1, "broker-a", 0, "SEND_OK", 1, 0, 0),
            (1, "broker-a", BROKER_STORED, MSG, "orders", 0, 5, 0, 150, 0)]
    m = check(sorted(base + records, key=lambda r: r[0]), {"billing": "orders"}, [ProducerInfo("p", "orders")],
              members={"billing": ["c-1", "c-2"]})
    return {k: v for k, v in m["duplicates_by_cause"].items() if v}


@pytest.mark.parametrize("reason", ["pull_expired", "rebalance"])
@pytest.mark.parametrize("reader", ["c-1", "c-2"])
def test_a_re_read_after_a_pull_expired_drop_is_a_rebalance_duplicate(reason: str, reader: str) -> None:
    """c-1 consumes offset 5, its queue is dropped (pull-expired, or moved by a rebalance) before the
    offset was committed, and the queue's next owner — c-1 itself re-adding it, or c-2 — reads
    offset 5 again: a `rebalance` duplicate either way, never `other`."""
    records = [_started(5, "c-1"), _consumed(10, "c-1"), _dropped(20, "c-1", reason), _started(30, reader),
               _consumed(40, reader)]
    assert _causes(records) == {"rebalance": 1}
