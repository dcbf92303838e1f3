"""Compile the per-message modules with Cython into build/compiled/ (sim/kernel/compiled.py says why and how they are used).

    .venv/bin/python scripts/build_compiled.py [--force]

Does nothing when the build there was made from the current sources by this interpreter, this
Cython and this builder (this file and extension_types.py, which writes each module's `.pxd`
into the build's scratch directory: the tree holds no `.pxd`). The manifest's SHA-256 of each
source is that of exactly what was compiled (a source edited during the build fails it). The
new build replaces the old one in one rename.
Exit 0: built or up to date; 1: Cython or the C compiler failed (rmqsim then runs pure, slower).

A build is also kept in the build cache, `$RMQSIM_BUILD_CACHE` (default
`${XDG_CACHE_HOME:-~/.cache}/rmqsim/compiled`), under a key over everything that decides the
binaries: each hot source's SHA-256, this builder, Cython's version, the interpreter's cache tag,
platform and compiler settings. A fresh clone of the same sources on the same machine then takes
the cached build (a copy, checked against the sources like any build) instead of compiling for a
minute and a half; `RMQSIM_BUILD_CACHE=off` disables the cache. The newest `CACHE_KEEP` builds
are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from extension_types import all_declared_types, augmenting_pxd  # noqa: E402  (beside this file)

from sim.kernel.compiled import (  # noqa: E402
    BUILD_DIR,
    HOT_MODULES,
    MANIFEST,
    ROOT,
    read_manifest,
    source_path,
    source_sha256,
    stale_modules,
)

BUILDER = (Path(__file__), Path(__file__).with_name("extension_types.py"))

# Python semantics kept: annotations are documentation, not C types (sim/kernel/compiled.py)
DIRECTIVES = {"language_level": 3, "annotation_typing": False, "binding": False}


CACHE_ENV = "RMQSIM_BUILD_CACHE"
CACHE_KEEP = 4


def cache_dir() -> Path | None:
    """The build cache's directory (module docstring), or None when it is turned off."""
    chosen = os.environ.get(CACHE_ENV, "")
    if chosen.lower() in ("off", "0", "none"):
        return None
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqsim" / "compiled"


def cache_key(cython_version: str) -> str:
    """A digest of everything that decides the binaries (module docstring)."""
    inputs = {"cython": cython_version, "builder": builder_sha256(), "cache_tag": sys.implementation.cache_tag,
              "platform": sysconfig.get_platform(), "soabi": sysconfig.get_config_var("SOABI"),
              "cc": [os.environ.get(v) or sysconfig.get_config_var(v) for v in ("CC", "CFLAGS")],
              "sources": {name: source_sha256(source_path(name)) for name in HOT_MODULES}}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]


