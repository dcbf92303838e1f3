"""The application behind a TransactionListener: its local transactions and its transaction log.

Not a RocketMQ class: the model of the user's code that `executeLocalTransaction` and
`checkLocalTransaction` call (settings: models/producer/transaction_config.py).

- A local transaction starts when the half send returns SEND_OK and lasts a `local_transaction_ms`
  draw. At its end its outcome is decided — COMMIT with `commit_probability`, else ROLLBACK —
  and that is the ground truth (`txn.local_done`). What executeLocalTransaction *returns* may
  differ: UNKNOW with `unknow_probability`, an exception (counted as UNKNOW) with
  `exception_probability`, else the outcome. A process crash before the end kills the
  transaction: it never commits (the database rolls it back).
- The transaction log (what checkLocalTransaction reads) holds the outcome `log_lag_ms` after
  the decision; until then, and while the transaction runs, a check answers UNKNOW. A check may
  also answer UNKNOW at random (`check_unknow_probability`). A transaction the log does not know
  (never decided here, or lost) is answered `unknown_transaction_answer`.
- By default the log is durable and shared by the group's instances (a database): any instance
  answers for any transaction. With `log_lost_on_crash` it is each instance's memory: a crash
  empties it, and other instances never know its transactions.
"""

from __future__ import annotations

from typing import Any

from models.producer.transaction_config import TransactionSpec

COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW = "COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"
EXCEPTION = "EXCEPTION"
COMMIT, ROLLBACK = "COMMIT", "ROLLBACK"


class TransactionLog:
    """msg id (transactionId) → (outcome, readable from µs). One per group, or per instance."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[str, int]] = {}


class LocalTransactionApp:
    def __init__(self, node: Any, spec: TransactionSpec, log: TransactionLog) -> None:
        self.node = node
        self.spec = spec
        self.log = log
        stream = node.env.rng.stream(f"{node.name}.transaction")
        self._duration_us = spec.local_transaction_ms.sampler_us(stream)
        self._lag_us = spec.log_lag_ms.sampler_us(stream)
        self._check_us = spec.check_time_ms.sampler_us(stream)
        self._random = stream.random
        self.running: dict[int, None] = {}  # transactions in progress (heap: a crash kills them)
        node.on_crash(self.running.clear)
        if spec.log_lost_on_crash:
            node.on_crash(log.entries.clear)

    def begin(self, msg_id: int) -> int:
        """A local transaction starts; returns its duration (µs)."""
        self.running[msg_id] = None
        return self._duration_us()

    def decide(self, msg_id: int) -> tuple[str, str]:
        """The transaction ends: (outcome, what executeLocalTransaction returns)."""
        self.running.pop(msg_id, None)
        spec = self.spec
        outcome = COMMIT if self._random() < spec.commit_probability else ROLLBACK
        self.log.entries[msg_id] = (outcome, self.node.env._now + self._lag_us())
        draw = self._random()
        if draw < spec.unknow_probability:
            return outcome, UNKNOW
        if draw < spec.unknow_probability + spec.exception_probability:
            return outcome, EXCEPTION
        return outcome, COMMIT_MESSAGE if outcome == COMMIT else ROLLBACK_MESSAGE

    def record_rollback(self, msg_id: int) -> None:
        """A half send stored but not OK: the client rolls back without running the transaction."""
        self.log.entries[msg_id] = (ROLLBACK, self.node.env._now)

    def check_duration_us(self) -> int:
        return self._check_us()

    def check(self, msg_id: int) -> str:
        """checkLocalTransaction's answer, read from the log now."""
        if self.spec.check_unknow_probability and self._random() < self.spec.check_unknow_probability:
            return UNKNOW
        if msg_id in self.running:
            return UNKNOW
        entry = self.log.entries.get(msg_id)
        if entry is None:
            return self.spec.unknown_transaction_answer
        outcome, readable_us = entry
        if self.node.env._now < readable_us:
            return UNKNOW
        return COMMIT_MESSAGE if outcome == COMMIT else ROLLBACK_MESSAGE
