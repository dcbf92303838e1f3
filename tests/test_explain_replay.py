"""`rmqsim explain` without a trace (a replay) says what it says with one; `--fault` attributes every
finding; bad input exits 2; `rmqsim.load` reads a run back; the summary's samples lead to explain.
Detail records (sim/trace.py) never move a run's digest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import rmqsim
from analysis.explain.answer import explain_cause, explain_fault, explain_message, read_run
from rmqsim import cli
from sim.trace import DETAIL_KINDS, digest
from tests.conftest import ROOT

RUNS: dict[tuple, Path] = {}


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("explain-replay")


def run_dir(out: Path, scenario: str, trace: bool) -> Path:
    key = (scenario, trace)
    if key not in RUNS:
        path = out / f"{scenario}-{'trace' if trace else 'replay'}"
        argv = ["run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--seed", "1", "--out", str(path)]
        assert cli.main(argv + (["--trace"] if trace else [])) in (0, 1)
        RUNS[key] = path
    return RUNS[key]


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_explain_without_a_trace_says_what_it_says_with_one(out: Path) -> None:
    traced, replayed = read_run(run_dir(out, "orderly_broker_failure", True)), \
        read_run(run_dir(out, "orderly_broker_failure", False))
    assert traced.trace_dir is not None and replayed.trace_dir is None
    summary = traced.summary
    keys = [summary["duplicate_sample"]["broker_offset_rollback"][0], summary["order_violation_sample"]["send_side"][0]]
    for key in keys:
        assert explain_message(traced, key) == explain_message(replayed, key), key
    assert explain_cause(traced, "rebalance", 5) == explain_cause(replayed, "rebalance", 5)
    assert explain_fault(traced, 0) == explain_fault(replayed, 0)


@pytest.mark.parametrize("scenario", ["power_loss_async_flush", "orderly_broker_failure"])
def test_fault_attributes_every_loss_duplicate_and_violation(out: Path, scenario: str) -> None:
    run = read_run(run_dir(out, scenario, False))
    s = run.summary
    answer = explain_fault(run, 0)
    owners = answer["attribution"]
    assert set(owners) == {str(a["index"]) for a in s["faults_applied"]} | {"no fault"}
    for kind, total in (("lost", s["lost"]), ("duplicates", s["duplicates"]),
                        ("order_violations", s["order_violations"] or 0)):
        assert sum(o[kind]["total"] for o in owners.values()) == total, kind
        by_cause = {}
        for o in owners.values():
            for cause, n in o[kind]["by_cause"].items():
                by_cause[cause] = by_cause.get(cause, 0) + n
        summary_causes = {"lost": s["lost_by_cause"], "duplicates": s["duplicates_by_cause"],
                          "order_violations": s["order_violations_by_cause"] or {}}[kind]
        assert by_cause == {c: n for c, n in summary_causes.items() if n}, kind
    if scenario == "power_loss_async_flush":  # every loss is the power loss's
        assert answer["effects"]["lost"]["total"] == s["lost"] > 0
        assert answer["fault"]["back_to_normal_us"] >= answer["fault"]["end_us"]
    else:
        assert answer["effects"]["order_violations"]["by_cause"] == {"send_side": s["order_violations"]}


def test_summary_samples_and_faults_applied(out: Path) -> None:
    s = read_run(run_dir(out, "orderly_broker_failure", True)).summary
    for name, counts in (("duplicate_sample", s["duplicates_by_cause"]),
                         ("order_violation_sample", s["order_violations_by_cause"]), ("lost_sample", s["lost_by_cause"])):
        assert set(s[name]) == {c for c, n in counts.items() if n}, name
        assert all(0 < len(keys) <= min(10, counts[c]) == len(set(keys)) for c, keys in s[name].items())
    (fault,) = s["faults_applied"]
    assert (fault["index"], fault["kind"], fault["target"], fault["start_ms"], fault["end_ms"]) == \
        (0, "process_crash", "broker-a", 20000.0, 35000.0)


def test_jittered_and_unscripted_order_of_faults_applied() -> None:
    """A jittered fault's actual start; indexes follow the scenario's list, not firing order."""
    r = rmqsim.run(str(ROOT / "scenarios" / "restart_consumer.yaml"), seed=1,
                overrides=["faults[0].at_ms=16s", "faults[1].at_ms=14s", "faults[1].kind=disk_slow",
                           "faults[1].node=broker-a", "faults[1].factor=2", "faults[1].duration_ms=1s",
                           "faults[0].jitter_ms=500"])
    applied = r.summary["faults_applied"]
    assert [a["index"] for a in applied] == [1, 0]
    assert applied[0]["start_ms"] == 14000.0 and applied[0]["end_ms"] == 15000.0
    assert 16000.0 <= applied[1]["start_ms"] < 16500.0 and applied[1]["kind"] == "process_crash"


def test_detail_records_leave_the_digest_and_the_summary_alone() -> None:
    path = str(ROOT / "scenarios" / "restart_consumer.yaml")
    plain = rmqsim.run(path, seed=2)
    from rmqsim.runner import run_scenario

    detailed = run_scenario(path, seed=2, detail=True, keep_records=True)
    assert detailed.summary == plain.summary
    kinds = {r[2] for r in detailed.records}
    assert kinds & DETAIL_KINDS >= {"broker.offset_committed", "consume_queue.dispatched", "client.route_updated"}
    assert digest(detailed.records) == plain.summary["trace_sha256"]


def test_cli_exit_codes_and_refusals(out: Path, capsys) -> None:
    d = run_dir(out, "power_loss_async_flush", False)
    key = read_run(d).summary["lost_sample"]["unflushed_at_power_loss"][0]
    capsys.readouterr()
    assert cli.main(["explain", str(d), key, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["key"] == key and answer["verdicts"][0]["cause"] == "unflushed_at_power_loss"
    assert cli.main(["explain", str(d), str(answer["msg_id"])]) == 0
    assert key in capsys.readouterr().out
    for argv in ([str(d), "p-9-1"], [str(d), "--cause", "nope"], [str(d), "--fault", "7"], [str(out), "p-1-1"],
                 [str(d)], [str(d), "p-1-1", "--fault", "0"]):
        assert cli.main(["explain", *argv]) == 2, argv
        assert capsys.readouterr().err.startswith("rmqsim explain: ")
    other = out / "other-simulator"
    shutil.copytree(d, other)
    meta = json.loads((other / "run_meta.json").read_text())
    (other / "run_meta.json").write_text(json.dumps(meta | {"simulator_sha256": "0" * 64}))
    assert cli.main(["explain", str(other), key]) == 2
    assert "another simulator" in capsys.readouterr().err


def test_load_reads_a_run_back(out: Path) -> None:
    d = run_dir(out, "orderly_broker_failure", True)
    loaded = rmqsim.load(d)
    assert loaded.summary == json.loads((d / "summary.json").read_text())
    frame = loaded.frame("consumer.consumed")
    assert list(frame.columns[:5]) == ["t_us", "node", "group", "msg_id", "msg_key"]
    first = frame.iloc[0]
    assert first.msg_key == f"{loaded.world.producers[first.msg_id >> 32].name}-{first.msg_id & 0xFFFFFFFF}"
    key = loaded.summary["order_violation_sample"]["send_side"][0]
    assert loaded.explain(key) == explain_message(read_run(d), key)
    assert repr(loaded).startswith("<RunResult orderly_broker_failure seed=1 ")
    fresh = rmqsim.run(str(ROOT / "scenarios" / "orderly_broker_failure.yaml"), seed=1)
    assert fresh.explain(key) == loaded.explain(key)  # a run in memory: replayed


def test_sources_digest_is_the_sweeps() -> None:
    from analysis.sweeps.sweep import simulator_sha256 as sweeps
    from sim.sources import simulator_sha256

    assert simulator_sha256.__wrapped__() == sweeps()  # computed afresh (the function caches its first answer)
