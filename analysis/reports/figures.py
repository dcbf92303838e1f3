"""The sweep report's matplotlib figures; each function takes aggregates and returns a Figure.

Titles are the figure's identity in the HTML page (the report test looks for them). Rates are
drawn in % of what they are a fraction of; a figure is drawn only for a metric that is not zero
in every run (analysis/reports/sweep_report.py lists those in one line), so no colour scale spans a range
around zero.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.sweeps.aggregate import Metric  # noqa: E402

FAULT_COLORS = {"process_crash": "#e41a1c", "power_loss": "#000000", "partition": "#377eb8",
                "link_latency": "#4daf4a", "packet_loss": "#984ea3", "disk_slow": "#ff7f00",
                "fsync_stall": "#a65628", "pause": "#f781bf"}
# duplicates_by_cause's mechanisms (analysis/checkers/duplicates.py CAUSES); `redelivery`: the older two-way split.
# The per-run report's too (analysis/reports/run_figures.py, which imports this module)
CAUSE_COLORS = {"producer_retry": "#d95f02", "rebalance": "#1b9e77", "consumer_crash": "#e41a1c",
                "consumer_shutdown": "#66a61e", "broker_offset_rollback": "#000000", "offset_reset": "#e6ab02",
                "failover": "#377eb8", "send_back": "#a6761d", "txn_double_commit": "#e7298a",
                "timer_redelivered": "#17becf", "invisible_time_expired": "#bcbd22", "ack_lost": "#8c564b", "other": "#999999", "redelivery": "#7570b3"}


def _positions(values: list[Any]) -> tuple[list[float], list[str], bool]:
    """Numeric parameters on a numeric axis; anything else evenly spaced with labels."""
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numeric:
        return [float(v) for v in values], [str(v) for v in values], True
    return [float(i) for i in range(len(values))], [str(v) for v in values], False


def pooled_note(rows: list[dict[str, Any]]) -> str:
    """What a marginal pools over: `pooled over threads × seeds (4 runs per value)`."""
    if not rows:
        return ""
    others = rows[0].get("pooled_over") or []
    runs = sorted({r.get("runs") for r in rows if r.get("runs") is not None})
    per = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}–{runs[-1]}" if runs else "?"
    return f"pooled over {' × '.join([*others, 'seeds'])} ({per} runs per value)"


def _cause_colors(metric: Metric, causes: list[str]) -> dict[str, Any]:
    """Duplicate mechanisms in the per-run report's colours; other causes from one palette."""
    if metric.name == "duplicates":
        return {c: CAUSE_COLORS.get(c, "#999999") for c in causes}
    palette = plt.get_cmap("Set2")
    return {c: palette(i % palette.N) for i, c in enumerate(causes)}


def _percent(value: float | None) -> float:
    return 0.0 if value is None else 100.0 * value


def by_cause_vs_params(marginals: dict[str, list[dict[str, Any]]], metric: Metric, causes: list[str]) -> Figure:
    """One panel per swept parameter: the metric's rate (% of its exposure) stacked by cause, and
    the pooled total with its 95 % score interval, every other parameter pooled (said in the
    title). A band joins numeric x values only; categorical x values get error bars. Only
    `causes` (those seen in some run) are drawn."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.3), squeeze=False)
    colors = _cause_colors(metric, causes)
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _positions([r["value"] for r in rows])
        bottom = [0.0] * len(rows)
        for cause in causes:
            heights = [100.0 * r["causes"][cause] / r["exposure"] if r["exposure"] else 0.0 for r in rows]
            ax.bar(xs, heights, width=_bar_width(xs), bottom=bottom, color=colors[cause], alpha=0.6,
                   label=f"cause: {cause}")
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        _total_with_interval(ax, xs, rows, numeric)
        ax.set_ylim(bottom=0)
        _label_axes(ax, xs, labels, name, numeric, f"% of {metric.of}",
                    f"{metric.title} by cause vs {name}\n{pooled_note(rows)}")
    fig.tight_layout()
    return fig


def _label_axes(ax: Any, xs: list[float], labels: list[str], name: str, numeric: bool, ylabel: str,
                title: str) -> None:
    """One panel against a swept parameter: ticks, labels, title, legend; a categorical
    parameter's panel keeps half a slot of margin at either end."""
    ax.set_xticks(xs, labels)
    ax.set_xlabel(name)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    if not numeric:
        ax.set_xlim(-0.6, len(xs) - 0.4)


