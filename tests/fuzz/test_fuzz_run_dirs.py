"""Fuzz: damaged copies of a good run directory (and of a sweep) are read back cleanly.

Every case copies one good short run (`good`, written once per module with `--trace`: a 5 s run
of scenarios/pause_consumer.yaml with one fault) and damages one file it holds
(tests/fuzz/run_dir_mutations.py): a JSON file's value at a drawn key path replaced by another
type, a key deleted, the file cut at a drawn byte (hypothesis, `budget`), or the whole file
replaced by 100,000 `[`, bytes that are not UTF-8, an empty file, a link to /etc/passwd or
/dev/zero, a FIFO or a folder; a trace file cut, garbage, an 8 GiB sparse file, another kind's
file, a kind rmqsim does not write, a link, a FIFO or a folder named `x.parquet` (with the run's
manifest and without it: without one, pyarrow's own errors are what is left to catch).

Then `rmqsim explain RUN p-1-5`, `explain RUN --fault 0`, `diff RUN GOOD`, `report RUN --out
TMP` and `rmqsim.load(RUN)` (`repr`, `.summary`, `.frame`, `.explain`) run, in this process, and:
- each CLI command exits 0 (the damage was harmless to it), 2 or 3, never 1, and prints no
  traceback; at exit 2 its message names the run directory (the damaged file's path is in it);
- `rmqsim.load` and its methods succeed or raise a documented class (`ExplainError` and its
  `ReplayStopped`, `TraceError`, `FrameError`: rmqsim/__init__.py `load`, `RunResult.frame`),
  naming the directory (but `FrameError`, "this run kept no records", for a run without a trace);
- a command that reads the damaged file refuses it (`READERS`) when the file is no JSON at all,
  nested past the depth bound, or not a regular file; a damaged trace is refused by explain and
  `rmqsim.load` always, and by the report when the run's manifest says what the trace was;
- each ends within `COMMAND_SECONDS_MAX`; nothing outside the case's folder is written (the good
  run and /etc/passwd unchanged, the working directory left empty), and nothing of /etc/passwd
  is echoed.
A FIFO or a link to /dev/zero would block or flood a reader that followed it, so those cases run
in one subprocess (`python -m tests.fuzz.run_dir_mutations`) with a timeout and an address-space
bound. A sweep directory (fabricated, no Spark: tests/analysis/test_sweep_report.py) is damaged
the same way for `rmqsim diff GOOD SWEEP:p0000-s1`; the sweep report (Spark, ~10 s to start) is
not run here.

Budget: about 30 s on two cores (most of it the drawn JSON edits and the driver subprocess). The
per-run report draws 13 figures (~3 s) whenever it accepts a directory, so it runs only where it
must refuse, in milliseconds: a JSON file it reads that no longer has the manifest's SHA-256, a
damaged trace, and summaries forged past the manifest (its entry rewritten to match) whose field
the report reads has another JSON type (the report's own type checks); not on run_meta.json (the
report does not read it), nor on an extra trace file without a manifest (the report reads only
the kinds it draws, so it renders: by design).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rmqsim import cli
from tests.conftest import ROOT
from tests.fuzz.conftest import budget, record
from tests.fuzz.mutations import get
from tests.fuzz.properties import assert_no_foreign_content
from tests.fuzz.run_dir_mutations import (
    HAZARDOUS,
    JSON_FILES,
    MANIFEST,
    TOKENS,
    TRACE_DAMAGES,
    WHOLE_FILE,
    Outcome,
    cli_outcome,
    damage_trace,
    edit_json,
    fresh_copy,
    json_type,
    key_paths,
    outcomes,
    replace_whole,
    token_type,
)

RUN = [str(ROOT / "scenarios" / "pause_consumer.yaml"), "--seed", "1", "--set", "duration_ms=5s", "--set",
       "settle_ms=1s", "--set", "warmup_ms=1s", "--set", "faults[0].at_ms=3500", "--set", "faults[0].duration_ms=1s"]
COMMAND_SECONDS_MAX = 20.0
SUBPROCESS_TIMEOUT_S = 120
ADDRESS_SPACE_BYTES = 6 * 2**30  # as tests/fuzz/test_fuzz_cli.py: pyarrow maps much; a flood of /dev/zero would not fit
DOCUMENTED = ("", "ExplainError", "ReplayStopped", "TraceError", "FrameError")
READERS = {  # which commands read each file, so must refuse it when it is unreadable
    "summary.json": {"explain", "diff", "report", "load"},
    "scenario.resolved.json": {"explain", "diff", "report", "load"},
    "run_meta.json": {"explain", "load"},
    MANIFEST: {"explain", "report", "load"},
}
REPORT_SKIPS = {"run_meta.json"}  # not read by the report: it would render (~3 s) to no purpose
EXTRA_TRACE_FILES = ("unknown_kind", "directory")  # files the report does not read (no manifest: it renders)
# summary.json fields the report type-checks (analysis/reports/run_data.py `_SUMMARY`, `_SUMMARY_OPTIONAL`)
REPORT_FIELDS = ("verdict", "scenario", "seed", "scenario_sha256", "trace_sha256", "records", "sim_time_ms", "sent_ok",
                 "send_failed", "consumed", "lost", "pending_retry", "dlq", "duplicates", "order_violations",
                 "latency_ms", "failures", "warmup_ms", "send_latency_ms", "duplicate_causes", "lost_by_cause", "txn")
SWEEP_POINT = "p0000-s1"
# an edit is one change already: shrinking it (hundreds of runs of five commands) would only delay the report
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
PASSWD = Path("/etc/passwd")


# ------------------------------------------------------------------ fixtures

def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under `folder` by lstat (kind, size, mtime, inode): a write or a removal shows."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st_ = path.lstat()
            seen[str(path.relative_to(folder))] = (st_.st_mode, st_.st_size, st_.st_mtime_ns, st_.st_ino)
    return seen


def _passwd() -> tuple[str, str]:
    try:
        text = PASSWD.read_text(errors="replace")
    except OSError:
        return "", ""
    return text, hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    """An empty working directory for the whole module: nothing may appear in it."""
    folder = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield folder


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> Path:
    out = tmp_path_factory.mktemp("good") / "run"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["run", *RUN, "--trace", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def untouched(good: Path, workdir: Path):
    """A check that nothing outside a case's folder was written: call it after each case."""
    before, passwd = snapshot(good), _passwd()[1]

    def check(note: str) -> None:
        assert snapshot(good) == before, f"{note}: the good run directory changed"
        assert _passwd()[1] == passwd, f"{note}: /etc/passwd changed"
        assert not os.listdir(workdir), f"{note}: written in the working directory: {os.listdir(workdir)}"

    return check


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.analysis.test_sweep_report import fabricated_sweep

    return fabricated_sweep(tmp_path_factory.mktemp("sweep"))


