"""The compiled modules: which they are, whether this process runs them, and the pure mode.

**Which.** A module of `sim`, `models` or `analysis` with a `.pxd` beside it is compiled by the
packaging build (setup.py: setuptools' `build_ext` over `cythonize`), for `pip install .`,
`pip wheel .` and the editable install scripts/setup.sh makes (whose binaries land beside the
sources). The `.pxd` is Cython's augmenting declaration file, kept in git and read by whoever
edits the module: each class declared there is an extension type whose attributes are the C
fields listed, `cpdef` methods are called in C by compiled callers, and a field typed with an
extension type, `dict` or `list` is one load and one C call away. The module stays plain Python
(`annotation_typing=False`: annotations are documentation; integers stay unbounded Python ints,
so every operation keeps its Python meaning) and runs unchanged when pure; a few hot functions
also type their locals with `@cython.locals`, and `cython.cast(tuple, x) if cython.compiled else x`
unpacks a NamedTuple in C (a local typed `tuple` would accept only an exact tuple). Rules for
whoever edits a compiled module (each `.pxd` repeats them in one line):
- an attribute assigned on `self` in a class declared in the `.pxd` must be declared there: a
  slotted class has exactly its `__slots__`; an open one (no `__slots__`) also has an instance
  dict, so an undeclared attribute works, but as a slow dict entry;
- such a class takes no `@dataclass`, no decorator and no class-level annotation (Cython would
  take it for a C attribute); a base in another module is cimported in the `.pxd`;
- compiled, a declared field reads None before its first assignment (pure: AttributeError), and a
  field, parameter or local typed with a type raises TypeError when given another (None aside):
  pure, nothing checks it. tests/test_compiled.py runs compiled and pure runs side by side;
- a method marked `@cython.ccall` is `cpdef` in the `.pxd` with the same parameters; an override
  in a compiled subclass is `cpdef` too. Read off a typed field as a value (not called), a cpdef
  method is converted by Cython 3.1 from its C function with the wrong signature, which the C
  compiler's incompatible-pointer check in setup.py turns into a build error: such a read goes
  through `getattr` (Broker._build_store).
On the baseline scenario compiled runs about 2x faster than pure, with about 44 % fewer
instructions per message (bench/); compiling without the extension types ran 1.25x faster but
5 % *more* instructions, each `self.x` a generic attribute lookup where CPython specialises it.

**Whether.** The build writes `compiled_build.json` beside `sim/__init__.py`: for each module its
binary's file name and the digest of what was compiled (`module_digest`: its source, every `.pxd`,
Cython's version and the compiler directives). `check_build()`, run by `import sim` before any
compiled module is imported (`models` and `analysis` import `sim` first), compares it with the
sources. Modules whose source changed since are rebuilt in place, once, by the first process that
sees them (`setup.py build_ext --inplace` under a file lock; only the changed modules compile),
with a line on stderr; where that is impossible (no setup.py beside the packages: an installed
wheel; no compiler; `RMQSIM_REBUILD=0`), the process runs every module pure and says which were
stale and how to rebuild. So a binary never runs for a source it was not compiled from.
`status()` says which modules this process imported compiled (ground truth: the module's file).

**Pure.** `RMQSIM_PURE=1` (or a stale build that could not be rebuilt) makes the project's
package directories import only `.py` files, through a source-only `FileFinder` on
`sys.path_hooks` for exactly those directories. A pure run is the same run: one digest, one
summary (tests/test_compiled.py).

This file is read by setup.py by path (it imports only the standard library).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

PACKAGES = ("sim", "models", "analysis", "rmqsim")
ROOT = Path(__file__).resolve().parents[1]  # the directory holding the packages (a checkout or site-packages)
MANIFEST = "compiled_build.json"  # beside sim/__init__.py
PURE_ENV = "RMQSIM_PURE"
REBUILD_ENV = "RMQSIM_REBUILD"
# Python semantics kept: annotations are documentation, not C types; functions without `binding`
# (cheaper calls; `inspect.signature` cannot read them)
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": False}


class StaleBuildWarning(UserWarning):
    """Compiled modules whose sources changed could not be rebuilt: this process runs pure."""


def compiled_modules(root: Path = ROOT) -> list[str]:
    """Every module with a `.pxd` beside it, sorted."""
    found = []
    for package in PACKAGES:
        for pxd in (root / package).rglob("*.pxd"):
            if pxd.with_suffix(".py").is_file():
                found.append(".".join(pxd.relative_to(root).with_suffix("").parts))
    return sorted(found)


def source_path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _declarations_digest(root: Path) -> bytes:
    digest = hashlib.sha256()
    for package in PACKAGES:
        for pxd in sorted((root / package).rglob("*.pxd")):
            digest.update(pxd.relative_to(root).as_posix().encode() + b"\0" + pxd.read_bytes() + b"\0")
    return digest.digest()


def module_digests(cython_version: str, root: Path = ROOT) -> dict[str, str]:
    """module → the digest of what its binary is compiled from: its source, every `.pxd` (its own
    and those it may cimport), Cython's version and the directives."""
    common = _declarations_digest(root) + json.dumps([cython_version, DIRECTIVES], sort_keys=True).encode()
    return {name: hashlib.sha256(common + source_path(name, root).read_bytes()).hexdigest()
            for name in compiled_modules(root)}


