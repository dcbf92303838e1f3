"""The lock is the set that is installed (README: "The lock").

`uv.lock` must agree with `pyproject.toml` (a dependency edited without `scripts/lock.sh` fails
here), `requirements/uv.txt` must pin uv with hashes, and the venv the tests run in must hold
exactly the locked packages at the locked versions (what `scripts/setup.sh` installs with
`uv sync --frozen`). Both checks run offline against uv's cache, in well under a second.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

UV = ROOT / ".venv" / "uv" / "bin" / "uv"
needs_uv = pytest.mark.skipif(not UV.exists(), reason="no .venv/uv/bin/uv (scripts/setup.sh installs it)")


def _uv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(UV), *args, "--offline", "--no-progress"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
                                                       "UV_PYTHON_DOWNLOADS": "never"})


def test_uv_is_pinned_with_hashes():
    text = (ROOT / "requirements" / "uv.txt").read_text()
    assert re.search(r"^uv==\d+\.\d+\.\d+", text, re.M), text[:200]
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", text)) >= 5  # one per platform wheel and the sdist


def test_every_locked_file_has_a_hash():
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    for package in lock["package"]:
        if package.get("source", {}).get("editable"):
            continue  # the project itself
        files = [package.get("sdist"), *package.get("wheels", [])]
        files = [f for f in files if f]
        assert files, package["name"]
        assert all(f.get("hash", "").startswith("sha256:") for f in files), package["name"]


def test_setup_installs_the_lock_frozen():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "uv sync --frozen" in setup and "--require-hashes" in setup


@needs_uv
def test_lock_agrees_with_pyproject():
    done = _uv("lock", "--check")
    assert done.returncode == 0, f"uv.lock is out of date with pyproject.toml: run scripts/lock.sh\n{done.stderr}"


@needs_uv
def test_the_venv_holds_exactly_the_lock():
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("the tests do not run in the project's .venv")
    done = _uv("sync", "--frozen", "--all-extras", "--dry-run")
    assert done.returncode == 0, done.stderr
    changes = [line for line in done.stderr.splitlines()
               if line.lstrip().startswith(("+ ", "- ")) and not re.search(r"\brmqsim\b", line)]
    assert not changes, "the venv differs from uv.lock (run scripts/setup.sh):\n" + "\n".join(changes)


def test_pyproject_names_the_lock_settings():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "rmqsim" in project["tool"]["uv"]["no-build-isolation-package"]