# ------------------------------------------------------------------ the properties

def assert_clean(outcome: Outcome, run: Path, note: str, refuse: bool) -> str:
    """The module docstring's properties for one command's outcome; returns its short form."""
    where = f"{note}: {outcome.command}"
    name = outcome.command.split()[0]
    assert outcome.elapsed_s < COMMAND_SECONDS_MAX, f"{where}: {outcome.elapsed_s:.1f} s"
    assert "Traceback" not in outcome.output and outcome.error != "Traceback", f"{where}:\n{outcome.output[-3000:]}"
    assert_no_foreign_content(outcome.output, _passwd()[0])
    if outcome.code is not None:
        assert outcome.code in (0, 2, 3), f"{where}: exit {outcome.code}\n{outcome.output[-3000:]}"
        assert not (refuse and outcome.code == 0), f"{where}: exit 0 on a file it reads\n{outcome.output[-1500:]}"
        if outcome.code == 2:
            assert str(run) in outcome.output, f"{where}: the message names neither file nor run: {outcome.output}"
        return f"{name}:{outcome.code}"
    assert outcome.error in DOCUMENTED, f"{where}: {outcome.error}: {outcome.output[-3000:]}"
    assert not (refuse and not outcome.error), f"{where}: answered on a file it reads"
    if outcome.error and outcome.error != "FrameError":  # FrameError: "this run kept no records" (no trace)
        assert str(run) in outcome.output, f"{where}: the message names neither file nor run: {outcome.output}"
    return f"load:{outcome.error or 'ok'}"


def check_all(found: list[Outcome], run: Path, note: str, refusers: set[str]) -> str:
    assert [o.command.split()[0] for o in found][-1] == "load", note
    return " ".join(assert_clean(o, run, note, o.command.split()[0] in refusers) for o in found)


