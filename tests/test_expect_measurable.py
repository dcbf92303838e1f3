"""An `expect:` on a metric the scenario cannot measure is refused at validation (issue 37, item 7).

Before, `expect: {failovers: 0}` without controllers (or `timer.delivered` without timer
messages, a POP cause without a POP group, `txn.*` without a transactional producer) validated
`ok`, and the run then ended exit 3 "not measured". Now `rmqsim validate` and `rmqsim run` exit 2
naming the key path and why, every such problem at once; a scenario that has the feature keeps
its expectation, and every bundled scenario still loads.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rmqsim.scenario import spec as scenario_mod
from sim.config import ConfigError

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], cwd=str(REPO), capture_output=True,
                          text=True, timeout=120)


@functools.cache
def _bundled(name: str) -> dict[str, Any]:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def with_expect(name: str, expect: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A bundled scenario's document, its own `expect:` replaced by `expect`, top-level keys changed."""
    doc = copy.deepcopy(_bundled(name))
    doc.update(changes, expect=expect)
    return doc


def problems_of(doc: dict[str, Any]) -> list[str]:
    """The validation problems of `doc` (empty: it loads)."""
    try:
        scenario_mod.from_data(copy.deepcopy(doc), "s.yaml")
    except ConfigError as exc:
        return exc.problems
    return []


UNMEASURABLE = {  # metric → (the why it is refused for, in baseline.yaml: no feature beyond push consumption)
    "failovers": "not measured: the scenario has no controller (cluster.controller)",
    "two_masters_s.broker-a": "not measured: the scenario has no controller (cluster.controller)",
    "timer.delivered": "not measured: no producer here sends timer messages (producers[].deliver_time_ms)",
    "timer_delay_error_ms.max": "not measured: no producer here sends timer messages",
    "duplicates_by_cause.timer_redelivered": "only timer messages cause it: no producer here sends timer messages",
    "txn.pending": "not measured: no producer here is transactional (producers[].transaction)",
    "txn_violations": "not measured: no producer here is transactional",
    "duplicates_by_cause.txn_double_commit": "only a transactional producer causes it",
    "duplicates_by_cause.ack_lost": "only POP consumption causes it: no consumer group here consumes by POP",
    "duplicates_by_cause.invisible_time_expired": "no consumer group here consumes by POP (consumers[].pop)",
    "order_violations": "not measured: no consumer group here consumes ORDERLY",
    "order_violations_by_cause.lock_expired": "no consumer group here consumes ORDERLY",
    "send_latency_ms_in_faults.p99": "not measured: the scenario has no fault with a window",
    "send_share_by_broker_in_faults.broker-a": "the scenario has no fault with a window",
}


def test_validate_refuses_every_unmeasurable_expectation_at_once(tmp_path):
    expect = {metric: {"max": 0} for metric in UNMEASURABLE} | {"lost": 0, "rebalances": {"max": 5}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(with_expect("baseline", expect)))
    res = run_cli("validate", str(path))
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0] == f"{len(UNMEASURABLE)} problem(s) in {path}:", res.stderr
    for metric, why in UNMEASURABLE.items():
        where = f"expect.{metric}: " if "-" not in metric else f"expect['{metric[:30]}"  # a key with '-' is quoted
        assert any(line.strip().startswith(f"{path}: {where}") and why in line for line in lines), (metric, res.stderr)


def test_run_refuses_it_before_running(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(with_expect("baseline", {"failovers": 0}, duration_ms="2s")))
    out = tmp_path / "out"
    res = run_cli("run", str(path), "--out", str(out))
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert f"{path}: expect.failovers: not measured: the scenario has no controller (cluster.controller), " \
           "so no master fails over" in res.stderr
    assert not out.exists()


def test_a_set_override_is_judged_alike():
    with pytest.raises(ConfigError) as caught:
        scenario_mod.load(SCENARIOS / "baseline.yaml", overrides=["expect={timer.pending: 0}"])
    assert caught.value.problems == ["expect.timer.pending: not measured: no producer here sends timer messages "
                                     "(producers[].deliver_time_ms)"]


