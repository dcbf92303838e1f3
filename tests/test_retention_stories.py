"""Retention and disk pressure (models/broker/clean_service.py) over several seeds: the claims of the
two scenario headers as bounds and invariants, not pinned numbers, and the clean task's timeline.

- retention_lagging_consumer: the group that keeps up (`audit`) loses nothing; the lagging group
  (`archive`) loses messages, each lost to a CommitLog file deleted by time (cause
  expired_file_deleted), each stored at least fileReservedTime (20 s) before its file went; its
  pulls below the new minimum answer OFFSET_TOO_SMALL → PULL_OFFSET_MOVED and it jumps forward
  and goes on consuming (no stall); nothing goes before the first clean run (60 s).
- disk_full: nothing acknowledged is lost; every failed send failed with SERVICE_NOT_AVAILABLE
  (14), refused only while the store is marked disk-full, each disk-full episode at most one clean
  interval (10 s) long; the files deleted early (forcibly) held only consumed messages.
- the clean task's timeline, on a tiny one-broker scenario without consumers: the first deletion
  at the first run (60 s), runs on the cleanResourceInterval ticks (10 s), deletions 100 ms apart
  (deleteCommitLogFilesInterval), at most 10 a run (deleteFileBatchMax), in file order, never the
  last file; with deleteWhen outside the run (and no disk pressure) nothing goes.

Reference: DefaultMessageStore.addScheduleTask (scheduleAtFixedRate, first run after 60 s),
CleanCommitLogService, MappedFileQueue.deleteExpiredFileByTime (RocketMQ 5.3.3).
"""

from __future__ import annotations

import pytest

import rmqsim
from rmqsim.scenario.spec import from_data
from sim.trace import field_index
from tests.conftest import ROOT

SEEDS = (1, 2, 3)
S = 1_000_000  # µs
FIRST_RUN_US = 60 * S  # addScheduleTask: initialDelay 1000 * 60
CLEAN_INTERVAL_US = 10 * S  # cleanResourceInterval
DELETE_GAP_US = 100_000  # deleteCommitLogFilesInterval
BATCH_MAX = 10  # deleteFileBatchMax
RESERVED_US = 20 * S  # retention_lagging_consumer: file_reserved_time_ms 20s
CODE_SERVICE_NOT_AVAILABLE = 14
BROKER = "broker-a"

# the clean task runs on fixed-rate ticks in Java; the model sleeps a whole interval after each run
def fi(kind: str, field: str) -> int:
    return field_index(kind, field)


def recs(result, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind]


def run_bundled(name: str, seed: int):
    return rmqsim.run(str(ROOT / "scenarios" / f"{name}.yaml"), seed=seed, keep_records=True)


def acked_ids(result) -> set[int]:
    st, mid = fi("producer.sent", "status"), fi("producer.sent", "msg_id")
    return {r[mid] for r in recs(result, "producer.sent") if r[st] == "SEND_OK"}


def consumed_ids(result, group: str) -> set[int]:
    g, ok, mid = fi("consumer.consumed", "group"), fi("consumer.consumed", "ok"), fi("consumer.consumed", "msg_id")
    return {r[mid] for r in recs(result, "consumer.consumed") if r[g] == group and r[ok]}


def expired_facts(result) -> list[tuple]:
    return [r for r in recs(result, "commit_log.destroyed") if r[fi("commit_log.destroyed", "fault")] == "expired"]


def store_times(result) -> dict[int, int]:
    """msg id → its store time on the broker (the last copy)."""
    mid = fi("broker.stored", "msg_id")
    return {r[mid]: r[0] for r in recs(result, "broker.stored") if r[1] == BROKER}


def full_windows(result) -> list[tuple[int, int | None]]:
    """(marked full, marked OK again or None) per disk-full episode, from `broker.disk_state`."""
    full = fi("broker.disk_state", "full")
    windows: list[tuple[int, int | None]] = []
    for r in recs(result, "broker.disk_state"):
        if r[full]:
            assert not windows or windows[-1][1] is not None, f"marked full twice in a row: {r}"
            windows.append((r[0], None))
        else:
            assert windows and windows[-1][1] is None, f"marked OK while not full: {r}"
            windows[-1] = (windows[-1][0], r[0])
    return windows


