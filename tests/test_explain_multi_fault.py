"""`rmqsim explain --fault K` on runs with two faults (analysis/explain/fault.py `attribute`):
each finding goes to the fault on its node (or broker group) whose window holds its mechanism's
time, and the per-fault counts add up to the summary's.

- A controller group's master loses power for 60 s (SYNC_FLUSH: what it acknowledged survives
  and is cut when it rejoins, after the new master has given those queue offsets to other
  messages), and consumer c-1 crashes 30 s later for 20 s. The losses (offset reuse on the new
  master, when producers find it at ~60 s) fall inside both windows: they belong to the power
  loss, the fault of their broker group, not to the later crash; none is "no fault" although the
  old master's truncation records the same reuses again after the power loss has ended.
- broker-a crashes for 10 s and consumer c-1 crashes 5 s later: the consumer_crash duplicates go to
  c-1's crash, the broker_offset_rollback duplicates (broker-a restarting from an older
  consumerOffset.json, inside c-1's window) to broker-a's crash.
Over three seeds each, with the mechanism asserted to happen.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

import rmqsim
from analysis.explain.answer import explain_fault, read_run
from analysis.explain.fault import NO_FAULT, attribution
from analysis.explain.judge import investigate
from tests.conftest import traced_run_dir

OUT = Path("/tmp") / "rmqsim-test-explain-multi"  # replaced per session by the fixture below
SEEDS = (1, 2, 3)
FAILOVER = ("controller_master_power_loss", (
    "cluster.brokers[0].store.flush_disk_type=SYNC_FLUSH", "duration_ms=100s",
    "faults=[{at_ms: 20s, jitter_ms: 500, kind: power_loss, node: broker-a, duration_ms: 60s}, "
    "{at_ms: 50s, kind: process_crash, node: c-1, duration_ms: 20s}]"))
CRASHES = ("process_crash_broker", (
    "faults=[{at_ms: 15s, kind: process_crash, node: broker-a, duration_ms: 10s}, "
    "{at_ms: 20s, kind: process_crash, node: c-1, duration_ms: 10s}]",))
KINDS = ("lost", "duplicates", "order_violations")


@pytest.fixture(scope="module", autouse=True)
def _out(tmp_path_factory) -> None:
    global OUT
    OUT = tmp_path_factory.mktemp("explain-multi")


@functools.cache
def run_dir(story: tuple, seed: int) -> Path:
    scenario, sets = story
    return traced_run_dir(OUT, scenario, seed, sets)


@functools.cache
def attributed(story: tuple, seed: int):
    f = investigate(read_run(run_dir(story, seed)))
    return f, attribution(f)


def target_index(summary: dict, target: str) -> int:
    (index,) = [a["index"] for a in summary["faults_applied"] if a["target"] == target]
    return index


def by_fault(story: tuple, seed: int) -> dict:
    """explain_fault's answer for each fault of the run."""
    run = read_run(run_dir(story, seed))
    return {a["index"]: explain_fault(run, a["index"]) for a in run.summary["faults_applied"]}


def windows_of(directory: Path) -> list[tuple[int, str, int, int]]:
    """(index, target, start, until) of each fault, as the documented rule states them, from the
    summary and the trace: until = the latest of its end, its target's restart after it, and back to
    normal (the run's end if never)."""
    r = rmqsim.load(directory)
    end_us = r.summary["sim_time_ms"] * 1000
    back = {a["index"]: a["back_ms"] for a in r.summary["availability"]["faults"]}
    restarted = r.frame("node.restarted")
    out = []
    for a in r.summary["faults_applied"]:
        start, stop = round(a["start_ms"] * 1000), round(a["end_ms"] * 1000)
        later = restarted[(restarted.node == a["target"]) & (restarted.t_us >= stop)].t_us
        until = max(stop, end_us if back[a["index"]] is None else round(back[a["index"]] * 1000),
                    int(later.min()) if len(later) else 0)
        out.append((a["index"], a["target"], start, until))
    return out


def expected_owner(v, windows: list, group_of) -> object:
    """The documented rule: the faults whose window holds the finding's time, those on its node's
    broker group first, then the latest to start; "no fault" when none holds it."""
    if v.event_us is None:
        return NO_FAULT
    holding = [w for w in windows if w[2] <= v.event_us <= w[3]]
    if v.node is not None:
        holding = [w for w in holding if group_of(w[1]) == group_of(v.node)] or holding
    return max(holding, key=lambda w: (w[2], w[0]))[0] if holding else NO_FAULT


