"""The known-behaviours atlas (issue 42): every scenarios/atlas/NN_*.yaml has a complete header,
validates, and its `expect:` (the behaviour's sign and bound) holds on seed 1; docs/atlas/results.json
(scripts/atlas.sh) covers every entry at its current file content; the generator refuses a malformed
header with the file and the field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import gen_atlas
finally:
    sys.path.remove(str(ROOT / "scripts"))

ENTRIES = gen_atlas.entries(ROOT)


def test_the_atlas_has_entries_with_complete_headers():
    assert len(ENTRIES) >= 8
    for entry in ENTRIES:
        assert list(entry.header) == list(gen_atlas.HEADER_KEYS)
        assert entry.header["issues"].count("#") >= 1, entry.path
        assert entry.explain_args, f"{entry.path}: its explain command names nothing to explain"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.number for e in ENTRIES])
def test_entry_validates_and_its_expectations_hold_on_seed_1(entry):
    import rmqsim
    from rmqsim.scenario import spec
    from rmqsim.scenario.lint import lint

    scenario = spec.load(str(ROOT / entry.path), [])  # ConfigError (exit 2 in the CLI) if not valid
    assert not [f.lines(entry.path) for f in lint(scenario)], f"{entry.path}: lint warnings"
    summary = rmqsim.run(scenario, seed=1).summary
    assert summary["expectations"], f"{entry.path}: no expect: bounds"
    assert summary["verdict"] == "valid", f"{entry.path}: {summary['failures']}"


def test_results_cover_every_entry_at_its_current_content():
    results = gen_atlas.load_results(ROOT)
    assert results["seeds"] >= 5
    for entry in ENTRIES:
        got = results["entries"].get(entry.number)
        assert got is not None, f"{entry.path}: no results (run scripts/atlas.sh --only {entry.number})"
        assert got["scenario_sha256"] == gen_atlas.file_sha256(ROOT / entry.path), (
            f"{entry.path} changed since its sweep (run scripts/atlas.sh --only {entry.number})")
        assert [r["verdict"] for r in got["runs"]] == ["valid"] * results["seeds"], entry.path
        assert got["explain"]["output"].strip()
    assert set(results["entries"]) == {e.number for e in ENTRIES}


def _atlas(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / gen_atlas.ATLAS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return tmp_path


GOOD = ("# atlas: 07\n# issues: #1\n# reported: r\n#   more\n# versions: 5.3.3\n# mechanism: m\n# expect: e\n"
        "# explain: rmqsim explain RUN --fault 0\nname: x\n")


def test_a_good_header_parses_with_continuations(tmp_path):
    [entry] = gen_atlas.entries(_atlas(tmp_path, "07_x.yaml", GOOD))
    assert entry.header["reported"] == "r more" and entry.explain_args == ["--fault", "0"]
    page = gen_atlas.atlas_page(tmp_path)
    assert "| [07](#07) |" in page and "not measured yet" in page


@pytest.mark.parametrize("name, text, says", [
    ("07_x.yaml", GOOD.replace("# versions: 5.3.3\n", ""), "header keys"),
    ("07_x.yaml", GOOD.replace("# mechanism: m\n# expect: e\n", "# expect: e\n# mechanism: m\n"), "in that order"),
    ("07_x.yaml", GOOD.replace("# expect: e", "# expect:"), "expect is empty"),
    ("08_x.yaml", GOOD, "differs from the file's number"),
    ("7_x.yaml", GOOD, "named NN_short_name.yaml"),
    ("07_x.yaml", GOOD.replace("explain RUN", "explain runs/x"), "rmqsim explain RUN"),
])
def test_a_malformed_header_names_the_file_and_the_problem(tmp_path, name, text, says):
    with pytest.raises(gen_atlas.AtlasError, match=says) as info:
        gen_atlas.entries(_atlas(tmp_path, name, text))
    assert f"scenarios/atlas/{name}" in str(info.value)


def test_a_changed_scenario_shows_as_stale_on_the_page(tmp_path):
    root = _atlas(tmp_path, "07_x.yaml", GOOD)
    results = {"seeds": 1, "entries": {"07": {"file": "scenarios/atlas/07_x.yaml", "scenario_sha256": "0" * 64,
                                              "runs": [], "explain": {"command": "", "output": "x"}}}}
    (root / "docs" / "atlas").mkdir(parents=True)
    (root / gen_atlas.RESULTS).write_text(json.dumps(results))
    assert "stale: the scenario changed" in gen_atlas.atlas_page(root)
