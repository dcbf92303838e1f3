"""Fuzz: mutations of every bundled scenario load cleanly (property 1) and run sanely (property 2).

Property 1, in-process for speed: `scenario.load` either accepts the mutated file or raises a
ConfigError naming the file and a key path for each problem; nothing else, within a time bound,
and without the process's peak memory growing by more than `MEMORY_GROWTH_BYTES` over the whole
test. Property 2: every accepted mutation, run with a small event bound, ends with a consistent
summary (tests/fuzz/properties.py). The mutations are drawn from tests/fuzz/mutations.py, on the
file as written and on its resolved form (every default spelled out), so every field of the
scenario models is a target.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import scenario as scenario_mod
from sim.config import ConfigError
from tests.fuzz import mutations
from tests.fuzz.conftest import BUNDLED_SCENARIOS, SCENARIOS, budget, parsed, record
from tests.fuzz.properties import assert_clean_rejection, assert_consistent_summary

LOAD_SECONDS_MAX = 10.0
MEMORY_GROWTH_BYTES = 600 * 1024 * 1024
RUN_MAX_EVENTS = 20_000
RUN_MAX_WALL_S = 30.0
VALID_OFTEN = ("wrong_type", "extreme_number", "delete_key", "transplant", "hostile_name", "alias_bomb", "binary")


def _documents() -> dict[str, Any]:
    """Each bundled scenario as written, and resolved (every default filled in)."""
    docs = {}
    for path in SCENARIOS:
        raw = parsed(path)
        docs[path.name] = raw
        resolved = scenario_mod.load(path).model_dump(mode="json", by_alias=True)
        docs[f"{path.name} (resolved)"] = resolved
    return docs


DOCS = _documents()
POOL = list(DOCS.values())


@st.composite
def scenario_mutations(draw: Any, kinds: tuple[str, ...] | None = None) -> tuple[str, mutations.Mutation]:
    name = draw(st.sampled_from(sorted(DOCS)))
    strategies = mutations.kinds(DOCS[name], POOL)
    kind = draw(st.sampled_from(sorted(kinds or strategies)))
    return name, draw(strategies[kind])


def load_mutation(tmp: Path, name: str, mutation: mutations.Mutation) -> tuple[str, Any]:
    """('accepted', Scenario) or ('clean error', ConfigError), checking property 1."""
    path = tmp / "scenario.yaml"
    path.write_bytes(mutation.content)
    started = time.monotonic()
    try:
        result = ("accepted", scenario_mod.load(path, list(mutation.overrides)))
    except ConfigError as exc:
        assert_clean_rejection(exc, str(path))
        result = ("clean error", exc)
    elapsed = time.monotonic() - started
    assert elapsed < LOAD_SECONDS_MAX, f"{name} {mutation.kind} {mutation.note}: {elapsed:.1f} s"
    record(name, mutation.kind, result[0])
    return result


@pytest.fixture(scope="module")
def peak_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < MEMORY_GROWTH_BYTES, f"peak memory grew by {grown / 2**20:.0f} MiB while loading mutations"


def test_every_bundled_scenario_is_a_fuzz_seed():
    assert len(BUNDLED_SCENARIOS) >= 12 and {p.name for p in SCENARIOS} <= {n.split(" ")[0] for n in DOCS}


@budget(800)
@given(case=scenario_mutations())
def test_mutated_scenarios_load_or_fail_cleanly(tmp_path_factory, peak_memory, case):
    name, mutation = case
    load_mutation(tmp_path_factory.mktemp("m", numbered=True), name, mutation)


@budget(120)
@given(case=scenario_mutations(VALID_OFTEN))
def test_accepted_mutations_run_to_a_consistent_summary(tmp_path_factory, case):
    """Property 2: mutations of the kinds that often leave a file valid, run with a small event
    bound (property 1's test runs every kind, and accepts some of each)."""
    name, mutation = case
    outcome, sc = load_mutation(tmp_path_factory.mktemp("r", numbered=True), name, mutation)
    if outcome != "accepted":
        return
    from sim.runner import run_scenario

    summary = run_scenario(sc, max_events=RUN_MAX_EVENTS, max_wall_s=RUN_MAX_WALL_S).summary
    assert_consistent_summary(summary)
    record(name, f"run:{mutation.kind}", "stopped at bound" if summary["stopped_by"] else "completed")