@pytest.mark.parametrize("scenario, metric", [
    ("controller_quorum_loss", "failovers"),
    ("controller_partition_master", "two_masters_s.broker-a"),
    ("timer_messages_power_loss", "timer.delivered"),
    ("timer_messages_power_loss", "duplicates_by_cause.timer_redelivered"),
    ("txn_baseline", "txn.pending"),
    ("txn_baseline", "duplicates_by_cause.txn_double_commit"),
    ("pop_consumer_crash", "duplicates_by_cause.ack_lost"),
    ("orderly_broker_failure", "order_violations"),
    ("orderly_send", "send_latency_ms_in_faults.p99"),  # a process_crash: a fault window
])
def test_a_scenario_with_the_feature_keeps_its_expectation(scenario, metric):
    assert problems_of(with_expect(scenario, {metric: {"max": 100}})) == []


def test_controllers_without_a_broker_group_in_controller_mode():
    doc = with_expect("controller_quorum_loss", {"failovers": 0})
    for group in doc["cluster"]["brokers"]:
        group.get("broker", {}).pop("enable_controller_mode", None)
    problems = problems_of(doc)
    assert problems == ["expect.failovers: not measured: no broker group here runs in controller mode "
                        "(cluster.brokers[].broker.enable_controller_mode), so no master fails over"], problems


@pytest.mark.parametrize("metric", ["latency_ms.p99", "consume_latency_ms.max"])
def test_consumer_metrics_need_a_consumer(metric):
    assert problems_of(with_expect("baseline", {metric: {"max": 10_000}}, consumers=[])) == [
        f"expect.{metric}: not measured: the scenario has no consumer (consumers)"]


def test_queue_metrics_need_a_group_that_owns_queues():
    pop_only = with_expect("pop_consumer_crash", {"rebalances": 0, "unowned_queue_s": 0})
    assert problems_of(pop_only) == [
        "expect.rebalances: not measured: every consumer group here consumes by POP (consumers[].pop), which owns "
        "no queue and never rebalances",
        "expect.unowned_queue_s: not measured: no CLUSTERING consumer group here owns queues (a BROADCASTING "
        "member owns every queue, a POP group none)"]
    broadcasting = with_expect("broadcasting_consumer_crash", {"rebalances": {"max": 100}, "unowned_queue_s": 0})
    assert [p.split(":")[0] for p in problems_of(broadcasting)] == ["expect.unowned_queue_s"]


def test_send_latency_needs_a_send_that_waits_for_its_result():
    doc = with_expect("baseline", {"send_latency_ms.p99": {"max": 50}})
    for producer in doc["producers"]:
        producer["send_mode"] = "ONEWAY"
    assert problems_of(doc) == ["expect.send_latency_ms.p99: not measured: no producer here waits for a send's "
                                "result (every one is ONEWAY)"]


def test_instant_faults_open_no_window():
    doc = with_expect("baseline", {"send_latency_ms_in_faults.p99": {"max": 50}},
                      faults=[{"at_ms": "1s", "kind": "heal"}])
    assert problems_of(doc) == ["expect.send_latency_ms_in_faults.p99: not measured: the scenario has no fault "
                                "with a window (faults, random_faults; restart and heal have none)"]


def test_a_fifo_pop_group_is_orderly():
    """rmqsim/runner.py checks order for a FIFO POP group (pop.orderly): its order and its per-key
    guarantee may be expected."""
    doc = with_expect("pop_consumer_crash", {"order_violations": 0, "guarantees": {"per_key_order": "hold"}})
    doc["consumers"][0]["pop"]["orderly"] = True
    assert problems_of(doc) == []


def test_an_invalid_entry_is_pydantics_alone():
    """Where the features cannot be known (a consumer entry pydantic refuses), no expectation is
    called unmeasurable: the one problem is the entry's own."""
    problems = problems_of(with_expect("baseline", {"order_violations": 0}, consumers=[5]))
    assert problems and not any("not measured" in p for p in problems), problems


def test_every_bundled_scenario_still_loads():
    for path in sorted(SCENARIOS.glob("*.yaml")):
        scenario_mod.load(path)  # a ConfigError names the file and what is refused
