"""A sweep's results, read once through Spark and pooled per point, parameter value and cell.

Loading (`load`) is a Spark pipeline over the `runs` table, read with its schema given (no
inference job), in one job: one row per run with its scalar columns and short arrays (the
per-message tables are never read), the per-second columns of the one run the timeline figure
draws, and up to `INLINE_HISTOGRAM_RUNS` runs their latency histograms; a larger sweep has Spark
merge those per point in a second job (`explode` and `GROUP BY`: they are the long columns). A
report is then one or two jobs, not one per figure and table; everything after that is pandas
over one row per run (`SweepData`). `load_local` builds the same SweepData with Arrow and no JVM
(a local sweep's report): one read of the files, the histograms merged by Arrow's group-by.

Pooling: a rate (`METRICS`: loss, duplicates, order and transaction violations) is events summed
over its exposure summed (acknowledged deliveries: acked messages × consumption units; for
transactions, transactional messages), over the runs that measured it (order and transactions
are null where not checked, and a null is not a 0). Its intervals (analysis/sweeps/stats.py):
first the run-level one, a 95 % Student-t interval from the runs' spread around the pooled rate
(the run as the unit: `run_lo`, `run_hi`); then the per-message score interval — Wilson for a
proportion, Poisson score for a rate that may exceed 1 (`lo`, `hi`) — with `agree`, whether the
runs' counts spread as independent messages would make them (only then does the report show
it). Each run's own rate is kept (`rates`) for the figures' strips. A numeric column of the
runs table (a max latency, a write outage: analysis/sweeps/columns.py) is summarised per run:
the mean of the runs' values with a Student-t interval, their range, each value, and how many
runs had none (`column_stats`). Latency percentiles come from *merged* histograms (bucket counts
added, analysis/checkers/run_rows.py), never from averaged percentiles.

Axes: each grid parameter is an axis of its own; the zip parameters, which move together, are
one axis whose values are their tuples in the file's order (`axes`). A marginal over one axis
pools every value of the others, and a cell of two axes pools the rest (`pooled_over` names the
axes pooled, a zip axis as `(a, b)`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.metrics import LOSS_CAUSES
from analysis.checkers.order import CAUSES as ORDER_CAUSES
from analysis.checkers.run_rows import histogram_percentiles_ms
from analysis.sweeps import results_store as store
from analysis.sweeps.stats import dispersion, mean_t_interval, rate_interval, ratio_t_interval, runs_agree
from analysis.sweeps.stats import t975 as t975  # noqa: F401 - where callers found it before stats.py had it

SPECTRUM = (("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99),
            ("p99.5", 0.995), ("p99.9", 0.999))
# the per-second columns of the run the timeline figure draws (read for that run only)
TIMELINE_COLUMNS = ("tl_second", "tl_p50_ms", "tl_p99_ms", "tl_max_ms", "fault_windows", "txn_checks_second",
                    "txn_checks_count")
# long per-run columns: the latency histograms (merged per point) and the timeline's
LONG_COLUMNS = ("lat_hist_bucket", "lat_hist_count", *TIMELINE_COLUMNS)
INLINE_HISTOGRAM_RUNS = 5_000  # up to this many runs, histograms come with the rows (one job, not two)
FAILING_COLUMNS = ("error", "repro", "verdict_failures", "output_files")  # read for failing runs only
RUNS_PER_SHUFFLE_PARTITION = 20_000


@dataclass(frozen=True)
class Metric:
    """A correctness metric of a sweep: events over an exposure, split by cause."""

    name: str  # the focus name in a sweep file's `report: {focus: ...}`
    title: str  # "Loss rate"
    events: str  # runs-table column counting the events
    exposure: str  # runs-table column they are a fraction of
    of: str  # what the exposure counts, for labels
    proportion: bool  # at most one event per exposure unit: Wilson; else the Poisson score interval
    cause_prefix: str  # cause columns: <prefix><cause>
    causes: tuple[str, ...]
    unchecked: str = ""  # why a null means "not checked"

    def cause_column(self, cause: str) -> str:
        return f"{self.cause_prefix}{cause}"

    @property
    def method(self) -> str:
        return "Wilson" if self.proportion else "Poisson score"


ACKED = "acknowledged messages"
METRICS = {m.name: m for m in (
    Metric("loss", "Loss rate", "lost", "acked_deliveries", ACKED, True, "lost_by_cause_", LOSS_CAUSES),
    Metric("duplicates", "Duplicate-delivery rate", "duplicates", "acked_deliveries", ACKED, False,
           "duplicates_by_cause_", DUPLICATE_CAUSES),
    Metric("order", "Order-violation rate", "order_violations", "acked_deliveries", ACKED, True,
           "order_violations_", ORDER_CAUSES, unchecked="no orderly consumer group"),
    Metric("transactions", "Transaction-violation rate", "txn_violations", "txn_transactions",
           "transactional messages", True, "txn_", ("committed_lost", "rolled_back_visible"),
           unchecked="no transactional producer"),
)}


@dataclass
class SweepData:
    """What a report reads of a sweep: one row per run, and merged latency histograms per point."""

    runs: pd.DataFrame  # every run (failed ones too), scalar columns, maps as dicts, short arrays as lists
    params: list[str]
    histograms: dict[int, dict[int, int]] = field(default_factory=dict)  # point → bucket → count
    timeline: dict[str, Any] | None = None  # the timeline run's per-second columns and fault windows
    timeline_run: str | None = None
    zipped: list[str] = field(default_factory=list)  # the parameters of `params` a zip varies together

    @property
    def ok(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] == "ok"]

    def column(self, name: str, frame: pd.DataFrame | None = None) -> pd.Series:
        """A column, or nulls where the table has none (results of an older rmqsim)."""
        frame = self.ok if frame is None else frame
        return frame[name] if name in frame.columns else pd.Series(np.nan, index=frame.index, dtype=object)


# ---------------------------------------------------------------- loading (Spark)

def spark_schema(arrow_schema: Any) -> Any:
    """The Spark schema of the runs table, from its Parquet files' Arrow schema (Spark then reads
    without a schema-inference job, and a column an older row lacks reads as null)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)


