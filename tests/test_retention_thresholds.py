"""Disk-pressure thresholds of the clean task told apart (models/broker/clean_service.py, 5.3.3).

DefaultMessageStore.CleanCommitLogService.isSpaceToDelete, each clean run (every
`cleanResourceInterval`, 10 s, from 60 s after the store starts):
- used share > `diskSpaceWarningLevelRatio` (90 %): the store is marked disk-full
  (RunningFlags.getAndMakeDiskFull: sends refused, SERVICE_NOT_AVAILABLE) and files go at once;
- used share > `diskSpaceCleanForciblyRatio` (85 %), at most 90 %: files go at once
  (`cleanImmediately`, with `cleanFileForciblyEnable`), the disk-full flag is left as it is (neither
  set nor cleared);
- otherwise the flag is cleared (getAndMakeDiskOK); above `diskMaxUsedSpaceRatio` (75 %) only
  expired files go. All three comparisons are strict (`>`).

A one-broker scenario fills a 16 MiB partition (1 MiB CommitLog files kept 72 h: nothing expires)
quickly to about 79 % at the first clean run (60 s), then by about 2.6 % a clean interval, so its
usage crosses 75 %, 85 % and 90 % in separate clean intervals. The usage at each run is computed
here from the trace (`broker.stored`: the CommitLog's write position, plus 20 bytes a ConsumeQueue
unit), not read from the model. Two variants:
- `cleanFileForciblyEnable` false: nothing is deleted, so usage rises through the 85–90 % band for
  two runs (neither marks the disk full) and the first run above 90 % marks it full;
- the default (true): the first run in the 85–90 % band deletes `deleteFileBatchMax` (10) files,
  100 ms apart, forcibly, without marking the disk full.
And a component timeline with the used share scripted run by run (the boundaries 85 % and 90 %
exactly, the band after a full disk), for the flag's rules alone.
"""

from __future__ import annotations

import functools

import pytest

import rmqsim
from models.broker.clean_service import CleanService
from rmqsim.scenario.spec import from_data
from sim.trace import field_index

S = 1_000_000  # µs
FIRST_RUN_US = 60 * S  # DefaultMessageStore.addScheduleTask: initialDelay 60 s
INTERVAL_US = 10 * S  # cleanResourceInterval
DELETE_GAP_US = 100_000  # deleteCommitLogFilesInterval
BATCH_MAX = 10  # deleteFileBatchMax
WARNING = 0.90  # diskSpaceWarningLevelRatio
FORCIBLY = 0.85  # diskSpaceCleanForciblyRatio
MAX_USED = 0.75  # diskMaxUsedSpaceRatio
CQ_UNIT_BYTES = 20  # ConsumeQueue.CQ_STORE_UNIT_SIZE
DISK_BYTES = 16 * 1024 * 1024
FILE_BYTES = 1024 * 1024
CLEARANCE = 0.002  # each run's usage keeps this far from a threshold (the oracle's dispatch lag is < 0.01 %)
SERVICE_NOT_AVAILABLE = 14
BROKER = "broker-a"
DURATION_S = 200


def scenario(forcibly: bool) -> dict:
    """200 msg/s of 1 KiB from 1 s to 56 s (to ~79 % by 60 s), then 36 msg/s (~2.6 % a clean interval): the
    runs see about 79, 82, 84.5, 87, 89.6 and 92 %."""
    return {
        "name": f"retention_thresholds_{'forcibly' if forcibly else 'no_forcibly'}", "seed": 1,
        "duration_ms": f"{DURATION_S}s", "settle_ms": "1s",
        "cluster": {
            "brokers": [{"name": BROKER, "store": {"mapped_file_size_commit_log_bytes": "1MiB",
                                                   "clean_file_forcibly_enable": forcibly},
                         "disk": {"size_bytes": "16MiB"}}],
            "topics": [{"name": "events", "queues": 2}],
        },
        "producers": [
            {"name": "fill", "topic": "events", "rate_per_s": 200, "arrival": "constant", "start_ms": "1s",
             "stop_ms": "56s"},
            {"name": "trickle", "topic": "events", "rate_per_s": 36, "arrival": "constant", "start_ms": "56s"},
        ],
    }


@functools.cache
def run(forcibly: bool) -> rmqsim.RunResult:
    return rmqsim.run(from_data(scenario(forcibly), "retention thresholds"), seed=1, keep_records=True)


def recs(result: rmqsim.RunResult, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind and r[1] == BROKER]


