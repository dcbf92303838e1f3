"""The checkers over a record stream: `check` feeds a Ledger every record and judges it.

The metrics' definitions and their computation are analysis/checkers/metrics.py (`judge_units`, what
`Ledger.results()` returns); this module is above both the ledger and them, so it may build a
Ledger. The names other modules read from here (`LOSS_CAUSES`, `DELIVERY_COUNT_CAP`,
`latency_samples`, `percentiles_ms`) are those of analysis/checkers/metrics.py and analysis/checkers/percentiles.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from analysis.checkers.ledger import Ledger
from analysis.checkers.metrics import DELIVERY_COUNT_CAP, LOSS_CAUSES, latency_samples
from analysis.checkers.percentiles import percentiles_ms

__all__ = ["DELIVERY_COUNT_CAP", "LOSS_CAUSES", "check", "latency_samples", "percentiles_ms"]


def check(records: Iterable[tuple], subscriptions: dict[str, str], producers: list[Any],
          broadcasting: Iterable[str] = (), orderly: Iterable[str] = (),
          members: dict[str, list[str]] | None = None, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The metrics of a record stream (tests, stored traces): a Ledger fed every record."""
    ledger = Ledger(list(producers), subscriptions, tuple(broadcasting), tuple(orderly), members)
    ledger.feed(list(records))
    return ledger.results(details)
