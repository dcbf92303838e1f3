#!/usr/bin/env bash
# Set up (with headless Chromium for the report test), lint (ruff, the import floors, mypy), run the test suite
# but its `slow` tests. `scripts/test.sh --slow` runs only the `slow` tests (after the same set-up and lint):
# the seeds after the first of every seed-parametrized test (tests/conftest.py), the tests over about 7 s,
# and the standalone Spark cluster tests (`serial`: alone, after the others).
# Other arguments go to pytest (.ci/run passes --durations=30).
set -euo pipefail
cd "$(dirname "$0")/.."
slow=0
if [[ "${1:-}" == "--slow" ]]; then slow=1; shift; fi
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache   # the floors (pyproject.toml [tool.importlinter]; sim/__init__.py)
.venv/bin/python scripts/typecheck.py   # mypy: none in sim/ and models/, no new one elsewhere
if (( slow )); then
  # the `slow` tests (pyproject.toml markers): whole sweeps, long scenarios over several seeds; then the
  # `serial` ones alone (standalone Spark clusters whose start and stop are timed)
  .venv/bin/python -m pytest -q -n auto --dist loadfile -m "slow and not serial" "$@"
  .venv/bin/python -m pytest -q -m "slow and serial" "$@"
  exit 0
fi
# one pytest worker per core (pytest-xdist), each test file on one worker: module fixtures run once;
# a `serial` test is also `slow` (run by --slow, alone)
.venv/bin/python -m pytest -q -n auto --dist loadfile -m "not serial and not slow" "$@"
