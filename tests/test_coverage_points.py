"""Rare-state coverage (models/coverage_points.py): every declared point is reached by a bundled scenario or
a named variant of one (a point nobody reaches fails here), the summary carries every point in
declaration order, and counting is deterministic.

`RUNS` names each run once: a bundled scenario with `--set` overrides that keep it short or steer
it into the rare state; `REACHED_BY` maps every point to the run that reaches it. The runs go once
each (module cache), so adding a point usually costs no new run. That counting leaves the trace
digest as it was is tests/test_golden_digests.py's job (and `bench`'s baseline digest).
"""

from __future__ import annotations

import functools
import json

import pytest

import rmqsim
from models import coverage_points as coverage
from rmqsim.runner import run_scenario
from tests.conftest import ROOT

PARTITION_BOTH_BROKERS = ("faults=[{at_ms: 15s, kind: partition, groups: [[broker-a, broker-b], "
                          "[namesrv, p-1, p-2, c-1, c-2, c-3]]}, {at_ms: 20s, kind: heal}]")

# run id → (bundled scenario, seed, overrides): the smallest runs that reach the points below
RUNS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    # a power loss of an ASYNC_FLUSH broker: unflushed tail, recovery, offsets reused, producer retries
    "power_loss_async_flush": ("power_loss_async_flush", 1, ()),
    "transient_store_pool_crash": ("transient_store_pool_crash", 1, ("producers[0].rate_per_s=200",)),
    "fsync_stall_sync_flush": ("fsync_stall_sync_flush", 1, ("duration_ms=25s", "settle_ms=10s")),
    # SYNC_MASTER (5.x, in_sync_replicas 2) waits for its slave, times out once the master is gone;
    # 4.x answers SLAVE_NOT_AVAILABLE at once while no slave is in sync
    "power_loss_sync_master": ("power_loss_sync_master", 1, ("producers[0].rate_per_s=100",)),
    "power_loss_sync_master_4x": ("power_loss_sync_master", 1, ("version=4.x", "producers[0].rate_per_s=100")),
    # the master down long enough for the route to drop it: pulls go to the slave, offsets read behind
    "failover_stale_slave_offsets": ("failover_stale_slave_offsets", 1, (
        "producers[0].rate_per_s=50", "duration_ms=110s",
        "faults=[{at_ms: 75s, kind: process_crash, node: broker-a, duration_ms: 25s}, "
        "{at_ms: 75s, kind: process_crash, node: c-1}]")),
    "reset_offset_by_time": ("reset_offset_by_time", 1, ()),
    "consume_failures_dlq": ("consume_failures_dlq", 1, ()),
    # both brokers crash while failed messages are in the listener: send-back, then the inner producer fail
    "send_back_brokers_down": ("consume_failures_dlq", 1, (
        "faults=[{at_ms: 5s, kind: process_crash, node: broker-a, duration_ms: 20s}, "
        "{at_ms: 6s, kind: process_crash, node: broker-b, duration_ms: 3s}]",
        "settle_ms=60s", "consumers[0].consume_time_ms=1500")),
    "broker_busy": ("broker_busy", 1, ("duration_ms=30s", "producers[0].rate_per_s=300")),
    # an orderly consumer paused past the channel expiry: its locks expire, are taken over, then lost
    "orderly_consumer_paused": ("orderly_broker_failure", 3, (
        "duration_ms=160s", "producers[0].rate_per_s=50", "faults=[{at_ms: 10s, kind: pause, node: c-1, duration_ms: 130s}]")),
    # orderly listeners that fail: queues suspended, messages over the maximum sent to the DLQ
    "orderly_failures": ("orderly_broker_failure", 1, (
        "consumers[0].failure_probability=0.3", "consumers[0].client.max_reconsume_times=1")),
    "txn_producers_down": ("txn_producers_down", 1, ()),
    "txn_unknown_answers": ("txn_unknown_answers", 1, ()),
    "txn_power_loss": ("txn_baseline", 1, (
        "faults=[{at_ms: 10s, jitter_ms: 500, kind: power_loss, node: broker-a, duration_ms: 5s}]",)),
    # ends later than the half's check immunity are refused
    "txn_late_ends": ("txn_baseline", 1, (
        "duration_ms=15s", "producers[0].transaction.check_immunity_time_s=1",
        "producers[0].transaction.local_transaction_ms={dist: uniform, low: 5, high: 9000}")),
    # 5.x: the dead master's slave refuses reads (slaveReadEnable false)
    "slave_reads_refused_5x": ("power_loss_async_master", 1, ("version=5.x",)),
    # the slave keeps records its master lost; then it restarts and its recovery truncates them
    "ha_slave_diverged": ("power_loss_async_master", 1, (
        "duration_ms=60s", "producers[0].stop_ms=40s", "producers[0].rate_per_s=300",
        "producers[0].message_bytes={dist: uniform, low: 500, high: 1500}", "consumers[0].start_ms=45s",
        "faults=[{at_ms: 15s, jitter_ms: 500, kind: power_loss, node: broker-a, duration_ms: 5s}, "
        "{at_ms: 30s, kind: process_crash, node: broker-a-s1, duration_ms: 3s}]")),
    # 4.9.8's offset file renamed in place is not written back before the power loss: .bak is loaded
    "offsets_from_bak_4x": ("restart_consumer", 1, (
        "version=4.x", "duration_ms=70s", "faults=[{at_ms: 60s, kind: power_loss, node: broker-a, duration_ms: 5s}]")),
    # fault tolerance on, every broker partitioned away: 4.x pickOneAtLeast, 5.x the reachable pass
    "all_brokers_isolated_4x": ("partition_broker", 1, (
        "version=4.x", "producers[0].client.send_latency_fault_enable=true", PARTITION_BOTH_BROKERS)),
    "all_brokers_isolated_5x": ("partition_broker", 1, (
        "producers[0].client.send_latency_fault_enable=true", PARTITION_BOTH_BROKERS)),
    "detector_5x": ("partition_broker", 1, (
        "producers[0].client.send_latency_fault_enable=true", "producers[0].client.start_detector_enable=true")),
    "async_backpressure": ("partition_broker", 1, (
        "producers[0].send_mode=ASYNC", "producers[0].client.enable_backpressure_for_async_mode=true",
        "producers[0].client.back_pressure_for_async_send_num=10")),
    # retention deletes the files a lagging group has not read yet (deleteWhen hour, fileReservedTime)
    "retention_lagging_consumer": ("retention_lagging_consumer", 1, ()),
    # the disk above 90 %: marked full (sends refused), files deleted whatever their age
    "disk_full": ("disk_full", 1, ()),
    # controller mode: a failover, a partitioned master truncated when it rejoins
    "controller_master_power_loss": ("controller_master_power_loss", 1, ()),
    "controller_partition_master": ("controller_partition_master", 1, ()),
    # both slaves down, then the master: nobody of the SyncStateSet is alive at the election
    "controller_no_candidate": ("controller_master_power_loss", 1, (
        "faults=[{at_ms: 15s, kind: process_crash, node: broker-a-s1, duration_ms: 30s}, "
        "{at_ms: 15s, kind: process_crash, node: broker-a-s2, duration_ms: 30s}, "
        "{at_ms: 25s, kind: power_loss, node: broker-a, duration_ms: 30s}]",)),
    # a slave leaves the SyncStateSet while the controllers have no quorum: the alteration fails
    "controller_quorum_lost_alter": ("controller_quorum_loss", 1, (
        "faults=[{at_ms: 15s, kind: power_loss, node: controller-2, duration_ms: 45s}, "
        "{at_ms: 15s, kind: power_loss, node: controller-3, duration_ms: 45s}, "
        "{at_ms: 17s, kind: process_crash, node: broker-a-s1, duration_ms: 5s}]",)),
    # the master restarts while the controllers have no quorum and is confirmed at its own epoch
    "controller_quorum_loss": ("controller_quorum_loss", 1, ()),
    # minInSyncReplicas 3 and a slave down: the master refuses sends until it is back in the set
    "controller_min_in_sync": ("controller_master_power_loss", 1, (
        "cluster.brokers[0].store.min_in_sync_replicas=3",
        "faults=[{at_ms: 20s, kind: process_crash, node: broker-a-s1, duration_ms: 10s}]")),
    # a SimpleConsumer slower than its invisible time: revived messages, late acks refused by the proxy
    "pop_slow_consumer": ("pop_slow_consumer_invisible_time", 1, ()),
    # a POP-mode push consumer's acks, sent in time, delayed 10 s on the way to the broker: they land after the revive
    "pop_push_acks_after_revive": ("pop_slow_consumer_invisible_time", 1, (
        "consumers[0].pop={client: push, invisible_duration_ms: 5s}", "consumers[0].consume_time_ms=1",
        "faults=[{at_ms: 20s, kind: link_latency, src: c-1, dst: broker-a, both_ways: false, extra_latency_ms: 10000, "
        "duration_ms: 20s}]", "duration_ms=60s", "producers[0].stop_ms=50s")),
    # orderly POP: a queue's un-acked batch blocks it
    "pop_orderly": ("pop_consumer_crash", 1, ("consumers[0].pop.orderly=true",)),
}

