"""The printed run summary (analysis/reports/summary_text.py): its sections, in order; zero rows and
sections that do not apply left out, with one line saying so; one duplicate vocabulary; every
count named for what it counts, and no number twice under two names. Properties, not snapshots."""

from __future__ import annotations

import copy
import functools
import re

from analysis.checkers.duplicates import CAUSES
from analysis.reports.summary_text import SECTIONS, WIDTH, summary_text
from tests.conftest import short_baseline

PCT = {"p50": 2.5, "p90": 5.7, "p99": 10.3, "p999": 14.9, "max": 28.8}
NONE_PCT = dict.fromkeys(PCT)
TIMER = {"messages": 9000, "delivered": 8990, "pending": 10, "delivered_twice": 5, "replays": 3}
TIMER_ERROR = {"p50": 512.25, "p90": 900.0, "p99": 990.5, "max": 4200.0, "min": 0.0}
FAILOVER = {"failovers": 1, "unwritable_s": {"broker-a": 12.0, "broker-b": 0.0}, "unwritable_at_end": [],
            "two_masters_s": {"broker-a": 0.25, "broker-b": 0.0},
            "elections": [{"t_ms": 22_000.0, "broker_name": "broker-a", "master": "broker-a-s1",
                           "old_master": "broker-a", "epoch": 2, "reason": "master_inactive"}]}

AVAILABILITY = {  # one fault: the producers of orders could not write for 43 s, billing back after 65 s
    "sends": 1000, "acked": 600, "acked_ratio": 0.6,
    "write_outage_s": {"max": 43.0, "by_topic": {"orders": 43.0}},
    "read_outage_s": {"max": 22.5, "by_group": {"billing": 22.5}},
    "recovery_s": {"max": 65.1, "by_group": {"billing": 65.1}}, "not_recovered": [],
    "faults": [{"index": 0, "kind": "power_loss", "target": "broker-a", "start_ms": 20_000.0, "horizon_ms": 90_000.0,
                "topics": {"orders": {"write_outage_s": 43.0, "from_ms": 20_000.0, "until_ms": 63_000.0,
                                      "recovered": True, "failed_sends": 400, "send_timeouts": 30,
                                      "failed_by_reason": {"call_timeout": 30, "connect_failed": 370}}},
                "broker_groups": {}, "groups": {}, "back_ms": 85_100.0, "why": []}]}


def _summary(**changes: object) -> dict:
    """A quiet single-group run's summary.json, with `changes` applied (dotted keys reach in)."""
    s = {
        "sends": 1000, "sent_attempts": 1000, "sent_ok": 1000, "sent_not_ok": 0, "send_failed": 0,
        "send_status": {"SEND_OK": 1000}, "send_failures_by_reason": {}, "send_retried": 0,
        "send_steered_away": 0, "send_share_by_broker": {"broker-a": 0.5, "broker-b": 0.5},
        "send_share_by_broker_in_faults": None, "stored": 1000, "stored_duplicates": 0, "pending_delay": 0,
        "oneway_unstored": 0, "consumed": 1000, "lost": 0, "lost_by_cause": {"unflushed_at_power_loss": 0, "other": 0},
        "pending_retry": 0, "dlq": 0, "unconsumed": 0, "duplicates": 0, "duplicated_messages": 0,
        "duplicate_causes": {"producer_retry": 0, "redelivery": 0},
        "duplicates_by_cause": dict.fromkeys(CAUSES, 0), "order_violations": None,
        "order_violations_by_cause": None, "retries": 0, "rebalances": 0, "unowned_queue_s": 0.0, "lag_max": 0,
        "latency_ms": dict(PCT), "consume_latency_ms": dict(PCT), "send_latency_ms": dict(PCT),
        "send_latency_ms_in_faults": None, "warmup_ms": 5000, "sim_time_ms": 80_000,
        "groups": {"billing": {"consumed_ok_distinct": 1000, "lost": 0, "duplicates": 0, "dlq": 0,
                               "latency_ms": dict(PCT)}},
        "txn": None, "txn_violations": None, "timer": None, "timer_delay_error_ms": None,
        "failovers": None, "unwritable_s": {"broker-a": 0.0, "broker-b": 0.0}, "unwritable_at_end": [],
        "two_masters_s": None, "elections": [],
        "expectations": [], "verdict": "valid", "failures": [],
    }
    for key, value in changes.items():
        node = s
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        node[last] = value
    return s


