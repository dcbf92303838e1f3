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

**Once per tree.** Reading and hashing every compiled module's source on each `import sim` took
about 30 ms of each process's start. `stale_modules()` (and sim/sources.py's digest of the
simulator's sources) read their digests from `StampedDigests`, a small cache keyed by the files'
stamps (path, `mtime_ns`, size) and written atomically to `__pycache__/` beside this file (or,
when that is not writable, to the user's cache directory): a changed, added or removed file changes
the stamp and the digest is computed afresh; a cache that is not JSON, of another shape, of
another tree or interpreter is ignored and rewritten. A digest is not stored while a file it covers
was modified less than 2 s before (a later edit in the same clock tick could keep its stamp).
The packaging build (setup.py) always hashes the sources themselves (`module_digests`).

This file is read by setup.py by path (it imports only the standard library).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.machinery
import json
import os
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # importlib.abc imports importlib.resources, tempfile, shutil: not at every start
    import importlib.abc
    import queue

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


def tree_files(root: Path, packages: tuple[str, ...], suffix: str) -> list[Path]:
    """The files named `*<suffix>` under the packages, in `sorted(rglob(...))`'s order for each
    package (path parts compared in turn), packages in the given order; `os.walk`: a few times
    faster than `rglob`, which every process's start paid for."""
    found = []
    for package in packages:
        top = root / package
        names = []
        for folder, _dirs, files in os.walk(top):
            relative = os.path.relpath(folder, top)
            parts = () if relative == "." else tuple(relative.split(os.sep))
            names += [(*parts, name) for name in files if name.endswith(suffix)]
        found += [top.joinpath(*parts) for parts in sorted(names)]
    return found


def compiled_modules(root: Path = ROOT) -> list[str]:
    """Every module with a `.pxd` beside it, sorted."""
    return _compiled_names(tree_files(root, PACKAGES, ".pxd"), root)


def _compiled_names(declarations: list[Path], root: Path) -> list[str]:
    return sorted(".".join(pxd.relative_to(root).with_suffix("").parts) for pxd in declarations
                  if pxd.with_suffix(".py").is_file())


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


DIGEST_CACHE = "rmqsim-digests.json"  # in __pycache__/ beside this file (StampedDigests)
_HEX64 = re.compile(r"[0-9a-f]{64}")
RACY_NS = 2_000_000_000  # a file modified this recently is not trusted to its stamp (StampedDigests)


class StampedDigests:
    """Digests of a tree's files, cached by the files' stamps (module docstring: "Once per tree").

    `get(key, files, compute)`: the digests `compute()` returns (a dict of names to 64 hex digits)
    for `files`, read from the cache when it holds `key` with the same stamp (every file's path
    relative to the root, `mtime_ns` and size, plus `key`), else computed and stored. The cache is
    one JSON file, replaced atomically; it is only ever a shortcut: unreadable, of another tree
    or interpreter, of another shape, or not writable, the digests are computed as without it."""

    FORMAT = 1

    def __init__(self, root: Path = ROOT, path: Path | None = None) -> None:
        self.root = root
        self.path = path or _cache_path(root)

    def get(self, key: str, files: list[Path], compute: Callable[[], dict[str, str]]) -> dict[str, str]:
        stamp, newest_ns = self._stamp(key, files)
        cached = self._read().get(key)
        if isinstance(cached, dict) and cached.get("stamp") == stamp and _digest_map(cached.get("digests")):
            return dict(cached["digests"])
        digests = compute()
        if self._stamp(key, files)[0] == stamp:  # nothing changed while it was computed
            self._store(key, {"stamp": stamp, "digests": digests}, newest_ns)
        return digests

    def _stamp(self, key: str, files: list[Path]) -> tuple[str, int]:
        """The stamp of `key` and `files` (each file's path under the root, `mtime_ns`, size), and
        the newest `mtime_ns` among them."""
        lines, newest_ns, prefix = [key], 0, len(str(self.root)) + 1
        for path in sorted(map(str, files)):
            try:
                st = os.stat(path)
            except OSError:  # gone: part of the stamp as such
                lines.append(f"{path[prefix:]} -")
                continue
            newest_ns = max(newest_ns, st.st_mtime_ns)
            lines.append(f"{path[prefix:]} {st.st_mtime_ns} {st.st_size}")
        return hashlib.sha256("\0".join(lines).encode()).hexdigest(), newest_ns

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != self.FORMAT or data.get("root") != str(self.root) \
                or data.get("cache_tag") != sys.implementation.cache_tag or not isinstance(data.get("entries"), dict):
            return {}  # another tree's, another interpreter's, or not this shape: not trusted
        return data["entries"]

    def _store(self, key: str, entry: dict, newest_ns: int) -> None:
        entries = {**self._read(), key: entry}
        text = json.dumps({"format": self.FORMAT, "root": str(self.root), "cache_tag": sys.implementation.cache_tag,
                           "entries": entries}, sort_keys=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")  # then renamed: atomic
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(partial, "x") as out:
                    out.write(text)
                if os.stat(partial).st_mtime_ns - newest_ns < RACY_NS:  # the file system's clock, not the wall's
                    return  # a file was just modified: an edit in the same tick would keep its stamp
                os.replace(partial, self.path)
            finally:
                if os.path.lexists(partial):
                    os.unlink(partial)
        except OSError:  # a read-only install: computed each time, as without a cache
            return


def _digest_map(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(k, str) and isinstance(v, str) and _HEX64.fullmatch(v) for k, v in value.items())


def _cache_path(root: Path) -> Path:
    """__pycache__/ beside this file when it can be written there, else the user's cache directory
    (one file per tree: the tree's path in its name)."""
    here = root / "sim" / "__pycache__"
    if os.access(here if here.is_dir() else here.parent, os.W_OK):
        return here / DIGEST_CACHE
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqsim"
    return user / f"digests-{hashlib.sha256(str(root).encode()).hexdigest()[:16]}.json"


def current_digests(cython_version: str, root: Path = ROOT) -> dict[str, str]:
    """`module_digests`, read from the stamp cache when no source or declaration changed."""
    declarations = tree_files(root, PACKAGES, ".pxd")
    files = [*declarations, *(source_path(name, root) for name in _compiled_names(declarations, root))]
    return StampedDigests(root).get(f"modules {cython_version} {json.dumps(DIRECTIVES, sort_keys=True)}", files,
                                    lambda: module_digests(cython_version, root))


def stale_modules(root: Path = ROOT) -> list[str]:
    """The compiled modules whose binary is missing or was compiled from other sources."""
    manifest = read_manifest(root)
    if manifest is None:
        return compiled_modules(root)
    digests = current_digests(manifest.get("cython", ""), root)
    names = sorted(digests)  # module_digests: one per compiled module
    built = manifest.get("modules", {})
    return [name for name in names if name not in built or built[name]["digest"] != digests.get(name)
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
        built = (read_manifest() or {}).get("modules", {})
        why = "changed since they were built" if any(name in built for name in stale) else "not built yet"
        print(f"rmqsim: {len(stale)} compiled module(s) {why} "
              f"({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}); rebuilding: setup.py build_ext --inplace",
              file=sys.stderr, flush=True)
        code, tail = build_in_place(len(stale), sys.stderr)
        if code != 0:
            print("\n".join(tail), file=sys.stderr)
        return stale_modules()


# --- the build, saying what it does (scripts/setup.sh; a rebuild on import) ------------------------------
CPU_S_PER_MODULE = 4.0  # Cython's translation and gcc -O3 -g0 of one module (-O1 for setup.py's COLD_MODULES), on a quiet core (setup's estimate)
HEARTBEAT_S = 10.0  # never silent longer than this while it builds
_BUILDING = re.compile(r"building '([\w.]+)' extension")


def build_env() -> dict[str, str]:
    """The build's environment: unless the user set CFLAGS, the interpreter's own CFLAGS (-O3; setup.py
    puts -O1 after them for its COLD_MODULES) and `-g0` last (setuptools' compiler takes CFLAGS from the environment instead of the
    interpreter's, so they are given whole): no debug information in the binaries, about a third of
    gcc's time; the code is the same, and a traceback's compiled frames keep their lines (Cython
    records them itself)."""
    import sysconfig

    env = dict(os.environ)
    if "CFLAGS" not in env:
        env["CFLAGS"] = f"{sysconfig.get_config_var('CFLAGS') or ''} -g0".strip()
    return env


def estimate_s(modules: int, cores: int | None = None) -> int:
    """About how long `modules` take to build on `cores` (this machine's, by default), to the 5 s."""
    cores = max(1, cores or os.cpu_count() or 1)
    return max(5, round(modules * CPU_S_PER_MODULE / min(cores, max(modules, 1)) / 5) * 5)


def build_in_place(modules: int, out: TextIO, root: Path = ROOT) -> tuple[int, list[str]]:
    """`setup.py build_ext --inplace` in `root`, saying what it does on `out`: a line per module as
    gcc starts it (`[3/27] models.broker.commit_log`), a line at least every `HEARTBEAT_S` seconds
    while nothing else is said (Cython translating, gcc at work), its time at the end. Returns its
    exit code and the last 15 lines of its output (all of it goes to build/build_ext.log).
    `modules` is what the digests say is stale; setuptools also recompiles a module whose source is
    newer than its binary though unchanged (a checkout, a copy): those are counted past it."""
    import queue
    import subprocess
    import threading
    import time

    clock = time.monotonic  # noqa: TID251  the build's progress lines, never a run
    start, said, started = clock(), clock(), 0
    cores = os.cpu_count() or 1
    out.write(f"compiling {modules} module(s) with Cython (about {estimate_s(modules, cores)} s on {cores} "
              f"core(s)) ...\n")
    out.flush()
    (root / "build").mkdir(exist_ok=True)
    lines: queue.Queue[str | None] = queue.Queue()
    with open(root / "build" / "build_ext.log", "w") as log:
        child = subprocess.Popen([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=build_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        reader = threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True)
        reader.start()
        tail: list[str] = []
        while True:
            try:
                line = lines.get(timeout=max(0.1, HEARTBEAT_S - (clock() - said)))
            except queue.Empty:
                line = ""
            if line is None:
                break
            log.write(line)
            tail = [*tail[-14:], line.rstrip()] if line else tail
            if match := _BUILDING.search(line):
                started += 1
                count = f"{started}/{modules}" if started <= modules else f"{started}"
                out.write(f"  [{count}] {match.group(1)} ({clock() - start:.0f} s)\n")
            elif clock() - said >= HEARTBEAT_S:
                out.write(f"  ... {_phase(started, modules)} ({clock() - start:.0f} s)\n")
            else:
                continue
            out.flush()
            said = clock()
        code = child.wait()
    out.write(f"compiling {modules} module(s) with Cython ... {clock() - start:.0f} s"
              f"{'' if code == 0 else f' (failed, exit {code}: build/build_ext.log)'}\n")
    out.flush()
    return code, tail


def _pump(stream: TextIO, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _phase(started: int, modules: int) -> str:
    """What the build is doing while it says nothing: translating to C, or compiling."""
    if started:
        return f"gcc compiling: {started} of {modules} module(s) started" if started <= modules else \
            f"gcc compiling: {started} module(s) started"
    return "Cython translating the modules to C"


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
