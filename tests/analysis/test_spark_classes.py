"""The report JVM's class archive (analysis/sweeps/spark_classes.py): made once by `rmqsim report`, used
by the next reports, silently ignored when unusable, and a writer's abandoned file cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from analysis.sweeps import spark_classes
from analysis.sweeps.sweep import REPORT_JAVA_OPTIONS
from tests.analysis.test_sweep_report import fabricated_sweep
from tests.conftest import ROOT


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_options_use_an_archive_or_make_one_only_when_asked(tmpdir_here: Path, monkeypatch) -> None:
    monkeypatch.setattr(spark_classes, "_pending", {})
    archive = spark_classes.archive_path(REPORT_JAVA_OPTIONS)
    assert archive.parent == tmpdir_here and archive.name.startswith(spark_classes.PREFIX)
    assert spark_classes.archive_path(REPORT_JAVA_OPTIONS + " -Xss4m") != archive  # other JVM options, other file
    assert spark_classes.options(REPORT_JAVA_OPTIONS, keep=False) == "" and not spark_classes.pending()
    made = spark_classes.options(REPORT_JAVA_OPTIONS, keep=True)
    assert made.startswith(f"-XX:ArchiveClassesAtExit={tmpdir_here}/.{archive.name}.tmp-{os.getpid()} ")
    assert "-Xlog:cds*=off" in made and "-XX:+IgnoreUnrecognizedVMOptions" in made and spark_classes.pending()
    archive.write_bytes(b"an archive")
    assert spark_classes.options(REPORT_JAVA_OPTIONS, keep=True).startswith(f"-XX:SharedArchiveFile={archive} ")


def test_an_abandoned_temporary_archive_is_removed_once_its_writer_is_gone(tmpdir_here: Path, monkeypatch) -> None:
    monkeypatch.setattr(spark_classes, "_pending", {})
    archive = spark_classes.archive_path(REPORT_JAVA_OPTIONS)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmpdir_here / f".{archive.name}.tmp-{int(gone.stdout)}"
    alive = tmpdir_here / f".{archive.name}.tmp-1"  # pid 1 is always running
    mine = tmpdir_here / "rmqsim-spark-classes-notes.txt"
    for path in (dead, alive, mine):
        path.write_text("x")
    spark_classes.options(REPORT_JAVA_OPTIONS, keep=True)
    assert not dead.exists() and alive.exists() and mine.exists()


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_the_first_report_keeps_the_classes_and_the_next_maps_them(tmp_path: Path) -> None:
    (tmp_path / "sweep").mkdir()
    out = fabricated_sweep(tmp_path / "sweep")
    env = {**os.environ, "TMPDIR": str(tmp_path), "RMQSIM_SWEEP_ENGINE": "spark"}  # a local report has no JVM
    rmqsim = [sys.executable, "-m", "rmqsim.cli", "report", str(out)]
    first = subprocess.run(rmqsim, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr
    (archive,) = tmp_path.glob(f"{spark_classes.PREFIX}*.jsa")
    assert "keeping Spark's parsed classes" in first.stderr and archive.stat().st_size > 10 << 20
    assert not list(tmp_path.glob(f".{spark_classes.PREFIX}*"))  # renamed into place, nothing left
    made = archive.stat().st_mtime_ns
    second = subprocess.run(rmqsim, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert second.returncode == 0 and "keeping" not in second.stderr, second.stderr
    assert "[warning][cds]" not in first.stderr + second.stderr and archive.stat().st_mtime_ns == made
    assert (out / "report" / "index.html").read_text().count('<figure id="') >= 3
    archive.unlink()  # about 150 MB: not left in pytest's kept temporary folders
