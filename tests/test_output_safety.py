"""Issue 25, file safety: nothing rmqsim did not write is ever deleted, overwritten or read as its own.

One test (or a parametrized set) per reproducer of the issue:

- `run --out DIR --replace` on a directory that never held a run (a user's `report/thesis.tex`,
  `trace/capture.pcap`), or on a run with a user's file inside, or a file changed since: refused,
  named, nothing deleted; a run's own files (manifest) are replaced, an interrupted run's too.
- `sweep --replace` with a user's `report/my_notes.md` or `deliveries/my_query.sql` inside.
- The scenario name `latest` in the default layout; a symbolic link as `runs/<name>`.
- `--out /` and other system directories (run, sweep, report).
- `rmqsim report` on a run directory whose summary is `[]`, `{"verdict": "valid"}`, a link to
  /etc/passwd (never echoed), 3 GB, a FIFO; a trace file linked to /etc/passwd; `trace/` a link
  to /dev; an edited summary; an interrupted run. On a sweep directory whose run file is a FIFO,
  or whose table folder is a link to a folder of devices. Every one a clean exit 2 naming the file.
- Resume with a truncated `deliveries/*.parquet`: the run is redone, the report refuses it before.
- A full disk during `run --trace` (ENOSPC injected; and a real 100 KiB tmpfs when this runs as
  root): exit 2 "could not write ...: no space left on device", no traceback, nothing left behind;
  a sweep run whose row cannot be written removes its per-message files.

No Spark: sweep directories are written as executors write them.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analysis.reports.sweep_report import ReportError, build_report
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import load_sweep
from analysis.sweeps.sweep import manifest, tasks
from rmqsim import cli, run_store
from sim.files import MANIFEST, OutputError, OwnedDir, system_dir, writable_dir
from tests.analysis.test_sweep import write_sweep
from tests.conftest import ROOT

BASELINE = str(ROOT / "scenarios" / "baseline.yaml")
SHORT = ["--set", "duration_ms=6s", "--set", "settle_ms=2s", "--set", "producers[0].rate_per_s=200"]
SWEEP_SHORT = {"duration_ms": "6s", "settle_ms": "4s"}
ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def rmqsim(*args: str, cwd: Path, code: str | None = None) -> subprocess.CompletedProcess:
    """`rmqsim ARGS` in a child process; `code` runs first in it (a fault injection)."""
    script = (code or "") + f"\nimport sys, rmqsim.cli\nsys.exit(rmqsim.cli.main({list(args)!r}))\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(cwd), timeout=300,
                          env=ENV)


def listing(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` (links by target, files by content): to compare before and after."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = (f"-> {os.readlink(path)}" if path.is_symlink() else "dir" if path.is_dir()
                    else path.read_bytes() if path.is_file() else "special")
    return out


def main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.err


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short run written with --trace (manifest included)."""
    folder = tmp_path_factory.mktemp("traced")
    done = rmqsim("run", BASELINE, *SHORT, "--trace", "--out", "run", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "run"


def own_report(folder: Path, names: dict[str, str]) -> None:
    """A report folder as `rmqsim report` leaves it: its files and its own manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    owned = OwnedDir(folder, "rmqsim report", names=list(names))
    for name, text in names.items():
        owned.write_text(name, text)
    owned.commit()


def rows(schema: Any, n: int, **values: Any) -> dict[str, list]:
    """Columns of `n` rows for `schema`: `values` repeated, nulls elsewhere."""
    return {name: [values.get(name)] * n for name in schema.names}


def fake_run(out: Path, trace_kinds: tuple[str, ...] = ("producer.sent",)) -> Path:
    """A run's files written through RunOutput (no simulation): summary, meta, scenario, trace."""
    out.mkdir(parents=True, exist_ok=True)
    output = run_store.RunOutput(out)
    trace = output.trace_dir()
    trace.mkdir()
    for kind in trace_kinds:
        (trace / f"{kind}.parquet").write_bytes(b"PAR1 not really PAR1")
    for name in run_store.WRITTEN:
        output.write_text(name, json.dumps({"name": name}))
    output.finish()
    return out


# ---------------------------------------------------------------- case 3: run --replace

def test_run_replace_never_deletes_a_directory_that_held_no_run(tmp_path, capsys):
    """The issue: `run --out DIR --replace` deleted DIR/report/ and DIR/trace/ of a user's directory."""
    out = tmp_path / "thesis"
    (out / "report").mkdir(parents=True)
    (out / "trace").mkdir()
    (out / "report" / "thesis.tex").write_text("chapter 1")
    (out / "trace" / "capture.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    before = listing(out)
    started = time.monotonic()
    code, err = main(capsys, "run", BASELINE, *SHORT, "--out", str(out), "--replace")
    assert code == 2 and "Traceback" not in err, err
    assert "report/thesis.tex" in err and "trace/capture.pcap" in err and "nothing was deleted" in err, err
    assert listing(out) == before and time.monotonic() - started < 30  # refused before simulating


def test_run_replace_deletes_a_runs_own_files_only(tmp_path):
    out = fake_run(tmp_path / "run")
    (out / "notes.txt").write_text("mine")  # beside the run's places: never touched
    assert run_store.claim_out_dir(out, replace=True) == out
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("intruder", ["report/my_notes.md", "trace/capture.pcap", "summary.json", "trace-link",
                                      "report-plain"])
def test_run_replace_refuses_what_rmqsim_did_not_write(tmp_path, intruder):
    """A user's file inside the run's places, a file edited since, a symbolic link, a report folder
    without a manifest: refused, named, and nothing is deleted."""
    out = fake_run(tmp_path / "run")
    if intruder == "summary.json":
        (out / "summary.json").write_text('{"edited": true}')
        named = "summary.json (changed since rmqsim wrote it)"
    elif intruder == "trace-link":
        (out / "trace" / "producer.sent.parquet").unlink()
        (out / "trace" / "producer.sent.parquet").symlink_to("/etc/passwd")
        named = "trace/producer.sent.parquet (a symbolic link)"
    elif intruder == "report-plain":
        (out / "report").mkdir()
        (out / "report" / "index.html").write_text("my own page")
        named = "report/index.html"
    else:
        if intruder.startswith("report/"):
            own_report(out / "report", {"index.html": "<html>"})
        (out / intruder).write_text("mine")
        named = intruder
    before = listing(out)
    with pytest.raises(OutputError) as info:
        run_store.claim_out_dir(out, replace=True)
    assert named in str(info.value) and "nothing was deleted" in str(info.value), info.value
    assert listing(out) == before


def test_run_replace_of_a_run_with_its_report(tmp_path):
    out = fake_run(tmp_path / "run")
    own_report(out / "report", {"index.html": "<html>", "a.png": "png"})
    run_store.claim_out_dir(out, replace=True)
    assert list(out.iterdir()) == []


def test_run_replace_of_an_interrupted_run(tmp_path):
    """A run killed mid-trace leaves an incomplete manifest, trace files and temporary files:
    --replace removes exactly those; a run without a manifest (an older rmqsim) is never replaced."""
    out = tmp_path / "run"
    out.mkdir()
    output = run_store.RunOutput(out)
    trace = output.trace_dir()
    trace.mkdir()
    (trace / ".producer.sent.parquet.tmp-4242").write_bytes(b"half")
    (trace / "broker.stored.parquet").write_bytes(b"renamed, not yet recorded")
    (out / ".summary.json.tmp-4242").write_text("{")
    with pytest.raises(OutputError, match="already holds a run"):
        run_store.claim_out_dir(out, replace=False)
    run_store.claim_out_dir(out, replace=True)
    assert list(out.iterdir()) == []

    (out / "summary.json").write_text("{}")  # an older run: no manifest
    with pytest.raises(OutputError, match="no record of writing") as info:
        run_store.claim_out_dir(out, replace=True)
    assert "summary.json" in str(info.value) and (out / "summary.json").exists()


def test_a_damaged_manifest_is_never_trusted(tmp_path):
    out = fake_run(tmp_path / "run")
    for content in (b"[]", b"{not json", json.dumps({"tool": "rmqsim run", "format": 1, "complete": True,
                                                     "dirs": ["../.."], "pending": [], "files": {}}).encode()):
        (out / MANIFEST).write_bytes(content)
        before = listing(out)
        with pytest.raises(OutputError, match="cannot tell what rmqsim wrote"):
            run_store.claim_out_dir(out, replace=True)
        assert listing(out) == before


# ---------------------------------------------------------------- case 4: the name `latest`

def test_scenario_named_latest_cannot_break_the_layout(tmp_path, capsys, monkeypatch):
    """The issue: a scenario named `latest` ran inside the previous run's directory, made
    runs/latest a link to itself and died after simulating. Now it is refused before anything."""
    named = tmp_path / "latest.yaml"
    named.write_text("name: latest\n" + Path(BASELINE).read_text().replace("name: baseline\n", ""))
    monkeypatch.chdir(tmp_path)
    code, err = main(capsys, "run", BASELINE, *SHORT)
    assert code == 0, err
    link = os.readlink(tmp_path / "runs" / "latest")
    before = listing(tmp_path / "runs")
    code, err = main(capsys, "run", str(named), *SHORT)
    assert code == 2 and "reserved" in err and "Traceback" not in err, err
    assert listing(tmp_path / "runs") == before and os.readlink(tmp_path / "runs" / "latest") == link
    code, err = main(capsys, "run", str(named), *SHORT, "--out", "elsewhere")  # with --out it runs
    assert code == 0 and (tmp_path / "elsewhere" / "summary.json").is_file(), err


def test_a_linked_scenario_folder_is_refused(tmp_path):
    root = tmp_path / "runs"
    (root / "real").mkdir(parents=True)
    (root / "linked").symlink_to(root / "real")
    with pytest.raises(OutputError, match="a symbolic link"):
        run_store.fresh_run_dir(root, "linked", 1, "20250101T000000Z")
    assert list((root / "real").iterdir()) == []


# ---------------------------------------------------------------- case 10: system directories

@pytest.mark.parametrize("path", ["/", "/etc", "/usr/share/x", "/proc/self", "/dev/shm/x", "/tmp", "/home", "~"])
def test_system_directories_are_refused(path):
    target = Path(path).expanduser()
    assert system_dir(target) is not None
    with pytest.raises(OutputError, match="system directory|home directory"):
        writable_dir(target)


def test_run_out_root_is_refused_before_anything(tmp_path, capsys, monkeypatch):
    """`run --out / --replace` as root would have written /summary.json and deleted /report."""
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the output directory was claimed")

    monkeypatch.setattr(run_store, "claim_out_dir", never)
    monkeypatch.setattr(run_store, "RunOutput", never)
    up_to_tmp = tmp_path.joinpath(*[".."] * (len(tmp_path.parts) - 2))  # /tmp, through `..`, under any runner
    for out in ("/", "/etc", str(up_to_tmp)):
        code, err = main(capsys, "run", BASELINE, *SHORT, "--out", out, "--replace")
        assert code == 2 and "system directory" in err and "Traceback" not in err, err


def test_sweep_and_report_refuse_system_directories(tmp_path, capsys):
    with pytest.raises(sweep_dir.ForeignDirectory, match="system directory"):
        sweep_dir.prepare(Path("/"), {"digest": "x"}, replace=True)
    _sweep, out = sweep_with_rows(tmp_path)
    code, err = main(capsys, "report", str(out), "--out", "/")
    assert code == 2 and "system directory" in err, err


def test_write_outside_a_run_and_not_a_system_dir_still_works(tmp_path):
    assert system_dir(tmp_path / "out") is None and writable_dir(tmp_path / "out").is_dir()


# ---------------------------------------------------------------- case 5: report on a run directory

RUN_DAMAGE = {
    "list": ("summary.json", "lacks or garbles everything"),
    "verdict_only": ("summary.json", "lacks or garbles scenario"),
    "passwd_link": ("summary.json", "a symbolic link"),
    "fifo": ("summary.json", "not a regular file"),
    "big": ("summary.json", "larger than"),
    "bad_types": ("summary.json", "lacks or garbles seed"),
    "huge_time": ("summary.json", "sim_time_ms"),
    "trace_link": ("trace/producer.sent.parquet", "a symbolic link"),
    "trace_dir_link": ("trace", "a symbolic link"),
    "trace_truncated": ("trace/producer.sent.parquet", "damaged"),
    "trace_columns": ("trace/producer.sent.parquet", "missing or of another type"),
    "scenario_list": ("scenario.resolved.json", "not a resolved scenario"),
}


def _damage(run: Path, case: str) -> None:
    summary = run / "summary.json"
    good = json.loads(summary.read_text())
    if case == "list":
        summary.write_text("[]")
    elif case == "verdict_only":
        summary.write_text('{"verdict":"valid"}')
    elif case == "passwd_link":
        summary.unlink()
        summary.symlink_to("/etc/passwd")
    elif case == "fifo":
        summary.unlink()
        os.mkfifo(summary)
    elif case == "big":
        with open(summary, "r+b") as handle:
            handle.truncate(3 << 30)  # sparse: 3 GB to read, none on disk
    elif case == "bad_types":
        summary.write_text(json.dumps({**good, "seed": "1", "lost": True}))
    elif case == "huge_time":
        summary.write_text(json.dumps({**good, "sim_time_ms": 1e300}))
    elif case == "trace_link":
        (run / "trace" / "producer.sent.parquet").unlink()
        (run / "trace" / "producer.sent.parquet").symlink_to("/etc/passwd")
    elif case == "trace_dir_link":
        shutil.rmtree(run / "trace")
        (run / "trace").symlink_to("/dev")
    elif case == "trace_truncated":
        path = run / "trace" / "producer.sent.parquet"
        path.write_bytes(path.read_bytes()[:300])
    elif case == "trace_columns":
        path = run / "trace" / "producer.sent.parquet"
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["born_us"]), path)
    elif case == "scenario_list":
        (run / "scenario.resolved.json").write_text('{"consumers": [1, 2]}')


