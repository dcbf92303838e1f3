"""Configuration lint (rmqsim/scenario/lint.py): every check triggers on a minimal file, naming its
id and key path; stays silent on a near miss; and on the bundled scenarios finds exactly the
traps listed in BUNDLED_FINDINGS, so a new false positive (or a fixed scenario) fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsim.scenario import spec as scenario
from rmqsim.scenario.lint import LINT_CHECKS, MAX_PER_CHECK, lint
from tests.conftest import ROOT

REPLICATED = "cluster:\n  brokers:\n    - {{name: broker-a, {extra}replicas: [{{role: {role}}}, {{role: SLAVE}}]}}\n"
FLOW = "producers: [{}]\nconsumers: [{}]\n"  # one producer and one consumer group on TopicTest
CRASH_A = "faults: [{at_ms: 20s, kind: process_crash, node: broker-a, duration_ms: 5s}]\n"

# (check id, minimal scenario file, the key path of its finding)
# a controller-mode group of three replicas and `nodes` controllers


def controller(nodes: int, store: str = "") -> str:
    names = ", ".join(f"{{name: k{i}}}" for i in range(1, nodes + 1))
    return (f"cluster:\n  controller:\n    nodes: [{names}]\n  brokers:\n    - {{name: broker-a, broker: "
            f"{{enable_controller_mode: true}}, {store}replicas: [{{role: SYNC_MASTER}}, {{role: SLAVE}}, "
            "{role: SLAVE}]}\n")


CASES = [
    ("pop-invisible-time-short", "consumers:\n  - {consume_time_ms: 1000, pop: {invisible_duration_ms: 10s}}\n",
     "consumers[0].pop.invisible_duration_ms"),
    ("producer-never-sends", "duration_ms: 10s\nproducers: [{start_ms: 12s}]\nconsumers: [{}]\n",
     "producers[0].start_ms"),
    ("consumer-never-starts", "duration_ms: 10s\nsettle_ms: 5s\nproducers: [{}]\nconsumers: [{start_ms: 15s}]\n",
     "consumers[0].start_ms"),
    ("fault-after-run", "duration_ms: 10s\nfaults: [{at_ms: 10s, kind: process_crash, node: broker-a}]\n",
     "faults[0].at_ms"),
    ("restart-of-up-node", "duration_ms: 10s\nfaults: [{at_ms: 6s, kind: restart, node: broker-a}]\n", "faults[0]"),
    ("warmup-covers-run", "duration_ms: 4s\nproducers: [{}]\n", "warmup_ms"),
    ("fault-on-down-node", "faults:\n  - {at_ms: 10s, kind: process_crash, node: broker-a}\n"
     "  - {at_ms: 20s, kind: pause, node: broker-a, duration_ms: 1s}\n", "faults[1].node"),
    ("fault-on-down-node", "faults:\n  - {at_ms: 10s, kind: power_loss, node: broker-a, duration_ms: 30s}\n"
     "  - {at_ms: 15s, kind: partition, groups: [[broker-a], [namesrv]], duration_ms: 5s}\n", "faults[1].groups[0]"),
    ("fault-on-down-node", "consumers: [{start_ms: 20s}]\nfaults: [{at_ms: 10s, kind: process_crash, node: consumer}]\n",
     "faults[0].node"),
    ("random-fault-never-fires",
     "random_faults: [{kind: process_crash, nodes: [broker-a], rate_per_hour: 1, down_ms: 1000}]\n",
     "random_faults[0].rate_per_hour"),
    ("random-fault-never-fires", "random_faults: [{kind: pause, nodes: [broker-a], rate_per_hour: 600, "
     "min_up_ms: 60s, down_ms: 1000}]\n", "random_faults[0].min_up_ms"),
    ("random-fault-never-fires", "consumers: [{start_ms: 70s}]\nrandom_faults: [{kind: pause, nodes: [consumer], "
     "rate_per_hour: 600, down_ms: 1000}]\n", "random_faults[0].nodes"),
    ("group-without-producer", "consumers: [{}]\n", "consumers[0].topic"),
    ("sync-master-no-isr", REPLICATED.format(extra="", role="SYNC_MASTER"), "cluster.brokers[0].store.in_sync_replicas"),
    ("sync-master-no-slave", "cluster:\n  brokers:\n    - {name: broker-a, store: {broker_role: SYNC_MASTER}}\n",
     "cluster.brokers[0].store.broker_role"),
    ("min-isr-every-replica", controller(3, "store: {min_in_sync_replicas: 3}, "),
     "cluster.brokers[0].store.min_in_sync_replicas"),
    ("min-isr-above-isr", controller(3, "store: {min_in_sync_replicas: 2}, "), "cluster.brokers[0].store.min_in_sync_replicas"),
    ("slave-without-reader", REPLICATED.format(extra="", role="ASYNC_MASTER"), "cluster.brokers[0].replicas[1]"),
    ("slave-read-disabled", REPLICATED.format(extra="", role="ASYNC_MASTER") + FLOW + CRASH_A,
     "cluster.brokers[0].broker.slave_read_enable"),
    ("v5-only-setting", "version: 4.x\ncluster:\n  brokers:\n    - {name: broker-a, store: {in_sync_replicas: 2}}\n",
     "cluster.brokers[0].store.in_sync_replicas"),
    ("offset-persist-decides-little", "producers: [{}]\nconsumers: [{client: {persist_consumer_offset_interval_ms: 10s}}]\n",
     "consumers[0].client.persist_consumer_offset_interval_ms"),
    ("orderly-without-orderly-send", "producers: [{}]\nconsumers: [{consume_mode: ORDERLY}]\n", "consumers[0].consume_mode"),
    ("reconsume-times-zero", "producers: [{}]\nconsumers: [{failure_probability: 0.1, client: {max_reconsume_times: 0}}]\n",
     "consumers[0].client.max_reconsume_times"),
    ("fault-in-warmup", "producers: [{}]\nfaults: [{at_ms: 2s, kind: pause, node: broker-a, duration_ms: 1s}]\n",
     "faults[0].at_ms"),
    ("settle-before-reregister", "settle_ms: 10s\n" + FLOW + CRASH_A, "settle_ms"),
    ("expected-loss-not-stated", FLOW + "faults: [{at_ms: 20s, kind: power_loss, node: broker-a, duration_ms: 5s}]\n",
     "faults[0]"),
    ("disk-holds-few-files", "cluster:\n  brokers:\n    - {name: broker-a, disk: {size_bytes: 1GiB}}\n",
     "cluster.brokers[0].disk.size_bytes"),
    ("retention-never-runs", "cluster:\n  brokers:\n    - {name: broker-a, store: {file_reserved_time_ms: 20s}}\n",
     "cluster.brokers[0].store.delete_when"),
    ("expected-loss-not-stated", "cluster:\n  brokers:\n    - {name: broker-a, store: {transient_store_pool_enable: true}}\n"
     + FLOW + CRASH_A, "faults[0]"),
    ("controller-even-quorum", controller(4), "cluster.controller.nodes"),
    ("controller-acks-ahead", controller(3) + FLOW + CRASH_A, "faults[0]"),
]

# (check id, a file one step away from its trap): the check stays silent
NEAR_MISSES = [
    ("pop-invisible-time-short", "consumers:\n  - {consume_time_ms: 500, pop: {invisible_duration_ms: 10s}}\n"),
    ("controller-even-quorum", controller(3)),
    ("controller-acks-ahead", controller(3, "store: {all_ack_in_sync_state_set: true}, ")
     + FLOW + CRASH_A),
    ("controller-acks-ahead", controller(3) + FLOW + CRASH_A
     + "expect: {guarantees: {at_least_once: break}}\n"),
    ("fault-on-down-node", "faults:\n  - {at_ms: 10s, kind: process_crash, node: broker-a, duration_ms: 5s}\n"
     "  - {at_ms: 20s, kind: pause, node: broker-a, duration_ms: 1s}\n"),
    ("fault-on-down-node", "faults:\n  - {at_ms: 10s, kind: process_crash, node: broker-a}\n"
     "  - {at_ms: 12s, kind: restart, node: broker-a}\n  - {at_ms: 14s, kind: process_crash, node: broker-a}\n"),
    ("random-fault-never-fires", "random_faults: [{kind: pause, nodes: [broker-a], rate_per_hour: 600, down_ms: 1000}]\n"),
    ("sync-master-no-isr", REPLICATED.format(extra="store: {in_sync_replicas: 2}, ", role="SYNC_MASTER")),
    ("sync-master-no-slave", REPLICATED.format(extra="", role="SYNC_MASTER")),
    ("min-isr-every-replica", controller(3, "store: {min_in_sync_replicas: 2}, ")),
    ("min-isr-above-isr", controller(3, "store: {min_in_sync_replicas: 2, in_sync_replicas: 2}, ")),
    ("min-isr-above-isr", controller(3, "store: {min_in_sync_replicas: 2, all_ack_in_sync_state_set: true}, ")),
    ("min-isr-above-isr", controller(3, "store: {min_in_sync_replicas: 3}, ")),  # min-isr-every-replica's
    ("sync-master-no-isr", "version: 4.x\n" + REPLICATED.format(extra="", role="SYNC_MASTER")),
    ("slave-without-reader", REPLICATED.format(extra="broker: {slave_read_enable: true}, ", role="ASYNC_MASTER")),
    ("slave-without-reader", "version: 4.x\n" + REPLICATED.format(extra="", role="ASYNC_MASTER") + CRASH_A),
    ("slave-read-disabled", "version: 4.x\n" + REPLICATED.format(extra="", role="ASYNC_MASTER") + FLOW + CRASH_A),
    ("v5-only-setting", "version: 4.x\ncluster:\n  brokers:\n    - {name: broker-a, store: {in_sync_replicas: 1}}\n"),
    ("offset-persist-decides-little",
     "producers: [{}]\nconsumers: [{client: {persist_consumer_offset_interval_ms: 10s, pull_interval_ms: 20s}}]\n"),
    ("orderly-without-orderly-send", "producers: [{send_mode: ORDERLY, keys: 8}]\nconsumers: [{consume_mode: ORDERLY}]\n"),
    ("fault-in-warmup", "producers: [{}]\nfaults: [{at_ms: 5s, kind: pause, node: broker-a, duration_ms: 1s}]\n"),
    ("settle-before-reregister", "settle_ms: auto\n" + FLOW + CRASH_A),
    ("settle-before-reregister", "settle_ms: 40s\n" + FLOW + CRASH_A),
    ("expected-loss-not-stated", FLOW + "faults: [{at_ms: 20s, kind: power_loss, node: broker-a, duration_ms: 5s}]\n"
     "expect: {guarantees: {at_least_once: break}}\n"),
    ("expected-loss-not-stated", "cluster:\n  brokers:\n    - {name: broker-a, store: {flush_disk_type: SYNC_FLUSH}}\n"
     + FLOW + "faults: [{at_ms: 20s, kind: power_loss, node: broker-a, duration_ms: 5s}]\n"),
    ("disk-holds-few-files", "cluster:\n  brokers:\n    - {name: broker-a, disk: {size_bytes: 1GiB}, "
     "store: {mapped_file_size_commit_log_bytes: 64MiB}}\n"),
    ("retention-never-runs", "cluster:\n  brokers:\n    - {name: broker-a, store: {file_reserved_time_ms: 20s, "
     "delete_when: '00'}}\n"),
    ("retention-never-runs", "cluster:\n  brokers:\n    - {name: broker-a, store: {file_reserved_time_ms: 20s}, "
     "disk: {size_bytes: 64GiB}}\n"),
]

# The traps the bundled scenarios fall into (file, check id): the lint's own findings on our files.
BUNDLED_FINDINGS = [
    ("pop_slow_consumer_invisible_time.yaml", "pop-invisible-time-short"),  # its very question
    ("power_loss_sync_master.yaml", "slave-read-disabled"),
]


def _lint(tmp_path: Path, text: str) -> list:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return lint(scenario.load(path))


@pytest.mark.parametrize(("check", "text", "key_path"), CASES,
                         ids=[f"{c}-{n}" for n, (c, _t, _p) in enumerate(CASES)])
def test_each_check_triggers_on_a_minimal_file(tmp_path, check, text, key_path) -> None:
    found = [f for f in _lint(tmp_path, text) if f.id == check]
    assert [f.path for f in found] == [key_path], found
    assert found[0].message and "\n" not in found[0].message


@pytest.mark.parametrize(("check", "text"), NEAR_MISSES, ids=[f"{c}-{n}" for n, (c, _t) in enumerate(NEAR_MISSES)])
def test_each_check_stays_silent_on_a_near_miss(tmp_path, check, text) -> None:
    assert [f for f in _lint(tmp_path, text) if f.id == check] == []


def test_every_registered_check_has_a_trigger_test() -> None:
    ids = [c.id for c in LINT_CHECKS]
    assert len(ids) >= 12 and len(set(ids)) == len(ids)
    assert sorted(set(ids)) == sorted({c for c, _t, _p in CASES})
    for check in LINT_CHECKS:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", check.id), check.id
        assert check.summary and check.fix and "\n" not in check.summary + check.fix, check.id


def test_bundled_scenarios_find_exactly_the_listed_traps() -> None:
    found = [(path.name, f.id) for path in sorted((ROOT / "scenarios").glob("*.yaml"))
             for f in lint(scenario.load(path))]
    assert found == BUNDLED_FINDINGS


def test_findings_of_one_check_are_capped(tmp_path) -> None:
    faults = "".join(f"  - {{at_ms: {100 + i}, kind: pause, node: broker-a, duration_ms: 1}}\n" for i in range(30))
    found = [f for f in _lint(tmp_path, "producers: [{}]\nfaults:\n" + faults) if f.id == "fault-in-warmup"]
    assert len(found) == MAX_PER_CHECK + 1
    assert found[-1].path == f"faults[{MAX_PER_CHECK}].at_ms" and found[-1].message.startswith("and 20 more")


def test_validate_prints_the_warning_and_its_fix_and_exits_0(tmp_path) -> None:
    path = tmp_path / "sync.yaml"
    path.write_text(REPLICATED.format(extra="broker: {slave_read_enable: true}, ", role="SYNC_MASTER"))
    done = subprocess.run([sys.executable, "-m", "rmqsim.cli", "validate", str(path)], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith("[sync-master-no-isr]"))
    assert lines[at].startswith(f"warning: {path}: cluster.brokers[0].store.in_sync_replicas: 'broker-a' is a "
                                "SYNC_MASTER")
    fix = next(c.fix for c in LINT_CHECKS if c.id == "sync-master-no-isr")
    assert lines[at + 1] == f"  fix: {fix}"
    assert "Traceback" not in done.stderr and f"{path}: ok" in done.stdout
