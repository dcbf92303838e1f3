"""The report pages come from Jinja2 templates (analysis/reports/templates/) in an environment that
escapes every value and refuses an undefined name: user input on either page (a scenario or
sweep name, a parameter key, a run id, a failure message, an error) is printed escaped by the
template, with no escaping by hand in the code; and the templates ship with the package."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

import jinja2
import pytest

from analysis.reports import html as report_html
from analysis.reports import run_report
from analysis.reports.focus import Focus
from analysis.reports.run_data import RunData
from analysis.sweeps.aggregate import METRICS
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


def _view() -> dict[str, Any]:
    """A sweep's view as sweep_report.gather makes it, with user input in every place it can be."""
    nothing = {"mean": None, "lo": None, "hi": None, "events": 0, "exposure": 0, "runs": 0,
               "causes": {}}
    overall = {name: dict(nothing) for name in METRICS}
    overall["loss"] = {"mean": 0.1, "lo": 0.05, "hi": 0.2, "events": 2, "exposure": 20, "runs": 2,
                       "causes": {"other": 2}}
    stat = {"point": 0, "point_key": "k", "params": {"flush": "value " + EVIL}, "runs": 2, "failed": 0, "passed": 1,
            "invalid": 1, "latency_ms": {"p50": 1.0}, "unquiet": 1, "loss": {**overall["loss"]}}
    failing = {"run_id": "p0000-s1" + EVIL, "status": "ok", "verdict": "invalid", "verdict_failures": "lost " + EVIL,
               "error": None, "repro": "rmqsim run " + EVIL, "card": None}
    return {"totals": {"runs": 2, "ok": 2, "sent_ok": 20, "lost": 2, "duplicates": 0, "sim_time_ms": 60_000.0,
                       "wall_s": 3.0},
            "focus": Focus("loss", False, "inferred: " + EVIL), "drawn": ["loss"], "overall": overall,
            "params": ["flush"], "stats": [stat],
            "quiescence": {"runs": 2, "quiet": 1, "unquiet": 1, "unjudged": 0, "moving_runs": {"rebalances": 1},
                           "unquiet_ids": ["p0000-s1" + EVIL]},
            "coverage": {"runs": 2, "points": {"point " + EVIL: {"runs": 1, "times": 1},
                                               "never " + EVIL: {"runs": 0, "times": 0}}},
            "failed": [{"run_id": "p0000-s2" + EVIL, "error": "Traceback: " + EVIL, "repro": "rmqsim run " + EVIL}],
            "failing": {"total": 1, "rows": [failing]}}


def test_sweep_page_escapes_user_input(tmp_path: Path) -> None:
    manifest = {"name": "sweep " + EVIL, "source": "file " + EVIL, "base": "base " + EVIL, "digest": "c" * 64,
                "params": {"flush": "cluster.brokers[0].store." + EVIL}, "points": [0], "seeds": [1, 2]}
    images = [("focus", "loss_by_cause", "Loss " + EVIL, "AAAA")]
    page = report_html.page(manifest, _view(), images, tmp_path, tmp_path / "report")
    assert "<script>alert" not in page and page.count("<script>") == 1  # only the page's own script
    assert f"<title>rmqsim sweep report: sweep {ESCAPED}</title>" in page
    for shown in ("file " + ESCAPED, "base " + ESCAPED, f"flush = <code>cluster.brokers[0].store.{ESCAPED}</code>",
                  "<b>Focus: loss</b> — inferred: " + ESCAPED, "<td>value " + ESCAPED + "</td>",
                  '<h3>Loss ' + ESCAPED + '</h3><img class="figure" alt="Loss ' + ESCAPED + '"',
                  "p0000-s1" + ESCAPED + "): their counts", "<code>point " + ESCAPED + "</code>",
                  "No run reached: <code>never " + ESCAPED + "</code>",
                  "<pre>Traceback: " + ESCAPED + "</pre>", f'<tr id="failing-p0000-s1{ESCAPED}">',
                  "<td>lost " + ESCAPED + "</td>", "<code>rmqsim run " + ESCAPED + "</code>"):
        assert shown in page, shown
