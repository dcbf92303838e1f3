"""Settings under which no send can succeed are validation errors (rmqsim/scenario/validate.py
`_check_impossible`), each named by its key path, all reported at once; settings that make writes
fail only sometimes are lint warnings (rmqsim/scenario/lint.py: `min-isr-every-replica`,
`min-isr-above-isr`). Each refused file has a near miss, one step away, that validates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from models.message import record_bytes
from rmqsim.scenario import spec as scenario
from rmqsim.scenario.lint import LINT_CHECKS, lint
from sim.config import ConfigError
from tests.conftest import ROOT

FLOW = "producers: [{}]\nconsumers: [{}]\n"


def group(store: str = "", role: str = "SYNC_MASTER", slaves: int = 1, broker: str = "") -> str:
    """One broker group `broker-a` of a master with `role` and `slaves` slaves (classic mode)."""
    replicas = ", ".join([f"{{role: {role}}}"] + ["{role: SLAVE}"] * slaves)
    settings = "".join(f"{key}: {{{value}}}, " for key, value in (("store", store), ("broker", broker)) if value)
    return f"cluster:\n  brokers:\n    - {{name: broker-a, {settings}replicas: [{replicas}]}}\n"


def controller_group(store: str, slaves: int = 2) -> str:
    """A controller-mode group of a master and `slaves` slaves, with three controllers."""
    replicas = ", ".join(["{role: SYNC_MASTER}"] + ["{role: SLAVE}"] * slaves)
    return ("cluster:\n  controller:\n    nodes: [{name: k1}, {name: k2}, {name: k3}]\n  brokers:\n"
            f"    - {{name: broker-a, broker: {{enable_controller_mode: true}}, store: {{{store}}}, "
            f"replicas: [{replicas}]}}\n")


def topic_file(topic: str, producer: str, brokers: str = "    - {name: broker-a}\n") -> str:
    return f"cluster:\n  brokers:\n{brokers}  topics: [{topic}]\n" + f"producers: [{producer}]\n"


def problems(tmp_path: Path, text: str) -> list[str]:
    """The validation problems of a scenario file ([] when it validates)."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    try:
        scenario.load(path)
    except ConfigError as exc:
        return exc.problems
    return []


