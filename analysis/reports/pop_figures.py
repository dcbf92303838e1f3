"""The per-run report's POP panel (matplotlib), from analysis/reports/pop_data.py: per POP consumer
group, what it popped, acked and had revived per second, and how long its listeners held a message
against the invisible time. Like analysis/reports/run_figures.py, `pop_panel` takes a RunData and
returns `(Figure, caption)`, or None for a run without a POP group (the page then lists it under
"Not drawn"). Time axes carry the fault windows and the warm-up like every other time figure.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.reports import pop_data as pd
from analysis.reports import run_data as rd
from analysis.reports.run_figures import MARKERS, fault_bands
from analysis.reports.timeline_figures import shade

MAX_GROUPS = 4  # POP groups drawn
STEADY = ("popped", "acked")  # drawn as lines; the other series as markers where not zero
NO_POP = "no POP consumer group in this run (no consumer entry with `pop:`)"
SERIES = (("popped", "popped (pop.received)", "#7570b3", "-"), ("acked", "acked in time", "#1b9e77", "-"),
          ("revived", "revived: invisible time passed without an ack", "#d95f02", "--"),
          ("late", "listener ended after the invisible time (ack refused)", "#e41a1c", ":"),
          ("ack_failed", "ack failed", "#a65628", ":"),
          ("redelivered", "redelivered in place (orderly POP)", "#e7298a", "--"),
          ("duplicates", "duplicate deliveries", "#000000", "-."))


def pop_panel(data: rd.RunData) -> tuple[Figure, str] | None:
    groups = pd.pop_data(data)
    if not groups:
        return None
    shown = list(groups)[:MAX_GROUPS]
    rows = 0
    fig, axes = plt.subplots(2 * len(shown), 1, sharex=True, figsize=(11, 5.6 * len(shown) + 0.6), squeeze=False)
    for k, name in enumerate(shown):
        counts, held = axes[2 * k, 0], axes[2 * k + 1, 0]
        if k == 0:
            rows = fault_bands(counts, data)
        else:
            shade(counts, data)
        shade(held, data)
        _counts(counts, groups[name])
        _held(held, groups[name])
        counts.set_title(f"POP group {name}: messages per second", fontsize=10, pad=8 + 11 * rows if k == 0 else 6)
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.tight_layout()
    return fig, _caption(groups, shown)


def _counts(ax: Axes, g: pd.PopGroup) -> None:
    totals = g.totals()
    for i, (key, label, color, style) in enumerate(SERIES):
        values = getattr(g, key)
        if not totals[key] and key not in ("popped", "acked", "revived"):
            continue
        x = np.arange(len(values)) + 0.5
        if key in STEADY:  # lines (popped a wide band under acked); the rare events as markers where they happened
            wide = key == "popped"
            ax.plot(x, values, color=color, ls=style, lw=3.2 if wide else 1.1, alpha=0.45 if wide else 1.0,
                    label=f"{label} ({totals[key]:,})")
        else:
            some = values > 0
            ax.plot(x[some], values[some], color=color, ls="none", marker=MARKERS[i % len(MARKERS)], markersize=4,
                    label=f"{label} ({totals[key]:,})")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("messages per second\n(linear to 1, then log)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)


def _held(ax: Axes, g: pd.PopGroup) -> None:
    x = np.arange(len(g.held_max_s)) + 0.5
    ax.plot(x, g.held_max_s, color="#d95f02", lw=1.2, marker="^", markersize=2.5, label="max, per second")
    ax.plot(x, g.held_p50_s, color="#7570b3", lw=1.0, marker="o", markersize=2, label="median, per second")
    for j, invisible in enumerate(g.invisible_s):
        ax.axhline(invisible, color="#e41a1c", ls="--", lw=1.2,
                   label="invisible time: later, the message is revived and delivered again" if j == 0 else None)
        ax.annotate(f"invisible time {invisible:g} s", xy=(0.0, invisible), xycoords=("axes fraction", "data"),
                    xytext=(3, 2), textcoords="offset points", fontsize=7, color="#e41a1c")
    top = np.nanmax(g.held_max_s) if np.isfinite(g.held_max_s).any() else 0.0
    ax.set_ylim(0, max([top, *g.invisible_s, 1.0]) * 1.12)
    ax.set_ylabel("pop → listener end (s)", fontsize=8)
    ax.set_title("How long each listener call held its message, against the invisible time", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)


def _caption(groups: dict[str, pd.PopGroup], shown: list[str]) -> str:
    parts = []
    for name in shown:
        t = groups[name].totals()
        parts.append(f"{name}: {t['popped']:,} popped, {t['acked']:,} acked in time, {t['revived']:,} revived, "
                     f"{t['late']:,} listener calls past the invisible time, {t['duplicates']:,} duplicates")
    if any(not groups[n].received_recorded for n in shown):
        parts.append("pop.received is not in this trace (a detail kind an older rmqsim did not write): pops and "
                     "the held time are not drawn")
    if len(groups) > len(shown):
        parts.append(f"{len(groups) - len(shown)} more POP groups not drawn")
    return ("How many messages did each POP group pop, ack and get back from the revive service, and how close did "
            f"its listeners come to the invisible time? ({'; '.join(parts)})")


# (stem, title, function, why not drawn): analysis/reports/run_report.py places it after the duplicates
FIGURES = (("pop", "POP consumption: pops, acks, revives, invisible time", pop_panel, NO_POP),)
