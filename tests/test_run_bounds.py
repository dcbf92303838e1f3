"""Run bounds that always fire (issue 25): a step that never yields, a livelock, memory, set-up
too large to build, and what a stopped run reports (sim/watchdog.py, rmqsim/runner.py,
rmqsim/scenario/setup_size.py); and the 4.x check loop that once never ended (models/broker/transaction_check.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

import rmqsim
from models.namesrv import NameServer
from models.records import TXN_CHECKED
from rmqsim import runner
from rmqsim.scenario import spec as scenario
from rmqsim.scenario.setup_size import route_entries
from sim.config import ConfigError
from sim.limits import DEFAULT_MAX_ROUTE_ENTRIES
from sim.watchdog import RunInterrupted, Watchdog, rss_mb
from tests.conftest import ROOT, short_baseline

TXN_4X = {"name": "txn_4x_spin", "version": "4.x", "duration_ms": 31_000, "settle_ms": 0,
          # the 30 s round (4.9.8 defaults to 60 s): the check of a half exactly transactionTimeOut old
          "cluster": {"brokers": [{"broker": {"transaction_check_interval_ms": 30_000}}],
                      "topics": [{"name": "orders", "queues": 4}]},
          "producers": [{"name": "p", "group": "order-tx", "topic": "orders", "rate_per_s": 10, "arrival": "constant",
                         "transaction": {"unknow_probability": 1}}],
          "consumers": [{"name": "c", "group": "billing", "topic": "orders"}]}


def short(duration_ms: int = 20_000, **limits: object) -> scenario.Scenario:
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    data.update(duration_ms=duration_ms, settle_ms=5_000, limits=limits)
    data["producers"][0]["rate_per_s"] = 500
    return scenario.from_data(data, "short baseline")


def spin(self: object, *args: object) -> None:
    while True:
        pass


# --- the 4.x check loop ------------------------------------------------------------------------

def test_4x_check_of_a_half_exactly_transaction_timeout_old_ends() -> None:
    """A constant 10/s producer answering UNKNOW: at the 30 s round one half is exactly 6 s old
    (age = transactionTimeOut, no op message). Java's loop spins until its clock moves; here the
    half is checked one clock tick later, and the run ends."""
    result = rmqsim.run(scenario.from_data(dict(TXN_4X)), max_wall_s=30, keep_records=True)
    s = result.summary
    assert s["stopped_by"] is None and s["txn"]["checks"] > 0
    times = {r[0] for r in result.records if r[2] == TXN_CHECKED}
    assert times == {30_000_000, 30_000_001}  # the round, and the half that was exactly 6 s old


# --- a step that never yields --------------------------------------------------------------------

def test_a_step_that_never_yields_stops_at_max_wall_s(monkeypatch) -> None:
    monkeypatch.setattr(NameServer, "on_get_route", spin)
    begun = time.perf_counter()
    s = rmqsim.run(short(), max_wall_s=1.0).summary
    assert time.perf_counter() - begun < 10
    assert (s["stopped_by"], s["verdict"]) == ("max_wall_s", "unknown")
    assert s["failures"] == ["run stopped at its max_wall_s bound: nothing can be judged"]
    assert s["lost"] == 0 and s["livelock_owner"] is None


def test_a_step_that_never_yields_is_a_livelock_naming_it(monkeypatch) -> None:
    monkeypatch.setattr(NameServer, "on_get_route", spin)
    s = rmqsim.run(short(max_step_wall_s=0.5), max_wall_s=60).summary
    assert (s["stopped_by"], s["verdict"]) == ("livelock", "unknown")
    assert s["livelock_owner"] == "tests/test_run_bounds.py:spin (namesrv)"
    assert "without yielding" in s["stopped_detail"] and s["livelock_owner"] in s["stopped_detail"]
    assert s["failures"] == ["run stopped as a livelock: nothing can be judged"]


def test_a_zero_delay_callback_that_reschedules_itself_is_a_livelock(monkeypatch) -> None:
    original = NameServer.on_get_route

    def on_get_route(self, src, req_id, req):
        def again() -> None:
            self.node.env.call_later(0, again)
        again()
        original(self, src, req_id, req)

    monkeypatch.setattr(NameServer, "on_get_route", on_get_route)
    s = rmqsim.run(short(max_events_per_instant=20_000), max_wall_s=60).summary
    assert (s["stopped_by"], s["verdict"]) == ("livelock", "unknown")
    # named by the entry due at the instant, or (interrupted inside it) by its frame, which knows the node
    assert s["livelock_owner"] in ("tests/test_run_bounds.py:again", "tests/test_run_bounds.py:again (namesrv)")
    assert "max_events_per_instant (20,000)" in s["stopped_detail"] and s["stopped_at_ms"] < 3_000


# --- memory -----------------------------------------------------------------------------------

def test_the_memory_bound_stops_a_run_cleanly() -> None:
    hoard: list[bytes] = []
    limit = int(rss_mb() or 0) + 32
    s = rmqsim.run(short(60_000, max_rss_mb=limit), max_wall_s=60,
                observers=(lambda chunk: hoard.append(b"x" * (len(chunk) << 12)),)).summary  # 4 KB a record
    assert (s["stopped_by"], s["verdict"]) == ("max_rss_mb", "unknown")
    assert f"above limits.max_rss_mb ({limit:,} MB)" in s["stopped_detail"]
    assert s["lost"] == 0 and s["sent_ok"] > 0


def test_a_memory_error_stops_the_run_as_the_memory_bound() -> None:
    refused = []

    def refuse(chunk: list) -> None:
        if chunk[-1][0] > 3_000_000 and not refused:
            refused.append(chunk[-1][0])
            raise MemoryError
    s = rmqsim.run(short(), observers=(refuse,)).summary
    assert (s["stopped_by"], s["verdict"]) == ("max_rss_mb", "unknown")
    assert s["stopped_detail"].startswith("MemoryError") and s["stopped_at_ms"] == refused[0] // 1000


# --- set-up --------------------------------------------------------------------------------------

def test_a_stop_during_set_up_still_summarizes(monkeypatch) -> None:
    monkeypatch.setattr(runner, "_wire_network", lambda network, sc: spin(None))
    s = rmqsim.run(short(), max_wall_s=0.5).summary
    assert (s["stopped_by"], s["verdict"], s["stopped_at_ms"], s["sent_ok"], s["lost"]) == \
        ("max_wall_s", "unknown", 0, 0, 0)
    assert s["stopped_detail"].startswith("during set-up: ")


def huge() -> dict:
    return {"name": "huge", "cluster": {"brokers": [{"name": f"broker-{i}"} for i in range(100)],
                                        "topics": [{"name": "orders", "queues": 1024}]},
            "producers": [{"name": "p", "topic": "orders"}],
            "consumers": [{"name": "c", "count": 1000, "group": "g", "topic": "orders"}]}


def test_validation_refuses_a_set_up_beyond_its_limit() -> None:
    with pytest.raises(ConfigError) as info:
        scenario.from_data(huge(), "huge.yaml")
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert "102,704,800 route entries" in problems[0] and "limits.max_route_entries (10,000,000)" in problems[0]
    assert "limits: {max_route_entries: ...}" in problems[0]
    raised = scenario.from_data(dict(huge(), limits={"max_route_entries": 200_000_000}), "huge.yaml")
    assert raised.limits.max_route_entries == 200_000_000


def test_every_bundled_scenario_is_far_inside_the_set_up_limit() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        total, _ = route_entries(scenario.load(path))
        assert total < DEFAULT_MAX_ROUTE_ENTRIES / 1_000, (path.name, total)


# --- what a stopped run reports ------------------------------------------------------------------

def test_a_run_stopped_at_max_events_reports_unconsumed_not_lost() -> None:
    s = rmqsim.run(short_baseline(), max_events=20_000).summary
    assert s["stopped_by"] == "max_events" and s["verdict"] == "unknown"
    assert s["lost"] == 0 and s["lost_by_cause"]["other"] == 0 and s["unconsumed"] > 0
    assert s["unconsumed"] == sum(g["unconsumed"] for g in s["groups"].values())
    assert s["sent_ok"] == s["consumed"] + s["unconsumed"] + s["pending_retry"]  # no duplicates this early


def test_a_whole_run_has_nothing_unconsumed() -> None:
    s = rmqsim.run(short_baseline(5_000, 2_000)).summary
    assert s["stopped_by"] is None and s["unconsumed"] == 0 and s["stopped_detail"] is None


# --- the watchdog itself ---------------------------------------------------------------------------

def test_watchdog_threads_end_with_their_runs() -> None:
    before = threading.active_count()
    for _ in range(3):
        rmqsim.run(short_baseline(2_000, 1_000))
    assert threading.active_count() == before
    assert not [t for t in threading.enumerate() if t.name == "rmqsim-watchdog"]


def test_watchdog_interrupts_and_then_stays_quiet() -> None:
    watchdog = Watchdog(time.perf_counter, time.perf_counter(), max_wall_s=0.2, sample_s=0.02).start()
    try:
        with pytest.raises(RunInterrupted) as info:
            while True:
                pass
        stop = watchdog.stop(info.value)
    finally:
        watchdog.close()
    assert stop is not None and stop.bound == "max_wall_s"
    time.sleep(1.5)  # longer than REFIRE_S: nothing is raised after stop()


def test_a_sweep_task_stopped_in_a_step_fails_its_row_and_leaves_no_watchdog(tmp_path, monkeypatch) -> None:
    """In-process (no Spark): a sweep run whose step never yields is stopped by `run_timeout_s`;
    the next run in the same worker runs whole, undisturbed."""
    import pyarrow.parquet as pq

    from analysis.sweeps import directory as sweep_dir
    from analysis.sweeps import results_store as store
    from analysis.sweeps.spec import load_sweep
    from analysis.sweeps.sweep import tasks
    from analysis.sweeps.task import execute

    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump({"name": "bounded", "base": str(ROOT / "scenarios" / "baseline.yaml"),
                                    "set": {"duration_ms": "3s", "settle_ms": "1s"}, "seeds": [1, 2],
                                    "run_timeout_s": 1.0}))
    sweep = load_sweep(path)
    out = tmp_path / "out"
    sweep_dir.prepare(out, {"digest": sweep.digest()})
    stuck, whole = tasks(sweep, out)
    with monkeypatch.context() as patch:
        patch.setattr(NameServer, "on_get_route", spin)
        assert execute(stuck)["status"] == "failed"
    row = pq.read_table(out / store.RUNS / f"{stuck['run_id']}.parquet").to_pylist()[0]
    assert row["stopped_by"] == "max_wall_s" and "StoppedAtBound" in row["error"]
    assert not [t for t in threading.enumerate() if t.name == "rmqsim-watchdog"]
    assert execute(whole)["status"] == "ok"
    time.sleep(1.2)  # a stale interruption would have been raised by now


# --- through the command line --------------------------------------------------------------------

def cli_with(tmp_path: Path, patch: str, *args: str) -> subprocess.CompletedProcess:
    """`rmqsim run` in a subprocess after `patch` (Python run first)."""
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(patch) + "\nimport sys\nfrom rmqsim.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, str(driver), "run", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_cli_livelock_exits_3_without_a_traceback(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    path.write_text(yaml.safe_dump(dict(data, duration_ms=10_000, settle_ms=1_000, limits={"max_step_wall_s": 0.5})))
    done = cli_with(tmp_path, """
        from models.namesrv import NameServer
        def stuck(self, *args):
            while True:
                pass
        NameServer.on_get_route = stuck
        """, str(path), "--out", "out")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "stopped at bound: unknown (the livelock bound reached" in done.stderr
    assert f"{tmp_path / 'driver.py'}:stuck (namesrv)" in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["stopped_by"], summary["verdict"]) == ("livelock", "unknown")


def test_cli_stop_during_set_up_exits_3(tmp_path) -> None:
    done = cli_with(tmp_path, """
        from rmqsim import runner
        def stuck(network, sc):
            while True:
                pass
        runner._wire_network = stuck
        """, str(ROOT / "scenarios" / "baseline.yaml"), "--out", "out", "--max-wall-s", "0.5")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "during set-up" in done.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["stopped_by"] == "max_wall_s"
