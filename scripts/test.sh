#!/usr/bin/env bash
# Set up (with headless Chromium for the report test), lint, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
