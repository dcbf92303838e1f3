"""The bundled baseline: exactly-once delivery with no faults, its verdict, and the CLI's outputs
(summary, Parquet trace per record kind)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rmqsim
from tests.conftest import ROOT

SUMMARY_KEYS = {"scenario", "seed", "trace_sha256", "sent_ok", "lost", "duplicates",
                "duplicated_messages", "order_violations", "latency_ms"}


@pytest.fixture(scope="module")
def baseline():
    return rmqsim.run(ROOT / "scenarios" / "baseline.yaml")


def test_baseline_delivers_everything_exactly_once(baseline) -> None:
    s = baseline.summary
    assert s["sent_ok"] > 100_000  # 2 producers × 1000/s × 57 s, Poisson arrivals
    assert s["send_failed"] == 0 and s["sent_not_ok"] == 0
    assert s["stored"] == s["sent_ok"] == s["consumed"]
    assert s["lost"] == 0
    assert s["duplicates"] == 0 and s["duplicated_messages"] == 0


def test_baseline_latency_is_lan_scale(baseline) -> None:
    lat = baseline.summary["latency_ms"]
    assert 0.5 < lat["p50"] < lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert lat["p99"] < 50  # LAN round trips + 1 ms dispatch tick + exp(2 ms) consume time


def test_every_queue_is_owned_by_exactly_one_consumer(baseline) -> None:
    models = baseline.world.models
    owners: dict = {}
    for name in ("c-1", "c-2", "c-3"):
        for mq in models[name].process_queues:
            if mq.topic == "orders":
                assert mq not in owners, f"{mq} owned twice"
                owners[mq] = name
    assert len(owners) == 8
    counts = sorted(list(owners.values()).count(n) for n in ("c-1", "c-2", "c-3"))
    assert counts == [2, 3, 3]  # AllocateMessageQueueAveragely: 8 queues over 3 consumers


CLI_ARGS = ["--seed", "4", "--set", "duration_ms=8000", "--set", "settle_ms=4000"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """`rmqsim run baseline --trace` (short), once for the module: (process result, output dir)."""
    out_dir = tmp_path_factory.mktemp("cli-run")
    out = subprocess.run([sys.executable, "-m", "rmqsim.cli", "run", "scenarios/baseline.yaml", *CLI_ARGS,
                          "--out", str(out_dir), "--trace"], capture_output=True, text=True, cwd=str(ROOT))
    return out, out_dir


def test_baseline_verdict_is_valid_with_nothing_pending(baseline) -> None:
    s = baseline.summary
    assert s["verdict"] == "valid" and s["failures"] == [] and s["stopped_by"] is None
    assert s["pending_retry"] == 0 and s["dlq"] == 0
    assert s["order_violations"] is None  # billing consumes concurrently: order is not promised
    assert s["groups"]["billing"]["order_violations"] is None
    assert s["guarantees"] == [{"group": "billing", "guarantee": "at_least_once", "ok": True, "why": ""}]
    assert s["expectations"] == []


def test_cli_run_prints_seed_first_and_writes_summary(cli_run) -> None:
    out, out_dir = cli_run
    assert out.returncode == 0, out.stderr  # verdict valid
    lines = out.stdout.splitlines()
    assert lines[0] == "seed: 4" and "resolved sha256" in lines[1]
    assert "verdict: valid" in lines
    summary = json.loads((out_dir / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert set(summary["latency_ms"]) == {"p50", "p90", "p99", "p999", "max"}
    assert "wall_s" not in summary and "wall_s" in json.loads((out_dir / "run_meta.json").read_text())
    assert not list(out_dir.glob(".*tmp*")) and not list((out_dir / "trace").glob(".*"))  # atomic writes


def test_cli_trace_is_parquet_per_kind(cli_run) -> None:
    import pyarrow.parquet as pq

    from sim.trace import KINDS

    _out, out_dir = cli_run
    summary = json.loads((out_dir / "summary.json").read_text())
    files = sorted((out_dir / "trace").glob("*.parquet"))
    kinds = [f.name.removesuffix(".parquet") for f in files]
    assert {"producer.sent", "broker.stored", "consumer.consumed", "run.ended"} <= set(kinds)
    assert all(kind in KINDS for kind in kinds)
    tables = {kind: pq.read_table(f) for kind, f in zip(kinds, files, strict=True)}
    from sim.trace import (
        DETAIL_KINDS,  # written too, outside the digest and the record count (sim/trace.py)
    )

    assert sum(t.num_rows for k, t in tables.items() if k not in DETAIL_KINDS) == summary["records"]
    assert set(kinds) & DETAIL_KINDS
    for kind, table in tables.items():
        assert table.column_names == ["seq", "t_us", "node", *KINDS[kind]]
    seqs = sorted(s for t in tables.values() for s in t.column("seq").to_pylist())
    assert seqs == list(range(sum(t.num_rows for t in tables.values())))  # every record once, by emission position
    consumed = tables["consumer.consumed"]
    assert consumed.num_rows == summary["consumed"]  # one record per consumption (all ok here)


def test_digest_recomputes_from_the_parquet_trace(cli_run) -> None:
    from analysis.checkers.trace_store import trace_digest

    _out, out_dir = cli_run
    summary = json.loads((out_dir / "summary.json").read_text())
    assert trace_digest(out_dir / "trace") == summary["trace_sha256"]


def test_trace_files_hold_exactly_the_records(cli_run) -> None:
    """Read back in emission order, the Parquet trace is the in-memory record list, value for value
    and type for type (same scenario and seed, run in-process keeping its records)."""
    from analysis.checkers.trace_store import read_trace

    _out, out_dir = cli_run
    kept = rmqsim.run(ROOT / "scenarios" / "baseline.yaml", seed=4, overrides=["duration_ms=8000", "settle_ms=4000"],
                   keep_records=True, detail=True)  # a traced run emits the detail records (sim/trace.py)
    stored = list(read_trace(out_dir / "trace"))
    assert stored == kept.records
    assert [tuple(map(type, r)) for r in stored] == [tuple(map(type, r)) for r in kept.records]