@pytest.mark.parametrize("manifest_kept", [False, True], ids=["no-manifest", "manifest"])
@pytest.mark.parametrize("case", sorted(RUN_DAMAGE))
def test_report_on_a_damaged_run_is_a_clean_refusal(traced_run, tmp_path, capsys, case, manifest_kept):
    """Every damaged run file: exit 2 naming it, no traceback, no hang, nothing echoed, no report.
    With the run's manifest most damage is caught as "differs from what rmqsim wrote"; without one
    (older runs) by the checks of what the report reads."""
    run = tmp_path / "run"
    shutil.copytree(traced_run, run, symlinks=True)
    if not manifest_kept:
        (run / MANIFEST).unlink()
    _damage(run, case)
    started = time.monotonic()
    code, err = main(capsys, "report", str(run))
    name, fragment = RUN_DAMAGE[case]
    assert code == 2 and "Traceback" not in err, err
    assert str(run / name) in err, err
    recorded = manifest_kept and ("differs from what rmqsim wrote" in err or "size differs" in err)
    assert fragment in err or recorded, err
    assert "root:" not in err and len(err) < 600, err  # /etc/passwd is never echoed
    assert time.monotonic() - started < 20
    assert not (run / "report").exists()


def test_report_refuses_an_interrupted_run_and_unlisted_trace_files(traced_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(traced_run, run)
    shutil.copy(run / "trace" / "producer.sent.parquet", run / "trace" / "producer.sent2.parquet")
    code, err = main(capsys, "report", str(run))
    assert code == 2 and "producer.sent2.parquet is not a trace file rmqsim wrote" in err, err
    (run / "trace" / "producer.sent2.parquet").unlink()
    data = json.loads((run / MANIFEST).read_text())
    (run / MANIFEST).write_text(json.dumps({**data, "complete": False}))
    code, err = main(capsys, "report", str(run))
    assert code == 2 and "did not finish writing" in err, err


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_run_report_never_overwrites_a_users_file(traced_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(traced_run, run)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("my page")
    code, err = main(capsys, "report", str(run), "--out", str(mine))
    assert code == 2 and "index.html" in err and "not overwriting" in err, err
    assert (mine / "index.html").read_text() == "my page" and sorted(p.name for p in mine.iterdir()) == ["index.html"]
    code, err = main(capsys, "report", str(run))  # its own folder: written, and rewritten
    assert code == 0, err
    code, err = main(capsys, "report", str(run))
    assert code == 0, err
    listed = json.loads((run / "report" / MANIFEST).read_text())["files"]
    assert "index.html" in listed and sorted(listed) == sorted(p.name for p in (run / "report").iterdir()
                                                               if p.name != MANIFEST)
    run_store.claim_out_dir(run, replace=True)  # the report is provably rmqsim's: replaced with the run
    assert list(run.iterdir()) == []


# ---------------------------------------------------------------- sweep directories (no Spark)

def sweep_with_rows(tmp_path: Path, keep_deliveries: bool = False) -> tuple[Any, Path]:
    """A sweep directory with two `runs` rows (and deliveries files) as executors write them."""
    sweep = load_sweep(write_sweep(tmp_path, "safe", set=SWEEP_SHORT, seeds=[1, 2]))
    out = tmp_path / "out"
    sweep_dir.prepare(out, manifest(sweep))
    schema = store.runs_schema(sweep.param_types)
    for seed in (1, 2):
        run_id = f"p0000-s{seed}"
        files = []
        if keep_deliveries:
            path = store.write_table(out, store.DELIVERIES, run_id,
                                     rows(store.DELIVERIES_SCHEMA, 3, run_id=run_id, seed=seed), store.DELIVERIES_SCHEMA)
            files.append(store.output_entry(out, path))
        store.write_run_row(out, {"run_id": run_id, "sweep": sweep.name, "sweep_digest": sweep.digest(), "point": 0,
                                  "point_key": "", "seed": seed, "status": "ok", "output_files": files}, schema)
    return sweep, out


@pytest.mark.parametrize("intruder", ["report/my_notes.md", "deliveries/my_query.sql", "runs-link", "damaged-row"])
def test_sweep_replace_refuses_user_files_inside(tmp_path, intruder):
    """The issue: `sweep --replace` checked only top-level names and deleted a user's
    report/my_notes.md and deliveries/my_query.sql without notice."""
    sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    if intruder == "runs-link":
        (out / "runs" / "p0000-s9.parquet").symlink_to(out / "runs" / "p0000-s1.parquet")
        named = "runs/p0000-s9.parquet (a symbolic link)"
    elif intruder == "damaged-row":
        path = out / "runs" / "p0000-s2.parquet"
        path.write_bytes(path.read_bytes()[:200])
        named = "runs/p0000-s2.parquet"
    else:
        (out / intruder).parent.mkdir(exist_ok=True)
        (out / intruder).write_text("mine")
        named = intruder
    before = listing(out)
    other = dict(manifest(sweep), digest="another-sweep")
    with pytest.raises(sweep_dir.ForeignDirectory) as info:
        sweep_dir.prepare(out, other, replace=True)
    assert repr(named) in str(info.value) and "nothing was deleted" in str(info.value), info.value
    assert listing(out) == before


def test_sweep_replace_deletes_a_sweep_that_is_all_rmqsims(tmp_path):
    sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    own_report(out / "report", {"index.html": "<html>"})
    (out / "runs" / ".p0000-s1.attempt-1").write_text("4242")
    (out / "deliveries" / ".p0000-s3.parquet.tmp-4242").write_bytes(b"half")
    orphan = store.write_table(out, store.DELIVERIES, "p0000-s3", rows(store.DELIVERIES_SCHEMA, 1, run_id="p0000-s3"),
                               store.DELIVERIES_SCHEMA)
    other = dict(manifest(sweep), digest="another-sweep")
    sweep_dir.prepare(out, other, replace=True)  # an orphan of an interrupted run has exactly the table's schema
    assert sorted(p.name for p in out.iterdir()) == [sweep_dir.MANIFEST] and not orphan.exists()
    assert sweep_dir.read_manifest(out)["digest"] == "another-sweep"


def test_a_linked_table_folder_is_refused_on_resume(tmp_path):
    sweep, out = sweep_with_rows(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (out / "runs").rename(elsewhere)
    (out / "runs").symlink_to(elsewhere)
    with pytest.raises(sweep_dir.ForeignDirectory, match="a symbolic link"):
        sweep_dir.prepare(out, manifest(sweep))


def _devices(folder: Path) -> Path:
    """A folder like /dev: a character device (/dev/null's numbers, as root) and a FIFO."""
    folder.mkdir()
    os.mkfifo(folder / "pipe.parquet")
    try:
        os.mknod(folder / "null.parquet", 0o666 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pass
    return folder


@pytest.mark.parametrize("case", ["runs-fifo", "deliveries-fifo", "deliveries-link-to-devices", "runs-link-to-devices"])
def test_sweep_report_never_opens_fifos_or_devices(tmp_path, case):
    """The issue: `rmqsim report` hung on a run file that is a FIFO, and opened every device file
    when a table folder was a link to /dev. Now refused before Spark starts, naming the entry."""
    _sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    table = case.split("-")[0]
    if case.endswith("fifo"):
        path = out / table / "p0000-s2.parquet"
        path.unlink()
        os.mkfifo(path)
        fragment = f"{table}/p0000-s2.parquet"
    else:
        shutil.rmtree(out / table)
        (out / table).symlink_to(_devices(tmp_path / "dev"))
        fragment = f"{out / table} is a symbolic link"
    started = time.monotonic()
    with pytest.raises(ReportError) as info:
        build_report(out)
    assert fragment in str(info.value), info.value
    assert time.monotonic() - started < 10 and not (out / "report").exists()


def test_resume_refuses_a_fifo_instead_of_hanging(tmp_path):
    sweep, out = sweep_with_rows(tmp_path)
    (out / "runs" / "p0000-s2.parquet").unlink()
    os.mkfifo(out / "runs" / "p0000-s2.parquet")
    with pytest.raises(sweep_dir.ForeignDirectory, match="not a regular file"):
        sweep_dir.completed(out, sweep.digest(), {"p0000-s1", "p0000-s2"})
    assert (out / "runs" / "p0000-s2.parquet").exists()  # a user's FIFO is never removed


# ---------------------------------------------------------------- case 6: truncated deliveries

def test_truncated_deliveries_are_redone_on_resume_and_refused_by_report(tmp_path):
    """The issue: a truncated deliveries file survived resume ("30 of 30 runs already complete"),
    after which `report` refused and no rerun redid it."""
    sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    victim = out / "deliveries" / "p0000-s1.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(ReportError, match="deliveries/p0000-s1.parquet") as info:
        build_report(out)
    assert "rerun the sweep command" in str(info.value)
    log: list[str] = []

    class Log:
        def write(self, text: str) -> None:
            log.append(text)

    status = sweep_dir.completed(out, sweep.digest(), {"p0000-s1", "p0000-s2"}, Log())
    assert status == {"p0000-s2": "ok"}, status  # s1 will be redone
    assert not victim.exists() and not (out / "runs" / "p0000-s1.parquet").exists()
    assert "deliveries/p0000-s1.parquet is damaged" in "".join(log) and "will be redone" in "".join(log)


@pytest.mark.parametrize("damage", ["missing", "unlisted"])
def test_report_refuses_missing_or_unlisted_per_message_files(tmp_path, damage):
    _sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    if damage == "missing":
        (out / "deliveries" / "p0000-s2.parquet").unlink()
        fragment = "deliveries/p0000-s2.parquet (missing)"
    else:
        shutil.copy(out / "deliveries" / "p0000-s2.parquet", out / "deliveries" / "p0000-s7.parquet")
        fragment = "listed by no completed run"
    with pytest.raises(ReportError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        build_report(out)


def test_report_reads_an_older_sweep_whose_rows_list_no_files(tmp_path):
    """Rows written before `output_files` existed: their per-message files are checked as readable
    Parquet (all that can be checked), not refused as unlisted."""
    from analysis.reports.sweep_report import check_tables

    sweep, out = sweep_with_rows(tmp_path, keep_deliveries=True)
    for path in sorted((out / "runs").iterdir()):
        pq.write_table(pq.read_table(path).drop_columns(["output_files"]), path)
    check_tables(out, sweep.digest())
    victim = out / "deliveries" / "p0000-s2.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(ReportError, match="deliveries/p0000-s2.parquet"):
        check_tables(out, sweep.digest())


# ---------------------------------------------------------------- case 7: a full disk

FULL_AFTER = """
import errno
import pyarrow.parquet as pq
_real, _calls = pq.ParquetWriter.write_table, [0]
def _full(self, *args, **kwargs):
    _calls[0] += 1
    if _calls[0] > {n}:
        raise OSError(errno.ENOSPC, "No space left on device")
    return _real(self, *args, **kwargs)
pq.ParquetWriter.write_table = _full
"""
FULL_AT_CLOSE = """
import errno
import pyarrow.parquet as pq
_real, _calls = pq.ParquetWriter.close, [0]
def _full(self, *args, **kwargs):
    _calls[0] += 1
    if _calls[0] == 3:  # two trace files renamed into place already
        raise OSError(errno.ENOSPC, "No space left on device")
    return _real(self, *args, **kwargs)
pq.ParquetWriter.close = _full
"""
FULL_AT_SUMMARY = """
import errno, pathlib
_real = pathlib.Path.write_text
def _full(self, *args, **kwargs):
    if self.name.startswith(".summary.json"):
        raise OSError(errno.ENOSPC, "No space left on device")
    return _real(self, *args, **kwargs)
pathlib.Path.write_text = _full
"""


def _assert_full_disk_refusal(done: subprocess.CompletedProcess, out: Path) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "could not write" in done.stderr, done.stderr
    assert "no space left on device" in done.stderr and "nothing of it is kept" in done.stderr, done.stderr
    left = [p for p in out.rglob("*")] if out.exists() else []
    assert left == [], left  # no trace, no summary, no temporary file, no manifest


@pytest.mark.parametrize("where", ["trace-mid-run", "trace-at-close", "summary"])
def test_a_full_disk_is_a_clean_error_and_leaves_nothing(tmp_path, where):
    code = {"trace-mid-run": FULL_AFTER.format(n=3), "trace-at-close": FULL_AT_CLOSE,
            "summary": FULL_AT_SUMMARY}[where]
    done = rmqsim("run", BASELINE, *SHORT, "--trace", "--out", "o", cwd=tmp_path, code=code)
    _assert_full_disk_refusal(done, tmp_path / "o")


def test_a_full_disk_in_the_default_layout_moves_no_link(tmp_path):
    first = rmqsim("run", BASELINE, *SHORT, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    link = os.readlink(tmp_path / "runs" / "latest")
    done = rmqsim("run", BASELINE, *SHORT, "--seed", "2", "--trace", cwd=tmp_path, code=FULL_AFTER.format(n=3))
    assert done.returncode == 2 and "no space left on device" in done.stderr and "Traceback" not in done.stderr
    assert os.readlink(tmp_path / "runs" / "latest") == link
    assert [p.name for p in (tmp_path / "runs" / "baseline").iterdir() if not p.is_symlink()] == [Path(link).name]


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Any:
    """A real 100 KiB file system (root only; skipped where mounting is not allowed)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace')[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_really_full_disk(tiny_tmpfs, tmp_path):
    done = rmqsim("run", BASELINE, *SHORT, "--trace", "--out", str(tiny_tmpfs / "o"), cwd=tmp_path)
    _assert_full_disk_refusal(done, tiny_tmpfs / "o")


def test_a_sweep_run_that_cannot_write_its_row_leaves_no_file(tmp_path, monkeypatch):
    """An executor whose `runs` row hits a full disk removes the per-message files it wrote (so no
    file is left that no row lists) and reports "no_space" without raising (no Spark traceback);
    the driver then stops the sweep with exit 2 "could not write ... no space left on device",
    complete runs kept. Another write error still fails the task."""
    from analysis.sweeps import task as sweep_task

    sweep = load_sweep(write_sweep(tmp_path, "full", set=SWEEP_SHORT, seeds=[1], keep=["deliveries", "latencies"]))
    out = tmp_path / "out"
    sweep_dir.prepare(out, manifest(sweep))
    (task,) = tasks(sweep, out)

    def failing(code: int) -> Any:
        def write(*args: Any, **kwargs: Any) -> None:
            raise OSError(code, os.strerror(code))
        return write

    monkeypatch.setattr(store, "write_run_row", failing(errno.ENOSPC))
    assert sweep_task.execute(task)["status"] == sweep_task.NO_SPACE
    assert [p for p in out.rglob("*.parquet*")] == []
    monkeypatch.setattr(store, "write_run_row", failing(errno.EIO))
    with pytest.raises(OSError):
        sweep_task.execute(task)
    assert [p for p in out.rglob("*.parquet*")] == []
    monkeypatch.undo()
    sweep_dir.clean_leftovers(out)  # the attempt markers, as the driver removes them
    result = sweep_task.execute(task)  # the retry: the row lists both files with their sizes
    row = pq.read_table(out / "runs" / "p0000-s1.parquet").to_pylist()[0]
    assert result["status"] == "ok" and sorted(f["path"] for f in row["output_files"]) == [
        "deliveries/p0000-s1.parquet", "latencies/p0000-s1.parquet"]
    assert all((out / f["path"]).stat().st_size == f["bytes"] for f in row["output_files"])
