"""The run summary `rmqsim run` prints: what a person reads first (summary.json holds everything).

Sections in a fixed order (`SECTIONS`): sends, availability, store, consumption, guarantees,
latency, transactions, timer, failover, quiescence, coverage; then the verdict with its failures.
The first screen answers an operator's three questions: how long producers could not write and how
long until consumers were back (`availability`, analysis/checkers/availability.py: the clients'
view, per topic and group, the longest over the run), and what was lost. How it reads:

- every count says what it counts: *messages* (distinct: a message consumed twice counts once),
  *deliveries* (successful listener calls: a duplicate counts again), *copies* (stored copies in
  user topics: a message stored twice counts twice), *requests* (send attempts);
- a row that would be zero is left out (causes, retries, DLQ, ...), except the two answers every
  run gives: `lost` and `duplicate deliveries`;
- a row is left out when another row already shows the same number under another name (send
  requests equal to the sends, deliveries equal to the messages consumed, a group's own lost and
  duplicate counts when it is the only group: the totals are its counts);
- a section that does not apply is one line saying so (`transactions: none (no transactional
  producer)`); `timer` (one line: 5.x timer messages, analysis/checkers/timer_checker.py) prints nothing
  when `timer` is null or absent, `failover` (one line: elections and time without a writable
  master, analysis/checkers/failover_checker.py) nothing when `failovers` is null and every group always had
  a writable master, `quiescence` and `coverage` nothing when summary.json lacks their key;
- duplicates are split only by their eleven mechanisms (`duplicates_by_cause`, analysis/checkers/duplicates.py);
  the older two-way `duplicate_causes` stays in summary.json and the sweep columns, unprinted;
- lines stay within `WIDTH` characters: lists wrap between items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from analysis.reports import fmt

SECTIONS = ("sends", "availability", "store", "consumption", "guarantees", "latency", "transactions", "timer",
            "failover", "quiescence", "coverage")
WIDTH = 100  # the longest line printed
NAME_WIDTH = 22  # the row-name column
PERCENTILE_COLUMNS = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))

Row = tuple[str, str, list[str]]  # (name, text, items appended to the text, comma-separated and wrapped)


def summary_text(summary: dict[str, Any]) -> str:
    """The printed summary of one run's summary.json (module docstring)."""
    lines: list[str] = []
    for name in SECTIONS:
        lines += SECTION_LINES[name](summary)
    lines.append(f"verdict: {summary['verdict']}")
    lines += [f"  {failure}" for failure in summary["failures"]]
    return "\n".join(lines)


# --- layout ------------------------------------------------------------------------------------

def _wrap(head: str, items: Iterable[str], indent: int) -> list[str]:
    """`head` then `items` joined by ", ", broken between items so no line passes WIDTH;
    continuation lines start at column `indent`."""
    items = list(items)
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        sep = "" if line.endswith(" ") else " "
        if line.strip() and len(line) + len(sep) + len(piece) > WIDTH:
            lines.append(line)
            line = " " * indent + piece
        else:
            line += sep + piece
    lines.append(line)
    return lines


def _section(title: str, rows: list[Row], empty: str | None = None) -> list[str]:
    """A header line and its rows; with no row, `title: empty` (or nothing without `empty`)."""
    if not rows:
        return [f"{title}: {empty}"] if empty else []
    lines = [title]
    for name, text, items in rows:
        head = f"  {name:<{NAME_WIDTH}} {text}"
        lines += _wrap(head, items, NAME_WIDTH + 3) if items else [head]
    return lines


def _tally(counts: dict[str, Any] | None) -> list[str]:
    """`name n` for each nonzero count, the largest first (then by name)."""
    nonzero = sorted(((name, n) for name, n in (counts or {}).items() if n), key=lambda kv: (-kv[1], kv[0]))
    return [f"{name} {fmt.count(n)}" for name, n in nonzero]