def _full() -> dict:
    """Every section present: a transactional producer, timer messages, a failover, quiescence and coverage."""
    txn = {"transactions": 500, "committed_visible": 450, "rolled_back_hidden": 50, "committed_lost": 0,
           "committed_lost_causes": {"half_lost": 0}, "rolled_back_visible": 0,
           "rolled_back_visible_causes": {"commit_by_check": 0}, "pending": 0, "discarded": 0, "double_commits": 0,
           "checks": 900, "checks_p50": 2, "checks_max": 5, "check_answers": {"COMMIT_MESSAGE": 450, "UNKNOW": 450},
           "checks_per_second": [[30, 400], [60, 500]], "checks_per_s_max": 500,
           "resolution_ms_p50": 60_000.0, "resolution_ms_p99": 90_000.0, "resolution_ms_max": 95_000.0}
    return _summary(txn=txn, txn_violations=0, timer=dict(TIMER), timer_delay_error_ms=dict(TIMER_ERROR),
                    **FAILOVER, availability=AVAILABILITY,
                    quiescence={"reached": True, "at_ms": 2000, "window_ms": 60_000, "settle": "auto",
                                "checked_at_ms": 80_000, "unsettled": {}},
                    coverage={"power_loss_unflushed_tail": 3, "recovery_truncated": 0, "pick_one_at_least": 12})


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _headers(text: str) -> list[str]:
    """Section names in print order: unindented lines, up to the first space or colon."""
    return [re.split(r"[ :]", line, maxsplit=1)[0] for line in _lines(text) if not line.startswith(" ")]


def test_sections_come_in_order_then_the_verdict() -> None:
    text = summary_text(_full())
    assert _headers(text) == [*SECTIONS, "verdict"]


def test_availability_answers_the_operators_questions_on_the_first_screen() -> None:
    lines = _lines(summary_text(_full()))
    first = "\n".join(lines[:24])
    assert "acknowledged           600 of 1,000 sends (60.0 %)" in first
    assert "orders 43 s (fault 0: 20 s → 63 s, 400 failed sends)" in first
    assert "billing 65.1 s (longest wait 22.5 s)" in first
    failover = next(line for line in lines if line.startswith("failover:"))
    assert "write outage 43 s (broker-a without a writable master 12 s)" in failover


def test_availability_is_one_line_when_nothing_failed() -> None:
    quiet = {"sends": 10, "acked": 10, "acked_ratio": 1.0, "write_outage_s": {"max": 0.0, "by_topic": {"t": 0.0}},
             "read_outage_s": {"max": None, "by_group": {}}, "recovery_s": {"max": None, "by_group": {}},
             "not_recovered": [], "faults": []}
    assert "availability: every send acknowledged, no write outage" in summary_text(_summary(availability=quiet))


def test_the_verdict_ends_with_its_failures() -> None:
    failures = ["at_least_once(billing): 3 acknowledged message(s) never consumed"]
    lines = _lines(summary_text(_summary(verdict="invalid", failures=failures, lost=3)))
    assert lines[-2:] == ["verdict: invalid", f"  {failures[0]}"]


def test_zero_rows_are_left_out() -> None:
    s = _summary(**{"duplicates": 7, "duplicated_messages": 6, "consumed": 1007,
                    "duplicates_by_cause.rebalance": 5, "duplicates_by_cause.consumer_crash": 2})
    text = summary_text(s)
    (dups,) = [line for line in _lines(text) if line.startswith("  duplicate deliveries")]
    assert "rebalance 5" in dups and "consumer_crash 2" in dups
    for cause in CAUSES:
        if cause not in ("rebalance", "consumer_crash"):
            assert cause not in text, cause  # zero causes: not printed
    for absent in ("failed listener calls", "DLQ", "retry path", "unowned", "backlog", "send requests",
                   "steered", "ONEWAY", "delay", "by reason"):
        assert absent not in text, absent
    # the answers every run gives stay, even at zero
    assert "  lost                   0 acknowledged messages" in _lines(text)


