#!/usr/bin/env bash
# The known-behaviours atlas (issue 42): run every scenarios/atlas/NN_*.yaml on seeds 1-5 (seed 1 with
# --trace and the entry's explain command), write docs/atlas/results.json, then regenerate
# docs/atlas.md. Arguments go to `gen_atlas.py sweep`: --only 01,10 reruns some entries, --jobs N.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
status=0
"$PY" scripts/gen_atlas.py sweep "$@" || status=$?
"$PY" scripts/gen_docs.py
exit "$status"
