"""The sweep report's matplotlib figures; each function takes aggregates and returns a Figure.

Titles are the figure's identity in the HTML page (the report test looks for them). Rates are
drawn in % of what they are a fraction of; a figure is drawn only for a metric that is not zero
in every run (analysis/reports/sweep_report.py lists those in one line), so no colour scale spans a range
around zero.

The run is the unit (analysis/sweeps/stats.py): a panel against an axis draws every run's own
value as a point (a strip, spread a little sideways so that equal values stay visible) beside
the pooled value with its 95 % Student-t interval over the runs; a rate's per-message
Wilson / Poisson interval is drawn only at the values whose runs agree with it, and labelled so.
An axis is a grid parameter or the zip's parameters together (`label` of each value: `a=1, b=2`),
one panel each.
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
                "fsync_stall": "#a65628", "fsync_error": "#999999", "pause": "#f781bf"}
# duplicates_by_cause's mechanisms (analysis/checkers/duplicates.py CAUSES); `redelivery`: the older two-way split.
# The per-run report's too (analysis/reports/run_figures.py, which imports this module)
CAUSE_COLORS = {"producer_retry": "#d95f02", "rebalance": "#1b9e77", "consumer_crash": "#e41a1c",
                "consumer_shutdown": "#66a61e", "broker_offset_rollback": "#000000", "offset_reset": "#e6ab02",
                "failover": "#377eb8", "send_back": "#a6761d", "txn_double_commit": "#e7298a",
                "timer_redelivered": "#17becf", "invisible_time_expired": "#bcbd22", "ack_lost": "#8c564b", "other": "#999999", "redelivery": "#7570b3"}


def _positions(values: list[Any], labels: list[str] | None = None) -> tuple[list[float], list[str], bool]:
    """Numeric parameters on a numeric axis; anything else (a zip axis's tuples too) evenly spaced
    with labels (`labels`, else the values as text)."""
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    shown = labels if labels is not None else [str(v) for v in values]
    if numeric:
        return [float(v) for v in values], shown, True
    return [float(i) for i in range(len(values))], shown, False


def _row_positions(rows: list[dict[str, Any]]) -> tuple[list[float], list[str], bool]:
    return _positions([r["value"] for r in rows], [r.get("label", str(r["value"])) for r in rows])


def _strip(ax: Any, xs: list[float], per_run: list[list[float]], width: float, label: str,
           color: str = "#555555") -> None:
    """Every run's value as a point at its x, spread evenly over `width` sideways (deterministic)."""
    px, py = [], []
    for x, values in zip(xs, per_run, strict=True):
        n = len(values)
        for i, v in enumerate(values):
            px.append(x + (width * ((i + 0.5) / n - 0.5) if n > 1 else 0.0))
            py.append(v)
    if px:
        ax.scatter(px, py, s=18, color=color, alpha=0.7, zorder=3, label=label, linewidths=0)


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
    """One panel per axis: the metric's rate (% of its exposure) stacked by cause, every run's own
    rate as a point, and the pooled total with its 95 % t interval over the runs (error bars), every
    other axis pooled (said in the title); the per-message score interval only at the values
    whose runs agree with it (a band over numeric x values, else error bars). Only `causes`
    (those seen in some run) are drawn."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.3), squeeze=False)
    colors = _cause_colors(metric, causes)
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _row_positions(rows)
        bottom = [0.0] * len(rows)
        for cause in causes:
            heights = [100.0 * r["causes"][cause] / r["exposure"] if r["exposure"] else 0.0 for r in rows]
            ax.bar(xs, heights, width=_bar_width(xs), bottom=bottom, color=colors[cause], alpha=0.45,
                   label=f"cause: {cause}")
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        width = _bar_width(xs)
        _strip(ax, [x - 0.2 * width for x in xs], [[100.0 * v for v in r.get("rates") or []] for r in rows],
               0.3 * width, "each run")
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
    """The pooled rate with its 95 % t interval over the runs (error bars, where two runs or more
    give one), and the per-message interval only where the runs agree with it."""
    mean = [_percent(r["mean"]) for r in rows]
    if numeric:
        ax.plot(xs, mean, "-", color="#333333", linewidth=1)
    have = [i for i, r in enumerate(rows) if r.get("run_lo") is not None]
    _error_bars(ax, [xs[i] for i in have], [mean[i] for i in have], [_percent(rows[i]["run_lo"]) for i in have],
                [_percent(rows[i]["run_hi"]) for i in have], "total (pooled), 95% t interval over runs")
    agree = [i for i, r in enumerate(rows) if r.get("agree") is not False and r.get("lo") is not None]
    method = rows[0]["method"] if rows else ""
    label = f"per-message 95% {method} (where the runs agree)"
    if numeric and len(agree) == len(rows) and len(rows) > 1:
        ax.fill_between(xs, [_percent(r["lo"]) for r in rows], [_percent(r["hi"]) for r in rows], color="#333333",
                        alpha=0.12, label=label)
    elif agree:
        shift = 0.08 * _bar_width(xs)
        _error_bars(ax, [xs[i] + shift for i in agree], [mean[i] for i in agree],
                    [_percent(rows[i]["lo"]) for i in agree], [_percent(rows[i]["hi"]) for i in agree], label,
                    color="#999999")
    missing = [i for i in range(len(rows)) if i not in have]
    if missing:
        ax.plot([xs[i] for i in missing], [mean[i] for i in missing], "o", color="#333333")


def _error_bars(ax: Any, xs: list[float], mean: list[float], lo: list[float], hi: list[float], label: str,
                color: str = "#333333") -> None:
    if not xs:
        return
    ax.errorbar(xs, mean, yerr=[[max(0.0, m - a) for m, a in zip(mean, lo, strict=True)],
                                [max(0.0, b - m) for m, b in zip(mean, hi, strict=True)]],
                fmt="o", color=color, capsize=5, zorder=4, label=label)


def column_vs_params(marginals: dict[str, list[dict[str, Any]]], column: Any, show: Any) -> Figure:
    """One panel per axis for a runs-table column (a max latency, a write outage): every run's value
    as a point, and the runs' mean with its 95 % t interval, every other axis pooled (said in the
    title); a run without a value (a group that never recovered) is counted in the legend."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.3), squeeze=False)
    every = [v for rows in marginals.values() for r in rows for v in r["values"]]
    scale, unit = _unit_scale(column.unit, max(every, default=0.0))
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _row_positions(rows)
        width = _bar_width(xs)
        _strip(ax, [x - 0.2 * width for x in xs], [[scale * v for v in r["values"]] for r in rows], 0.25 * width,
               "each run", color="#1f78b4")
        mean = [float("nan") if r["mean"] is None else scale * r["mean"] for r in rows]
        if numeric:
            ax.plot(xs, mean, "-", color="#333333", linewidth=1)
        have = [i for i, r in enumerate(rows) if r["lo"] is not None]
        _error_bars(ax, [xs[i] for i in have], [mean[i] for i in have], [scale * rows[i]["lo"] for i in have],
                    [scale * rows[i]["hi"] for i in have], "runs' mean, 95% t interval")
        alone = [i for i, r in enumerate(rows) if r["lo"] is None and r["mean"] is not None]
        if alone:
            ax.plot([xs[i] for i in alone], [mean[i] for i in alone], "o", color="#333333", label="one run")
        nulls = sum(r.get("nulls") or 0 for r in rows)
        if nulls:
            ax.plot([], [], " ", label=f"{nulls} run(s) without a value")
        for x, r in zip(xs, rows, strict=True):
            if r["mean"] is not None:
                ax.annotate(show(r["mean"]), (x, scale * r["mean"]), textcoords="offset points", xytext=(6, 4),
                            fontsize=7)
        title = f"{column.label[0].upper()}{column.label[1:]}\nvs {name}" + (
            f"; {pooled_note(rows)}" if rows and rows[0].get("pooled_over") is not None and name != "(all runs)" else "")
        _label_axes(ax, xs, labels, name, numeric, f"{column.label} ({unit})" if unit else column.label, title)
    fig.tight_layout()
    return fig


