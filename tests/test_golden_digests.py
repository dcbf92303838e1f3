"""Golden trace digests (issue 25): a behaviour change that keeps every invariant still changes the
trace digest of some short bundled run, and fails here with a message saying so.

The runs, their digests and the one command that regenerates them are in
tests/data/golden_digests.json (scripts/golden_digests.py). Regenerate only when the change is
intended, and state it in the commit message. Digests do not depend on PYTHONHASHSEED or on the
compiled modules (tests/test_determinism.py, tests/test_compiled.py), so this holds on any machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, golden_script
from tests.test_bundled_scenarios_exit import BUNDLED, SLOW, compared_by_the_bundle

golden_digests = golden_script()


@pytest.fixture(scope="module")
def golden() -> dict:
    return golden_digests.read_golden()


def test_the_golden_file_records_the_scripts_runs_and_its_command(golden) -> None:
    assert golden["regenerate"] == golden_digests.COMMAND == ".venv/bin/python scripts/golden_digests.py --write"
    recorded = [golden_digests.run_key(r) for r in golden["runs"]]
    assert recorded == [golden_digests.run_key(r) for r in golden_digests.RUNS], \
        f"tests/data/golden_digests.json lists other runs than scripts/golden_digests.py: run {golden_digests.COMMAND}"
    assert len(recorded) == len(set(recorded)) >= 5
    for run in golden["runs"]:
        assert re.fullmatch(r"[0-9a-f]{64}", run["trace_sha256"]), run["id"]
        assert (ROOT / run["scenario"]).is_file(), run["scenario"]
    for run_id in compared_by_the_bundle():  # each compared in CI there: a bundled run, not slow, no --set
        (run,) = [r for r in golden["runs"] if r["id"] == run_id]
        assert ROOT / run["scenario"] in BUNDLED and not run["overrides"] and Path(run["scenario"]).stem not in SLOW


def test_golden_runs_have_the_recorded_trace_digests(golden) -> None:
    """Every golden run but those tests/test_bundled_scenarios_exit.py makes in CI anyway (a bundled
    scenario at its own seed, without overrides): their digests are compared there, from that run's
    summary, with the same message (the run is made once)."""
    here = {**golden, "runs": [run for run in golden["runs"] if run["id"] not in compared_by_the_bundle()]}
    assert here["runs"], "every golden run compared by tests/test_bundled_scenarios_exit.py"
    now = {run["id"]: golden_digests.compute(run) for run in here["runs"]}
    lines = golden_digests.differences(here, now)
    if lines:
        pytest.fail(golden_digests.failure_message(golden, lines, golden_digests.simulator_sha256()), pytrace=False)


def test_the_failure_message_says_behaviour_changed_which_runs_and_how_to_regenerate(golden) -> None:
    run = golden["runs"][0]
    now = {r["id"]: {k: r[k] for k in ("trace_sha256", "records", "sent_ok", "lost", "duplicates", "verdict")}
           for r in golden["runs"]}
    assert golden_digests.differences(golden, now) == []
    now[run["id"]] = now[run["id"]] | {"trace_sha256": "0" * 64, "lost": run["lost"] + 1}
    lines = golden_digests.differences(golden, now)
    assert len(lines) == 1 and run["id"] in lines[0] and f"lost {run['lost']} -> {run['lost'] + 1}" in lines[0]
    assert f"--seed {run['seed']}" in lines[0]
    message = golden_digests.failure_message(golden, lines, "f" * 64)
    assert message.startswith("BEHAVIOUR CHANGED")
    assert golden_digests.COMMAND in message and "commit message" in message
