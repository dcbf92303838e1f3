"""The per-run report's cluster timeline (matplotlib), from analysis/reports/timeline_data.py: queue
ownership per consumer with the brokers' registrations and outages, each queue's offsets, and
failed sends beside the publish latency. Like analysis/reports/run_figures.py, each function takes a
RunData and returns `(Figure, caption)` or None when the trace lacks what it needs (the page
then lists it under "Not drawn").

The figures follow each broker group and its current master (timeline_data.py `masters`), not a
node: a queue is unavailable (hatched) while its group has no live master, each broker's row shows
when it was its group's master, and every election and later role change is a labelled vertical
line (`mark_roles`). Outages are never drawn as a line through them: every series is NaN (a gap) in
a bin that overlaps a span without a live master, a down node is a hatched bar, and the fault
windows are shaded as in the other figures. Consumers keep one colour in every figure. Up to `MAX_QUEUE_ROWS` queues get
a row each (ownership) and up to `MAX_QUEUE_PANELS` a panel each (offsets); beyond that the
figures aggregate (queues held per consumer over time; a heatmap of each queue's backlog) so
that hundreds of queues stay legible.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.reports import run_data as rd
from analysis.reports import timeline_data as td
from analysis.reports.figures import FAULT_COLORS
from analysis.reports.run_figures import MARKERS, fault_bands

MAX_QUEUE_ROWS = 48  # ownership: one row per queue up to this many, else queues held per consumer
MAX_QUEUE_PANELS = 16  # offsets: one panel per queue up to this many, else a backlog heatmap
DOWN = "#e41a1c"
MASTER_COLOR = "#1f4e79"
NO_MASTER = "no live master in its broker group: unwritable"
LOCK_STYLE = {"new": ("^", "#000000", 6, "lock granted (new)"), "expired": ("D", "#ff7f00", 5, "lock taken over (expired)"),
              "renewed": ("|", "#777777", 6, "lock renewed"), "refused": ("x", DOWN, 6, "lock refused")}
REASON_COLORS = ("#e41a1c", "#ff7f00", "#984ea3", "#377eb8", "#a65628", "#f781bf", "#999999", "#4daf4a")


def consumer_colors(consumers: list[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10" if len(consumers) <= 10 else "tab20")
    return {c: cmap(i % cmap.N) for i, c in enumerate(consumers)}


def shade(ax: Axes, data: rd.RunData) -> None:
    """The fault windows and warm-up of `fault_bands`, without labels (a panel under a labelled one)."""
    ax.set_xlim(0.0, max(data.end_s, 1.0))
    if data.warmup_ms:
        ax.axvspan(0, data.warmup_ms / 1000, facecolor="none", edgecolor="#999999", hatch="///", lw=0)
    for w in data.windows:
        ax.axvspan(w["start_ms"] / 1000, max(w["end_ms"], w["start_ms"] + 50) / 1000,
                   color=FAULT_COLORS.get(w["kind"], "#999999"), alpha=0.18, lw=0)


def _title_rows(ax: Axes, data: rd.RunData, title: str) -> None:
    rows = fault_bands(ax, data)
    ax.set_title(title, pad=8 + 11 * rows, fontsize=11)


def _rebalance_times(own: td.Ownership) -> list[float]:
    """Distinct rebalance rounds (members of a group rebalance within a second of each other)."""
    out: list[float] = []
    for t in sorted(t for t, _g, _c in own.rebalances):
        if not out or t - out[-1] > 1.0:
            out.append(t)
    return out


MARK_STYLE = {td.ELECTION: ("#6a3d9a", "-.", "election (controller: a new master for the group)"),
              td.ROLE: ("#b15928", ":", "broker role change (broker.role)")}
MAX_MARK_LABELS = 24  # more marks than this: lines without their text
MARK_CLUSTER = 0.02  # marks closer than this share of the time axis share one label (texts side by side)
MAX_MARKS_LISTED = 6  # in a caption


def mark_roles(ax: Axes, marks: list[td.Mark], end_s: float, labelled: bool = True) -> None:
    """A vertical line per election and role change, one legend entry per kind; with `labelled`, each
    mark's `short` text rotated inside the axes' top (marks closer than MARK_CLUSTER of the axis side
    by side in one label)."""
    seen: set[str] = set()
    for m in marks:
        color, style, legend = MARK_STYLE[m.kind]
        ax.axvline(m.t_s, color=color, ls=style, lw=1.1, zorder=4, label=None if m.kind in seen else legend)
        seen.add(m.kind)
    if not labelled or len(marks) > MAX_MARK_LABELS:
        return
    for cluster in _clusters(marks, MARK_CLUSTER * max(end_s, 1.0)):
        ax.annotate("\n".join(m.short for m in cluster), xy=(cluster[0].t_s, 0.97), xycoords=("data", "axes fraction"),
                    xytext=(-2, 0), textcoords="offset points", rotation=90, ha="right", va="top", fontsize=6.5,
                    color=MARK_STYLE[cluster[0].kind][0], zorder=5, annotation_clip=False,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.75})


def _clusters(marks: list[td.Mark], gap_s: float) -> list[list[td.Mark]]:
    out: list[list[td.Mark]] = []
    for m in sorted(marks, key=lambda m: m.t_s):
        if out and m.t_s - out[-1][-1].t_s < gap_s:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def marks_note(marks: list[td.Mark]) -> str:
    """`; marked: election at 32 s: broker-a-s1 master of broker-a (epoch 2); ...` (empty without marks)."""
    if not marks:
        return ""
    listed = "; ".join(f"{m.text} at {m.t_s:.3f} s" for m in marks[:MAX_MARKS_LISTED])
    more = f"; and {len(marks) - MAX_MARKS_LISTED} more" if len(marks) > MAX_MARKS_LISTED else ""
    return f"; marked: {listed}{more}"


# ------------------------------------------------------------------------------ queue ownership

def queue_ownership(data: rd.RunData) -> tuple[Figure, str] | None:
    own = td.ownership(data)
    if own is None:
        return None
    events = td.broker_events(data)
    down = td.outages(data)
    who = td.masters(data)
    colors = consumer_colors(own.consumers)
    aggregated = len(own.queues) > MAX_QUEUE_ROWS
    top = 0.45 * max(len(events), 1) + 0.9
    bottom = 3.4 if aggregated else 0.26 * len(own.queues) + 1.1
    fig, (ax_b, ax_q) = plt.subplots(2, 1, sharex=True, figsize=(12, top + bottom + 0.8),
                                     gridspec_kw={"height_ratios": [top, bottom]})
    _brokers_panel(ax_b, data, events, down, colors, who)
    mark_roles(ax_b, who.drawn(), data.end_s)
    _title_rows(ax_b, data, "Brokers: masters, registrations with the name server (its heartbeat), clients, "
                "outages")
    shade(ax_q, data)
    if aggregated:
        _held_counts(ax_q, data, own, colors)
    else:
        _ownership_rows(ax_q, own, who.unavailable, colors)
    marks = _rebalance_times(own)
    for j, t in enumerate(marks):
        ax_q.axvline(t, color="#555555", lw=0.7, ls=":", label="rebalance that moved queues" if j == 0 else None)
    mark_roles(ax_q, who.drawn(), data.end_s, labelled=False)
    ax_q.set_xlabel("simulated time (s)")
    handles, labels = ax_q.get_legend_handles_labels()
    if not aggregated:
        handles = [Patch(color=colors[c], label=c) for c in own.consumers[:20]] + handles
        labels = [h.get_label() for h in handles]
    ax_q.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    fig.tight_layout()
    groups = sorted({q.group for q in own.queues})
    orderly = any(own.locks[q] for q in own.queues)
    what = (f"{len(own.queues)} queues of {', '.join(groups)} (retry topics left out)"
            + (", aggregated to the queues each consumer held" if aggregated else "")
            + (f"; {len(marks)} rebalance round(s) moved queues" if marks else ""))
    return fig, ("Which consumer held which queue when, when did rebalances move them"
                 + (" and the brokers grant their locks" if orderly else "")
                 + ", and when were brokers down or dropped from the name server? "
                 f"({what}; a dark bar: the node that was its broker group's master; a hatched bar is a node that was "
                 f"down, or over a queue a span its broker group had no live master{marks_note(who.drawn())})")


def _brokers_panel(ax: Axes, data: rd.RunData, events: dict[str, dict[str, Any]], down: dict[str, list],
                   colors: dict[str, Any], who: td.Masters) -> None:
    names = list(events)
    seen: set[str] = set()
    shown: set[str] = set()
    order = {c: i for i, c in enumerate(colors)}

    def label(text: str) -> str | None:
        if text in seen:
            return None
        seen.add(text)
        return text
    end = max(data.end_s, 1.0)
    for i, node in enumerate(names):
        spans = down.get(node, [])
        up, last = [], 0.0
        for start, stop in spans:
            if start > last:
                up.append((last, start - last))
            last = stop
        if last < end:
            up.append((last, end - last))
        ax.broken_barh(up, (i - 0.05, 0.1), facecolors="#bbbbbb", label=label("up"))
        mastered = [(a, b - a) for spans in who.spans.values() for a, b, n in spans if n == node]
        if mastered:
            ax.broken_barh(mastered, (i - 0.11, 0.22), facecolors=MASTER_COLOR, zorder=2,
                           label=label("master of its broker group" + (" (broker.role)" if who.controller
                                                                        else " (configured)")))
        if spans:
            ax.broken_barh([(s, e - s) for s, e in spans], (i - 0.35, 0.7), facecolors="none", edgecolors=DOWN,
                           hatch="xxx", lw=0.8, label=label("down (crashed, paused, shut down)"))
        ev = events[node]
        if ev["registered"]:
            ax.plot(ev["registered"], [i] * len(ev["registered"]), "|", ms=14, mew=1.6, color="#1b9e77",
                    label=label("registered with the name server"))
        if ev["unregistered"]:
            ax.plot([t for t, _r in ev["unregistered"]], [i] * len(ev["unregistered"]), "X", ms=8, color=DOWN,
                    label=label("dropped by the name server"))
        for key, marker in (("client_registered", "o"), ("client_unregistered", "v")):
            by_client: dict[str, list[float]] = {}
            for t, client in ev[key]:
                by_client.setdefault(client, []).append(t)
            for client, times in by_client.items():  # one little row per client, in its colour
                k = order.get(client, 0) % 4
                ax.plot(times, [i + 0.16 + 0.07 * k] * len(times), marker, ms=4, color=colors.get(client, "#555555"),
                        mfc="none" if key == "client_unregistered" else None, ls="none")
                shown.add(key)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.invert_yaxis()
    handles, labels = ax.get_legend_handles_labels()
    for key, marker, text in (("client_registered", "o", "consumer registered (its heartbeat; its colour)"),
                              ("client_unregistered", "v", "consumer left the broker")):
        if key in shown:
            handles.append(Line2D([], [], marker=marker, color="#555555", ls="none", ms=4,
                                  mfc="none" if key == "client_unregistered" else None))
            labels.append(text)
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)


def _ownership_rows(ax: Axes, own: td.Ownership, unavailable: dict[str, list], colors: dict[str, Any]) -> None:
    """A row per queue: its holders' bars, hatched where its broker group had no live master
    (`unavailable`, analysis/reports/timeline_data.py `masters`), the orderly lock events."""
    groups = {q.group for q in own.queues}
    seen: set[str] = set()
    boxes: dict[str, list[list[tuple[float, float]]]] = {}  # consumer → rectangles (one artist each)
    for y, q in enumerate(own.queues):
        lanes = _lanes(own.held[q])
        n = max(lanes, default=0) + 1
        for (consumer, start, end, _offset), lane in zip(own.held[q], lanes, strict=True):
            y0, y1, x1 = y - 0.38 + 0.76 * lane / n, y - 0.38 + 0.76 * (lane + 1) / n, max(end, start + 0.05)
            boxes.setdefault(consumer, []).append([(start, y0), (x1, y0), (x1, y1), (start, y1)])
        if n > 1:
            text = "split row: consumers holding one queue at once"
            ax.plot([], [], " ", label=None if text in seen else text)
            seen.add(text)
        spans = unavailable.get(q.broker, [])
        if spans:
            text = NO_MASTER
            ax.broken_barh([(s, e - s) for s, e in spans], (y - 0.45, 0.9), facecolors="white", edgecolors=DOWN,
                           hatch="xxx", lw=0.6, label=None if text in seen else text)
            seen.add(text)
        by_how: dict[str, list[float]] = {}
        for t, how in own.locks[q]:
            by_how.setdefault(how, []).append(t)
        for how, times in by_how.items():
            marker, color, size, text = LOCK_STYLE.get(how, ("*", "#000000", 6, f"lock {how}"))
            ax.plot(times, [y] * len(times), marker, color=color, ms=size, ls="none",
                    label=None if text in seen else text)
            seen.add(text)
    for consumer, rects in boxes.items():
        ax.add_collection(PolyCollection(rects, facecolors=[colors[consumer]], edgecolors="none", zorder=1))
    labels = [q.label if len(groups) == 1 else f"{q.group}: {q.label}" for q in own.queues]
    ax.set_yticks(range(len(own.queues)), labels, fontsize=7 if len(own.queues) > 24 else 8)
    ax.set_ylim(len(own.queues) - 0.4, -0.6)
    ax.set_ylabel("queue")
    ax.set_title("Queue ownership per consumer" + (" and broker locks" if any(own.locks.values()) else ""),
                 fontsize=10)


def _lanes(held: list[tuple[str, float, float, int]]) -> list[int]:
    """A lane per holding so that holdings that overlap in time (two consumers holding one queue at
    once) sit side by side in the queue's row instead of one hiding the other."""
    ends: list[float] = []  # the end of the last holding in each lane
    out = []
    for _consumer, start, end, _offset in held:  # in start order
        lane = next((i for i, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        out.append(lane)
    return out


def _held_counts(ax: Axes, data: rd.RunData, own: td.Ownership, colors: dict[str, Any]) -> None:
    """Queues held per consumer, stacked (each consumer a band of its colour), and the queues held by
    nobody on top in grey: the bands add up to the queues unless two consumers held one at once."""
    width, x = td.bins(data)
    mid = x - width / 2
    counts, unowned = td.owned_counts(own, mid)
    layers = [counts[c] for c in own.consumers] + [unowned]
    labels = [c if i < 20 else None for i, c in enumerate(own.consumers)] + ["held by nobody"]
    ax.stackplot(mid, *layers, colors=[colors[c] for c in own.consumers] + ["#d9d9d9"], labels=labels, step="mid",
                 lw=0)
    ax.axhline(len(own.queues), color="#000000", lw=0.8, ls="--", label=f"all {len(own.queues)} queues")
    ax.set_ylim(0, len(own.queues) * 1.08)
    ax.set_ylabel("queues held")
    ax.set_title(f"Queues held per consumer, stacked ({len(own.queues)} queues: too many for a row each)",
                 fontsize=10)


# ------------------------------------------------------------------------------ offsets

def offsets(data: rd.RunData) -> tuple[Figure, str] | None:
    off = td.queue_offsets(data)
    if off is None:
        return None
    colors = consumer_colors(off.consumers)
    if len(off.queues) > MAX_QUEUE_PANELS:
        fig = _offset_heatmaps(data, off)
        drawn = ("each queue's backlog, the max offset minus the owner's consumed offset"
                 + ("" if off.committed is None else ", and what the owner consumed beyond the broker's committed "
                    "offset") + f", {len(off.queues)} queues (too many for a panel each)")
    else:
        fig = _offset_panels(data, off, colors)
        drawn = ("per queue: the max offset (newest stored + 1), "
                 + ("" if off.committed is None else "the master's committed offset, ")
                 + "and each owner's consumed offset (highest consumed + 1, from where it started)")
    missing = ("" if off.committed is not None else "; the broker's committed offset is not in this trace (no "
               "broker.offset_committed records: a detail kind an older rmqsim did not write), so it is not drawn")
    width = "1 s" if off.bin_s == 1 else f"{off.bin_s:g} s"
    who = td.masters(data)
    follows = "; the max offset and the committed offset are the broker group's current master's" \
        if any(m.kind == td.ELECTION for m in who.drawn()) else ""
    return fig, ("Did each queue's owner keep up with what was stored, and how far behind was the broker's "
                 f"committed offset — before, during and after each outage? ({drawn}; at the end of each {width}; a "
                 f"gap is an outage of the queue's broker (its group without a live master){follows}{missing}"
                 f"{marks_note(who.drawn())})")


def _offset_panels(data: rd.RunData, off: td.Offsets, colors: dict[str, Any]) -> Figure:
    n = len(off.queues)
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(12, 2.1 * nrows + 1.3), sharex=True, squeeze=False)
    groups = {q.group for q in off.queues}
    marks = td.masters(data).drawn()
    for i, q in enumerate(off.queues):
        ax = axes[i // ncols][i % ncols]
        shade(ax, data)
        for consumer, series in off.consumed.get(q, {}).items():  # wide bands under the thin lines
            ax.plot(off.x, series, color=colors[consumer], lw=3.2, alpha=0.55, label=f"consumed by {consumer}")
        ax.plot(off.x, off.max_offset[q], color="#000000", lw=1.0, label="max offset (stored)")
        if off.committed is not None:
            ax.plot(off.x, off.committed[q], color="#e7298a", lw=1.2, ls="--", label="broker's committed offset")
        ax.set_title(q.label if len(groups) == 1 else f"{q.group}: {q.label}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        mark_roles(ax, [m for m in marks if m.group == q.broker], data.end_s, labelled=i == 0)
        if i % ncols == 0:
            ax.set_ylabel("queue offset", fontsize=8)
        if i // ncols == nrows - 1 or i + ncols >= n:
            ax.set_xlabel("simulated time (s)", fontsize=8)
            ax.tick_params(labelbottom=True)
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    first = ("max offset (stored)", "broker's committed offset", *(style[2] for style in MARK_STYLE.values()))
    handles = {k: handles[k] for k in sorted(handles, key=lambda k: (k not in first, first.index(k) if k in first
                                                                      else 0, td.natural(k)))}
    height = fig.get_size_inches()[1]
    fig.suptitle("Queue offsets: max offset, the broker's committed offset, each owner's consumed offset", fontsize=12,
                 y=1 - 0.12 / height)
    fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 1 - 0.42 / height),
               ncol=min(6, len(handles)), fontsize=8, frameon=False)
    # fixed margins in inches (tight_layout costs a second on 16 panels)
    fig.subplots_adjust(left=0.07, right=0.99, top=1 - 1.05 / height, bottom=0.6 / height, hspace=0.5, wspace=0.22)
    return fig


def _offset_heatmaps(data: rd.RunData, off: td.Offsets) -> Figure:
    rows = off.queues
    backlog = np.full((len(rows), len(off.x)), np.nan)
    ahead = np.full((len(rows), len(off.x)), np.nan)
    for i, q in enumerate(rows):
        per = list(off.consumed.get(q, {}).values())
        consumed = np.fmax.reduce(per) if per else np.full(len(off.x), np.nan)
        backlog[i] = off.max_offset[q] - consumed
        if off.committed is not None:
            ahead[i] = consumed - off.committed[q]
    panels = [("backlog: max offset − owner's consumed offset (messages)", backlog)]
    if off.committed is not None:
        panels.append(("consumed, not yet committed on the broker (redelivered if the owner or the broker failed "
                       "then): consumed − committed offset (messages)", ahead))
    height = min(4.2, 1.0 + 0.012 * len(rows)) + 0.5
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, height * len(panels) + 0.6), sharex=True, squeeze=False)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#e8e8e8")
    brokers = [q.broker for q in rows]
    starts = [i for i, b in enumerate(brokers) if i == 0 or brokers[i - 1] != b]
    for ax, (title, values) in zip(axes[:, 0], panels, strict=True):
        masked = np.ma.masked_invalid(values)
        top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
        image = ax.imshow(masked, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0, vmax=max(top, 1.0),
                          extent=(float(off.x[0] - off.bin_s), float(off.x[-1]), len(rows) - 0.5, -0.5))
        ax.set_yticks(starts, [brokers[i] for i in starts], fontsize=8)
        for s in starts[1:]:
            ax.axhline(s - 0.5, color="white", lw=0.8)
        ax.set_ylabel(f"queue ({len(rows)})")
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, pad=0.01)
    axes[0, 0].set_xlim(0.0, max(data.end_s, 1.0))
    for j, ax in enumerate(axes[:, 0]):
        mark_roles(ax, td.masters(data).drawn(), data.end_s, labelled=j == 0)
    axes[-1, 0].set_xlabel("simulated time (s); grey: no value (an outage of the queue's broker, or no owner)")
    fig.suptitle("Queue offsets, all queues", fontsize=12)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------ send failures

