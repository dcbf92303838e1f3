"""Where `rmqsim run` writes: one fresh directory per run, never two runs mixed (as Jepsen's store),
and nothing deleted that rmqsim cannot prove it wrote.

Without `--out`, each run gets `runs/<scenario>/<UTC time>-seed-<n>/` (a suffix `-2`, `-3`...
if that second is taken) and, once the run's files are written, the links
`runs/<scenario>/latest` and `runs/latest` point to it. The scenario name `latest` is refused
there (`runs/latest` is the link; a run inside it would be written into the previous run's
directory), as is a `runs/<scenario>` that is a symbolic link.

Each run directory holds a manifest, `.rmqsim-manifest.json` (sim/files.py): the files the run
wrote (`summary.json`, `run_meta.json`, `scenario.resolved.json`, `trace/<kind>.parquet`, and for
an invalid or unknown run its repro card `repro.md`) with
size and SHA-256, and the folders it created (`trace`). It is written when the directory is
claimed (incomplete: the names the run may write) and rewritten complete after the last file.
A report written into `report/` keeps a manifest of its own there.

`--out DIR`: a directory holding any of `RUN_FILES` (or a manifest) is refused. With `--replace`
its earlier run is deleted only if the manifest proves every file and folder in the run's places
(`RUN_FILES`) is one rmqsim wrote and has not changed since; otherwise nothing is deleted and
the refusal names what is not provably rmqsim's (a user's `report/thesis.tex`, a file edited
since, a symbolic link). A directory without a manifest that holds any of those names is never
replaced. Other files in DIR (`notes.txt`) are left alone.

`RunOutput` writes the run's files: on success `finish()` records them and (default layout)
moves the `latest` links; on any failure (a full disk, an interrupt) `abandon()` removes
everything the run wrote, temporary files included, so a failed run leaves nothing behind.

The caller passes the time stamp (the CLI reads the wall clock; nothing here does).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sim.files import (
    MANIFEST,
    OutputError,
    OwnedDir,
    UnsafeFile,
    contents,
    lstat_kind,
    read_manifest,
    removal_plan,
    some,
    temporary_of,
)

RUN_FILES = ("summary.json", "run_meta.json", "scenario.resolved.json", "trace", "report", "repro.md")
WRITTEN = ("scenario.resolved.json", "run_meta.json", "summary.json")  # in this order, the summary last
CARD = "repro.md"  # an invalid or unknown run's repro card (analysis/sweeps/repro_card.py), after the summary
TRACE = "trace"
TOOL = "rmqsim run"
LATEST = "latest"
_TRACE_FILE_RE = re.compile(r"trace/[A-Za-z0-9_.-]+\.parquet")


def fresh_run_dir(root: Path, name: str, seed: int, stamp: str) -> Path:
    """A new, empty `root/name/<stamp>-seed-<seed>[-k]`, created; refused for the reserved name
    `latest`, and if `root/name` is a symbolic link or would resolve outside `root`."""
    if name == LATEST:
        raise OutputError(f"the scenario name {LATEST!r} is reserved in {root}/ ({root}/{LATEST} links the newest "
                          "run); pass --out DIR, or give the scenario another name")
    parent = root / name
    kind = lstat_kind(parent)
    if kind == "link" or kind not in (None, "dir"):
        raise OutputError(f"{parent} is {'a symbolic link' if kind == 'link' else 'not a directory'}, not a "
                          f"folder of runs; pass --out to write elsewhere")
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
    """The run files (and the manifest, and leftover temporary files of run files) already in
    `out` (none: it may be written)."""
    found = [name for name in (*RUN_FILES, MANIFEST) if lstat_kind(out / name) is not None]
    try:
        names = sorted(os.listdir(out))
    except OSError:
        names = []
    return found + [n for n in names if temporary_of(n) in (*RUN_FILES, MANIFEST)]


def _writes_here(rel: str) -> bool:
    """A name an (interrupted) run writes in the folder it created: `trace/<kind>.parquet`."""
    return _TRACE_FILE_RE.fullmatch(rel) is not None


def claim_out_dir(out: Path, replace: bool) -> Path:
    """`--out DIR`: refused if it holds an earlier run, unless `replace` and the earlier run's
    manifest proves every file in the run's places is rmqsim's (module docstring)."""
    found = earlier_run(out) if out.is_dir() else []
    if not found:
        return out
    try:
        manifest = read_manifest(out)
    except UnsafeFile as exc:
        raise OutputError(f"{exc}: cannot tell what rmqsim wrote in {out}; not touching it, choose another "
                          "--out") from None
    names = ", ".join(n + "/" if lstat_kind(out / n) == "dir" else n for n in found)
    if manifest is None or manifest["tool"] != TOOL:
        held = contents(out, found)
        raise OutputError(f"{out} holds {some(held)}, which rmqsim has no record of writing (no run manifest "
                          f"{MANIFEST}; runs written before rmqsim kept one have none); {'--replace deletes only what rmqsim can prove it wrote, so nothing was deleted: ' if replace else ''}"
                          "choose another --out, or move them away yourself")
    if not replace:
        raise OutputError(f"{out} already holds a run ({names}); choose another --out, add --replace to delete "
                          "that run's files, or leave out --out for a fresh directory")
    plan = removal_plan(out, [n for n in found if n != MANIFEST], manifest, _writes_here)
    if plan.foreign:
        raise OutputError(f"--replace: {out} holds {some(plan.foreign)} where the earlier run's files are, which "
                          "rmqsim did not write (or which changed since); nothing was deleted: move them away, or "
                          "choose another --out")
    plan.delete()
    return out


class RunOutput:
    """The files of one run in `directory` (module docstring)."""

    def __init__(self, directory: Path, link_root: Path | None = None, created: bool = False) -> None:
        self.directory, self.link_root, self.created = directory, link_root, created
        self.owned = OwnedDir(directory, TOOL, names=(*WRITTEN, CARD))

    def trace_dir(self) -> Path:
        """`trace/`, recorded as the run's before the trace writer creates it."""
        return self.owned.add_dir(TRACE)

    def write_text(self, name: str, text: str) -> Path:
        return self.owned.write_text(name, text)

    def _trace_files(self, leftovers: bool = False) -> list[Path]:
        folder = self.directory / TRACE
        if TRACE not in self.owned.dirs or lstat_kind(folder) != "dir":
            return []
        out = []
        for name in sorted(os.listdir(folder)):
            final = temporary_of(name) if leftovers else name
            if final is not None and _writes_here(f"{TRACE}/{final}") and lstat_kind(folder / name) == "file":
                out.append(folder / name)
        return out

    def finish(self) -> None:
        """Record the trace files, write the manifest complete, move the `latest` links."""
        for path in self._trace_files():
            self.owned.record(f"{TRACE}/{path.name}")
        self.owned.commit()
        if self.link_root is not None:
            link_latest(self.directory, self.link_root)

    def abandon(self) -> None:
        """Remove everything this run wrote (its directory too, if the run created it)."""
        self.owned.abandon(extra=self._trace_files() + self._trace_files(leftovers=True))
        if self.created:
            try:
                self.directory.rmdir()
            except OSError:
                pass


def open_run_output(out: str | None, replace: bool, root: Path, name: str, seed: int, stamp: str) -> RunOutput:
    """`--out` (refused if it holds a run, unless --replace proves it rmqsim's), else a fresh
    `root/<name>/<stamp>-seed-<seed>`; checked writable before anything is simulated."""
    from sim.files import writable_dir

    if out:
        return RunOutput(claim_out_dir(writable_dir(Path(out)), replace))
    root = writable_dir(root)
    directory = writable_dir(fresh_run_dir(root, name, seed, stamp))
    return RunOutput(directory, link_root=root, created=True)
