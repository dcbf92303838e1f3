"""One finished run's data for its report, read from its directory (summary.json, the Parquet trace).

`load_run(RUN_DIR)` reads `summary.json`, `scenario.resolved.json` and the columns the figures
need from `trace/<kind>.parquet` into NumPy arrays (no per-record Python objects), and derives:
publish latency (a send call's outcome time minus its first attempt, `producer.sent`),
end-to-end latency (first successful consumption per group minus first send attempt), per-second
counts, per-broker send share, duplicate consumptions by cause, the backlog per group, and the
fault windows (analysis/run_rows.py). Messages sent before `warmup_ms` are left out of the
latency spectra, as in the summary. A metric another part of the simulator records only in
some builds (`summary_metric`) is None when this run does not have it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from analysis.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.run_rows import fault_windows
from analysis.trace_store import kind_path
from models.records import (
    BROKER_LOCK_GRANTED,
    BROKER_LOCK_REFUSED,
    BROKER_STORED,
    CONSUMER_CONSUMED,
    CONSUMER_REBALANCED,
    PRODUCER_SEND_FAILED,
    PRODUCER_SENT,
    TXN_CHECK_ANSWERED,
    TXN_CHECKED,
    TXN_DISCARDED,
    TXN_ENDED,
    TXN_LOCAL_DONE,
)
from sim.trace import FAULT_HEALED, FAULT_INJECTED

SPECTRUM = (("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999),
            ("p99.99", 0.9999))


class RunDataError(Exception):
    """The directory is not a finished run with a trace (reported without a traceback)."""


@dataclass
class RunData:
    directory: Path
    summary: dict[str, Any]
    scenario: dict[str, Any]
    columns: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # kind → column → values
    windows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def warmup_ms(self) -> float:
        return float(self.summary.get("warmup_ms", 0.0))

    @property
    def end_s(self) -> float:
        return self.summary["sim_time_ms"] / 1000

    def kind(self, name: str) -> dict[str, np.ndarray]:
        return self.columns.get(name, {})


def load_run(directory: Path) -> RunData:
    summary_path = directory / "summary.json"
    if not summary_path.is_file():
        raise RunDataError(f"{directory} is not a run directory (no summary.json)")
    if not (directory / "trace").is_dir():
        raise RunDataError(f"{directory} has no trace: rerun with --trace (or --report, which writes one)")
    summary = json.loads(summary_path.read_text())
    resolved = directory / "scenario.resolved.json"
    data = RunData(directory, summary, json.loads(resolved.read_text()) if resolved.is_file() else {})
    wanted = {PRODUCER_SENT: ("t_us", "node", "msg_id", "broker", "status", "born_us"),
              CONSUMER_CONSUMED: ("t_us", "node", "group", "msg_id", "ok"),
              BROKER_STORED: ("t_us", "node", "msg_id", "topic", "reconsume_times"),
              CONSUMER_REBALANCED: ("t_us", "node", "group"),
              # transactions (analysis/txn_data.py); a run without them has none of these files
              PRODUCER_SEND_FAILED: ("msg_id", "born_us"), TXN_CHECKED: ("t_us", "msg_id"),
              TXN_ENDED: ("t_us", "msg_id", "action", "from_check", "code"), TXN_DISCARDED: ("t_us", "msg_id"),
              TXN_LOCAL_DONE: ("t_us", "msg_id", "state"), TXN_CHECK_ANSWERED: ("t_us", "state"),
              BROKER_LOCK_GRANTED: ("t_us", "node", "how"), BROKER_LOCK_REFUSED: ("t_us", "node")}
    for kind, cols in wanted.items():
        path = kind_path(directory / "trace", kind)
        if path.is_file():
            table = pq.read_table(path, columns=list(cols))
            data.columns[kind] = {c: table.column(c).to_numpy(zero_copy_only=False) for c in cols}
    faults = []
    for kind in (FAULT_INJECTED, FAULT_HEALED):
        path = kind_path(directory / "trace", kind)
        if path.is_file():
            t = pq.read_table(path, columns=["seq", "t_us", "node", "fault", "target", "detail"]).to_pylist()
            faults += [(r["seq"], (r["t_us"], r["node"], kind, r["fault"], r["target"], r["detail"])) for r in t]
    data.windows = fault_windows([rec for _seq, rec in sorted(faults)], summary["sim_time_ms"])
    return data


def summary_metric(data: RunData, key: str) -> Any:
    """A summary value another feature adds (e.g. `lost_by_cause`), or None when not recorded."""
    return data.summary.get(key)


def percentiles(values_ms: np.ndarray) -> dict[str, float | None]:
    """Nearest-rank percentiles of `SPECTRUM` (None without samples)."""
    ordered = np.sort(values_ms)
    n = len(ordered)
    return {name: (float(ordered[max(0, int(np.ceil(q * n)) - 1)]) if n else None) for name, q in SPECTRUM}


def measured_sends(data: RunData) -> dict[str, np.ndarray]:
    """The `producer.sent` columns of the sends born at or after the warm-up (those the send
    latency statistics measure; ONEWAY sends have no outcome time and are left out too)."""
    sent = data.kind(PRODUCER_SENT)
    if not sent:
        return {}
    keep = (sent["born_us"] >= data.warmup_ms * 1000) & (sent["status"] != "ONEWAY")
    return {name: values[keep] for name, values in sent.items()}


def publish_latency_ms(data: RunData) -> np.ndarray:
    """Send call: outcome time minus first attempt, per message sent at or after the warm-up."""
    sent = measured_sends(data)
    return (sent["t_us"] - sent["born_us"]) / 1000 if sent else np.zeros(0)


def first_consumptions(data: RunData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, msg_id, t_us) of each message's first successful consumption per group."""
    c = data.kind(CONSUMER_CONSUMED)
    if not c:
        return np.zeros(0, object), np.zeros(0, np.int64), np.zeros(0, np.int64)
    ok = c["ok"].astype(bool)
    group, msg, t = c["group"][ok], c["msg_id"][ok], c["t_us"][ok]
    order = np.lexsort((t, msg, group))
    group, msg, t = group[order], msg[order], t[order]
    first = np.r_[True, (group[1:] != group[:-1]) | (msg[1:] != msg[:-1])] if len(msg) else np.zeros(0, bool)
    return group[first], msg[first], t[first]


