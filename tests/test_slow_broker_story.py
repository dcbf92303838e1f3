"""The README's worked example, as a fault story over several seeds, read the way the per-run
report reads it (analysis/reports/run_data.py): one of two brokers turns slow — sends to it slow down by
an order of magnitude, sends to the other do not, and the producers keep sending it half the
messages (RocketMQ's default `sendLatencyFaultEnable=false`: no latency-based avoidance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rmqsim
from analysis.reports import run_data as rd
from rmqsim.scenario import spec as scenario
from tests.conftest import ROOT

WINDOW_S = (10, 20)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_slow_broker_slows_its_sends_and_keeps_its_share(seed: int, tmp_path: Path) -> None:
    sc = scenario.load(ROOT / "scenarios" / "slow_broker.yaml",
                       ["duration_ms=30s", "settle_ms=4s", "producers[0].rate_per_s=200",
                        "faults[0].at_ms=10s", "faults[0].duration_ms=10s"])
    result = rmqsim.run(sc, seed=seed, trace_dir=tmp_path / "trace")
    (tmp_path / "summary.json").write_text(__import__("json").dumps(result.summary))
    data = rd.load_run(tmp_path)
    sent = data.kind(rd.PRODUCER_SENT)
    born_s = sent["born_us"] / 1e6
    inside = (born_s >= WINDOW_S[0] + 0.5) & (born_s < WINDOW_S[1])
    outside = (born_s >= data.warmup_ms / 1000) & ((born_s < WINDOW_S[0]) | (born_s >= WINDOW_S[1] + 1))
    latency = (sent["t_us"] - sent["born_us"]) / 1000

    def p99(mask: np.ndarray) -> float:
        return float(np.percentile(latency[mask], 99))

    to_b, to_a = sent["broker"] == "broker-b", sent["broker"] == "broker-a"
    assert p99(inside & to_b) >= 20 * p99(outside & to_b)
    assert p99(inside & to_a) <= 3 * p99(outside & to_a)
    share_b = float((inside & to_b).sum() / inside.sum())
    assert 0.4 <= share_b <= 0.6, share_b
    assert result.summary["lost"] == 0 and result.summary["verdict"] == "valid"
