"""The per-run report's availability figure (`availability.png`), from
analysis/reports/availability_data.py: for each topic the sends per second by outcome with the write
outage clients saw shaded and labelled, and for each consumption unit its lag with the time it was
back marked — the SRE's first two questions ("how long can't I write, how long until consumers are
caught up"), with the elections and role changes of analysis/reports/timeline_data.py `masters`
marked on every panel and the fault windows shaded as in every time figure.

Like analysis/reports/run_figures.py, `availability` takes a RunData and returns `(Figure, caption)`,
or None when nothing was sent and no group consumed (the page then lists it under "Not drawn").
Up to MAX_PANELS topics and as many units get a panel each; the caption says how many more there were.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.reports import availability_data as ad
from analysis.reports import fmt
from analysis.reports import run_data as rd
from analysis.reports import timeline_data as td
from analysis.reports.run_figures import fault_bands
from analysis.reports.timeline_figures import mark_roles, marks_note, shade

MAX_PANELS = 8  # topics, and units, drawn (each)
OK_COLOR, FAILED_COLOR, NOT_OK_COLOR, OUTAGE_COLOR = "#1b9e77", "#e41a1c", "#ff7f00", "#e41a1c"
LAG_COLOR, BACK_COLOR, NEVER_COLOR = "#377eb8", "#1b9e77", "#b2182b"
NO_SECTION = ("the summary has no `availability` section (summarised before it existed), so no write outage is "
              "shaded and no recovery time marked")


def availability(data: rd.RunData) -> tuple[Figure, str] | None:
    av = ad.availability(data)
    if av is None:
        return None
    topics, units = list(av.topics)[:MAX_PANELS], list(av.groups)[:MAX_PANELS]
    n = len(topics) + len(units)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(11, 2.1 * n + 1.0), squeeze=False)
    marks = td.masters(data).drawn()
    for i, ax in enumerate(axes[:, 0]):
        if i == 0:
            rows = fault_bands(ax, data)
        else:
            shade(ax, data)
        if i < len(topics):
            _topic_panel(ax, data, topics[i], av.topics[topics[i]])
        else:
            _lag_panel(ax, data, units[i - len(topics)], av.groups[units[i - len(topics)]])
        mark_roles(ax, marks, data.end_s, labelled=i == 0)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    axes[0, 0].set_title(axes[0, 0].get_title(), pad=8 + 11 * rows, fontsize=10)
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.suptitle("Availability: sends per topic with the write outage, lag per group with the recovery",
                 fontsize=12)
    fig.tight_layout()
    return fig, _caption(data, av, topics, units, marks)


def _topic_panel(ax: Axes, data: rd.RunData, topic: str, sends: ad.TopicSends) -> None:
    edges = np.arange(len(sends.ok) + 1)
    ax.stairs(sends.ok, edges, fill=True, color=OK_COLOR, alpha=0.3, lw=0)
    ax.stairs(sends.ok, edges, color=OK_COLOR, lw=1.3, label=f"SEND_OK ({int(sends.ok.sum()):,})")
    failed = int(sends.failed.sum())
    if failed:
        ax.stairs(sends.failed, edges, fill=True, color=FAILED_COLOR, alpha=0.45, label=f"failed sends ({failed:,})")
    not_ok = int(sends.not_ok.sum())
    if not_ok:
        ax.stairs(sends.not_ok, edges, color=NOT_OK_COLOR, lw=1.1, ls="--",
                  label=f"stored, not SEND_OK ({not_ok:,})")
    for j, o in enumerate(sends.outages):
        until = max(o.until_s if o.until_s is not None else data.end_s, o.from_s + 0.05)
        ax.axvspan(o.from_s, until, facecolor="none", edgecolor=OUTAGE_COLOR, hatch="//", lw=0.6, alpha=0.55,
                   label="write outage (as producers saw it)" if j == 0 else None, zorder=1)
        _span_arrow(ax, o.from_s, until, 0.12 + 0.1 * (j % 3), _outage_text(o), NEVER_COLOR)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("sends per second", fontsize=8)
    ax.set_title(f"topic {topic}: sends per second of their outcome", fontsize=10)


def _span_arrow(ax: Axes, start_s: float, end_s: float, height: float, text: str, color: str) -> None:
    """A double arrow from `start_s` to `end_s` at `height` (axes fraction), `text` beside its start."""
    ax.annotate("", xy=(end_s, height), xytext=(start_s, height), xycoords=("data", "axes fraction"),
                arrowprops={"arrowstyle": "<->", "color": color, "lw": 1.1, "shrinkA": 0, "shrinkB": 0}, zorder=6)
    ax.annotate(text, xy=(start_s, height), xycoords=("data", "axes fraction"), xytext=(3, 4),
                textcoords="offset points", fontsize=7.5, color=color, va="bottom", zorder=6,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})


def _outage_text(o: ad.Outage) -> str:
    if o.until_s is None:
        return f"write outage from {o.from_s:.3f} s, not recovered by the end (fault {o.fault}: {o.what})"
    return f"write outage {fmt.duration_ms(o.outage_s * 1000)} (fault {o.fault}: {o.what})"


def _lag_panel(ax: Axes, data: rd.RunData, unit: str, lag: ad.GroupLag) -> None:
    ax.plot(lag.x, lag.lag, color=LAG_COLOR, lw=1.3, marker="o", markersize=2,
            label="lag: stored, not yet consumed" + ("" if lag.from_summary else " (from the trace)"))
    backs = 0
    shown = [r for r in lag.recoveries if r.recovered_s is None or (r.recovery_s or 0) > 0]  # 0: the fault did nothing
    for j, r in enumerate(shown):
        height = 0.6 + 0.1 * (j % 3)
        if r.recovered_s is None:
            _span_arrow(ax, r.start_s, data.end_s, height, f"not recovered from fault {r.fault} ({r.what}) by the "
                        "end", NEVER_COLOR)
            continue
        ax.axvline(r.recovered_s, color=BACK_COLOR, lw=1.4,
                   label="back: lag at its pre-fault level for good" if not backs else None)
        backs += 1
        _span_arrow(ax, r.start_s, r.recovered_s, height, f"recovery {fmt.duration_ms((r.recovery_s or 0) * 1000)}: "
                    f"back at {r.recovered_s:.3f} s (fault {r.fault}: {r.what})", BACK_COLOR)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("messages", fontsize=8)
    ax.set_title(f"group {unit}: lag at each second's end", fontsize=10)


def _caption(data: rd.RunData, av: ad.Availability, topics: list[str], units: list[str],
             marks: list[td.Mark]) -> str:
    parts = ["SEND_OK and failed sends per second of their outcome per topic",
             "each group's lag (stored, not yet consumed) at each second's end"]
    if not av.section:
        parts.append(NO_SECTION)
    elif not av.faults:
        parts.append("no fault in this run: nothing shaded")
    else:
        outages = [o for t in topics for o in av.topics[t].outages]
        never = [r for u in units for r in av.groups[u].recoveries if r.recovered_s is None]
        parts.append(f"hatched: the write outage as producers saw it (first failed send to the first SEND_OK after "
                     f"it; {len(outages)} outage{'s' if len(outages) != 1 else ''}), a green line: the group back at "
                     "its pre-fault lag (a fault it did not feel is not marked)"
                     + (f"; {len(never)} recovery never happened" if never else ""))
    more = [f"{len(av.topics) - len(topics)} more topics" if len(av.topics) > len(topics) else "",
            f"{len(av.groups) - len(units)} more groups" if len(av.groups) > len(units) else ""]
    if any(more):
        parts.append(f"not drawn: {' and '.join(m for m in more if m)}")
    return ("For how long could producers not write to each topic, as they saw it, and how long until each consumer "
            f"group was back? ({'; '.join(parts)}{marks_note(marks)})")


# (stem, title, function, why not drawn): analysis/reports/run_report.py places it after the rates
FIGURES = (
    ("availability", "Availability: write outage per topic, recovery per group", availability,
     "no message was sent and no group consumed in this run"),
)
