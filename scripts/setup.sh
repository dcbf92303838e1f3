#!/usr/bin/env bash
# Set up rmqsim on a fresh machine, exactly as locked: a venv (.venv) holding uv at the version and
# hashes of requirements/uv.txt (in .venv/uv/), then every dependency at the version and hash of
# uv.lock (`uv sync --frozen`: a package changed by hand is put back, one the lock lacks removed)
# and the project itself (editable); then the modules with a `.pxd` beside them compiled in place
# (sim/compiled.py; needs a C compiler; only those changed since are rebuilt); the Python sources
# compiled to bytecode; and a Java 17+ runtime for Spark (installed with apt-get when running as
# root; otherwise a clear stop).
# It says what it does: each step a line when it starts and its time when it ends, uv's and pip's
# own progress, a line per compiled module, and never more than 10 s without a line. About a
# minute and a half on 2 cores with a warm package cache (README: "Set up").
#   --test       also headless Chromium (the report test renders the HTML page in it)
#   --uv-only    only .venv and uv (scripts/lock.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_BROWSER=0
UV_ONLY=0
case "${1:-}" in
  --test) WITH_BROWSER=1 ;;
  --uv-only) UV_ONLY=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--test | --uv-only]" >&2; exit 2 ;;
esac

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "rmqsim needs Python >= 3.11 (found: $("$PY" --version 2>&1 || echo none)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

STEP="" STEP_START=0
step() {  # a step's first line
  STEP="$1" STEP_START=$SECONDS
  echo "setup: $STEP ..." >&2
}
step_done() {  # its last: the same words and its time
  echo "setup: $STEP ... $((SECONDS - STEP_START)) s" >&2
}

with_heartbeat() {  # run "$@" with its output in $log, saying every 10 s that it still runs; its exit code
  heartbeat_while "$log" "$@"
}

shown_with_heartbeat() {  # the same, its own output (progress) shown on stderr
  heartbeat_while /dev/stderr "$@"
}

heartbeat_while() {
  local out="$1" start=$SECONDS last=$SECONDS pid
  shift
  "$@" >>"$out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last >= 10)); then
      echo "  ... still ${STEP} ($((SECONDS - start)) s)" >&2
      last=$SECONDS
    fi
  done
  wait "$pid"
}

ensure_java() {
  if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    step "installing a headless Java 17+ runtime for Spark (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    with_heartbeat apt-get update -qq || true
    with_heartbeat apt-get install -y -qq openjdk-17-jre-headless \
      || with_heartbeat apt-get install -y -qq default-jre-headless || true
    if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
      step_done
      return 0
    fi
  fi
  echo "rmqsim's sweeps need Java 17 or newer for Spark, and it could not be installed here (log: $log)." >&2
  echo "Install a JRE 17+ (e.g. 'apt-get install openjdk-17-jre-headless') or set JAVA_HOME, then rerun." >&2
  exit 1
}

chromium_bin() {
  command -v chromium || command -v chromium-browser || command -v google-chrome || true
}

ensure_chromium() {
  if [ -n "$(chromium_bin)" ]; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    step "installing headless Chromium for the report test (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    with_heartbeat apt-get update -qq || true
    with_heartbeat apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core || true
    if [ -n "$(chromium_bin)" ]; then
      step_done
      return 0
    fi
  fi
  echo "the report test needs headless Chromium, and it could not be installed here (log: $log)." >&2
  echo "Install it (e.g. 'apt-get install chromium') and rerun." >&2
  exit 1
}

uv_pinned() {
  awk -F'[=; ]+' '/^uv==/ {print $2; exit}' requirements/uv.txt
}

ensure_uv() {  # uv at the pinned version, from its hashed wheels, in .venv/uv/ (not in the venv's site-packages)
  if [ -x .venv/uv/bin/uv ] && [ "$(.venv/uv/bin/uv --version 2>/dev/null | awk '{print $2}')" = "$(uv_pinned)" ]; then
    return 0
  fi
  step "installing uv $(uv_pinned) from its hashed wheels (pip)"
  rm -rf .venv/uv
  # the interpreter's own pip, else the venv's (made by ensurepip: the venv is made without one,
  # which uv sync would remove as unlocked anyway)
  local pip=("$PY" -m pip)
  if ! "$PY" -m pip --version >>"$log" 2>&1; then
    pip=(.venv/bin/python -m pip)
    with_heartbeat .venv/bin/python -m ensurepip || true
  fi
  if ! shown_with_heartbeat "${pip[@]}" install --disable-pip-version-check --require-hashes --no-deps \
      --target .venv/uv -r requirements/uv.txt; then
    echo "installing uv $(uv_pinned) failed (pip's output above; log: $log)" >&2
    exit 1
  fi
  step_done
}

SETUP_START=$SECONDS
mkdir -p .venv
log=.venv/setup.log
: >"$log"
if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment .venv ($("$PY" --version 2>&1))"
  with_heartbeat "$PY" -m venv --without-pip .venv || { echo "creating .venv failed (log: $log)" >&2; exit 1; }
  step_done
fi
ensure_uv
[ "$UV_ONLY" = "1" ] && exit 0
# exactly the lock: --frozen never re-resolves, and the sync is exact (extraneous packages go);
# the venv's own interpreter is kept (no Python download), the project built with the locked
# setuptools; its modules are compiled by the next step, which says what it does
# (RMQSIM_PURE_BUILD=1: the editable install itself compiles nothing, in a temporary directory)
step "installing the locked set (uv sync: $(grep -c '^\[\[package\]\]' uv.lock) packages, the project editable)"
if ! RMQSIM_PURE_BUILD=1 UV_PYTHON_DOWNLOADS=never shown_with_heartbeat .venv/uv/bin/uv sync --frozen --all-extras; then
  echo "installing the locked dependencies failed (uv's output above)" >&2
  exit 1
fi
.venv/bin/python -c 'import simpy, pydantic, yaml, pyspark, matplotlib, pytest' \
  || { echo "dependency installation failed: a locked package does not import (uv's output above)" >&2; exit 1; }
step_done
# compiles what is not built from its current source, a line per module (sim/compiled.py: main)
if ! .venv/bin/python -c 'import sys, sim.compiled as c; sys.exit(c.main())'; then
  echo "compiling the per-message modules failed (the last lines above; all of it in build/build_ext.log;" >&2
  echo "it needs gcc and the Python headers)." >&2
  echo "rmqsim runs without them, about 1.5x slower; setting up stops here so that this is not missed." >&2
  exit 1
fi
# Python writes a module's bytecode (__pycache__) when it first imports it, unless
# PYTHONDONTWRITEBYTECODE is set: then every command compiles rmqsim's sources anew (`rmqsim
# validate` 0.34 s instead of 0.28, 44 % more instructions). So they are compiled here, and what the
# commands' start-up imports from the venv (pydantic, PyYAML, SimPy, NumPy) with them.
step "compiling rmqsim's Python sources and its start-up's imports to bytecode"
if ! with_heartbeat env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m compileall -q -j 0 sim models analysis rmqsim \
    || ! with_heartbeat env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c \
      'import rmqsim.cli, rmqsim.scenario.spec, rmqsim.scenario.lint, rmqsim.runner'; then
  echo "compiling to bytecode failed (log: $log)" >&2
  exit 1
fi
step_done
ensure_java
if [ "$WITH_BROWSER" = "1" ]; then
  ensure_chromium
fi
echo "rmqsim is set up ($((SECONDS - SETUP_START)) s): $(.venv/bin/python --version), java $(java_major)" >&2
