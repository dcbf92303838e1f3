"""The per-run report's transaction panel (analysis/reports/txn_data.py): what it reads off the trace agrees
with the transaction checker's ground truth (analysis/checkers/txn_checker.py), and tells the story of
scenarios/txn_producers_down.yaml over several seeds: the producers resolve their transactions
until they shut down at 15 s, the rest wait, are checked back every round by the broker and are
discarded after transactionCheckMax (15) checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import rmqsim
from analysis.checkers.checks import percentiles_ms
from analysis.reports import run_data as rd
from analysis.reports import txn_data as td
from analysis.reports import txn_figures
from tests.conftest import ROOT

SHUTDOWN_S = 15  # producers[0].transaction.shutdown_ms
CHECK_MAX = 15  # transactionCheckMax (BrokerConfig default)


def _run(tmp_path: Path, scenario: str, seed: int, overrides: list[str] | None = None) -> rd.RunData:
    result = rmqsim.run(str(ROOT / "scenarios" / scenario), seed=seed, overrides=overrides, trace_dir=tmp_path / "trace")
    (tmp_path / "summary.json").write_text(json.dumps(result.summary))
    return rd.load_run(tmp_path)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_panel_tells_the_producers_down_story(seed: int, tmp_path: Path) -> None:
    data = _run(tmp_path, "txn_producers_down.yaml", seed)
    txn = data.summary["txn"]
    m = td.txn_messages(data)
    assert m is not None and len(m) == txn["transactions"]
    # the panel agrees with the checker's ground truth
    assert np.bincount(np.minimum(m.checks, len(txn["checks_histogram"]) - 1),
                       minlength=len(txn["checks_histogram"])).tolist() == txn["checks_histogram"]
    resolution = td.resolution_ms(m)["all"]
    assert percentiles_ms(np.round(resolution * 1000).astype(np.int64))["p99"] == txn["resolution_ms_p99"]
    assert int((m.outcome == td.DISCARDED).sum()) == txn["discarded"] > 0
    assert int((m.outcome == td.UNRESOLVED).sum()) == txn["pending"]
    outcomes = td.outcomes_per_second(m, data.end_s)
    assert sum(int(v.sum()) for v in outcomes.values()) == len(m) - txn["pending"]
    # the story: ends by the producer only while it is up; discards only after the check maximum
    by_producer = (m.outcome == td.COMMIT_BY_PRODUCER) | (m.outcome == td.ROLLBACK_BY_PRODUCER)
    assert m.resolved_us[by_producer].max() < (SHUTDOWN_S + 1) * 1_000_000
    assert (m.checks[m.outcome == td.DISCARDED] >= CHECK_MAX).all()
    assert (m.resolved_us[m.outcome == td.DISCARDED] > SHUTDOWN_S * 1_000_000 + CHECK_MAX * 30_000_000 * 0.9).all()
    waiting = td.waiting_per_second(m, data.end_s)
    undecided, checked = waiting.values()
    assert undecided[SHUTDOWN_S + 5] == txn["discarded"] and undecided[-1] == txn["pending"]
    assert (checked <= undecided).all() and checked.max() == txn["discarded"]


def test_a_run_without_transactions_draws_no_panel(tmp_path: Path) -> None:
    data = _run(tmp_path, "baseline.yaml", 1, ["duration_ms=4s", "settle_ms=1s", "producers[0].rate_per_s=50"])
    assert data.summary["txn"] is None and td.txn_messages(data) is None
    for _stem, _title, draw, why in txn_figures.FIGURES:
        assert draw(data) is None and why.startswith("no transactional producer in this run")
