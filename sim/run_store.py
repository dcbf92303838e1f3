"""Where `rmqsim run` writes: one fresh directory per run, never two runs mixed (as Jepsen's store).

Without `--out`, each run gets `runs/<scenario>/<UTC time>-seed-<n>/` (a suffix `-2`, `-3`...
if that second is taken) and the links `runs/<scenario>/latest` and `runs/latest` point to the
newest run. With `--out DIR`, a directory that already holds a run (any of `RUN_FILES`) is
refused, or with `--replace` those files are deleted first (only those: anything else in DIR is
left alone); so a rerun never leaves an old trace or report beside a new summary.

The caller passes the time stamp (the CLI reads the wall clock; nothing here does).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sim.files import OutputError

RUN_FILES = ("summary.json", "run_meta.json", "scenario.resolved.json", "trace", "report")
LATEST = "latest"


def fresh_run_dir(root: Path, name: str, seed: int, stamp: str) -> Path:
    """A new, empty `root/name/<stamp>-seed-<seed>[-k]`, created; refused if it would resolve
    outside `root` (a symbolic link placed there)."""
    parent = root / name
    if not parent.resolve().is_relative_to(root.resolve()):  # checked before anything is created
        raise OutputError(f"{parent} resolves outside {root}/ (a symbolic link?); pass --out to write there")
    parent.mkdir(parents=True, exist_ok=True)
    for k in range(1, 1000):
        candidate = parent / (f"{stamp}-seed-{seed}" + (f"-{k}" if k > 1 else ""))
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot create {candidate}: {exc.strerror or exc}") from None
        return candidate
    raise OutputError(f"{parent}: too many runs stamped {stamp}")


def link_latest(run_dir: Path, root: Path) -> None:
    """Point `run_dir/../latest` and `root/latest` at `run_dir` (replaced atomically)."""
    for holder in (run_dir.parent, root):
        link = holder / LATEST
        if link.exists() and not link.is_symlink():
            continue  # a user's own file or directory named `latest`: left alone
        tmp = holder / f".{LATEST}.tmp-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(os.path.relpath(run_dir, holder), target_is_directory=True)
        os.replace(tmp, link)


def earlier_run(out: Path) -> list[str]:
    """The run files already in `out` (none: it may be written)."""
    return [name for name in RUN_FILES if (out / name).exists() or (out / name).is_symlink()]


def claim_out_dir(out: Path, replace: bool) -> Path:
    """`--out DIR`: refused if it holds an earlier run, unless `replace` (then its run files go)."""
    found = earlier_run(out) if out.is_dir() else []
    if found and not replace:
        raise OutputError(f"{out} already holds a run ({', '.join(found)}); choose another --out, add --replace "
                          "to delete that run's files, or leave out --out for a fresh directory")
    for name in found:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return out
