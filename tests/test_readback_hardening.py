"""Issue 37: a run or sweep directory read back is hostile input. explain, diff, `rmqsim.load`, report
and sweep resume read its JSON through one reader (sim/readback.py: bounded depth, a
declared shape per file), so a damaged file is exit 2 (or `ExplainError`) naming the file, the key
path and the reason, never a traceback; message ids are parsed by one bounded function; a replay
is bounded like a run (exit 3); a sweep's `base` path is never opened.

Every hostile directory is a damaged copy of one short run (`good`) or one fabricated sweep."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rmqsim
from analysis.explain.source import ExplainError
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps.spec import load_sweep
from rmqsim import cli
from rmqsim.scenario.spec import from_data
from tests.analysis.test_sweep_report import fabricated_sweep
from tests.conftest import ROOT

# a 5 s run with a 1 s pause of consumer c-1 at 3.5 s: messages, and one fault in `faults_applied`
RUN = [str(ROOT / "scenarios" / "pause_consumer.yaml"), "--seed", "1", "--set", "duration_ms=5s", "--set",
       "settle_ms=1s", "--set", "faults[0].at_ms=3500", "--set", "faults[0].duration_ms=1s"]
DEEP = "[" * 200_000 + "]" * 200_000


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("readback") / "run"
    assert cli.main(["run", *RUN, "--out", str(out)]) in (0, 1)
    return out


def damaged(good: Path, folder: Path, name: str, edit: Callable[[Any], Any] | str) -> Path:
    """A copy of the good run whose file `name` is edited (a function of its JSON) or replaced (text)."""
    run = folder / "damaged"
    shutil.copytree(good, run)
    path = run / name
    if isinstance(edit, str):
        path.write_text(edit)
    else:
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    return run


def explain(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    code = cli.main(["explain", *argv])
    err = capsys.readouterr().err
    return code, err


def one_line(err: str, command: str) -> None:
    assert err.startswith(f"rmqsim {command}: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def without(key: str) -> Callable[[dict], dict]:
    return lambda data: {k: v for k, v in data.items() if k != key}


# file, edit, what the one line says (after the file's path)
DAMAGES = {
    "meta_digest_int": ("run_meta.json", lambda m: m | {"simulator_sha256": 5},
                        "run_meta.json: simulator_sha256: expected a string of 64 hex digits, got 5"),
    "meta_list": ("run_meta.json", lambda m: [], "run_meta.json: (top level): expected an object, got a list"),
    "trace_digest_int": ("summary.json", lambda s: s | {"trace_sha256": 5},
                         "summary.json: trace_sha256: expected a string of 64 hex digits, got 5"),
    "seed_text": ("summary.json", lambda s: s | {"seed": "abc"},
                  "summary.json: seed: expected an integer from 0 to 9223372036854775807, got 'abc'"),
    "older_summary": ("summary.json", without("sim_time_ms"),
                      "summary.json: written by an older rmqsim (no sim_time_ms): re-run it"),
    "deep_summary": ("summary.json", DEEP,
                     "summary.json is damaged (not the JSON rmqsim writes): nested deeper than 64 levels"),
    "deep_meta": ("run_meta.json", DEEP, "run_meta.json is damaged (not the JSON rmqsim writes): nested deeper"),
    "deep_scenario": ("scenario.resolved.json", DEEP,
                      "scenario.resolved.json is damaged (not the JSON rmqsim writes): nested deeper"),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_explain_refuses_a_damaged_file_naming_file_and_key(good: Path, tmp_path: Path, capsys, case: str) -> None:
    name, edit, says = DAMAGES[case]
    run = damaged(good, tmp_path, name, edit)
    code, err = explain(capsys, str(run), "p-1-5")
    assert code == 2, err
    one_line(err, "explain")
    assert f"{run}/{says}" in err


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_load_raises_its_documented_error(good: Path, tmp_path: Path, case: str) -> None:
    name, edit, says = DAMAGES[case]
    run = damaged(good, tmp_path, name, edit)
    with pytest.raises(ExplainError) as caught:
        repr(rmqsim.load(run))
    assert says in str(caught.value)


@pytest.mark.parametrize("edit, says", [
    (lambda s: s | {"faults_applied": [without("end_ms")(s["faults_applied"][0])]},
     "summary.json: faults_applied[0].end_ms: missing"),
    (lambda s: s | {"faults_applied": [s["faults_applied"][0] | {"start_ms": "x"}]},
     "summary.json: faults_applied[0].start_ms: expected a number of milliseconds from 0 to"),
    (without("groups"), "summary.json: written by an older rmqsim (no groups): re-run it"),
], ids=["no_end", "start_text", "no_groups"])
def test_explain_fault_refuses_a_malformed_faults_applied(good: Path, tmp_path: Path, capsys, edit, says) -> None:
    run = damaged(good, tmp_path, "summary.json", edit)
    code, err = explain(capsys, str(run), "--fault", "0")
    assert code == 2, err
    one_line(err, "explain")
    assert f"{run}/{says}" in err


def test_large_files_are_scanned_for_depth_without_recursion(good: Path, tmp_path: Path) -> None:
    """Brackets inside strings do not count; a large summary (its depth counted with NumPy) reads
    when shallow and is refused when deep, whatever its size."""
    shallow = damaged(good, tmp_path / "a", "summary.json",
                      lambda s: s | {"note": "[" * 5_000, "pad": [[i] for i in range(100_000)]})
    assert repr(rmqsim.load(shallow)).startswith("<RunResult pause_consumer seed=1 ")
    deep = damaged(good, tmp_path / "b", "summary.json", lambda s: s | {"pad": [[i] for i in range(100_000)]})
    text = (deep / "summary.json").read_text()
    (deep / "summary.json").write_text(text[:-1] + ', "deep": ' + "[" * 65 + "]" * 65 + "}")
    with pytest.raises(ExplainError, match="nested deeper than 64 levels"):
        rmqsim.load(deep)


@pytest.mark.parametrize("msg, says", [
    ("²", "'²' is not a message of this run"),
    ("p-1-²", "'p-1-²' is not a message of this run"),
    ("9" * 5_000, "is not a message of this run: longer than any display key or id (200 characters)"),
    ("p-1-99999999999999999999999", "'p-1-99999999999999999999999' was never sent in this run"),
    ("4294967296000", "'4294967296000' was never sent in this run"),
], ids=["superscript", "key_superscript", "5000_digits", "huge_seq", "no_such_producer"])
def test_odd_message_ids_are_refused(good: Path, capsys, msg: str, says: str) -> None:
    code, err = explain(capsys, str(good), msg)
    assert code == 2, err
    one_line(err, "explain")
    assert says in err


def test_load_explain_refuses_an_odd_id(good: Path) -> None:
    with pytest.raises(ExplainError, match="is not a message of this run"):
        rmqsim.load(good).explain("p-2-²")


def edited_into_a_day(good: Path, folder: Path, sim_time: bool) -> Path:
    """The run's resolved scenario edited into a 1-day, 100,000 msg/s run, its digest updated in
    summary.json (and, with `sim_time`, the end of the run too): only run_meta.json still says
    what the run took."""
    run = folder / "edited"
    shutil.copytree(good, run)
    data = json.loads((run / "scenario.resolved.json").read_text())
    data["duration_ms"] = 86_400_000.0
    data["producers"][0]["rate_per_s"] = 100_000.0
    data["limits"]["max_rate_per_s"] = 100_000.0
    scenario = from_data(json.loads(json.dumps(data)))
    (run / "scenario.resolved.json").write_text(json.dumps(data))
    summary = json.loads((run / "summary.json").read_text()) | {"scenario_sha256": scenario.digest()}
    if sim_time:
        summary["sim_time_ms"] = int(scenario.duration_ms + scenario.settle_max_ms)
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def explain_process(run: Path, timeout_s: float) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "rmqsim.cli", "explain", str(run), "p-1-5"], capture_output=True,
                            text=True, timeout=timeout_s, cwd=ROOT)
    return result, time.perf_counter() - started


def test_a_scenario_that_does_not_end_where_the_run_ended_is_refused(good: Path, tmp_path: Path) -> None:
    result, _wall_s = explain_process(edited_into_a_day(good, tmp_path, sim_time=False), 60)
    assert result.returncode == 2, result.stderr
    one_line(result.stderr, "explain")
    assert "scenario.resolved.json runs 86,400,000 ms" in result.stderr
    assert "they are not the files of one run" in result.stderr


def test_a_replay_is_bounded_by_what_the_run_took(good: Path, tmp_path: Path) -> None:
    result, wall_s = explain_process(edited_into_a_day(good, tmp_path, sim_time=True), 90)
    assert result.returncode == 3, result.stderr
    one_line(result.stderr, "explain")
    assert "the replay of this run stopped at a bound (max_events" in result.stderr
    assert wall_s < 60


def test_a_replay_needs_the_bounds_in_run_meta(good: Path, tmp_path: Path, capsys) -> None:
    run = tmp_path / "no-meta"
    shutil.copytree(good, run)
    (run / "run_meta.json").unlink()
    code, err = explain(capsys, str(run), "p-1-5")
    assert code == 2, err
    one_line(err, "explain")
    assert f"{run}/run_meta.json has no simulator_sha256, wall_s, events" in err


def _link_trace(run: Path) -> None:
    (run / "trace").symlink_to(run.parent)


def _report_manifest(run: Path) -> None:
    manifest = json.loads((run / ".rmqsim-manifest.json").read_text())
    (run / ".rmqsim-manifest.json").write_text(json.dumps(manifest | {"tool": "rmqsim report"}))


@pytest.mark.parametrize("make, says", [
    (_link_trace, "trace is a symbolic link; explain reads only the trace folder rmqsim wrote"),
    (_report_manifest, "manifest is not a run's ('rmqsim report'); not reading it as a run"),
], ids=["trace_link", "report_manifest"])
def test_explain_reads_only_what_the_run_wrote(good: Path, tmp_path: Path, capsys, make, says: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(good, run)
    make(run)
    code, err = explain(capsys, str(run), "p-1-5")
    assert code == 2, err
    one_line(err, "explain")
    assert f"{run}" in err and says in err


# ---------------------------------------------------------------- diff, report, sweep resume

def diff(capsys: pytest.CaptureFixture, a: str, b: str) -> tuple[int, str, str]:
    code = cli.main(["diff", a, b])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_diff_refuses_a_deep_summary(good: Path, tmp_path: Path, capsys) -> None:
    run = damaged(good, tmp_path, "summary.json", DEEP)
    code, out, err = diff(capsys, str(good), str(run))
    assert code == 2 and out == "", err
    one_line(err, "diff")
    assert f"{run}/summary.json is damaged (not the JSON rmqsim writes): nested deeper than 64 levels" in err


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A fabricated sweep whose sweep.json holds its base scenario, as this rmqsim's sweeps store it."""
    out = fabricated_sweep(tmp_path)
    manifest = json.loads((out / "sweep.json").read_text())
    manifest["base_scenario"] = load_sweep(tmp_path / "sweep.yaml").base_data
    (out / "sweep.json").write_text(json.dumps(manifest))
    return out