def _split(counts: dict[str, Any] | None) -> tuple[str, list[str]]:
    """What follows a count: its nonzero causes (`: a 3, b 1`), or `, all <cause>` for one."""
    parts = _tally(counts)
    if len(parts) == 1:
        return f", all {parts[0].rsplit(' ', 1)[0]}", []
    return (":", parts) if parts else ("", [])


def _n(value: Any, noun: str) -> str:
    """`1 message`, `2 messages`."""
    return f"{fmt.count(value)} {noun}{'' if value == 1 else 's'}"


# --- sections ----------------------------------------------------------------------------------

def _sends(s: dict[str, Any]) -> list[str]:
    """Per message whose send() has an outcome (a batch counts once per message)."""
    sends = s["sends"]
    if not sends:
        return _section("sends", [], "none (no producer sent a message)")
    failed, reasons = s["send_failed"], _tally(s["send_failures_by_reason"])
    outcomes = _tally(s["send_status"])
    if failed:  # one reason goes in parentheses; several get a row of their own
        only = f" ({reasons[0].rsplit(' ', 1)[0]})" if len(reasons) == 1 else ""
        outcomes.append(f"failed {fmt.count(failed)}{only}")
    if len(outcomes) == 1 and not failed:
        rows: list[Row] = [("messages sent", f"{fmt.count(sends)}, all {outcomes[0].rsplit(' ', 1)[0]}", [])]
    else:
        rows = [("messages sent", f"{fmt.count(sends)}:", outcomes)]
    if len(reasons) > 1:
        rows.append(("  failed, by reason", "", reasons))
    if s["sent_attempts"] != sends or s["send_retried"]:
        retried = f" ({_n(s['send_retried'], 'message')} needed more than one)" if s["send_retried"] else ""
        rows.append(("send requests", f"{fmt.count(s['sent_attempts'])}{retried}", []))
    if s["send_steered_away"]:
        rows.append(("steered away", f"{_n(s['send_steered_away'], 'send')} avoided a broker held unavailable", []))
    rows += _shares(s)
    return _section("sends", rows)


def _shares(s: dict[str, Any]) -> list[Row]:
    """Where the sends went: only with more than one broker (one broker takes them all)."""
    def pct(by_broker: dict[str, float]) -> list[str]:
        return [f"{b} {100 * v:.1f} %" for b, v in by_broker.items()]

    share, in_faults = s["send_share_by_broker"] or {}, s["send_share_by_broker_in_faults"]
    if len(share) < 2:
        return []
    rows: list[Row] = [("share by broker", "", pct(share))]
    if in_faults:
        rows.append(("  inside fault windows", "", pct(in_faults)))
    return rows


def _store(s: dict[str, Any]) -> list[str]:
    stored, twice = s["stored"], s.get("stored_duplicates", 0)
    if twice:
        text = f"{fmt.count(stored)} copies of {_n(stored - twice, 'message')} (user topics)"
    else:
        text = f"{_n(stored, 'message')}, one copy each (user topics)"
    rows: list[Row] = [("stored", text, [])]
    if s["pending_delay"]:
        rows.append(("waiting out a delay", f"{_n(s['pending_delay'], 'message')} parked (delay level or timer)", []))
    if s["oneway_unstored"]:
        rows.append(("ONEWAY never stored", _n(s["oneway_unstored"], "message"), []))
    return _section("store", rows)


def _consumption(s: dict[str, Any]) -> list[str]:
    groups = s["groups"]
    if not groups:
        return _section("consumption", [], "none (no consumer group)")
    distinct = sum(g["consumed_ok_distinct"] for g in groups.values())
    rows: list[Row] = []
    for name, g in groups.items():
        extra = _group_extra(g) if len(groups) > 1 else []
        rows.append((f"group {name}", f"{_n(g['consumed_ok_distinct'], 'message')} consumed"
                     + (";" if extra else ""), extra))
    if s["consumed"] != distinct:
        rows.append(("deliveries", f"{fmt.count(s['consumed'])} successful listener calls "
                     "(messages consumed + duplicate deliveries)", []))
    for key, name, noun in (("retries", "failed listener calls", "(each message consumed again later)"),
                            ("pending_retry", "waiting in retry path", "messages in %RETRY% / back-off"),
                            ("dlq", "moved to the DLQ", "messages, retries used up"),
                            ("unconsumed", "not yet consumed", "messages (run stopped early; not lost)"),
                            ("rebalances", "rebalances", "rounds that moved queues")):
        if s.get(key):
            rows.append((name, f"{fmt.count(s[key])} {noun}", []))
    if s["unowned_queue_s"]:
        rows.append(("queue time unowned", f"{fmt.duration_ms(s['unowned_queue_s'] * 1000)} summed over queues", []))
    if s["lag_max"]:
        rows.append(("max backlog", f"{_n(s['lag_max'], 'message')} stored, not yet consumed", []))
    return _section("consumption", rows)


