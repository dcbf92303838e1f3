"""The properties every input must satisfy, shared by the fuzz tests and the regression tests.

1. `assert_clean_rejection`: a rejected file raises the project's own `ConfigError`, naming
   the file, with every problem on one line starting at a location: a key path
   (`producers[0].rate_per_s`, `set.x`, `grid.rate`), `(file)`, `(top level)`, `line L, column
   C`, `character N`, `--set ...` or `point ...`.
2. `assert_consistent_summary`: an accepted scenario, run with a small event bound, ends with a
   summary whose counts are non-negative and agree with each other, or stops at its bound
   (`stopped_by` set; the counts of the part that ran must agree all the same).
"""

from __future__ import annotations

import re
from typing import Any

from analysis.run_rows import SUMMARY_COUNTS
from sim.config import ConfigError

KEY_PATH = r"(?:[A-Za-z_]\w*|\[[^\]\n]*\])(?:\.[A-Za-z_]\w*|\[[^\]\n]*\])*"
LOCATION = re.compile(rf"^(?:\(file\)|\(top level\)|line \d+, column \d+|character \d+|--set |point |{KEY_PATH})")


def assert_clean_rejection(exc: ConfigError, source: str) -> None:
    assert exc.source == source, (exc.source, source)
    assert exc.problems, "a ConfigError without problems"
    for problem in exc.problems:
        assert isinstance(problem, str) and "\n" not in problem and "\r" not in problem, repr(problem)
        assert LOCATION.match(problem) and ": " in problem, f"no location: {problem!r}"
    rendered = exc.render()
    assert rendered.splitlines()[0].endswith(f"in {source}:"), rendered[:200]
    assert len(rendered) < 50_000, f"{len(rendered)} characters of problems"


def assert_no_foreign_content(message: str, foreign: str) -> None:
    """No line of a file rmqsim was pointed at (8+ characters) appears in its message."""
    for line in foreign.splitlines():
        line = line.strip()
        if len(line) >= 8:
            assert line not in message, f"foreign content echoed: {line[:40]!r}"


NULLABLE_COUNTS = ("order_violations",)  # null where nothing is checked (no orderly group)


def assert_consistent_summary(summary: dict[str, Any]) -> None:
    for name in SUMMARY_COUNTS:
        if name in NULLABLE_COUNTS and summary[name] is None:
            continue
        assert isinstance(summary[name], int) and summary[name] >= 0, (name, summary[name])
    s = summary
    # every send that got a status took at least one attempt (a send that failed before any
    # attempt, e.g. without a route, counts in send_failed with none)
    assert s["sent_ok"] + s["sent_not_ok"] <= s["sent_attempts"], s
    assert s["sends"] == s["sent_ok"] + s["sent_not_ok"] + s["send_failed"], s
    assert s["send_retried"] <= s["sends"] and s["send_steered_away"] <= s["sends"], s
    assert sum(s["send_status"].values()) == s["sent_ok"] + s["sent_not_ok"], s
    assert sum(s["send_failures_by_reason"].values()) == s["send_failed"], s
    assert s["stored_duplicates"] <= s["stored"], s
    assert s["duplicated_messages"] <= s["duplicates"], s
    assert sum(s["duplicate_causes"].values()) == s["duplicates"], s
    assert s["stopped_by"] in (None, "max_events", "max_wall_s"), s["stopped_by"]
    assert s["verdict"] in ("valid", "invalid", "unknown"), s["verdict"]
    assert s["stopped_by"] is None or s["verdict"] == "unknown", s["verdict"]
    assert s["verdict"] != "valid" or s["lost"] == 0, s
    stored_distinct = s["stored"] - s["stored_duplicates"]
    units = max(1, len(s["groups"]))
    assert s["lost"] <= s["sent_ok"] * units, s
    for unit, group in s["groups"].items():
        assert 0 <= group["consumed_ok_distinct"] <= stored_distinct, (unit, group["consumed_ok_distinct"], s)
        assert 0 <= group["lost"] <= s["sent_ok"], (unit, group)
        assert group["lost"] + group["pending_retry"] + group["dlq"] <= s["sent_ok"], (unit, group)
        assert group["duplicated_messages"] <= group["duplicates"], (unit, group)
        _assert_latencies(group["latency_ms"])
    _assert_latencies(s["latency_ms"])
    _assert_latencies(s["send_latency_ms"])


def _assert_latencies(lat: dict[str, float | None]) -> None:
    values = [lat[k] for k in ("p50", "p90", "p99", "p999", "max")]
    if values[0] is None:
        assert all(v is None for v in values), lat
        return
    assert all(v is not None and v >= 0 for v in values), lat
    assert values == sorted(values), lat
