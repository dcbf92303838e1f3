"""Guarantee verdicts: `valid` / `invalid` / `unknown` (Jepsen's vocabulary), with reasons.

Each consumer group has the delivery guarantee its configuration promises, derived from the
scenario (`guarantees_for`): *at-least-once* for a CLUSTERING group (every acknowledged message
of its topic is consumed successfully, or is still in the retry path, or was moved to the DLQ
after its retries) and per member for a BROADCASTING group; an orderly group also promises
per-sharding-key order (checked only there: elsewhere `order_violations` is null); where a
transactional producer runs, its transactions are atomic (analysis/checkers/txn_checker.py). Duplicates
are expected under at-least-once: they are counted and attributed, and fail a run only where a
scenario's `expect:` section says so.

`expect:` states bounds on summary metrics by key path, for example

    expect:
      lost: 0                         # exactly
      duplicates: {max: 0}
      latency_ms.p99: {max: 50}

and, under `guarantees:`, which guarantees are expected to `hold` (the default) or to `break`: a
scenario that exists to show a loss says so, and its run is `valid` when the loss happens:

    expect:
      guarantees:
        at_least_once: break          # every group; or by group: {billing: break, audit: hold}
        per_key_order: hold           # orderly groups only
        transactions: hold            # where a transactional producer runs

A guarantee expected to break that holds fails the run ("expected at_least_once to break (…) but
it held"); one whose result is unknown (null) stays unknown either way. The summary keeps each
guarantee's own result (`guarantees`: `ok` is whether it held) and adds `guarantee_outcomes`:
`{"at_least_once(billing)": {held, expected, as_expected}}`, with `transactions` beside the groups.

Under `availability:` (analysis/checkers/availability.py), bounds on what clients saw, each for
every topic / group or by name, each one entry of `expectations`:

    expect:
      availability: {max_write_outage_s: 45, max_recovery_s: {billing: 70}, min_acked_ratio: 0.3}

The verdict is `unknown` when the run stopped at a bound (`stopped_by`: max_events, max_wall_s,
max_rss_mb, or livelock; nothing can be judged, and what was not yet consumed is `unconsumed`,
not lost: analysis/checkers/metrics.py), else `invalid` if a guarantee did not end as expected (broke
where it should hold, or held where it should break) or a bound failed, else `unknown` if one
could not be evaluated (its metric is null), if the producers sent and nothing was acknowledged
(`vacuous`: the floor is one SEND_OK — every guarantee holds of zero messages), or if the run
ended before the cluster was quiet with messages still unconsumed (`not_quiet`, from
rmqsim/runner.py: they may yet be consumed, so at-least-once cannot be judged), else `valid`.
"""

from __future__ import annotations

from typing import Any

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.order import CAUSES as ORDER_CAUSES

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
AT_LEAST_ONCE, PER_KEY_ORDER, TRANSACTIONS = "at_least_once", "per_key_order", "transactions"
GUARANTEES: tuple[str, ...] = (AT_LEAST_ONCE, PER_KEY_ORDER, TRANSACTIONS)  # names `expect.guarantees` may use
EXPECT_GUARANTEES = "guarantees"  # the `expect:` key that states outcomes
EXPECT_AVAILABILITY = "availability"  # the `expect:` key that bounds outages and recovery; every other key is a metric
HOLD, BREAK = "hold", "break"
# what a break of each guarantee is, for the line of a break that did not happen
BREAK_MEANS = {AT_LEAST_ONCE: "an acknowledged message never consumed",
               PER_KEY_ORDER: "a message consumed before an earlier one of its sharding key",
               TRANSACTIONS: "a committed message lost, or a rolled-back one visible"}
LIVELOCK = "livelock"  # a `stopped_by` that is no bound of the user's (sim/watchdog.py)

