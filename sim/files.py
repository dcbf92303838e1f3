"""File output: atomic writes, and output directories checked before any work is done.

`atomic_path(final)` yields a hidden temporary path beside `final` (`.<name>.tmp-<pid>`, so
Spark and globbing readers skip it); when the block ends normally the file is renamed into
place, otherwise it is removed. Same directory, so the rename is atomic on POSIX. A process
killed inside the block leaves its temporary file behind: `is_temporary` recognises such
leftovers, for whoever resumes the work to remove.

`writable_dir(path)` creates a directory (and its parents) and proves it writable by creating
and removing a file in it, so that a run or sweep fails before it simulates anything rather
than after; problems are `OutputError`s with a short reason.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TEMPORARY_RE = re.compile(r"\..+\.tmp-[0-9]+")


class OutputError(Exception):
    """An output location rmqsim cannot or will not write to (a short reason)."""


def is_temporary(name: str) -> bool:
    """A leftover of `atomic_path` (`.<name>.tmp-<pid>`)."""
    return _TEMPORARY_RE.fullmatch(name) is not None


def writable_dir(path: Path) -> Path:
    """`path`, created if missing and checked writable; OutputError otherwise."""
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
