#!/usr/bin/env bash
# The main job: set up, then run the bundled baseline scenario and print its summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/rmqsim run scenarios/baseline.yaml "$@"