# metrics an `expect:` section may bound (summary key paths); later features add theirs here
EXPECTABLE_METRICS: tuple[str, ...] = (
    "sent_attempts", "sent_ok", "sent_not_ok", "send_failed", "stored", "stored_duplicates", "consumed",
    "lost", "pending_retry", "dlq", "duplicates", "duplicated_messages",
    "duplicate_causes.producer_retry", "duplicate_causes.redelivery", "order_violations",
    "latency_ms.p50", "latency_ms.p90", "latency_ms.p99", "latency_ms.p999", "latency_ms.max",
    *(f"duplicates_by_cause.{cause}" for cause in DUPLICATE_CAUSES),
    *(f"order_violations_by_cause.{cause}" for cause in ORDER_CAUSES),
    "retries", "rebalances", "unowned_queue_s", "lag_max",
    "consume_latency_ms.p50", "consume_latency_ms.p90", "consume_latency_ms.p99", "consume_latency_ms.p999",
    "consume_latency_ms.max",
    "lost_by_cause.unflushed_at_power_loss", "lost_by_cause.replica_not_synced",
    "lost_by_cause.truncated_on_failover", "lost_by_cause.truncated_on_recovery",
    "lost_by_cause.offset_skipped_after_recovery", "lost_by_cause.expired_file_deleted",
    "lost_by_cause.fsync_error_swallowed", "lost_by_cause.other",
    # send side (analysis/checkers/metrics.py)
    "sends", "send_retried", "send_steered_away", "oneway_unstored", "pending_delay",
    "send_latency_ms.p50", "send_latency_ms.p90", "send_latency_ms.p99", "send_latency_ms.p999",
    "send_latency_ms.max", "send_latency_ms_in_faults.p50", "send_latency_ms_in_faults.p90",
    "send_latency_ms_in_faults.p99", "send_latency_ms_in_faults.p999", "send_latency_ms_in_faults.max",
    # transactional messages (analysis/checkers/txn_checker.py)
    "txn_violations", "txn.transactions", "txn.committed_visible",
    "txn.rolled_back_hidden", "txn.committed_lost", "txn.rolled_back_visible", "txn.pending", "txn.discarded",
    "txn.double_commits", "txn.checks", "txn.checks_p50", "txn.checks_max", "txn.resolution_ms_p50",
    "txn.resolution_ms_p99", "txn.checks_per_s_max",
    # timer messages (analysis/checkers/timer_checker.py)
    "timer.messages", "timer.delivered", "timer.pending", "timer.delivered_twice", "timer.replays",
    "timer_delay_error_ms.p50", "timer_delay_error_ms.p90", "timer_delay_error_ms.p99", "timer_delay_error_ms.max",
    "timer_delay_error_ms.min",
    # master availability and elections (analysis/checkers/failover_checker.py)
    "failovers",
    # client-visible availability (analysis/checkers/availability.py)
    "availability.acked_ratio", "availability.write_outage_s.max", "availability.read_outage_s.max",
    "availability.recovery_s.max",
)
# metrics keyed by a broker name: `send_share_by_broker.<broker>` (a broker of the scenario);
# `unwritable_s.<group>` and `two_masters_s.<group>` by a broker group's name (its brokerName, which
# is also its configured master's node name: analysis/checkers/failover_checker.py)
EXPECTABLE_BROKER_METRICS: tuple[str, ...] = ("send_share_by_broker", "send_share_by_broker_in_faults",
                                              "unwritable_s", "two_masters_s")


