"""The properties every input must satisfy, shared by the fuzz tests and the regression tests.

1. `assert_clean_rejection`: a rejected file raises the project's own `ConfigError`, naming
   the file, with every problem on one line of at most `MAX_PROBLEM_CHARS` characters (a
   10,000-character key is cut, not echoed) starting at a location: a key path
   (`producers[0].rate_per_s`, `set.x`, `grid.rate`), `(file)`, `(top level)`, `line L, column
   C`, `character N`, `--set ...` or `point ...`. `assert_finite`: an accepted scenario holds
   no NaN and no infinity anywhere.
2. `assert_consistent_summary`: an accepted scenario, run with a small event bound, ends with a
   summary whose counts are non-negative and agree with each other, or stops at its bound
   (`stopped_by` set; the counts of the part that ran must agree all the same).
   `assert_ledger_invariants`: the ledger's totals are the sums of its consumption units, every
   breakdown by cause adds up to its total, and per unit the messages accounted for (lost,
   pending, in the DLQ) are at most those acknowledged.
"""

from __future__ import annotations

import math
import re
from typing import Any

from analysis.checkers.run_rows import SUMMARY_COUNTS
from sim.config import ConfigError

KEY_PATH = r"(?:[A-Za-z_]\w*|\[[^\]\n]*\])(?:\.[A-Za-z_]\w*|\[[^\]\n]*\])*"
LOCATION = re.compile(rf"^(?:\(file\)|\(top level\)|line \d+, column \d+|character \d+|--set |point |{KEY_PATH})")
MAX_PROBLEM_CHARS = 3_000  # the longest honest problem lists the expectable metrics (about 1,900)


def assert_clean_rejection(exc: ConfigError, source: str) -> None:
    assert exc.source == source, (exc.source, source)
    assert exc.problems, "a ConfigError without problems"
    for problem in exc.problems:
        assert isinstance(problem, str) and "\n" not in problem and "\r" not in problem, repr(problem)
        assert problem.isprintable(), f"a control or format character in a problem: {problem[:200]!r}"
        assert len(problem) <= MAX_PROBLEM_CHARS, f"{len(problem):,} characters: {problem[:200]!r}"
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


def assert_finite(tree: Any, path: str = "") -> None:
    """No NaN or infinity anywhere in a (dumped) accepted scenario."""
    if isinstance(tree, float):
        assert math.isfinite(tree), f"{path or '(root)'} = {tree!r} was accepted"
    elif isinstance(tree, dict):
        for key, value in tree.items():
            assert_finite(value, f"{path}.{key}")
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            assert_finite(value, f"{path}[{i}]")


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
    assert s["stopped_by"] in (None, "max_events", "max_wall_s", "max_rss_mb", "livelock"), s["stopped_by"]
    assert s["verdict"] in ("valid", "invalid", "unknown"), s["verdict"]
    assert s["stopped_by"] is None or s["verdict"] == "unknown", s["verdict"]
    loss_expected = any(name.startswith("at_least_once") and o["expected"] == "break"
                        for name, o in (s.get("guarantee_outcomes") or {}).items())
    assert s["verdict"] != "valid" or s["lost"] == 0 or loss_expected, s  # `expect: {guarantees: ...}`
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


UNIT_TOTALS = ("lost", "pending_retry", "pending_delay", "dlq", "duplicates", "duplicated_messages")


def assert_ledger_invariants(summary: dict[str, Any]) -> None:
    """The ledger's own arithmetic (analysis/checkers/metrics.py): totals over units, causes adding up."""
    s, groups = summary, list(summary["groups"].items())
    for name in UNIT_TOTALS:
        assert s[name] == sum(g[name] for _u, g in groups), (name, s[name], [(u, g[name]) for u, g in groups])
    assert s["consumed"] == sum(g["consumed_ok_distinct"] + g["duplicates"] for _u, g in groups), s["consumed"]
    assert sum(s["lost_by_cause"].values()) == s["lost"], s["lost_by_cause"]
    assert sum(s["duplicates_by_cause"].values()) == s["duplicates"], s["duplicates_by_cause"]
    if s["order_violations"] is not None:
        assert sum(s["order_violations_by_cause"].values()) == s["order_violations"], s["order_violations_by_cause"]
    for unit, g in groups:
        assert sum(g["lost_by_cause"].values()) == g["lost"], (unit, g["lost_by_cause"])
        assert sum(g["duplicates_by_cause"].values()) == g["duplicates"], (unit, g["duplicates_by_cause"])
        assert sum(g["duplicate_causes"].values()) == g["duplicates"], (unit, g["duplicate_causes"])
        assert g["retries"] >= 0 and g["consume_attempts"] >= g["consumed_ok_distinct"] + g["duplicates"], (unit, g)
        assert g["lost"] + g["pending_retry"] + g["pending_delay"] + g["dlq"] <= s["sent_ok"], (unit, g)
        assert g["lag_max"] >= 0 and (g["rebalances"] is None or g["rebalances"] >= 0), (unit, g)  # None: POP
        if g["order_violations"] is not None:
            assert sum(g["order_violations_by_cause"].values()) == g["order_violations"], (unit, g)
    shares = s["send_share_by_broker"]
    assert not shares or abs(sum(shares.values()) - 1) < 1e-4, shares
