"""The digest of the simulator's sources, as `rmqsim --version` prints it and a run records it.

SHA-256 over every `.py` file of `sim/` and `models/` (sorted paths, each as `path NUL content`),
computed here without importing the sweep's dependencies (pyarrow), so that every run can record
it in `run_meta.json` (`simulator_sha256`, cached per process); analysis/sweeps/sweep.py's
`simulator_sha256` is `sources_sha256()` read afresh (a sweep directory checks what is on disk).
Equal digests, scenario and seed give equal trace digests: `rmqsim explain` replays a run only on the simulator that made it.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIMULATOR_PACKAGES = ("sim", "models")


def sources_sha256(packages: tuple[str, ...] = SIMULATOR_PACKAGES) -> str:
    """The digest of the packages' sources as they are on disk now (not cached)."""
    digest = hashlib.sha256()
    for package in packages:
        for src in sorted((ROOT / package).rglob("*.py")):
            digest.update(src.relative_to(ROOT).as_posix().encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()


@functools.cache  # the code this process runs is what it imported: read once, not again after later edits
def simulator_sha256() -> str:
    return sources_sha256()