def metric_value(summary: dict[str, Any], path: str) -> Any:
    node: Any = summary
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def guarantees_for(groups: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """`groups`: group → {"broadcasting": bool, "orderly": bool}; one entry per promise."""
    out = []
    for group, conf in groups.items():
        out.append({"group": group, "guarantee": AT_LEAST_ONCE})
        if conf.get("orderly"):
            out.append({"group": group, "guarantee": PER_KEY_ORDER})
    return out


def _units_of(summary: dict[str, Any], group: str) -> list[dict[str, Any]]:
    units = summary.get("groups", {})
    return [u for name, u in units.items() if name == group or name.startswith(f"{group}/")]


def _judge_guarantee(summary: dict[str, Any], promise: dict[str, str]) -> dict[str, Any]:
    units = _units_of(summary, promise["group"])
    entry: dict[str, Any] = dict(promise)
    if promise["guarantee"] == AT_LEAST_ONCE:
        lost = sum(u["lost"] for u in units)
        entry["ok"] = lost == 0
        entry["why"] = "" if lost == 0 else f"{lost} acknowledged message(s) never consumed"
    else:
        values = [u["order_violations"] for u in units if u["order_violations"] is not None]
        violations = sum(values) if values else None
        entry["ok"] = None if violations is None else violations == 0
        entry["why"] = "" if entry["ok"] else (f"{violations} order violation(s)" if violations else
                                               "order not checked")
    return entry


def _judge_expectation(summary: dict[str, Any], path: str, spec: dict[str, float]) -> dict[str, Any]:
    """`spec`: {"min": x, "max": y}, either may be absent (an exact value has both equal)."""
    return _bounded(path, spec, metric_value(summary, path), "was not measured in this run")


def _bounded(path: str, spec: dict[str, float], actual: Any, missing: str) -> dict[str, Any]:
    """The expectation entry of `actual` against `spec`; `missing`: why a null `actual` is unknown."""
    low, high = spec.get("min"), spec.get("max")
    entry = {"metric": path, "expect": spec, "actual": actual}
    if actual is None:
        entry["ok"], entry["why"] = None, f"{path} {missing}"
        return entry
    ok = (low is None or actual >= low) and (high is None or actual <= high)
    entry["ok"] = ok
    entry["why"] = "" if ok else f"{path} = {actual}, expected {_describe(low, high)}"
    return entry


def _describe(low: Any, high: Any) -> str:
    if low is not None and low == high:
        return f"= {low}"
    parts = ([f">= {low}"] if low is not None else []) + ([f"<= {high}"] if high is not None else [])
    return " and ".join(parts)


def _txn_failures(summary: dict[str, Any]) -> list[str]:
    """Transactional atomicity (analysis/checkers/txn_checker.py): a message visible iff its local
    transaction committed; checked only where a transactional producer runs (else null)."""
    violations = summary.get("txn_violations")
    if not violations:
        return []
    txn = summary["txn"]
    return [f"transactional atomicity: {violations} violation(s) (committed_lost {txn['committed_lost']} "
            f"{txn['committed_lost_causes']}, rolled_back_visible {txn['rolled_back_visible']})"]


def expected_outcome(stated: dict[str, Any], guarantee: str, group: str | None = None) -> str:
    """`hold` or `break`: what `expect.guarantees` (`stated`) says of `guarantee` for `group`."""
    outcome = stated.get(guarantee, HOLD)
    return outcome.get(group, HOLD) if isinstance(outcome, dict) else outcome


def _outcome(held: bool | None, expected: str) -> dict[str, Any]:
    as_expected = None if held is None else held == (expected == HOLD)
    return {"held": held, "expected": expected, "as_expected": as_expected}


def _held_unexpectedly(name: str, guarantee: str) -> str:
    return f"{name}: expected {guarantee} to break ({BREAK_MEANS[guarantee]}) but it held"


def _judge_outcomes(guarantees: list[dict[str, Any]], stated: dict[str, Any]
                    ) -> tuple[dict[str, Any], list[str], list[str]]:
    """(`guarantee_outcomes`, failures, unknowns) of the groups' guarantees against what was
    expected: a break fails the run only where a hold was expected, and a hold only where a break was."""
    outcomes: dict[str, Any] = {}
    failures, unknown = [], []
    for g in guarantees:
        name = f"{g['guarantee']}({g['group']})"
        outcomes[name] = _outcome(g["ok"], expected_outcome(stated, g["guarantee"], g["group"]))
        if g["ok"] is None:
            unknown.append(f"{name}: {g['why']}")
        elif not outcomes[name]["as_expected"]:
            failures.append(f"{name}: {g['why']}" if g["ok"] is False else _held_unexpectedly(name, g["guarantee"]))
    return outcomes, failures, unknown


def _judge_transactions(summary: dict[str, Any], stated: dict[str, Any]
                        ) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """(outcome, failures, unknowns) of transactional atomicity; no outcome where no
    transactional producer runs (`txn_violations` null) and none was expected."""
    violations = summary.get("txn_violations")
    if violations is None and TRANSACTIONS not in stated:
        return None, [], []
    held = None if violations is None else violations == 0
    outcome = _outcome(held, expected_outcome(stated, TRANSACTIONS))
    if held is None:
        return outcome, [], [f"{TRANSACTIONS}: no transaction was checked in this run"]
    if outcome["as_expected"]:
        return outcome, [], []
    return outcome, _txn_failures(summary) if not held else [_held_unexpectedly(TRANSACTIONS, TRANSACTIONS)], []


def judge(summary: dict[str, Any], promises: list[dict[str, str]], expect: dict[str, Any],
          stopped_by: str | None = None, not_quiet: str | None = None) -> dict[str, Any]:
    """The verdict block of a summary: `verdict`, `guarantees`, `guarantee_outcomes`,
    `expectations`, `failures`. `expect`: metric path → {"min", "max"}, under EXPECT_GUARANTEES
    guarantee → `hold` | `break` (or group → `hold` | `break`), under EXPECT_AVAILABILITY the
    availability bounds; `not_quiet`: why the run ended before the cluster was quiet (module docstring)."""
    if stopped_by is not None:
        why = "as a livelock" if stopped_by == LIVELOCK else f"at its {stopped_by} bound"
        return {"verdict": UNKNOWN, "guarantees": [], "guarantee_outcomes": {}, "expectations": [],
                "failures": [f"run stopped {why}: nothing can be judged"]}
    stated = expect.get(EXPECT_GUARANTEES, {})
    guarantees = [_judge_guarantee(summary, p) for p in promises]
    outcomes, failures, unknown = _judge_outcomes(guarantees, stated)
    expectations = [_judge_expectation(summary, path, spec) for path, spec in expect.items()
                    if path not in (EXPECT_GUARANTEES, EXPECT_AVAILABILITY)]
    expectations += judge_availability(summary, expect.get(EXPECT_AVAILABILITY) or {})
    failures += [f"expect {e['metric']}: {e['why']}" for e in expectations if e["ok"] is False]
    unknown += [f"expect {e['metric']}: {e['why']}" for e in expectations if e["ok"] is None]
    txn, txn_failures, txn_unknown = _judge_transactions(summary, stated)
    if txn is not None:
        outcomes[TRANSACTIONS] = txn
    failures, unknown = failures + txn_failures, unknown + txn_unknown
    unknown += [why for why in (vacuous(summary), not_quiet and f"{not_quiet}: use settle_ms: auto") if why]
    verdict = INVALID if failures else UNKNOWN if unknown else VALID
    return {"verdict": verdict, "guarantees": guarantees, "guarantee_outcomes": outcomes,
            "expectations": expectations, "failures": failures + unknown}


def vacuous(summary: dict[str, Any]) -> str:
    """Why the safety verdicts say nothing: producers sent and no message was acknowledged (the
    floor: one SEND_OK; every guarantee holds of zero messages). Empty when they say something."""
    sends = summary.get("sends") or 0
    if not sends or summary.get("sent_ok"):
        return ""
    reasons = summary.get("send_failures_by_reason") or {}
    statuses = {k: n for k, n in (summary.get("send_status") or {}).items() if k != "SEND_OK"}
    top = sorted((reasons | statuses).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return (f"no message was acknowledged: {sends:,} sends without SEND_OK"
            + (f" ({', '.join(f'{k} {n:,}' for k, n in top)})" if top else "")
            + ": the safety guarantees hold of nothing")


def judge_availability(summary: dict[str, Any], bounds: dict[str, Any]) -> list[dict[str, Any]]:
    """One expectation entry per bound of `expect.availability` (per name where a mapping is given)."""
    a = summary.get("availability") or {}
    out = []
    if "min_acked_ratio" in bounds:
        out.append(_bounded("availability.acked_ratio", {"min": bounds["min_acked_ratio"]}, a.get("acked_ratio"),
                            "was not measured: no send had a result"))
    outage = bounds.get("max_write_outage_s")
    if outage is not None:
        by_topic = (a.get("write_outage_s") or {}).get("by_topic", {})
        limits = outage if isinstance(outage, dict) else dict.fromkeys(by_topic, outage)
        for topic, limit in sorted(limits.items()):
            out.append(_bounded(f"availability.write_outage_s.by_topic.{topic}", {"max": limit}, by_topic.get(topic),
                                "was not measured: no producer sent to it"))
    recovery = bounds.get("max_recovery_s")
    if recovery is not None:
        out += _recovery_entries(a, recovery)
    return out


def _recovery_entries(a: dict[str, Any], recovery: Any) -> list[dict[str, Any]]:
    """`max_recovery_s` per consumption unit (a group's name covers its BROADCASTING members)."""
    by_unit = (a.get("recovery_s") or {}).get("by_group", {})
    faults = bool(a.get("faults"))
    if isinstance(recovery, dict):
        limits = {u: lim for group, lim in recovery.items() for u in _units(by_unit, group) or [group]}
    else:
        limits = dict.fromkeys(by_unit, recovery)
    out = []
    for unit, limit in sorted(limits.items()):
        path = f"availability.recovery_s.by_group.{unit}"
        if not faults:
            out.append(_bounded(path, {"max": limit}, None, "was not measured: the run had no fault, nothing to recover from"))
        elif unit in by_unit and by_unit[unit] is None:
            out.append({"metric": path, "expect": {"max": limit}, "actual": None, "ok": False,
                        "why": f"{unit} never recovered (availability.not_recovered)"})
        else:
            out.append(_bounded(path, {"max": limit}, by_unit.get(unit), "was not measured in this run"))
    return out


def _units(by_unit: dict[str, Any], group: str) -> list[str]:
    return [u for u in by_unit if u == group or u.startswith(f"{group}/")]
