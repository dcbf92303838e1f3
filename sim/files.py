"""File output and read-back: atomic writes, checked output directories, and a record of what
rmqsim wrote, so that nothing it did not write is ever deleted or read as its own.

`atomic_path(final)` yields a hidden temporary path beside `final` (`.<name>.tmp-<pid>`, so
Spark and globbing readers skip it); when the block ends normally the file is renamed into
place, otherwise it is removed. Same directory, so the rename is atomic on POSIX. A process
killed inside the block leaves its temporary file behind: `is_temporary` recognises such
leftovers, for whoever resumes the work to remove.

`writable_dir(path)` creates a directory (and its parents) and proves it writable by creating
and removing a file in it, so that a run or sweep fails before it simulates anything rather
than after; `/`, the top-level system directories and the user's home directory themselves,
and anything inside `/proc`, `/sys`, `/dev`, `/etc`, `/boot`, `/usr` and the binary and library
folders are refused (`system_dir`). Problems are `OutputError`s with a short reason; a write
that fails on the way (a full disk) is an `OutputError` "could not write <path>: <reason>"
(`write_error`), which the CLI turns into exit code 2.

Reading back (reports, resume): `open_regular(path)` opens without following a final symbolic
link and without blocking, and insists on a regular file (a FIFO, device, directory or link is
an `UnsafeFile`); `read_bounded` reads at most a given size; `file_digest` gives size and
SHA-256; `read_json` reads a JSON file rmqsim wrote (bounded in size here, in depth and by a
declared shape in sim/readback.py).

The manifest (`MANIFEST`, `.rmqsim-manifest.json`): `OwnedDir` writes files into one directory
and records each one it wrote (relative path, size, SHA-256), and the folders it created, in
that directory's manifest, rewritten atomically. While it works the manifest says
`"complete": false` and lists the names it may still write (`pending`); `commit` writes it
complete. `removal_plan` says which entries of a directory rmqsim can prove it wrote: listed
with the same size and digest; for an incomplete manifest also a listed pending name, a file
with a name rmqsim writes in a folder it created for the work, and temporary files of those
names; inside a subfolder with a manifest of its own (a report), what that manifest proves.
Anything else — a user's file, a symbolic link, a file changed since — is "foreign": callers
refuse to delete and name it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # sim/readback.py is imported where a file is read back: validating a scenario reads none
    from sim.readback import Shape

_TEMPORARY_RE = re.compile(r"\.(?P<name>.+)\.tmp-[0-9]+")
MANIFEST = ".rmqsim-manifest.json"
MAX_MANIFEST_BYTES = 64 << 20  # a run's or report's manifest (a few KiB: one entry per file)
_FORMAT = 1
_CHUNK = 1 << 20

# `--out` never names these: writing `summary.json` into `/`, or a report into `/etc`, is a slip
_SYSTEM_EXACT = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
                           "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
                           "/usr", "/var"})
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys",
                 "/usr")


class OutputError(Exception):
    """An output location rmqsim cannot or will not write to (a short reason)."""


class UnsafeFile(Exception):
    """A file rmqsim will not read as its own (a link, FIFO, device, folder, too large, unreadable)."""


def is_temporary(name: str) -> bool:
    """A leftover of `atomic_path` (`.<name>.tmp-<pid>`)."""
    return _TEMPORARY_RE.fullmatch(name) is not None


def temporary_of(name: str) -> str | None:
    """The final name a temporary file `.<name>.tmp-<pid>` was for, else None."""
    match = _TEMPORARY_RE.fullmatch(name)
    return match.group("name") if match else None


def write_error(path: Path | str, exc: BaseException) -> OutputError:
    """`could not write <path>: <reason>` for an OSError of a write (a full disk, a quota)."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code == errno.ENOSPC or "No space left on device" in text or "errno 28" in text:
        reason = "no space left on device"
    elif code == errno.EDQUOT or "Disk quota exceeded" in text:
        reason = "disk quota exceeded"
    else:
        reason = getattr(exc, "strerror", None) or (text.splitlines() or [type(exc).__name__])[0][:200]
    return OutputError(f"could not write {path}: {reason}")