def end_to_end_latency_ms(data: RunData) -> np.ndarray:
    """First successful consumption minus first send attempt, messages sent at or after the warm-up."""
    sent = data.kind(PRODUCER_SENT)
    _group, msg, t = first_consumptions(data)
    if not sent or not len(msg):
        return np.zeros(0)
    order = np.argsort(sent["msg_id"], kind="stable")
    ids, born = sent["msg_id"][order], sent["born_us"][order]
    pos = np.clip(np.searchsorted(ids, msg), 0, len(ids) - 1)
    known = ids[pos] == msg
    born_of = born[pos[known]]
    keep = born_of >= data.warmup_ms * 1000
    return (t[known][keep] - born_of[keep]) / 1000


def per_second(t_us: np.ndarray, end_s: float) -> np.ndarray:
    """Counts per whole simulated second, 0 .. end_s."""
    return np.bincount((t_us // 1_000_000).astype(np.int64), minlength=int(np.ceil(end_s)) + 1)


def send_share_by_broker(data: RunData) -> dict[str, np.ndarray]:
    """broker → share of each second's completed sends (SEND_OK) that went to it."""
    sent = data.kind(PRODUCER_SENT)
    if not sent:
        return {}
    ok = sent["status"] == "SEND_OK"
    counts = {str(b): per_second(sent["t_us"][ok & (sent["broker"] == b)], data.end_s)
              for b in sorted(set(sent["broker"][ok].tolist()))}
    total = sum(counts.values()) if counts else np.zeros(0)
    busy = total[total > 0]
    enough = max(1.0, 0.05 * float(np.median(busy))) if len(busy) else 1.0  # a second's last few sends: no share
    return {b: np.where(total >= enough, n / np.maximum(total, 1), np.nan) for b, n in counts.items()}


def duplicates_by_cause(data: RunData) -> dict[str, np.ndarray] | None:
    """Duplicate deliveries per second by mechanism, summed over groups (None: nothing consumed; an
    empty dict: no duplicates): the summary's per-group
    `duplicates_by_second` (analysis/duplicates.py's ten causes). A run summarised before that key
    existed falls back to the two-way split read off the trace (`_two_way_duplicates`)."""
    groups = data.summary.get("groups") or {}
    if not groups or any("duplicates_by_second" not in g for g in groups.values()):
        return _two_way_duplicates(data)
    if not data.kind(CONSUMER_CONSUMED):
        return None
    length = int(np.ceil(data.end_s)) + 1
    out: dict[str, np.ndarray] = {}
    for g in groups.values():
        for cause, pairs in g["duplicates_by_second"].items():
            series = out.setdefault(cause, np.zeros(length, np.int64))
            for second, n in pairs:
                series[min(second, length - 1)] += n
    return {c: out[c] for c in DUPLICATE_CAUSES if c in out}


def _two_way_duplicates(data: RunData) -> dict[str, np.ndarray] | None:
    """Successful consumptions beyond a group's first, per second, by analysis/checks.py's older
    rule: `producer_retry` when the brokers stored the message more than once, else `redelivery`."""
    c, stored = data.kind(CONSUMER_CONSUMED), data.kind(BROKER_STORED)
    if not c:
        return None
    ok = c["ok"].astype(bool)
    group, msg, t = c["group"][ok], c["msg_id"][ok], c["t_us"][ok]
    order = np.lexsort((t, msg, group))
    group, msg, t = group[order], msg[order], t[order]
    repeat = np.r_[False, (group[1:] == group[:-1]) & (msg[1:] == msg[:-1])] if len(msg) else np.zeros(0, bool)
    originals = stored["msg_id"][stored["reconsume_times"] == 0] if stored else np.zeros(0, np.int64)
    ids, copies = np.unique(originals, return_counts=True)
    twice = np.isin(msg, ids[copies > 1])
    return {"producer_retry": per_second(t[repeat & twice], data.end_s),
            "redelivery": per_second(t[repeat & ~twice], data.end_s)}


def backlog_by_group(data: RunData) -> dict[str, np.ndarray]:
    """group → messages of its topic stored but not yet consumed successfully, at each second's end."""
    stored = data.kind(BROKER_STORED)
    groups = {c["group"]: c["topic"] for c in data.scenario.get("consumers", [])}
    if not stored or not groups:
        return {}
    first_group, _msg, first_t = first_consumptions(data)
    out = {}
    for group, topic in groups.items():
        mine = (stored["topic"] == topic) & (stored["reconsume_times"] == 0)
        ids, first_stored = np.unique(stored["msg_id"][mine], return_index=True)
        arrived = np.cumsum(per_second(stored["t_us"][mine][first_stored], data.end_s))
        done = np.cumsum(per_second(first_t[first_group == group], data.end_s))
        n = min(len(arrived), len(done))
        out[group] = np.maximum(arrived[:n] - done[:n], 0)
    return out


def rebalances(data: RunData) -> list[tuple[float, str]]:
    """(simulated s, group) of every rebalance that changed a consumer's queues."""
    r = data.kind(CONSUMER_REBALANCED)
    return [(t / 1e6, str(g)) for t, g in zip(r.get("t_us", []), r.get("group", []), strict=True)]


def lock_events(data: RunData) -> dict[str, np.ndarray]:
    """Per-second counts of the orderly lock events, keyed "<broker>: <event>" (event: granted
    new, renewed, taken over after expiry, refused); empty when the run recorded none."""
    out: dict[str, np.ndarray] = {}
    granted, refused = data.kind(BROKER_LOCK_GRANTED), data.kind(BROKER_LOCK_REFUSED)
    labels = {"new": "granted (new)", "renewed": "renewed", "expired": "taken over (expired)"}
    for broker in sorted(set(granted.get("node", np.zeros(0)).tolist()) | set(refused.get("node", np.zeros(0)).tolist())):
        if granted:
            for how, label in labels.items():
                mine = (granted["node"] == broker) & (granted["how"] == how)
                if mine.any():
                    out[f"{broker}: {label}"] = per_second(granted["t_us"][mine], data.end_s)
        if refused:
            mine = refused["node"] == broker
            if mine.any():
                out[f"{broker}: refused"] = per_second(refused["t_us"][mine], data.end_s)
    return out
