"""Availability and recovery as clients see them (analysis/checkers/availability.py), over several
seeds: bounds and invariants, not pinned numbers; the write-outage episodes as a component with an
exact timeline; and the verdict rules that keep a vacuous or unfinished run from being `valid`.

- controller_master_power_loss: the producers' write outage is at least the broker's own
  (`unwritable_s`) and ends within one route poll (pollNameServerInterval 30 s) plus the send
  timeout (sendMsgTimeout 3 s) after the election; the group recovers; the why lines name the
  election and the route update;
- power_loss_async_master (4.x, master/slave, no failover): broker-a's queues cannot take writes
  until the producers drop it from their routes, the broker group fails sends from the power loss;
- a producer partitioned from every broker: nothing acknowledged, so the run is `unknown`, never `valid`;
- a consumer crash with a short fixed settle: the run is not quiet, its never-consumed messages
  are `unconsumed` (no `other` loss) and the verdict `unknown`; with `settle_ms: auto` it is quiet
  and every loss has a named cause.
"""

from __future__ import annotations

import functools

import pytest

import rmqsim
from analysis.checkers.availability import write_episodes
from analysis.checkers.ledger import Ledger, ProducerInfo
from models.records import PRODUCER_SEND_FAILED, PRODUCER_SENT
from tests.conftest import ROOT

SEEDS = (1, 2, 3)
S = 1_000_000
ROUTE_POLL_S = 30.0  # pollNameServerInterval
SEND_TIMEOUT_S = 3.0  # sendMsgTimeout


@functools.cache
def run(name: str, seed: int, *overrides: str):
    return rmqsim.run(str(ROOT / "scenarios" / f"{name}.yaml"), seed=seed, overrides=list(overrides))


# --- component: episodes from a hand-fed ledger --------------------------------------------------
def _sent(t_us: int, seq: int, born_us: int, p: int = 0, status: str = "SEND_OK") -> tuple:
    return (t_us, f"p-{p}", PRODUCER_SENT, (p << 32) | seq, "T", -1, "broker-a", 0, status, 1, born_us, 0)


def _failed(t_us: int, seq: int, born_us: int, p: int = 0, reason: str = "call_timeout") -> tuple:
    return (t_us, f"p-{p}", PRODUCER_SEND_FAILED, (p << 32) | seq, "T", -1, 1, reason, born_us, "broker-a", 0)


def test_episode_runs_from_the_failed_call_to_the_first_later_send_acknowledged() -> None:
    ledger = Ledger([ProducerInfo("p-0", "T"), ProducerInfo("p-1", "T")], {})
    ledger.feed([_sent(1_000, 1, 500)])
    # p-0's send 2 is called at 2.0 s and fails at 5.0 s; p-1's send 1 (called 2.5 s) fails too;
    # p-0's send 3 (called 2.1 s, before the failure is known) returns SEND_OK at 2.2 s: the outage ends there
    ledger.feed([_sent(2_200_000, 3, 2_100_000), _failed(2_600_000, 1, 2_500_000, p=1),
                 _failed(5_000_000, 2, 2_000_000)])
    ep = write_episodes(ledger)["T"]
    # two episodes: [2.0 s, 2.2 s] (ended by p-0-3) and [2.5 s, never]: p-1 sent nothing after it
    # and p-0's sends after 2.5 s: none
    assert ep.start_us.tolist() == [2_000_000, 2_500_000]
    assert ep.end_us[0] == 2_200_000 and ep.end_key[0] == "p-0-3"
    assert ep.end_us[1] == ep.end_us.max() and ep.end_key[1] == ""
    ledger.feed([_sent(9_000_000, 2, 8_000_000, p=1)])  # p-1 acknowledged again at 9.0 s
    ep = write_episodes(ledger)["T"]
    assert ep.end_us.tolist()[1] == 9_000_000 and ep.end_key[1] == "p-1-2"


def test_a_not_ok_status_opens_an_episode_and_overlapping_ones_merge() -> None:
    ledger = Ledger([ProducerInfo("p-0", "T")], {})
    ledger.feed([_sent(1_100_000, 1, 1_000_000, status="FLUSH_SLAVE_TIMEOUT"),
                 _failed(1_300_000, 2, 1_050_000), _sent(1_400_000, 3, 1_200_000)])
    ep = write_episodes(ledger)["T"]
    assert ep.start_us.tolist() == [1_000_000] and ep.end_us.tolist() == [1_400_000]
    assert len(ep.fail_t_us) == 2  # both sends without SEND_OK are counted