def system_dir(path: Path) -> str | None:
    """Why `path` (resolved) is a system directory no output may go to, or None."""
    try:
        real = str(Path(path).resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL byte: writable_dir reports it
        return None
    try:
        home = str(Path.home().resolve())
    except (OSError, RuntimeError, KeyError):
        home = None
    if real in _SYSTEM_EXACT or real == home:
        return f"{real} is a system directory" if real != home else f"{real} is the home directory"
    for tree in _SYSTEM_TREES:
        if real.startswith(tree + "/"):
            return f"{real} is inside the system directory {tree}"
    return None


def writable_dir(path: Path) -> Path:
    """`path`, created if missing and checked writable; OutputError otherwise."""
    why = system_dir(path)
    if why is not None:
        raise OutputError(f"{why}; rmqsim writes its output only into a directory of its own: choose another one")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rmqsim-probe-"):
            pass
    except FileExistsError:
        raise OutputError(f"{path} exists and is not a directory") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise OutputError(f"cannot write in {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return path


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(final: Path, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text, encoding="utf-8")


# ------------------------------------------------------------------ reading back

def lstat_kind(path: Path) -> str | None:
    """'file', 'dir', 'link', 'other' (FIFO, device, socket) by lstat, or None if absent."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "other"
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def _kind_text(kind: str | None) -> str:
    return {"link": "a symbolic link", "dir": "a folder", "other": "not a regular file (a FIFO, device or socket)",
            None: "missing"}.get(kind, "not a regular file")


def open_regular(path: Path) -> int:
    """A read-only descriptor of a regular file, opened without following a final link and
    without blocking (a FIFO never hangs the reader); UnsafeFile otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnsafeFile("missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile("a symbolic link") from None
        raise UnsafeFile(f"cannot read it: {exc.strerror or exc}") from None
    except ValueError:
        raise UnsafeFile("the path contains a NUL byte") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(_kind_text(lstat_kind(path) or "other"))
    return fd


@contextmanager
def regular_file(path: Path) -> Iterator[Any]:
    """A binary file object of a regular file (`open_regular`); for pyarrow readers."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        yield handle


def read_at_most(fd: int, limit: int) -> bytes | None:
    """The content of the open file `fd`, or None if it holds more than `limit` bytes (by its
    size, or by reading: st_size is 0 for /proc files); never reads more than `limit` + 1 bytes.
    OSError propagates (sim/inputs.py and `read_bounded` word it for their readers)."""
    if os.fstat(fd).st_size > limit:
        return None
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)


def read_json(path: Path, limit: int, error: Callable[[str], Exception], damaged: str,
              shape: Shape | None = None) -> Any:
    """The JSON file `path`, bounded in size (`limit` bytes), depth and shape (sim/readback.py:
    `shape`, when given, checks the fields of the parsed value). `error(text)` is raised: "cannot read PATH: WHY"
    (not a regular file, too large, unreadable), "PATH DAMAGED: WHY" (not UTF-8, too deep, not
    JSON: the parser's reason), "PATH: KEY PATH: expected ..., got ..." (not of `shape`)."""
    from sim.readback import DocumentError, parse_json, shape_problem

    try:
        raw = read_bounded(path, limit)
    except (UnsafeFile, OSError) as exc:
        raise error(f"cannot read {path}: {exc}") from None
    try:
        data = parse_json(raw)
    except DocumentError as exc:
        raise error(f"{path} {damaged}: {exc}") from None
    if shape is not None:
        problem = shape_problem(data, shape)
        if problem is not None:
            raise error(f"{path}: {problem}")
    return data


def read_bounded(path: Path, limit: int) -> bytes:
    """The content of a regular file of at most `limit` bytes; UnsafeFile otherwise (never reads more)."""
    fd = open_regular(path)
    try:
        data = read_at_most(fd, limit)
    except OSError as exc:
        raise UnsafeFile(f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if data is None:
        raise UnsafeFile(f"larger than {limit:,} bytes")
    return data


def file_digest(path: Path) -> dict[str, Any]:
    """`{"size": bytes, "sha256": hex}` of a regular file; UnsafeFile otherwise."""
    fd = open_regular(path)
    digest, size = hashlib.sha256(), 0
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UnsafeFile(f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return {"size": size, "sha256": digest.hexdigest()}


def some(names: list[str], n: int = 5) -> str:
    """`a, b, c and 4 more`."""
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


# ------------------------------------------------------------------ the manifest of what rmqsim wrote

def _relative(text: Any) -> bool:
    if not isinstance(text, str) or not text or "\0" in text or "\\" in text:
        return False
    parts = PurePosixPath(text).parts
    return not PurePosixPath(text).is_absolute() and all(p not in ("", ".", "..") for p in parts) \
        and PurePosixPath(*parts).as_posix() == text


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """`directory`'s manifest, None if it has none; UnsafeFile if it is not one rmqsim wrote
    (a link, not a regular file, too large, damaged JSON, the wrong shape)."""
    from sim.readback import DocumentError, parse_json

    path = directory / MANIFEST
    if lstat_kind(path) is None:
        return None
    try:
        data = parse_json(read_bounded(path, MAX_MANIFEST_BYTES))
    except UnsafeFile as exc:
        raise UnsafeFile(f"{path}: {exc}") from None
    except DocumentError as exc:  # not UTF-8, nested too deep, not JSON
        raise UnsafeFile(f"{path}: damaged (not the JSON rmqsim writes: {exc})") from None
    files = data.get("files") if isinstance(data, dict) else None
    ok = (isinstance(data, dict) and isinstance(data.get("tool"), str) and data.get("format") == _FORMAT
          and isinstance(data.get("complete"), bool) and isinstance(files, dict)
          and isinstance(data.get("dirs"), list) and isinstance(data.get("pending"), list)
          and all(_relative(d) for d in data["dirs"]) and all(_relative(p) for p in data["pending"])
          and all(_relative(p) and isinstance(e, dict) and type(e.get("size")) is int and e["size"] >= 0
                  and isinstance(e.get("sha256"), str) for p, e in files.items()))
    if not ok:
        raise UnsafeFile(f"{path}: not a manifest of rmqsim (damaged or garbled)")
    return data


def write_manifest(directory: Path, tool: str, files: dict[str, dict], dirs: Iterable[str] = (),
                   pending: Iterable[str] = (), complete: bool = True) -> None:
    data = {"tool": tool, "format": _FORMAT, "complete": complete, "dirs": sorted(set(dirs)),
            "pending": sorted(set(pending)), "files": dict(sorted(files.items()))}
    try:
        atomic_write_text(directory / MANIFEST, json.dumps(data, indent=1))
    except OSError as exc:
        raise write_error(directory / MANIFEST, exc) from None


def matches(path: Path, entry: dict[str, Any]) -> bool:
    """The file at `path` is a regular file with the recorded size and SHA-256."""
    try:
        if os.lstat(path).st_size != entry["size"]:
            return False
        return file_digest(path) == {"size": entry["size"], "sha256": entry["sha256"]}
    except (OSError, UnsafeFile):
        return False


class Plan:
    """What `removal_plan` found: files and folders provably rmqsim's (deepest first), and the rest."""

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.dirs: list[Path] = []
        self.foreign: list[str] = []

    def delete(self) -> None:
        """Delete the files, then the folders left empty (a folder something new appeared in stays)."""
        for path in self.files:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                raise OutputError(f"could not delete {path}: {exc.strerror or exc}") from None
        for path in sorted(self.dirs, key=lambda p: len(p.parts), reverse=True):
            try:
                path.rmdir()
            except OSError:
                pass


def removal_plan(directory: Path, names: Iterable[str], manifest: dict[str, Any] | None,
                 writes_here: Callable[[str], bool] = lambda rel: False, label: str = "") -> Plan:
    """Which of `directory`'s top-level entries `names` (recursively) rmqsim can prove it wrote,
    by `manifest` (see the module docstring). `writes_here(rel)`: a relative path of a name
    rmqsim writes there (for the leftovers of an incomplete manifest). `label` prefixes the
    names reported as foreign."""
    plan = Plan()
    files = (manifest or {}).get("files", {})
    complete = (manifest or {}).get("complete", True)
    pending = set((manifest or {}).get("pending", ()))
    created = set((manifest or {}).get("dirs", ()))

    def ours(rel: str, path: Path) -> bool:
        entry = files.get(rel)
        if entry is not None and matches(path, entry):
            return True
        if manifest is None or complete or lstat_kind(path) != "file":
            return False
        parent = str(PurePosixPath(rel).parent)
        in_created = parent in created or any(parent.startswith(d + "/") for d in created)
        return rel in pending or (in_created and writes_here(rel))

    def visit(rel: str) -> None:
        path = directory / rel
        kind = lstat_kind(path)
        if kind is None or rel == MANIFEST:  # the record itself: judged by the caller, removed last
            return
        if kind == "dir" and manifest is not None and rel in created:
            for child in sorted(os.listdir(path)):
                visit(f"{rel}/{child}")
            plan.dirs.append(path)
        elif kind == "dir" and lstat_kind(path / MANIFEST) == "file":  # a folder with its own record (a report)
            nested = removal_plan(path, os.listdir(path), _nested_manifest(path, plan, label + rel + "/"),
                                  label=label + rel + "/")
            plan.files += nested.files
            plan.dirs += [*nested.dirs, path]
            plan.foreign += nested.foreign
        elif kind == "file" and (ours(rel, path) or _ours_temporary(rel, path, files, pending, complete,
                                                                    created, writes_here)):
            plan.files.append(path)
        elif kind == "dir":  # a folder rmqsim has no record of: name what is in it
            plan.foreign += [label + name for name in contents(directory, [rel])]
        else:
            why = {"link": " (a symbolic link)", "other": " (not a regular file)"}.get(kind, "")
            if kind == "file" and rel in files:
                why = " (changed since rmqsim wrote it)"
            plan.foreign.append(f"{label}{rel}{why}")

    for name in sorted(names):
        visit(name)
    if manifest is not None and lstat_kind(directory / MANIFEST) == "file":
        plan.files.append(directory / MANIFEST)
    return plan


def contents(directory: Path, names: Iterable[str], limit: int = 1000) -> list[str]:
    """The relative paths of the files (and empty folders, links, FIFOs...) under `names` in
    `directory`, without following links; at most `limit` of them (what a refusal names)."""
    out: list[str] = []
    todo = sorted(names, reverse=True)
    while todo and len(out) < limit:
        rel = todo.pop()
        kind = lstat_kind(directory / rel)
        if kind == "dir":
            try:
                children = sorted(os.listdir(directory / rel), reverse=True)
            except OSError:
                children = []
            if not children:
                out.append(rel + "/")
            todo += [f"{rel}/{c}" for c in children]
        elif kind is not None:
            out.append(rel + {"link": " (a symbolic link)", "other": " (not a regular file)"}.get(kind, ""))
    return out


def _nested_manifest(path: Path, plan: Plan, label: str) -> dict[str, Any] | None:
    try:
        return read_manifest(path)
    except UnsafeFile:
        plan.foreign.append(f"{label}{MANIFEST} (not a manifest of rmqsim)")
        return None


def _ours_temporary(rel: str, path: Path, files: dict, pending: set, complete: bool, created: set,
                    writes_here: Callable[[str], bool]) -> bool:
    """A leftover temporary file of a name rmqsim records or writes in this folder."""
    final = temporary_of(path.name)
    if final is None:
        return False
    target = str(PurePosixPath(rel).parent / final) if "/" in rel else final
    if target in files or target in pending or target == MANIFEST:
        return True
    parent = str(PurePosixPath(rel).parent)
    return not complete and (parent in created or any(parent.startswith(d + "/") for d in created)) \
        and writes_here(target)


REPORT_TOOL = "rmqsim report"


def report_dir(default: Path, given: Path | None = None) -> Path:
    """Where a report goes: `given` (`--out`, as the user names it), else `default` (DIR/report),
    which must be a folder, not a symbolic link (a report is never written through a link that
    someone placed in a run or sweep directory); created and checked writable."""
    if given is None:
        kind = lstat_kind(default)
        if kind not in (None, "dir"):
            raise OutputError(f"{default} is {_kind_text(kind)}; a report is written only into a folder of its own: "
                              "move it away, or pass --out")
    return writable_dir(given if given is not None else default)


class OwnedDir:
    """Files rmqsim writes into `directory`, recorded in its manifest (module docstring).

    `names`: the relative paths this piece of work may write (checked up front: each one that
    exists must be rmqsim's, or OutputError names it); `tool`: who writes ("rmqsim run").
    Write with `write_text(rel, text)` or `with owned.path(rel) as tmp:`; `commit()` writes the
    manifest complete; `abandon()` removes what this work wrote and records that."""

    def __init__(self, directory: Path, tool: str, names: Iterable[str] = (), dirs: Iterable[str] = ()) -> None:
        self.directory, self.tool = directory, tool
        try:
            previous = read_manifest(directory)
        except UnsafeFile as exc:
            raise OutputError(f"{exc}; not writing into {directory}") from None
        self.files: dict[str, dict] = dict((previous or {}).get("files", {}))
        self.dirs: set[str] = set((previous or {}).get("dirs", ())) | set(dirs)
        self.pending = set(names)
        self.was_pending = set(previous["pending"]) if previous is not None and not previous["complete"] else set()
        self._check(sorted(self.pending))
        self.written: list[str] = []
        write_manifest(directory, tool, self.files, self.dirs, self.pending, complete=False)

    def _check(self, names: list[str]) -> None:
        """Each of `names` that exists here is a file rmqsim recorded (unchanged) or was writing."""
        clash = []
        for rel in names:
            kind = lstat_kind(self.directory / rel)
            if kind is None:
                continue
            entry = self.files.get(rel)
            if not (kind == "file" and ((entry is not None and matches(self.directory / rel, entry))
                                        or rel in self.was_pending)):
                clash.append(rel + ("" if kind == "file" else f" ({_kind_text(kind)})"))
        if clash:
            raise OutputError(f"{self.directory} already holds {some(clash)}, which rmqsim has no record of writing; "
                              "not overwriting it: move it away, or choose another directory")

    def add_dir(self, rel: str) -> Path:
        """Record that rmqsim creates the folder `rel` here (before creating it)."""
        self.dirs.add(rel)
        write_manifest(self.directory, self.tool, self.files, self.dirs, self.pending, complete=False)
        return self.directory / rel

    @contextmanager
    def path(self, rel: str) -> Iterator[Path]:
        """A temporary path for `rel`, renamed into place and recorded when the block ends."""
        if rel not in self.pending and rel not in self.written:
            self._check([rel])
            self.pending.add(rel)
        final = self.directory / rel
        try:
            with atomic_path(final) as tmp:
                yield tmp
        except OSError as exc:
            raise write_error(final, exc) from None
        self.written.append(rel)
        self.record(rel)

    def write_text(self, rel: str, text: str) -> Path:
        with self.path(rel) as tmp:
            tmp.write_text(text, encoding="utf-8")
        return self.directory / rel

    def record(self, rel: str) -> None:
        """Record a file written here by other means (already in place)."""
        try:
            self.files[rel] = file_digest(self.directory / rel)
        except UnsafeFile as exc:
            raise OutputError(f"could not record {self.directory / rel}: {exc}") from None
        if rel not in self.written:
            self.written.append(rel)

    def commit(self) -> None:
        """The manifest, complete: every listed file that is still there unchanged."""
        self.files = {rel: e for rel, e in self.files.items() if lstat_kind(self.directory / rel) == "file"}
        write_manifest(self.directory, self.tool, self.files, self.dirs, (), complete=True)

    def abandon(self, extra: Iterable[Path] = ()) -> None:
        """Remove every file this work wrote (and `extra` paths it made), and the folders it
        created if they are empty; the manifest then lists what remains (best effort: a full
        disk may keep it from being rewritten, never from removing)."""
        for rel in self.written:
            (self.directory / rel).unlink(missing_ok=True)
            self.files.pop(rel, None)
        for path in extra:
            if lstat_kind(path) == "file":
                path.unlink(missing_ok=True)
        for rel in sorted(self.dirs, key=lambda d: d.count("/"), reverse=True):
            try:
                (self.directory / rel).rmdir()
                self.dirs.discard(rel)
            except OSError:
                pass
        self.written = []
        self.files = {rel: e for rel, e in self.files.items() if lstat_kind(self.directory / rel) == "file"}
        try:
            if self.files or self.dirs:
                write_manifest(self.directory, self.tool, self.files, self.dirs, (), complete=True)
            else:
                (self.directory / MANIFEST).unlink(missing_ok=True)
        except (OutputError, OSError):
            pass
