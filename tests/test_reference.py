"""scenarios/reference.yaml stays in step with `rmqsim defaults`; every bundled scenario loads."""

from __future__ import annotations

import subprocess
import sys

from rmqsim.scenario import spec as scenario
from tests.conftest import ROOT


def test_reference_yaml_matches_defaults() -> None:
    out = subprocess.run([sys.executable, "-m", "rmqsim.cli", "defaults"], capture_output=True, text=True,
                         check=True, cwd=str(ROOT))
    committed = (ROOT / "scenarios" / "reference.yaml").read_text()
    assert out.stdout == committed, "regenerate with: rmqsim defaults > scenarios/reference.yaml"


def test_reference_yaml_is_itself_a_valid_scenario() -> None:
    loaded = scenario.load(ROOT / "scenarios" / "reference.yaml")
    assert loaded.model_dump(mode="json") == _defaults_tree()


def _defaults_tree() -> dict:
    """reference_tree() without its transactional producer (`rmqsim defaults` comments it out)."""
    tree = scenario.reference_tree()
    return {**tree, "producers": [p for p in tree["producers"] if p["transaction"] is None]}


def test_every_bundled_scenario_validates() -> None:
    paths = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(paths) >= 2
    for path in paths:
        scenario.load(path)


def test_every_scenario_field_has_a_description() -> None:
    """Each field of every model a scenario reaches says what it is (meaning, unit, Java name)
    in its declaration: `Field(description=...)`. The message names each field."""
    from rmqsim.scenario.reference import missing_descriptions

    missing = missing_descriptions(scenario.Scenario)
    assert not missing, "fields without a description (declare them with Field(description=...)): " + \
        ", ".join(missing)


def test_defaults_comment_every_field_and_parse_back_to_the_tree() -> None:
    import yaml

    text = scenario.dump_defaults()
    assert yaml.safe_load(text) == _defaults_tree()
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body and all("  # " in line for line in body), [line for line in body if "  # " not in line][:3]
    for kind in ("process_crash", "power_loss", "restart", "partition", "heal", "link_latency", "packet_loss",
                 "disk_slow", "fsync_stall", "pause"):
        assert f"#   {kind}" in text, kind
    assert "c-1, c-2, c-3" in text and "random_faults:" in text and "expect:" in text


def test_defaults_copied_verbatim_make_no_transactional_producer(tmp_path) -> None:
    """`rmqsim defaults` lists every send mode; copied into a scenario file it loads, with one
    plain SYNC producer; the transactional producer is there only commented out, and removing
    the `# ` of its lines gives a valid transactional producer."""
    text = scenario.dump_defaults()
    for mode in ("SYNC", "ASYNC", "ONEWAY", "ORDERLY", "Transactional"):
        assert f" {mode} (" in text, mode
    path = tmp_path / "copied.yaml"
    path.write_text(text)
    loaded = scenario.load(path)
    assert [(p.name, p.send_mode, p.transaction) for p in loaded.producers] == [("producer", "SYNC", None)]
    assert len(loaded.consumers) == 1 and loaded.faults == [] and loaded.random_faults == []
    assert loaded.actions == [] and loaded.expect == {}
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("  # - name: txn-producer"))
    end = next(i for i, line in enumerate(lines) if line.startswith("consumers:"))
    lines[start:end] = [line.replace("  # ", "  ", 1) for line in lines[start:end]]
    path.write_text("".join(lines))
    producers = scenario.load(path).producers
    assert [(p.name, p.transaction is not None) for p in producers] == [("producer", False), ("txn-producer", True)]


def test_a_field_without_description_is_named() -> None:
    """A field declared without a description is named, with its model's module, also in a model
    reached only through a list of an optional nested model; described fields are not."""
    from pydantic import BaseModel, Field

    from rmqsim.scenario.reference import missing_descriptions

    class Inner(BaseModel):
        described: int = Field(1, description="a described field")
        bare: int = 2  # a comment beside the field is not a description

    class Root(BaseModel):
        inners: list[Inner | None] = Field([], description="the inner models")
        plain: str = Field("x")

    assert missing_descriptions(Root) == [f"{__name__}.Root.plain", f"{__name__}.Inner.bare"]
