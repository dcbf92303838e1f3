"""Atomic file output: a reader sees the old file or the whole new one, never a half-written one.

`atomic_path(final)` yields a hidden temporary path beside `final` (`.<name>.tmp-<pid>`, so
Spark and globbing readers skip it); when the block ends normally the file is renamed into
place, otherwise it is removed. Same directory, so the rename is atomic on POSIX.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