# every declared point → the run that reaches it (at least once)
REACHED_BY: dict[str, str] = {
    "power_loss_unflushed_tail": "power_loss_async_flush",
    "crash_write_buffer_lost": "transient_store_pool_crash",
    "recovery_truncates_invalid_tail": "ha_slave_diverged",
    "consume_queue_dirty_units_dropped": "power_loss_async_flush",
    "queue_offset_reused": "power_loss_async_flush",
    "flush_disk_timeout": "fsync_stall_sync_flush",
    "config_file_loaded_from_bak": "offsets_from_bak_4x",
    "broker_offset_rolled_back": "offsets_from_bak_4x",
    "offset_answer_behind_replica": "failover_stale_slave_offsets",
    "sync_master_waits_for_slave": "power_loss_sync_master",
    "flush_slave_timeout": "power_loss_sync_master",
    "slave_not_available": "power_loss_sync_master_4x",
    "ha_slave_catching_up": "power_loss_sync_master",
    "ha_slave_diverged": "ha_slave_diverged",
    "pull_held_woken_by_arrival": "power_loss_async_flush",
    "pull_hold_expired_empty": "power_loss_async_flush",
    "server_side_reset_taken": "reset_offset_by_time",
    "slave_pull_rejected": "slave_reads_refused_5x",
    "pull_from_slave": "failover_stale_slave_offsets",
    "delay_level_delivered": "consume_failures_dlq",
    "consume_failure_sent_back": "consume_failures_dlq",
    "send_back_resent_by_inner_producer": "send_back_brokers_down",
    "send_back_failed_local_retry": "send_back_brokers_down",
    "dlq_by_send_back": "consume_failures_dlq",
    "dlq_by_retry_send": "orderly_failures",
    "send_retried_other_broker": "power_loss_async_flush",
    "send_budget_exhausted": "power_loss_async_flush",
    "fault_broker_isolated": "all_brokers_isolated_4x",
    "pick_one_at_least_chosen": "all_brokers_isolated_4x",
    "reachable_pass_chosen": "all_brokers_isolated_5x",
    "detector_restored_broker": "detector_5x",
    "async_backpressure_rejected": "async_backpressure",
    "broker_busy_rejected": "broker_busy",
    "rebalance_dropped_queue_in_flight": "orderly_consumer_paused",
    "offset_illegal_corrected": "reset_offset_by_time",
    "pull_flow_controlled": "power_loss_async_flush",
    "orderly_lock_refused": "orderly_consumer_paused",
    "orderly_lock_expired_taken_over": "orderly_consumer_paused",
    "orderly_lock_lost": "orderly_consumer_paused",
    "orderly_consume_needs_lock": "orderly_consumer_paused",
    "orderly_queue_suspended": "orderly_failures",
    "txn_check_max_reached": "txn_producers_down",
    "txn_check_answered_unknow": "txn_unknown_answers",
    "txn_check_no_producer": "txn_producers_down",
    "txn_op_batch_lost_in_crash": "txn_power_loss",
    "txn_end_refused": "txn_late_ends",
    "txn_half_lost_power_loss": "txn_power_loss",
    "commit_log_file_expired": "retention_lagging_consumer",
    "commit_log_file_deleted_forcibly": "disk_full",
    "disk_full_send_refused": "disk_full",
    "controller_elected_new_master": "controller_master_power_loss",
    "controller_no_candidate": "controller_no_candidate",
    "controller_write_without_quorum": "controller_quorum_lost_alter",
    "sync_state_set_shrunk": "controller_partition_master",
    "ha_truncated_at_consistent_point": "controller_partition_master",
    "ha_no_consistent_point": "controller_quorum_loss",
    "in_sync_replicas_not_enough": "controller_min_in_sync",
    "pop_revived": "pop_slow_consumer",
    "pop_ack_after_revive": "pop_push_acks_after_revive",
    "pop_ack_expired_handle": "pop_slow_consumer",
    "pop_order_queue_blocked": "pop_orderly",
}


