"""Regression tests for issue 8's reproducers on sweeps, without Spark: names, bases, key paths,
seeds, size, and output directories that are damaged, foreign, or not ours to delete.
(A killed Python worker and a damaged directory resumed by a real sweep: test_sweep_resilience.py.)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.spec import load_sweep
from analysis.sweeps.sweep import manifest
from sim.config import ConfigError
from sim.limits import CONFIRM_RUNS
from tests.analysis.test_sweep import BASE, SHORT, run_rmqsim, write_sweep
from tests.conftest import ROOT
from tests.fuzz.properties import assert_clean_rejection, assert_no_foreign_content


def sweep_problems(tmp_path: Path, **doc: Any) -> list[str]:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "base": str(BASE), "set": SHORT, **doc}, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert_clean_rejection(info.value, str(path))
    return info.value.problems


# ---------------------------------------------------------------- names: `..` and --replace

def test_dotdot_sweep_name_writes_and_deletes_nothing(tmp_path):
    """The issue: a sweep named `..` wrote sweep.json into the working directory, and a second one
    run with --replace deleted the directory's contents. Both runs now stop at validation."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "precious.txt").write_text("keep me")
    (tmp_path / "outside.txt").write_text("keep me too")
    path = write_sweep(work, "dotdot", seeds=1)
    path.write_text(path.read_text().replace("name: dotdot", "name: '..'"))
    def listing() -> list[str]:  # run_rmqsim's scratch folder (work/tmp) aside
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                      if "tmp" not in p.relative_to(tmp_path).parts)

    before = listing()
    for args in (["sweep", str(path)], ["sweep", str(path), "--replace"]):
        result = run_rmqsim(args, work, 60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "name:" in result.stderr and "a name is" in result.stderr
    assert listing() == before and (work / "precious.txt").read_text() == "keep me"


def test_replace_refuses_a_directory_holding_user_files(tmp_path):
    """--replace deletes a directory only if it holds an rmqsim sweep and nothing else."""
    sweep = load_sweep(write_sweep(tmp_path, "mine", set=SHORT, seeds=1))
    other = manifest(sweep)
    root = tmp_path / "root"
    sweep_dir.prepare(root, dict(other, digest="another-sweep"))
    (root / "precious.txt").write_text("keep me")
    store.write_run_row(root, {"run_id": "p0000-s1", "sweep_digest": "another-sweep", "status": "ok"},
                        store.runs_schema(sweep.param_types))
    listing = sorted(p.name for p in root.rglob("*"))
    with pytest.raises(sweep_dir.ForeignDirectory, match="'precious.txt', which rmqsim did not write"):
        sweep_dir.prepare(root, other, replace=True)
    assert sorted(p.name for p in root.rglob("*")) == listing
    (root / "precious.txt").unlink()
    sweep_dir.prepare(root, other, replace=True)  # now it is only a sweep: replaced
    assert not (root / "runs").exists() and sweep_dir.read_manifest(root)["digest"] == other["digest"]


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'{"name": "photos", "albums": []}', b"[]"])
def test_replace_never_deletes_a_directory_with_an_unrecognised_manifest(tmp_path, content):
    root = tmp_path / "root"
    root.mkdir()
    (root / sweep_dir.MANIFEST).write_bytes(content)
    (root / "runs").mkdir()
    with pytest.raises(sweep_dir.ForeignDirectory, match="not touching"):
        sweep_dir.prepare(root, {"digest": "x"}, replace=True)
    assert (root / sweep_dir.MANIFEST).read_bytes() == content and (root / "runs").is_dir()


def test_a_new_sweep_needs_an_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(sweep_dir.ForeignDirectory, match="not empty and holds no sweep"):
        sweep_dir.prepare(tmp_path, {"digest": "x"})
    assert not (tmp_path / sweep_dir.MANIFEST).exists()


# ---------------------------------------------------------------- bases: foreign files

@pytest.mark.parametrize("base", ["/etc/passwd", "/proc/meminfo", "/etc/shadow", "SECRET"])
def test_foreign_base_content_is_never_echoed(tmp_path, base):
    if base == "SECRET":
        secret = tmp_path / "secret.yaml"
        secret.write_text("DB_PASSWORD_SECRET: hunter2hunter2\nproducers: [{name: API_TOKEN_abcdef012345}]\n")
        base = str(secret)
    if not Path(base).exists():
        pytest.skip(f"{base} does not exist here")
    problems = sweep_problems(tmp_path, base=base)
    (problem,) = [p for p in problems if p.startswith("base:")]
    message = "\n".join(problems)
    try:
        assert_no_foreign_content(message, Path(base).read_text(errors="replace"))
    except PermissionError:
        pass  # not readable by this user: rmqsim could not have read it either
    assert len(problem) < 400, problem


