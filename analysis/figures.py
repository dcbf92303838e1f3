"""The report's matplotlib figures; each function takes aggregates and returns a Figure.

Titles are the figure's identity in the HTML page (the report test looks for them).
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

CAUSE_COLORS = {"producer_retry": "#d95f02", "redelivery": "#7570b3"}
FAULT_COLORS = {"process_crash": "#e41a1c", "power_loss": "#000000", "partition": "#377eb8",
                "link_latency": "#4daf4a", "packet_loss": "#984ea3", "disk_slow": "#ff7f00",
                "fsync_stall": "#a65628", "pause": "#f781bf"}


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


def duplicates_vs_params(marginals: dict[str, list[dict[str, Any]]]) -> Figure:
    """One panel per swept parameter: duplicate rate by cause (stacked) and total with its 95 %
    score interval, every other parameter pooled (said in the title). A band joins numeric x
    values only; categorical x values get points with error bars."""
    names = list(marginals)
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        rows = marginals[name]
        xs, labels, numeric = _positions([r["value"] for r in rows])
        width = _bar_width(xs)
        bottom = [0.0] * len(rows)
        for cause, color in CAUSE_COLORS.items():
            heights = [r[f"dup_rate_{cause}"]["mean"] or 0.0 for r in rows]
            ax.bar(xs, heights, width=width, bottom=bottom, color=color, alpha=0.55, label=f"cause: {cause}")
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        mean = [r["duplicate_rate"]["mean"] or 0.0 for r in rows]
        lo = [r["duplicate_rate"]["lo"] or 0.0 for r in rows]
        hi = [r["duplicate_rate"]["hi"] or 0.0 for r in rows]
        if numeric:
            ax.plot(xs, mean, "o-", color="#1b9e77", label="total (pooled)")
            ax.fill_between(xs, lo, hi, color="#1b9e77", alpha=0.2, label="95% score interval")
        else:  # no line or band between categories
            ax.errorbar(xs, mean, yerr=[[m - a for m, a in zip(mean, lo, strict=True)],
                                        [b - m for m, b in zip(mean, hi, strict=True)]],
                        fmt="o", color="#1b9e77", capsize=5, label="total (pooled), 95% score interval")
        ax.set_ylim(bottom=0)
        ax.set_xticks(xs, labels)
        ax.set_xlabel(name)
        ax.set_ylabel("duplicates per acked message")
        ax.set_title(f"Duplicate-delivery rate vs {name}\n{pooled_note(rows)}", fontsize=10)
        ax.legend(fontsize=8)
        if not numeric:
            ax.set_xlim(-0.6, len(xs) - 0.4)
    fig.tight_layout()
    return fig


def _bar_width(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.6 if not xs or xs[0] == 0 else abs(xs[0]) * 0.3
    gaps = [b - a for a, b in zip(sorted(xs), sorted(xs)[1:], strict=False) if b > a]
    return 0.5 * min(gaps) if gaps else 0.6


def heatmap(cells: list[tuple[Any, Any, float]], row_param: str, col_param: str, metric: str) -> Figure:
    rows = sorted({r for r, _c, _m in cells}, key=_sort_key)
    cols = sorted({c for _r, c, _m in cells}, key=_sort_key)
    grid = [[float("nan")] * len(cols) for _ in rows]
    for r, c, m in cells:
        grid[rows.index(r)][cols.index(c)] = m if m is not None else float("nan")
    fig, ax = plt.subplots(figsize=(1.6 * len(cols) + 3, 1.0 * len(rows) + 2.2))
    image = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
    fig.colorbar(image, ax=ax, label=metric.replace("_", " "))
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    ax.set_xlabel(col_param)
    ax.set_ylabel(row_param)
    finite = [v for line in grid for v in line if v == v]
    middle = (min(finite) + max(finite)) / 2 if finite else 0.0
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            ax.text(j, i, "-" if value != value else f"{value:.3g}", ha="center", va="center",
                    color="black" if value == value and value > middle else "white", fontsize=9)
    ax.set_title(f"Duplicate-delivery rate heatmap: {row_param} × {col_param}")
    fig.tight_layout()
    return fig


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, int | float) else (1, 0, str(value))


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


def loss_per_point(stats: list[dict[str, Any]], labels: dict[int, str]) -> Figure:
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(stats) + 3), 4.5))
    xs = list(range(len(stats)))
    means = [s["loss_rate"]["mean"] or 0.0 for s in stats]
    err_lo = [m - (s["loss_rate"]["lo"] or 0.0) for m, s in zip(means, stats, strict=True)]
    err_hi = [(s["loss_rate"]["hi"] or 0.0) - m for m, s in zip(means, stats, strict=True)]
    ax.bar(xs, means, color="#e7298a", alpha=0.7)
    ax.errorbar(xs, means, yerr=[err_lo, err_hi], fmt="none", ecolor="#333333", capsize=4)
    for x, s in zip(xs, stats, strict=True):
        lost = s["loss_rate"].get("events")
        ax.text(x, 0, f"{lost:,}" if lost is not None else "-", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.set_xticks(xs, [labels[s["point"]] for s in stats], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("lost / acked deliveries (pooled, 95% Wilson)")
    ax.set_title("Message loss per point (bar labels: lost messages, all seeds)")
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