def unreadable(raw: bytes) -> bool:
    """No JSON as Python reads it, or nested past the readers' depth bound (64)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return True
    return _depth(doc) > 64


def _depth(doc: Any) -> int:
    if isinstance(doc, dict):
        return 1 + max(map(_depth, doc.values()), default=0)
    if isinstance(doc, list):
        return 1 + max(map(_depth, doc), default=0)
    return 0


@st.composite
def json_edits(draw: Any, paths: list[tuple], size_bytes: int) -> tuple:
    """A value replaced by a raw token (most often), a key deleted, or the file cut."""
    how = draw(st.sampled_from(("token", "token", "token", "delete", "truncate")))
    if how == "truncate":
        return ("truncate", draw(st.integers(0, size_bytes - 1)))
    if how == "delete":
        return ("delete", draw(st.sampled_from([p for p in paths if p])))
    return ("token", draw(st.sampled_from(paths)), draw(st.sampled_from(TOKENS)))


def _docs(good: Path) -> dict[str, tuple[list[tuple], int]]:
    return {name: (key_paths(json.loads((good / name).read_text())), (good / name).stat().st_size)
            for name in JSON_FILES}


def _forge_manifest(run: Path, name: str) -> None:
    """Rewrite the run manifest's entry of `name` to match the edited file (a consistent forgery)."""
    manifest = json.loads((run / MANIFEST).read_text())
    raw = (run / name).read_bytes()
    manifest["files"][name] = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    (run / MANIFEST).write_text(json.dumps(manifest, indent=1))


# ------------------------------------------------------------------ run directories, in this process

def test_the_good_run_answers_every_command(good, tmp_path, untouched):
    """The baseline of every property: the undamaged copy is answered (exit 0) by every command."""
    run = fresh_copy(good, tmp_path)
    found = outcomes(run, good, tmp_path / "scratch", report=False)
    assert [(o.command.split()[0], o.code, o.error) for o in found] == \
        [("explain", 0, ""), ("explain", 0, ""), ("diff", 0, ""), ("load", None, "")], found
    assert "verdict (billing): delivered" in found[0].output and "fault 0" in found[1].output
    untouched("good run")


@pytest.mark.parametrize("how", [h for h in WHOLE_FILE if h not in HAZARDOUS])
@pytest.mark.parametrize("name", JSON_FILES)
def test_a_json_file_replaced_is_refused(good, tmp_path, untouched, name, how):
    run = fresh_copy(good, tmp_path)
    replace_whole(run / name, how)
    before = snapshot(run)
    found = outcomes(run, good, tmp_path / "scratch", report=name not in REPORT_SKIPS)
    record(f"run-dir:{name}", how, check_all(found, run, f"{name} {how}", READERS[name]))
    assert snapshot(run) == before, f"{name} {how}: the damaged run directory changed"
    untouched(f"{name} {how}")


@pytest.mark.parametrize("manifest", ["manifest", "no manifest"])
@pytest.mark.parametrize("how", [h for h in TRACE_DAMAGES if h not in HAZARDOUS])
def test_a_damaged_trace_is_refused(good, tmp_path, untouched, how, manifest):
    run = fresh_copy(good, tmp_path)
    damage_trace(run, how)
    if manifest == "no manifest":
        (run / MANIFEST).unlink()
    report = manifest == "manifest" or how not in EXTRA_TRACE_FILES
    before = snapshot(run)
    found = outcomes(run, good, tmp_path / "scratch", report=report)
    record(f"run-dir:trace ({manifest})", how, check_all(found, run, f"trace {how} ({manifest})",
                                                         {"explain", "report", "load"}))
    assert snapshot(run) == before, f"trace {how}: the damaged run directory changed"
    untouched(f"trace {how}")


@pytest.mark.parametrize("how", ["link", "file", "empty"])
def test_a_damaged_trace_folder_is_refused_or_replayed(good, tmp_path, untouched, how):
    """The trace folder a link to the good run's, a file, or emptied (then explain replays the run,
    within its bounds: exit 0, or 3 at a bound)."""
    run = fresh_copy(good, tmp_path)
    shutil.rmtree(run / "trace")
    if how == "link":
        (run / "trace").symlink_to(good / "trace", target_is_directory=True)
    elif how == "file":
        (run / "trace").write_bytes(b"PAR1")
    else:
        (run / "trace").mkdir()
    found = outcomes(run, good, tmp_path / "scratch")
    refusers = {"explain", "report", "load"} if how != "empty" else {"report"}
    record("run-dir:trace/", how, check_all(found, run, f"trace folder {how}", refusers))
    untouched(f"trace folder {how}")