def load(spark: Any, out_dir: Path, params: list[str], arrow_schema: Any, timeline_run: str | None,
         n_runs: int, zipped: list[str] | None = None) -> SweepData:
    """The runs table through Spark (module docstring): three jobs, whatever the report draws;
    `zipped`: the parameters of `params` a zip varies together (one axis)."""
    with _report_conf(spark, n_runs):
        data = _load(spark, out_dir, params, arrow_schema, timeline_run, n_runs)
    data.zipped = [p for p in zipped or [] if p in params]
    return data


@contextmanager
def _report_conf(spark: Any, n_runs: int) -> Iterator[None]:
    """SQL settings for queries over one row per run, restored afterwards (the session may be a
    sweep's, or a test's): shuffle partitions sized to the runs (Spark's default, 200, is 200
    tasks per GROUP BY for a few rows), and interpreted expressions with adaptive execution off
    (compiling generated code and re-planning cost more than they save on so little data)."""
    wanted = {"spark.sql.shuffle.partitions": str(max(1, math.ceil(n_runs / RUNS_PER_SHUFFLE_PARTITION))),
              "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
              "spark.sql.adaptive.enabled": "false"}
    before = {key: spark.conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _load(spark: Any, out_dir: Path, params: list[str], arrow_schema: Any, timeline_run: str | None,
          n_runs: int) -> SweepData:
    frame = spark.read.schema(spark_schema(arrow_schema)).parquet(str(out_dir / store.RUNS))
    frame.createOrReplaceTempView(store.RUNS)
    names = frame.columns
    inline = n_runs <= INLINE_HISTOGRAM_RUNS and {"lat_hist_bucket", "lat_hist_count"} <= set(names)
    failing = "status <> 'ok'" + (" OR verdict IN ('invalid', 'unknown')" if "verdict" in names else "")
    select = [f"`{c}`" for c in names if c not in LONG_COLUMNS and c not in FAILING_COLUMNS]
    select += [f"CASE WHEN {failing} THEN `{c}` END AS `{c}`" for c in FAILING_COLUMNS if c in names]
    select += [f"`{c}`" for c in ("lat_hist_bucket", "lat_hist_count") if inline]
    timeline = [f"CASE WHEN run_id = :run THEN `{c}` END AS `{c}`" for c in TIMELINE_COLUMNS if c in names]
    rows = spark.sql(f"SELECT {', '.join(select + timeline)} FROM runs",
                     args={"run": timeline_run or ""} if timeline else None).collect()
    data = SweepData(_frame(rows, names).sort_values("run_id", kind="stable").reset_index(drop=True), params)
    if inline:
        data.histograms = _merge_inline(data.ok)
    elif {"lat_hist_bucket", "lat_hist_count"} <= set(names):
        data.histograms = _merged_histograms(spark)
    _take_timeline(spark, data, timeline_run, names)
    return data


# ---------------------------------------------------------------- loading (Arrow, no JVM)

def load_local(out_dir: Path, params: list[str], arrow_schema: Any, timeline_run: str | None,
               zipped: list[str] | None = None) -> SweepData:
    """The runs table read here with Arrow, no JVM (the report of a local sweep): the same
    SweepData `load` builds through Spark — the same columns in the same order, failing-run
    columns only on failing rows, maps as dicts — in one pass over the files, the latency
    histograms merged per point by Arrow's group-by (never held per run in Python), the
    timeline's columns read for its one run."""
    import pyarrow.dataset as pads

    dataset = pads.dataset(str(out_dir / store.RUNS), schema=arrow_schema, format="parquet")
    names = arrow_schema.names
    wide = [c for c in names if c not in LONG_COLUMNS]
    table = dataset.to_table(columns=wide + [c for c in ("lat_hist_bucket", "lat_hist_count") if c in names])
    rows = _python_rows(table.select(wide))
    failing = [c for c in FAILING_COLUMNS if c in names]
    for row in rows:
        if not (row["status"] != "ok" or row.get("verdict") in ("invalid", "unknown")):
            row.update(dict.fromkeys(failing))
        for c in failing:  # after the other columns, as Spark's SELECT puts them
            row[c] = row.pop(c)
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=[c for c in names if c not in LONG_COLUMNS])
    data = SweepData(frame.sort_values("run_id", kind="stable").reset_index(drop=True), params)
    if {"lat_hist_bucket", "lat_hist_count"} <= set(names):
        data.histograms = _arrow_histograms(table)
    _local_timeline(dataset, data, timeline_run, names)
    data.zipped = [p for p in zipped or [] if p in params]
    return data