# (id, refused file, the key path named, words the message must have, a near miss that validates)
REFUSED = [
    ("classic-sync-isr", group("in_sync_replicas: 3") + FLOW, "cluster.brokers[0].store.in_sync_replicas",
     ("above the 2 replicas", "FLUSH_SLAVE_TIMEOUT", "no send to 'broker-a' can succeed", "invalid replicas number"),
     group("in_sync_replicas: 2") + FLOW),
    ("sync-master-alone-isr", group("in_sync_replicas: 2", slaves=0) + FLOW, "cluster.brokers[0].store.in_sync_replicas",
     ("above the 1 replica", "FLUSH_SLAVE_TIMEOUT"), group("in_sync_replicas: 1", slaves=0) + FLOW),
    ("async-master-isr-ignored", group("in_sync_replicas: 3", role="ASYNC_MASTER") + FLOW,
     "cluster.brokers[0].store.in_sync_replicas", ("5.3.3 ignores it here", "ASYNC_MASTER", "no group of 2"),
     group("in_sync_replicas: 2", role="ASYNC_MASTER") + FLOW),
    ("classic-min-isr-ignored", group("min_in_sync_replicas: 3") + FLOW, "cluster.brokers[0].store.min_in_sync_replicas",
     ("only in controller mode", "no group of 2"), group("min_in_sync_replicas: 2") + FLOW),
    ("controller-min-isr", controller_group("min_in_sync_replicas: 4") + FLOW,
     "cluster.brokers[0].store.min_in_sync_replicas", ("IN_SYNC_REPLICAS_NOT_ENOUGH", "never has 4 members"),
     controller_group("min_in_sync_replicas: 3") + FLOW),
    ("controller-isr", controller_group("in_sync_replicas: 4") + FLOW, "cluster.brokers[0].store.in_sync_replicas",
     ("FLUSH_SLAVE_TIMEOUT", "no send to 'broker-a' can succeed"), controller_group("in_sync_replicas: 3") + FLOW),
    ("controller-isr-all-ack", controller_group("in_sync_replicas: 4, all_ack_in_sync_state_set: true") + FLOW,
     "cluster.brokers[0].store.in_sync_replicas", ("ignores it here", "all_ack_in_sync_state_set"),
     controller_group("in_sync_replicas: 3, all_ack_in_sync_state_set: true") + FLOW),
    ("v4-sync-master-alone", "version: 4.x\n" + group(slaves=0) + FLOW, "cluster.brokers[0].replicas[0].role",
     ("SLAVE_NOT_AVAILABLE", "no send to 'broker-a' can succeed"), "version: 4.x\n" + group() + FLOW),
    ("v4-sync-master-alone-role", "version: 4.x\ncluster:\n  brokers:\n    - {store: {broker_role: SYNC_MASTER}}\n" + FLOW,
     "cluster.brokers[0].store.broker_role", ("SLAVE_NOT_AVAILABLE",),
     "version: 4.x\ncluster:\n  brokers:\n    - {store: {broker_role: ASYNC_MASTER}}\n" + FLOW),
    ("topic-hosted-nowhere", topic_file("{name: T, brokers: []}", "{topic: T}"), "producers[0].topic",
     ("hosted by no broker", "cluster.topics[0].brokers is empty"),
     topic_file("{name: T, brokers: [broker-a]}", "{topic: T}")),
    ("body-above-client-max", topic_file("{name: T}", "{topic: T, message_bytes: 5MiB}"), "producers[0].message_bytes",
     ("client.max_message_size_bytes", "client refuses every send"), topic_file("{name: T}", "{topic: T, message_bytes: 4MiB}")),
    ("uniform-body-above-client-max", topic_file("{name: T}", "{topic: T, message_bytes: {dist: uniform, low: 5MiB, "
                                                               "high: 6MiB}}"),
     "producers[0].message_bytes", ("client refuses",),
     topic_file("{name: T}", "{topic: T, message_bytes: {dist: uniform, low: 1KiB, high: 6MiB}}")),
    ("batch-above-client-max", topic_file("{name: T}", "{topic: T, batch_size: 3, message_bytes: 1536KiB}"),
     "producers[0].message_bytes", ("batch (3 messages)", "client refuses"),
     topic_file("{name: T}", "{topic: T, batch_size: 2, message_bytes: 1536KiB}")),
    ("body-above-every-broker-max",
     topic_file("{name: T}", "{topic: T, message_bytes: 2001}",
                "    - {name: broker-a, store: {max_message_size_bytes: 2000}}\n"
                "    - {name: broker-b, store: {max_message_size_bytes: 2000}}\n"),
     "producers[0].message_bytes", ("every broker hosting 'T'", "broker-a: 2,000", "MESSAGE_ILLEGAL"),
     topic_file("{name: T}", "{topic: T, message_bytes: 2001}",
                "    - {name: broker-a, store: {max_message_size_bytes: 2000}}\n"
                "    - {name: broker-b, store: {max_message_size_bytes: 4000}}\n")),
    # 4.9.8 measures the whole record (its fixed header, body, topic and properties), 5.3.3 the body
    ("v4-record-above-every-broker-max",
     "version: 4.x\n" + topic_file("{name: T}", "{topic: T, message_bytes: 2000}",
                                   "    - {name: broker-a, store: {max_message_size_bytes: 2000}}\n"),
     "producers[0].message_bytes", (f"a {record_bytes('T', 2000):,}-byte record",),
     topic_file("{name: T}", "{topic: T, message_bytes: 2000}",
                "    - {name: broker-a, store: {max_message_size_bytes: 2000}}\n")),
    ("every-host-rejects-transactions",
     topic_file("{name: T}", "{topic: T, transaction: {}}", "    - {name: broker-a, broker: {reject_transaction_message: "
                "true}}\n"),
     "producers[0].transaction", ("reject_transaction_message", "NO_PERMISSION"),
     topic_file("{name: T}", "{topic: T, transaction: {}}",
                "    - {name: broker-a, broker: {reject_transaction_message: true}}\n    - {name: broker-b}\n")),
    ("every-host-refuses-timer-messages",
     topic_file("{name: T}", "{topic: T, deliver_time_ms: 5s}", "    - {name: broker-a, store: {timer_wheel_enable: "
                "false}}\n"),
     "producers[0].deliver_time_ms", ("timer_wheel_enable: false", "accurate timer message is not enabled"),
     topic_file("{name: T}", "{topic: T, deliver_time_ms: 5s}", "    - {name: broker-a}\n")),
]


