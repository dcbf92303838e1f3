"""The per-message modules, compiled with Cython, and the guard that uses a build only for its own sources.

`scripts/build_compiled.py` (run by scripts/setup.sh) compiles the modules in `HOT_MODULES` with
Cython as plain Python: annotations are not taken as C types (`annotation_typing=False`), so
integers stay unbounded Python ints and every operation keeps its Python meaning; functions are
compiled without `binding` (cheaper calls; `inspect.signature` cannot read them). The build goes
to `build/compiled/`, off `sys.path`, with `manifest.json` recording each module's source SHA-256.

`install()` (called by the `sim`, `models` and `analysis` packages on import) puts `_Finder` first
on `sys.meta_path`. For a module in the manifest it loads the compiled file only if the `.py`
beside it is byte-identical to the source that was compiled, and so are the sources of the modules
whose extension types it cimports; otherwise the `.py` is imported as usual, so an edited file is
never shadowed by a stale binary, nor breaks the import of a binary compiled against it.
`RMQSIM_PURE=1` turns compiled modules off. Either way a run is the same run:
tests/test_compiled.py checks that a compiled and a pure run have one digest and one summary. The
build also makes each module's plain classes extension types whose `self` attributes are object
fields (scripts/extension_types.py); values keep their Python types, and a few hot functions type
their locals (`cython.locals`); the event heap's push and pop compare entries on C integers
(sim/kernel/event_queue.py). On the baseline scenario this runs about 2× faster than pure, with about
44 % fewer instructions per message (bench/; typed fields, `cpdef` methods and closed classes:
scripts/extension_types.py). Compiling without the extension types ran 1.25× faster but 5 % *more*
instructions: each `self.x` became a generic attribute lookup where the interpreter specialises
it.

Spark executors import the project from the sweep driver's zip of `.py` files. The driver passes
its build directory in `RMQSIM_COMPILED_DIR` (analysis/sweep.py); an executor uses it under the
same rule, comparing the compiled sources with those in the zip: local masters and clusters that
share the path and the interpreter run compiled, other executors pure.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

# the send → store → dispatch → pull → consume → ack path, the kernel under it and the ledger fed by
# it; not sim.kernel.dist or the config modules: pydantic models want Python function objects
HOT_MODULES = (
    "sim.kernel.env", "sim.kernel.event_queue", "sim.kernel.network", "sim.kernel.node", "sim.kernel.trace", "sim.kernel.rng",
    "models.broker.broker", "models.broker.commit_log", "models.broker.consume_queue",
    "models.broker.message_store", "models.broker.long_polling", "models.broker.mapped_file",
    "models.consumer.push_consumer", "models.consumer.consume_pool", "models.consumer.consume_service",
    "models.consumer.process_queue", "models.consumer.offset_store",
    "models.producer.producer", "models.producer.workload", "models.producer.selector",
    "models.producer.fault_strategy", "models.client_instance", "models.broker.offsets",
    "analysis.ledger",
)
ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "build" / "compiled"
MANIFEST = "manifest.json"
PURE_ENV = "RMQSIM_PURE"
DIR_ENV = "RMQSIM_COMPILED_DIR"  # a build directory elsewhere (a sweep's executors; module docstring)


def source_path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def source_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree_source_sha256(root: Path, module: str) -> str:
    """The SHA-256 of a module's source in a directory tree or, on an executor, in a zip of the tree."""
    if root.is_file():
        with zipfile.ZipFile(root) as zf:
            return hashlib.sha256(zf.read(source_path(module, Path()).as_posix())).hexdigest()
    return source_sha256(source_path(module, root))


def _is_current(root: Path, build_dir: Path, module: str, modules: dict[str, dict[str, Any]]) -> bool:
    """Whether the build's binary of `module` exists and was compiled from the source now in
    `root`, and so were those of the modules whose extension types it cimports (`cimports` in
    its manifest entry): a binary checks at import that those types are the ones it was compiled
    against, so it cannot run beside an edited module imported pure."""
    entry = modules.get(module)
    try:
        fresh = entry is not None and _tree_source_sha256(root, module) == entry["source_sha256"]
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    return (fresh and (build_dir / entry["file"]).is_file()
            and all(_is_current(root, build_dir, dep, modules) for dep in entry.get("cimports", ())))


def stale_modules(manifest: dict[str, Any], build_dir: Path = BUILD_DIR, root: Path = ROOT) -> list[str]:
    """The manifest's modules whose binary is missing or whose source, or the source of a module
    it cimports, changed since it was compiled."""
    modules = manifest["modules"]
    return sorted(name for name in modules if not _is_current(root, build_dir, name, modules))


def pure_requested() -> bool:
    """RMQSIM_PURE set to anything but "" or "0": no compiled modules in this process."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


class _Finder:
    """A `sys.meta_path` finder for the compiled build (module docstring)."""

    def __init__(self, root: Path, build_dir: Path, modules: dict[str, dict[str, str]]) -> None:
        self.root, self.build_dir = root, build_dir
        self.modules = modules
        self.loaded: list[str] = []
        self.stale: list[str] = []

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        if not _is_current(self.root, self.build_dir, fullname, self.modules):
            _note(self.stale, fullname)
            return None
        _note(self.loaded, fullname)
        return importlib.util.spec_from_file_location(fullname, self.build_dir / entry["file"])

    def invalidate_caches(self) -> None:
        pass


def _note(names: list[str], name: str) -> None:
    """Record a module once (a module imported again, after `del sys.modules[...]`, counts once)."""
    if name not in names:
        names.append(name)


_finder: _Finder | None = None


def read_manifest(build_dir: Path = BUILD_DIR) -> dict[str, Any] | None:
    """The build's manifest, or None if there is no build usable by this interpreter."""
    try:
        manifest = json.loads((build_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("cache_tag") != sys.implementation.cache_tag:
        return None
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    modules = {name: entry for name, entry in manifest.get("modules", {}).items() if entry["file"].endswith(suffixes)}
    return {**manifest, "modules": modules}


def install() -> None:
    """Put the compiled build's finder on `sys.meta_path` (once; nothing if there is no build or RMQSIM_PURE=1)."""
    global _finder
    if _finder is not None or pure_requested():
        return
    build_dir = Path(os.environ.get(DIR_ENV) or BUILD_DIR)
    manifest = read_manifest(build_dir)
    if manifest is None or not manifest["modules"]:
        return
    _finder = _Finder(ROOT, build_dir, manifest["modules"])
    sys.meta_path.insert(0, _finder)


def status() -> dict[str, list[str]]:
    """Which hot modules this process imported compiled, and which it imported pure because their build was stale."""
    if _finder is None:
        return {"compiled": [], "stale": []}
    return {"compiled": sorted(_finder.loaded), "stale": sorted(_finder.stale)}


check_build = install  # transitional name (issue 28)
