"""Fault windows end where the run ends, the analysis runs under the run's memory bound, and the
livelock bound counts the events of one instant exactly (issue 37, items 5 and 9).

analysis/checkers/faults_applied.py, analysis/checkers/metrics.py (`fault_seconds`), rmqsim/runner.py (the summary
built under the watchdog), sim/watchdog.py, sim/env.py (`max_events_per_instant`).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

PY = str(ROOT / ".venv" / "bin" / "python")
YEAR_PAUSE = ["--set", "duration_ms=5s", "--set", "settle_ms=1s", "--set", "faults[0].at_ms=1s",
              "--set", "faults[0].duration_ms=366d", "--set", "limits.max_rss_mb=400"]
# runs `rmqsim` in a child and reports its peak resident memory (KB) on stderr's last line: VmHWM, the
# high-water mark of the child's own address space. Not ru_maxrss: Linux carries it over fork and exec,
# so a child of a large pytest worker would report the worker's size (2.6 GB seen in CI).
PEAK = ("import re, sys\nfrom rmqsim.cli import main\ncode = main(sys.argv[1:])\n"
        "peak = re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "print('peak_kb=' + peak, file=sys.stderr)\nsys.exit(code)\n")


def rmqsim(*args: str, timeout_s: float = 60, code: str = PEAK) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout_s)


def peak_mb(done: subprocess.CompletedProcess) -> float:
    return int(done.stderr.strip().splitlines()[-1].removeprefix("peak_kb=")) / 1024


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# --- a fault longer than the run ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["pause", "fsync_stall"])
def test_a_year_long_fault_in_a_5_s_run_ends_with_the_fault_phase_in_little_memory(tmp_path, kind) -> None:
    """The 366-day fault of a 5 s run: the run ends in seconds under 200 MB (it took 2.6 GB and
    20 s, past `limits.max_rss_mb: 400`), and `faults_applied` ends it where the run healed it."""
    node = "c-1" if kind == "pause" else "broker-a"
    begun = time.perf_counter()
    done = rmqsim("run", "scenarios/pause_consumer.yaml", *YEAR_PAUSE, "--set", f"faults[0].kind={kind}",
                  "--set", f"faults[0].node={node}", "--out", str(tmp_path / "run"), timeout_s=30)
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - begun < 20 and peak_mb(done) < 200, (peak_mb(done), done.stderr[-500:])
    (fault,) = summary(tmp_path / "run")["faults_applied"]
    assert (fault["kind"], fault["start_ms"], fault["end_ms"], fault["ends_after_run"]) == (kind, 1000.0, 5000.0, False)


def test_a_fault_in_force_when_a_bound_stopped_the_run_ends_at_the_runs_end(tmp_path) -> None:
    done = rmqsim("run", "scenarios/pause_consumer.yaml", *YEAR_PAUSE, "--max-events", "3000",
                  "--out", str(tmp_path / "run"))
    assert done.returncode == 3, done.stderr
    s = summary(tmp_path / "run")
    (fault,) = s["faults_applied"]
    assert s["stopped_by"] == "max_events" and 1000 < s["sim_time_ms"] < 5000
    assert fault["ends_after_run"] is True and fault["end_ms"] == pytest.approx(s["sim_time_ms"], abs=1)


# --- the analysis under the memory bound -------------------------------------------------------------

HOARD = """
import sys
import rmqsim.runner as runner
from sim.watchdog import rss_mb

judge_units, hoarded = runner.judge_units, []

def hoarding(ledger, *args, **kwargs):  # an analysis that needs far more memory than the bound
    if not hoarded:
        hoarded.append(True)
        hoard = []
        while rss_mb() < LIMIT + 400:  # bounded, so that a run without the fix ends too
            hoard.append(b"x" * (8 << 20))
        del hoard
    return judge_units(ledger, *args, **kwargs)