def ticks() -> list[int]:
    return list(range(FIRST_RUN_US, DURATION_S * S, INTERVAL_US))


def usage_at(result: rmqsim.RunResult, tick_us: int) -> float:
    """The used share at a clean run, from the trace: the CommitLog from offset 0 to its write position
    (valid while no file was deleted) plus a ConsumeQueue unit per stored message."""
    phys, size = field_index("broker.stored", "phys_offset"), field_index("broker.stored", "size_bytes")
    stored = [r for r in recs(result, "broker.stored") if r[0] < tick_us]
    assert not [r for r in recs(result, "broker.stored") if r[0] == tick_us], "a store at the tick itself"
    wrote = max((r[phys] + r[size] for r in stored), default=0)
    return (wrote + CQ_UNIT_BYTES * len(stored)) / DISK_BYTES


def first_deletion_us(result: rmqsim.RunResult) -> int:
    return min((r[0] for r in recs(result, "commit_log.expired_deleted")), default=DURATION_S * S)


def usages(result: rmqsim.RunResult) -> dict[int, float]:
    """tick → used share, for every clean run up to the first deletion (the oracle's range)."""
    out = {t: usage_at(result, t) for t in ticks() if t <= first_deletion_us(result)}
    near = {t: u for t, u in out.items() if any(abs(u - x) < CLEARANCE for x in (MAX_USED, FORCIBLY, WARNING))}
    assert not near, f"runs too close to a threshold to judge: {near}"
    return out


def marks(result: rmqsim.RunResult) -> list[tuple[int, bool, int]]:
    full, pct = field_index("broker.disk_state", "full"), field_index("broker.disk_state", "used_pct")
    return [(r[0], r[full], r[pct]) for r in recs(result, "broker.disk_state")]


# --- cleanFileForciblyEnable false: 85 % and 90 % in separate clean intervals ------------------------

def test_the_85_to_90_band_does_not_mark_the_disk_full_and_the_first_run_above_90_does() -> None:
    r = run(False)
    use = usages(r)
    band = [t for t, u in use.items() if FORCIBLY < u <= WARNING]
    above = [t for t, u in use.items() if u > WARNING]
    assert len(band) >= 2 and above, f"the usage must cross 85 % and 90 % in separate runs: {use}"
    assert max(band) < min(above)
    # the first mark is the first run above 90 %, with the used share it saw, and the only one (nothing is deleted)
    assert marks(r) == [(min(above), True, int(use[min(above)] * 100))], (marks(r), use)
    assert int(use[min(above)] * 100) >= 90
    assert not recs(r, "commit_log.expired_deleted"), "cleanFileForciblyEnable false, nothing expired"
    # sends are refused from that run on, and only from then
    rejected = recs(r, "broker.send_rejected")
    code = field_index("broker.send_rejected", "code")
    assert rejected and min(x[0] for x in rejected) >= min(above)
    assert {x[code] for x in rejected} == {SERVICE_NOT_AVAILABLE}
    assert r.summary["coverage"]["disk_full_send_refused"] == len(rejected)
    sent = [x for x in r.records if x[2] == "producer.sent" and x[0] < min(above)]
    assert sent and r.summary["coverage"]["commit_log_file_deleted_forcibly"] == 0


def test_no_run_at_or_below_85_percent_deletes_or_marks() -> None:
    r = run(False)
    use = usages(r)
    quiet = [t for t, u in use.items() if u <= FORCIBLY]
    assert [t for t in quiet if use[t] > MAX_USED], "a run in the 75–85 % band (expired files only)"
    assert not [m for m in marks(r) if m[0] <= max(quiet)]


# --- the default (cleanFileForciblyEnable true): the 85 % run cleans at once ------------------------

def test_the_first_run_above_85_percent_deletes_ten_files_forcibly_without_marking_the_disk_full() -> None:
    r = run(True)
    use = usages(r)
    over = [t for t, u in use.items() if u > FORCIBLY]
    assert over, use
    tick = min(over)
    assert FORCIBLY < use[tick] <= WARNING, f"the first run above 85 % falls in the 85–90 % band: {use}"
    assert all(use[t] <= FORCIBLY for t in use if t < tick)
    deleted = recs(r, "commit_log.expired_deleted")
    this_run = [x for x in deleted if tick <= x[0] < tick + INTERVAL_US]
    ff, forced = field_index("commit_log.expired_deleted", "file_from"), field_index("commit_log.expired_deleted",
                                                                                     "forced")
    assert [x[0] for x in this_run] == [tick + i * DELETE_GAP_US for i in range(BATCH_MAX)]
    assert [x[ff] for x in this_run] == [i * FILE_BYTES for i in range(BATCH_MAX)] and all(x[forced] for x in this_run)
    assert min(x[0] for x in deleted) == tick, "no run below 85 % deletes (nothing expired)"
    assert not marks(r), "never above 90 %: never marked full"
    assert not recs(r, "broker.send_rejected") and r.summary["send_failed"] == 0
    cov = r.summary["coverage"]
    assert cov["commit_log_file_deleted_forcibly"] == len(deleted) and cov["commit_log_file_expired"] == 0
    assert cov["disk_full_send_refused"] == 0


