"""Sweep building blocks without Spark: point expansion, latency histograms, fault windows, and
the `runs` row of a run (verdict, retry-path columns)."""

from __future__ import annotations

import math
import random

import pytest

from analysis.checkers.checks import latency_samples
from analysis.checkers.run_rows import (
    LAT_BUCKETS_PER_OCTAVE,
    bucket_value_ms,
    fault_windows,
    histogram_percentiles_ms,
    latency_bucket,
)
from analysis.sweeps.spec import load_sweep, run_id
from sim.trace import FAULT_HEALED, FAULT_INJECTED
from tests.conftest import ROOT


def test_grid_is_crossed_with_zip_rows_in_file_order(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"""
name: expand
base: {ROOT / "scenarios" / "baseline.yaml"}
set: {{duration_ms: 5s}}
grid:
  rate: {{key: "producers[0].rate_per_s", values: [100, 200]}}
zip:
  batch: {{key: "consumers[0].client.pull_batch_size", values: [1, 32]}}
  threads: {{key: "consumers[0].client.consume_thread_max", values: [2, 20]}}
seeds: [5, 9]
""")
    sweep = load_sweep(path)
    assert [p.params for p in sweep.points] == [
        {"rate": 100, "batch": 1, "threads": 2}, {"rate": 100, "batch": 32, "threads": 20},
        {"rate": 200, "batch": 1, "threads": 2}, {"rate": 200, "batch": 32, "threads": 20}]
    assert sweep.runs[:3] == [(0, 5), (0, 9), (1, 5)] and len(sweep.runs) == 8
    assert run_id(3, 9) == "p0003-s9"
    data = sweep.scenario_data(sweep.points[3])
    assert data["duration_ms"] == "5s"  # the sweep's `set`, before the point's own overrides
    assert data["producers"][0]["rate_per_s"] == 200
    assert data["consumers"][0]["client"] == {"pull_batch_size": 32, "consume_thread_max": 20}
    assert sweep.digest() == load_sweep(path).digest()


def test_histogram_percentiles_are_within_bucket_error_of_exact() -> None:
    rng = random.Random(4)
    values = [int(rng.lognormvariate(8, 1.2)) for _ in range(20_000)]
    counts: dict[int, int] = {}
    for v in values:
        counts[latency_bucket(v)] = counts.get(latency_bucket(v), 0) + 1
    pct = histogram_percentiles_ms(counts.keys(), counts.values(), (("p50", 0.5), ("p999", 0.999)))
    ordered = sorted(values)
    half_bucket = 2 ** (0.5 / LAT_BUCKETS_PER_OCTAVE) - 1  # < 0.6 %
    for name, q in (("p50", 0.5), ("p999", 0.999)):
        exact = ordered[math.ceil(q * len(ordered)) - 1] / 1000
        assert pct[name] == pytest.approx(exact, rel=half_bucket + 1e-9)


def test_bucket_edges() -> None:
    assert latency_bucket(0) == 0 and bucket_value_ms(0) == 0.0
    for value_us in (1, 2, 3, 999, 1000, 1001, 123_456_789):
        b = latency_bucket(value_us)
        assert 2 ** ((b - 1) / LAT_BUCKETS_PER_OCTAVE) <= value_us < 2 ** (b / LAT_BUCKETS_PER_OCTAVE) * 1.000001
    assert histogram_percentiles_ms([], [], (("p50", 0.5),)) == {"p50": None}


def test_fault_windows_pair_injections_with_heals_and_restarts() -> None:
    def rec(t_ms: float, kind: str, fault: str, target: str, detail: str = "") -> tuple:
        return (int(t_ms * 1000), "faults", kind, fault, target, detail)

    records = [
        rec(1000, FAULT_INJECTED, "process_crash", "c-1"),
        rec(1500, FAULT_INJECTED, "pause", "c-2", "duration_ms=300.0"),
        rec(2000, FAULT_INJECTED, "partition", "a|b"),
        rec(3000, FAULT_INJECTED, "restart", "c-1"),
        rec(3500, FAULT_HEALED, "partition", "a|b"),
        rec(4000, FAULT_INJECTED, "disk_slow", "broker-a", "factor=5"),
        rec(6000, FAULT_HEALED, "all", "cluster", "end of fault phase"),
        rec(6500, FAULT_INJECTED, "power_loss", "broker-b"),  # never healed: open until the end
    ]
    windows = fault_windows(records, end_ms=9000)
    assert [(w["kind"], w["start_ms"], w["end_ms"]) for w in windows] == [
        ("process_crash", 1000, 3000), ("pause", 1500, 1800), ("partition", 2000, 3500),
        ("disk_slow", 4000, 6000), ("power_loss", 6500, 9000)]


def _baseline(*overrides: str):
    from rmqsim.scenario import spec as scenario

    return scenario.load(ROOT / "scenarios" / "baseline.yaml", list(overrides))


@pytest.fixture(scope="module")
def listener_fails():
    """Short baseline whose listener fails 5 % of consumptions: at the end the failed ones are
    still in back-off (the retry queue is not yet allocated), i.e. pending_retry, not lost."""
    import rmqsim

    return rmqsim.run(_baseline("duration_ms=10s", "settle_ms=5s", "producers[0].rate_per_s=300",
                             "consumers[0].failure_probability=0.05"), details=True)