def within(t_us: int, windows: list[tuple[int, int | None]]) -> bool:
    return any(start <= t_us and (end is None or t_us <= end) for start, end in windows)


def runs_by_tick(deleted: list[tuple]) -> dict[int, list[tuple]]:
    """Deletion records grouped by the clean-interval tick they fall in (a run of <= 10 deletions
    100 ms apart spans under a second, well inside one interval)."""
    runs: dict[int, list[tuple]] = {}
    for r in deleted:
        runs.setdefault((r[0] - FIRST_RUN_US) // CLEAN_INTERVAL_US, []).append(r)
    return runs


# --- retention_lagging_consumer ---------------------------------------------------------------------

@pytest.fixture(scope="module", params=SEEDS, ids=lambda s: f"seed{s}")
def retention(request):
    return run_bundled("retention_lagging_consumer", request.param)


def test_retention_the_lagging_group_alone_loses_and_only_to_expired_files(retention) -> None:
    s = retention.summary
    assert s["groups"]["audit"]["lost"] == 0
    assert s["groups"]["archive"]["lost"] > 0
    assert s["lost"] == s["groups"]["archive"]["lost"]
    assert s["lost"] == s["lost_by_cause"]["expired_file_deleted"]
    assert all(n == 0 for cause, n in s["lost_by_cause"].items() if cause != "expired_file_deleted"), s["lost_by_cause"]
    acked = acked_ids(retention)
    assert acked <= consumed_ids(retention, "audit")
    # message by message: whatever `archive` never consumed went with an expired file (a fact says so)
    archive_lost = acked - consumed_ids(retention, "archive")
    assert len(archive_lost) == s["groups"]["archive"]["lost"]
    assert archive_lost <= {r[fi("commit_log.destroyed", "msg_id")] for r in expired_facts(retention)}


def test_retention_deletes_by_time_only_files_older_than_the_reserved_time(retention) -> None:
    deleted = recs(retention, "commit_log.expired_deleted")
    facts = expired_facts(retention)
    assert deleted and facts
    assert not any(r[fi("commit_log.expired_deleted", "forced")] for r in deleted), "nothing forced: no disk size"
    assert not recs(retention, "broker.disk_state")
    assert min(r[0] for r in deleted) >= FIRST_RUN_US and min(r[0] for r in facts) >= FIRST_RUN_US
    stored = store_times(retention)
    mid = fi("commit_log.destroyed", "msg_id")
    young = [(r[mid], stored[r[mid]], r[0]) for r in facts if stored[r[mid]] > r[0] - RESERVED_US]
    assert not young, f"destroyed within fileReservedTime of their store time: {young[:5]}"
    # the per-file counts match the facts and the coverage
    assert sum(r[fi("commit_log.expired_deleted", "unconsumed")] for r in deleted) == len(facts)
    cov = retention.summary["coverage"]
    assert cov["commit_log_file_expired"] == len(deleted) and cov["commit_log_file_deleted_forcibly"] == 0
    assert cov["disk_full_send_refused"] == 0 and retention.summary["send_failed"] == 0


def test_retention_the_lagging_group_jumps_forward_and_keeps_consuming(retention) -> None:
    assert retention.summary["coverage"]["offset_illegal_corrected"] > 0  # OFFSET_TOO_SMALL → PULL_OFFSET_MOVED
    first_deletion = min(r[0] for r in recs(retention, "commit_log.expired_deleted"))
    g = fi("consumer.offset_moved", "group")
    q, frm, to = (fi("consumer.offset_moved", f) for f in ("queue_id", "from_offset", "to_offset"))
    moved = recs(retention, "consumer.offset_moved")
    assert moved and {r[g] for r in moved} == {"archive"}
    assert all(r[0] > first_deletion and r[to] > r[frm] for r in moved), "forward only, after a deletion"
    cg, cq, co = fi("consumer.consumed", "group"), fi("consumer.consumed", "queue_id"), \
        fi("consumer.consumed", "queue_offset")
    archive = [r for r in recs(retention, "consumer.consumed") if r[cg] == "archive"]
    assert any(r[0] > first_deletion for r in archive)
    # no stall: after every jump, `archive` consumed that queue from the new position on
    stalled = [m for m in moved if not any(c[0] > m[0] and c[cq] == m[q] and c[co] >= m[to] for c in archive)]
    assert not stalled, f"no consumption after these jumps: {stalled}"


# --- disk_full ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=SEEDS, ids=lambda s: f"seed{s}")
def disk_full(request):
    return run_bundled("disk_full", request.param)


def test_disk_full_loses_nothing_and_every_failed_send_is_code_14(disk_full) -> None:
    s = disk_full.summary
    assert s["lost"] == 0 and all(n == 0 for n in s["lost_by_cause"].values()), s["lost_by_cause"]
    assert s["send_failed"] > 0
    assert s["send_failures_by_reason"] == {f"broker_code_{CODE_SERVICE_NOT_AVAILABLE}": s["send_failed"]}
    rejected = recs(disk_full, "broker.send_rejected")
    assert rejected and {r[fi("broker.send_rejected", "code")] for r in rejected} == {CODE_SERVICE_NOT_AVAILABLE}
    assert s["coverage"]["disk_full_send_refused"] == len(rejected)


def test_disk_full_refuses_sends_only_while_marked_full(disk_full) -> None:
    windows = full_windows(disk_full)
    assert windows and all(end is not None for _, end in windows), f"every episode ends in the run: {windows}"
    full, pct = fi("broker.disk_state", "full"), fi("broker.disk_state", "used_pct")
    # marked above diskSpaceWarningLevelRatio (90 %); cleared only at or below diskSpaceCleanForciblyRatio (85 %):
    # a run between the two leaves the flag as it is (isSpaceToDelete)
    for r in recs(disk_full, "broker.disk_state"):
        assert r[pct] >= 90 if r[full] else r[pct] <= 85, r
    outside = [r for r in recs(disk_full, "broker.send_rejected") if not within(r[0], windows)]
    assert not outside, f"refused while not marked full: {outside[:5]}"
    # a producer learns of its last refusal one network round later (a refused request in flight at the
    # tick that clears the flag): its failure record may follow the episode by that much
    answer_us = 5_000
    late = [(start, end + answer_us) for start, end in windows]
    failed_outside = [r for r in recs(disk_full, "producer.send_failed") if not within(r[0], late)]
    assert not failed_outside, f"send failures while not marked full: {failed_outside[:5]}"
    # each episode starts at a clean run, which also deletes at once (above diskSpaceCleanForciblyRatio)
    deleted_at = {r[0] for r in recs(disk_full, "commit_log.expired_deleted")}
    assert all(start >= FIRST_RUN_US and start in deleted_at for start, _ in windows)


def test_disk_full_episode_lasts_at_most_one_clean_interval(disk_full) -> None:
    windows = full_windows(disk_full)
    assert windows
    long = [(start, end) for start, end in windows if end is None or end - start > CLEAN_INTERVAL_US + 1_000]
    assert not long, f"disk-full episodes longer than one clean interval: {long}"


def test_disk_full_cleans_forcibly_and_destroys_nothing_unconsumed(disk_full) -> None:
    deleted = recs(disk_full, "commit_log.expired_deleted")
    forced = fi("commit_log.expired_deleted", "forced")
    assert deleted and all(r[forced] for r in deleted), "fileReservedTime 72 h: every deletion is forced"
    assert not expired_facts(disk_full), "the group had consumed every message deleted early"
    assert sum(r[fi("commit_log.expired_deleted", "unconsumed")] for r in deleted) == 0
    cov = disk_full.summary["coverage"]
    assert cov["commit_log_file_deleted_forcibly"] == len(deleted) and cov["commit_log_file_expired"] == 0
    for tick, run in runs_by_tick(deleted).items():
        assert len(run) <= BATCH_MAX, (tick, run)
        assert all(b[0] - a[0] == DELETE_GAP_US for a, b in zip(run, run[1:], strict=False)), (tick, run)


# --- the clean task's timeline (component grain) ----------------------------------------------------------

FILE_BYTES = 64 * 1024
TINY_RESERVED_US = 5 * S


def tiny(delete_when: str) -> dict:
    """One broker, 64 KiB CommitLog files kept 5 s, a producer for 20 s, no consumer."""
    return {
        "name": f"retention_timeline_{delete_when}", "seed": 1, "duration_ms": "120s", "settle_ms": "auto",
        "cluster": {
            "brokers": [{"name": BROKER, "store": {"mapped_file_size_commit_log_bytes": "64KiB",
                                                    "file_reserved_time_ms": "5s", "delete_when": delete_when}}],
            "topics": [{"name": "events", "queues": 2}],
        },
        "producers": [{"name": "p", "topic": "events", "rate_per_s": 100, "start_ms": "1s", "stop_ms": "21s"}],
    }


@pytest.fixture(scope="module")
def timeline():
    return rmqsim.run(from_data(tiny("00"), "retention timeline"), seed=1, keep_records=True)


def test_timeline_deletes_in_file_order_from_the_first_run_in_batches_100ms_apart(timeline) -> None:
    deleted = recs(timeline, "commit_log.expired_deleted")
    ff, forced, n = (fi("commit_log.expired_deleted", f) for f in ("file_from", "forced", "records"))
    assert deleted and deleted[0][0] == FIRST_RUN_US
    assert not any(r[forced] for r in deleted) and not recs(timeline, "broker.disk_state")
    runs = runs_by_tick(deleted)
    assert len(runs) >= 3, "more files than one batch: several runs"
    for tick, run in runs.items():
        assert len(run) <= BATCH_MAX, (tick, run)
        assert all(b[0] - a[0] == DELETE_GAP_US for a, b in zip(run, run[1:], strict=False)), (tick, [r[0] for r in run])
    assert all(len(run) == BATCH_MAX for run in list(runs.values())[:-1]), "a full batch while files are left"
    # oldest first, one file after the other, every file but the last (all expired long before 60 s)
    assert [r[ff] for r in deleted] == [i * FILE_BYTES for i in range(len(deleted))]
    stored = recs(timeline, "broker.stored")
    phys = fi("broker.stored", "phys_offset")
    last_file = max(r[phys] for r in stored) // FILE_BYTES * FILE_BYTES
    assert last_file not in {r[ff] for r in deleted}, "the last CommitLog file is never deleted"
    assert deleted[-1][ff] + FILE_BYTES == last_file
    assert sum(r[n] for r in deleted) == sum(1 for r in stored if r[phys] < last_file)
    # each file went at least fileReservedTime after its last record was stored
    last_store: dict[int, int] = {}
    for r in stored:
        key = r[phys] // FILE_BYTES * FILE_BYTES
        last_store[key] = max(last_store.get(key, 0), r[0])
    assert all(r[0] >= last_store[r[ff]] + TINY_RESERVED_US for r in deleted)
    assert timeline.summary["coverage"]["commit_log_file_expired"] == len(deleted)


def test_timeline_each_run_starts_on_a_clean_interval_tick(timeline) -> None:
    runs = runs_by_tick(recs(timeline, "commit_log.expired_deleted"))
    starts = [run[0][0] for run in runs.values()]
    assert len(starts) >= 2
    off_tick = [t for t in starts if (t - FIRST_RUN_US) % CLEAN_INTERVAL_US]
    assert not off_tick, f"runs starting off the 10 s ticks after 60 s: {off_tick}"


def test_timeline_delete_when_outside_the_run_deletes_nothing() -> None:
    r = rmqsim.run(from_data(tiny("12"), "retention timeline, deleteWhen 12"), seed=1, keep_records=True)
    assert r.summary["sim_time_ms"] > FIRST_RUN_US // 1_000 + 3 * CLEAN_INTERVAL_US // 1_000  # several runs
    assert recs(r, "broker.stored")
    assert not recs(r, "commit_log.expired_deleted") and not recs(r, "commit_log.destroyed")
    cov = r.summary["coverage"]
    assert cov["commit_log_file_expired"] == 0 and cov["commit_log_file_deleted_forcibly"] == 0
