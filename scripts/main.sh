#!/usr/bin/env bash
# The main job: set up; run the bundled baseline scenario and print its summary; run the first
# bundled sweep (scenarios/sweeps/, name order: the quick one) in local worker processes; build its report.
# Each part a line when it starts and its time when it ends (as scripts/setup.sh's steps).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
part() {  # "$1": what; then the command
  local what="$1" start=$SECONDS
  shift
  echo "main: $what ..." >&2
  "$@"
  echo "main: $what ... $((SECONDS - start)) s" >&2
}
part "setting up" bash scripts/setup.sh
part "running the baseline scenario" .venv/bin/rmqsim run scenarios/baseline.yaml
sweep="$(ls scenarios/sweeps/*.yaml | sort | head -n 1)"
name="$(awk '/^name:/ {print $2; exit}' "$sweep")"
# --replace: results left by an older version of the simulator are started afresh, not mixed
part "running the sweep $name (local workers)" .venv/bin/rmqsim sweep "$sweep" --out "sweeps/$name" --replace
part "building its report" .venv/bin/rmqsim report "sweeps/$name"
echo "main: done in $((SECONDS - START)) s" >&2
echo "open sweeps/$name/report/index.html (figures also as PNG and SVG in that folder)"