def _group_extra(g: dict[str, Any]) -> list[str]:
    """A group's own nonzero answers (only printed beside other groups: else the totals say it)."""
    out = [f"{name} {fmt.count(g[key])}" for key, name in (("lost", "lost"), ("duplicates", "duplicate deliveries"),
                                                             ("dlq", "in DLQ")) if g.get(key)]
    p99 = (g.get("latency_ms") or {}).get("p99")
    return out + ([f"p99 {fmt.duration_ms(p99)}"] if p99 is not None else [])


def _guarantees(s: dict[str, Any]) -> list[str]:
    lost = s["lost"]
    text, items = _split(s.get("lost_by_cause"))
    rows: list[Row] = [("lost", f"{_n(lost, 'acknowledged message')}{text}", items)]
    dups, messages = s["duplicates"], s["duplicated_messages"]
    of = f" of {_n(messages, 'message')}" if dups and messages != dups else ""
    text, items = _split(s.get("duplicates_by_cause"))
    rows.append(("duplicate deliveries", f"{fmt.count(dups)}{of}{text}", items))
    order = s["order_violations"]
    if order is None:
        rows.append(("order", "not promised (no orderly group)", []))
    else:
        text, items = _split(s.get("order_violations_by_cause"))
        rows.append(("order violations", f"{fmt.count(order)}{text}", items))
    for name, o in (s.get("guarantee_outcomes") or {}).items():  # `expect: {guarantees: ...}` (analysis/checkers/verdict.py)
        if o.get("expected") == "break":
            result = "unknown" if o.get("held") is None else "held" if o["held"] else "broke"
            note = ", as expected" if o.get("as_expected") else ", NOT as expected" if o.get("held") is not None else ""
            rows.append(("expected to break", f"{name}: {result}{note}", []))
    expectations = s.get("expectations") or []
    if expectations:
        held = sum(1 for e in expectations if e["ok"])
        rows.append(("expectations", f"{held} of {len(expectations)} held", []))
    return _section("guarantees", rows)


def _latency(s: dict[str, Any]) -> list[str]:
    """One row per measured latency, one column per percentile, each cell in its best unit."""
    series = [("sent → consumed", s["latency_ms"]), ("stored → consumed", s["consume_latency_ms"]),
              ("send() → result", s["send_latency_ms"]),
              ("  inside fault windows", s["send_latency_ms_in_faults"])]
    series = [(name, p) for name, p in series if p and p.get("p50") is not None]
    if not series:
        return ["latency: no sample"]
    lines = [f"{'latency':<{NAME_WIDTH + 3}}" + "".join(f"{label:>10}" for _, label in PERCENTILE_COLUMNS)]
    for name, p in series:
        lines.append(f"  {name:<{NAME_WIDTH}} " + "".join(f"{fmt.duration_ms(p[k]):>10}" for k, _ in PERCENTILE_COLUMNS))
    warm = [name for name, _ in series if name in ("sent → consumed", "send() → result")]
    if s.get("warmup_ms") and warm:  # stored → consumed covers every message (analysis/checkers/consumer_metrics.py)
        lines.append(f"  ({', '.join(warm)}: messages sent after the {fmt.duration_ms(s['warmup_ms'])} warm-up)")
    return lines