@functools.cache
def reached(run_id: str) -> dict[str, int]:
    name, seed, overrides = RUNS[run_id]
    return run_scenario(ROOT / "scenarios" / f"{name}.yaml", seed=seed, overrides=list(overrides)).summary["coverage"]


def test_every_declared_point_has_a_run_that_reaches_it() -> None:
    assert list(REACHED_BY) == list(coverage.NAMES), "REACHED_BY lists the declared points, in their order"
    assert set(REACHED_BY.values()) == set(RUNS), "every run reaches some point (no run without a purpose)"


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_the_run_reaches_its_points(run_id: str) -> None:
    counts = reached(run_id)
    assert list(counts) == list(coverage.NAMES)
    missed = [point for point, by in REACHED_BY.items() if by == run_id and counts[point] < 1]
    assert not missed, f"{run_id} {RUNS[run_id]} no longer reaches {missed}; reached: " \
                       f"{ {k: v for k, v in counts.items() if v} }"


def test_points_are_declared_once_with_a_branch_and_the_java_they_mirror() -> None:
    assert len(coverage.POINTS) >= 28
    for index, point in enumerate(coverage.POINTS):
        assert point.name.isidentifier() and point.name == point.name.lower(), point.name
        assert point.branch and point.mirrors, point.name
        assert getattr(coverage, f"COV_{point.name.upper()}") == index
    assert coverage.counts(None) == dict.fromkeys(coverage.NAMES, 0)


