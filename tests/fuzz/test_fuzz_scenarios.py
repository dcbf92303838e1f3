"""Fuzz: mutations of every bundled scenario load cleanly (property 1), and fault schedules drawn
over short scenarios run sanely and reach their faults (property 2).

Property 1, in-process for speed: `scenario.load` either accepts the mutated file or raises a
ConfigError naming the file and a key path for each problem; nothing else, within a time bound,
and without the process's peak memory growing by more than `MEMORY_GROWTH_BYTES` over the whole
test. A mutation marked `must_fail` (a YAML 1.1 literal, a huge literal, a control character in
a name, ...) must be refused, and an accepted scenario holds no NaN or infinity. The mutations
are drawn from tests/fuzz/mutations.py, on the file as written and on its resolved form (every
default spelled out), so every field of the scenario models is a target.

Property 2 on scenarios accepted by construction (no example is wasted on a refused file):
each bundled scenario shortened to `RUN_DURATION_MS` (clients from the start, rates capped),
with a valid fault schedule of its own nodes drawn inside the first seconds, written plain, with
a byte-order mark, with CRLF line ends or through a merge key. Every run must be accepted, run
past its faults (the event bound is far above what the run needs), end with a consistent
summary whose ledger adds up (tests/fuzz/properties.py), and at least `MIN_REACHED_SHARE` of
the examples must have injected a fault.
"""

from __future__ import annotations

import copy
import resource
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqsim.scenario import spec as scenario_mod
from sim import trace
from sim.config import ConfigError
from sim.inputs import load_yaml
from tests.fuzz import mutations
from tests.fuzz.conftest import BUNDLED_SCENARIOS, SCENARIOS, budget, parsed, record
from tests.fuzz.properties import (
    assert_clean_rejection,
    assert_consistent_summary,
    assert_finite,
    assert_ledger_invariants,
)

LOAD_SECONDS_MAX = 10.0
MEMORY_GROWTH_BYTES = 600 * 1024 * 1024
RUN_DURATION_MS = 3_000  # faults are drawn in [300, 2,500] ms
RUN_SETTLE_MS = 1_500
RUN_RATE_PER_S = 200  # per producer instance
RUN_MAX_EVENTS = 2_000_000  # ~100 times what a shortened run needs: no run stops before its faults
RUN_MAX_WALL_S = 30.0
MIN_REACHED_SHARE = 0.9


def _documents() -> tuple[dict[str, Any], dict[str, dict[str, list[str]]]]:
    """Each bundled scenario as written, and resolved (every default filled in); their node names."""
    docs, names = {}, {}
    for path in SCENARIOS:
        raw = parsed(path)
        loaded = scenario_mod.load(path)
        docs[path.name] = raw
        docs[f"{path.name} (resolved)"] = loaded.model_dump(mode="json", by_alias=True)
        names[path.name] = names[f"{path.name} (resolved)"] = mutations.node_names(loaded)
    return docs, names


DOCS, NAMES = _documents()
POOL = list(DOCS.values())


@st.composite
def scenario_mutations(draw: Any, kinds: tuple[str, ...] | None = None) -> tuple[str, mutations.Mutation]:
    name = draw(st.sampled_from(sorted(DOCS)))
    strategies = mutations.kinds(DOCS[name], POOL, names=NAMES[name])
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
    if result[0] == "accepted":
        assert not mutation.must_fail, f"{name} {mutation.kind} {mutation.note}: accepted"
        assert_finite(result[1].model_dump())
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


def test_every_kind_is_drawn():
    """The 14 kinds of the first campaign and issue 25's 16, for scenarios and sweeps."""
    assert len(mutations.BASE_KINDS) == 14 and len(mutations.NEW_KINDS) == 16
    doc = DOCS["baseline.yaml"]
    assert set(mutations.kinds(doc, POOL, names=NAMES["baseline.yaml"])) == \
        set(mutations.BASE_KINDS + mutations.NEW_KINDS)
    assert set(mutations.kinds(doc, POOL, sweep=True)) == \
        set(mutations.BASE_KINDS + mutations.NEW_KINDS) - {"fault_schedule"} | {"hostile_base"}


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
@budget(600)
@given(case=scenario_mutations())
def test_mutated_scenarios_load_or_fail_cleanly(tmp_path_factory, peak_memory, case):
    name, mutation = case
    load_mutation(tmp_path_factory.mktemp("m", numbered=True), name, mutation)