def _total_with_interval(ax: Any, xs: list[float], rows: list[dict[str, Any]], numeric: bool) -> None:
    mean = [_percent(r["mean"]) for r in rows]
    lo = [_percent(r["lo"]) for r in rows]
    hi = [_percent(r["hi"]) for r in rows]
    method = rows[0]["method"] if rows else ""
    if numeric:
        ax.plot(xs, mean, "o-", color="#333333", label="total (pooled)")
        ax.fill_between(xs, lo, hi, color="#333333", alpha=0.12, label=f"95% {method} interval")
    else:  # no line or band between categories
        ax.errorbar(xs, mean, yerr=[[m - a for m, a in zip(mean, lo, strict=True)],
                                    [b - m for m, b in zip(mean, hi, strict=True)]],
                    fmt="o", color="#333333", capsize=5, label=f"total (pooled), 95% {method} interval")


def by_cause(total: dict[str, Any], metric: Metric, causes: list[str], runs: int) -> Figure:
    """A sweep without parameters: the metric's rate by cause over every run, pooled."""
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(causes) + 2))
    colors = _cause_colors(metric, causes)
    rates = [100.0 * total["causes"][c] / total["exposure"] if total["exposure"] else 0.0 for c in causes]
    ax.barh(range(len(causes)), rates, color=[colors[c] for c in causes])
    for i, c in enumerate(causes):
        ax.text(rates[i], i, f" {total['causes'][c]:,}", va="center", fontsize=8)
    ax.set_yticks(range(len(causes)), causes)
    ax.set_xlabel(f"% of {metric.of} (bar labels: events, all runs)")
    ax.set_title(f"{metric.title} by cause ({runs} runs pooled)")
    fig.tight_layout()
    return fig


def heatmap(cells: list[dict[str, Any]], row_param: str, col_param: str, title: str, label: str,
            show: Any, pooled_over: list[str]) -> Figure:
    """A value per (row, column) pair of two parameters, each cell annotated with `show(cell)`
    (a value with its interval); the colour scale starts at 0 for rates and is never drawn for a
    metric that is zero everywhere (the report lists those instead)."""
    rows = sorted({c["row"] for c in cells}, key=_sort_key)
    cols = sorted({c["col"] for c in cells}, key=_sort_key)
    grid = [[float("nan")] * len(cols) for _ in rows]
    text = [[""] * len(cols) for _ in rows]
    for c in cells:
        i, j = rows.index(c["row"]), cols.index(c["col"])
        grid[i][j] = c["value"] if c["value"] is not None else float("nan")
        text[i][j] = show(c)
    finite = [v for line in grid for v in line if v == v]
    top = max(finite) if finite and max(finite) > 0 else 1.0
    fig, ax = plt.subplots(figsize=(2.1 * len(cols) + 3, 1.0 * len(rows) + 2.4))
    image = ax.imshow(grid, cmap="YlOrRd", aspect="auto", origin="lower", vmin=0, vmax=top)
    fig.colorbar(image, ax=ax, label=label)
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set_xlabel(col_param)
    ax.set_ylabel(row_param)
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            ax.text(j, i, text[i][j] or "-", ha="center", va="center", fontsize=8,
                    color="white" if value == value and value > 0.6 * top else "black")
    runs = sorted({c["runs"] for c in cells})
    per = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}–{runs[-1]}"
    ax.set_title(f"{title}: {row_param} × {col_param}\npooled over {' × '.join([*pooled_over, 'seeds'])} "
                 f"({per} runs per cell)", fontsize=10)
    fig.tight_layout()
    return fig


def _bar_width(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.6 if not xs or xs[0] == 0 else abs(xs[0]) * 0.3
    gaps = [b - a for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False) if b > a]
    return 0.5 * min(gaps) if gaps else 0.6


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


