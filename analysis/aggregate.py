"""Spark SQL over a sweep's Parquet tables: per-point statistics, pooled latency, deliveries.

Everything here is a SQL query on the views `runs` (and `deliveries`, `latencies` when kept);
only per-point aggregates reach the driver. Rates (loss rate: a proportion; duplicate rates:
deliveries per acked delivery, which may exceed 1) are pooled over the point's runs — events
summed over `acked_deliveries` summed — with a 95 % score interval (Wilson for a proportion,
Poisson score otherwise: analysis/stats.py says why), so no interval goes below 0. Counts per
run (lost, duplicates, order and transaction violations) get the Poisson score interval of
their mean over the runs that measured them (a null is not a 0). Latency percentiles of a point
are read from the *merged* histogram of its runs (bucket counts added, analysis/run_rows.py),
never by averaging the runs' percentiles. A marginal over one parameter pools every value of the
others (`pooled_over` says which).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis import results_store as store
from analysis.run_rows import histogram_percentiles_ms
from analysis.stats import poisson_score, rate_interval

# two-sided 95 % Student t quantiles (t_0.975) by degrees of freedom
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
         18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
         26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
SPECTRUM = (("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99),
            ("p99.5", 0.995), ("p99.9", 0.999))
RATE_METRICS = ("duplicate_rate", "dup_rate_producer_retry", "dup_rate_redelivery", "loss_rate",
                "order_violations", "transaction_violations", "duplicates", "lost")
# pooled rates: name → (events column, proportion?); exposure is `acked_deliveries`
POOLED_RATES = {"loss_rate": ("lost", True), "duplicate_rate": ("duplicates", False),
                "dup_rate_producer_retry": ("duplicate_causes_producer_retry", False),
                "dup_rate_redelivery": ("duplicate_causes_redelivery", False)}
COUNTS_PER_RUN = ("order_violations", "transaction_violations", "duplicates", "lost")


def t975(df: int) -> float:
    """Student t quantile for a two-sided 95 % interval (interpolated in 1/df beyond the table)."""
    if df in _T975:
        return _T975[df]
    keys = sorted(_T975)
    if df > keys[-1]:
        lo, hi, t_lo, t_hi = 1 / keys[-1], 0.0, _T975[keys[-1]], 1.960
    else:
        below = max(k for k in keys if k < df)
        above = min(k for k in keys if k > df)
        lo, hi, t_lo, t_hi = 1 / below, 1 / above, _T975[below], _T975[above]
    return t_lo + (1 / df - lo) * (t_hi - t_lo) / (hi - lo)


def open_views(spark: Any, out_dir: Path) -> list[str]:
    """Register the sweep's tables as temporary views; returns their names."""
    views = []
    for table in (store.RUNS, store.DELIVERIES, store.LATENCIES):
        folder = out_dir / table
        if folder.is_dir() and any(p.suffix == ".parquet" and not p.name.startswith(".") for p in folder.iterdir()):
            spark.read.parquet(str(folder)).createOrReplaceTempView(table)
            views.append(table)
    return views


def _pooled_columns(rates: tuple[str, ...]) -> str:
    cols = ["sum(CASE WHEN status = 'ok' THEN acked_deliveries END) AS exposure__sum"]
    cols += [f"sum(CASE WHEN status = 'ok' THEN {POOLED_RATES[r][0]} END) AS {r}__events" for r in rates]
    return ", ".join(cols)


def _pooled(row: dict[str, Any], rates: tuple[str, ...], runs: int) -> dict[str, Any]:
    """`{mean, lo, hi, n, events, exposure, method}` of each pooled rate (`mean`: the pooled rate)."""
    out = {}
    for r in rates:
        proportion = POOLED_RATES[r][1]
        ci = rate_interval(row[f"{r}__events"], row["exposure__sum"], proportion)
        out[r] = {"mean": ci["rate"], "lo": ci["lo"], "hi": ci["hi"], "n": runs, "events": ci["events"],
                  "exposure": ci["exposure"], "method": "wilson" if proportion else "poisson-score"}
    return out


def _count_columns(metrics: tuple[str, ...]) -> str:
    return ", ".join(f"sum(CASE WHEN status = 'ok' THEN {m} END) AS {m}__total, "
                     f"count(CASE WHEN status = 'ok' THEN {m} END) AS {m}__n" for m in metrics)


def _per_run(row: dict[str, Any], metrics: tuple[str, ...]) -> dict[str, Any]:
    """Mean per run of each count, with the Poisson score interval; None where nothing was measured."""
    out = {}
    for m in metrics:
        total, n = row[f"{m}__total"], row[f"{m}__n"]
        bounds = poisson_score(int(total), n) if n and total is not None else None
        out[m] = {"mean": total / n if bounds else None, "lo": bounds[0] if bounds else None,
                  "hi": bounds[1] if bounds else None, "n": n, "method": "poisson-score"}
    return out


def point_stats(spark: Any, params: list[str]) -> list[dict[str, Any]]:
    """Per point: its parameters, run counts by verdict, pooled rates and counts per run with
    95 % score intervals (module docstring)."""
    firsts = "".join(f", first(`{p}`) AS `{p}`" for p in params)
    rates = tuple(POOLED_RATES)
    sql = (f"SELECT point, first(point_key) AS point_key{firsts}, count(*) AS runs, "
           f"sum(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS failed, "
           f"sum(CASE WHEN verdict = 'valid' THEN 1 ELSE 0 END) AS passed, "
           f"sum(CASE WHEN verdict = 'invalid' THEN 1 ELSE 0 END) AS invalid, "
           f"sum(CASE WHEN verdict = 'unknown' THEN 1 ELSE 0 END) AS unknown, "
           f"{_pooled_columns(rates)}, {_count_columns(COUNTS_PER_RUN)} FROM runs GROUP BY point ORDER BY point")
    out = []
    for row in spark.sql(sql).collect():
        d = row.asDict()
        ok_runs = d["runs"] - d["failed"]
        out.append({"point": d["point"], "point_key": d["point_key"], "params": {p: d[p] for p in params},
                    "runs": d["runs"], "failed": d["failed"], "passed": d["passed"], "invalid": d["invalid"],
                    "unknown": d["unknown"], **_pooled(d, rates, ok_runs), **_per_run(d, COUNTS_PER_RUN)})
    return out


