"""The type checker over the project (scripts/test.sh): mypy, with the settings of pyproject.toml.

sim/ and models/ carry no error. analysis/ and rmqsim/ are held to `scripts/mypy-baseline.txt`,
the errors they had when the checker came in (issue 38), each as `path: [code] message` without
its line number, so that an edit above an error does not move it: an error not in the baseline
fails the check, and one the baseline lists that is gone is reported, to be removed from it
(`--update` rewrites the file from today's errors; only ever to shrink it).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[\w/.-]+\.py):\d+: error: (?P<message>.*?)\s+\[(?P<code>[\w-]+)\]$")
CLEAN = ("sim/", "models/")  # no baseline: every error fails


def errors() -> Counter[str]:
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context",
                             "--no-pretty", "--show-error-codes"], cwd=ROOT, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        sys.exit(f"mypy failed to run:\n{result.stdout}{result.stderr}")
    found: Counter[str] = Counter()
    for line in result.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            found[f"{match['path']}: [{match['code']}] {match['message']}"] += 1
    return found


def baseline() -> Counter[str]:
    lines = BASELINE.read_text().splitlines() if BASELINE.exists() else []
    return Counter(line for line in lines if line and not line.startswith("#"))


def main() -> int:
    found = errors()
    if "--update" in sys.argv:
        kept = sorted((found - Counter({k: v for k, v in found.items() if k.startswith(CLEAN)})).elements())
        BASELINE.write_text("# mypy errors known when the checker came in (scripts/typecheck.py); shrink only\n"
                            + "".join(f"{line}\n" for line in kept))
        print(f"{BASELINE.relative_to(ROOT)}: {len(kept)} known errors")
        return 0
    known = baseline()
    new = found - known
    gone = known - found
    for line in sorted(gone.elements()):
        print(f"fixed, remove from {BASELINE.name}: {line}")
    for line in sorted(new.elements()):
        print(f"new type error: {line}", file=sys.stderr)
    if new:
        print(f"{sum(new.values())} new type error(s) (mypy; run `.venv/bin/mypy` for their lines)", file=sys.stderr)
        return 1
    print(f"mypy: no new type error ({sum(found.values())} known in analysis/ and rmqsim/, "
          "none in sim/ and models/)" if not any(k.startswith(CLEAN) for k in found) else "mypy: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
