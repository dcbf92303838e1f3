"""An executor's Python start on a cluster: the packed environment unpacked once per host and digest, then run.

Spark starts an executor's Python workers with `spark.pyspark.python`, on a cluster
`./rmqsim-python` (analysis/sweeps/executor_env.py ships it with `spark.files`: a shell launcher that runs
this file with the host's base Python, `-I -S`, so the standard library only, and the archive Spark
fetched beside it, named `.pack` so that Spark does not unpack it into the application's work
directory itself, as it does a `.tar.gz`). Here:

- the environment is unpacked into CACHE/<key> (the key: the archive's content digest; CACHE:
  `$RMQSIM_EXECUTOR_ENV_CACHE`, which scripts/spark_standalone.sh sets to its state directory's
  `envs/`, else `${XDG_CACHE_HOME:-~/.cache}/rmqsim/executor-envs`) once per host: the first
  executor unpacks into a hidden temporary folder and renames it into place under the cache's lock
  (CACHE/.lock), and every later executor, of this sweep or of the next with the same sources and
  dependencies, reuses it;
- the process holds a shared lock on CACHE/<key>.lock for its life, passed through exec to the
  Python worker daemon (and its forked workers): an environment in use is never removed;
- environments not in use are removed, least recently started first, while the cache holds more
  than MAX_CACHE_BYTES (the one starting never), as are the leftovers of an unpacking or removal
  that was killed (only ever present outside the cache's lock);
- the archive's copy in the executor's work directory is removed once the environment is in place
  (the work directory would otherwise keep one per sweep and executor);
- then it execs CACHE/<key>/bin/python with Spark's arguments (`-m pyspark.daemon`).
A cache that cannot be written (a read-only home) is reported on the executor's stderr, and the
environment is unpacked into the work directory instead (one per executor, gone with the
application's work directory).

Standard library only, and no import of the project: this runs before the environment exists.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import sys
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path

CACHE_ENV = "RMQSIM_EXECUTOR_ENV_CACHE"  # where the unpacked environments live on an executor host
MAX_CACHE_BYTES = 1 << 30  # unused environments are removed, oldest first, above this
PACK_RE = re.compile(r"rmqsim-executor-env-(?P<key>[0-9a-f]{16})\.pack")
KEY_RE = re.compile(r"[0-9a-f]{16}")
LEFTOVER_PREFIXES = (".tmp-", ".trash-")  # an unpacking or a removal that was killed


class MissingArchive(Exception):
    """The environment is not unpacked here and its archive is gone (removed after an earlier start)."""


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """CACHE_ENV, else the user's cache directory (module docstring)."""
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV])
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "rmqsim" / "executor-envs"


def key_of(pack: Path) -> str:
    match = PACK_RE.fullmatch(pack.name)
    if match is None:
        raise ValueError(f"{pack.name}: not an rmqsim executor archive (rmqsim-executor-env-<key>.pack)")
    return match.group("key")


def ensure_env(pack: Path, cache: Path, max_bytes: int = MAX_CACHE_BYTES) -> tuple[Path, int]:
    """CACHE/<key>, unpacked from `pack` unless it is there already, and the descriptor of the
    shared lock that marks it in use (the caller keeps it open as long as it uses the environment).
    Then the cache is pruned to `max_bytes`."""
    key = key_of(pack)
    cache.mkdir(parents=True, exist_ok=True)
    held = hold_shared(cache / f"{key}.lock")
    try:
        with _exclusive(cache / ".lock"):
            env = cache / key
            _remove_leftovers(cache)
            if not env.is_dir():
                _unpack(pack, cache / f"{LEFTOVER_PREFIXES[0]}{key}-{os.getpid()}", env)
            os.utime(env)  # last start: the order in which unused environments go
            prune(cache, key, max_bytes)
    except BaseException:
        os.close(held)
        raise
    return env, held


def hold_shared(path: Path) -> int:
    """A shared lock on `path`, on the file that is there once it is granted: a remover unlinks the
    lock file of the environment it removes, so a lock granted on an unlinked file is taken again."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _unpack(pack: Path, tmp: Path, env: Path) -> None:
    """`pack` (a tar.gz) into `tmp`, then renamed to `env`: a folder under a key's name is whole."""
    if not pack.is_file():
        raise MissingArchive(f"{env.name} is not in {env.parent} and its archive {pack} is gone; rerun the sweep")
    with tarfile.open(pack, "r:gz") as tar:
        tar.extractall(tmp, filter="data")  # nothing outside tmp, no device, no set-uid bit
    os.rename(tmp, env)


def _remove_leftovers(cache: Path) -> None:
    """(Under the cache's lock, where no unpacking or removal is under way.)"""
    for path in cache.iterdir():
        if path.name.startswith(LEFTOVER_PREFIXES):
            shutil.rmtree(path, ignore_errors=True)


def prune(cache: Path, keep: str, max_bytes: int) -> list[str]:
    """Remove unused environments (no process holds their lock), least recently started first,
    while the cache holds more than `max_bytes`; never `keep`. Returns the keys removed.
    (Under the cache's lock.)"""
    envs = sorted((path.stat().st_mtime_ns, path.name, _size_bytes(path)) for path in cache.iterdir()
                  if KEY_RE.fullmatch(path.name) and path.is_dir())
    total = sum(size for *_, size in envs)
    removed = []
    for _started, key, size in envs:
        if total <= max_bytes:
            break
        if key != keep and _remove_unused(cache, key):
            total -= size
            removed.append(key)
    return removed


def _size_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _remove_unused(cache: Path, key: str) -> bool:
    """Remove CACHE/<key> if no process uses it (its lock taken exclusively without waiting)."""
    lock = cache / f"{key}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        trash = cache / f"{LEFTOVER_PREFIXES[1]}{key}-{os.getpid()}"
        os.rename(cache / key, trash)  # gone at once under its key; deleted at leisure
        shutil.rmtree(trash, ignore_errors=True)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def main(argv: list[str]) -> None:
    """`boot.py PACK [python arguments...]`: the environment in place, then its Python run (module docstring)."""
    pack = Path(argv[1])
    cache = cache_dir()
    try:
        try:
            env, held = ensure_env(pack, cache)
        except OSError as exc:
            print(f"rmqsim executor: cannot use the environment cache {cache} ({exc}); unpacking into "
                  f"{Path.cwd()} instead", file=sys.stderr)
            env, held = ensure_env(pack, Path.cwd() / "rmqsim-envs")
    except (MissingArchive, OSError, tarfile.TarError) as exc:
        sys.exit(f"rmqsim executor: could not set up the environment from {pack}: {exc}")
    os.set_inheritable(held, True)  # the lock stays held by the Python Spark runs, for its life
    pack.unlink(missing_ok=True)  # the executor's copy: the environment is in place
    python = env / "bin" / "python"
    os.execv(python, [str(python), *argv[2:]])


if __name__ == "__main__":
    main(sys.argv)