@pytest.mark.parametrize(("case", "text", "key_path", "words", "near"), REFUSED, ids=[c[0] for c in REFUSED])
def test_each_impossible_setting_is_refused_by_its_key_path(tmp_path, case, text, key_path, words, near) -> None:
    found = [p for p in problems(tmp_path, text) if p.startswith(f"{key_path}: ")]
    assert len(found) == 1, problems(tmp_path, text)
    assert all(word in found[0] for word in words), found[0]
    assert "\n" not in found[0]
    assert problems(tmp_path, near) == []


def test_the_issue_file_exits_2_naming_both_keys(tmp_path) -> None:
    """`in_sync_replicas: 5, min_in_sync_replicas: 7` on a 2-replica group in controller mode."""
    path = tmp_path / "isr.yaml"
    path.write_text(controller_group("in_sync_replicas: 5, min_in_sync_replicas: 7", slaves=1) + FLOW)
    done = subprocess.run([sys.executable, "-m", "rmqsim.cli", "validate", str(path)], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == f"2 problem(s) in {path}:"
    isr, min_isr = lines[1:]
    assert f"{path}: cluster.brokers[0].store.in_sync_replicas: 5 is above the 2 replicas" in isr
    assert f"{path}: cluster.brokers[0].store.min_in_sync_replicas: 7 is above the 2 replicas" in min_isr
    assert "IN_SYNC_REPLICAS_NOT_ENOUGH" in min_isr and "no send to 'broker-a' can succeed" in min_isr


def test_every_problem_is_reported_at_once(tmp_path) -> None:
    text = (controller_group("in_sync_replicas: 5, min_in_sync_replicas: 7", slaves=1)
            + "  topics: [{name: T, brokers: []}, {name: U}]\n"
            + "producers: [{name: p0, topic: T}, {name: p1, topic: U, message_bytes: 5MiB}, "
              "{name: p2, topic: nowhere}]\n")
    paths = [p.split(": ", 1)[0] for p in problems(tmp_path, text)]
    assert sorted(paths) == sorted(["cluster.brokers[0].store.in_sync_replicas",
                                    "cluster.brokers[0].store.min_in_sync_replicas", "producers[0].topic",
                                    "producers[1].message_bytes", "producers[2].topic"])


def test_the_version_decides(tmp_path) -> None:
    """4.9.8 has no inSyncReplicas (the setting is ignored, a v5-only-setting warning) and no timer:
    neither is refused under 4.x."""
    text = "version: 4.x\n" + group("in_sync_replicas: 5, min_in_sync_replicas: 7") + FLOW
    assert problems(tmp_path, text) == []
    path = tmp_path / "s.yaml"
    assert {f.path for f in lint(scenario.load(path)) if f.id == "v5-only-setting"} == {
        "cluster.brokers[0].store.in_sync_replicas", "cluster.brokers[0].store.min_in_sync_replicas"}
    timer = "version: 4.x\n" + topic_file("{name: T}", "{topic: T, deliver_time_ms: 5s}",
                                           "    - {name: broker-a, store: {timer_wheel_enable: false}}\n")
    assert problems(tmp_path, timer) == []


def test_a_misspelt_host_is_reported_once(tmp_path) -> None:
    """A topic whose `brokers` names no broker is the existing check's problem, not also "hosted by no broker"."""
    found = problems(tmp_path, topic_file("{name: T, brokers: [broker-x]}", "{topic: T}"))
    assert len(found) == 1 and found[0].startswith("cluster.topics[0].brokers: 'broker-x' is not a broker"), found


def test_a_delay_level_wins_over_a_delivery_time(tmp_path) -> None:
    """HookUtils.checkIfTimerMessage: a message with a delay level is no timer message."""
    text = topic_file("{name: T}", "{topic: T, deliver_time_ms: 5s, delay_level: 2}",
                      "    - {name: broker-a, store: {timer_wheel_enable: false}}\n")
    assert problems(tmp_path, text) == []


# --- writes unavailable only sometimes: the lint ----------------------------------------------------

def _lint(tmp_path: Path, text: str) -> list:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return lint(scenario.load(path))


def test_min_isr_equal_to_the_replicas_is_a_warning_naming_the_fault(tmp_path) -> None:
    crash = "faults: [{at_ms: 20s, kind: process_crash, node: broker-a-s2, duration_ms: 5s}]\n"
    found = [f for f in _lint(tmp_path, controller_group("min_in_sync_replicas: 3") + FLOW + crash)
             if f.id.startswith("min-isr")]
    assert [(f.id, f.path) for f in found] == [("min-isr-every-replica", "cluster.brokers[0].store.min_in_sync_replicas")]
    assert "IN_SYNC_REPLICAS_NOT_ENOUGH" in found[0].message and "faults[0] at 20 s takes 'broker-a-s2' down" in \
        found[0].message
    assert not [f for f in _lint(tmp_path, controller_group("min_in_sync_replicas: 2, in_sync_replicas: 2") + FLOW)
                if f.id.startswith("min-isr")]


def test_min_isr_above_isr_is_a_warning_where_it_acts(tmp_path) -> None:
    found = [f.id for f in _lint(tmp_path, controller_group("min_in_sync_replicas: 2") + FLOW)]
    assert "min-isr-above-isr" in found and "min-isr-every-replica" not in found
    for store in ("min_in_sync_replicas: 2, all_ack_in_sync_state_set: true", "min_in_sync_replicas: 2, "
                  "in_sync_replicas: 2"):
        assert "min-isr-above-isr" not in [f.id for f in _lint(tmp_path, controller_group(store) + FLOW)]
    # classic mode: 5.3.3 does not read min_in_sync_replicas there, so nothing is refused either way
    assert "min-isr-above-isr" not in [f.id for f in _lint(tmp_path, group("min_in_sync_replicas: 2") + FLOW)]


def test_validate_prints_the_sometimes_warning_and_exits_0(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(controller_group("min_in_sync_replicas: 3") + FLOW)
    done = subprocess.run([sys.executable, "-m", "rmqsim.cli", "validate", str(path)], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert any(line.startswith(f"warning: {path}: cluster.brokers[0].store.min_in_sync_replicas: ")
               and line.endswith("[min-isr-every-replica]") for line in done.stderr.splitlines()), done.stderr


def test_nothing_is_said_twice() -> None:
    """What validation refuses is no lint check any more."""
    ids = {c.id for c in LINT_CHECKS}
    assert "isr-above-replicas" not in ids
    summary = next(c.summary for c in LINT_CHECKS if c.id == "sync-master-no-slave")
    assert "refused by validation" in summary


def test_every_bundled_scenario_still_validates() -> None:
    files = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(files) > 30
    for path in files:
        scenario.load(path)  # raises ConfigError naming the file