def test_diff_never_opens_the_sweeps_base(sweep: Path, tmp_path: Path, capsys) -> None:
    foreign = tmp_path / "foreign.yaml"  # a valid scenario, but not the sweep's base
    foreign.write_text((ROOT / "scenarios" / "baseline.yaml").read_text().replace("queues: 4", "queues: 8"))
    manifest = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps(manifest | {"base": str(foreign)}))
    code, out, err = diff(capsys, f"{sweep}:p0000-s1", f"{sweep}:p0003-s2")
    assert code == 0, err
    assert str(foreign) not in out + err
    assert "resolved scenarios differ in 2 key(s):" in out and "queues" not in out
    del manifest["base_scenario"]  # an older sweep: the keys are not listed, and the base is still not read
    (sweep / "sweep.json").write_text(json.dumps(manifest | {"base": str(foreign)}))
    code, out, err = diff(capsys, f"{sweep}:p0000-s1", f"{sweep}:p0003-s2")
    assert code == 0, err
    assert str(foreign) not in out + err and "holds no base scenario (written by an older rmqsim)" in out


def rewrite_row(sweep: Path, run_id: str, **changes: Any) -> Path:
    """The run's `runs` file rewritten with its scalar columns and `changes`, each with the Arrow
    type of its value: not rmqsim's schema."""
    path = sweep / "runs" / f"{run_id}.parquet"
    row = {k: v for k, v in pq.read_table(path).to_pylist()[0].items() if not isinstance(v, list)} | changes
    pq.write_table(pa.Table.from_pylist([row]), path)
    return path


