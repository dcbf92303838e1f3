#!/usr/bin/env bash
# The main job: set up; run the bundled baseline scenario and print its summary; run the first
# bundled sweep (scenarios/sweeps/, name order: the quick one) on local Spark; build its report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/rmqsim run scenarios/baseline.yaml
sweep="$(ls scenarios/sweeps/*.yaml | sort | head -n 1)"
name="$(awk '/^name:/ {print $2; exit}' "$sweep")"
# --replace: results left by an older version of the simulator are started afresh, not mixed
.venv/bin/rmqsim sweep "$sweep" --out "sweeps/$name" --replace
.venv/bin/rmqsim report "sweeps/$name"
echo "open sweeps/$name/report/index.html (figures also as PNG and SVG in that folder)"