def send_failures(data: rd.RunData) -> tuple[Figure, str] | None:
    reasons = td.send_failures(data)
    if reasons is None:
        return None
    fig, (ax_l, ax_f) = plt.subplots(2, 1, sharex=True, figsize=(11, 6.4), gridspec_kw={"height_ratios": [1, 1]})
    latency_lines(ax_l, data)
    ax_l.set_ylabel("send latency p99 (ms)")
    _title_rows(ax_l, data, "Publish latency p99 per broker, and failed sends per second by reason")
    ax_l.legend(fontsize=8, loc="upper right")
    shade(ax_f, data)
    total = 0
    bottom = np.zeros(max(len(v) for v in reasons.values()))
    for i, (reason, per_second) in enumerate(reasons.items()):  # stacked steps, one artist per reason
        top = bottom.copy()
        top[:len(per_second)] += per_second
        ax_f.stairs(top, np.arange(len(top) + 1), baseline=bottom, fill=True,
                    color=REASON_COLORS[i % len(REASON_COLORS)], label=f"{reason} ({int(per_second.sum()):,})")
        bottom = top
        total += int(per_second.sum())
    ax_f.set_ylim(0, max(1.0, float(bottom.max())) * 1.1)
    ax_f.set_ylabel("failed sends per second")
    ax_f.set_xlabel("simulated time (s)")
    ax_f.legend(fontsize=8, loc="upper right", title="reason", title_fontsize=8)
    fig.tight_layout()
    return fig, (f"When did sends fail, why, and what did the sends that succeeded cost meanwhile? ({total:,} failed "
                 "sends by reason, per second of the failure; p99 per broker per second of send time, a gap where a "
                 "broker completed no send)")


def latency_lines(ax: Axes, data: rd.RunData) -> bool:
    """The p99 send latency per broker per second (a gap where a broker completed no send) and the
    p50 over all brokers, on a log axis; False if no send was measured."""
    x, per, p50 = td.latency_p99_by_broker(data)
    if not per:
        return False
    ax.plot(x, p50, color="#555555", ls="--", lw=1, label="p50, all brokers")
    for i, (broker, p99) in enumerate(per.items()):
        ax.plot(x, p99, marker=MARKERS[i % len(MARKERS)], markersize=3, label=f"p99, sends to {broker}")
    ax.set_yscale("log")
    return True


# (stem, title, function, what a missing figure means): after analysis/reports/run_figures.py's, page order
FIGURES = (
    ("queue_ownership", "Cluster timeline: queue ownership, brokers", queue_ownership,
     "no consumer took a queue in this run (no consumer.queue_started records; a POP group owns no queue)"),
    ("offsets", "Queue offsets: stored, committed, consumed", offsets,
     "no message of a subscribed topic was stored in this run"),
    ("send_failures", "Failed sends by reason, beside the publish latency", send_failures,
     "no send failed in this run (no producer.send_failed records)"),
)
