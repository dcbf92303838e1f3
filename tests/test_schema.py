"""`rmqsim schema`: the JSON Schemas accept every bundled scenario and sweep file, and reject typos."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml")) + [ROOT / "tests" / "fuzz" / "exemplar.yaml"]
SWEEPS = sorted((ROOT / "scenarios" / "sweeps").glob("*.yaml"))


@pytest.fixture(scope="module")
def schemas() -> dict:
    done = subprocess.run([sys.executable, "-m", "rmqsim.cli", "schema"], capture_output=True, text=True, cwd=str(ROOT),
                          timeout=120, check=True)
    document = json.loads(done.stdout)
    assert set(document) == {"scenario", "sweep"}
    for schema in document.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    return document


def _errors(schema: dict, data: object) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_bundled_scenario_validates(schemas: dict, path: Path) -> None:
    assert _errors(schemas["scenario"], yaml.safe_load(path.read_text()) or {}) == []


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_every_bundled_sweep_validates(schemas: dict, path: Path) -> None:
    assert _errors(schemas["sweep"], yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize(("text", "where"), [
    ("duraton_ms: 10s\n", ""),  # a typo in a top-level key
    ("producers: [{rate_per_sec: 5}]\n", "producers.0"),
    ("cluster: {brokers: [{store: {flush_disk_typ: SYNC_FLUSH}}]}\n", "cluster.brokers.0.store"),
    ("duration_ms: 10 parsecs\n", "duration_ms"),  # a unit that does not exist
    ("consumers: [{consume_time_ms: {dist: gaussian, mean: 1}}]\n", "consumers.0.consume_time_ms"),
])
def test_a_scenario_with_a_typo_is_rejected(schemas: dict, text: str, where: str) -> None:
    errors = _errors(schemas["scenario"], yaml.safe_load(text))
    assert errors and any(e.startswith(f"{where}:") for e in errors), errors


def test_units_and_bare_numbers_are_accepted_where_the_loader_accepts_them(schemas: dict) -> None:
    text = ("duration_ms: 2min\nwarmup_ms: 500ms\nconsumers: [{consume_time_ms: 2ms}]\n"
            "network: {latency_ms: {dist: lognormal, p50: 250us, p99: 4}}\nexpect: {lost: 0, latency_ms.p99: {max: 50}}\n")
    assert _errors(schemas["scenario"], yaml.safe_load(text)) == []


def test_a_sweep_with_a_typo_is_rejected(schemas: dict) -> None:
    data = yaml.safe_load((ROOT / "scenarios" / "sweeps" / "01_quick.yaml").read_text())
    data["seed"] = data.pop("seeds")
    assert _errors(schemas["sweep"], data)
