"""The `shutdown` fault kind: a graceful shutdown of a consumer or producer process at a time, by the
same path as `stop_ms` (seeds 1-3)."""

from __future__ import annotations

import pytest

import rmqsim

SEEDS = (1, 2, 3)
GRACEFUL = "scenarios/consumer_graceful_shutdown.yaml"
ORDERLY = "scenarios/orderly_broker_failure.yaml"
SAME = ("sent_ok", "lost", "duplicates", "duplicates_by_cause", "consumed", "rebalances", "retries")


@pytest.mark.parametrize("seed", SEEDS)
def test_shutdown_fault_is_the_stop_ms_path(seed: int) -> None:
    """consumer_graceful_shutdown's leaver stops at 20 s by `stop_ms`, or by a `shutdown` fault
    at 20 s instead: the same outcome, figure by figure."""
    by_stop = rmqsim.run(GRACEFUL, seed=seed).summary
    by_fault = rmqsim.run(GRACEFUL, seed=seed, overrides=[
        "consumers[1].stop_ms=null", "faults=[{at_ms: 20s, kind: shutdown, node: leaver}]"]).summary
    assert {k: by_fault[k] for k in SAME} == {k: by_stop[k] for k in SAME}
    assert by_fault["lost"] == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_orderly_consumer_shutdown_unlocks_its_queues(seed: int) -> None:
    """An orderly consumer shut down at 20 s (no broker fault) unlocks its queues on the brokers;
    the others lock them as `new` (never waiting for the 60 s expiry), order holds, nothing is lost."""
    r = rmqsim.run(ORDERLY, seed=seed, keep_records=True,
                overrides=["faults=[{at_ms: 20s, kind: shutdown, node: c-1}]"])
    s, recs = r.summary, r.records
    unlocked = [x for x in recs if x[2] == "broker.unlocked" and x[4] == "c-1" and x[5] == "orders"]
    assert unlocked and all(20_000_000 <= x[0] < 21_000_000 for x in unlocked)
    for x in unlocked:
        regrants = [g for g in recs if g[2] == "broker.lock_granted" and g[1] == x[1] and g[5] == "orders"
                    and g[6] == x[6] and g[0] > x[0] and g[4] != "c-1"]
        assert regrants and regrants[0][7] == "new" and regrants[0][0] - x[0] < 5_000_000
    assert not any(x[2] == "broker.lock_granted" and x[7] == "expired" for x in recs)
    assert s["order_violations"] == 0 and s["lost"] == 0
    assert not r.world.nodes["c-1"].up  # not relaunched at the end of the fault phase
    assert {c for c, n in s["duplicates_by_cause"].items() if n} <= {"consumer_shutdown", "rebalance"}


@pytest.mark.parametrize("seed", SEEDS)
def test_producer_shutdown_stops_its_sends(seed: int) -> None:
    r = rmqsim.run(ORDERLY, seed=seed, keep_records=True,
                overrides=["faults=[{at_ms: 10s, kind: shutdown, node: p-1}]"])
    born = [x[10] for x in r.records if x[2] in ("producer.sent", "producer.send_failed") and x[1] == "p-1"]
    assert born and max(born) < 10_000_000
    assert any(x[2] == "producer.sent" and x[1] == "p-2" and x[10] > 30_000_000 for x in r.records)
    assert not r.world.nodes["p-1"].up
    assert r.summary["lost"] == 0 and r.summary["order_violations"] == 0