def marginal_stats(spark: Any, param: str, params: list[str] | None = None) -> list[dict[str, Any]]:
    """Per value of one parameter, every other parameter and every seed pooled: the pooled rates
    with score intervals, and `pooled_over` (the other parameters, and the number of runs)."""
    rates = ("duplicate_rate", "dup_rate_producer_retry", "dup_rate_redelivery", "loss_rate")
    others = [p for p in params or [] if p != param]
    sql = (f"SELECT `{param}` AS value, count(*) AS runs, {_pooled_columns(rates)} FROM runs WHERE status = 'ok' "
           f"GROUP BY `{param}` ORDER BY `{param}`")
    return [{"value": r["value"], "pooled_over": others, "runs": r["runs"], **_pooled(r.asDict(), rates, r["runs"])}
            for r in spark.sql(sql).collect()]


def grid_means(spark: Any, row_param: str, col_param: str, metric: str) -> list[tuple[Any, Any, float]]:
    """Per cell of two parameters: the pooled rate (events / acked deliveries over its runs, the
    other parameters pooled) of a `POOLED_RATES` metric."""
    events = POOLED_RATES[metric][0]
    sql = (f"SELECT `{row_param}` AS r, `{col_param}` AS c, sum({events}) / sum(acked_deliveries) AS m FROM runs "
           f"WHERE status = 'ok' GROUP BY `{row_param}`, `{col_param}` ORDER BY r, c")
    return [(r["r"], r["c"], r["m"]) for r in spark.sql(sql).collect()]


def pooled_latency(spark: Any) -> dict[int, dict[str, float | None]]:
    """Per point: latency percentiles (ms) of the merged histogram of its runs."""
    sql = ("SELECT point, h.lat_hist_bucket AS bucket, sum(h.lat_hist_count) AS n FROM "
           "(SELECT point, explode(arrays_zip(lat_hist_bucket, lat_hist_count)) AS h FROM runs "
           " WHERE status = 'ok') GROUP BY point, h.lat_hist_bucket")
    merged: dict[int, tuple[list[int], list[int]]] = {}
    for r in spark.sql(sql).collect():
        buckets, counts = merged.setdefault(r["point"], ([], []))
        buckets.append(r["bucket"])
        counts.append(r["n"])
    return {point: histogram_percentiles_ms(b, c, SPECTRUM) for point, (b, c) in sorted(merged.items())}


def delivery_counts(spark: Any) -> list[tuple[int, int]]:
    """(successful deliveries of an acked message, how many messages) over every run."""
    sql = ("SELECT d.pos AS deliveries, sum(d.col) AS n FROM "
           "(SELECT posexplode(delivery_hist) AS (pos, col) FROM runs WHERE status = 'ok') d "
           "GROUP BY d.pos ORDER BY d.pos")
    return [(r["deliveries"], r["n"]) for r in spark.sql(sql).collect()]


def timeline(spark: Any, run: str) -> dict[str, Any] | None:
    rows = spark.sql("SELECT tl_second, tl_p50_ms, tl_p99_ms, tl_max_ms, fault_windows FROM runs "
                     "WHERE run_id = :run AND status = 'ok'", args={"run": run}).collect()
    if not rows:
        return None
    return rows[0].asDict(recursive=True)


def failed_runs(spark: Any) -> list[dict[str, Any]]:
    rows = spark.sql("SELECT run_id, error, repro FROM runs WHERE status <> 'ok' ORDER BY run_id").collect()
    return [r.asDict() for r in rows]


def totals(spark: Any) -> dict[str, Any]:
    row = spark.sql("SELECT count(*) AS runs, sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS ok, "
                    "sum(sent_ok) AS sent_ok, sum(consumed) AS consumed, sum(lost) AS lost, "
                    "sum(duplicates) AS duplicates, sum(wall_s) AS wall_s, "
                    "sum(sim_time_ms) AS sim_time_ms FROM runs").collect()[0]
    return row.asDict()


def txn_checks(spark: Any, run: str) -> dict[str, Any] | None:
    """Transactional runs (analysis/txn_checker.py; the runs table's flat `txn_*` columns): messages
    by number of checks over every run, and checks per second of run `run` (or of the first transactional run); None without any."""
    hist = spark.sql("SELECT h.pos AS checks, sum(h.col) AS n FROM "
                     "(SELECT posexplode(txn_checks_hist) AS (pos, col) FROM runs "
                     " WHERE status = 'ok' AND txn_checks_hist IS NOT NULL) h GROUP BY h.pos ORDER BY h.pos").collect()
    if not hist:
        return None
    rows = spark.sql("SELECT run_id, txn_checks_second AS s, txn_checks_count AS n FROM runs WHERE status = 'ok' "
                     "AND txn_checks_hist IS NOT NULL ORDER BY (run_id = :run) DESC, run_id LIMIT 1", args={"run": run}).collect()
    return {"histogram": [(r["checks"], r["n"]) for r in hist], "run": rows[0]["run_id"],
            "per_second": list(zip(rows[0]["s"] or [], rows[0]["n"] or [], strict=True))}
