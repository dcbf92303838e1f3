"""Every bundled scenario exits 0 under `rmqsim run`, at its own seed: its expectations hold,
failures included (a scenario that exists to show a loss says in `expect.guarantees` that the
guarantee breaks, and it does). The scenarios under scenarios/sweeps/ are sweep files, not
scenarios. Each run goes through `rmqsim.cli.main`, in-process, exactly as `rmqsim run FILE`
(all of them: about 90 s on a shared 2-core machine; the six that take over 4 s each, `SLOW`, run
with `scripts/test.sh --slow`, and each is also run by its own story tests). Each also reports
no loss of cause `other` (every loss has its mechanism) and has its availability section
(analysis/checkers/availability.py). A run here that is also a golden run (tests/data/golden_digests.json:
the scenario at its own seed, no overrides) has its trace digest compared with the recorded one too,
instead of tests/test_golden_digests.py making the same run again."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from rmqsim import cli
from rmqsim.scenario import spec as scenario_spec
from tests.conftest import ROOT, golden_script

BUNDLED = sorted((ROOT / "scenarios").glob("*.yaml"))
# over 4 s each on 2 cores (issue 41: the suite in CI); scripts/test.sh --slow runs them
SLOW = {"failover_stale_slave_offsets", "consumer_joins_busy_group", "baseline", "broker_busy",
        "power_loss_sync_master", "consume_failures_dlq"}


@functools.cache
def compared_by_the_bundle() -> dict[str, dict]:
    """The golden runs (tests/data/golden_digests.json) that are exactly a run made here in CI — a
    bundled scenario not in SLOW, at its own seed, without overrides — by id: their digests are
    compared here, from the run's summary.json (the CLI streams the same records), and
    tests/test_golden_digests.py compares the others, so each run is made once."""
    found = {}
    for run in golden_script().read_golden()["runs"]:
        path = ROOT / run["scenario"]
        if path in BUNDLED and path.stem not in SLOW and not run["overrides"] \
                and run["seed"] == scenario_spec.load(path).seed:
            found[run["id"]] = run
    return found


def _assert_golden_digest(path: Path, summary: dict) -> None:
    """This run's digest and counts are the golden run's, if it is one (compared_by_the_bundle)."""
    golden_digests = golden_script()
    runs = [run for run in compared_by_the_bundle().values() if ROOT / run["scenario"] == path]
    if not runs:
        return
    golden = golden_digests.read_golden()
    now = {run["id"]: {k: summary[k] for k in ("trace_sha256", "records", "sent_ok", "lost", "duplicates", "verdict")}
           for run in runs}
    lines = golden_digests.differences({**golden, "runs": runs}, now)
    if lines:
        pytest.fail(golden_digests.failure_message(golden, lines, golden_digests.simulator_sha256()), pytrace=False)


def test_the_bundle_is_found() -> None:
    assert len(BUNDLED) >= 30 and all(p.parent.name == "scenarios" for p in BUNDLED)


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in BUNDLED],
                         ids=[p.stem for p in BUNDLED])
def test_bundled_scenario_exits_0(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = cli.main(["run", str(path), "--out", str(tmp_path / "run")])
    out = capsys.readouterr()
    summary_path = tmp_path / "run" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    if summary:  # a golden run made here: a changed digest says the behaviour changed (tests/test_golden_digests.py)
        _assert_golden_digest(path, summary)
    if code == 0:
        assert summary["lost_by_cause"]["other"] == 0, summary["lost_sample"]
        a = summary["availability"]
        assert a is not None and a["acked_ratio"] is not None and len(a["faults"]) == len(summary["faults_applied"])
        return
    pytest.fail(f"rmqsim run scenarios/{path.name} exited {code} (verdict {summary.get('verdict')}):\n  "
                + "\n  ".join(summary.get("failures") or [out.err.strip()]))