@pytest.mark.parametrize("base, fragment", [
    ("/proc/self/mem", "cannot read it"),
    ("/dev/zero", "not a regular file"),
    ("a\0b.yaml", "NUL byte"),
    ("x" * 5000, "at most 1024 characters"),
    ("", "at least 1 character"),
    ("FIFO", "not a regular file"),
    ("DIR", "not a regular file"),
    ("LOOP", "cannot read it"),
])
def test_hostile_bases_are_clean_errors(tmp_path, base, fragment):
    if base == "FIFO":
        base = str(tmp_path / "fifo")
        os.mkfifo(base)
    elif base == "DIR":
        base = str(tmp_path)
    elif base == "LOOP":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        base = str(tmp_path / "loop")
    started = time.monotonic()
    problems = sweep_problems(tmp_path, base=base)
    assert time.monotonic() - started < 10
    assert any(p.startswith("base") and fragment in p for p in problems), problems


# ---------------------------------------------------------------- key paths, seeds, size

@pytest.mark.parametrize("key", ["producers[x]", "..", "]]", "", "producers[0", "a..b"])
def test_bad_sweep_key_paths(tmp_path, key):
    problems = sweep_problems(tmp_path, grid={"rate": {"key": key, "values": [1]}})
    assert any(p.startswith("grid.rate.key:") for p in problems), problems
    problems = sweep_problems(tmp_path, set={key: 1})
    assert any(p.startswith("set") for p in problems), problems


@pytest.mark.parametrize("seeds, fragment", [
    (1e9, "less than or equal to 100000"),
    ([], "at least 1 item"),
    ([2**63], "less than or equal to 9223372036854775807"),
    ([-1], "greater than or equal to 0"),
    (True, "boolean"),
    ([1, 1], "listed more than once"),
])
def test_bad_seeds(tmp_path, seeds, fragment):
    started = time.monotonic()
    problems = sweep_problems(tmp_path, seeds=seeds)
    assert time.monotonic() - started < 10, "seeds must not be materialised before they are checked"
    assert any(p.startswith("seeds") and fragment in p for p in problems), problems


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_big_grid_states_its_size_before_work(tmp_path):
    """A 10^6-point grid: counted from the lists, each distinct value validated once (the issue:
    228 s of silence), and refused without --yes."""
    values = list(range(1, 1001))
    path = write_sweep(tmp_path, "big", set=SHORT, seeds=1, grid={
        "rate": {"key": "producers[0].rate_per_s", "values": values},
        "batch": {"key": "consumers[0].client.pull_batch_size", "values": values}})
    started = time.monotonic()
    dry = run_rmqsim(["sweep", str(path), "--dry-run"], tmp_path, 120)
    assert dry.returncode == 0, dry.stderr
    assert "1,000,000 points × 1 seeds = 1,000,000 runs" in dry.stdout + dry.stderr
    assert "... and 999,980 more points" in dry.stdout
    assert "validating (each distinct value once)" in dry.stderr
    refused = run_rmqsim(["sweep", str(path)], tmp_path, 120)
    assert refused.returncode == 2 and f"more than {CONFIRM_RUNS:,}; pass --yes" in refused.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / "sweeps").exists()