@settings(budget(30), phases=NO_SHRINK)
@given(data=st.data())
def test_json_edits_end_cleanly(good, tmp_path_factory, untouched, data):
    """A drawn edit of one JSON file; the report refuses it by the manifest's SHA-256 (cheaply)."""
    docs = _docs(good)
    name = data.draw(st.sampled_from(JSON_FILES), label="file")
    edit = data.draw(json_edits(*docs[name]), label="edit")
    folder = tmp_path_factory.mktemp("edit", numbered=True)
    run = fresh_copy(good, folder)
    note = edit_json(run / name, edit)
    refusers = READERS[name] if unreadable((run / name).read_bytes()) else set()
    found = outcomes(run, good, folder / "scratch", report=name not in REPORT_SKIPS)
    record(f"run-dir:{name}", edit[0], check_all(found, run, note, refusers))
    untouched(note)


@settings(budget(12), phases=NO_SHRINK)
@given(data=st.data())
def test_a_forged_summary_of_another_type_is_refused_by_the_report(good, tmp_path_factory, untouched, data):
    """A summary field the report reads given a value of another JSON type (never null), and the
    manifest's entry rewritten to match: the report's own type checks (not the manifest's digest)
    refuse it, exit 2, before drawing anything."""
    summary = json.loads((good / "summary.json").read_text())
    fields = [p for p in key_paths(summary) if p and p[0] in REPORT_FIELDS and get(summary, p) is not None]
    key_path = data.draw(st.sampled_from(fields), label="key path")
    was = json_type(get(summary, key_path))
    token = data.draw(st.sampled_from([t for t in TOKENS if token_type(t) not in (was, "null")]), label="token")
    folder = tmp_path_factory.mktemp("forged", numbered=True)
    run = fresh_copy(good, folder)
    note = edit_json(run / "summary.json", ("token", key_path, token))
    _forge_manifest(run, "summary.json")
    outcome = cli_outcome(["report", str(run), "--out", str(folder / "report")])
    record("run-dir:summary.json (forged)", "token", assert_clean(outcome, run, f"forged {note}", refuse=True))
    untouched(note)


# ------------------------------------------------------------------ FIFOs and /dev/zero, in a subprocess

def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


HAZARD_CASES = [(f, h) for f in JSON_FILES for h in HAZARDOUS] + [("trace", h) for h in HAZARDOUS] + \
               [("trace/", "fifo"), ("sweep.json", "fifo"), ("sweep.json", "link_dev_zero"),
                ("sweep row", "fifo"), ("sweep row", "link_dev_zero")]


def _hazard_dir(good: Path, sweep: Path, folder: Path, target: str, how: str) -> str:
    """The damaged directory of a hazardous case, as the driver's argument (`run:` or `sweep:`)."""
    if target.startswith("sweep"):
        copy = folder / "sweep"
        shutil.copytree(sweep, copy, symlinks=True)
        replace_whole(copy / ("sweep.json" if target == "sweep.json" else f"runs/{SWEEP_POINT}.parquet"), how)
        return f"sweep:{copy}:{SWEEP_POINT}"
    run = fresh_copy(good, folder)
    if target == "trace":
        damage_trace(run, how)
    elif target == "trace/":
        shutil.rmtree(run / "trace")
        os.mkfifo(run / "trace")
    else:
        replace_whole(run / target, how)
    return f"{'run-no-report' if target in REPORT_SKIPS else 'run'}:{run}"


@pytest.fixture(scope="module")
def hazard_outcomes(good, sweep, tmp_path_factory, workdir) -> dict[int, Any]:
    """Every hazardous case's outcomes from one driver subprocess: {case: [Outcome]}, or a string
    saying where the driver hung or died."""
    base = tmp_path_factory.mktemp("hazard")
    args = [_hazard_dir(good, sweep, base / f"case{i}", target, how) for i, (target, how) in enumerate(HAZARD_CASES)]
    command = [sys.executable, "-m", "tests.fuzz.run_dir_mutations", str(good), str(base / "scratch"), *args]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(base / "home")}  # matplotlib's caches
    try:
        result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, errors="replace",
                                timeout=SUBPROCESS_TIMEOUT_S, preexec_fn=_limit_memory, env=env)
        stdout, ended = result.stdout, f"the driver ended (exit {result.returncode}): {result.stderr[-2000:]}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        ended = f"hung for {SUBPROCESS_TIMEOUT_S} s"
    found: dict[Any, Any] = {}
    case, last, done = None, "", False
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:  # the last line, cut when the driver was killed
            break
        if "done" in item:
            done = True
        elif "start" in item:
            last = item["start"]
        elif "command" in item:
            found[item.pop("case")].append(Outcome(**item))
        else:
            case = item["case"]
            found[case] = []
    if not done and case is not None:
        found[case] = f"{ended}, in `{last}`"
    for i in range(len(HAZARD_CASES)):
        found.setdefault(i, f"not reached: {ended}")
    found["args"] = args
    return found


