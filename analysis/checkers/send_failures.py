"""Every send whose result was not SEND_OK, kept whole but compact: the facts behind a write outage.

A send fails rarely, except during a fault, when every send to a topic may fail for tens of
seconds (about 40,000 sends at 1,000 msg/s behind a 43 s controller failover). The Ledger
(analysis/checkers/ledger.py) adds each `producer.send_failed` record, and each `producer.sent`
record whose status is not SEND_OK and not ONEWAY (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
SLAVE_NOT_AVAILABLE: stored, but not acknowledged as the application asked), as 24 bytes plus two
small indexes: the result's time, the send() call's time (`born_us`), the message id, the broker of
its last attempt ("" when none was made) and the reason (a failure's reason, or the store status).
analysis/checkers/availability.py turns them into write outages.
"""

from __future__ import annotations

from array import array

import numpy as np

TIMEOUT_MARK = "timeout"  # reasons naming a timeout: call_timeout, async_call_timeout, timeout (models/producer/)


class SendFailures:
    """The failed and not-OK sends of a run, in the order their results were recorded."""

    __slots__ = ("t_us", "born_us", "msg_id", "broker", "reason", "broker_names", "reason_names", "_brokers",
                 "_reasons")

    def __init__(self) -> None:
        self.t_us = array("q")  # the result's time (the record's)
        self.born_us = array("q")  # the send() call's time
        self.msg_id = array("q")
        self.broker = array("H")  # index into broker_names
        self.reason = array("H")  # index into reason_names
        self.broker_names: list[str] = []
        self.reason_names: list[str] = []
        self._brokers: dict[str, int] = {}
        self._reasons: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.t_us)

    def add(self, t_us: list[int], born_us: list[int], msg_ids: list[int], brokers: list[str],
            reasons: list[str]) -> None:
        """One chunk's failures, each list in record order."""
        self.t_us.extend(t_us)
        self.born_us.extend(born_us)
        self.msg_id.extend(msg_ids)
        self.broker.extend(_index(self._brokers, self.broker_names, b) for b in brokers)
        self.reason.extend(_index(self._reasons, self.reason_names, r) for r in reasons)

    def columns(self) -> dict[str, np.ndarray]:
        """The failures as NumPy columns (views of the arrays; `broker`, `reason`: indexes)."""
        return {"t_us": np.frombuffer(self.t_us, np.int64), "born_us": np.frombuffer(self.born_us, np.int64),
                "msg_id": np.frombuffer(self.msg_id, np.int64), "broker": np.frombuffer(self.broker, np.uint16),
                "reason": np.frombuffer(self.reason, np.uint16)}

    def timeouts(self) -> np.ndarray:
        """Per reason index: whether it names a timeout."""
        return np.array([TIMEOUT_MARK in name for name in self.reason_names], bool)


def _index(table: dict[str, int], names: list[str], name: str) -> int:
    index = table.get(name)
    if index is None:
        index = table[name] = len(names)
        names.append(name)
    return index
