"""One run's results as table rows: the `runs` row, and the optional per-message tables.

The `runs` row carries every summary metric under its summary.json name (`trace_sha256`,
`lost`, ...; a sub-tree such as `latency_ms.p99` becomes the flat column `latency_ms_p99`,
analysis/sweeps/results_store.py), the point's parameters as columns, verdicts, `acked_deliveries`
(acked messages × consumption units: the exposure of `loss_rate` and `duplicate_rate`),
`warmup_ms`, and four small compact aggregates the reports need without per-message tables:

- `lat_hist_bucket`/`lat_hist_count`: a sparse log-bucketed histogram of end-to-end latency,
  `LAT_BUCKETS_PER_OCTAVE` buckets per power of two of µs (bucket edges are the same in every
  run, so histograms of runs merge by adding counts; percentiles read from a merged histogram
  are within 0.6 % of the exact value); messages sent during the warm-up are left out, as in
  the summary's `latency_ms`;
- `delivery_hist`: acked messages by number of successful consumptions (0 = lost, 1, 2, ...);
- `tl_second`/`tl_p50_ms`/`tl_p99_ms`/`tl_max_ms`: latency by second of send time;
- `verdict` (valid / invalid / unknown, analysis/checkers/verdict.py) with `verdict_failures`, and
  `stopped_by` (a run bound that stopped the run, else null);
- `fault_windows`: each injected fault's kind, target and [start, end) in simulated ms;
- the send side: `sends`, `send_retried`, `send_steered_away`, `oneway_unstored`, `pending_delay`,
  `send_latency_ms` and `send_latency_ms_in_faults` (structs like `latency_ms`),
  `send_share_by_broker` and `send_share_by_broker_in_faults` (maps broker → fraction),
  `send_status` and `send_failures_by_reason` (maps to counts);
- `compiled` (written by the executor, analysis/sweeps/task.py): whether the run ran on the compiled
  per-message modules (sim/compiled.py: every one it imported was compiled), null in older rows;
- `coverage` (map: rare-state point → times reached; models/coverage_points.py) and the quiescence of the
  run's end: `quiescence_reached` (null where not judged), `quiescence_settle` (fixed / auto),
  `quiescence_at_ms`, `quiescence_window_ms` and `quiescence_unsettled` (map: what still moved →
  count). The map holds every point in one column whatever the simulator version (the points are
  the simulator's to add); the flat columns below name each. Summaries without these keys (an
  older rmqsim) give nulls;
- master availability (analysis/checkers/failover_checker.py): `failovers` (null without controllers) and
  `unwritable_s` (map: broker group → seconds without a master);
- client-visible availability (the summary's `availability` section, analysis/checkers/availability.py):
  the struct `availability` (`sends`, `acked`, `acked_ratio`, `write_outage_s.max`,
  `read_outage_s.max`, `recovery_s.max`: flat columns `availability_acked_ratio`, ...) and
  `availability_not_recovered` (list: "topic T" / "group G" never back); null without the section.

Maps are also spread into flat columns, one per key (`map_columns`), as the docs promise every
summary value under its flat name: `coverage_<point>`, `unwritable_s_<group>`,
`availability_write_outage_s_by_topic_<topic>`, `availability_read_outage_s_by_group_<unit>` and
`availability_recovery_s_by_group_<unit>` (null: never recovered). Their names depend on the run
(its broker groups, topics and groups), so results_store.py adds them to the row's schema
(`MAP_PREFIXES`); a key that flattens to a name another key of the same map already took (`a-b` and
`a_b`) keeps the larger value. A sweep parameter may not be named with one of these prefixes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.metrics import LOSS_CAUSES, latency_samples
from analysis.checkers.order import CAUSES as ORDER_CAUSES
from sim.trace import FAULT_HEALED, FAULT_INJECTED

LAT_BUCKETS_PER_OCTAVE = 64
SUMMARY_COUNTS = ("records", "sim_time_ms", "sent_attempts", "sent_ok", "sent_not_ok", "send_failed",
                  "stored", "stored_duplicates", "consumed", "lost", "pending_retry", "dlq", "duplicates",
                  "duplicated_messages", "order_violations")
# order_violations_by_cause as flat columns (null where order is not checked)
ORDER_COLUMNS = tuple(f"order_violations_{cause}" for cause in ORDER_CAUSES)
LATENCY_KEYS = ("p50", "p90", "p99", "p999", "max")
# send-side metrics (analysis/checkers/metrics.py): counts, latency structs, and maps keyed by broker / status / reason
SEND_COUNTS = ("sends", "send_retried", "send_steered_away", "oneway_unstored", "pending_delay")
SEND_LATENCIES = ("send_latency_ms", "send_latency_ms_in_faults")
SEND_SHARES = ("send_share_by_broker", "send_share_by_broker_in_faults")
SEND_TALLIES = ("send_status", "send_failures_by_reason")
SEND_COLUMNS = SEND_COUNTS + SEND_LATENCIES + SEND_SHARES + SEND_TALLIES
CAUSES = ("producer_retry", "redelivery")
# the `txn` struct (analysis/checkers/txn_checker.py): counts, then figures that may be null
TXN_COUNTS = ("transactions", "committed_visible", "rolled_back_hidden", "committed_lost", "rolled_back_visible",
              "pending", "discarded", "double_commits", "checks", "checks_per_s_max")
TXN_FIGURES = ("checks_p50", "checks_max", "resolution_ms_p50", "resolution_ms_p99", "resolution_ms_max")
# the `quiescence` summary key's scalars (rmqsim/quiescence.py); `unsettled` is its own map column
QUIESCENCE_KEYS = ("reached", "settle", "at_ms", "window_ms")
# the summary's `availability` section (analysis/checkers/availability.py): its scalars, as the struct `availability`
AVAILABILITY_COUNTS = ("sends", "acked")
AVAILABILITY_MAXIMA = ("write_outage_s", "read_outage_s", "recovery_s")  # each {"max": ..., "by_<topic|group>": {...}}
AVAILABILITY_MAPS = (("write_outage_s", "by_topic"), ("read_outage_s", "by_group"), ("recovery_s", "by_group"))
# maps spread into one flat column per key (`map_columns`): column prefix → Arrow type name ("int64" / "float64")
MAP_PREFIXES = {"coverage_": "int64", "unwritable_s_": "float64",
                **{f"availability_{name}_{by}_": "float64" for name, by in AVAILABILITY_MAPS}}
RESERVED_COLUMNS = frozenset(
    ("run_id", "point", "point_key", "seed", "status", "error", "repro", "scenario", "scenario_sha256",
     "trace_sha256", "latency_ms", "duplicate_causes", "transaction_violations", "txn_violations", "txn",
     "groups_json",
     "duplicate_rate", "loss_rate", "verdict", "verdict_failures", "stopped_by", "wall_s", "simulate_wall_s", "lat_hist_bucket", "lat_hist_count",
     "delivery_hist", "tl_second", "tl_p50_ms", "tl_p99_ms", "tl_max_ms", "fault_windows",
     "sweep", "params_json", "dup_rate_producer_retry", "dup_rate_redelivery", "duplicates_by_cause",
     "lost_by_cause") + SUMMARY_COUNTS + ORDER_COLUMNS + ("retries", "rebalances", "unowned_queue_s", "lag_max",
                                          "consume_latency_ms") + SEND_COLUMNS
    + ("acked_deliveries", "warmup_ms") + tuple(f"latency_ms_{k}" for k in LATENCY_KEYS)
    + tuple(f"duplicate_causes_{c}" for c in CAUSES) + ("coverage", "quiescence", "quiescence_unsettled")
    + tuple(f"quiescence_{k}" for k in QUIESCENCE_KEYS) + ("failovers", "unwritable_s")
    + ("compiled", "availability", "availability_not_recovered", "availability_acked_ratio")
    + tuple(f"availability_{k}" for k in AVAILABILITY_COUNTS)
    + tuple(f"availability_{k}_max" for k in AVAILABILITY_MAXIMA))
# faults whose effect lasts until a later `restart` of the same node
UNTIL_RESTART = ("process_crash", "power_loss")
INSTANT = ("restart", "heal")


def latency_buckets(latencies_us: Any) -> np.ndarray:
    """Histogram bucket of each latency: 0 below 1 µs, else 1 + floor(log2(µs) × buckets/octave)."""
    values = np.asarray(latencies_us, dtype=np.int64)
    safe = np.maximum(values, 1).astype(np.float64)
    return np.where(values >= 1, 1 + np.floor(np.log2(safe) * LAT_BUCKETS_PER_OCTAVE).astype(np.int64), 0)


def latency_bucket(latency_us: int) -> int:
    """`latency_buckets` of one latency."""
    return int(latency_buckets([latency_us])[0])


def bucket_value_ms(bucket: int) -> float:
    """Representative latency of a bucket: the geometric middle of its edges, in ms."""
    if bucket <= 0:
        return 0.0
    return 2 ** ((bucket - 0.5) / LAT_BUCKETS_PER_OCTAVE) / 1000


def histogram_percentiles_ms(buckets: Iterable[int], counts: Iterable[int],
                             quantiles: Iterable[tuple[str, float]]) -> dict[str, float | None]:
    """Nearest-rank percentiles from a (merged) latency histogram."""
    pairs = sorted(zip(buckets, counts, strict=True))
    total = sum(c for _b, c in pairs)
    out: dict[str, float | None] = {}
    for name, q in quantiles:
        if not total:
            out[name] = None
            continue
        rank, seen = max(1, math.ceil(q * total)), 0
        for bucket, count in pairs:
            seen += count
            if seen >= rank:
                out[name] = bucket_value_ms(bucket)
                break
    return out


def runs_row(summary: dict[str, Any], details: dict[str, Any], fault_records: list[tuple],
             meta: dict[str, Any]) -> dict[str, Any]:
    """The metric columns of a successful run (the caller adds identity and parameters)."""
    row: dict[str, Any] = {k: summary[k] for k in SUMMARY_COUNTS}
    by_cause = summary.get("order_violations_by_cause")
    row.update({col: None if by_cause is None else by_cause[cause] for col, cause in zip(ORDER_COLUMNS, ORDER_CAUSES,
                                                                                          strict=True)})
    row["scenario"], row["scenario_sha256"] = summary["scenario"], summary["scenario_sha256"]
    row["trace_sha256"] = summary["trace_sha256"]
    row["latency_ms"] = {k: summary["latency_ms"][k] for k in LATENCY_KEYS}
    row["duplicate_causes"] = {c: summary["duplicate_causes"][c] for c in CAUSES}
    row["duplicates_by_cause"] = {c: summary["duplicates_by_cause"][c] for c in DUPLICATE_CAUSES}
    for key in ("retries", "rebalances", "unowned_queue_s", "lag_max"):  # consumer-side metrics
        row[key] = summary[key]
    row["consume_latency_ms"] = {k: summary["consume_latency_ms"][k] for k in LATENCY_KEYS}
    row["lost_by_cause"] = {c: summary["lost_by_cause"][c] for c in LOSS_CAUSES}
    row.update({k: summary[k] for k in SEND_COUNTS + SEND_SHARES + SEND_TALLIES})
    for key in SEND_LATENCIES:
        row[key] = None if summary[key] is None else {k: summary[key][k] for k in LATENCY_KEYS}
    row.update(txn_columns(summary))
    units = max(1, len(summary["groups"]))
    acked = summary["sent_ok"] * units
    row["acked_deliveries"] = acked  # exposure of the rates: acked messages × consumption units
    row["warmup_ms"] = summary.get("warmup_ms", 0.0)
    row["duplicate_rate"] = summary["duplicates"] / acked if acked else 0.0
    row["loss_rate"] = summary["lost"] / acked if acked else 0.0
    for cause in CAUSES:
        row[f"dup_rate_{cause}"] = summary["duplicate_causes"][cause] / acked if acked else 0.0
    row["verdict"] = summary["verdict"]
    row["verdict_failures"] = "; ".join(summary["failures"])
    row["stopped_by"] = summary["stopped_by"]
    row["wall_s"], row["simulate_wall_s"] = meta["wall_s"], meta["simulate_wall_s"]
    samples = latency_samples(details)
    measured = samples["born_us"] >= int(row["warmup_ms"] * 1000)  # warm-up excluded, as in latency_ms
    row["lat_hist_bucket"], row["lat_hist_count"] = _histogram(samples["latency_us"][measured])
    row["delivery_hist"] = list(details.get("delivery_counts", []))
    row.update(_timeline(samples["born_us"], samples["latency_us"]))
    row["fault_windows"] = fault_windows(fault_records, summary["sim_time_ms"])
    row.update(end_state_columns(summary))
    row.update(availability_columns(summary))
    row.update(map_columns(summary))
    return row


def availability_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """`availability` (a struct of the section's scalars: flat columns `availability_sends`,
    `availability_acked`, `availability_acked_ratio`, `availability_write_outage_s_max`,
    `availability_read_outage_s_max`, `availability_recovery_s_max`) and
    `availability_not_recovered`; null where the summary has no section (an older rmqsim)."""
    section = summary.get("availability")
    if not isinstance(section, dict):
        return {"availability": None, "availability_not_recovered": None}
    struct: dict[str, Any] = {k: section.get(k) for k in AVAILABILITY_COUNTS}
    struct["acked_ratio"] = section.get("acked_ratio")
    for name in AVAILABILITY_MAXIMA:
        struct[name] = {"max": (section.get(name) or {}).get("max")}
    return {"availability": struct,
            "availability_not_recovered": [str(x) for x in section.get("not_recovered") or []]}


def map_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's maps as flat columns, one per key (module docstring): `coverage_<point>`,
    `unwritable_s_<group>` and the availability section's by_topic / by_group maps. Names are
    lower-case, with any character other than letters, digits and `_` as `_`."""
    found = summary.get("availability")
    section: dict[str, Any] = found if isinstance(found, dict) else {}
    maps = {"coverage_": summary.get("coverage"), "unwritable_s_": summary.get("unwritable_s"),
            **{f"availability_{name}_{by}_": (section.get(name) or {}).get(by) for name, by in AVAILABILITY_MAPS}}
    out: dict[str, Any] = {}
    for prefix, tree in maps.items():
        cast = int if MAP_PREFIXES[prefix] == "int64" else float
        for key, value in sorted((tree or {}).items()):
            column = flat_column(prefix + str(key))
            value = None if value is None else cast(value)
            if column in out:  # `a-b` and `a_b`: the larger value stays (a never-recovered null is the larger)
                value = None if value is None or out[column] is None else max(value, out[column])
            out[column] = value
    return out