def latency_vs_params(marginals: dict[str, list[dict[str, Any]]]) -> Figure:
    """One panel per swept parameter: p50, p99 and p99.9 of the merged histograms of each value's
    runs (every other parameter pooled)."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.3), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _positions([r["value"] for r in rows])
        for q, color in (("p50", "#1b9e77"), ("p99", "#d95f02"), ("p99.9", "#7570b3")):
            ys = [r["latency_ms"].get(q) for r in rows]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], "o-" if numeric else "o",
                    color=color, label=q)
        ax.set_yscale("log")
        _label_axes(ax, xs, labels, name, numeric, "send → first consume latency (ms)",
                    f"Latency percentiles vs {name}\n{pooled_note(rows)}")
    fig.tight_layout()
    return fig


def latency_spectrum(pooled: dict[int, dict[str, float | None]], labels: dict[int, str],
                     spectrum: tuple[tuple[str, float], ...]) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 4.8))
    xs = [1 / (1 - q) for _name, q in spectrum]
    for point, values in pooled.items():
        ys = [values.get(name) for name, _q in spectrum]
        if any(y is not None for y in ys):
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], "o-", label=labels.get(point, str(point)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [name for name, _q in spectrum])
    ax.minorticks_off()
    ax.set_xlabel("percentile")
    ax.set_ylabel("send → first consume latency (ms)")
    ax.set_title("Latency percentile spectrum per point (pooled histograms)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def latency_timeline(tl: dict[str, Any], run: str) -> Figure:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    seconds = tl["tl_second"]
    ax.plot(seconds, tl["tl_max_ms"], color="#bbbbbb", label="max")
    ax.plot(seconds, tl["tl_p99_ms"], color="#d95f02", label="p99")
    ax.plot(seconds, tl["tl_p50_ms"], color="#1b9e77", label="p50")
    shown: set[str] = set()
    for w in tl["fault_windows"] or []:
        label = None if w["kind"] in shown else f"fault: {w['kind']}"
        shown.add(w["kind"])
        end_s = max(w["end_ms"], w["start_ms"] + 50) / 1000
        ax.axvspan(w["start_ms"] / 1000, end_s, color=FAULT_COLORS.get(w["kind"], "#999999"), alpha=0.15,
                   label=label)
        ax.text(w["start_ms"] / 1000, 1.0, f" {w['kind']} {w['target']}", transform=ax.get_xaxis_transform(),
                fontsize=7, va="top", rotation=90)
    ax.set_yscale("log")
    ax.set_xlabel("send time (simulated s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"Latency over simulated time, run {run} (faults shaded)")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def delivery_histogram(counts: list[tuple[int, int]], cap: int) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [d for d, _n in counts]
    ns = [n for _d, n in counts]
    colors = ["#e7298a" if d == 0 else "#1b9e77" if d == 1 else "#d95f02" for d in xs]
    ax.bar(xs, [max(n, 0) for n in ns], color=colors)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xticks(xs, [f"{d}+" if d == cap else str(d) for d in xs])
    for x, n in zip(xs, ns, strict=True):
        ax.text(x, n, str(n), ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("successful deliveries of an acked message (0 = lost)")
    ax.set_ylabel("messages (all runs)")
    ax.set_title("Histogram of delivery counts per message")
    fig.tight_layout()
    return fig


def txn_checks(data: dict[str, Any]) -> Figure:
    """Transactional messages: messages by number of check-backs (all runs), and checks per second
    of one run (check storms come in rounds, every transactionCheckInterval)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    hist = data["histogram"]
    left.bar([c for c, _n in hist], [n for _c, n in hist], color="#7570b3")
    left.set_yscale("log")
    left.set_xlabel("checks of the message (last bin: 16 and more)")
    left.set_ylabel("transactional messages")
    left.set_title("Checks per transactional message")
    per_second = data["per_second"]
    right.bar([s for s, _n in per_second], [n for _s, n in per_second], width=1.0, color="#d95f02")
    right.set_xlim(left=0)
    right.set_xlabel("second of the run")
    right.set_ylabel("checks")
    right.set_title(f"Checks per second ({data['run']})")
    fig.tight_layout()
    return fig
