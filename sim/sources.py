"""The digest of the simulator's sources, as `rmqsim --version` prints it and a run records it.

SHA-256 over every `.py` file of `sim/` and `models/` (sorted paths, each as `path NUL content`):
the same value as analysis/sweep.py's `simulator_sha256` (tests/test_explain_replay.py checks
that), computed here without importing the sweep's dependencies (pyarrow), so that every run can
record it in `run_meta.json` (`simulator_sha256`). Equal digests, scenario and seed give equal
trace digests: `rmqsim explain` replays a run only on the simulator that made it.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIMULATOR_PACKAGES = ("sim", "models")


@functools.cache  # the code this process runs is what it imported: read once, not again after later edits
def simulator_sha256() -> str:
    digest = hashlib.sha256()
    for package in SIMULATOR_PACKAGES:
        for src in sorted((ROOT / package).rglob("*.py")):
            digest.update(src.relative_to(ROOT).as_posix().encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()
