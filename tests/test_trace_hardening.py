"""Issue 37, a damaged trace: every Parquet file rmqsim reads back goes through one reader
(analysis/checkers/trace_store.py `open_kind`) and a file that is not the one rmqsim wrote is a
`TraceError` "could not read FILE: REASON", never a pyarrow error or a traceback.

The ten cases of the issue (truncated, empty, a sparse 8 GiB file, garbage, a FIFO, links to
/dev/zero and /etc/passwd, another kind's file, a folder named `x.parquet`, an unknown kind) and a
few more (damaged pages behind a good footer, a footer length past the file, rows without `seq`,
a trace folder that is a link), each on a copy of one short traced run, read three ways: the
stored trace (`read_trace`, `trace_digest`), `rmqsim.load(DIR).frame(kind)`, and `rmqsim explain`
(exit 2, the file and the reason named). The size and row-group bounds are checked before pyarrow
reads anything (shown by lowering them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rmqsim
from analysis.checkers import trace_store
from analysis.checkers.trace_store import TraceError, kind_schema, trace_digest
from rmqsim import cli
from tests.conftest import ROOT

SENT = "producer.sent.parquet"
MESSAGE = "p-1-5"
RUN_ARGS = ["run", str(ROOT / "scenarios" / "baseline.yaml"), "--seed", "1", "--set", "duration_ms=4s",
            "--set", "settle_ms=1s", "--trace", "--out"]


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short traced run (its producers start at 3 s, so 4 s sends a few thousand messages)."""
    out = tmp_path_factory.mktemp("trace-hardening") / "run"
    done = subprocess.run([sys.executable, "-m", "rmqsim.cli", *RUN_ARGS, str(out)], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    path.unlink()
    make(path)


def _rewrite_table(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    table = change(pq.read_table(path))
    path.unlink()
    pq.write_table(table, path)


def _damage_pages(path: Path) -> None:
    """Zero the data pages and keep the footer: a file whose frame is fine and whose pages are not."""
    data = bytearray(path.read_bytes())
    footer_bytes = int.from_bytes(data[-8:-4], "little")
    data[4:len(data) - 8 - footer_bytes] = bytes(len(data) - 12 - footer_bytes)
    path.write_bytes(bytes(data))


def _footer_past_the_file(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-8:-4] = (0x7FFF_FFFF).to_bytes(4, "little")
    path.write_bytes(bytes(data))


def _null_seq(path: Path) -> None:
    def change(table: pa.Table) -> pa.Table:
        seq = pa.array([None, *table.column("seq").to_pylist()[1:]], pa.int64())
        return table.set_column(0, kind_schema("producer.sent").field("seq"), seq)
    _rewrite_table(path, change)


# case → (what to do to DIR/trace, the file named, a fragment of the reason)
CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "truncated": (lambda t: (t / SENT).write_bytes((t / SENT).read_bytes()[:500]), SENT, "damaged (not Parquet"),
    "empty": (lambda t: (t / SENT).write_bytes(b""), SENT, "damaged (not Parquet: 0 bytes)"),
    "sparse_8gib": (lambda t: os.truncate(t / SENT, 8 << 30), SENT, "damaged (not Parquet"),
    "garbage": (lambda t: (t / SENT).write_bytes(bytes(range(256)) * 12), SENT, "damaged (not Parquet"),
    "fifo": (lambda t: _replace(t / SENT, os.mkfifo), SENT, "not a regular file"),
    "link_dev_zero": (lambda t: _replace(t / SENT, lambda p: p.symlink_to("/dev/zero")), SENT, "a symbolic link"),
    "link_passwd": (lambda t: _replace(t / SENT, lambda p: p.symlink_to("/etc/passwd")), SENT, "a symbolic link"),
    "swapped_kind": (lambda t: shutil.copyfile(t / "consumer.consumed.parquet", t / SENT), SENT,
                     "not a trace file of producer.sent as rmqsim writes it (columns shard"),
    "folder": (lambda t: (t / "x.parquet").mkdir(), "x.parquet", "a folder"),
    "unknown_kind": (lambda t: shutil.copyfile(t / SENT, t / "bogus.kind.parquet"), "bogus.kind.parquet",
                     "'bogus.kind' is not a record kind rmqsim writes"),
    "damaged_pages": (lambda t: _damage_pages(t / SENT), SENT, "damaged (not readable Parquet"),
    "footer_past_the_file": (lambda t: _footer_past_the_file(t / SENT), SENT, "damaged (a Parquet footer of"),
    "null_seq": (lambda t: _null_seq(t / SENT), SENT, "rows without seq"),
}
FRAME_CASES = sorted(set(CASES) - {"folder", "unknown_kind", "null_seq"})  # the ones that touch producer.sent


@pytest.fixture
def damaged(traced_run: Path, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, str]:
    """A copy of the run with one case's damage: (run directory, the file named, the reason's fragment)."""
    run = tmp_path / "run"
    shutil.copytree(traced_run, run, symlinks=True)
    make, name, fragment = CASES[request.param]
    make(run / "trace")
    return run, run / "trace" / name, fragment


@pytest.mark.parametrize("damaged", sorted(CASES), indirect=True)
def test_read_trace_refuses_a_damaged_trace_with_a_trace_error(damaged):
    run, path, fragment = damaged
    started = time.monotonic()
    with pytest.raises(TraceError) as info:
        trace_digest(run / "trace")
    assert str(info.value).startswith(f"could not read {path}: "), info.value
    assert fragment in info.value.reason, info.value
    assert info.value.path == path
    assert time.monotonic() - started < 10  # the sparse 8 GiB file is not read


@pytest.mark.parametrize("damaged", FRAME_CASES, indirect=True)
def test_a_frame_of_a_damaged_kind_file_is_a_trace_error(damaged):
    run, path, fragment = damaged
    result = rmqsim.load(run)
    with pytest.raises(TraceError) as info:
        result.frame("producer.sent")
    assert str(info.value).startswith(f"could not read {path}: ") and fragment in str(info.value), info.value


def test_a_frame_of_a_folder_in_place_of_a_kind_file_is_a_trace_error(traced_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(traced_run, run, symlinks=True)
    (run / "trace" / SENT).unlink()
    (run / "trace" / SENT).mkdir()
    with pytest.raises(TraceError, match="a folder"):
        rmqsim.load(run).frame("producer.sent")


@pytest.mark.parametrize("damaged", sorted(CASES), indirect=True)
def test_explain_on_a_damaged_trace_is_exit_2_naming_the_file(damaged, capsys):
    """explain checks the trace against the run's manifest first (size and SHA-256 of each file, so a
    file damaged within valid Parquet never reaches the checkers), then reads it through the same
    safe-file and schema rules: either way exit 2, naming the file."""
    run, path, fragment = damaged
    code = cli.main(["explain", str(run), MESSAGE])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert f"could not read {path}: " in captured.err, captured.err
    assert fragment in captured.err or "differs from what rmqsim wrote" in captured.err, captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_the_size_bound_comes_before_pyarrow(traced_run, tmp_path, monkeypatch):
    """A file over MAX_TRACE_FILE_BYTES is refused by its size alone (lowered here: 1 GiB)."""
    trace = tmp_path / "trace"
    shutil.copytree(traced_run / "trace", trace)
    os.truncate(trace / SENT, 8 << 30)
    monkeypatch.setattr(trace_store, "MAX_TRACE_FILE_BYTES", 1 << 30)
    monkeypatch.setattr(pq, "ParquetFile", None)  # pyarrow is never reached
    with pytest.raises(TraceError, match=r"larger than 1,073,741,824 bytes \(8,589,934,592\)"):
        trace_store.read_kind(trace / SENT, "producer.sent")


def test_a_row_group_larger_than_rmqsim_writes_is_refused(traced_run, monkeypatch):
    monkeypatch.setattr(trace_store, "MAX_ROW_GROUP_BYTES", 1000)
    with pytest.raises(TraceError, match=r"row group 0 holds [0-9,]+ bytes, more than rmqsim writes in one"):
        rmqsim.load(traced_run).frame("producer.sent")


def test_a_trace_folder_that_is_a_link_is_refused(traced_run, tmp_path):
    """Nothing outside the folder given is read: a link in place of the trace folder is refused."""
    trace = tmp_path / "trace"
    trace.symlink_to(traced_run / "trace")
    with pytest.raises(TraceError, match=f"could not read {trace}: a symbolic link"):
        trace_digest(trace)


def test_a_good_trace_still_reads_back(traced_run):
    """The checks refuse nothing rmqsim wrote: the digest is the summary's, every frame reads."""
    summary = json.loads((traced_run / "summary.json").read_text())
    assert trace_digest(traced_run / "trace") == summary["trace_sha256"]
    result = rmqsim.load(traced_run)
    assert len(result.frame("producer.sent")) > 0 and len(result.frame("consumer.consumed")) > 0


def _foreign_values(trace: Path) -> None:
    """Well-formed Parquet of the right kind whose values no run wrote (message ids a billion times larger)."""
    def change(table: pa.Table) -> pa.Table:
        index = table.column_names.index("msg_id")
        ids = pa.array([m * 10**9 for m in table.column("msg_id").to_pylist()], pa.int64())
        return table.set_column(index, table.schema.field(index), ids)
    _rewrite_table(trace / SENT, change)


def _listed(run: Path) -> dict:
    manifest = json.loads((run / ".rmqsim-manifest.json").read_text())
    return {rel.removeprefix("trace/"): e for rel, e in manifest["files"].items() if rel.startswith("trace/")}


@pytest.mark.parametrize("case", ["foreign_values", "extra_file", "missing_file"])
def test_a_trace_unlike_its_manifest_gives_no_record(traced_run, tmp_path, case):
    """With the run manifest's entries (`listed`) a changed, added or removed file is refused
    before the first record, detail kinds included (the digest does not cover them)."""
    run = tmp_path / "run"
    shutil.copytree(traced_run, run, symlinks=True)
    listed = _listed(run)
    if case == "foreign_values":
        _foreign_values(run / "trace")
        fragment, name = "differs from what rmqsim wrote", SENT
    elif case == "extra_file":
        # fault.healed and fault.injected have the same fields: a file of a kind this run did not write
        shutil.copyfile(run / "trace" / "fault.healed.parquet", run / "trace" / "fault.injected.parquet")
        fragment, name = "its manifest does not list it", "fault.injected.parquet"
    else:
        (run / "trace" / "consume_queue.dispatched.parquet").unlink()
        fragment, name = "missing (the run's manifest lists it)", "consume_queue.dispatched.parquet"
    with pytest.raises(TraceError) as info:
        next(trace_store.read_trace(run / "trace", listed=listed))
    assert str(info.value).startswith(f"could not read {run / 'trace' / name}: ") and fragment in str(info.value)


def test_a_trace_of_foreign_values_is_refused_by_its_digest_before_any_record(traced_run, tmp_path):
    """`sha256=`: the digest is checked first, so a well-formed trace of foreign values (here ids
    that made explain's checkers grow past 20 GB) never reaches the caller."""
    run = tmp_path / "run"
    shutil.copytree(traced_run, run, symlinks=True)
    _foreign_values(run / "trace")
    expected = json.loads((run / "summary.json").read_text())["trace_sha256"]
    with pytest.raises(TraceError, match=f"could not read {run / 'trace'}: its records have trace digest .*not this"):
        next(trace_store.read_trace(run / "trace", sha256=expected))
    assert next(trace_store.read_trace(traced_run / "trace", sha256=expected, listed=_listed(traced_run)))
