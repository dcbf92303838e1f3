"""The sweep report's page (analysis/reports/sweep_page.py, templates/sweep.html.j2): user input in
every place it can be is printed escaped by the template; each rate's run-level interval comes
first and its per-message one only where the runs agree; a column focus and the lint's warnings
are shown in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.reports import sweep_page
from analysis.reports.focus import Focus
from analysis.sweeps.aggregate import METRICS
from analysis.sweeps.columns import find, table_columns
from analysis.sweeps.results_store import runs_schema

EVIL = "<script>alert(1)</script>\"'&"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&amp;"


def rate(mean: float | None, agree: bool | None, runs: int = 3) -> dict[str, Any]:
    return {"mean": mean, "lo": 0.004, "hi": 0.006, "run_lo": 0.001, "run_hi": 0.012, "events": 150,
            "exposure": 30_000, "runs": runs, "causes": {"rebalance": 150}, "agree": agree, "overdispersion": 87.0,
            "rates": [0.001, 0.01, 0.004], "method": "Poisson score"}


def view(focus: Focus, agree: bool | None) -> dict[str, Any]:
    nothing = {"mean": None, "lo": None, "hi": None, "run_lo": None, "run_hi": None, "events": 0, "exposure": 0,
               "runs": 0, "causes": {}, "agree": None, "overdispersion": None, "rates": []}
    overall = {name: dict(nothing) for name in METRICS}
    overall["duplicates"] = rate(0.005, agree)
    column = {"mean": 37_000.0, "lo": 30_000.0, "hi": 44_000.0, "n": 3, "min": 13_400.0, "max": 74_400.0,
              "values": [13_400.0, 23_400.0, 74_400.0], "runs": 3, "nulls": 1}
    stat = {"point": 0, "point_key": "k", "params": {"persist_ms": "value " + EVIL}, "runs": 3, "failed": 0,
            "passed": 3, "invalid": 0, "latency_ms": {"p50": 1.0}, "unquiet": 0, "duplicates": rate(0.005, agree),
            "columns": {"latency_ms_max": column}}
    lint = {"id": "offset-persist-decides-little", "path": "consumers[0].client." + EVIL, "message": "decides little " + EVIL,
            "fix": "pull less often", "where": "every point", "points": 1, "params": ["persist_ms"], "inert": True}
    return {"totals": {"runs": 3, "ok": 3, "sent_ok": 30_000, "lost": 0, "duplicates": 150, "sim_time_ms": 90_000.0,
                       "wall_s": 3.0, "compiled": 3, "compiled_known": 3},
            "focus": focus, "drawn": ["duplicates"], "overall": overall, "params": ["persist_ms"], "stats": [stat],
            "quiescence": {"runs": 3, "quiet": 3, "unquiet": 0, "unjudged": 0, "moving_runs": {}, "unquiet_ids": []},
            "coverage": None, "failed": [], "failing": {"total": 0, "rows": []}, "lint": [lint],
            "inert": {"persist_ms": [lint]}, "column": {"overall": column}}


def render(tmp_path: Path, focus: Focus, agree: bool | None) -> str:
    manifest = {"name": "sweep " + EVIL, "source": "file " + EVIL, "base": "base " + EVIL, "digest": "c" * 64,
                "params": {"persist_ms": "consumers[0].client." + EVIL}, "points": [0], "seeds": [1, 2, 3]}
    images = [("focus", "duplicates_by_cause", "Duplicates " + EVIL, "AAAA")]
    return sweep_page.page(manifest, view(focus, agree), images, tmp_path, tmp_path / "report")


def test_user_input_is_escaped_and_the_lint_and_inert_parameter_shown(tmp_path: Path) -> None:
    page = render(tmp_path, Focus("duplicates", False, "inferred: " + EVIL), agree=False)
    assert "<script>alert" not in page and page.count("<script>") == 1  # only the page's own script
    for shown in (f"<title>rmqsim sweep report: sweep {ESCAPED}</title>", "<td>value " + ESCAPED + "</td>",
                  "<b>Focus: duplicates</b> — inferred: " + ESCAPED, f"<code>consumers[0].client.{ESCAPED}</code>: "
                  f"decides little {ESCAPED} [offset-persist-decides-little] — at every point; <b>swept parameter "
                  "persist_ms: the lint calls it inert</b>",
                  "Swept parameter persist_ms is one the lint calls inert", "3 of 3 runs ran on the compiled"):
        assert shown in page, shown


def test_a_rate_shows_its_run_interval_first_and_the_per_message_one_only_where_the_runs_agree(tmp_path: Path) -> None:
    page = render(tmp_path, Focus("duplicates", True, "declared"), agree=False)
    assert "<td>0.500 % [0.100 %, 1.20 %] (150)</td><td>runs disagree (87× the spread of independent messages)</td>" in page
    assert "the per-message 95 % Poisson score interval [0.400 %, 0.600 %] does not hold" in page
    page = render(tmp_path, Focus("duplicates", True, "declared"), agree=True)
    assert "<td>0.500 % [0.100 %, 1.20 %] (150)</td><td>0.500 % [0.400 %, 0.600 %]</td>" in page
    assert "the per-message 95 % Poisson score interval [0.400 %, 0.600 %] holds: the runs agree with it" in page


def test_a_column_focus_is_shown_in_its_unit(tmp_path: Path) -> None:
    column = find("latency_ms.max", table_columns(runs_schema({}), []))
    page = render(tmp_path, Focus(column.name, True, "declared", column=column), agree=True)
    assert "<b>Focus: end-to-end latency (send → first consume), max</b>" in page
    assert "<td>37 s [30 s, 44 s], 13.4 s – 74.4 s (1 without a value)</td>" in page
    assert "from 13.4 s to 74.4 s over 3 runs" in page and "1 run has no value" in page
