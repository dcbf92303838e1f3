"""scenarios/reference.yaml stays in step with `rmqsim defaults`; every bundled scenario loads."""

from __future__ import annotations

import subprocess
import sys

from sim import scenario
from tests.conftest import ROOT


def test_reference_yaml_matches_defaults() -> None:
    out = subprocess.run([sys.executable, "-m", "sim.cli", "defaults"], capture_output=True, text=True,
                         check=True, cwd=str(ROOT))
    committed = (ROOT / "scenarios" / "reference.yaml").read_text()
    assert out.stdout == committed, "regenerate with: rmqsim defaults > scenarios/reference.yaml"


def test_reference_yaml_is_itself_a_valid_scenario() -> None:
    loaded = scenario.load(ROOT / "scenarios" / "reference.yaml")
    assert loaded.model_dump(mode="json") == scenario.reference_tree()


def test_every_bundled_scenario_validates() -> None:
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(paths) >= 2
    for path in paths:
        scenario.load(path)


def test_every_scenario_field_has_a_description() -> None:
    """Each field of every model a scenario reaches says what it is (meaning, unit, Java name):
    a pydantic `description`, or an entry in sim/field_docs.py. The message names each field."""
    from sim.field_docs import missing_descriptions

    missing = missing_descriptions(scenario.Scenario)
    assert not missing, ("fields without a description (add Field(description=...) or a line in "
                         "sim/field_docs.py FIELD_DOCS): " + ", ".join(missing))


def test_defaults_comment_every_field_and_parse_back_to_the_tree() -> None:
    import yaml

    text = scenario.dump_defaults()
    assert yaml.safe_load(text) == scenario.reference_tree()
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body and all("  # " in line for line in body), [line for line in body if "  # " not in line][:3]
    for kind in ("process_crash", "power_loss", "restart", "partition", "heal", "link_latency", "packet_loss",
                 "disk_slow", "fsync_stall", "pause"):
        assert f"#   {kind}" in text, kind
    assert "c-1, c-2, c-3" in text and "random_faults:" in text and "expect:" in text


def test_a_field_without_description_is_named(monkeypatch) -> None:
    from sim import field_docs

    docs = dict(field_docs.FIELD_DOCS)
    del docs["ProducerSpec.topic"]  # a field with no comment beside it in its class either
    monkeypatch.setattr(field_docs, "FIELD_DOCS", docs)
    assert field_docs.missing_descriptions(scenario.Scenario) == ["sim.scenario.ProducerSpec.topic"]
