"""The digest of the simulator's sources, as `rmqsim --version` prints it and a run records it.

SHA-256 over every `.py` file of `sim/` and `models/` (sorted paths, each as `path NUL content`),
computed here without importing the sweep's dependencies (pyarrow), so that every run can record
it in `run_meta.json` (`simulator_sha256`, cached per process); analysis/sweeps/sweep.py's
`simulator_sha256` is `sources_sha256()` read afresh (a sweep directory checks what is on disk).
Equal digests, scenario and seed give equal trace digests: `rmqsim explain` replays a run only on the simulator that made it.

Reading and hashing the 1.2 MB of sources took about 25 ms of every process; `sources_sha256()`
reads the digest from the tree's stamp cache (sim/compiled.py, `StampedDigests`: every file's
path, `mtime_ns` and size) and hashes the files again only when one of them changed, was added
or removed. `hash_sources()` always hashes them.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from sim.compiled import StampedDigests, tree_files

ROOT = Path(__file__).resolve().parents[1]
SIMULATOR_PACKAGES = ("sim", "models")


def source_files(packages: tuple[str, ...] = SIMULATOR_PACKAGES, root: Path = ROOT) -> list[Path]:
    """The packages' `.py` files, in the digest's order."""
    return tree_files(root, packages, ".py")


def hash_sources(packages: tuple[str, ...] = SIMULATOR_PACKAGES, root: Path = ROOT) -> str:
    """The digest of the packages' sources, read and hashed now."""
    digest = hashlib.sha256()
    for src in source_files(packages, root):
        digest.update(src.relative_to(root).as_posix().encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()


def sources_sha256(packages: tuple[str, ...] = SIMULATOR_PACKAGES, root: Path = ROOT) -> str:
    """The digest of the packages' sources as they are on disk now (by their stamps, not cached
    in the process)."""
    key = "sources " + " ".join(packages)
    return StampedDigests(root).get(key, source_files(packages, root),
                                    lambda: {"sha256": hash_sources(packages, root)})["sha256"]


@functools.cache  # the code this process runs is what it imported: read once, not again after later edits
def simulator_sha256() -> str:
    return sources_sha256()
