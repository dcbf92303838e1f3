"""The lint's view of a node after a graceful shutdown is the simulator's (rmqsim/scenario/useless_parts.py
`restarts_of_up_nodes`, `Timeline`; sim/faults.py): a `shutdown` fault or `stop_ms` leaves a client
process down until a `restart` relaunches it (the end of the fault phase does not), so a restart
after a shutdown does something and a shutdown after that restart does too. Each lint case is
checked against a run of the same file: the run shows the restart and the second shutdown took
effect (`node.restarted`, a second `consumer.shutdown`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rmqsim
from rmqsim.scenario import spec as scenario
from rmqsim.scenario.lint import lint

FLOW = "duration_ms: 40s\nsettle_ms: 5s\nproducers: [{name: p}]\nconsumers: [{name: c}]\n"
SHUT_RESTART_SHUT = ("faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: restart, node: c}\n"
                     "  - {at_ms: 30s, kind: shutdown, node: c}\n")


def _ids(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return [(f.id, f.path) for f in lint(scenario.load(path))]


def test_a_restart_after_a_shutdown_and_a_second_shutdown_are_not_flagged(tmp_path: Path) -> None:
    found = _ids(tmp_path, FLOW + SHUT_RESTART_SHUT)
    assert ("restart-of-up-node", "faults[1]") not in found
    assert ("fault-on-down-node", "faults[2].node") not in found


def test_the_run_shows_both_took_effect(tmp_path: Path) -> None:
    """What the lint now says is what the simulator does: restarted at 20 s, shut down again at 30 s."""
    path = tmp_path / "s.yaml"
    path.write_text(FLOW + SHUT_RESTART_SHUT)
    r = rmqsim.run(path, keep_records=True)
    restarted = [x[0] for x in r.records if x[2] == "node.restarted" and x[1] == "c"]
    shutdowns = [x[0] for x in r.records if x[2] == "consumer.shutdown" and x[1] == "c"]
    assert 20_000_000 in restarted
    assert len(shutdowns) == 2 and 30_000_000 <= shutdowns[1] < 31_000_000


@pytest.mark.parametrize("faults, finding", [
    # a restart of a shut-down node that a restart already relaunched: it is up, the second restart does nothing
    ("faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: restart, node: c}\n"
     "  - {at_ms: 25s, kind: restart, node: c}\n", ("restart-of-up-node", "faults[2]")),
    # a second shutdown with no restart between: the node is down, it does nothing
    ("faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: shutdown, node: c}\n",
     ("fault-on-down-node", "faults[1].node")),
    # a crash of a shut-down node (not restarted): nothing to crash
    ("faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: process_crash, node: c}\n",
     ("fault-on-down-node", "faults[1].node")),
])
def test_what_a_shutdown_leaves_down_is_still_flagged(tmp_path: Path, faults: str, finding: tuple) -> None:
    assert finding in _ids(tmp_path, FLOW + faults)


def test_stop_ms_is_a_shutdown_a_restart_ends(tmp_path: Path) -> None:
    """`stop_ms` is the same graceful shutdown: a restart after it relaunches the process, and a
    pause after that restart hits a running process."""
    text = ("duration_ms: 40s\nsettle_ms: 5s\nproducers: [{name: p}]\nconsumers: [{name: c, stop_ms: 10s}]\n"
            "faults:\n  - {at_ms: 20s, kind: restart, node: c}\n  - {at_ms: 25s, kind: pause, node: c, duration_ms: 1s}\n")
    found = _ids(tmp_path, text)
    assert ("restart-of-up-node", "faults[0]") not in found
    assert ("fault-on-down-node", "faults[1].node") not in found
    # without the restart the pause hits a stopped process
    assert ("fault-on-down-node", "faults[0].node") in _ids(tmp_path, text.replace(
        "  - {at_ms: 20s, kind: restart, node: c}\n", ""))


def test_the_shutdown_outage_names_its_restart(tmp_path: Path) -> None:
    text = FLOW + ("faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: restart, node: c}\n"
                   "  - {at_ms: 15s, kind: pause, node: c, duration_ms: 1s}\n")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    messages = [f.message for f in lint(scenario.load(path)) if f.id == "fault-on-down-node"]
    assert messages and "restarted at 20 s" in messages[0]
    # with no restart the process stays down for good: the end of the fault phase does not relaunch it
    path.write_text(text.replace("  - {at_ms: 20s, kind: restart, node: c}\n", ""))
    messages = [f.message for f in lint(scenario.load(path)) if f.id == "fault-on-down-node"]
    assert messages and "restarted" not in messages[0]


@pytest.mark.parametrize("pop", ["{client: simple}", "{client: push}"])
def test_a_pop_consumer_restarted_after_a_shutdown_consumes_again(tmp_path: Path, pop: str) -> None:
    """The restart the lint no longer flags relaunches a POP consumer too: it receives again."""
    path = tmp_path / "s.yaml"
    path.write_text(f"duration_ms: 30s\nsettle_ms: 5s\nproducers: [{{name: p}}]\nconsumers: [{{name: c, pop: {pop}}}]\n"
                    "faults:\n  - {at_ms: 10s, kind: shutdown, node: c}\n  - {at_ms: 20s, kind: restart, node: c}\n")
    r = rmqsim.run(path, keep_records=True)
    assert any(x[2] == "consumer.consumed" and x[1] == "c" and x[0] > 21_000_000 for x in r.records)
