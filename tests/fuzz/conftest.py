"""Shared pieces of the fuzz tests: the bundled documents, the example budget, outcome records.

Budget: the CI profile runs a fixed number of examples per test, derandomized (the same
examples on every run and machine), without deadlines; about 40 to 50 s for the whole fuzz
suite on two cores. `RMQSIM_FUZZ_EXAMPLES=N` multiplies each test's budget by N/100 (so 100 is
the CI budget, 2000 twenty times it) for a longer run on demand, e.g.

    RMQSIM_FUZZ_EXAMPLES=2000 RMQSIM_FUZZ_REPORT=/tmp/fuzz.jsonl .venv/bin/python -m pytest tests/fuzz

`RMQSIM_FUZZ_REPORT=path` appends one JSON line per example (target file, kind, outcome) for
the table of outcomes by kind (`python -m tests.fuzz.report path`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from sim.inputs import load_yaml
from tests.conftest import ROOT

BUNDLED_SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
EXEMPLAR = Path(__file__).with_name("exemplar.yaml")  # every list element and distribution kind
SCENARIOS = [*BUNDLED_SCENARIOS, EXEMPLAR]
SWEEPS = sorted((ROOT / "scenarios" / "sweeps").glob("*.yaml"))
SCALE = int(os.environ.get("RMQSIM_FUZZ_EXAMPLES", "100"))


def budget(examples: int) -> settings:
    """Hypothesis settings for a test with `examples` examples in CI (scaled on demand)."""
    return settings(max_examples=max(1, examples * SCALE // 100), derandomize=True, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck), print_blob=True)


def parsed(path: Path) -> Any:
    return load_yaml(path.read_text(encoding="utf-8"))


def record(target: str, kind: str, outcome: str) -> None:
    """One example's outcome, appended to $RMQSIM_FUZZ_REPORT when set."""
    path = os.environ.get("RMQSIM_FUZZ_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"target": target, "kind": kind, "outcome": outcome}) + "\n")
