"""Consumer fault stories (issue 12) over several seeds: bounds and invariants, not pinned numbers.

Reference: ../shared/reference/rocketmq-semantics.md 3.2-3.9 and 8; duplicate causes from
analysis/checkers/duplicates.py.
"""

from __future__ import annotations

import functools

import pytest

from analysis.checkers.duplicates import CAUSES
from rmqsim.runner import run_scenario
from rmqsim.scenario import spec as scenario
from sim.trace import field_index

SEEDS = (1, 2, 3)
SEC = 1_000_000


@functools.cache
def run(name: str, seed: int, sets: tuple[str, ...] = (), keep: bool = False):
    return run_scenario(scenario.load(f"scenarios/{name}.yaml", list(sets)), seed=seed, keep_records=keep)


def causes(summary: dict) -> dict[str, int]:
    return {k: v for k, v in summary["duplicates_by_cause"].items() if v}


def test_every_cause_is_a_key_and_they_add_up():
    s = run("restart_consumer", 1).summary
    assert tuple(s["duplicates_by_cause"]) == CAUSES
    assert sum(s["duplicates_by_cause"].values()) == s["duplicates"] > 0
    for g in s["groups"].values():
        assert sum(g["duplicates_by_cause"].values()) == g["duplicates"]


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_joining_busy_group_gives_rebalance_duplicates(seed):
    """Scale-out: every duplicate is a rebalance one: the old members' in-flight listener calls
    (20 threads each) whose results the dropped queues discard, plus what an old owner consumes
    while the newcomer already owns the queue (bounded here by one pull batch of 32 per queue)."""
    s = run("consumer_joins_busy_group", seed).summary
    assert s["lost"] == 0 and s["verdict"] == "valid"
    assert s["duplicates"] > 0 and causes(s) == {"rebalance": s["duplicates"]}
    assert s["duplicates"] <= 2 * 20 + 32 * 8


def test_shorter_persist_interval_gives_fewer_rebalance_duplicates():
    """Kill -9 then rejoin (restart_consumer): with the offsets persisted every 500 ms instead of
    5 s, the hand-overs re-consume fewer messages (per seed at most as many; fewer in total)."""
    fast = ("consumers[0].client.persist_consumer_offset_interval_ms=500",)
    slow_total = fast_total = 0
    for seed in SEEDS:
        slow = run("restart_consumer", seed).summary["duplicates_by_cause"]["rebalance"]
        quick = run("restart_consumer", seed, fast).summary["duplicates_by_cause"]["rebalance"]
        assert quick <= slow, seed
        slow_total, fast_total = slow_total + slow, fast_total + quick
    assert fast_total < slow_total


@pytest.mark.parametrize("seed", SEEDS)
def test_kill9_duplicates_bounded_by_what_the_broker_had_not_received(seed):
    """consumer_crash duplicates ≤ what the killed consumer consumed in the last persist interval
    (5 s) plus a pull round before the crash: older consumption had reached the broker."""
    result = run("restart_consumer", seed, keep=True)
    s = result.summary
    crash_us = 15 * SEC
    i_ok = field_index("consumer.consumed", "ok")
    recent = sum(1 for r in result.records if r[2] == "consumer.consumed" and r[1] == "c-1" and r[i_ok]
                 and crash_us - 6 * SEC <= r[0] <= crash_us)
    assert s["lost"] == 0
    assert 0 < s["duplicates_by_cause"]["consumer_crash"] <= recent


@pytest.mark.parametrize("seed", SEEDS)
def test_graceful_shutdown_gives_no_duplicates(seed):
    s = run("consumer_graceful_shutdown", seed).summary
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["verdict"] == "valid"


def test_shutdown_interrupting_listeners_reproduces_7182():
    """awaitTerminationMillisWhenShutdown 0: the running calls are interrupted, sent back and left
    uncommitted; duplicates come only from the shutdown and the retry path, at most two per
    interrupted call (20 threads)."""
    sets = ("consumers[1].client.await_termination_millis_when_shutdown=0",)
    seen: dict[str, int] = {}
    for seed in SEEDS:
        s = run("consumer_graceful_shutdown", seed, sets).summary
        assert s["lost"] == 0
        assert set(causes(s)) <= {"consumer_shutdown", "send_back"}
        assert s["duplicates"] <= 2 * 20
        for cause, n in causes(s).items():
            seen[cause] = seen.get(cause, 0) + n
    assert seen.get("send_back", 0) > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_broadcasting_crash_duplicates_only_in_the_killed_member(seed):
    s = run("broadcasting_consumer_crash", seed).summary
    assert s["lost"] == 0
    groups = s["groups"]
    assert all(groups[u]["duplicates"] == 0 for u in ("audit/c-1", "audit/c-3"))
    killed = groups["audit/c-2"]
    assert killed["duplicates"] > 0 and causes(killed) == {"consumer_crash": killed["duplicates"]}
    assert killed["duplicates"] <= 200 * 6  # rate × (offsets-file interval + 1 s)


@pytest.mark.parametrize("seed", SEEDS)
def test_failures_reach_the_dlq_and_nothing_is_left_pending(seed):
    s = run("consume_failures_dlq", seed).summary
    assert s["lost"] == 0 and s["pending_retry"] == 0
    assert 0 < s["dlq"] < s["sent_ok"]
    # 0.9^17 ≈ 0.167 of the messages reach the DLQ; a generous binomial band
    assert 0.05 < s["dlq"] / s["sent_ok"] < 0.35


# --- consumer-side metrics (analysis/checkers/consumer_metrics.py) ------------------------------------------

def test_consumer_metrics_of_a_crash_and_rejoin():
    s = run("restart_consumer", 1).summary
    g = s["groups"]["billing"]
    # rounds that moved queues: start-up, the crash (survivors) and the rejoin (everyone), 2 topics each
    assert g["rebalances"] >= 6 and s["rebalances"] == g["rebalances"]
    # the killed member's queues wait for the survivors' rebalance; bounded by 2 topics' queues × 10 s down
    assert 0 < g["unowned_queue_s"] < 9 * 10
    assert g["lag_by_second"][-1] == 0 and g["lag_max"] == max(g["lag_by_second"]) > 0
    assert g["consume_latency_ms"]["p50"] <= s["latency_ms"]["p50"]  # store → consume ≤ send → consume
    assert g["retries"] == 0


def test_broadcasting_members_report_no_unowned_time():
    s = run("broadcasting_consumer_crash", 1).summary
    assert s["unowned_queue_s"] is None
    assert all(g["unowned_queue_s"] is None for g in s["groups"].values())
    killed, other = s["groups"]["audit/c-2"], s["groups"]["audit/c-1"]
    assert killed["lag_max"] > other["lag_max"]  # its backlog grew while it was down


@pytest.mark.parametrize("seed", SEEDS)
def test_each_dlq_message_failed_17_times(seed):
    s = run("consume_failures_dlq", seed).summary
    assert s["retries"] >= 17 * s["dlq"]
