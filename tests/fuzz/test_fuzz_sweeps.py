"""Fuzz: mutations of every bundled sweep file load cleanly, without reading what they should not.

Property 1 for sweep files, in-process: `load_sweep` accepts the mutated file (and its stated
size is within bounds) or raises a ConfigError naming the file and a key path for each problem,
within a time bound; a mutation marked `must_fail` (YAML 1.1 and huge literals in `seeds:`, grid
values or `set:`, control characters in names, long keys, ...) is refused. A hostile `base` (a
system file, a FIFO, a device, a directory, a symlink loop, binary or oversized files, NUL
bytes, 5,000-character paths) never hangs the loader and never brings the foreign file's
content back in the message.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.sweeps.spec import SweepSpec, load_sweep
from sim.config import ConfigError
from sim.limits import MAX_RUNS
from tests.fuzz import mutations
from tests.fuzz.conftest import SWEEPS, budget, parsed, record
from tests.fuzz.properties import assert_clean_rejection, assert_no_foreign_content

LOAD_SECONDS_MAX = 20.0


def _documents() -> dict[str, Any]:
    """Each bundled sweep as written and resolved, its base made absolute (files move to tmp)."""
    docs = {}
    for path in SWEEPS:
        raw = parsed(path)
        raw["base"] = str((path.parent / raw["base"]).resolve())
        docs[path.name] = raw
        docs[f"{path.name} (resolved)"] = SweepSpec.model_validate(raw).model_dump(mode="json")
    return docs


DOCS = _documents()
POOL = list(DOCS.values())


@st.composite
def sweep_mutations(draw: Any) -> tuple[str, mutations.Mutation]:
    name = draw(st.sampled_from(sorted(DOCS)))
    strategies = mutations.kinds(DOCS[name], POOL, sweep=True)
    return name, draw(strategies[draw(st.sampled_from(sorted(strategies)))])


def special_base(tmp: Path, token: str) -> tuple[str, str]:
    """A hostile base that must exist on disk: (path, content a message must not echo)."""
    path = tmp / f"base-{token.lower()}"
    if token == "FIFO":
        os.mkfifo(path)  # opening it for reading would block without O_NONBLOCK
    elif token == "BINARY":
        path.write_bytes(bytes(range(256)) * 4)
    elif token == "HUGE":
        path.write_text("name: x\n" + "# padding\n" * 200_000)
    elif token == "LOOP":
        path.symlink_to(path)
    elif token == "DIRECTORY":
        path.mkdir()
    elif token == "EMPTY":
        path.write_text("")
    return str(path), ""


def write_mutation(tmp: Path, mutation: mutations.Mutation) -> tuple[Path, str]:
    """The sweep file on disk, and the content of a foreign base it points at (if readable)."""
    content, foreign = mutation.content, ""
    for token in ("FIFO", "BINARY", "HUGE", "LOOP", "DIRECTORY", "EMPTY"):
        if content.startswith(b"name:") and f"\nbase: {token}\n".encode() in content:
            real, foreign = special_base(tmp, token)
            content = content.replace(f"\nbase: {token}\n".encode(), f"\nbase: '{real}'\n".encode())
    if mutation.kind == "hostile_base":
        foreign = _readable(mutation.note)
    path = tmp / "sweep.yaml"
    path.write_bytes(content)
    return path, foreign


def _readable(note: str) -> str:
    """The text of a system file a hostile base names, when this process can read it."""
    for candidate in ("/etc/shadow", "/etc/passwd", "/proc/meminfo"):
        if repr(candidate) in note:
            try:
                return Path(candidate).read_text(errors="replace")
            except OSError:
                return ""
    return ""


def test_every_bundled_sweep_is_a_fuzz_seed():
    assert len(SWEEPS) >= 2 and len(DOCS) == 2 * len(SWEEPS)


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
@budget(300)
@given(case=sweep_mutations())
def test_mutated_sweeps_load_or_fail_cleanly(tmp_path_factory, case):
    name, mutation = case
    tmp = tmp_path_factory.mktemp("s", numbered=True)
    path, foreign = write_mutation(tmp, mutation)
    started = time.monotonic()
    try:
        sweep = load_sweep(path)
        outcome = "accepted"
        assert 1 <= sweep.n_runs <= MAX_RUNS
        assert not mutation.must_fail, f"{name} {mutation.kind} {mutation.note}: accepted"
    except ConfigError as exc:
        assert_clean_rejection(exc, str(path))
        assert_no_foreign_content(exc.render(), foreign)
        outcome = "clean error"
    elapsed = time.monotonic() - started
    assert elapsed < LOAD_SECONDS_MAX, f"{name} {mutation.kind} {mutation.note}: {elapsed:.1f} s"
    record(name, mutation.kind, outcome)