def test_nonzero_rows_appear() -> None:
    text = summary_text(_summary(retries=9, dlq=2, pending_retry=1, lag_max=12, rebalances=3))
    for shown in ("failed listener calls  9", "moved to the DLQ       2", "waiting in retry path  1",
                  "max backlog            12 messages", "rebalances             3 rounds"):
        assert shown in text, shown


def test_sections_that_do_not_apply_are_one_line() -> None:
    text = summary_text(_summary())
    lines = _lines(text)
    assert "transactions: none (no transactional producer)" in lines
    assert "  order                  not promised (no orderly group)" in lines
    assert not [line for line in lines if line.startswith("  ") and "transaction" in line]
    # no summary key, no section: quiescence and coverage say nothing
    assert not any(line.startswith(("quiescence", "coverage")) for line in lines)


def test_one_duplicate_vocabulary() -> None:
    s = _summary(**{"duplicates": 4, "duplicated_messages": 4, "consumed": 1004, "duplicates_by_cause.send_back": 4,
                    "duplicate_causes.redelivery": 4})
    text = summary_text(s)
    assert "redelivery" not in text  # the two-way split stays in summary.json and the sweep columns
    assert "duplicate deliveries   4, all send_back" in text


def test_counts_name_what_they_count_and_no_number_repeats_under_another_name() -> None:
    quiet = summary_text(_summary())
    assert "send requests" not in quiet  # requests = sends: one row
    assert "deliveries" not in quiet.replace("duplicate deliveries", "")  # deliveries = messages consumed
    retried = _summary(sent_attempts=1100, send_retried=80, duplicates=30, duplicated_messages=25, consumed=1030)
    text = summary_text(retried)
    assert "send requests          1,100 (80 messages needed more than one)" in text
    assert "group billing          1,000 messages consumed" in text
    assert "deliveries             1,030 successful listener calls" in text
    assert "duplicate deliveries   30 of 25 messages" in text


def test_a_group_line_carries_its_own_answers_only_beside_other_groups() -> None:
    s = _summary()
    assert "lost 0" not in summary_text(s)
    s["groups"]["audit"] = {"consumed_ok_distinct": 990, "lost": 10, "duplicates": 0, "dlq": 0,
                            "latency_ms": dict(PCT)}
    s["lost"], s["lost_by_cause"]["other"] = 10, 10
    text = summary_text(s)
    assert "group audit            990 messages consumed; lost 10, p99 10.3 ms" in text
    assert "lost                   10 acknowledged messages, all other" in text


def test_quiescence_quiet_and_not_quiet() -> None:
    quiet = summary_text(_full())
    assert "quiescence: quiet from 2 s to the end (80 s; window 60 s)" in _lines(quiet)
    q = {"reached": False, "at_ms": None, "window_ms": 60_000, "settle": "fixed", "checked_at_ms": 40_000,
         "unsettled": {"backlog": 12, "rebalances": 2}}
    lines = _lines(summary_text(_summary(quiescence=q)))
    at = next(i for i, line in enumerate(lines) if line.startswith("quiescence"))
    assert lines[at].startswith("quiescence: NOT quiet at the end (40 s, window 60 s):")
    assert "backlog 12" in lines[at] and "rebalances 2" in lines[at]
    assert lines[at + 1].startswith("  ") and "settle_ms: auto" in lines[at + 1]
    assert not lines[at + 2].startswith("  ")  # one line of advice
    q |= {"unsettled": {"quiet_for_ms": 30_000}}
    assert "NOT quiet at the end (40 s, window 60 s): quiet for only 30 s" in summary_text(_summary(quiescence=q))


def test_the_timer_line_only_with_timer_messages() -> None:
    text = summary_text(_full())
    at = text.index("timer: ")
    line = " ".join(text[at:].split("\n", 2)[:2]).split("quiescence")[0]  # the line and its continuation
    assert line.startswith("timer: 9,000 messages: 8,990 delivered, 10 pending,"), line
    assert "5 delivered twice (3 replays); delay error p50 512 ms, p99 990 ms, max 4.20 s" in line, line
    once = summary_text(_summary(timer=TIMER | {"delivered_twice": 0, "replays": 0}, timer_delay_error_ms=TIMER_ERROR))
    assert "timer: 9,000 messages: 8,990 delivered, 10 pending; delay error p50 512 ms, p99 990 ms, max 4.20 s" \
        in _lines(once)
    none = summary_text(_summary(timer=TIMER | {"delivered": 0, "pending": 9000, "delivered_twice": 0, "replays": 0},
                                 timer_delay_error_ms=dict.fromkeys(TIMER_ERROR)))
    assert "timer: 9,000 messages: 0 delivered, 9,000 pending" in _lines(none)
    assert not any(line.startswith("timer") for line in _lines(summary_text(_summary())))  # timer null: nothing