# --- stories ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_controller_power_loss_write_outage_ends_by_the_route_poll_after_the_election(seed: int) -> None:
    s = run("controller_master_power_loss", seed).summary
    a = s["availability"]
    fault = a["faults"][0]
    topic = fault["topics"]["orders"]
    election_s = next(e["t_ms"] for e in s["elections"] if e["old_master"]) / 1000
    assert topic["failed_sends"] > 0 and topic["recovered"]
    assert topic["write_outage_s"] >= s["unwritable_s"]["broker-a"]
    assert topic["from_ms"] / 1000 <= fault["start_ms"] / 1000 + SEND_TIMEOUT_S
    assert election_s <= topic["until_ms"] / 1000 <= election_s + ROUTE_POLL_S + SEND_TIMEOUT_S
    assert a["write_outage_s"]["by_topic"]["orders"] == pytest.approx(topic["write_outage_s"])
    billing = fault["groups"]["billing"]
    assert billing["recovery_s"] is not None and billing["recovered_ms"] >= topic["until_ms"]
    # messages stored on the new master wait for the consumers' next pull of it: late, then back
    assert billing["last_late"] is not None and billing["read_outage_s"] > billing["normal_wait_ms"] / 1000
    assert billing["recovered_ms"] > topic["until_ms"]
    assert a["recovery_s"]["by_group"]["billing"] == billing["recovery_s"]
    why = " | ".join(fault["why"])
    assert "election at" in why and "became master of broker-a" in why
    assert "took a new route of orders" in why and "pollNameServerInterval" in why
    assert fault["back_ms"] == max(topic["until_ms"], billing["recovered_ms"])


@pytest.mark.parametrize("seed", SEEDS)
def test_4x_power_loss_without_failover_fails_sends_to_the_dead_group(seed: int) -> None:
    s = run("power_loss_async_master", seed).summary
    fault = s["availability"]["faults"][0]
    group = fault["broker_groups"]["broker-a"]
    assert group["failed_sends"] > 0 and group["first_failed_ms"] >= fault["start_ms"] - SEND_TIMEOUT_S * 1000
    assert group["unwritable_s"] > 0  # the broker's view: no master from the power loss on
    # broker-b keeps taking writes: the topic is never wholly unwritable for long
    topic = fault["topics"]["orders"]
    assert topic["failed_sends"] == group["failed_sends"] + fault["broker_groups"]["broker-b"]["failed_sends"]
    assert topic["recovered"] and topic["write_outage_s"] <= SEND_TIMEOUT_S + 1


@pytest.mark.parametrize("seed", SEEDS)
def test_nothing_acknowledged_is_unknown_never_valid(seed: int) -> None:
    r = rmqsim.run(str(ROOT / "scenarios" / "baseline.yaml"), seed=seed, overrides=[
        "duration_ms=8s", "settle_ms=1s", "producers[0].rate_per_s=200",
        "faults=[{at_ms: 0, kind: partition, groups: [[p-1, p-2], [namesrv, broker-a, broker-b, c-1, c-2, c-3]]}]"])
    s = r.summary
    assert s["sends"] > 0 and s["sent_ok"] == 0 and s["availability"]["acked_ratio"] == 0
    assert s["verdict"] == "unknown"
    assert any("no message was acknowledged" in f for f in s["failures"])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_ended_before_quiet_counts_unconsumed_not_lost(seed: int) -> None:
    crash = "faults=[{at_ms: 10s, kind: process_crash, node: c-1}]"
    fixed = rmqsim.run(str(ROOT / "scenarios" / "baseline.yaml"), seed=seed, overrides=[
        "duration_ms=12s", "settle_ms=0", "producers[0].rate_per_s=500", crash]).summary
    assert fixed["quiescence"]["reached"] is False
    assert fixed["unconsumed"] > 0 and fixed["lost_by_cause"]["other"] == 0
    assert fixed["verdict"] == "unknown"
    assert any("ended before the cluster was quiet" in f and "settle_ms: auto" in f for f in fixed["failures"])
    auto = rmqsim.run(str(ROOT / "scenarios" / "baseline.yaml"), seed=seed, overrides=[
        "duration_ms=12s", "settle_ms=auto", "producers[0].rate_per_s=500", crash]).summary
    assert auto["quiescence"]["reached"] is True
    assert auto["unconsumed"] == 0 and auto["lost_by_cause"]["other"] == 0
    assert auto["lost"] == sum(auto["lost_by_cause"].values())


