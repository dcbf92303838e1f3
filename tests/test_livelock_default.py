"""The livelock bound at its default (sim/env.py, sim/watchdog.py, rmqsim/runner.py): a scenario
that leaves `limits:` alone still stops a run whose events never let the clock move, at exactly
event `DEFAULT_MAX_EVENTS_PER_INSTANT` + 1 of the instant, as `stopped_by: livelock`; an instant
of exactly that many events is not a livelock (the bound is "more than").

tests/test_run_bounds.py and tests/test_fault_window_bounds.py lower the bound (20,000, 50) to keep
their runs short; this file checks that the bound a user actually gets is wired: the scenario
default reaches `SimEnv.max_events_per_instant`, and both run loops (`_run_loop`, and
`_run_counted` near `max_events`) count against it.
"""

from __future__ import annotations

import yaml

import rmqsim
from models.namesrv import NameServer
from rmqsim.scenario import spec as scenario
from sim.env import InstantLivelock, SimEnv
from sim.limits import DEFAULT_MAX_EVENTS_PER_INSTANT
from tests.conftest import ROOT

BOUND = DEFAULT_MAX_EVENTS_PER_INSTANT
GIVE_UP = 3 * BOUND  # the loops below stop themselves here: a bound that never fires fails, never hangs


def baseline(duration_ms: int = 20_000) -> scenario.Scenario:
    """The bundled baseline, shortened; its `limits:` left to the defaults."""
    data = yaml.safe_load((ROOT / "scenarios" / "baseline.yaml").read_text())
    data.update(duration_ms=duration_ms, settle_ms=5_000)
    data.pop("limits", None)
    return scenario.from_data(data, "baseline, default limits")


def test_the_default_bound_is_the_scenario_default_and_small_enough_to_fire() -> None:
    assert baseline().limits.max_events_per_instant == BOUND == scenario.Limits().max_events_per_instant
    assert 10_000 <= BOUND <= 10_000_000, "a bound a livelock reaches in seconds, above any real instant"


def test_a_zero_delay_loop_stops_at_the_default_bound(monkeypatch) -> None:
    """A callback that reschedules itself with no delay, started by the first route request the
    name server answers: the run stops as a livelock at event BOUND + 1 of that instant."""
    original = NameServer.on_get_route
    started: list[int] = []
    calls = [0]

    def on_get_route(self, src, req_id, req):
        if not started:
            started.append(self.node.env.clock.now_us)

            def again() -> None:
                calls[0] += 1
                if calls[0] < GIVE_UP:
                    self.node.env.call_later(0, again)
            again()
        original(self, src, req_id, req)

    monkeypatch.setattr(NameServer, "on_get_route", on_get_route)
    s = rmqsim.run(baseline(), max_wall_s=120).summary
    assert (s["stopped_by"], s["verdict"]) == ("livelock", "unknown"), s["stopped_detail"]
    assert s["stopped_at_ms"] == started[0] // 1000
    assert (f"more than limits.max_events_per_instant ({BOUND:,}) events at simulated {started[0] / 1e6:.6f} s "
            "without the clock moving: stopped at event ") in s["stopped_detail"], s["stopped_detail"]
    # every event of the instant counts (the route request's delivery, the loop's): the bound fires at BOUND + 1
    event = int(s["stopped_detail"].split("stopped at event ")[1].split(" ")[0].replace(",", ""))
    assert event == BOUND + 1, s["stopped_detail"]
    assert s["livelock_owner"] in ("tests/test_livelock_default.py:again",
                                   "tests/test_livelock_default.py:again (namesrv)"), s["livelock_owner"]
    assert s["failures"] == ["run stopped as a livelock: nothing can be judged"]


def loop_env() -> tuple[SimEnv, list[int]]:
    """A SimEnv with the scenario's default bound and a zero-delay loop due at 1,000 µs."""
    env = SimEnv()
    env.max_events_per_instant = scenario.Limits().max_events_per_instant
    ran = [0]

    def again() -> None:
        ran[0] += 1
        if ran[0] < GIVE_UP:
            env.call_later(0, again)

    env.call_later(1_000, again)
    return env, ran


def test_the_run_loop_raises_at_event_bound_plus_one_unprocessed() -> None:
    env, ran = loop_env()
    try:
        env.run(until=5_000)
    except InstantLivelock as exc:
        assert (exc.instant_us, exc.events, exc.limit) == (1_000, BOUND + 1, BOUND)
    else:
        raise AssertionError("the default bound never fired")
    assert ran[0] == BOUND and env.clock.now_us == 1_000
    assert env._queue[0][0] == 1_000, "the event beyond the bound waits on the heap"


def test_the_counted_loop_raises_at_the_same_event() -> None:
    """`run(max_events=...)`, the runner's path near its event bound, counts the same instant."""
    env, ran = loop_env()
    assert env.run(until=5_000, max_events=BOUND // 2)  # stopped by max_events, mid-instant
    assert ran[0] == BOUND // 2
    try:
        env.run(until=5_000, max_events=BOUND)
    except InstantLivelock as exc:
        assert (exc.instant_us, exc.events, exc.limit) == (1_000, BOUND + 1, BOUND)
    else:
        raise AssertionError("the default bound never fired on the counted path")
    assert ran[0] == BOUND


def test_exactly_the_bound_at_one_instant_is_not_a_livelock() -> None:
    env = SimEnv()
    env.max_events_per_instant = scenario.Limits().max_events_per_instant
    ran = [0]

    def tick() -> None:
        ran[0] += 1
        if ran[0] < BOUND:
            env.call_later(0, tick)

    env.call_later(1_000, tick)
    env.call_later(2_000, lambda: None)
    env.run(until=3_000)
    assert ran[0] == BOUND and env.clock.now_us == 3_000