runner.judge_units = hoarding
from rmqsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_analysis_past_the_memory_bound_stops_with_exit_3(tmp_path) -> None:
    """The summary is built under the run's memory bound: an analysis that grows past
    `limits.max_rss_mb` stops like a run bound (exit 3, `stopped_by: max_rss_mb`), saying so."""
    limit = 300
    done = rmqsim("run", "scenarios/baseline.yaml", "--set", "duration_ms=2s", "--set", "settle_ms=1s",
                  "--set", "producers[0].start_ms=500ms", "--set", f"limits.max_rss_mb={limit}",
                  "--out", str(tmp_path / "run"),
                  code=HOARD.replace("LIMIT", str(limit)))
    assert done.returncode == 3, done.stderr
    assert "stopped at bound: unknown (limits.max_rss_mb" in done.stderr
    s = summary(tmp_path / "run")
    assert (s["stopped_by"], s["verdict"], s["sent_ok"], s["sim_time_ms"]) == ("max_rss_mb", "unknown", 0, 3000)
    assert s["stopped_detail"].startswith("while building the summary after the run")
    assert f"above limits.max_rss_mb ({limit:,} MB)" in s["stopped_detail"]


# --- the livelock bound counts the events of one instant -----------------------------------------------

# a check round 5 s after the brokers start, on halves 1 s old: one instant of ~300 checks (the
# producer answers each at once), far more than 50; no instant before it holds more than 50 events
STORM = ["duration_ms=12s", "settle_ms=1s", "producers[0].rate_per_s=50", "expect={}",
         "cluster.brokers[0].broker.transaction_check_interval_ms=5000",
         "cluster.brokers[0].broker.transaction_timeout_ms=1000"]


def first_crowded_instant(limit: int) -> tuple[int, int]:
    """(time µs, events) of the first instant of the STORM run holding more than `limit` events,
    counted here by stepping the world one heap entry at a time (not by the run loop's counter)."""
    from rmqsim.runner import build, start
    from rmqsim.scenario import spec as scenario

    world = build(scenario.load(ROOT / "scenarios" / "txn_check_storm.yaml", STORM), 1)
    start(world)
    env, at, events = world.env, -1, 0
    while env._queue:
        t = env._queue[0][0]
        at, events = (at, events + 1) if t == at else (t, 1)
        if events > limit:
            return at, events
        env.step()
    raise AssertionError(f"no instant holds more than {limit} events")


def test_a_livelock_bound_of_50_stops_at_the_51st_event_of_an_instant(tmp_path) -> None:
    """`limits.max_events_per_instant: 50` fires at exactly the 51st event of the first instant
    holding more (it once sampled every 0.1 s of wall time, so such a bound never fired)."""
    instant_us, events = first_crowded_instant(50)
    sets = [a for item in [*STORM, "limits.max_events_per_instant=50"] for a in ("--set", item)]
    done = rmqsim("run", "scenarios/txn_check_storm.yaml", *sets, "--out", str(tmp_path / "run"))
    assert done.returncode == 3, done.stderr
    assert "stopped at bound: unknown (the livelock bound reached" in done.stderr
    s = summary(tmp_path / "run")
    assert (s["stopped_by"], s["stopped_at_ms"]) == ("livelock", instant_us // 1000)
    assert (f"more than limits.max_events_per_instant (50) events at simulated {instant_us / 1e6:.6f} s without "
            f"the clock moving: stopped at event {events} of that instant") in s["stopped_detail"], s["stopped_detail"]
    assert events == 51 and s["livelock_owner"].startswith("models/producer/transaction_producer.py:")


def test_the_default_livelock_bound_leaves_the_same_run_alone(tmp_path) -> None:
    sets = [a for item in STORM for a in ("--set", item)]
    done = rmqsim("run", "scenarios/txn_check_storm.yaml", *sets, "--out", str(tmp_path / "run"))
    s = summary(tmp_path / "run")
    assert (done.returncode, s["stopped_by"], s["sim_time_ms"]) == (0, None, 13_000), done.stderr


def test_the_count_of_an_instant_goes_on_across_run_calls_and_leaves_the_stop_marker_out() -> None:
    """An instant split over three `SimEnv.run` calls (the slice loop's `until` boundary, then
    `max_events`): its 51st event raises `InstantLivelock`, unprocessed, after exactly 50 ran."""
    from sim.env import InstantLivelock, SimEnv

    env = SimEnv()
    env.max_events_per_instant = 50
    ran: list[int] = []
    for i in range(60):
        env.call_later(1_000, ran.append, i)
    env.run(until=1_000)  # its stop marker is popped at 1,000 µs: not an event of that instant
    assert env.run(until=2_000, max_events=30) and len(ran) == 30
    with pytest.raises(InstantLivelock) as info:
        env.run(until=2_000)
    assert (info.value.instant_us, info.value.events, info.value.limit, ran) == (1_000, 51, 50, list(range(50)))
    assert env._queue[0][0] == 1_000  # the 51st waits on the heap, unprocessed
