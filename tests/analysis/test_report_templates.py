"""The report pages come from Jinja2 templates (analysis/reports/templates/) in an environment that
escapes every value and refuses an undefined name: user input on either page (a scenario or
sweep name, a parameter key, a run id, a failure message, an error) is printed escaped by the
template, with no escaping by hand in the code; and the templates ship with the package."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import jinja2
import pytest

from analysis.reports import html as report_html
from analysis.reports import run_report
from analysis.reports.run_data import RunData
from tests.conftest import ROOT

EVIL = "<script>alert(1)</script>\"'&"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;"  # markupsafe's escapes, as the environment prints


def test_environment_escapes_and_refuses_undefined_names() -> None:
    env = report_html.ENV
    assert env.autoescape is True and env.undefined is jinja2.StrictUndefined
    assert env.from_string("{{ x }}").render(x=EVIL) == ESCAPED
    with pytest.raises(jinja2.UndefinedError):
        report_html.render("run.html.j2")  # a page without its values: an error, never blanks
    with pytest.raises(jinja2.UndefinedError):
        report_html.render("sweep.html.j2")


def test_no_escaping_by_hand_in_the_report_code() -> None:
    """The pages' values are escaped by the templates only: no module of analysis/reports builds
    escaped text or markup itself."""
    for path in sorted((ROOT / "analysis" / "reports").glob("*.py")):
        source = path.read_text()
        assert not re.search(r"\bescape\(|\bMarkup\b|^import html$|autoescape=False", source, re.M), path


def test_templates_ship_with_the_package() -> None:
    """Every template matches a package-data pattern of analysis.reports (a wheel without them
    could not render a page)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = config.get("analysis.reports", []) + config.get("*", [])
    folder = ROOT / "analysis" / "reports"
    templates = sorted(p.relative_to(folder).as_posix() for p in (folder / "templates").iterdir())
    assert templates and all(any(fnmatch.fnmatch(t, pat) for pat in patterns) for t in templates), (templates, patterns)


def _run_data(directory: Path) -> RunData:
    summary = {"scenario": "scenario " + EVIL, "seed": 3, "scenario_sha256": "a" * 64, "trace_sha256": "b" * 64,
               "sim_time_ms": 30_000.0, "records": 1234, "verdict": "invalid", "failures": ["lost 2: " + EVIL],
               "sent_ok": 10, "send_failed": 0, "consumed": 8, "lost": 2, "pending_retry": 0, "dlq": 0,
               "duplicates": 1, "order_violations": None, "warmup_ms": 0.0, "latency_ms": {"p50": 1.5},
               "duplicate_causes": {"key " + EVIL: 1}}
    windows = [{"kind": "pause", "target": "node " + EVIL, "start_ms": 1000.0, "end_ms": 2000.0}]
    return RunData(directory=directory, summary=summary, scenario={}, windows=windows)


def test_run_page_escapes_user_input(tmp_path: Path) -> None:
    run = tmp_path / ("run " + EVIL.replace("/", "_"))
    run.mkdir()
    (run / "repro.md").write_text("card")
    page = run_report._html(_run_data(run), [("fig", "Title " + EVIL, "Caption " + EVIL, "AAAA")],
                            [("Absent " + EVIL, "why " + EVIL)], tmp_path / "report")
    assert "<script>alert" not in page and page.count("<script>") == 1  # only the page's own script
    for shown in ("scenario " + ESCAPED, "lost 2: " + ESCAPED, "key " + ESCAPED, "node " + ESCAPED, "Title " + ESCAPED,
                  "Caption " + ESCAPED, "<b>Absent " + ESCAPED + "</b>: why " + ESCAPED):
        assert shown in page, shown
    assert f"<title>rmqsim run report: scenario {ESCAPED} seed 3</title>" in page
    assert '<a class="repro-card" href="../run%20%3Cscript%3Ealert%281%29%3C_script%3E%22%27%26/repro.md">' in page
