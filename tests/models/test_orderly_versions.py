"""Orderly consumption, 4.x (4.9.8) vs 5.x (5.3.3), component grain: a queue handed over at a
rebalance (c2 joins at 10 s; AVG moves q1 from c1 to c2) on a timeline.

5.x (RebalancePushImpl.tryRemoveOrderMessageQueue): c1 removes q1 once its listener call ends
(within 500 ms) and unlocks it on the broker then; c2, refused or not, retries after
rebalanceLater(500), so it holds q1 about a second after the drop. 4.x (removeUnnecessaryMessageQueue
+ unlockDelay): c1 removes q1 when the call ends (within 1 s) but, its ProcessQueue still caching
messages, unlocks it only 20 s later (rocketmq.client.unlockDelayTimeMills); c2's lock is refused
and, with no rebalanceLater, asked again only at its next 20 s round. With nothing cached, 4.x
unlocks at the removal too.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import rmqsim

S = 1_000_000
CALL_US = 200_000  # each listener call (constant)

SCENARIO = """
name: orderly_handover
version: "{version}"
duration_ms: 60s
settle_ms: 5s
network: {{latency_ms: {{dist: constant, value: 0.5}}}}
cluster:
  brokers: [{{name: broker-a}}]
  topics: [{{name: orders, queues: 2}}]
producers:
  - {{name: p, topic: orders, rate_per_s: 20, start_ms: 3s, stop_ms: {stop}, arrival: constant}}
consumers:
  - {{name: c1, group: g, topic: orders, consume_mode: ORDERLY, start_ms: 1s,
     consume_time_ms: {{dist: constant, value: 200}}}}
  - {{name: c2, group: g, topic: orders, consume_mode: ORDERLY, start_ms: 10s,
     consume_time_ms: {{dist: constant, value: 200}}}}
"""


def _handover(tmp_path: Path, version: str, stop: str) -> dict[str, list[tuple]]:
    path = tmp_path / f"handover_{version}_{stop}.yaml"
    path.write_text(textwrap.dedent(SCENARIO.format(version=version, stop=stop)))
    recs = rmqsim.run(str(path), seed=1, keep_records=True).records
    q1 = [r for r in recs if r[0] >= 9 * S and r[2].startswith(("broker.", "consumer.queue_"))
          and r[4:6] in (("orders", "broker-a"), ("c1", "orders"), ("c2", "orders"))]
    by_kind: dict[str, list[tuple]] = {}
    for r in q1:
        queue_id = r[6]
        if queue_id == 1:
            by_kind.setdefault(f"{r[2]}:{r[1] if r[2].startswith('consumer') else r[4]}", []).append(r)
    return by_kind


def test_5x_unlocks_when_the_call_ends_and_the_new_owner_locks_within_a_second(tmp_path: Path) -> None:
    t = _handover(tmp_path, "5.x", "40s")
    dropped = t["consumer.queue_dropped:c1"][0][0]
    unlocked = t["broker.unlocked:c1"][0][0]
    assert 0 < unlocked - dropped <= CALL_US + 1_000  # the call in progress ends, then the oneway unlock
    granted = t["broker.lock_granted:c2"][0][0]
    assert dropped < granted <= dropped + 1_500_000  # refused or not, rebalanceLater(500) brings it back
    assert t["consumer.queue_started:c2"][0][0] > granted


def test_4x_unlocks_20_s_after_the_removal_when_messages_are_cached(tmp_path: Path) -> None:
    t = _handover(tmp_path, "4.x", "40s")
    dropped = t["consumer.queue_dropped:c1"][0][0]
    unlocked = t["broker.unlocked:c1"][0][0]
    assert 20 * S < unlocked - dropped <= 20 * S + CALL_US + 1_000  # removal when the call ends, unlock 20 s on
    refused = t["broker.lock_refused:c2"]
    # asked once per round (no rebalanceLater(500) in 4.9.8), every refusal before the unlock; 4.9.8's
    # RebalanceService has no minInterval, so c2's rounds are its start and every 20 s after
    assert refused and all(r[0] < unlocked for r in refused)
    assert all(b[0] - a[0] == pytest.approx(20 * S, abs=1_000) for a, b in zip(refused, refused[1:], strict=False))
    granted = t["broker.lock_granted:c2"][0][0]
    assert unlocked < granted <= unlocked + 20 * S  # at c2's next 20 s rebalance round
    assert granted - refused[-1][0] == pytest.approx(20 * S, abs=1_000)
    assert t["consumer.queue_started:c2"][0][0] > granted


def test_4x_unlocks_at_the_removal_when_nothing_is_cached(tmp_path: Path) -> None:
    t = _handover(tmp_path, "4.x", "5s")  # 40 messages, consumed by about 7 s
    dropped = t["consumer.queue_dropped:c1"][0][0]
    unlocked = t["broker.unlocked:c1"][0][0]
    assert 0 < unlocked - dropped <= 1_000  # no call in progress, no message cached: at once
    assert "broker.lock_refused:c2" not in t or t["broker.lock_refused:c2"][0][0] < unlocked


@pytest.mark.parametrize(("client_version", "earliest_ms", "latest_ms"), [("5.x", 500, 600), ("4.x", 0, 100)])
def test_concurrent_consumer_first_pull_of_a_new_queue_follows_the_version(client_version, earliest_ms, latest_ms):
    """A concurrent consumer joining a backlog: its first consumption from each queue comes 500 ms after
    the rebalance that gave it the queue in 5.x (dispatchPullRequest(..., 500)), at once in 4.9.8
    (executePullRequestImmediately), plus one pull round trip and one listener call."""
    r = rmqsim.run("scenarios/baseline.yaml", seed=1, keep_records=True,
                overrides=["duration_ms=8s", "settle_ms=2s", "consumers[0].start_ms=5s",
                           f"client_version={client_version}"])
    started = r.frame("consumer.queue_started")
    consumed = r.frame("consumer.consumed")
    gaps = []
    last = started[started.topic == "orders"].drop_duplicates(["broker", "queue_id"], keep="last")  # a queue's final owner
    for row in last.itertuples():
        mine = consumed[(consumed.node == row.node) & (consumed.broker == row.broker)
                        & (consumed.queue_id == row.queue_id) & (consumed.t_us >= row.t_us)]
        gaps.append((int(mine.t_us.min()) - row.t_us) / 1000)
    assert len(gaps) == 8 and all(earliest_ms <= g < latest_ms for g in gaps), gaps
