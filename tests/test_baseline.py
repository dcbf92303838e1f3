"""The bundled baseline: exactly-once delivery with no faults, and the CLI's outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import sim
from tests.conftest import ROOT

SUMMARY_KEYS = {"scenario", "seed", "trace_sha256", "sent_ok", "lost", "duplicates",
                "duplicated_messages", "order_violations", "latency_ms"}


@pytest.fixture(scope="module")
def baseline():
    return sim.run(ROOT / "scenarios" / "baseline.yaml")


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


def test_cli_run_prints_seed_first_and_writes_summary(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "sim.cli", "run", "scenarios/baseline.yaml", "--seed", "4",
                          "--set", "duration_ms=8000", "--set", "settle_ms=4000", "--out", str(tmp_path),
                          "--trace"], capture_output=True, text=True, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "seed: 4" and "resolved sha256" in lines[1]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert set(summary["latency_ms"]) == {"p50", "p90", "p99", "p999", "max"}
    assert "wall_s" not in summary and "wall_s" in json.loads((tmp_path / "run_meta.json").read_text())
    trace_lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    assert len(trace_lines) == summary["records"]
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes leave no temp files


def test_digest_recomputes_from_jsonl(tmp_path) -> None:
    from sim import trace

    result = sim.run(ROOT / "scenarios" / "baseline.yaml", overrides=["duration_ms=5000", "settle_ms=2000"])
    path = tmp_path / "t.jsonl"
    trace.write_jsonl(result.records, str(path))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    tuples = [tuple(r.values()) for r in rows]
    assert trace.digest(tuples) == result.summary["trace_sha256"]
