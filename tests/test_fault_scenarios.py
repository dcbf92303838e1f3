"""One scenario per fault kind (scenarios/<name>.yaml): each run shows the effect its header promises.

Every scenario runs once (cached per module); some are compared with a control run of the same
file with `faults: []`. Assertions are bounds and invariants, not pinned numbers, and follow
the reference ../shared/reference/rocketmq-semantics.md (5.4 "What a fault destroys", 8 "Where duplicates
and losses come from").
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest
import yaml

import rmqsim
from rmqsim.runner import run_scenario
from rmqsim.scenario.spec import from_data, load
from sim.trace import field_index
from tests.conftest import cli_in_process

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = {
    "process_crash_broker": {"process_crash"},
    "power_loss_async_flush": {"power_loss"},
    "power_loss_sync_flush": {"power_loss"},
    "restart_consumer": {"process_crash", "restart"},
    "partition_broker": {"partition", "heal"},
    "link_latency": {"link_latency"},
    "packet_loss": {"packet_loss"},
    "disk_slow_sync_flush": {"disk_slow"},
    "fsync_stall_sync_flush": {"fsync_stall"},
    "pause_consumer": {"pause"},
    "slow_broker": {"disk_slow"},
}
SEED = 1
SEC = 1_000_000  # µs


def path(name: str) -> Path:
    return ROOT / "scenarios" / f"{name}.yaml"


@functools.cache
def result(name: str):
    return rmqsim.run(str(path(name)), seed=SEED, keep_records=True)


@functools.cache
def control(name: str) -> dict:
    """Summary of the same scenario without its faults."""
    data = yaml.safe_load(path(name).read_text(encoding="utf-8"))
    data["faults"] = []
    return run_scenario(from_data(data, f"{name} (control)"), seed=SEED).summary


def summary(name: str) -> dict:
    return result(name).summary


def recs(name: str, kind: str) -> list[tuple]:
    return [r for r in result(name).records if r[2] == kind]


def fi(kind: str, field: str) -> int:
    return field_index(kind, field)


def fault_time_us(name: str, kind: str) -> int:
    """When the fault happened (a scripted fault with `jitter_ms` happens after its `at_ms`)."""
    kind_i = fi("fault.injected", "fault")
    return next(r[0] for r in recs(name, "fault.injected") if r[kind_i] == kind)


def acked(name: str) -> dict[int, tuple]:
    """message id → producer.sent record, for SEND_OK sends."""
    st = fi("producer.sent", "status")
    mid = fi("producer.sent", "msg_id")
    return {r[mid]: r for r in recs(name, "producer.sent") if r[st] == "SEND_OK"}


def first_consumed_us(name: str) -> dict[int, int]:
    ok = fi("consumer.consumed", "ok")
    key = fi("consumer.consumed", "msg_id")
    first: dict[int, int] = {}
    for r in recs(name, "consumer.consumed"):
        if r[ok] and r[key] not in first:
            first[r[key]] = r[0]
    return first


# --- every scenario --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_validates(name: str) -> None:
    proc = cli_in_process("validate", str(path(name)))  # `rmqsim validate`, without an interpreter's start-up
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_header_and_budget(name: str) -> None:
    text = path(name).read_text(encoding="utf-8")
    assert text.startswith("# Question: ")
    sc = load(path(name))
    assert sc.duration_ms + (0 if sc.settle_auto else sc.settle_ms) <= 120_000  # auto: until quiet
    assert all(f.at_ms < sc.duration_ms for f in sc.faults)
    assert {f.kind for f in sc.faults} == SCENARIOS[name]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fault_was_injected(name: str) -> None:
    kind_i = fi("fault.injected", "fault")
    injected = Counter(r[kind_i] for r in recs(name, "fault.injected"))
    assert set(injected) == SCENARIOS[name]
    assert all(injected[k] == 1 for k in SCENARIOS[name])
    s = summary(name)
    assert s["sent_ok"] > 5000  # the workload ran


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fault_records_hold_only_exact_scalar_types(name: str) -> None:
    """Fault and recovery paths emit record kinds the baseline never does; the digest needs
    exact str/int/float/bool/None there too (see tests/test_determinism.py)."""
    allowed = {str, int, float, bool, type(None)}
    assert all(type(v) in allowed for r in result(name).records for v in r)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_verdict_follows_the_guarantees(name: str) -> None:
    """At-least-once: loss of an acknowledged message, and only that, breaks it here (no scenario
    bounds a metric); power_loss_async_flush states that it breaks (`expect.guarantees`), so its
    loss is valid, and a loss anywhere else would not be; duplicates are reported, never failed;
    no group consumes orderly, so order is not judged (null, not 0)."""
    s = summary(name)
    assert s["stopped_by"] is None and s["expectations"] == []
    assert s["order_violations"] is None
    assert all(g["order_violations"] is None for g in s["groups"].values())
    assert s["pending_retry"] == 0 and s["dlq"] == 0  # no listener fails in these scenarios
    expected = "break" if name == "power_loss_async_flush" else "hold"
    assert s["guarantee_outcomes"] == {"at_least_once(billing)": {"held": s["lost"] == 0, "expected": expected,
                                                                  "as_expected": True}}
    assert s["verdict"] == "valid" and s["failures"] == []


# --- broker process crash (page cache survives) ---------------------------------------------


def test_process_crash_broker_loses_nothing() -> None:
    name = "process_crash_broker"
    s = summary(name)
    crashes = recs(name, "node.crashed")
    assert [(r[1], r[fi("node.crashed", "power_loss")]) for r in crashes] == [("broker-a", False)]
    assert recs(name, "commit_log.truncated") == []  # a process crash keeps the page cache
    assert s["lost"] == 0
    assert s["send_failed"] == 0  # refused connections are retried on broker-b at once
    # broker-a is used again after its restart
    t_up = max(r[0] for r in recs(name, "node.restarted") if r[1] == "broker-a")
    assert any(r[1] == "broker-a" and r[0] > t_up for r in recs(name, "broker.stored"))


def test_process_crash_broker_consumption_resumes_after_restart() -> None:
    name = "process_crash_broker"
    t_up = max(r[0] for r in recs(name, "node.restarted") if r[1] == "broker-a")
    first = first_consumed_us(name)
    broker_i, born_i = fi("producer.sent", "broker"), fi("producer.sent", "born_us")
    late = [first[k] - r[born_i] for k, r in acked(name).items()
            if r[broker_i] == "broker-a" and r[born_i] > t_up + 2 * SEC]
    assert late
    # pull retry after an exception is 1 s; allow generous slack
    assert max(late) < 5 * SEC


# --- power loss ---------------------------------------------------------------------------


def test_power_loss_async_flush_loses_only_the_unflushed_tail() -> None:
    name = "power_loss_async_flush"
    s = summary(name)
    t_loss = fault_time_us(name, "power_loss")
    assert [(r[1], r[fi("node.crashed", "power_loss")]) for r in recs(name, "node.crashed")] == [("broker-a", True)]
    truncated = recs(name, "commit_log.truncated")
    assert len(truncated) == 1 and truncated[0][1] == "broker-a"
    records_lost = truncated[0][fi("commit_log.truncated", "records_lost")]
    assert s["lost"] > 0
    assert s["lost"] <= records_lost
    # every lost message was acknowledged by broker-a and stored within the last flush window(s)
    window_us = 2 * load(path(name)).cluster.brokers[0].store.flush_interval_commit_log_ms * 1000
    mid = fi("broker.stored", "msg_id")
    stored_at = {r[mid]: r[0] for r in recs(name, "broker.stored") if r[1] == "broker-a"}
    lost_keys = set(acked(name)) - set(first_consumed_us(name))
    assert len(lost_keys) == s["lost"]
    broker_i = fi("producer.sent", "broker")
    sent = acked(name)
    for key in lost_keys:
        assert sent[key][broker_i] == "broker-a"
        assert t_loss - window_us <= stored_at[key] <= t_loss
    in_window = sum(1 for k, r in sent.items()
                    if r[broker_i] == "broker-a" and t_loss - window_us <= stored_at.get(k, -1) <= t_loss)
    assert s["lost"] <= in_window


def test_power_loss_sync_flush_loses_no_acknowledged_message() -> None:
    name = "power_loss_sync_flush"
    s = summary(name)
    assert [(r[1], r[fi("node.crashed", "power_loss")]) for r in recs(name, "node.crashed")] == [("broker-a", True)]
    assert len(recs(name, "commit_log.truncated")) == 1
    assert s["lost"] == 0
    assert s["sent_not_ok"] == 0
    # the same fault with ASYNC_FLUSH does lose messages
    assert summary("power_loss_async_flush")["lost"] > 0


# --- consumer crash and restart ---------------------------------------------------------------


def test_restart_consumer_redelivers() -> None:
    name = "restart_consumer"
    s = summary(name)
    assert [r[1] for r in recs(name, "node.crashed")] == ["c-1"]
    assert any(r[1] == "c-1" and r[0] >= fault_time_us(name, "restart") for r in recs(name, "node.restarted"))
    assert s["lost"] == 0
    assert s["duplicates"] > 0
    assert s["duplicate_causes"] == {"producer_retry": 0, "redelivery": s["duplicates"]}
    assert s["stored_duplicates"] == 0
    # a redelivery re-consumes only a few in-flight batches, not the whole backlog
    assert s["duplicated_messages"] < 0.05 * s["sent_ok"]
    # the survivors took over c-1's queues
    t_crash = fault_time_us(name, "process_crash")
    assert any(r[0] > t_crash and r[1] != "c-1" for r in recs(name, "consumer.rebalanced"))


# --- partition and heal -----------------------------------------------------------------------


def test_partition_broker_fails_sends_and_heals_without_loss() -> None:
    name = "partition_broker"
    s = summary(name)
    assert recs(name, "net.held")  # TCP kept what it could not deliver through the partition
    kind_i = fi("fault.injected", "fault")
    assert [r[kind_i] for r in recs(name, "fault.injected")] == ["partition", "heal"]
    assert s["send_failed"] > 0  # sends to broker-a time out: no RST through a partition
    assert s["lost"] == 0
    t_heal = fault_time_us(name, "heal")
    broker_i, born_i = fi("producer.sent", "broker"), fi("producer.sent", "born_us")
    assert any(r[broker_i] == "broker-a" and r[born_i] > t_heal for r in acked(name).values())
    failed_born = [r[fi("producer.send_failed", "born_us")] for r in recs(name, "producer.send_failed")]
    t_cut = fault_time_us(name, "partition")
    assert all(t_cut - 3 * SEC <= t <= t_heal for t in failed_born)


@pytest.mark.parametrize("name", ["partition_broker", "power_loss_async_flush", "power_loss_sync_flush",
                                  "packet_loss"])
def test_timed_out_send_is_not_retried(name: str) -> None:
    s = summary(name)
    attempts_i, reason_i = fi("producer.send_failed", "attempts"), fi("producer.send_failed", "reason")
    failed = recs(name, "producer.send_failed")
    assert failed
    assert all(r[reason_i] == "call_timeout" for r in failed)
    # a timeout ends the send; a second attempt happens only after a first one failed fast (the
    # RST of a rebooted broker, sim/network.py) and then ran out of the send's total timeout
    retried = [r for r in failed if r[attempts_i] != 1]
    assert all(r[attempts_i] == 2 for r in retried) and (not retried or name.startswith("power_loss"))
    assert len(retried) <= 0.05 * len(failed)
    failed_at = {r[fi("producer.send_failed", "msg_id")]: r[0] for r in failed}
    mid = fi("broker.stored", "msg_id")
    # a request TCP delivers late (packet loss, a healed partition) is still stored after its caller gave up
    assert not [r for r in recs(name, "broker.stored") if r[mid] in failed_at and r[0] > failed_at[r[mid]]
                and name not in ("packet_loss", "partition_broker")]
    assert s["duplicate_causes"]["producer_retry"] == 0


# --- link latency and packet loss ---------------------------------------------------------------


def test_link_latency_raises_tail_latency() -> None:
    name = "link_latency"
    s, c = summary(name), control(name)
    assert s["lost"] == 0 and s["duplicates"] == 0 and s["send_failed"] == 0
    assert s["latency_ms"]["p99"] >= c["latency_ms"]["p99"] + 50
    assert s["latency_ms"]["p50"] < 20  # most messages do not cross the slow link
    # every message p-1 sent through broker-a during the fault paid the extra 100 ms
    sc = load(path(name))
    f = sc.faults[0]
    t0, t1 = int(f.at_ms * 1000), int((f.at_ms + f.duration_ms) * 1000)
    first = first_consumed_us(name)
    broker_i, born_i = fi("producer.sent", "broker"), fi("producer.sent", "born_us")
    slow = [first[k] - r[born_i] for k, r in acked(name).items()
            if r[1] == "p-1" and r[broker_i] == "broker-a" and t0 + SEC <= r[born_i] <= t1 - SEC]
    assert len(slow) > 100
    assert min(slow) >= 100_000


def test_packet_loss_delays_but_loses_nothing() -> None:
    name = "packet_loss"
    s, c = summary(name), control(name)
    assert s["lost"] == 0
    assert s["duplicate_causes"]["redelivery"] == 0
    assert s["latency_ms"]["p99"] >= max(200, 10 * c["latency_ms"]["p99"])  # ≥ one 200 ms RTO
    assert s["latency_ms"]["p50"] < 20


# --- slow disk and fsync stall with SYNC_FLUSH -------------------------------------------------


def test_disk_slow_sync_flush_raises_latency() -> None:
    name = "disk_slow_sync_flush"
    s, c = summary(name), control(name)
    assert s["lost"] == 0 and s["duplicates"] == 0
    assert s["send_failed"] == 0
    assert s["sent_not_ok"] == 0  # ~1 s fsyncs stay under the 5 s syncFlushTimeout
    assert s["latency_ms"]["p99"] >= 500
    assert s["latency_ms"]["p99"] >= 20 * c["latency_ms"]["p99"]
    assert s["latency_ms"]["p50"] < 50  # broker-b and the fault-free time are unaffected


def test_fsync_stall_sync_flush_returns_flush_disk_timeout() -> None:
    name = "fsync_stall_sync_flush"
    s = summary(name)
    assert s["sent_not_ok"] > 0
    assert s["send_failed"] == 0
    assert s["lost"] == 0 and s["duplicates"] == 0
    st, broker_i, born_i = (fi("producer.sent", f) for f in ("status", "broker", "born_us"))
    not_ok = [r for r in recs(name, "producer.sent") if r[st] != "SEND_OK"]
    assert len(not_ok) == s["sent_not_ok"]
    assert {r[st] for r in not_ok} == {"FLUSH_DISK_TIMEOUT"}
    assert {r[broker_i] for r in not_ok} == {"broker-a"}
    sc = load(path(name))
    f = sc.faults[0]
    t0, t1 = int(f.at_ms * 1000), int((f.at_ms + f.duration_ms) * 1000)
    timeout_us = sc.cluster.brokers[0].store.sync_flush_timeout_ms * 1000
    assert all(t0 - timeout_us <= r[born_i] <= t1 for r in not_ok)
    # FLUSH_DISK_TIMEOUT means "stored, durability unknown": the messages are still delivered
    first = first_consumed_us(name)
    assert all(r[fi("producer.sent", "msg_id")] in first for r in not_ok)


# --- consumer GC pause ------------------------------------------------------------------------


def test_pause_consumer_stalls_its_queues() -> None:
    name = "pause_consumer"
    s = summary(name)
    pause_ms = load(path(name)).faults[0].duration_ms
    assert s["lost"] == 0 and s["duplicates"] == 0
    assert 0.75 * pause_ms <= s["latency_ms"]["max"] <= pause_ms + 5_000
    assert s["latency_ms"]["p99"] >= 0.5 * pause_ms
    assert s["latency_ms"]["p50"] < 20  # the other consumers' queues flow
    reason_i = fi("broker.consumer_ids_changed", "reason")
    assert not [r for r in recs(name, "broker.consumer_ids_changed") if r[reason_i] == "expired"]