def test_the_failover_line_only_with_a_controller_or_an_outage() -> None:
    assert "failover: 1 failover, write outage 43 s (broker-a without a writable master 12 s)," \
        in _lines(summary_text(_full()))
    assert not any(line.startswith("failover") for line in _lines(summary_text(_summary())))  # classic, no outage
    classic = summary_text(_summary(**{"unwritable_s.broker-b": 15.0, "unwritable_at_end": ["broker-b"]}))
    assert "failover: no controller, broker-b without a writable master 15 s, broker-b without one at the end" \
        in _lines(classic)
    quiet = summary_text(_summary(failovers=0, two_masters_s={"broker-a": 0.0, "broker-b": 0.0}))
    assert "failover: 0 failovers" in _lines(quiet)  # controller mode: always said
    assert not any(line.startswith("failover") for line in _lines(summary_text(_summary(unwritable_s=None))))


def test_coverage_counts_the_points_reached_and_names_them() -> None:
    text = summary_text(_full())
    assert "coverage: 2 of 3 rare-state points reached: pick_one_at_least 12, power_loss_unflushed_tail 3" \
        in _lines(text)
    assert "recovery_truncated" not in text


def test_lines_stay_within_the_width_however_long_the_lists() -> None:
    s = _full()
    s["coverage"] = {f"rare_state_point_number_{i}": i + 1 for i in range(40)}
    s["duplicates_by_cause"] = {cause: 1000 + i for i, cause in enumerate(CAUSES)}
    s["duplicates"] = s["duplicated_messages"] = sum(s["duplicates_by_cause"].values())
    s["txn"]["checks_per_second"] = [[i, 10_000 + i] for i in range(60)]
    s["send_share_by_broker"] = {f"broker-{i}": 0.05 for i in range(20)}
    lines = _lines(summary_text(s))
    assert max(len(line) for line in lines) <= WIDTH, max(lines, key=len)
    assert all(f"rare_state_point_number_{i} " in "\n".join(lines) for i in range(40))  # wrapped, not cut


def test_latency_rows_without_a_sample_are_left_out() -> None:
    text = summary_text(_summary(latency_ms=dict(NONE_PCT)))
    assert "sent → consumed" not in text and "stored → consumed" in text
    none = _summary(latency_ms=dict(NONE_PCT), consume_latency_ms=dict(NONE_PCT), send_latency_ms=dict(NONE_PCT))
    assert "latency: no sample" in _lines(summary_text(none))


@functools.cache
def _short_run() -> dict:
    from rmqsim.runner import run_scenario

    return run_scenario(short_baseline(duration_ms=8_000, settle_ms=4_000, rate=200), seed=1).summary


def test_the_summary_of_a_short_baseline_run() -> None:
    s = copy.deepcopy(_short_run())
    text = summary_text(s)
    lines = _lines(text)
    assert len(lines) <= 26 and max(len(line) for line in lines) <= WIDTH
    headers = _headers(text)
    assert headers == [name for name in [*SECTIONS, "verdict"] if name in headers]  # in order
    assert {"sends", "store", "consumption", "guarantees", "latency", "transactions", "verdict"} <= set(headers)
    assert "transactions: none (no transactional producer)" in lines and lines[-1] == f"verdict: {s['verdict']}"
    assert f"  messages sent          {s['sends']:,}, all SEND_OK" in lines
    for group, g in s["groups"].items():
        assert f"  group {group:<16} {g['consumed_ok_distinct']:,} messages consumed" in lines
    zero = [line.split()[0] for line in lines if re.search(r" 0( acknowledged messages)?$", line)]
    assert zero == ["lost", "duplicate"] and ": 0," not in text  # no zero rows but the two answers
    assert "redelivery" not in text and "cause" not in text
