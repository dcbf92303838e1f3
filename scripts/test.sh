#!/usr/bin/env bash
# Set up (with headless Chromium for the report test), lint (ruff, the import floors, mypy), run the test suite
# but its `slow` tests. `scripts/test.sh --slow` runs only the `slow` tests (after the same set-up and lint):
# the seeds after the first of every seed-parametrized test (tests/conftest.py), the tests over about 5 s (or whose module fixture takes over 20 s),
# and the standalone Spark cluster tests (`serial`: alone, after the others).
# Other arguments go to pytest (.ci/run passes --durations=30).
set -euo pipefail
cd "$(dirname "$0")/.."
slow=0
if [[ "${1:-}" == "--slow" ]]; then slow=1; shift; fi
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache   # the floors (pyproject.toml [tool.importlinter]; sim/__init__.py)
# mypy (none in sim/ and models/, no new one elsewhere) runs beside the tests: one core for about 20 s,
# which alone it would leave idle; its verdict is waited for at the end and fails the script as before
typecheck_log="$(mktemp)"
.venv/bin/python scripts/typecheck.py >"$typecheck_log" 2>&1 &
typecheck_pid=$!
typecheck_done() {
  local code=0
  wait "$typecheck_pid" || code=$?
  cat "$typecheck_log"
  rm -f "$typecheck_log"
  return "$code"
}
trap 'kill "$typecheck_pid" 2>/dev/null || true; rm -f "$typecheck_log"' EXIT
if (( slow )); then
  # the `slow` tests (pyproject.toml markers): whole sweeps, long scenarios over several seeds; then the
  # `serial` ones alone (standalone Spark clusters whose start and stop are timed)
  .venv/bin/python -m pytest -q -n auto --dist loadfile -m "slow and not serial" "$@"
  typecheck_done   # before the serial tests, which time their clusters
  .venv/bin/python -m pytest -q -m "slow and serial" "$@"
  exit 0
fi
# one pytest worker per core (pytest-xdist), each test file on one worker: module fixtures run once;
# a `serial` test is also `slow` (run by --slow, alone)
.venv/bin/python -m pytest -q -n auto --dist loadfile -m "not serial and not slow" "$@"
typecheck_done
