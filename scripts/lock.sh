#!/usr/bin/env bash
# Refresh the lock: re-resolve every dependency (pyproject.toml) to the newest versions the
# registry serves today, with their hashes, into uv.lock; and uv itself into requirements/uv.txt.
# Run it when a dependency in pyproject.toml changes or to take updates on purpose, then run
# `bash scripts/test.sh` and commit uv.lock and requirements/uv.txt together (README: "The lock").
#   bash scripts/lock.sh              # uv.lock from pyproject.toml (upgrades everything)
#   UV_VERSION=0.14.0 bash scripts/lock.sh   # also move uv itself to that version
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --uv-only
UV=.venv/uv/bin/uv
if [ -n "${UV_VERSION:-}" ]; then
  in="$(mktemp)"
  echo "uv==$UV_VERSION" >"$in"
  { sed -n '1,2p' requirements/uv.txt
    "$UV" pip compile --generate-hashes --universal --no-header -q "$in"; } >requirements/uv.txt.new
  mv requirements/uv.txt.new requirements/uv.txt
  rm -f "$in"
  rm -rf .venv/uv
  bash scripts/setup.sh --uv-only
fi
"$UV" lock --upgrade --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')"
echo "uv.lock refreshed; now: bash scripts/test.sh, then commit uv.lock (and requirements/uv.txt)" >&2
