"""Fuzz through the real command line: `rmqsim validate` and `rmqsim sweep --dry-run` on a sample
of the mutations (most are tested in-process, in test_fuzz_scenarios.py and
test_fuzz_sweeps.py). Each exits 0 or 2, never prints a traceback, and finishes within a time
and address-space bound.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from tests.conftest import ROOT
from tests.fuzz.conftest import budget, record
from tests.fuzz.test_fuzz_scenarios import scenario_mutations
from tests.fuzz.test_fuzz_sweeps import sweep_mutations, write_mutation

TIMEOUT_S = 60
ADDRESS_SPACE_BYTES = 6 * 2**30  # numpy and pyarrow map a lot of address space; RSS stays far lower


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def rmqsim(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          errors="replace", timeout=TIMEOUT_S, preexec_fn=_limit_memory,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def assert_clean_exit(result: subprocess.CompletedProcess, note: str) -> str:
    output = result.stdout + result.stderr
    assert result.returncode in (0, 2), f"{note}: exit {result.returncode}\n{output[-2000:]}"
    assert "Traceback" not in output, f"{note}:\n{output[-2000:]}"
    if result.returncode == 2:
        assert result.stderr.strip(), f"{note}: exit 2 without a message"
    return "accepted" if result.returncode == 0 else "clean error"


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
@budget(14)
@given(case=scenario_mutations())
def test_validate_exits_0_or_2(tmp_path_factory, case: tuple[str, Any]):
    name, mutation = case
    tmp = tmp_path_factory.mktemp("cli", numbered=True)
    (tmp / "scenario.yaml").write_bytes(mutation.content)
    args = ["validate", "scenario.yaml"] + [f"--set={item}" for item in mutation.overrides]
    outcome = assert_clean_exit(rmqsim(args, tmp), f"{name} {mutation.kind} {mutation.note}")
    assert not (mutation.must_fail and outcome == "accepted"), f"{name} {mutation.kind} {mutation.note}: accepted"
    record(f"cli:{name}", mutation.kind, outcome)


@budget(7)
@given(case=sweep_mutations())
def test_sweep_dry_run_exits_0_or_2(tmp_path_factory, case: tuple[str, Any]):
    name, mutation = case
    tmp = tmp_path_factory.mktemp("cli", numbered=True)
    path, _foreign = write_mutation(tmp, mutation)
    outcome = assert_clean_exit(rmqsim(["sweep", path.name, "--dry-run"], tmp), f"{name} {mutation.kind} {mutation.note}")
    assert not (mutation.must_fail and outcome == "accepted"), f"{name} {mutation.kind} {mutation.note}: accepted"
    record(f"cli:{name}", mutation.kind, outcome)
    assert not (tmp / "sweeps").exists(), "a dry run wrote output"