def _transactions(s: dict[str, Any]) -> list[str]:
    """Visible iff committed (analysis/checkers/txn_checker.py)."""
    t = s.get("txn")
    if t is None:
        return _section("transactions", [], "none (no transactional producer)")
    rows: list[Row] = [("half messages stored", fmt.count(t["transactions"]), [])]
    for key, causes, name in (("committed_visible", None, "committed, visible"),
                              ("rolled_back_hidden", None, "rolled back, hidden"),
                              ("committed_lost", "committed_lost_causes", "committed, LOST"),
                              ("rolled_back_visible", "rolled_back_visible_causes", "rolled back, VISIBLE"),
                              ("pending", None, "still being checked"),
                              ("discarded", None, "discarded (check max)"),
                              ("double_commits", None, "committed twice")):
        if t[key]:
            text, items = _split(t.get(causes)) if causes else ("", [])
            rows.append((name, f"{_n(t[key], 'message')}{text}", items))
    if t["checks"]:
        rows.append(("check-backs", f"{fmt.count(t['checks'])}: {fmt.number(t['checks_p50'])} a message at p50, "
                     f"{fmt.number(t['checks_max'])} at most; answers", _tally(t["check_answers"])))
        per_s = [f"{second} s: {fmt.count(n)}" for second, n in t["checks_per_second"]]
        rows.append(("check-backs by second", f"at most {fmt.count(t['checks_per_s_max'])};", per_s))
    if t["resolution_ms_p50"] is not None:
        rows.append(("resolved after", f"p50 {fmt.duration_ms(t['resolution_ms_p50'])}, "
                     f"p99 {fmt.duration_ms(t['resolution_ms_p99'])}, max {fmt.duration_ms(t['resolution_ms_max'])}",
                     []))
    return _section("transactions", rows)


def _timer(s: dict[str, Any]) -> list[str]:
    """`timer` and `timer_delay_error_ms` (analysis/checkers/timer_checker.py): one line, only with timer messages."""
    t = s.get("timer")
    if not t:
        return []
    items = [f"{fmt.count(t['delivered'])} delivered", f"{fmt.count(t['pending'])} pending"]
    if t["delivered_twice"]:
        replays = f" ({_n(t['replays'], 'replay')})" if t["replays"] else ""
        items.append(f"{fmt.count(t['delivered_twice'])} delivered twice{replays}")
    error = s.get("timer_delay_error_ms") or {}
    if error.get("p50") is not None:  # `a, b, c; delay error p50 x, p99 y, max z`
        items[-1] += f"; delay error p50 {fmt.duration_ms(error['p50'])}"
        items += [f"p99 {fmt.duration_ms(error['p99'])}", f"max {fmt.duration_ms(error['max'])}"]
    return _wrap(f"timer: {_n(t['messages'], 'message')}:", items, 2)


def _availability(s: dict[str, Any]) -> list[str]:
    """The `availability` section (analysis/checkers/availability.py): acknowledged share, each topic's
    longest write outage, each group's longest recovery and read outage; one line when nothing failed."""
    a = s.get("availability")
    if a is None:
        return []
    rows: list[Row] = []
    if a["sends"]:
        rows.append(("acknowledged", f"{fmt.count(a['acked'])} of {_n(a['sends'], 'send')} "
                     f"({a['acked_ratio'] * 100:.1f} %)", []))
    outages = [(t, sec) for t, sec in a["write_outage_s"]["by_topic"].items() if sec]
    if outages:
        rows.append(("write outage", "", [_outage(a, t, sec) for t, sec in outages]))
    recovery = a["recovery_s"]["by_group"]
    if recovery:
        reads = a["read_outage_s"]["by_group"]
        rows.append(("recovered", "", [f"{g} {'never' if sec is None else fmt.duration_ms(sec * 1000)}"
                                       f" (longest wait {fmt.duration_ms(reads.get(g, 0.0) * 1000)})"
                                       for g, sec in recovery.items()]))
    if not outages and not recovery and a["acked"] == a["sends"]:
        return [f"availability: every send acknowledged, no write outage{'' if a['sends'] else ' (no send)'}"]
    return _section("availability (clients' view; docs/availability.md)", rows)