def test_coverage_is_deterministic_and_summarized_in_declaration_order() -> None:
    path = ROOT / "scenarios" / "txn_unknown_answers.yaml"
    first = rmqsim.run(path, seed=3).summary
    second = rmqsim.run(path, seed=3).summary
    assert first["coverage"] == second["coverage"] and list(first["coverage"]) == list(coverage.NAMES)
    assert first["coverage"]["txn_check_answered_unknow"] > 0
    assert json.loads(json.dumps(first["coverage"])) == first["coverage"]  # plain ints, as summary.json holds


def test_a_run_stopped_in_set_up_has_every_point_at_zero(monkeypatch) -> None:
    from rmqsim import runner

    def out_of_memory(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr(runner, "build", out_of_memory)
    s = rmqsim.run(ROOT / "scenarios" / "baseline.yaml").summary
    assert s["stopped_detail"].startswith("during set-up") and s["coverage"] == dict.fromkeys(coverage.NAMES, 0)


def test_a_compiled_run_counts_what_a_pure_one_counts() -> None:
    """The counter is a plain list the compiled modules index like the pure ones (sim/compiled.py)."""
    from tests.test_compiled import _child

    fast = _child("power_loss_async_flush.yaml", 1, [], pure=False)
    pure = _child("power_loss_async_flush.yaml", 1, [], pure=True)
    assert fast["status"]["compiled"] and not fast["status"]["stale"], "the compiled build is missing or stale"
    assert fast["summary"]["coverage"] == pure["summary"]["coverage"] == reached("power_loss_async_flush")


def test_a_run_read_back_has_the_same_coverage(tmp_path) -> None:
    from rmqsim import cli

    out = tmp_path / "run"
    argv = ["run", str(ROOT / "scenarios" / "txn_unknown_answers.yaml"), "--seed", "1", "--out", str(out)]
    assert cli.main(argv) in (0, 1)
    assert rmqsim.load(out).summary["coverage"] == reached("txn_unknown_answers")