def read_manifest(root: Path = ROOT) -> dict | None:
    """The build's manifest, or None without one for this interpreter."""
    try:
        manifest = json.loads((root / "sim" / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if manifest.get("cache_tag") == sys.implementation.cache_tag else None


def stale_modules(root: Path = ROOT) -> list[str]:
    """The compiled modules whose binary is missing or was compiled from other sources."""
    manifest = read_manifest(root)
    names = compiled_modules(root)
    if manifest is None:
        return names
    digests = module_digests(manifest.get("cython", ""), root)
    built = manifest.get("modules", {})
    return [name for name in names if name not in built or built[name]["digest"] != digests[name]
            or not (source_path(name, root).parent / built[name]["file"]).is_file()]


def pure_requested() -> bool:
    """RMQSIM_PURE set to anything but "" or "0"."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


_state: dict[str, list[str] | str | None] = {"pure": None, "stale": []}


def check_build() -> None:
    """Run compiled modules only for their own sources (module docstring); once per process."""
    if _state.get("checked"):
        return
    _state["checked"] = "yes"
    if pure_requested():
        _state["pure"] = f"{PURE_ENV}=1"
        return _import_pure()
    stale = stale_modules()
    if stale and _can_rebuild():
        stale = _rebuild(stale)
    if stale:
        _state["pure"], _state["stale"] = "stale build", stale
        warnings.warn(f"rmqsim runs pure (about 2x slower): {len(stale)} compiled module(s) are older than their "
                      f"sources ({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}); rebuild with "
                      f"`scripts/setup.sh` or `{Path(sys.executable).name} setup.py build_ext --inplace`",
                      StaleBuildWarning, stacklevel=2)
        _import_pure()
    return None


def _can_rebuild() -> bool:
    return (ROOT / "setup.py").is_file() and os.environ.get(REBUILD_ENV, "") != "0" and os.access(ROOT, os.W_OK)


def _rebuild(stale: list[str]) -> list[str]:
    """Rebuild in place under a file lock (another process may be doing it); the modules still stale after."""
    (ROOT / "build").mkdir(exist_ok=True)
    with open(ROOT / "build" / ".rebuild.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stale = stale_modules()  # another process may have rebuilt them meanwhile
        if not stale:
            return []
        print(f"rmqsim: {len(stale)} compiled module(s) changed since they were built "
              f"({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}); rebuilding: setup.py build_ext --inplace",
              file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode != 0:
            print("\n".join((done.stdout + done.stderr).splitlines()[-15:]), file=sys.stderr)
        return stale_modules()


def _import_pure() -> None:
    """The project's package directories import `.py` files only (module docstring)."""
    packages = tuple(str(ROOT / package) for package in PACKAGES)
    source_only = importlib.machinery.FileFinder.path_hook(
        (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES))

    def hook(path: str) -> importlib.abc.PathEntryFinder:
        if path in packages or path.startswith(tuple(p + os.sep for p in packages)):
            return source_only(path)
        raise ImportError("not a package directory of rmqsim")

    sys.path_hooks.insert(0, hook)
    for path in list(sys.path_importer_cache):
        if path in packages or path.startswith(tuple(p + os.sep for p in packages)):
            del sys.path_importer_cache[path]


def status() -> dict[str, list[str] | str | None]:
    """Which compiled modules this process imported compiled, which it imported pure, and why pure
    (None, "RMQSIM_PURE=1" or "stale build")."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    loaded = [name for name in compiled_modules() if name in sys.modules]
    return {"compiled": [n for n in loaded if str(getattr(sys.modules[n], "__file__", "")).endswith(suffixes)],
            "pure": [n for n in loaded if not str(getattr(sys.modules[n], "__file__", "")).endswith(suffixes)],
            "why_pure": _state["pure"], "stale": list(_state["stale"] or [])}


def main() -> int:
    """scripts/setup.sh's check: rebuild what is stale; exit 1 if any module is not compiled from its source."""
    check_build()
    stale = stale_modules()
    print(f"compiled modules: {len(compiled_modules()) - len(stale)} of {len(compiled_modules())} current"
          + (f"; stale: {', '.join(stale)}" if stale else ""), file=sys.stderr)
    return 1 if stale else 0