def _outage(a: dict[str, Any], topic: str, sec: float) -> str:
    """A topic's longest write outage, with its span when a fault's window holds it."""
    for f in a.get("faults") or ():
        t = f["topics"].get(topic)
        if t and t["from_ms"] is not None and t["write_outage_s"] == sec:
            until = "never back" if t["until_ms"] is None else f"→ {fmt.duration_ms(t['until_ms'])}"
            return (f"{topic} {fmt.duration_ms(sec * 1000)} (fault {f['index']}: {fmt.duration_ms(t['from_ms'])} "
                    f"{until}, {_n(t['failed_sends'], 'failed send')})")
    return f"{topic} {fmt.duration_ms(sec * 1000)}"


def _failover(s: dict[str, Any]) -> list[str]:
    """`failovers`, `unwritable_s`, `two_masters_s`, `unwritable_at_end` (analysis/checkers/failover_checker.py):
    one line, only in controller mode (`failovers` not null) or when a group lost its writable master;
    the clients' longest write outage first, the broker's view beside it."""
    failovers, unwritable = s.get("failovers"), s.get("unwritable_s") or {}
    if failovers is None and not any(unwritable.values()):
        return []
    items = [_n(failovers, "failover") if failovers is not None else "no controller"]
    outage = ((s.get("availability") or {}).get("write_outage_s") or {}).get("max")
    broker = [f"{group} without a writable master {fmt.duration_ms(sec * 1000)}"
              for group, sec in unwritable.items() if sec]
    if outage is not None:
        items.append(f"write outage {fmt.duration_ms(outage * 1000)}" + (f" ({', '.join(broker)})" if broker else ""))
    else:
        items += broker
    items += [f"{group} with two masters {fmt.duration_ms(sec * 1000)}"
              for group, sec in (s.get("two_masters_s") or {}).items() if sec]
    items += [f"{group} without one at the end" for group in s.get("unwritable_at_end") or ()]
    return _wrap("failover:", items, 2)


def _quiescence(s: dict[str, Any]) -> list[str]:
    """`quiescence` (rmqsim/quiescence.py): was the cluster quiet when the run ended?"""
    q = s.get("quiescence")
    if not q:
        return []
    window = fmt.duration_ms(q["window_ms"])
    end = q.get("checked_at_ms", s.get("sim_time_ms"))
    if q["reached"] is None:
        return ["quiescence: not judged (the run stopped at a bound)"]
    if q["reached"]:
        return [f"quiescence: quiet from {fmt.duration_ms(q['at_ms'])} to the end ({fmt.duration_ms(end)}; window {window})"]
    unsettled = dict(q.get("unsettled") or {})
    quiet_for = unsettled.pop("quiet_for_ms", None)
    moving = _tally(unsettled) or [f"quiet for only {fmt.duration_ms(quiet_for or 0)}"]
    if q.get("settle") == "auto":
        advice = "settle_ms: auto gave up at max_settle_ms: raise it, or see what kept moving above"
    else:
        advice = f"the counts may still change: settle_ms: auto runs until quiet for {window}"
    return [*_wrap(f"quiescence: NOT quiet at the end ({fmt.duration_ms(end)}, window {window}):", moving, 2),
            f"  {advice}"]


def _coverage(s: dict[str, Any]) -> list[str]:
    """`coverage` (point name → times reached; every declared point present)."""
    points = s.get("coverage")
    if points is None:
        return []
    reached = {name: n for name, n in points.items() if n}
    head = f"coverage: {len(reached)} of {len(points)} rare-state points reached"
    return _wrap(head + (":" if reached else ""), _tally(reached), 2)


SECTION_LINES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "sends": _sends, "availability": _availability, "store": _store, "consumption": _consumption, "guarantees": _guarantees,
    "latency": _latency, "transactions": _transactions, "timer": _timer, "failover": _failover,
    "quiescence": _quiescence, "coverage": _coverage,
}