def from_cache(key: str) -> bool:
    """Install the cached build `key` as BUILD_DIR; False when there is none or it does not match
    the sources (checked as `sim.kernel.compiled` checks any build)."""
    cache = cache_dir()
    if cache is None or not (cache / key / MANIFEST).is_file():
        return False
    work = Path(tempfile.mkdtemp(prefix=".cached-", dir=BUILD_DIR.parent))
    try:
        shutil.copytree(cache / key, work / "lib")
        manifest = read_manifest(work / "lib")
        if manifest is None or set(manifest["modules"]) != set(HOT_MODULES) or stale_modules(manifest, work / "lib"):
            return False
        _replace_build(work / "lib")
        os.utime(cache / key)  # most recently used
        return True
    except OSError:
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def to_cache(key: str) -> None:
    """Keep BUILD_DIR as the cached build `key` (best effort: a cache that cannot be written is skipped)."""
    cache = cache_dir()
    if cache is None:
        return
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if (cache / key).exists():
            return
        work = Path(tempfile.mkdtemp(prefix=".adding-", dir=cache))
        shutil.copytree(BUILD_DIR, work / key)
        (work / key).rename(cache / key)
        shutil.rmtree(work, ignore_errors=True)
        builds = sorted((p for p in cache.iterdir() if not p.name.startswith(".")), key=lambda p: p.stat().st_mtime)
        for old in builds[:-CACHE_KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        print(f"build_compiled: the build cache {cache} could not be written ({exc}); skipped", file=sys.stderr)


def _replace_build(new: Path) -> None:
    """`new` becomes BUILD_DIR in one rename (the old build moved aside first)."""
    old = BUILD_DIR.with_name(BUILD_DIR.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if BUILD_DIR.exists():
        BUILD_DIR.rename(old)
    new.rename(BUILD_DIR)
    shutil.rmtree(old, ignore_errors=True)


def builder_sha256() -> str:
    return hashlib.sha256(b"".join(path.read_bytes() for path in BUILDER)).hexdigest()


def up_to_date(cython_version: str) -> bool:
    manifest = read_manifest()
    if (manifest is None or manifest.get("cython") != cython_version or manifest.get("builder") != builder_sha256()
            or set(manifest["modules"]) != set(HOT_MODULES)):
        return False
    return not stale_modules(manifest)


def compile_into(work: Path) -> dict[str, dict[str, str]]:
    """Compile the hot modules; the binaries land under work/lib. A source that changed while it
    was compiled fails the build (its recorded SHA-256 must be that of what was compiled)."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    sources = {name: source_path(name).read_bytes() for name in HOT_MODULES}
    before = {name: hashlib.sha256(data).hexdigest() for name, data in sources.items()}
    texts = {name: data.decode() for name, data in sources.items()}
    others = all_declared_types(texts)
    cimports: dict[str, list[str]] = {}
    for name, text in texts.items():  # found by Cython on the include path as the module's own .pxd
        pxd = augmenting_pxd(text, others)
        cimports[name] = sorted({line.split()[1] for line in (pxd or "").splitlines() if " cimport " in line})
        if pxd is not None:
            target = source_path(name, work / "pxd").with_suffix(".pxd")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(pxd)
    # relative paths: a compiled frame in a traceback names the file as it is in the tree
    # a C function pointer of the wrong type is an error, not a warning: Cython 3.1 converts a cpdef
    # method read off a typed field as a value (not called) with a mismatched signature
    extensions = [Extension(name, [source_path(name).relative_to(ROOT).as_posix()],
                            extra_compile_args=["-Werror=incompatible-pointer-types"]) for name in HOT_MODULES]
    jobs = os.cpu_count() or 1
    os.chdir(ROOT)
    extensions = cythonize(extensions, build_dir=str(work / "c"), include_path=[str(work / "pxd")],
                           compiler_directives=DIRECTIVES, quiet=True, force=True, nthreads=jobs)
    command = build_ext(Distribution({"ext_modules": extensions, "script_name": "build_compiled"}))
    command.build_lib, command.build_temp, command.parallel = str(work / "lib"), str(work / "obj"), jobs
    command.ensure_finalized()
    command.run()
    changed = [name for name in HOT_MODULES if source_sha256(source_path(name)) != before[name]]
    if changed:
        raise RuntimeError(f"sources changed during the build: {', '.join(changed)}; run it again")
    return {name: {"source_sha256": before[name], "cimports": cimports[name],
                   "file": Path(command.get_ext_fullpath(name)).relative_to(work / "lib").as_posix()}
            for name in HOT_MODULES}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if the build is up to date")
    args = ap.parse_args()
    try:
        import Cython
    except ImportError:
        print("build_compiled: Cython is not installed (a dependency: pip install -e '.[compile]'); rmqsim runs pure",
              file=sys.stderr)
        return 1
    if not args.force and up_to_date(Cython.__version__):
        print(f"build_compiled: {BUILD_DIR} is up to date ({len(HOT_MODULES)} modules)", file=sys.stderr)
        return 0
    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    key = cache_key(Cython.__version__)
    if not args.force and from_cache(key):
        print(f"build_compiled: {len(HOT_MODULES)} modules taken from the build cache {cache_dir()}", file=sys.stderr)
        return 0
    work = Path(tempfile.mkdtemp(prefix=".compiling-", dir=BUILD_DIR.parent))
    try:
        modules = compile_into(work)
        manifest = {"cython": Cython.__version__, "builder": builder_sha256(),
                    "cache_tag": sys.implementation.cache_tag, "modules": modules}
        (work / "lib" / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        _replace_build(work / "lib")
    except Exception as exc:  # Cython or the C compiler: the message says which; rmqsim still runs pure
        print(f"build_compiled: failed ({type(exc).__name__}: {exc}); rmqsim runs pure", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    to_cache(key)
    print(f"build_compiled: {len(modules)} modules compiled into {BUILD_DIR}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
