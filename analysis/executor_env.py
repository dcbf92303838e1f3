"""The executors' Python environment on a cluster: a packed virtual environment, shipped with `spark.archives`.

PySpark's package-management guide ("Using Virtualenv": venv-pack, `spark.archives`
`env.tar.gz#environment`, `spark.pyspark.python=./environment/bin/python`) is what this follows,
without venv-pack: the driver's venv holds the project as an editable install (a path, not files
to pack) and everything the reports need (matplotlib, pandas, duckdb), so the archive is made
here, holding exactly what an executor imports:
- the project's packages as a wheel would install them: sources, their `.pxd`, the compiled
  binaries beside them and `sim/compiled_build.json` (so executors run compiled, checked as any
  process is: sim/kernel/compiled.py);
- the runtime dependencies of rmqsim, with their dependencies (their installed files, as each
  distribution's RECORD lists them), except `pyspark`/`py4j` (every worker has its own, with the
  Spark it runs; Spark puts its `python/lib` zips on the executors' path) and `matplotlib` (reports
  run on the driver);
- `bin/python`, a copy of the driver's base interpreter's executable, and a `pyvenv.cfg` naming
  its home (`python -m venv --copies`; venv-pack links instead, but Spark's tar unpacking refuses
  a link that leaves the archive): as with venv-pack, workers need the same Python installation at
  the same path (its standard library and libpython are not in the archive), and nothing else: no
  checkout, no venv, no installed package.
The archive is a tar.gz at gzip's fastest level (Spark unpacks `.tar.gz` with the system's `tar`,
modes kept; a plain `.tar` it unpacks in Java, which drops the executable bit), written once per
content under the temp directory, entries in sorted order with fixed times.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

from sim.kernel import compiled
from sim.kernel.files import atomic_path

ARCHIVE_NAME = "rmqsim_env"  # the directory the executors unpack it into: spark.archives `…#rmqsim_env`
PYTHON = f"./{ARCHIVE_NAME}/bin/python"  # relative to an executor's working directory
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
    """The archive for this driver's project and dependencies (made if not there yet)."""
    project, dists = _project_files(), runtime_distributions()
    path = Path(tempfile.gettempdir()) / f"rmqsim-executor-env-{_key(project, dists)}.tar.gz"
    if path.exists():
        return path
    files = sorted({f"{SITE}/{name}": source for name, source in project + _dependency_files(dists)}.items())
    with atomic_path(path) as tmp, tarfile.open(tmp, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
        home = Path(sys._base_executable)
        _add_bytes(tar, "pyvenv.cfg", f"home = {home.parent}\ninclude-system-site-packages = false\n"
                                      f"version = {'.'.join(map(str, sys.version_info[:3]))}\n".encode())
        info = tar.gettarinfo(str(home), arcname="bin/python")  # a copy: Spark unpacks no link leaving the archive
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        with open(home, "rb") as handle:
            tar.addfile(info, handle)
        for name, source in files:
            info = tar.gettarinfo(str(source), arcname=name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(source, "rb") as handle:
                tar.addfile(info, handle)
    return path


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def spark_conf(archive: Path) -> dict[str, str]:
    """What a cluster session needs to run its executors in the archive."""
    return {"spark.archives": f"{archive}#{ARCHIVE_NAME}",
            "spark.pyspark.python": PYTHON}


if __name__ == "__main__":  # for spark-submit's --archives (scripts/rmqsim_submit.py)
    print(f"{packed_env()}#{ARCHIVE_NAME}")
