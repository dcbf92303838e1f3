"""Quiescence (rmqsim/quiescence.py): runs that end when the cluster is quiet, and say when it was not.

The orderly broker-crash story: the crashed master restarts when its fault heals; a heartbeat
later the consumers re-register, the broker notifies them, queues move, and the offsets the crash
rolled back are pulled again — hundreds of duplicates well after the fault. With `settle_ms: auto`
the count no longer depends on a settle time chosen by hand.
"""

from __future__ import annotations

import pytest

from rmqsim.cli import main
from rmqsim.quiescence import QuietWatch, default_window_ms
from rmqsim.runner import make_ledger, run_scenario
from rmqsim.scenario import spec as scenario_mod

STORY = "scenarios/orderly_broker_failure.yaml"
LONG_SETTLE = "settle_ms=400s"  # far past every heartbeat, rebalance and persistence round after the heal


def _story(seed: int, crash_at: str, *more: str) -> dict:
    return run_scenario(STORY, seed=seed, overrides=[f"faults[0].at_ms={crash_at}", *more]).summary


@pytest.mark.parametrize("crash_at", ["20s", "40s"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_auto_settle_counts_do_not_depend_on_the_settle_time(seed: int, crash_at: str) -> None:
    auto = _story(seed, crash_at, "settle_ms=auto")
    long = _story(seed, crash_at, LONG_SETTLE)
    q = auto["quiescence"]
    assert q["reached"] is True and q["settle"] == "auto" and q["unsettled"] == {}
    # it ended one quiet window after the last disturbance, and not later than a check step past it
    assert q["checked_at_ms"] - q["at_ms"] >= q["window_ms"]
    assert q["checked_at_ms"] - q["at_ms"] <= q["window_ms"] + 1_000
    assert auto["sim_time_ms"] < long["sim_time_ms"]
    for key in ("duplicates", "duplicates_by_cause", "lost", "lost_by_cause", "order_violations", "consumed"):
        assert auto[key] == long[key], key
    assert long["quiescence"]["reached"] is True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_short_fixed_settle_ends_unquiet_and_says_what_moved(seed: int) -> None:
    q = _story(seed, "40s", "settle_ms=5s")["quiescence"]
    assert q["reached"] is False and q["settle"] == "fixed" and q["at_ms"] is None
    assert q["unsettled"]  # what moved, by kind
    assert set(q["unsettled"]) & {"faults", "rebalances", "duplicates", "offset_rollbacks", "send_failures",
                                  "backlog", "offsets_uncommitted", "offsets_unpersisted", "unowned_queues"}


def test_auto_settle_that_cannot_get_quiet_is_unknown_with_its_reason(tmp_path, capsys) -> None:
    code = main(["run", STORY, "--out", str(tmp_path / "run"), "--set", "settle_ms=auto",
                 "--set", "max_settle_ms=10s"])
    out = capsys.readouterr().out
    assert code == 3
    assert "quiescence: the cluster was not quiet for 60 s within max_settle_ms (10 s" in out


def test_fixed_settle_unquiet_prints_a_warning_with_the_fix(tmp_path, capsys) -> None:
    main(["run", STORY, "--out", str(tmp_path / "run"), "--set", "settle_ms=5s"])
    err = capsys.readouterr().err
    assert "settle_ms: the cluster was still changing when the run ended at 75 s (quiet window 60 s)" in err
    assert "fix: settle_ms: auto" in err


def test_baseline_is_quiet_from_its_first_rebalance() -> None:
    q = run_scenario("scenarios/baseline.yaml", seed=1).summary["quiescence"]
    assert q["reached"] is True and q["unsettled"] == {}
    assert 1_000 <= q["at_ms"] <= 5_000  # the clients start at 1 s and rebalance once


def test_a_backlog_at_the_end_is_unsettled() -> None:
    s = run_scenario("scenarios/baseline.yaml", seed=1,
                     overrides=["settle_ms=0", "consumers[0].consume_time_ms=50"]).summary
    q = s["quiescence"]
    assert q["reached"] is False and q["unsettled"]["backlog"] > 0


def test_auto_settle_digest_equals_the_fixed_run_of_the_same_length() -> None:
    """Stepping and syncing the tracer change nothing a run does: an auto run and a fixed run
    ending at the same time have one digest."""
    auto = _story(2, "20s", "settle_ms=auto")
    settle_ms = auto["sim_time_ms"] - 70_000
    fixed = _story(2, "20s", f"settle_ms={settle_ms}")
    assert fixed["sim_time_ms"] == auto["sim_time_ms"]
    assert fixed["trace_sha256"] == auto["trace_sha256"]


def test_default_window_is_heartbeat_rebalance_and_persistence() -> None:
    sc = scenario_mod.load(STORY)
    assert default_window_ms(sc) == 30_000 + 20_000 + 5_000 + 5_000
    longer = scenario_mod.load(STORY, ["consumers[0].client.heartbeat_broker_interval_ms=60000"])
    assert default_window_ms(longer) == 60_000 + 20_000 + 5_000 + 5_000
    assert run_scenario(STORY, seed=1, overrides=["settle_ms=0", "quiet_window_ms=7s"]) \
        .summary["quiescence"]["window_ms"] == 7_000


def test_quiet_watch_timeline() -> None:
    """Component: the last disturbance moves with the story (crash at 20 s, restart when the 15 s
    fault heals, the consumers' re-registration and its rebalances after it)."""
    result = run_scenario(STORY, seed=1, overrides=["settle_ms=auto"], keep_records=True)
    ledger = make_ledger(result.world)
    ledger.feed(list(result.records))
    watch = QuietWatch(result.world, ledger, 60_000_000, "auto")
    watch._advance(19_000_000)
    assert watch.last_disturbance_us < 20_000_000
    watch._advance(21_000_000)
    assert 20_000_000 <= watch.last_disturbance_us <= 21_000_000  # the crash, and sends failing at once
    watch._advance(36_000_000)
    assert watch.last_disturbance_us >= 35_000_000  # the restart
    watch._advance(result.world.env.now)
    end = watch.last_disturbance_us
    assert end == result.summary["quiescence"]["at_ms"] * 1000 + end % 1000
    assert result.world.env.now - end >= 60_000_000