@pytest.mark.parametrize("form", ["bom", "crlf", "cr", "bom+crlf", "merge"])
def test_line_ends_bom_and_merge_read_like_the_original(form):
    """A byte-order mark, CRLF or CR line ends, or the whole document through a merge key, read
    exactly as the file as written (same resolved digest), for every bundled scenario."""
    for path in SCENARIOS:
        text = path.read_text(encoding="utf-8")
        changed = {"bom": "\ufeff" + text, "crlf": text.replace("\n", "\r\n"), "cr": text.replace("\n", "\r"),
                   "bom+crlf": "\ufeff" + text.replace("\n", "\r\n"),
                   "merge": "{<<: " + mutations._flow(parsed(path)) + "}\n"}[form]
        assert scenario_mod.from_data(load_yaml(changed)).digest() == \
            scenario_mod.load(path).digest(), path.name


# --- property 2: runs that reach their faults ------------------------------------------------

def shortened(doc: dict) -> dict:
    """A bundled scenario cut to a short run: clients from the start, at most 2 instances and
    RUN_RATE_PER_S messages per second each, without faults of its own (drawn instead)."""
    doc = copy.deepcopy(doc)
    doc.update(duration_ms=RUN_DURATION_MS, settle_ms=RUN_SETTLE_MS, warmup_ms=0)
    for section, start_ms in (("producers", 300), ("consumers", 200)):
        for entry in doc.get(section) or []:
            entry["start_ms"] = start_ms
            entry.pop("stop_ms", None)
            entry["count"] = min(entry.get("count", 1), 2)
            if section == "producers":
                entry["rate_per_s"] = min(entry.get("rate_per_s", 1_000), RUN_RATE_PER_S)
    for key in ("faults", "random_faults"):
        doc.pop(key, None)
    return doc


def _runnable() -> dict[str, tuple[dict, dict[str, list[str]]]]:
    out = {}
    for path in SCENARIOS:
        doc = shortened(parsed(path))
        out[path.name] = (doc, mutations.node_names(scenario_mod.from_data(copy.deepcopy(doc), path.name)))
    return out


RUNNABLE = _runnable()


@st.composite
def runnable_scenarios(draw: Any) -> tuple[str, mutations.Mutation]:
    """A shortened bundled scenario with a drawn fault schedule and seed: valid by construction."""
    name = draw(st.sampled_from(sorted(RUNNABLE)))
    doc, names = RUNNABLE[name]
    plan = draw(mutations.fault_plan(names, first_ms=300, last_ms=2_500))
    doc = {**doc, **plan, "seed": draw(st.integers(0, 2**63 - 1))}
    form = draw(st.sampled_from(["plain", "bom", "crlf", "merge"]))
    text = mutations.dump(doc)
    text = {"plain": text, "bom": "\ufeff" + text, "crlf": text.replace("\n", "\r\n"),
            "merge": "{<<: " + mutations._flow(doc) + "}\n"}[form]
    return name, mutations.Mutation("fault_schedule", text.encode(), note=f"{form}: {plan!r}"[:400])


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_fault_schedules_run_past_their_faults_to_consistent_summaries(tmp_path_factory):
    """Property 2 (module docstring): accepted by construction, run, checked, and counted."""
    from rmqsim.runner import run_scenario

    reached: list[bool] = []

    @budget(80)  # about 4 s: a shortened run takes some 50 ms
    @given(case=runnable_scenarios())
    def run(case: tuple[str, mutations.Mutation]) -> None:
        name, mutation = case
        outcome, sc = load_mutation(tmp_path_factory.mktemp("r", numbered=True), name, mutation)
        assert outcome == "accepted", f"{name} {mutation.note}: {sc}"
        result = run_scenario(sc, max_events=RUN_MAX_EVENTS, max_wall_s=RUN_MAX_WALL_S)
        summary = result.summary
        assert summary["stopped_by"] is None, f"{name} {mutation.note}: stopped by {summary['stopped_by']}"
        assert_consistent_summary(summary)
        assert_ledger_invariants(summary)
        injected = [r for r in result.fault_records if r[2] == trace.FAULT_INJECTED]
        reached.append(bool(injected))
        record(name, "run:fault_schedule", "reached a fault" if injected else "no fault")

    run()
    assert reached and sum(reached) >= MIN_REACHED_SHARE * len(reached), \
        f"{sum(reached)} of {len(reached)} runs reached a fault"