def test_dry_run_rejects_what_executors_would_fail_on(tmp_path):
    """base "", seeds [], a seed of 2^63: accepted by --dry-run before, then failed in executors."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "base": "", "seeds": []}))
    result = run_rmqsim(["sweep", str(path), "--dry-run"], tmp_path, 60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "base:" in result.stderr and "seeds:" in result.stderr


# ---------------------------------------------------------------- damaged directories, resume and report

def _sweep_with_rows(tmp_path: Path) -> tuple[Any, Path]:
    """A sweep directory with two `runs` rows written as executors write them (no Spark)."""
    sweep = load_sweep(write_sweep(tmp_path, "resumable", set=SHORT, seeds=[1, 2]))
    out = tmp_path / "out"
    sweep_dir.prepare(out, manifest(sweep))
    schema = store.runs_schema(sweep.param_types)
    for seed in (1, 2):
        store.write_run_row(out, {"run_id": f"p0000-s{seed}", "sweep": sweep.name, "sweep_digest": sweep.digest(),
                                  "point": 0, "point_key": "", "seed": seed, "status": "ok"}, schema)
    return sweep, out


def test_resume_redoes_damaged_runs_and_removes_leftovers(tmp_path):
    sweep, out = _sweep_with_rows(tmp_path)
    runs = out / store.RUNS
    data = (runs / "p0000-s2.parquet").read_bytes()
    (runs / "p0000-s2.parquet").write_bytes(data[: len(data) // 2])  # truncated by a crash or a full disk
    (runs / ".p0000-s1.parquet.tmp-4242").write_bytes(b"half")
    (runs / ".p0000-s1.attempt-1").write_text("4242")
    notes = sweep_dir.prepare(out, manifest(sweep))
    assert notes == ["removed 2 leftover temporary file(s) of an interrupted sweep"]
    assert sorted(p.name for p in runs.iterdir()) == ["p0000-s1.parquet", "p0000-s2.parquet"]
    log: list[str] = []

    class Log:
        def write(self, text: str) -> None:
            log.append(text)

    status = sweep_dir.completed(out, sweep.digest(), {"p0000-s1", "p0000-s2"}, Log())
    assert status == {"p0000-s1": "ok"}  # s2 will be redone
    assert not (runs / "p0000-s2.parquet").exists() and "will be redone" in "".join(log)


def test_resume_refuses_files_that_are_no_runs(tmp_path):
    sweep, out = _sweep_with_rows(tmp_path)
    (out / store.RUNS / "holiday.parquet").write_bytes(b"PAR1")
    with pytest.raises(sweep_dir.ForeignDirectory, match="holiday.parquet"):
        sweep_dir.completed(out, sweep.digest(), {"p0000-s1", "p0000-s2"})


def test_resume_redoes_a_run_copied_from_another_sweep(tmp_path):
    sweep, out = _sweep_with_rows(tmp_path)
    schema = store.runs_schema(sweep.param_types)
    store.write_run_row(out, {"run_id": "p0000-s2", "sweep_digest": "0" * 64, "status": "ok"}, schema)
    assert sweep_dir.completed(out, sweep.digest(), {"p0000-s1", "p0000-s2"}) == {"p0000-s1": "ok"}


@pytest.mark.parametrize("damage, fragment", [
    ("truncate", "not readable Parquet"),
    ("foreign_digest", "not runs of the sweep"),
    ("manifest_json", "damaged JSON"),
    ("manifest_shape", "lacks or garbles"),
])
def test_report_refuses_damaged_or_foreign_directories(tmp_path, damage, fragment):
    sweep, out = _sweep_with_rows(tmp_path)
    runs = out / store.RUNS
    if damage == "truncate":
        (runs / "p0000-s1.parquet").write_bytes((runs / "p0000-s1.parquet").read_bytes()[:100])
    elif damage == "foreign_digest":
        store.write_run_row(out, {"run_id": "p0000-s2", "sweep_digest": "f" * 64, "status": "ok"},
                            store.runs_schema(sweep.param_types))
    elif damage == "manifest_json":
        (out / sweep_dir.MANIFEST).write_text('{"name": "resumable", "dig')
    else:
        data = json.loads((out / sweep_dir.MANIFEST).read_text())
        data["grid"] = ["rate` FROM runs; --"]
        (out / sweep_dir.MANIFEST).write_text(json.dumps(data))
    result = run_rmqsim(["report", str(out)], tmp_path, 60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr, result.stderr
    assert not (out / "report").exists()


def test_bundled_sweeps_still_validate():
    for path in sorted((ROOT / "scenarios" / "sweeps").glob("*.yaml")):
        sweep = load_sweep(path)
        assert sweep.n_runs == len(sweep.runs) and sweep.n_runs <= CONFIRM_RUNS


# ---------------------------------------------------------------- Spark retries, job failures

@pytest.mark.parametrize("master, parallelism, expected", [
    ("local", None, "local[1,3]"), ("local[*]", None, "local[*,3]"), ("local[4]", None, "local[4,3]"),
    ("local[2,5]", None, "local[2,5]"), ("local[2, 1]", None, "local[2,3]"), ("local[*]", 2, "local[2,3]"),
    ("local-cluster[2,1,1024]", None, "local-cluster[2,1,1024]")])
def test_local_masters_retry_lost_workers(master, parallelism, expected):
    from analysis.sweeps.sweep import local_master

    assert local_master(master, parallelism) == expected


def test_a_failed_spark_job_is_one_line():
    from analysis.sweeps.sweep import _first_line

    java = RuntimeError("An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: Job "
                        "aborted due to stage failure: Task 1 in stage 0.0 failed 3 times, most recent failure: "
                        "Lost task (TID 7): org.apache.spark.api.python.PythonException\n\tat org.apache...\n" * 50)
    line = _first_line(java)
    assert line.startswith("Job aborted due to stage failure: Task 1 in stage 0.0 failed 3 times") and "\n" not in line