def flat_column(name: str) -> str:
    """A name as a runs-table column: lower-case, any character other than letters, digits and `_`
    as `_` (as analysis/sweeps/results_store.py `flat_name` joins a sub-tree's keys)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name).lower()


def end_state_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """`coverage`, `quiescence` (its scalars), `quiescence_unsettled`, `failovers` (null without
    controllers) and `unwritable_s` (map: broker group → seconds without a master); null where the
    summary lacks them (an older rmqsim)."""
    coverage = summary.get("coverage")
    q = summary.get("quiescence") or {}
    unsettled = q.get("unsettled")
    unwritable = summary.get("unwritable_s")
    return {"coverage": None if coverage is None else {str(k): int(v) for k, v in coverage.items()},
            "quiescence": {k: q.get(k) for k in QUIESCENCE_KEYS},
            "quiescence_unsettled": None if unsettled is None else {str(k): int(v) for k, v in unsettled.items()},
            "failovers": summary.get("failovers"),
            "unwritable_s": None if unwritable is None else {str(k): float(v) for k, v in unwritable.items()}}


def txn_columns(summary: dict[str, Any]) -> dict[str, Any]:
    """`transaction_violations` (= `txn_violations`), `txn_violations` and `txn` (the counts,
    check and resolution figures of analysis/checkers/txn_checker.py; checks per second as two lists);
    all null without a transactional producer."""
    txn = summary.get("txn")
    if txn is None:
        return {"transaction_violations": None, "txn_violations": None, "txn": None}
    row_txn = {k: txn[k] for k in TXN_COUNTS + TXN_FIGURES}
    row_txn["committed_lost_causes"] = dict(txn["committed_lost_causes"])
    row_txn["checks_second"] = [s for s, _n in txn["checks_per_second"]]
    row_txn["checks_count"] = [n for _s, n in txn["checks_per_second"]]
    row_txn["checks_hist"] = list(txn["checks_histogram"])
    return {"transaction_violations": summary["txn_violations"], "txn_violations": summary["txn_violations"],
            "txn": row_txn}


def _histogram(latencies_us: np.ndarray) -> tuple[list[int], list[int]]:
    buckets, counts = np.unique(latency_buckets(latencies_us), return_counts=True)
    return buckets.tolist(), counts.tolist()


def _timeline(born_us: np.ndarray, latency_us: np.ndarray) -> dict[str, list]:
    """Latency percentiles (nearest rank) by second of send time."""
    second = born_us // 1_000_000
    order = np.lexsort((latency_us, second))
    second, latency = second[order], latency_us[order]
    starts = np.flatnonzero(np.r_[True, second[1:] != second[:-1]]) if len(second) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(second)])
    out: dict[str, list] = {"tl_second": second[starts].tolist()}
    for name, q in (("tl_p50_ms", 0.50), ("tl_p99_ms", 0.99), ("tl_max_ms", 1.0)):
        rank = np.maximum(np.ceil(q * sizes).astype(np.int64) - 1, 0)
        out[name] = (latency[starts + rank] / 1000).tolist()
    return out


def fault_windows(records: Iterable[tuple], end_ms: float) -> list[dict[str, Any]]:
    """[start, end) of every injected fault, in simulated ms, from the fault records. No window
    ends after `end_ms` (the run's end), and a `pause`, `fsync_stall`, `fsync_error` or `service_error` ends at the end of the
    fault phase (the `all` heal: it unpauses every node and clears every stall) if that comes
    first (analysis/checkers/faults_applied.py, which says the same of the summary's `faults_applied`)."""
    open_: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    timed: list[dict[str, Any]] = []
    for r in records:
        kind = r[2]
        if kind == FAULT_INJECTED:
            fault, target, detail = r[3], r[4], r[5]
            if fault in INSTANT:
                _close(open_, done, r[0] / 1000, lambda w, t=target: w["kind"] in UNTIL_RESTART and w["target"] == t)
                continue
            window = {"kind": fault, "target": target, "start_ms": r[0] / 1000, "end_ms": None}
            if detail.startswith("duration_ms=") and fault in ("pause", "fsync_stall", "fsync_error",
                                                                     "service_error"):
                window["end_ms"] = window["start_ms"] + float(detail.split("=", 1)[1])
                done.append(window)
                timed.append(window)
            else:
                open_.append(window)
        elif kind == FAULT_HEALED:
            fault, target = r[3], r[4]
            if fault == "all":
                for window in timed:
                    window["end_ms"] = min(window["end_ms"], r[0] / 1000)
            _close(open_, done, r[0] / 1000,
                   lambda w, f=fault, t=target: f == "all" or (w["kind"] == f and w["target"] == t))
    for window in open_:
        window["end_ms"] = float(end_ms)
        done.append(window)
    for window in done:
        window["end_ms"] = min(window["end_ms"], float(end_ms))
    return sorted(done, key=lambda w: (w["start_ms"], w["kind"], w["target"]))



def _close(open_: list[dict], done: list[dict], at_ms: float, matches: Any) -> None:
    for window in [w for w in open_ if matches(w)]:
        window["end_ms"] = at_ms
        open_.remove(window)
        done.append(window)