def _row(result) -> dict:
    from analysis.checkers.run_rows import runs_row

    return runs_row(result.summary, result.details, result.fault_records, result.meta)


def _fits_runs_schema(row: dict) -> None:
    """The row's metric columns convert to the runs table's types and read back unchanged (maps,
    such as send_share_by_broker, read back as dicts)."""
    import pyarrow as pa

    from analysis.sweeps.results_store import flatten_row, runs_schema

    schema = runs_schema({})
    row = flatten_row(row)
    assert {"latency_ms_p99", "duplicate_causes_redelivery", "warmup_ms"} <= set(row) & set(schema.names)
    columns = [name for name in schema.names if name in row]
    table = pa.Table.from_pylist([{name: row[name] for name in columns}],
                                 schema=pa.schema([schema.field(name) for name in columns]))
    assert table.to_pylist(maps_as_pydicts="strict")[0] == {name: row[name] for name in columns}


def test_runs_row_verdict_and_retry_columns(listener_fails) -> None:
    s, row = listener_fails.summary, _row(listener_fails)
    assert s["pending_retry"] > 0 and s["lost"] == 0 and s["dlq"] == 0
    assert (row["verdict"], row["verdict_failures"], row["stopped_by"]) == ("valid", "", None)
    assert (row["pending_retry"], row["dlq"], row["lost"]) == (s["pending_retry"], s["dlq"], s["lost"])
    assert row["order_violations"] is None  # not judged: no orderly group
    assert row["loss_rate"] == 0.0  # in back-off is not lost
    assert sum(row["delivery_hist"]) == s["sent_ok"] and row["delivery_hist"][0] == s["pending_retry"]
    samples = latency_samples(listener_fails.details)
    assert len(samples["born_us"]) == s["sent_ok"] - s["pending_retry"]
    measured = int((samples["born_us"] >= s["warmup_ms"] * 1000).sum())
    assert 0 < measured < len(samples["born_us"])  # the warm-up's messages are not in the histogram
    assert sum(row["lat_hist_count"]) == measured and row["warmup_ms"] == s["warmup_ms"]
    assert row["acked_deliveries"] == s["sent_ok"] * len(s["groups"])
    _fits_runs_schema(row)


def test_runs_row_of_a_bounded_run_is_unknown() -> None:
    import rmqsim

    result = rmqsim.run(_baseline("duration_ms=5s", "settle_ms=1s"), max_events=2_000, details=True)
    row = _row(result)
    assert (row["verdict"], row["stopped_by"]) == ("unknown", "max_events")
    assert row["verdict_failures"] == "run stopped at its max_events bound: nothing can be judged"
    _fits_runs_schema(row)


def test_runs_row_names_every_failure() -> None:
    import rmqsim

    result = rmqsim.run(_baseline("duration_ms=5s", "settle_ms=2s", "producers[0].rate_per_s=200",
                               "expect={lost: {min: 1}, latency_ms.p99: {max: 0.001}}"), details=True)
    row = _row(result)
    assert row["verdict"] == "invalid" and row["lost"] == 0
    assert [f.split(":")[0] for f in result.summary["failures"]] == ["expect lost", "expect latency_ms.p99"]
    assert row["verdict_failures"] == "; ".join(result.summary["failures"])


def test_runs_table_columns_are_flat_names_duckdb_and_pandas_read_as_written(listener_fails, tmp_path) -> None:
    """The documented metric columns (`latency_ms_p99`, `duplicate_causes_redelivery`, ...) are
    plain top-level columns: DuckDB SQL and pandas take them unquoted, exactly as written."""
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from analysis.sweeps import results_store as store

    s = listener_fails.summary
    row = {"run_id": "p0000-s1", "status": "ok", **_row(listener_fails)}
    schema = store.runs_schema({})
    assert not [f.name for f in schema if "." in f.name or pa.types.is_struct(f.type)]
    store.write_run_row(tmp_path, row, schema)
    path = tmp_path / "runs" / "p0000-s1.parquet"
    got = duckdb.sql(f"SELECT latency_ms_p99, latency_ms_max, duplicate_causes_redelivery, acked_deliveries "
                     f"FROM '{path}'").fetchall()
    assert got == [(s["latency_ms"]["p99"], s["latency_ms"]["max"], s["duplicate_causes"]["redelivery"],
                    s["sent_ok"] * len(s["groups"]))]
    frame = pd.read_parquet(path)
    assert frame.loc[0, "latency_ms_p50"] == s["latency_ms"]["p50"] and frame.query("latency_ms_p99 > 0").shape[0] == 1


def test_flatten_names_nested_trees_with_sql_safe_names() -> None:
    import pyarrow as pa

    from analysis.sweeps.results_store import flatten_row, flatten_schema

    nested = pa.schema([("send_latency_ms", pa.struct([("p99.9", pa.float64()), ("by", pa.struct([("b-1", pa.int64())]))])),
                        ("fault_windows", pa.list_(pa.struct([("kind", pa.string())])))])
    assert flatten_schema(nested).names == ["send_latency_ms_p99_9", "send_latency_ms_by_b_1", "fault_windows"]
    assert flatten_row({"send_latency_ms": {"p99.9": 1.5, "by": {"b-1": 2}}, "x": [1]}) == \
        {"send_latency_ms_p99_9": 1.5, "send_latency_ms_by_b_1": 2, "x": [1]}
