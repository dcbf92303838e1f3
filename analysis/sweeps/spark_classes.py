"""A class archive for the report's JVM (Java's AppCDS): Spark's classes parsed once, mapped by
every later report, so that its session starts and answers its first query in about half the time.

A report's own SparkSession spends most of its seconds loading and verifying thousands of Spark
classes, the same ones every time. `java -XX:ArchiveClassesAtExit=F` writes those it loaded into
F when the JVM exits, and `-XX:SharedArchiveFile=F` maps them at start-up (measured on the 2-core
machine: gateway, context, session and first job 10.7 s → 5.6 s).

- The archive lives in the temporary directory, `rmqsim-spark-classes-<key>.jsa`, the key a digest
  of the Java binary, the pyspark installation and the report's JVM options: another Java or Spark
  gets its own. A JVM that finds an archive it cannot use (made by another build) ignores it and
  loads its classes as usual; its complaints are switched off (`-Xlog:cds*=off`), and a Java too
  old for these options ignores them (`-XX:+IgnoreUnrecognizedVMOptions`).
- Only a caller that ends the JVM itself makes one (`rmqsim report`: `keep=True`): the archive
  is written as the JVM exits, so `finish` — called once the report is written — ends the session,
  waits for the JVM (seconds, on the first report only) and renames the file into place; an interrupted writer leaves a hidden
  temporary file, removed by the next writer once its process is gone. Reports inside a longer
  process (tests, `sweep --report`) only use an archive that exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "rmqsim-spark-classes-"
QUIET = "-XX:+IgnoreUnrecognizedVMOptions -Xlog:cds*=off"
EXIT_WAIT_S = 180  # the JVM writing its archive at exit (about 150 MB)
_TEMPORARY_RE = re.compile(rf"\.{PREFIX}[0-9a-f]+\.jsa\.tmp-(?P<pid>[0-9]+)")
_pending: dict[str, Path] = {}  # the archive this process's JVM will write at exit, while one will


def archive_path(java_options: str) -> Path:
    """The archive for this Java, this pyspark and these JVM options."""
    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = os.path.realpath(Path(home) / "bin" / "java") if home else os.path.realpath(shutil.which("java") or "java")
    try:
        stamp = os.stat(java).st_mtime_ns
    except OSError:
        stamp = 0
    key = json.dumps([java, stamp, pyspark.__version__, os.path.dirname(pyspark.__file__), java_options])
    return Path(tempfile.gettempdir()) / f"{PREFIX}{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def options(java_options: str, keep: bool) -> str:
    """JVM options that map the archive, or (`keep`, and none yet) make one at exit."""
    archive = archive_path(java_options)
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    if not keep:
        return ""
    _remove_abandoned(archive.parent)
    temporary = archive.with_name(f".{archive.name}.tmp-{os.getpid()}")
    _pending["archive"], _pending["temporary"] = archive, temporary
    return f"-XX:ArchiveClassesAtExit={temporary} {QUIET}"


def pending() -> bool:
    """This process started a JVM that will write an archive when it ends."""
    return "temporary" in _pending


def finish() -> None:
    """If this process's JVM is to write an archive: stop its session, end the JVM, wait for it
    and put the archive in place (module docstring). Otherwise nothing."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if not pending():
        return
    archive, temporary = _pending.pop("archive"), _pending.pop("temporary")
    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None  # a later session starts a new JVM
    if proc is None:
        return
    try:
        proc.stdin.close()  # the gateway exits on end of input; the JVM then writes the archive
        proc.wait(timeout=EXIT_WAIT_S)
    except Exception:  # noqa: BLE001 - a JVM that does not end in time: no archive, nothing else lost
        proc.kill()
    if proc.returncode == 0 and temporary.is_file():
        os.replace(temporary, archive)
    else:
        temporary.unlink(missing_ok=True)


def _remove_abandoned(folder: Path) -> None:
    """Temporary archives whose writer is gone (interrupted before it renamed its file)."""
    for path in folder.glob(f".{PREFIX}*.jsa.tmp-*"):
        match = _TEMPORARY_RE.fullmatch(path.name)
        if match and not _running(int(match.group("pid"))):
            path.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