def test_expect_availability_is_judged_per_bound() -> None:
    tight = run("controller_master_power_loss", 1, "expect.availability={max_write_outage_s: 1, min_acked_ratio: 0.1}")
    s = tight.summary
    entries = {e["metric"]: e for e in s["expectations"]}
    assert entries["availability.write_outage_s.by_topic.orders"]["ok"] is False
    assert entries["availability.acked_ratio"]["ok"] is True
    assert s["verdict"] == "invalid"
    loose = run("controller_master_power_loss", 1, "expect.availability={max_write_outage_s: {orders: 60}, "
                "max_recovery_s: 70}").summary
    entries = {e["metric"]: e for e in loose["expectations"]}
    assert entries["availability.write_outage_s.by_topic.orders"]["ok"] is True
    assert entries["availability.recovery_s.by_group.billing"]["ok"] is True


def test_a_run_without_faults_has_the_section_and_no_recovery() -> None:
    r = rmqsim.run(str(ROOT / "scenarios" / "baseline.yaml"), seed=1, overrides=["duration_ms=3s", "settle_ms=1s"])
    a = r.summary["availability"]
    assert a["faults"] == [] and a["recovery_s"]["max"] is None and a["read_outage_s"]["max"] is None
    assert a["acked"] == r.summary["sent_ok"] and a["write_outage_s"]["max"] == 0.0


def test_expect_availability_names_are_the_scenarios() -> None:
    from rmqsim.scenario import spec
    from sim.config import ConfigError

    with pytest.raises(ConfigError) as err:
        spec.load(ROOT / "scenarios" / "baseline.yaml",
                  ["expect.availability={max_write_outage_s: {nosuch: 5}, max_recovery_s: {ghosts: 1}}"])
    text = str(err.value)
    assert "expect.availability.max_write_outage_s.nosuch: 'nosuch' is not a topic producers send to" in text
    assert "expect.availability.max_recovery_s.ghosts" in text and "consumer group" in text
    with pytest.raises(ConfigError) as err:
        spec.load(ROOT / "scenarios" / "baseline.yaml", ["expect.availability={min_acked_ratio: 1.5}"])
    assert "expect.availability.min_acked_ratio" in str(err.value)


def test_a_late_group_whose_fault_window_closes_early_has_its_why_lines() -> None:
    """Two brokers crash a second apart (consume_failures_dlq, the send-back story): the first
    fault's window ends at the second's start with a write outage still open there, while a
    late message is consumed; every fault gets its why lines and the section is whole."""
    r = rmqsim.run(str(ROOT / "scenarios" / "consume_failures_dlq.yaml"), seed=1, overrides=[
        "faults=[{at_ms: 5s, kind: process_crash, node: broker-a, duration_ms: 20s}, "
        "{at_ms: 6s, kind: process_crash, node: broker-b, duration_ms: 3s}]",
        "settle_ms=60s", "consumers[0].consume_time_ms=1500"])
    a = r.summary["availability"]
    assert len(a["faults"]) == 2 and all(f["why"] for f in a["faults"])
    late = [g for f in a["faults"] for g in f["groups"].values() if g["last_late"] is not None]
    assert late and all(g["last_late_ms"] is not None for g in late)


def test_an_unended_episode_is_open_only_if_the_producers_went_on_sending_past_the_timeout() -> None:
    """No later SEND_OK: not recovered when the producer kept calling send() for more than its send
    timeout after the episode began; if it stopped within that timeout, the episode says nothing."""
    stopped = Ledger([ProducerInfo("p-0", "T")], {})
    stopped.feed([_sent(1_000, 1, 500), _failed(5_000_000, 2, 2_000_000), _failed(5_100_000, 3, 2_100_000)])
    assert write_episodes(stopped, {"T": 3_000_000})["T"].open_.tolist() == [False]
    kept_on = Ledger([ProducerInfo("p-0", "T")], {})
    kept_on.feed([_sent(1_000, 1, 500), _failed(5_000_000, 2, 2_000_000), _failed(9_000_000, 3, 6_000_000)])
    assert write_episodes(kept_on, {"T": 3_000_000})["T"].open_.tolist() == [True]