@pytest.mark.parametrize("changes, says", [
    ({"status": "failed", "error": 5}, "error: expected a string or null, got 5"),
    ({"params_json": DEEP}, "params_json is damaged (not the JSON rmqsim writes): nested deeper than 64 levels"),
    ({"params_json": "5"}, "params_json: expected an object, got 5"),
], ids=["error_int", "params_deep", "params_number"])
def test_diff_refuses_a_row_of_another_shape(sweep: Path, good: Path, capsys, changes: dict, says: str) -> None:
    path = rewrite_row(sweep, "p0000-s1", **changes)
    code, out, err = diff(capsys, str(good), f"{sweep}:p0000-s1")
    assert code == 2 and out == "", err
    one_line(err, "diff")
    assert f"{path}: {says}" in err


@pytest.mark.parametrize("argv", [["report"], ["diff", "{run}", "{sweep}:p0000-s1"], ["sweep", "{yaml}", "--out"]],
                         ids=["report", "diff", "sweep_resume"])
def test_a_deep_sweep_manifest_is_refused(sweep: Path, good: Path, tmp_path: Path, capsys, argv: list[str]) -> None:
    (sweep / "sweep.json").write_text(DEEP)
    words = [w.format(run=good, sweep=sweep, yaml=tmp_path / "sweep.yaml") for w in argv]
    code = cli.main([*words, str(sweep)] if argv[0] != "diff" else words)
    err = capsys.readouterr().err
    assert code == 2, err
    one_line(err, argv[0])
    assert f"{sweep}/sweep.json is not a readable sweep manifest (damaged JSON): nested deeper than 64 levels" in err


def test_resume_redoes_a_run_whose_row_is_of_another_shape(sweep: Path) -> None:
    rewrite_row(sweep, "p0000-s2", output_files=[1, 2])
    log: list[str] = []

    class Log:
        def write(self, text: str) -> None:
            log.append(text)

    digest = json.loads((sweep / "sweep.json").read_text())["digest"]
    status = sweep_dir.completed(sweep, digest, None, Log())
    assert "p0000-s2" not in status and len(status) == 11
    assert "p0000-s2.parquet: unreadable or not a run of this sweep" in "".join(log)
