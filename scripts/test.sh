#!/usr/bin/env bash
# Set up (with headless Chromium for the report test), lint (ruff, the import floors, mypy), run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache   # the floors (pyproject.toml [tool.importlinter]; sim/__init__.py)
.venv/bin/python scripts/typecheck.py   # mypy: none in sim/ and models/, no new one elsewhere
# one pytest worker per core (pytest-xdist), each test file on one worker: module fixtures run once;
# then the `serial` tests alone (a standalone Spark cluster whose start and stop are timed)
.venv/bin/python -m pytest -q -n auto --dist loadfile -m "not serial" "$@"
.venv/bin/python -m pytest -q -m serial "$@"
