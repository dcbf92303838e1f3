#!/usr/bin/env bash
# Set up rmqsim on a fresh machine: Python venv with the project and its test tools, the
# per-message modules compiled with Cython (sim/compiled.py; needs a C compiler), and a
# Java 17+ runtime for Spark (installed with apt-get when running as root; otherwise a clear stop).
# `--test` also installs headless Chromium (the report test renders the HTML page in it).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_BROWSER=0
[ "${1:-}" = "--test" ] && WITH_BROWSER=1

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "rmqsim needs Python >= 3.11 (found: $("$PY" --version 2>&1 || echo none)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

ensure_java() {
  if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
    return 0
  fi
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing a headless Java 17+ runtime for Spark (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq openjdk-17-jre-headless >/dev/null 2>&1 \
      || apt-get install -y -qq default-jre-headless >/dev/null
    if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
      return 0
    fi
  fi
  echo "rmqsim's sweeps need Java 17 or newer for Spark, and it could not be installed here." >&2
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
    echo "installing headless Chromium for the report test (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1 || true
    if [ -n "$(chromium_bin)" ]; then
      return 0
    fi
  fi
  echo "the report test needs headless Chromium, and it could not be installed here." >&2
  echo "Install it (e.g. 'apt-get install chromium') and rerun." >&2
  exit 1
}

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
log=.venv/setup-pip.log
if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e '.[test,compile]'; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "pip install failed (log above, also in $log)" >&2
  exit 1
fi
.venv/bin/python -c 'import simpy, networkx, pydantic, yaml, pyspark, matplotlib, pytest' \
  || { echo "dependency installation failed (see pip output above)" >&2; exit 1; }
if ! .venv/bin/python scripts/build_compiled.py >"$log" 2>&1; then
  cat "$log" >&2
  echo "compiling the per-message modules failed (log above; it needs gcc and the Python headers)." >&2
  echo "rmqsim runs without them, about 1.5x slower; setting up stops here so that this is not missed." >&2
  exit 1
fi
ensure_java
if [ "$WITH_BROWSER" = "1" ]; then
  ensure_chromium
fi
echo "rmqsim is set up: $(.venv/bin/python --version), java $(java_major)" >&2
