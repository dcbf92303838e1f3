"""What CI runs (scripts/test.sh: `-m "not serial and not slow"`) and what it leaves to
`scripts/test.sh --slow`, as tests/conftest.py's collection hook decides: a seed-parametrized test
keeps its first seed, whatever the parameter's position or form; its other seeds, and every `serial`
test, are `slow`. Checked by collecting a small test file with this repository's conftest in a child
pytest, so the rule is the one the suite itself runs under."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SAMPLE = '''
import pytest

@pytest.mark.parametrize("seed", (3, 1, 2))
def test_plain(seed):
    pass

@pytest.mark.parametrize("kind,seed", [("a", 5), ("b", 6), pytest.param("c", 7, id="c7")])
def test_pair(kind, seed):
    pass

@pytest.mark.parametrize("seed", [pytest.param(9, id="nine"), 10])
def test_param_form(seed):
    pass

@pytest.mark.parametrize("n", (1, 2))
def test_not_a_seed(n):
    pass

@pytest.mark.serial
def test_cluster():
    pass
'''


def _collected(tmp_path: Path, marks: str) -> set[str]:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "__init__.py").write_text("")
    (tests / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: s\n    serial: s\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-m", marks, "tests/test_sample.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return {line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line}


def test_ci_keeps_each_seed_parametrized_tests_first_seed_and_plain_tests(tmp_path: Path) -> None:
    assert _collected(tmp_path, "not serial and not slow") == {
        "test_plain[3]", "test_pair[a-5]", "test_param_form[nine]", "test_not_a_seed[1]", "test_not_a_seed[2]"}


def test_the_slow_run_has_the_other_seeds_and_the_serial_tests(tmp_path: Path) -> None:
    assert _collected(tmp_path, "slow") == {
        "test_plain[1]", "test_plain[2]", "test_pair[b-6]", "test_pair[c7]", "test_param_form[10]", "test_cluster"}