@pytest.mark.parametrize("case", range(len(HAZARD_CASES)), ids=[f"{t}-{h}" for t, h in HAZARD_CASES])
def test_fifos_and_dev_zero_never_hang_or_flood(hazard_outcomes, untouched, case):
    target, how = HAZARD_CASES[case]
    found = hazard_outcomes[case]
    assert isinstance(found, list), f"{target} {how}: {found}"
    where = Path(hazard_outcomes["args"][case].split(":")[1])
    if target.startswith("sweep"):
        assert [o.command for o in found] == [f"diff {where}:{SWEEP_POINT}"], found
        record(f"sweep:{target}", how, assert_clean(found[0], where, f"{target} {how}", refuse=True))
    else:
        refusers = READERS.get(target, {"explain", "report", "load"})
        assert len(found) == (4 if target in REPORT_SKIPS else 5), found
        record(f"run-dir:{target}", how, check_all(found, where, f"{target} {how}", refusers))
    untouched(f"{target} {how}")


# ------------------------------------------------------------------ a sweep point for `rmqsim diff`

def _diff_point(good: Path, sweep: Path) -> Outcome:
    return cli_outcome(["diff", str(good), f"{sweep}:{SWEEP_POINT}"])


def test_the_good_sweep_point_diffs(good, sweep):
    outcome = _diff_point(good, sweep)
    assert outcome.code == 0 and "metric(s) differ" in outcome.output, outcome.output[-2000:]


@pytest.mark.parametrize("how", [h for h in WHOLE_FILE if h not in HAZARDOUS])
@pytest.mark.parametrize("target", ["sweep.json", "row"])
def test_a_damaged_sweep_file_is_refused_by_diff(good, sweep, tmp_path, untouched, target, how):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    replace_whole(copy / ("sweep.json" if target == "sweep.json" else f"runs/{SWEEP_POINT}.parquet"), how)
    outcome = _diff_point(good, copy)
    record(f"sweep:{target}", how, assert_clean(outcome, copy, f"{target} {how}", refuse=True))
    untouched(f"sweep {target} {how}")


@pytest.mark.parametrize("how", ["truncated", "garbage", "another_run"])
def test_a_damaged_sweep_row_is_refused_by_diff(good, sweep, tmp_path, untouched, how):
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    row = copy / "runs" / f"{SWEEP_POINT}.parquet"
    raw = row.read_bytes()
    if how == "truncated":
        row.write_bytes(raw[:len(raw) // 2])
    elif how == "garbage":
        row.write_bytes(b"PAR1" + bytes(range(256)) * (len(raw) // 256) + (100).to_bytes(4, "little") + b"PAR1")
    else:
        shutil.copyfile(copy / "runs" / "p0001-s2.parquet", row)
    outcome = _diff_point(good, copy)
    record("sweep:row", how, assert_clean(outcome, copy, f"row {how}", refuse=how != "another_run"))
    untouched(f"sweep row {how}")


@settings(budget(15), phases=NO_SHRINK)
@given(data=st.data())
def test_sweep_json_edits_end_cleanly(good, sweep, tmp_path_factory, untouched, data):
    path = sweep / "sweep.json"
    edit = data.draw(json_edits(key_paths(json.loads(path.read_text())), path.stat().st_size), label="edit")
    copy = tmp_path_factory.mktemp("sweep-edit", numbered=True) / "sweep"
    shutil.copytree(sweep, copy)
    note = edit_json(copy / "sweep.json", edit)
    outcome = _diff_point(good, copy)
    refuse = unreadable((copy / "sweep.json").read_bytes())
    record("sweep:sweep.json", edit[0], assert_clean(outcome, copy, note, refuse))
    untouched(note)