def _unit_scale(unit: str, largest: float) -> tuple[float, str]:
    """The factor and unit a column is drawn in: fractions in %, ms from 10 s on in s, µs from 10 ms
    on in ms; else as stored."""
    if unit == "fraction":
        return 100.0, "%"
    if unit == "ms" and largest >= 10_000:
        return 0.001, "s"
    if unit == "µs" and largest >= 10_000:
        return 0.001, "ms"
    return 1.0, unit


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
            show: Any, pooled_over: list[str], note: str = "") -> Figure:
    """A value per (row, column) pair of two axes, each cell annotated with `show(cell)` (a value
    with its interval, which `note` names); the colour scale starts at 0 for rates and is never
    drawn for a metric that is zero everywhere (the report lists those instead). A zip axis's
    values keep the file's order (`row_rank`, `col_rank`)."""
    rows = _ordered(cells, "row")
    cols = _ordered(cells, "col")
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
                 f"({per} runs per cell){'; ' + note if note else ''}", fontsize=10)
    fig.tight_layout()
    return fig


def _ordered(cells: list[dict[str, Any]], side: str) -> list[Any]:
    """A heatmap side's values: by rank (a zip axis: the file's order), else sorted."""
    ranks: dict[Any, int] = {}
    for c in cells:
        rank = c.get(f"{side}_rank")
        if rank is None:
            return sorted({c[side] for c in cells}, key=_sort_key)
        ranks[c[side]] = min(ranks.get(c[side], rank), rank)
    return sorted(ranks, key=lambda value: ranks[value])


def _bar_width(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.6 if not xs or xs[0] == 0 else abs(xs[0]) * 0.3
    gaps = [b - a for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False) if b > a]
    return 0.5 * min(gaps) if gaps else 0.6


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


def latency_vs_params(marginals: dict[str, list[dict[str, Any]]]) -> Figure:
    """One panel per axis: p50, p99 and p99.9 of the merged histograms of each value's runs (every
    other axis pooled), and each run's own p99 as a point beside them."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.3), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _row_positions(rows)
        for q, color in (("p50", "#1b9e77"), ("p99", "#d95f02"), ("p99.9", "#7570b3")):
            ys = [r["latency_ms"].get(q) for r in rows]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], "o-" if numeric else "o",
                    color=color, label=q)
        width = _bar_width(xs)
        _strip(ax, [x - 0.2 * width for x in xs], [r.get("p99_runs") or [] for r in rows], 0.25 * width,
               "each run's p99", color="#d95f02")
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
