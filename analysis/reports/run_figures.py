"""The per-run report's figures (matplotlib): each function takes a RunData and returns
`(Figure, caption)` — the caption is the one-line question the figure answers — or None when
the run did not record what the figure needs (the page then says so; no empty figure).

Every time axis is simulated seconds and carries the scenario's fault windows as shaded bands
with labels stacked in rows so that none overlaps another (`fault_bands`), and the warm-up as a
hatched band. Lines that could coincide get distinct markers.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.reports import fmt
from analysis.reports import run_data as rd
from analysis.reports import timeline_data as td
from analysis.reports.figures import CAUSE_COLORS, FAULT_COLORS

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LABEL_CHARS_PER_S = 0.9  # rough label width: characters × axis seconds per character


def fault_bands(ax: Axes, data: rd.RunData) -> int:
    """Shade each fault window and the warm-up; labels go in rows above the plot, a label moving
    to the next row when it would overlap one already placed (greedy interval packing)."""
    x0, x1 = 0.0, max(data.end_s, 1.0)
    ax.set_xlim(x0, x1)
    if data.warmup_ms:
        ax.axvspan(0, data.warmup_ms / 1000, facecolor="none", edgecolor="#999999", hatch="///", lw=0,
                   label="warm-up (not in latency statistics)")
    per_char = (x1 - x0) / 110 * LABEL_CHARS_PER_S
    rows: list[float] = []  # right end of the last label in each row
    for w in data.windows:
        start, end = w["start_ms"] / 1000, max(w["end_ms"], w["start_ms"] + 50) / 1000
        ax.axvspan(start, end, color=FAULT_COLORS.get(w["kind"], "#999999"), alpha=0.18, lw=0)
        text = f"{w['kind']} {w['target']}"
        right = start + per_char * len(text)
        row = next((i for i, edge in enumerate(rows) if edge < start), None)
        if row is None:
            row = len(rows)
            rows.append(right)
        else:
            rows[row] = right
        ax.annotate(text, xy=(start, 1.0), xycoords=("data", "axes fraction"), xytext=(2, 3 + 11 * row),
                    textcoords="offset points", fontsize=7, color=FAULT_COLORS.get(w["kind"], "#555555"),
                    annotation_clip=False)
    return len(rows)


def finish_time_axes(fig: Figure, ax: Axes, data: rd.RunData, xlabel: str, ylabel: str, title: str, legend: str) -> None:
    """A time figure's common part: fault bands, labels, the title above the fault labels' rows."""
    rows = fault_bands(ax, data)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, pad=8 + 11 * rows)
    ax.legend(fontsize=8, loc=legend)
    fig.tight_layout()


def spectrum_panel(ax: Axes, values_ms: np.ndarray, what: str) -> None:
    pct = rd.percentiles(values_ms)
    xs = [1 / (1 - q) for _name, q in rd.SPECTRUM]
    ys = [pct[name] if pct[name] is not None else np.nan for name, _q in rd.SPECTRUM]
    ax.plot(xs, ys, "o-", color="#1b9e77")
    for x, y in zip(xs, ys, strict=True):
        if y == y:
            ax.annotate(fmt.duration_ms(y), (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [name for name, _q in rd.SPECTRUM])
    ax.minorticks_off()
    ax.set_xlabel("percentile (log scale of 1 / (1 - q))")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{what} ({len(values_ms):,} messages)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)


def latency_spectra(data: rd.RunData) -> tuple[Figure, str] | None:
    publish, e2e = rd.publish_latency_ms(data), rd.end_to_end_latency_ms(data)
    if not len(publish) and not len(e2e):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    spectrum_panel(axes[0], publish, "Publish (send call) latency")
    spectrum_panel(axes[1], e2e, "End-to-end latency (send → first consume)")
    fig.suptitle("Latency percentile spectra, p50 to p99.99", fontsize=12)
    fig.tight_layout()
    return fig, ("How slow are sends and deliveries, up to the 1-in-10,000 message? (warm-up of "
                 f"{fmt.duration_ms(data.warmup_ms)} excluded)")


def rates_over_time(data: rd.RunData) -> tuple[Figure, str] | None:
    sent, consumed = data.kind(rd.PRODUCER_SENT), data.kind(rd.CONSUMER_CONSUMED)
    if not sent:
        return None
    fig, ax = plt.subplots(figsize=(11, 4.2))
    ok = sent["status"] == "SEND_OK"
    for i, (label, t) in enumerate((("publish rate (SEND_OK)", sent["t_us"][ok]),
                                    ("consume rate (successful)", consumed["t_us"][consumed["ok"].astype(bool)]
                                     if consumed else np.zeros(0, np.int64)))):
        counts = rd.per_second(t, data.end_s)
        ax.plot(np.arange(len(counts)) + 0.5, counts, marker=MARKERS[i], markersize=3, label=label)
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "messages per second", "Publish and consume rate over time", "lower right")
    return fig, "Did throughput hold through the faults, and did consumers keep up with producers?"


def latency_over_time(data: rd.RunData) -> tuple[Figure, str] | None:
    x, per, p50 = td.latency_p99_by_broker(data)
    if not per:
        return None
    fig, ax = plt.subplots(figsize=(11, 4.2))
    ax.plot(x, p50, color="#555555", ls="--", lw=1, label="p50, all brokers")
    for i, (broker, p99) in enumerate(per.items()):  # NaN in a second without a send to it: a gap
        ax.plot(x, p99, marker=MARKERS[i % len(MARKERS)], markersize=3, label=f"p99, sends to {broker}")
    ax.set_yscale("log")
    failed = td.send_failures(data)
    total = 0
    if failed:
        per_second = sum(failed.values())
        total = int(per_second.sum())
        twin = ax.twinx()
        twin.stairs(per_second, np.arange(len(per_second) + 1), fill=True, color="#e41a1c", alpha=0.3,
                    label=f"failed sends per second ({total:,}; by reason under Failed sends)")
        twin.set_ylabel("failed sends per second", color="#b2182b")
        twin.set_ylim(0, max(1, per_second.max()) * 1.6)  # bars in the lower part, under the legend
        ax.set_zorder(twin.get_zorder() + 1)
        ax.patch.set_visible(False)
        h2, l2 = twin.get_legend_handles_labels()
    finish_time_axes(fig, ax, data, "send time (simulated s)", "send call latency (ms)",
                     "Publish latency over time, p99 per broker" + (", and failed sends" if total else ""),
                     "upper right")
    if total:
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles + h2, labels + l2, fontsize=8, loc="upper right")
    return fig, ("When did sends slow down, to which broker, and does that line up with a fault? (sends in "
                 "the warm-up not measured; a gap is a second without a completed send to that broker"
                 + (f"; {total:,} sends failed, in red" if total else "; no send failed") + ")")


def per_second_lines(series: dict[str, np.ndarray], offset_s: float) -> tuple[Figure, Axes]:
    """A time figure with one marked line per series of per-second values (`offset_s` into the second)."""
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for i, (label, values) in enumerate(series.items()):
        ax.plot(np.arange(len(values)) + offset_s, values, marker=MARKERS[i % len(MARKERS)], markersize=3, label=label)
    return fig, ax


def send_share(data: rd.RunData) -> tuple[Figure, str] | None:
    shares = rd.send_share_by_broker(data)
    if len(shares) < 2:
        return None
    fig, ax = per_second_lines(shares, 0.5)
    ax.set_ylim(0, 1.05)
    finish_time_axes(fig, ax, data, "simulated time (s)", "share of the second's SEND_OK", "Send share per broker over time", "lower right")
    return fig, "Which broker do producers favour, and do they move away from a slow or failed one?"


def backlog(data: rd.RunData) -> tuple[Figure, str] | None:
    lag = rd.backlog_by_group(data)
    if not lag:
        return None
    fig, ax = per_second_lines(lag, 1.0)  # the backlog at each second's end
    marks = rd.rebalances(data)
    for j, (t, _group) in enumerate(marks):
        ax.axvline(t, color="#666666", lw=0.6, ls=":", label="rebalance" if j == 0 else None)
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "messages stored, not yet consumed", "Consumer lag (backlog) per group, rebalances marked", "upper right")
    return fig, "Does each group keep up, and how long does it take to drain after a fault or rebalance?"


def duplicates_over_time(data: rd.RunData) -> tuple[Figure, str] | None:
    by_cause = rd.duplicates_by_cause(data)
    if by_cause is None or (not any(v.any() for v in by_cause.values()) and _all_pop(data)):
        return None  # every group consumes by POP, without a duplicate: the POP panel shows its deliveries
    fig, ax = plt.subplots(figsize=(11, 4.2))
    bottom = np.zeros(max((len(v) for v in by_cause.values()), default=int(np.ceil(data.end_s)) + 1))
    if not by_cause:
        ax.plot([0, len(bottom)], [0, 0], color="#1b9e77", label="no duplicate delivery")
    for cause, values in by_cause.items():
        ax.bar(np.arange(len(values)) + 0.5, values, width=0.9, bottom=bottom[:len(values)],
               color=CAUSE_COLORS.get(cause), label=f"cause: {cause}")
        bottom[:len(values)] += values
    total = int(bottom.sum())
    finish_time_axes(fig, ax, data, "consumption time (simulated s)", "duplicate deliveries per second", f"Duplicates over time by cause ({total:,} in all)", "upper right")
    return fig, "When did duplicates happen, and what caused them?"


def _all_pop(data: rd.RunData) -> bool:
    """Every consumer entry of the resolved scenario consumes by POP (`pop:`)."""
    consumers = data.scenario.get("consumers", [])
    return bool(consumers) and all(isinstance(c.get("pop"), dict) for c in consumers)


def by_cause_bars(mapping: dict[str, Any], title: str, ylabel: str) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    names = list(mapping)
    values = [mapping[n] or 0 for n in names]
    ax.bar(range(len(names)), values, color="#e7298a")
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:,}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def losses_by_cause(data: rd.RunData) -> tuple[Figure, str] | None:
    causes = rd.summary_metric(data, "lost_by_cause")
    if not isinstance(causes, dict):
        return None
    return (by_cause_bars(causes, f"Losses by cause ({data.summary.get('lost', 0):,} lost)", "lost messages"),
            "Which mechanism lost acknowledged messages?")


def lock_events(data: rd.RunData) -> tuple[Figure, str] | None:
    events = rd.lock_events(data)
    if not events:
        return None
    fig, ax = per_second_lines(events, 0.5)
    ax.set_ylim(bottom=0)
    finish_time_axes(fig, ax, data, "simulated time (s)", "lock events per second",
                     "Orderly queue locks per broker: grants, renewals, expiry takeovers, refusals", "upper right")
    return fig, ("When did brokers grant, renew, hand over (after the 60 s expiry) or refuse the orderly "
                 "queue locks, and does a restarted broker grant anew?")


# (stem, title, function, what a missing figure means); the page keeps this order, then
# analysis/reports/txn_figures.py's transaction panel (analysis/reports/run_report.py FIGURES)
FIGURES = (
    ("latency_spectra", "Latency percentile spectra", latency_spectra, "no message was sent"),
    ("rates_over_time", "Publish and consume rate over time", rates_over_time, "no message was sent"),
    ("send_share", "Send share per broker over time", send_share, "fewer than two brokers took sends"),
    ("publish_latency_over_time", "Publish latency over time", latency_over_time, "no message was sent"),
    ("backlog", "Consumer lag (backlog) per group", backlog, "no consumer group"),
    ("duplicates_over_time", "Duplicates over time by cause", duplicates_over_time,
     "nothing was consumed, or every group consumes by POP and none had a duplicate (the POP panel shows their "
     "deliveries)"),
    ("losses_by_cause", "Losses by cause", losses_by_cause,
     "not recorded in this run (the summary has no `lost_by_cause`)"),
    ("lock_events", "Orderly lock events per broker", lock_events,
     "no orderly consumer group in this run (no broker lock records)"),
)
