"""The data of the per-run report's POP panel (analysis/reports/pop_figures.py): what each POP consumer
group (a consumer entry with `pop:`, models/consumer/pop_consumer.py) popped, acked and had revived,
and how close its listeners came to the invisible time — a POP group owns no queue and commits no
offset, so the queue ownership and offset figures have nothing of it.

Per group, per second, from the trace:

- `popped`: messages received (`pop.received`, a detail kind a traced run writes; each with its
  receipt handle's pop time and invisible time);
- `acked`: successful listener calls that ended within the invisible time (the consumer then sends
  the ack: `consumer.consumed` ok, less `pop.ack_late`); `ack_failed`: acks that failed
  (`pop.ack_failed`: timeout, connect_failed, an error code); `late`: successful listener calls
  that ended after the invisible time (`pop.ack_late`: the ack is refused, the message comes back);
- `revived`: messages the broker's revive service put back into the group's POP retry topic after
  their invisible time passed without an ack (`pop.revived`), and `redelivered` in place by an
  orderly pop (`pop.order_redelivered`);
- `duplicates`: deliveries beyond the first (the summary's `groups[g].duplicates_by_second`, every
  cause summed);
- the held time of each successful or failed listener call: its end minus the pop time of the
  copy it processed (the consumer's latest `pop.received` of that message at or before the call's
  end), per second of the end: the median and the maximum, beside the invisible time(s) handed out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis.reports import run_data as rd
from analysis.reports import timeline_data as td
from models.records import POP_ACK_FAILED, POP_ACK_LATE, POP_ORDER_REDELIVERED, POP_RECEIVED, POP_REVIVED


@dataclass
class PopGroup:
    group: str
    received_recorded: bool  # the trace has `pop.received` (else `popped` and the held time are empty)
    popped: np.ndarray  # per second
    acked: np.ndarray
    ack_failed: np.ndarray
    late: np.ndarray
    revived: np.ndarray
    redelivered: np.ndarray
    duplicates: np.ndarray
    held_p50_s: np.ndarray  # per second of the listener call's end, NaN without one
    held_max_s: np.ndarray
    invisible_s: list[float]  # the invisible times handed out (pop.received), else configured (scenario)

    def totals(self) -> dict[str, int]:
        return {k: int(getattr(self, k).sum()) for k in ("popped", "acked", "ack_failed", "late", "revived",
                                                          "redelivered", "duplicates")}


def pop_groups(data: rd.RunData) -> dict[str, list[float]]:
    """group → the invisible times (s) its consumer entries configure, for groups that consume by POP."""
    out: dict[str, list[float]] = {}
    for c in data.scenario.get("consumers", []):
        pop = c.get("pop")
        if isinstance(pop, dict):
            invisible = pop.get("invisible_duration_ms")
            out.setdefault(c["group"], [])
            if isinstance(invisible, int | float) and not isinstance(invisible, bool):
                out[c["group"]] = sorted(set(out[c["group"]]) | {invisible / 1000})
    return out


@td.cached
def pop_data(data: rd.RunData) -> dict[str, PopGroup]:
    """group → its POP panel data (module docstring), POP groups only, in natural order."""
    groups = pop_groups(data)
    if not groups:
        return {}
    received = td.read_columns(data, POP_RECEIVED, ("t_us", "node", "group", "msg_id", "pop_time_us", "invisible_us"))
    consumed = td.read_columns(data, rd.CONSUMER_CONSUMED, ("t_us", "node", "group", "msg_id", "ok"))
    late = td.read_columns(data, POP_ACK_LATE, ("t_us", "group"))
    failed = td.read_columns(data, POP_ACK_FAILED, ("t_us", "group"))
    revived = td.read_columns(data, POP_REVIVED, ("t_us", "group"))
    redelivered = td.read_columns(data, POP_ORDER_REDELIVERED, ("t_us", "group"))
    out = {}
    for group in sorted(groups, key=td.natural):
        ok = _count(data, consumed, group, consumed["ok"].astype(bool) if consumed else None)
        too_late = _count(data, late, group)
        held_p50, held_max = _held(data, received, consumed, group)
        handed = sorted({v / 1e6 for v in received["invisible_us"][received["group"] == group].tolist()}) \
            if received else []
        out[group] = PopGroup(group, received is not None, _count(data, received, group), np.maximum(ok - too_late, 0),
                              _count(data, failed, group), too_late, _count(data, revived, group),
                              _count(data, redelivered, group), _duplicates(data, group), held_p50, held_max,
                              handed or groups[group])
    return out


def _count(data: rd.RunData, cols: dict[str, np.ndarray] | None, group: str, keep: np.ndarray | None = None
           ) -> np.ndarray:
    """The group's records per second (those `keep` selects); zeros without the kind's file."""
    if not cols:
        return rd.per_second(np.zeros(0, np.int64), data.end_s)
    mine = cols["group"] == group
    return rd.per_second(cols["t_us"][mine if keep is None else mine & keep], data.end_s)


def _duplicates(data: rd.RunData, group: str) -> np.ndarray:
    series = np.zeros(int(math.ceil(data.end_s)) + 1, np.int64)
    g = (data.summary.get("groups") or {}).get(group) or {}
    for pairs in (g.get("duplicates_by_second") or {}).values():
        for second, n in pairs:
            series[min(max(second, 0), len(series) - 1)] += n
    return series


def _held(data: rd.RunData, received: dict[str, np.ndarray] | None, consumed: dict[str, np.ndarray] | None,
          group: str) -> tuple[np.ndarray, np.ndarray]:
    """(median, max) per second of the listener calls' end minus the pop time of the copy each processed."""
    n = int(math.ceil(max(data.end_s, 1.0))) + 1
    empty = np.full(n, np.nan)
    if not received or not consumed:
        return empty, empty.copy()
    r, c = received["group"] == group, consumed["group"] == group
    if not r.any() or not c.any():
        return empty, empty.copy()
    node = np.concatenate([received["node"][r], consumed["node"][c]])
    msg = np.concatenate([received["msg_id"][r], consumed["msg_id"][c]])
    t = np.concatenate([received["t_us"][r], consumed["t_us"][c]])
    pop_time = np.concatenate([received["pop_time_us"][r], np.zeros(int(c.sum()), np.int64)])
    is_call = np.r_[np.zeros(int(r.sum()), bool), np.ones(int(c.sum()), bool)]
    node_code, _names = td.codes(node)
    order = np.lexsort((is_call, t, msg, node_code))  # a receive before a call at the same instant
    node_code, msg, t, pop_time, is_call = node_code[order], msg[order], t[order], pop_time[order], is_call[order]
    last = np.maximum.accumulate(np.where(~is_call, np.arange(len(t)), -1))  # the latest receive so far
    found = is_call & (last >= 0)
    idx = np.maximum(last, 0)
    found &= (node_code[idx] == node_code) & (msg[idx] == msg)  # of the same consumer and message
    held_s = (t[found] - pop_time[idx[found]]) / 1e6
    second = np.minimum((t[found] // 1_000_000).astype(np.int64), n - 1)
    return td.quantile_per_second(second, held_s, 0.5, n), td.quantile_per_second(second, held_s, 1.0, n)