# --- component: the flag's rules on a scripted used share -------------------------------------------

# clean run (s) → used share: the boundaries exactly, the band after a full disk, a drop below 85 %
SCRIPT = {60: 0.50, 70: 0.80, 80: 0.86, 90: 0.90, 100: 0.905, 110: 0.87, 120: 0.85, 130: 0.95, 140: 0.10}
FULL_FROM_TO_S = [(100, 120), (130, 140)]  # marked full at 100 s (> 90 %), cleared at 120 s (not > 85 %)
FORCED_AT_S = [80, 90, 100, 110, 130]  # > 85 %: ten files each


def scripted(monkeypatch) -> rmqsim.RunResult:
    def used_ratio(self) -> float:
        return SCRIPT.get(self.node.env.clock.now_us // S, 0.0)

    monkeypatch.setattr(CleanService, "used_ratio", used_ratio)
    data = {
        "name": "retention_flag_script", "seed": 1, "duration_ms": "145s", "settle_ms": "1s",
        "cluster": {"brokers": [{"name": BROKER, "store": {"mapped_file_size_commit_log_bytes": "64KiB"},
                                 "disk": {"size_bytes": "1GiB"}}],
                    "topics": [{"name": "events", "queues": 2}]},
        "producers": [{"name": "p", "topic": "events", "rate_per_s": 100, "arrival": "constant", "start_ms": "1s"}],
    }
    return rmqsim.run(from_data(data, "retention flag script"), seed=1, keep_records=True)


def test_scripted_usage_marks_full_only_above_90_and_clears_only_at_or_below_85(monkeypatch) -> None:
    r = scripted(monkeypatch)
    assert [(t, full) for t, full, _ in marks(r)] == [
        (start * S, flag) for start, end in FULL_FROM_TO_S for flag, start in ((True, start), (False, end))]
    assert [pct for *_, pct in marks(r)] == [90, 85, 95, 10]  # int(share × 100) of the scripted shares
    windows = [(a * S, b * S) for a, b in FULL_FROM_TO_S]
    rejected = recs(r, "broker.send_rejected")
    assert rejected and all(any(a <= x[0] < b for a, b in windows) for x in rejected)
    assert all(any(x[0] < a + S for x in rejected if x[0] >= a) for a, _ in windows), "refused in every episode"
    assert r.summary["coverage"]["disk_full_send_refused"] == len(rejected)


def test_scripted_usage_cleans_at_once_only_above_85(monkeypatch) -> None:
    r = scripted(monkeypatch)
    deleted = recs(r, "commit_log.expired_deleted")
    forced = field_index("commit_log.expired_deleted", "forced")
    runs: dict[int, list[int]] = {}
    for x in deleted:
        runs.setdefault(x[0] // S, []).append(x[0])
        assert x[forced], x
    starts = sorted(t for t in runs if t % 10 == 0)
    assert starts == FORCED_AT_S, runs
    for t in starts:
        assert runs[t][0] == t * S and len([x for x in deleted if t * S <= x[0] < t * S + INTERVAL_US]) == BATCH_MAX
    assert r.summary["coverage"]["commit_log_file_deleted_forcibly"] == BATCH_MAX * len(FORCED_AT_S)
    assert r.summary["coverage"]["commit_log_file_expired"] == 0


@pytest.mark.parametrize("forcibly", [False, True])
def test_the_clean_runs_are_on_the_fixed_rate_ticks(forcibly: bool) -> None:
    r = run(forcibly)
    starts = {m[0] for m in marks(r)} | {x[0] for x in recs(r, "commit_log.expired_deleted")
                                        if x[field_index("commit_log.expired_deleted", "file_from")] == 0}
    assert starts and all(t >= FIRST_RUN_US and (t - FIRST_RUN_US) % INTERVAL_US == 0 for t in starts), starts
