"""Instructions per simulated message, from callgrind: noise-free, unlike wall time.

    .venv/bin/python bench/instructions.py [--scenario scenarios/baseline.yaml] [--short-s 6] [--long-s 12]

Runs the scenario twice under `valgrind --tool=callgrind` (instruction counting, no cache
simulation), with `duration_ms` set to a short and a long value (same settle time, so start-up,
settling, checks and interpreter start cancel out), and reports

    (instructions(long) − instructions(short)) / (messages(long) − messages(short)).

The count is repeatable for the same binary, inputs and environment whatever else the machine
is doing. Needs valgrind (`apt-get install valgrind`); PYTHONHASHSEED is pinned so the two runs
differ only in their duration, and address-space randomisation is turned off (`setarch -R`,
where there is one): with it on, allocation addresses move dict and heap layouts and the count
by up to ±1 % between identical runs; with it off, by about 0.1 %. A run takes about a minute.
`compiled_modules` says how many per-message modules ran compiled (sim/compiled.py); with
RMQSIM_PURE=1, none.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import rmqsim
from sim import compiled
r = rmqsim.run({scenario!r}, overrides=["duration_ms={duration_ms}"])
print("RESULT " + json.dumps({{"consumed": r.summary["consumed"], "sent_ok": r.summary["sent_ok"],
                               "compiled_modules": len(compiled.status()["compiled"])}}))
"""


def measure(scenario: str, duration_ms: int) -> tuple[int, dict]:
    """(instructions, summary counts) of one run under callgrind."""
    code = CHILD.format(root=str(ROOT), scenario=scenario, duration_ms=duration_ms)
    with tempfile.TemporaryDirectory() as tmp:
        no_aslr = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
        out = subprocess.run(
            [*no_aslr, "valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", "--cache-sim=no",
             sys.executable, "-c", code],
            capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"), check=True, cwd=ROOT)
    collected = re.search(r"Collected : (\d+)", out.stderr)
    if collected is None:
        raise RuntimeError(f"no instruction count in callgrind's output:\n{out.stderr[-2000:]}")
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    return int(collected.group(1)), result


def warm(scenario: str) -> None:
    """One plain run first (no valgrind): it writes the digest cache (sim/sources.py) and any missing
    bytecode, so both measured runs start alike. Without it the short run alone pays for hashing the
    sources, its count rises and the per-message figure comes out too low (by about 5 % on the
    baseline in a freshly built tree)."""
    subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), scenario=scenario, duration_ms=100)],
                   capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"), check=True, cwd=ROOT)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="scenarios/baseline.yaml")
    ap.add_argument("--short-s", type=float, default=6.0, help="duration of the short run (simulated s)")
    ap.add_argument("--long-s", type=float, default=12.0, help="duration of the long run (simulated s)")
    args = ap.parse_args()
    warm(args.scenario)
    short_i, short = measure(args.scenario, int(args.short_s * 1000))
    long_i, long_ = measure(args.scenario, int(args.long_s * 1000))
    messages = long_["consumed"] - short["consumed"]
    print(json.dumps({
        "scenario": args.scenario,
        "instructions_short": short_i, "instructions_long": long_i,
        "messages_consumed_short": short["consumed"], "messages_consumed_long": long_["consumed"],
        "instructions_per_message": round((long_i - short_i) / messages) if messages > 0 else None,
        "compiled_modules": long_["compiled_modules"],  # sim/compiled.py; RMQSIM_PURE=1: none
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