def _python_rows(table: Any) -> list[dict[str, Any]]:
    """Arrow rows as Spark's `Row.asDict(recursive=True)` gives them: maps as dicts (Arrow gives
    lists of pairs), structs as dicts, lists as lists."""
    maps = [f.name for f in table.schema if _has_map(f.type)]
    rows = table.to_pylist()
    for name in maps:
        kind = table.schema.field(name).type
        for row in rows:
            row[name] = _maps_as_dicts(row[name], kind)
    return rows


def _has_map(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_map(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_has_map(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _maps_as_dicts(value: Any, kind: Any) -> Any:
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(kind):
        return {k: _maps_as_dicts(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_maps_as_dicts(v, kind.value_type) for v in value]
    if pa.types.is_struct(kind):
        return {kind.field(i).name: _maps_as_dicts(value[kind.field(i).name], kind.field(i).type)
                for i in range(kind.num_fields)}
    return value


def _arrow_histograms(table: Any) -> dict[int, dict[int, int]]:
    """Latency histograms merged per point over the ok runs (bucket counts added), by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ok = table.filter(pc.equal(table["status"], "ok"))
    buckets, counts = ok["lat_hist_bucket"].combine_chunks(), ok["lat_hist_count"].combine_chunks()
    parents = pc.list_parent_indices(buckets)
    flat = pa.table({"point": pc.take(ok["point"], parents), "bucket": pc.list_flatten(buckets),
                     "n": pc.list_flatten(counts)})
    summed = flat.group_by(["point", "bucket"]).aggregate([("n", "sum")]).sort_by([("point", "ascending"),
                                                                                 ("bucket", "ascending")])
    merged: dict[int, dict[int, int]] = {int(p): {} for p in sorted(set(ok["point"].to_pylist()))}
    for point, bucket, n in zip(summed["point"].to_pylist(), summed["bucket"].to_pylist(),
                                summed["n_sum"].to_pylist(), strict=True):
        merged.setdefault(int(point), {})[int(bucket)] = int(n)
    return merged


def _local_timeline(dataset: Any, data: SweepData, wanted: str | None, names: list[str]) -> None:
    """The per-second columns of `wanted` if it ran ok, else of the first ok run (`_take_timeline`)."""
    import pyarrow.compute as pc

    cols = [c for c in TIMELINE_COLUMNS if c in names]
    ok = data.ok["run_id"].tolist()
    if "tl_second" not in cols or not ok:
        return
    run = wanted if wanted in ok else ok[0]
    table = dataset.to_table(columns=cols, filter=pc.field("run_id") == run)
    data.timeline, data.timeline_run = _python_rows(table)[0], run


def _frame(rows: list[Any], names: list[str]) -> pd.DataFrame:
    """Rows collected from Spark as a DataFrame (collect, not Arrow: for one row per run it is the
    cheaper path, and maps arrive as dicts)."""
    if not rows:
        return pd.DataFrame(columns=[c for c in names if c not in LONG_COLUMNS])
    return pd.DataFrame([r.asDict(recursive=True) for r in rows])


def _merge_inline(ok: pd.DataFrame) -> dict[int, dict[int, int]]:
    """Latency histograms merged per point from the runs' own (small sweeps: they came with the rows)."""
    merged: dict[int, dict[int, int]] = {}
    for point, buckets, counts in zip(ok["point"], ok["lat_hist_bucket"], ok["lat_hist_count"], strict=True):
        into = merged.setdefault(int(point), {})
        for bucket, n in zip(buckets or [], counts or [], strict=True):
            into[int(bucket)] = into.get(int(bucket), 0) + int(n)
    return {p: merged[p] for p in sorted(merged)}


def _merged_histograms(spark: Any) -> dict[int, dict[int, int]]:
    """Latency histograms merged per point by Spark (large sweeps: the long columns stay there)."""
    sql = ("SELECT point, h.lat_hist_bucket AS bucket, sum(h.lat_hist_count) AS n FROM "
           "(SELECT point, explode(arrays_zip(lat_hist_bucket, lat_hist_count)) AS h FROM runs "
           " WHERE status = 'ok') GROUP BY point, h.lat_hist_bucket")
    merged: dict[int, dict[int, int]] = {}
    for r in spark.sql(sql).collect():
        merged.setdefault(int(r["point"]), {})[int(r["bucket"])] = int(r["n"])
    return {p: merged[p] for p in sorted(merged)}


def _take_timeline(spark: Any, data: SweepData, wanted: str | None, names: list[str]) -> None:
    """The per-second columns of `wanted` (they came with its row) if it ran; else of the first
    run that did (one more query: the sweep's chosen run failed)."""
    runs = data.runs
    cols = [c for c in TIMELINE_COLUMNS if c in names]
    ok = data.ok["run_id"].tolist()
    if "tl_second" in cols and wanted in ok:
        row = runs.loc[runs["run_id"] == wanted].iloc[0]
        data.timeline, data.timeline_run = {c: row[c] for c in cols}, wanted
    elif "tl_second" in cols and ok:
        row = spark.sql(f"SELECT {', '.join(cols)} FROM runs WHERE run_id = :run", args={"run": ok[0]}).collect()[0]
        data.timeline, data.timeline_run = row.asDict(recursive=True), ok[0]
    data.runs = runs.drop(columns=[c for c in (*cols, "lat_hist_bucket", "lat_hist_count") if c in runs.columns])


# ---------------------------------------------------------------- pooling (pandas)

def pooled(data: SweepData, frame: pd.DataFrame, metric: Metric) -> dict[str, Any]:
    """`metric` over the ok runs in `frame` that measured it (module docstring): `mean` (the pooled
    rate; None if no run measured it or nothing was exposed), `run_lo`/`run_hi` (95 % Student t
    over the runs; None with fewer than two), `lo`/`hi` (the per-message score interval, `method`)
    with `agree` (the runs spread as independent messages would: None with fewer than two runs)
    and `overdispersion` (the dispersion statistic over its degrees of freedom: about 1 for
    independent messages, hundreds for bursts), `rates` (each run's rate), `events`, `exposure`,
    `runs` and `causes`."""
    events = _numbers(data.column(metric.events, frame))
    checked = frame[events.notna()]
    exposures = _numbers(data.column(metric.exposure, checked)).fillna(0.0)
    counts = events[events.notna()]
    n_events = int(counts.sum()) if len(checked) else None
    exposure = int(exposures.sum()) if len(checked) else None
    ci = rate_interval(n_events, exposure, metric.proportion)
    causes = {c: int(_numbers(data.column(metric.cause_column(c), checked)).sum()) for c in metric.causes}
    per_run = ratio_t_interval(counts.tolist(), exposures.tolist(), metric.proportion) if len(checked) else None
    rates = [float(e / x) for e, x in zip(counts.tolist(), exposures.tolist(), strict=True) if x > 0]
    spread = dispersion(counts.tolist(), exposures.tolist(), metric.proportion) / (len(rates) - 1) \
        if len(rates) >= 2 else None
    return {"mean": ci["rate"], "lo": ci["lo"], "hi": ci["hi"], "events": n_events, "exposure": exposure,
            "runs": len(checked), "method": metric.method, "causes": causes,
            "run_lo": None if per_run is None else per_run["lo"], "run_hi": None if per_run is None else per_run["hi"],
            "agree": runs_agree(counts.tolist(), exposures.tolist(), metric.proportion) if len(checked) else None,
            "overdispersion": spread, "rates": rates}


def column_stats(data: SweepData, frame: pd.DataFrame, column: str) -> dict[str, Any]:
    """A numeric column over the ok runs in `frame`: `mean` with a 95 % Student-t interval (`lo`,
    `hi`; None with fewer than two values), `min`, `max`, `n` (runs with a value), `values` (each
    run's, in run id order), `runs` and `nulls` (runs without a value: a group that never
    recovered has no recovery time)."""
    values = _numbers(data.column(column, frame))
    seen = [float(v) for v in values.dropna().tolist()]
    return {**mean_t_interval(seen), "values": seen, "runs": len(frame), "nulls": int(values.isna().sum())}


def _numbers(column: pd.Series) -> pd.Series:
    """A column as floats, nulls as NaN (sums skip them)."""
    return pd.to_numeric(column, errors="coerce").astype(float)


def run_rates(data: SweepData, metric: Metric) -> pd.Series:
    """Each ok run's own rate (NaN where not measured or nothing was exposed)."""
    events = _numbers(data.column(metric.events))
    exposure = _numbers(data.column(metric.exposure))
    return (events / exposure.where(exposure > 0)).astype(float)


def merged_latency(data: SweepData, points: list[int]) -> dict[str, float | None]:
    """Percentiles (ms) of the merged histogram of these points' runs."""
    merged: dict[int, int] = {}
    for point in points:
        for bucket, n in data.histograms.get(point, {}).items():
            merged[bucket] = merged.get(bucket, 0) + n
    return histogram_percentiles_ms(merged.keys(), merged.values(), SPECTRUM)


def _verdict_counts(group: pd.DataFrame) -> dict[str, int]:
    verdict = group["verdict"] if "verdict" in group.columns else pd.Series(None, index=group.index, dtype=object)
    return {"runs": len(group), "failed": int((group["status"] != "ok").sum()),
            "passed": int((verdict == "valid").sum()), "invalid": int((verdict == "invalid").sum()),
            "unknown": int((verdict == "unknown").sum())}


def point_stats(data: SweepData, columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Per point: its parameters, run counts by verdict, each metric pooled over its runs, latency
    percentiles of its merged histogram, and `columns` (runs-table columns) summarised per run."""
    out = []
    for point, group in data.runs.groupby("point", sort=True):
        first = group.iloc[0]
        ok = group[group["status"] == "ok"]
        row = {"point": int(point), "point_key": first.get("point_key") or "",
               "params": {p: _scalar(first.get(p)) for p in data.params}, **_verdict_counts(group)}
        row.update({name: pooled(data, ok, m) for name, m in METRICS.items()})
        row["latency_ms"] = merged_latency(data, [int(point)])
        row["unquiet"] = int(ended(data.column("quiescence_reached", ok), False).sum())
        row["columns"] = {c: column_stats(data, ok, c) for c in columns}
        out.append(row)
    return out


def axes(data: SweepData) -> list[tuple[str, ...]]:
    """The sweep's axes (module docstring): each grid parameter alone, then the zip's together."""
    grid = [(p,) for p in data.params if p not in data.zipped]
    return grid + ([tuple(data.zipped)] if data.zipped else [])


def axis_name(axis: str | tuple[str, ...]) -> str:
    """`rate`, or a zip axis `(batch, threads)`."""
    axis = _axis(axis)
    return axis[0] if len(axis) == 1 else f"({', '.join(axis)})"


def _axis(axis: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _groups(data: SweepData, frame: pd.DataFrame, axis: tuple[str, ...]) -> list[tuple[Any, str, pd.DataFrame]]:
    """(value, label, runs) per value of an axis: a grid parameter's values sorted; a zip axis's
    tuples in the file's order (its first point), labelled `a=1, b=2`."""
    if len(axis) == 1 and axis[0] not in data.zipped:
        return [(_scalar(v), str(_scalar(v)), g) for v, g in frame.groupby(axis[0], sort=True, dropna=False)]
    grouped = sorted(frame.groupby(list(axis), sort=False, dropna=False), key=lambda vg: int(vg[1]["point"].min()))
    out = []
    for value, group in grouped:
        values = tuple(_scalar(v) for v in (value if isinstance(value, tuple) else (value,)))
        label = str(values[0]) if len(axis) == 1 else ", ".join(f"{n}={v}" for n, v in zip(axis, values, strict=True))
        out.append((values[0] if len(axis) == 1 else values, label, group))
    return out


def marginals(data: SweepData, param: str | tuple[str, ...], metric: Metric | None,
              column: str | None = None) -> list[dict[str, Any]]:
    """Per value of an axis (a parameter, or the zip's tuple), every other axis and every seed
    pooled: `metric` pooled, or `column` summarised per run (`column_stats`), with the merged
    latency percentiles and each run's own p99 (`p99_runs`)."""
    axis = _axis(param)
    others = [axis_name(a) for a in axes(data) if not set(a) & set(axis)]
    out = []
    for value, label, group in _groups(data, data.ok, axis):
        row = {"value": value, "label": label, "pooled_over": others,
               "latency_ms": merged_latency(data, sorted(int(p) for p in group["point"].unique())),
               "p99_runs": [float(v) for v in _numbers(data.column("latency_ms_p99", group)).dropna().tolist()]}
        if column is not None:
            row.update(column_stats(data, group, column))
        elif metric is not None:
            row.update(pooled(data, group, metric))
        out.append(row)
    return out


def cells(data: SweepData, row_param: str | tuple[str, ...], col_param: str | tuple[str, ...],
          metric: Metric | None, column: str | None = None) -> list[dict[str, Any]]:
    """Per (row, column) value pair of two axes, the rest pooled: the metric's pooled rate,
    `column` summarised per run, or with neither the merged latency percentiles. A zip axis's
    values are labels, ranked in the file's order (`row_rank`, `col_rank`)."""
    out = []
    for r, r_label, by_row in _groups(data, data.ok, _axis(row_param)):
        for c, c_label, group in _groups(data, by_row, _axis(col_param)):
            cell: dict[str, Any] = {"row": r if isinstance(r, str | int | float) else r_label,
                    "col": c if isinstance(c, str | int | float) else c_label,
                    "row_rank": int(group["point"].min()) if _axis(row_param)[0] in data.zipped else None,
                    "col_rank": int(group["point"].min()) if _axis(col_param)[0] in data.zipped else None,
                    "runs": len(group)}
            if column is not None:
                cell.update(column_stats(data, group, column))
            elif metric is None:
                cell["latency_ms"] = merged_latency(data, sorted(int(p) for p in group["point"].unique()))
            else:
                cell.update(pooled(data, group, metric))
            out.append(cell)
    return out


def ended(reached: pd.Series, quiet: bool) -> pd.Series:
    """Runs whose `quiescence_reached` is `quiet` (a null, not judged, is neither)."""
    return reached.map(lambda v: v is not None and not pd.isna(v) and bool(v) == quiet).astype(bool)


def _scalar(value: Any) -> Any:
    """A plain Python value (numpy scalars → int/float/bool) for labels and JSON."""
    return value.item() if isinstance(value, np.generic) else value


# ---------------------------------------------------------------- whole-sweep summaries

def totals(data: SweepData) -> dict[str, Any]:
    ok = data.ok

    def total(name: str) -> int | float | None:
        col = _numbers(data.column(name, ok))
        return None if col.isna().all() else _scalar(col.sum())

    compiled = data.column("compiled", ok)
    return {"runs": len(data.runs), "ok": len(ok), **{k: total(k) for k in (
        "sent_ok", "consumed", "lost", "duplicates", "sim_time_ms")},
        "wall_s": _scalar(_numbers(data.column("wall_s", data.runs)).sum()),
        "compiled": int(compiled.map(lambda v: v is True or v is np.True_).sum()),  # the runs table's `compiled`
        "compiled_known": int(compiled.map(lambda v: isinstance(v, bool | np.bool_)).sum())}


def delivery_counts(data: SweepData) -> list[tuple[int, int]]:
    """(successful deliveries of an acked message, how many messages) over every ok run."""
    merged: dict[int, int] = {}
    for hist in data.column("delivery_hist").dropna():
        for deliveries, n in enumerate(hist):
            merged[deliveries] = merged.get(deliveries, 0) + int(n)
    return sorted(merged.items())


def coverage(data: SweepData) -> dict[str, Any] | None:
    """Per rare-state point (sim/coverage.py): runs reaching it and times reached in all; the
    runs that recorded coverage; None if no run did (results of an older rmqsim)."""
    maps = [m for m in data.column("coverage").tolist() if isinstance(m, dict) or isinstance(m, list)]
    if not maps:
        return None
    reached: dict[str, int] = {}
    times: dict[str, int] = {}
    for m in maps:
        for name, n in (m.items() if isinstance(m, dict) else m):
            reached[name] = reached.get(name, 0) + (1 if n else 0)
            times[name] = times.get(name, 0) + int(n or 0)
    return {"runs": len(maps), "points": {name: {"runs": reached[name], "times": times[name]}
                                          for name in sorted(reached)}}


def quiescence(data: SweepData) -> dict[str, Any]:
    """Runs that ended quiet, unquiet or unjudged, and what still moved in the unquiet ones (most
    runs first, ties by name: a map's key order is the reader's, Spark's or Arrow's)."""
    reached = data.column("quiescence_reached")
    unquiet = data.ok[ended(reached, False)]
    moving: dict[str, int] = {}
    for m in data.column("quiescence_unsettled", unquiet).dropna():
        for kind, n in (m.items() if isinstance(m, dict) else m):
            if n:
                moving[kind] = moving.get(kind, 0) + 1
    return {"runs": len(data.ok), "quiet": int(ended(reached, True).sum()), "unquiet": len(unquiet),
            "unjudged": int(reached.isna().sum()), "moving_runs": dict(sorted(moving.items(), key=lambda kv: (-kv[1], kv[0]))),
            "unquiet_ids": unquiet["run_id"].tolist()}


def failing_runs(data: SweepData, limit: int) -> dict[str, Any]:
    """Runs whose verdict is invalid or unknown, or that failed to run (run id order, at most
    `limit`), and how many there are in all."""
    runs = data.runs
    verdict = data.column("verdict", runs)
    bad = runs[(runs["status"] != "ok") | verdict.isin(["invalid", "unknown"])]
    rows = []
    for _i, r in bad.head(limit).iterrows():
        row = {c: (None if _missing(r.get(c)) else r.get(c)) for c in
               ("run_id", "status", "verdict", "verdict_failures", "error", "repro", "output_files")}
        rows.append(row)
    return {"total": len(bad), "rows": rows}


def failed_runs(data: SweepData) -> list[dict[str, Any]]:
    failed = data.runs[data.runs["status"] != "ok"]
    return [{"run_id": r["run_id"], "error": None if _missing(r.get("error")) else r.get("error"),
             "repro": None if _missing(r.get("repro")) else r.get("repro")} for _i, r in failed.iterrows()]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def txn_checks(data: SweepData) -> dict[str, Any] | None:
    """Transactional runs: messages by number of check-backs over every run, and checks per second
    of the timeline run; None without any transactional run."""
    hists = [h for h in data.column("txn_checks_hist").tolist() if isinstance(h, list | np.ndarray)]
    if not hists:
        return None
    merged: dict[int, int] = {}
    for hist in hists:
        for checks, n in enumerate(hist):
            merged[checks] = merged.get(checks, 0) + int(n)
    tl = data.timeline or {}
    return {"histogram": sorted(merged.items()), "run": data.timeline_run,
            "per_second": list(zip(tl.get("txn_checks_second") or [], tl.get("txn_checks_count") or [], strict=True))}
