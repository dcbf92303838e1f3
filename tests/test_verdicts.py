"""Guarantee verdicts (analysis/checkers/verdict.py) and `rmqsim run`'s exit codes.

A run is `valid`, `invalid` or `unknown` (Jepsen's vocabulary): loss of an acknowledged message
is always invalid; duplicates are counted and attributed, and fail a run only where a scenario's
`expect:` says so; order is judged only for groups that consume orderly (null elsewhere); a
message still in the retry path or in the DLQ when the run ends is not lost. `expect.guarantees`
may say a guarantee is to break: the run is then valid when it breaks and invalid when it holds,
and the summary keeps the guarantee's own result. `rmqsim run` exits 0 valid, 1 invalid, 2 bad
input, 3 unknown. The CLI is run as a subprocess (exit codes, output); the rest in-process, on
short runs.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

import rmqsim
from analysis.checkers.checks import latency_samples
from analysis.checkers.verdict import EXPECTABLE_METRICS, judge
from rmqsim.scenario import spec as scenario
from sim.config import ConfigError
from sim.trace import field_index
from tests.conftest import ROOT, short_baseline

SHORT = ["--set", "duration_ms=8000", "--set", "settle_ms=4000"]


def rmqsim_cli(*args: str, out: Path | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "rmqsim.cli", *args]
    if out is not None:
        argv += ["--out", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=str(ROOT), timeout=300)


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# --- rmqsim run exit codes ----------------------------------------------------------------------

def test_lost_messages_exit_1_invalid(tmp_path) -> None:
    """power_loss_async_flush without its `expect:` (which says at-least-once is to break), as
    bundled otherwise: its consumers need the whole settle period to drain the backlog, so a
    shortened run would also count unconsumed messages as lost."""
    done = rmqsim_cli("run", "scenarios/power_loss_async_flush.yaml", "--set", "expect={}", out=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    s = summary_of(tmp_path)
    assert s["verdict"] == "invalid" and s["lost"] > 0 and s["stopped_by"] is None
    failure = f"at_least_once(billing): {s['lost']} acknowledged message(s) never consumed"
    assert s["failures"] == [failure]
    assert "verdict: invalid" in done.stdout and failure in done.stdout


def test_only_duplicates_exit_0_and_are_shown(tmp_path) -> None:
    done = rmqsim_cli("run", "scenarios/restart_consumer.yaml", "--set", "duration_ms=27s", "--set", "settle_ms=5s",
                  out=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    s = summary_of(tmp_path)
    assert s["verdict"] == "valid" and s["failures"] == [] and s["lost"] == 0
    assert s["duplicates"] > 0 and s["duplicate_causes"]["redelivery"] == s["duplicates"]
    lines = done.stdout.splitlines()
    (shown,) = [line for line in lines if line.startswith("  duplicate deliveries ")]
    assert shown.split()[2].rstrip(",:") == f"{s['duplicates']:,}"
    for cause, n in s["duplicates_by_cause"].items():  # the ten mechanisms, nonzero ones only
        assert (cause in shown) == (n > 0)
    assert "redelivery" not in done.stdout  # the two-way split stays in summary.json
    assert "  lost                   0 acknowledged messages" in lines
    assert "verdict: valid" in lines


def test_expect_violation_exits_1_and_names_the_expectation(tmp_path) -> None:
    done = rmqsim_cli("run", "scenarios/baseline.yaml", *SHORT, "--set", "expect={latency_ms.p99: {max: 0.001}}",
                  out=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    s = summary_of(tmp_path)
    assert s["verdict"] == "invalid" and s["lost"] == 0  # only the expectation failed
    assert all(g["ok"] for g in s["guarantees"])
    (expectation,) = s["expectations"]
    assert expectation["metric"] == "latency_ms.p99" and expectation["ok"] is False
    assert expectation["actual"] == s["latency_ms"]["p99"] > 0.001
    failure = f"expect latency_ms.p99: latency_ms.p99 = {s['latency_ms']['p99']}, expected <= 0.001"
    assert s["failures"] == [failure] and failure in done.stdout


def test_expect_on_an_unknown_metric_is_bad_input_with_the_key_path(tmp_path) -> None:
    done = rmqsim_cli("run", "scenarios/baseline.yaml", *SHORT, "--set", "expect={latency_ms.p98: {max: 5}}",
                  out=tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "expect.latency_ms.p98: not a metric an expectation can bound (did you mean 'latency_ms.p99'?)" \
        in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()  # nothing ran

    path = tmp_path / "expects.yaml"
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    path.write_text(yaml.safe_dump({**data, "expect": {"lost": 0, "dupes": {"max": 0}, "p99": {"max": 5}}}))
    done = rmqsim_cli("validate", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"2 problem(s) in {path}:")  # all at once; `lost` is a metric
    problems = [line.strip().removeprefix(f"{path}: ") for line in done.stderr.splitlines()[1:]]
    assert [p.split(":")[0] for p in problems] == ["expect.dupes", "expect.p99"]
    assert "(did you mean 'duplicates'?)" in problems[0] and "latency_ms.{p50, p90, p99, p999, max}" in problems[1]


def test_expected_break_exits_0_and_the_summary_keeps_the_guarantee_result(tmp_path) -> None:
    """power_loss_async_flush as bundled: its `expect:` says at-least-once breaks (ASYNC_FLUSH
    acknowledges before the fsync), and it does: valid, exit 0, the loss still reported."""
    done = rmqsim_cli("run", "scenarios/power_loss_async_flush.yaml", out=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    s = summary_of(tmp_path)
    assert s["verdict"] == "valid" and s["failures"] == [] and s["lost"] > 0
    assert s["guarantees"] == [{"group": "billing", "guarantee": "at_least_once", "ok": False,
                                "why": f"{s['lost']} acknowledged message(s) never consumed"}]
    assert s["guarantee_outcomes"] == {"at_least_once(billing)": {"held": False, "expected": "break",
                                                                  "as_expected": True}}
    assert "verdict: valid" in done.stdout.splitlines()


def test_expected_break_that_holds_exits_1_and_says_so(tmp_path) -> None:
    """The baseline loses nothing; stating that at-least-once breaks (by `--set`, key by key)
    makes it invalid, with the reason."""
    done = rmqsim_cli("run", "scenarios/baseline.yaml", *SHORT, "--set", "expect.guarantees.at_least_once=break",
                  out=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    s = summary_of(tmp_path)
    failure = ("at_least_once(billing): expected at_least_once to break (an acknowledged message never "
               "consumed) but it held")
    assert s["verdict"] == "invalid" and s["lost"] == 0 and s["failures"] == [failure]
    assert s["guarantees"][0]["ok"] is True  # the guarantee's own result
    assert s["guarantee_outcomes"]["at_least_once(billing)"] == {"held": True, "expected": "break",
                                                                 "as_expected": False}
    assert failure in done.stdout


def test_bounded_run_exits_3_unknown(tmp_path) -> None:
    done = rmqsim_cli("run", "scenarios/baseline.yaml", *SHORT, "--max-events", "1000", out=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    s = summary_of(tmp_path)
    assert (s["verdict"], s["stopped_by"]) == ("unknown", "max_events")
    assert s["failures"] == ["run stopped at its max_events bound: nothing can be judged"]
    assert s["guarantees"] == [] and s["sim_time_ms"] < 12_000
    assert json.loads((tmp_path / "run_meta.json").read_text())["events"] == 1000
    assert "verdict: unknown" in done.stdout


def test_exit_codes_are_in_help() -> None:
    done = rmqsim_cli("run", "--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "0 valid" in text and "1 invalid" in text and "2 bad input" in text and "3 unknown" in text


# --- in-process: what each verdict is made of ---------------------------------------------------

@functools.cache
def two_groups() -> rmqsim.runner.RunResult:
    """The short baseline plus a BROADCASTING group of two: no group consumes orderly."""
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    data.update(duration_ms=10_000, settle_ms=5_000)
    data["producers"][0]["rate_per_s"] = 300
    data["consumers"].append({"name": "b", "count": 2, "group": "cache", "topic": "orders",
                              "client": {"message_model": "BROADCASTING"}})
    return rmqsim.run(scenario.from_data(data, "two groups"))


def test_groups_that_do_not_consume_orderly_report_order_null() -> None:
    s = two_groups().summary
    assert set(s["groups"]) == {"billing", "cache/b-1", "cache/b-2"}
    assert s["order_violations"] is None
    assert {name: g["order_violations"] for name, g in s["groups"].items()} == dict.fromkeys(s["groups"])
    assert [(g["group"], g["guarantee"]) for g in s["guarantees"]] == [("billing", "at_least_once"),
                                                                       ("cache", "at_least_once")]
    assert s["lost"] == 0 and s["verdict"] == "valid"
    assert all(g["consumed_ok_distinct"] == s["sent_ok"] for g in s["groups"].values())


def test_max_wall_s_bound_is_unknown() -> None:
    s = rmqsim.run(short_baseline(), max_wall_s=0.0).summary  # stops after the first slice
    assert (s["verdict"], s["stopped_by"]) == ("unknown", "max_wall_s")
    assert s["sim_time_ms"] < 30_000 and s["guarantees"] == [] and s["expectations"] == []


@pytest.mark.parametrize("expect, verdict", [
    ({"lost": 0}, "valid"),
    ({"duplicates": {"max": 0}}, "invalid"),  # duplicates fail a run only where expected not to happen
    ({"duplicates": {"min": 1}, "duplicate_causes.redelivery": {"min": 1, "max": 1_000}}, "valid"),
])
def test_expectations_on_a_run_with_duplicates(expect: dict, verdict: str) -> None:
    s = restart_consumer_summary(json.dumps(expect))
    assert s["duplicates"] > 0 and s["lost"] == 0
    assert s["verdict"] == verdict, s["failures"]
    assert [e["metric"] for e in s["expectations"]] == list(expect)
    if verdict == "invalid":
        assert s["failures"] == [f"expect duplicates: duplicates = {s['duplicates']}, expected <= 0.0"]


def test_an_expectation_the_scenario_cannot_measure_is_refused_before_the_run() -> None:
    """No group consumes orderly, so order is not checked: `expect: {order_violations: 0}` is a
    validation error (issue 37, item 7), not a run that ends unknown."""
    with pytest.raises(ConfigError, match=r"expect\.order_violations: not measured: no consumer group here consumes"):
        restart_consumer_summary(json.dumps({"order_violations": 0}))


@functools.cache
def restart_consumer_summary(expect_json: str) -> dict:
    overrides = ["duration_ms=27s", "settle_ms=5s", f"expect={expect_json}"]
    return rmqsim.run(ROOT / "scenarios" / "restart_consumer.yaml", overrides=overrides).summary


def test_expect_keys_are_summary_metrics() -> None:
    """Every metric an `expect:` may name is a number (or null) in a run's summary; a null parent
    (send_latency_ms_in_faults without a fault window) makes the metric null."""
    s = two_groups().summary
    for path in EXPECTABLE_METRICS:
        node = s
        for part in path.split("."):
            node = None if node is None else node[part]
        assert node is None or isinstance(node, int | float), path


def test_judge_rules() -> None:
    summary = {"lost": 0, "duplicates": 3, "order_violations": None, "latency_ms": {"p99": 7.5},
               "groups": {"g": {"lost": 0, "order_violations": None}, "o": {"lost": 2, "order_violations": 1}}}
    promises = [{"group": "g", "guarantee": "at_least_once"}, {"group": "o", "guarantee": "at_least_once"},
                {"group": "o", "guarantee": "per_key_order"}]
    out = judge(summary, promises, {"latency_ms.p99": {"min": 1.0, "max": 7.5}})
    assert out["verdict"] == "invalid"
    assert out["failures"] == ["at_least_once(o): 2 acknowledged message(s) never consumed",
                               "per_key_order(o): 1 order violation(s)"]
    assert [e["ok"] for e in out["expectations"]] == [True]  # bounds are inclusive
    assert judge(summary, promises[:1], {})["verdict"] == "valid"  # duplicates alone: valid
    stopped = judge(summary, promises, {"lost": {"min": 0, "max": 0}}, stopped_by="max_events")
    assert stopped == {"verdict": "unknown", "guarantees": [], "guarantee_outcomes": {}, "expectations": [],
                       "failures": ["run stopped at its max_events bound: nothing can be judged"]}


# --- expected outcomes of guarantees (expect.guarantees) ----------------------------------------

BROKE = {"lost": 2, "order_violations": 3, "txn_violations": None,
         "groups": {"g": {"lost": 2, "order_violations": 3}}}
HELD = {"lost": 0, "order_violations": 0, "txn_violations": None,
        "groups": {"g": {"lost": 0, "order_violations": 0}}}
NOT_CHECKED = {"lost": 0, "order_violations": None, "txn_violations": None,
               "groups": {"g": {"lost": 0, "order_violations": None}}}
ORDERLY_G = [{"group": "g", "guarantee": "at_least_once"}, {"group": "g", "guarantee": "per_key_order"}]


@pytest.mark.parametrize("summary, stated, verdict, failures", [
    (BROKE, {"at_least_once": "break", "per_key_order": "break"}, "valid", []),
    (BROKE, {"at_least_once": {"g": "break"}, "per_key_order": "break"}, "valid", []),  # by group
    (BROKE, {"at_least_once": "break"}, "invalid", ["per_key_order(g): 3 order violation(s)"]),  # hold: the default
    (HELD, {"per_key_order": "break"}, "invalid",
     ["per_key_order(g): expected per_key_order to break (a message consumed before an earlier one of its "
      "sharding key) but it held"]),
    (HELD, {"at_least_once": "hold"}, "valid", []),
    (NOT_CHECKED, {"per_key_order": "break"}, "unknown", ["per_key_order(g): order not checked"]),  # null stays null
])
def test_expected_outcomes_decide_the_verdict(summary: dict, stated: dict, verdict: str, failures: list) -> None:
    out = judge(summary, ORDERLY_G, {"guarantees": stated})
    assert (out["verdict"], out["failures"]) == (verdict, failures)
    assert out["expectations"] == []  # `guarantees` is no metric
    assert [g["ok"] for g in out["guarantees"]] == [summary["lost"] == 0,  # each guarantee's own result
                                                    None if summary["order_violations"] is None
                                                    else summary["order_violations"] == 0]
    for name, outcome in out["guarantee_outcomes"].items():
        guarantee = name.split("(")[0]
        stated_here = stated.get(guarantee, "hold")
        expected = stated_here.get("g", "hold") if isinstance(stated_here, dict) else stated_here
        held = outcome["held"]
        assert outcome == {"held": held, "expected": expected,
                           "as_expected": None if held is None else held == (expected == "hold")}


@pytest.mark.parametrize("violations, stated, verdict, failures", [
    (4, "break", "valid", []),
    (0, "break", "invalid", ["transactions: expected transactions to break (a committed message lost, or a "
                             "rolled-back one visible) but it held"]),
    (4, "hold", "invalid", ["transactional atomicity: 4 violation(s) (committed_lost 4 {}, rolled_back_visible 0)"]),
    (None, "break", "unknown", ["transactions: no transaction was checked in this run"]),
])
def test_expected_outcome_of_transactions(violations: int | None, stated: str, verdict: str,
                                          failures: list[str]) -> None:
    summary = {**HELD, "txn_violations": violations,
               "txn": {"committed_lost": violations, "committed_lost_causes": {}, "rolled_back_visible": 0}}
    out = judge(summary, ORDERLY_G[:1], {"guarantees": {"transactions": stated}})
    assert (out["verdict"], out["failures"]) == (verdict, failures)
    held = None if violations is None else violations == 0
    assert out["guarantee_outcomes"]["transactions"] == {
        "held": held, "expected": stated, "as_expected": None if held is None else held == (stated == "hold")}


def test_no_transactions_no_transaction_outcome() -> None:
    out = judge(HELD, ORDERLY_G, {})
    assert out["verdict"] == "valid" and set(out["guarantee_outcomes"]) == {"at_least_once(g)", "per_key_order(g)"}
    assert all(o == {"held": True, "expected": "hold", "as_expected": True} for o in out["guarantee_outcomes"].values())


def baseline_with(expect: dict, **changes) -> dict:
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    return {**data, **changes, "expect": expect}


@pytest.mark.parametrize("expect, problems", [
    ({"guarantees": {"per_key_order": "break"}},
     ["expect.guarantees.per_key_order: no consumer group here consumes ORDERLY, so nothing promises per_key_order"]),
    ({"guarantees": {"transactions": "break"}},
     ["expect.guarantees.transactions: no producer here is transactional (producers[].transaction), so nothing "
      "promises transactions"]),
    ({"guarantees": {"at_least_one": "break"}},
     ["expect.guarantees.at_least_one: not a guarantee (did you mean 'at_least_once'?)"]),
    ({"guarantees": {"at_least_once": {"billing": "break", "audit": "hold"}}},
     ["expect.guarantees.at_least_once.audit: 'audit' is not a consumer group with at_least_once here "
      "(groups: billing)"]),
    ({"guarantees": {"at_least_once": "broken"}},
     ["expect.guarantees.at_least_once: expected hold or break, or a mapping of consumer group to hold or break "
      "(got 'broken')"]),
    ({"guarantees": {"at_least_once": {"billing": "brk"}}},
     ["expect.guarantees.at_least_once: expected hold or break, or a mapping of consumer group to hold or break "
      "(got 'brk')"]),
    ({"guarantee": {"at_least_once": "break"}, "lost": {"maxx": 0}},
     ["expect.guarantee.at_least_once: unknown key (known keys: max, min)",
      "expect.lost.maxx: unknown key (did you mean 'max'?)",
      "expect.guarantee: not a metric an expectation can bound (did you mean 'guarantees'?)"]),
])
def test_expected_guarantees_are_checked_against_the_scenario(expect: dict, problems: list[str]) -> None:
    """A guarantee the scenario does not have, a group without it, or a value other than hold or
    break is bad input, named by its key path (all at once, with the other problems)."""
    with pytest.raises(ConfigError) as err:
        scenario.from_data(baseline_with(expect), "x.yaml")
    assert err.value.problems == problems


def test_expected_guarantees_validate_where_the_scenario_has_them() -> None:
    data = baseline_with({"guarantees": {"at_least_once": {"billing": "break"}, "per_key_order": "hold"}})
    data["consumers"][0]["consume_mode"] = "ORDERLY"
    sc = scenario.from_data(data, "x.yaml")
    assert sc.expect["guarantees"].model_dump() == {"at_least_once": {"billing": "break"}, "per_key_order": "hold"}


# --- pending_retry and dlq: not lost -----------------------------------------------------------

@functools.cache
def failing_listener() -> rmqsim.runner.RunResult:
    """The baseline with a listener that fails 5 % of consumptions (RECONSUME_LATER) and gives
    up after one retry (maxReconsumeTimes 1: the second failure goes to the DLQ). The retry
    queue is first allocated at about 43 s (route poll at 30 s, then the 20 s rebalance grid),
    so the run lasts 45 + 5 s: retries are consumed, and failures of the last ~10 s are still
    in back-off when it ends."""
    sc = scenario.load(ROOT / "scenarios" / "baseline.yaml",
                       ["duration_ms=45s", "settle_ms=5s", "producers[0].rate_per_s=100",
                        "consumers[0].failure_probability=0.05", "consumers[0].client.max_reconsume_times=1"])
    return rmqsim.run(sc, keep_records=True, details=True)


def test_messages_in_back_off_are_pending_retry_not_lost() -> None:
    r = failing_listener()
    s, g = r.summary, r.summary["groups"]["billing"]
    assert s["sent_not_ok"] == s["send_failed"] == 0  # every message acknowledged
    assert s["lost"] == 0 and s["verdict"] == "valid" and s["failures"] == []
    assert s["pending_retry"] > 0 and s["dlq"] > 0
    # they add up: every acknowledged message is consumed, in back-off, or in the DLQ
    assert g["consumed_ok_distinct"] + g["pending_retry"] + g["dlq"] == s["sent_ok"]
    assert r.details["delivery_counts"][0] == s["pending_retry"] + s["dlq"]
    assert len(latency_samples(r.details)["msg_id"]) == g["consumed_ok_distinct"]


def test_pending_and_dlq_messages_are_where_the_summary_says() -> None:
    """Cross-check with the records: the unconsumed messages all failed a consumption; those
    stored in %DLQ%billing are the `dlq` ones; the rest were sent back into SCHEDULE_TOPIC_XXXX
    within the last level-3 delay (10 s) of the run, so their retry is not due before it ends."""
    r = failing_listener()
    s = r.summary
    end_us = s["sim_time_ms"] * 1000

    def col(kind: str, name: str) -> int:
        return field_index(kind, name)

    acked = {rec[col("producer.sent", "msg_id")] for rec in r.records
             if rec[2] == "producer.sent" and rec[col("producer.sent", "status")] == "SEND_OK"}
    consumed_ok, failed = set(), set()
    for rec in (x for x in r.records if x[2] == "consumer.consumed"):
        (consumed_ok if rec[col("consumer.consumed", "ok")] else failed).add(rec[col("consumer.consumed", "msg_id")])
    stores: dict[str, dict[int, int]] = defaultdict(dict)  # topic -> msg id -> last store time
    for rec in (x for x in r.records if x[2] == "broker.stored"):
        stores[rec[col("broker.stored", "topic")]][rec[col("broker.stored", "msg_id")]] = rec[0]
    missing = acked - consumed_ok
    assert missing and missing <= failed
    in_dlq = missing & set(stores["%DLQ%billing"])
    pending = missing - in_dlq
    assert (len(in_dlq), len(pending)) == (s["dlq"], s["pending_retry"])
    assert all(end_us - stores["SCHEDULE_TOPIC_XXXX"][m] < 10_000_000 + 200_000 for m in pending)
