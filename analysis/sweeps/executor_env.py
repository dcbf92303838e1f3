"""The executors' Python environment on a cluster: a packed virtual environment, unpacked once per host.

PySpark's package-management guide ("Using Virtualenv": venv-pack, `spark.archives`
`env.tar.gz#environment`, `spark.pyspark.python=./environment/bin/python`) is what the archive
follows, without venv-pack: the driver's venv holds the project as an editable install (a path,
not files to pack) and everything the reports need (matplotlib, pandas, duckdb), so the archive is
made here, holding exactly what an executor imports:
- the project's packages as a wheel would install them: sources, their `.pxd`, the compiled
  binaries beside them and `sim/compiled_build.json` (so executors run compiled, checked as any
  process is: sim/compiled.py);
- the runtime dependencies of rmqsim, with their dependencies (their installed files, as each
  distribution's RECORD lists them), except `pyspark`/`py4j` (every worker has its own, with the
  Spark it runs; Spark puts its `python/lib` zips on the executors' path) and `matplotlib` (reports
  run on the driver);
- `bin/python`, a copy of the driver's base interpreter's executable, and a `pyvenv.cfg` naming
  its home (`python -m venv --copies`; venv-pack links instead): as with venv-pack, workers need
  the same Python installation at the same path (its standard library and libpython are not in the
  archive), and nothing else: no checkout, no venv, no installed package.
It is not shipped with `spark.archives`, which unpacks it afresh into every application's work
directory (284 MB per sweep and executor, kept until the worker's directory is cleaned): three
files go with `spark.files` instead (`executor_files`), and the executors' Python is the launcher
among them, `./rmqsim-python`, which runs analysis/sweeps/executor_boot.py with the host's base Python:
the environment is unpacked once per host into a cache keyed by the archive's digest, reused by
every later sweep with the same content, and unused ones are removed by a size bound (that
module's docstring). The archive is a tar.gz at gzip's fastest level named `.pack` (Spark would
unpack a `.tar.gz` given in `spark.files` itself), entries in sorted order with fixed times; the
three files are written once per content into one folder under the temp directory.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from analysis.sweeps import executor_boot
from sim import compiled

LAUNCHER = "rmqsim-python"  # the executors' Python (spark.pyspark.python), in their work directory
PYTHON = f"./{LAUNCHER}"  # relative to an executor's working directory, where spark.files puts it
BOOT = "rmqsim_executor_boot.py"  # analysis/sweeps/executor_boot.py as shipped
FOLDER_PREFIX = "rmqsim-executor-env-"  # <temp>/rmqsim-executor-env-<key>/: the three files of one content
EXCLUDED = {"pyspark", "py4j", "matplotlib"}  # module docstring
PROJECT_SUFFIXES = (".py", ".pxd", ".properties", ".json", *compiled.importlib.machinery.EXTENSION_SUFFIXES)
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def _name(requirement: str) -> str | None:
    """The distribution a requirement names, or None for one that only an extra asks for."""
    if "extra ==" in requirement.replace('"', "'").replace("extra==", "extra =="):
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return match.group(0).lower().replace("_", "-") if match else None


def runtime_distributions() -> list[md.Distribution]:
    """rmqsim's runtime dependencies and theirs, without EXCLUDED, sorted by name."""
    found: dict[str, md.Distribution] = {}
    todo = [n for n in map(_name, md.requires("rmqsim") or []) if n]
    while todo:
        name = todo.pop()
        if name in found or name in EXCLUDED:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # a requirement whose marker excludes this platform
        found[name] = dist
        todo += [n for n in map(_name, dist.requires or []) if n]
    return [found[name] for name in sorted(found)]


def _project_files() -> list[tuple[str, Path]]:
    """(path in site-packages, file) of the project's packages, the build manifest included."""
    out = []
    for package in compiled.PACKAGES:
        for path in sorted((compiled.ROOT / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.name.endswith(PROJECT_SUFFIXES):
                out.append((path.relative_to(compiled.ROOT).as_posix(), path))
    return out


def _dependency_files(dists: list[md.Distribution]) -> list[tuple[str, Path]]:
    out = []
    for dist in dists:
        for entry in dist.files or []:
            if entry.parts[0] == ".." or "__pycache__" in entry.parts:
                continue  # console scripts (bin/), compiled bytecode: not needed
            path = Path(dist.locate_file(entry))
            if path.is_file():
                out.append((entry.as_posix(), path))
    return out


def _key(project: list[tuple[str, Path]], dists: list[md.Distribution]) -> str:
    digest = hashlib.sha256(json.dumps([sys._base_executable, sys.version,
                                        [(d.metadata["Name"], d.version) for d in dists]]).encode())
    for name, path in project:
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def packed_env() -> Path:
    """The archive for this driver's project and dependencies, with the launcher and boot file
    beside it (made if not there yet: built in a hidden folder, then renamed into place whole)."""
    project, dists = _project_files(), runtime_distributions()
    key = _key(project, dists)
    folder = Path(tempfile.gettempdir()) / f"{FOLDER_PREFIX}{key}"
    archive = folder / f"rmqsim-executor-env-{key}.pack"
    if archive.is_file():
        return archive
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        _write_archive(tmp / archive.name, project, dists)
        shutil.copyfile(Path(executor_boot.__file__), tmp / BOOT)
        launcher = tmp / LAUNCHER
        launcher.write_text(launcher_text(archive.name))
        launcher.chmod(0o755)
        try:
            os.rename(tmp, folder)
        except OSError:  # another driver made it meanwhile
            if not archive.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return archive


def executor_files(archive: Path) -> list[Path]:
    """What `spark.files` ships for the archive `packed_env` made: launcher, boot file, archive."""
    return [archive.with_name(LAUNCHER), archive.with_name(BOOT), archive]


def launcher_text(archive_name: str) -> str:
    """The executors' Python: the boot file, run by the base interpreter (isolated, no site), with the
    archive beside it; it execs the unpacked environment's Python with Spark's arguments."""
    return ("#!/bin/sh\n# rmqsim's executor Python (analysis/sweeps/executor_env.py, analysis/sweeps/executor_boot.py)\n"
            'here=$(dirname "$0")\n'
            f'exec {shlex.quote(sys._base_executable)} -I -S "$here/{BOOT}" "$here/{archive_name}" "$@"\n')


def _write_archive(path: Path, project: list[tuple[str, Path]], dists: list[md.Distribution]) -> None:
    files = sorted({f"{SITE}/{name}": source for name, source in project + _dependency_files(dists)}.items())
    with tarfile.open(path, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
        home = Path(sys._base_executable)
        _add_bytes(tar, "pyvenv.cfg", f"home = {home.parent}\ninclude-system-site-packages = false\n"
                                      f"version = {'.'.join(map(str, sys.version_info[:3]))}\n".encode())
        info = tar.gettarinfo(str(home), arcname="bin/python")  # a copy: a link would leave the archive
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        with open(home, "rb") as handle:
            tar.addfile(info, handle)
        for name, source in files:
            info = tar.gettarinfo(str(source), arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(source, "rb") as handle:
                tar.addfile(info, handle)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def spark_conf(archive: Path) -> dict[str, str]:
    """What a cluster session needs to run its executors in the archive's environment."""
    return {"spark.files": ",".join(str(path) for path in executor_files(archive)),
            "spark.pyspark.python": PYTHON}


if __name__ == "__main__":  # for spark-submit's --files (scripts/rmqsim_submit.py), with --conf spark.pyspark.python=./rmqsim-python
    print(",".join(str(path) for path in executor_files(packed_env())))
