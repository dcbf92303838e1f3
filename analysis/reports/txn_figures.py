"""The per-run report's transaction panel (matplotlib), from analysis/reports/txn_data.py and the summary's
`txn` (analysis/checkers/txn_checker.py). Each function takes a RunData and returns `(Figure, caption)`, or
None for a run without transactional producers (the page then lists the figure as not drawn,
with `NO_TXN` as the reason). Time axes carry the fault windows and the warm-up like every other
time figure (analysis/reports/run_figures.py).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from analysis.checkers.txn_checker import CHECKS_HIST_CAP
from analysis.reports import fmt
from analysis.reports import run_data as rd
from analysis.reports import txn_data as td
from analysis.reports.run_figures import MARKERS, by_cause_bars, finish_time_axes, per_second_lines

NO_TXN = "no transactional producer in this run (`txn` is null)"
OUTCOME_COLORS = {"commit_by_producer": "#1b9e77", "commit_by_check": "#66c2a5", "rollback_by_producer": "#d95f02",
                  "rollback_by_check": "#fc8d62", "discarded": "#e7298a"}
VERDICT_KEYS = ("committed_visible", "rolled_back_hidden", "committed_lost", "rolled_back_visible", "pending",
                "discarded", "double_commits")


def _messages(data: rd.RunData) -> td.TxnMessages | None:
    return td.txn_messages(data) if isinstance(rd.summary_metric(data, "txn"), dict) else None


def transactions(data: rd.RunData) -> tuple[Figure, str] | None:
    txn = rd.summary_metric(data, "txn")
    if not isinstance(txn, dict):
        return None
    counts = {k: txn[k] for k in VERDICT_KEYS if isinstance(txn.get(k), int)}
    return (by_cause_bars(counts, f"Transactions: outcome against the local decision ({txn['transactions']:,} in all)",
                          "transactional messages"),
            "Did each transactional message become visible if and only if its local transaction committed?")


def halves_waiting(data: rd.RunData) -> tuple[Figure, str] | None:
    m = _messages(data)
    if m is None:
        return None
    fig, ax = per_second_lines(td.waiting_per_second(m, data.end_s), 1.0)  # at each second's end
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "half messages", "Half messages waiting for a decision",
                     "upper right")
    return fig, "How many transactions hang undecided over time, and how many is the broker already checking back?"


def checks_per_second(data: rd.RunData) -> tuple[Figure, str] | None:
    m = _messages(data)
    if m is None:
        return None
    checks = rd.per_second(data.kind(rd.TXN_CHECKED).get("t_us", np.zeros(0, np.int64)), data.end_s)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    ax.bar(np.arange(len(checks)) + 0.5, checks, width=0.9, color="#7570b3", alpha=0.6,
           label=f"check-backs sent by the broker ({int(checks.sum()):,})")
    answers = td.per_second_by_state(data.kind(rd.TXN_CHECK_ANSWERED), data.end_s)
    for i, (state, values) in enumerate(answers.items()):
        ax.plot(np.arange(len(values)) + 0.5, values, marker=MARKERS[i % len(MARKERS)], markersize=3, lw=1,
                label=f"answered {state} ({int(values.sum()):,})")
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "per second",
                     f"Check-backs per second (peak {int(checks.max()) if len(checks) else 0:,}/s)", "upper right")
    return fig, "When did the broker check back on undecided transactions, was there a storm, and what did producers answer?"


def outcomes_over_time(data: rd.RunData) -> tuple[Figure, str] | None:
    m = _messages(data)
    if m is None:
        return None
    series = td.outcomes_per_second(m, data.end_s)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    bottom = np.zeros(max(len(v) for v in series.values()))
    for name, values in series.items():
        if values.any():
            ax.bar(np.arange(len(values)) + 0.5, values, width=0.9, bottom=bottom[:len(values)],
                   color=OUTCOME_COLORS[name], label=f"{name.replace('_', ' ')} ({int(values.sum()):,})")
            bottom[:len(values)] += values
    unknow = td.per_second_by_state(data.kind(rd.TXN_LOCAL_DONE), data.end_s).get("UNKNOW")
    if unknow is not None and unknow.any():
        ax.plot(np.arange(len(unknow)) + 0.5, unknow, color="#555555", ls="--", lw=1, marker="x", markersize=3,
                label=f"local transaction answered UNKNOW ({int(unknow.sum()):,})")
    unresolved = int((m.outcome == td.UNRESOLVED).sum())
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "transactions resolved per second",
                     f"Transaction outcomes over time ({unresolved:,} unknown: unresolved at the end)", "upper right")
    return fig, ("How and when were transactions resolved: committed or rolled back by the producer, by a "
                 "check-back, or discarded — and how many stayed unknown?")


def checks_per_message(data: rd.RunData) -> tuple[Figure, str] | None:
    m = _messages(data)
    if m is None:
        return None
    hist = np.bincount(np.minimum(m.checks, CHECKS_HIST_CAP), minlength=CHECKS_HIST_CAP + 1)
    labels = [str(i) for i in range(CHECKS_HIST_CAP)] + [f"{CHECKS_HIST_CAP}+"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.bar(range(len(hist)), hist, color="#7570b3")
    for i, n in enumerate(hist.tolist()):
        if n:
            ax.text(i, n, f"{n:,}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(hist)), labels)
    ax.set_xlabel("check-backs of one transaction (transactionCheckMax 15 by default: then discarded)")
    ax.set_ylabel("transactional messages")
    ax.set_title(f"Check-backs per transaction ({len(m):,} transactions)")
    fig.tight_layout()
    return fig, "How many check-backs did a transaction need before it was resolved?"


def resolution_time(data: rd.RunData) -> tuple[Figure, str] | None:
    m = _messages(data)
    if m is None:
        return None
    series = td.resolution_ms(m)
    if not len(series["all"]):
        return None
    if len(series) == 2:  # one way of resolution only: its line would hide the line of all
        series = {f"all ({next(iter(series.keys() - {'all'}))})": series["all"]}
    fig, ax = plt.subplots(figsize=(11, 4.4))
    xs = [1 / (1 - q) for _name, q in rd.SPECTRUM]
    for i, (name, values) in enumerate(series.items()):
        pct = rd.percentiles(values)
        ys = [pct[n] for n, _q in rd.SPECTRUM]
        ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], ls="-" if i == 0 else "--", label=f"{name} ({len(values):,})")
        if i == 0:
            for x, y in zip(xs, ys, strict=True):
                ax.annotate(fmt.duration_ms(y), (x, y), textcoords="offset points", xytext=(0, 6), ha="center",
                            fontsize=7)
    p50 = rd.percentiles(next(iter(series.values())))["p50"]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [n for n, _q in rd.SPECTRUM])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("percentile (log scale of 1 / (1 - q))")
    ax.set_ylabel("half send → resolution (ms)")
    ax.set_title(f"Time from half message to resolution (p50 {fmt.duration_ms(p50)})")
    ax.margins(y=0.15)  # room for the value labels
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig, "How long does a transaction stay undecided, from its half message to commit, rollback or discard?"


# (stem, title, function, why not drawn), in page order after the other figures
FIGURES = (
    ("transactions", "Transactions", transactions, NO_TXN),
    ("txn_halves_waiting", "Half messages waiting for a decision", halves_waiting, NO_TXN),
    ("txn_checks_per_second", "Check-backs per second", checks_per_second, NO_TXN),
    ("txn_outcomes_over_time", "Transaction outcomes over time", outcomes_over_time, NO_TXN),
    ("txn_checks_per_message", "Check-backs per transaction", checks_per_message, NO_TXN),
    ("txn_resolution_time", "Time from half message to resolution", resolution_time,
     "no transactional producer in this run (`txn` is null), or no transaction was resolved"),
)