@pytest.mark.parametrize("story", [FAILOVER, CRASHES], ids=["failover", "crashes"])
@pytest.mark.parametrize("seed", SEEDS)
def test_every_finding_goes_where_the_documented_rule_says(story: tuple, seed: int) -> None:
    f, (_faults, _counts, found) = attributed(story, seed)
    windows = windows_of(run_dir(story, seed))
    owners = {owner for _v, owner in found}
    assert len(owners - {NO_FAULT}) == 2 or story is FAILOVER  # both faults have findings (the crashes)
    for v, owner in found:
        assert owner == expected_owner(v, windows, f.run_broker), (v.verdict, v.cause, v.event_us, v.node)


def assert_adds_up(answers: dict, summary: dict) -> None:
    """Every answer's attribution adds up to the summary, and each fault's effects are its share."""
    for index, a in answers.items():
        totals = {kind: sum(x[kind]["total"] for x in a["attribution"].values()) for kind in KINDS}
        assert totals["lost"] == summary["lost"] and totals["duplicates"] == summary["duplicates"]
        assert a["attribution"][str(index)] == a["effects"]
        assert a["attribution"] == next(iter(answers.values()))["attribution"]  # one attribution per run


@pytest.mark.parametrize("seed", SEEDS)
def test_losses_of_a_failover_go_to_the_power_loss_not_the_later_consumer_crash(seed: int) -> None:
    summary = rmqsim.load(run_dir(FAILOVER, seed)).summary
    power, crash = target_index(summary, "broker-a"), target_index(summary, "c-1")
    f, (faults, _counts, found) = attributed(FAILOVER, seed)
    lost = [(v, owner) for v, owner in found if v.verdict == "lost"]
    assert lost and summary["lost"] == len(lost)
    assert {owner for _v, owner in lost} == {power}
    # the mechanism: the losses fall inside the consumer crash's window too (the node decides)
    window = next(w for w in faults if w.index == crash)
    assert any(window.start_us <= v.event_us <= window.until_us for v, _o in lost)
    # and the old master's truncation recorded the same reuses again, after its fault had ended
    reused = rmqsim.load(run_dir(FAILOVER, seed)).frame("consume_queue.offset_reused")
    end_us = next(w.end_us for w in faults if w.index == power)
    assert (reused.groupby("msg_id").size() > 1).any() and (reused.t_us > end_us).any()
    answers = by_fault(FAILOVER, seed)
    assert answers[power]["effects"]["lost"]["total"] == summary["lost"]
    assert answers[crash]["effects"]["lost"]["total"] == 0
    assert answers[power]["attribution"][NO_FAULT]["lost"]["total"] == 0
    assert_adds_up(answers, summary)
    groups = {f.run_broker(v.node) for v, _o in found if v.node is not None and v.verdict == "lost"}
    assert groups == {"broker-a"}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_consumer_crash_and_a_broker_crash_each_get_their_own_duplicates(seed: int) -> None:
    summary = rmqsim.load(run_dir(CRASHES, seed)).summary
    broker, consumer = target_index(summary, "broker-a"), target_index(summary, "c-1")
    _f, (faults, counts, found) = attributed(CRASHES, seed)
    causes = Counter((v.cause, owner) for v, owner in found)
    assert causes[("consumer_crash", consumer)] >= 1 and causes[("broker_offset_rollback", broker)] >= 1
    assert {owner for (cause, owner) in causes if cause == "consumer_crash"} == {consumer}
    assert {owner for (cause, owner) in causes if cause == "broker_offset_rollback"} == {broker}
    # the mechanism: broker-a's restart, where the rollback shows, lies inside c-1's crash window
    restart_us = next(w.restart_us for w in faults if w.index == broker)
    window = next(w for w in faults if w.index == consumer)
    assert window.start_us <= restart_us <= window.until_us
    answers = by_fault(CRASHES, seed)
    assert answers[consumer]["effects"]["duplicates"]["by_cause"]["consumer_crash"] == \
        summary["duplicates_by_cause"]["consumer_crash"]
    assert answers[broker]["effects"]["duplicates"]["by_cause"]["broker_offset_rollback"] == \
        summary["duplicates_by_cause"]["broker_offset_rollback"]
    assert_adds_up(answers, summary)
    for index, a in answers.items():  # each fault's examples are its own findings
        own = {c for kind in KINDS for c in a["effects"][kind]["by_cause"]}
        assert all(x["cause"] in own for x in a["examples"])
        assert sum(a["effects"]["duplicates"]["by_cause"].values()) == counts[index]["duplicates"].total()
