"""Transactional atomicity: did each transactional message become visible iff its local
transaction committed? From the simulator's ground truth (records), per message.

The population is every message of a transactional producer of which a broker stored a half
message (a send that failed after a timed-out attempt had stored one counts too). Per message:

- committed: its local transaction decided COMMIT (`txn.local_done`); anything else — ROLLBACK,
  a transaction that never ended (its process died), a half send that failed — never committed;
- visible: consumed successfully by a consumer group subscribed to its topic; in a scenario
  without such a group, stored in its real topic by a commit (`visible_by` says which);
- `committed_visible`, `rolled_back_hidden`: as promised;
- `committed_lost` (violation): committed, not visible after the settle period, with a cause —
  `real_message_lost` (a commit wrote the real message, a power loss destroyed it and nothing
  wrote it again), `rolled_back` (the broker applied a ROLLBACK: the check got a wrong answer),
  `discarded` (the half reached transactionCheckMax and went to TRANS_CHECK_MAX_TIME_TOPIC),
  `half_lost` (a power loss destroyed the unresolved half);
- `rolled_back_visible` (violation): visible although never committed, with the cause
  `commit_by_check` or `commit_by_producer` (who sent the COMMIT that was applied);
- `pending`: committed, not visible, not lost: the half is still being checked when the run
  ends, or the real message is in a consumer's retry path;
- `discarded`: halves that reached the check maximum (whatever their outcome; reported, not
  hidden); `double_commits`: messages committed more than once (no idempotence in RocketMQ:
  their duplicates are attributed to `txn_double_commit`);
- `checks_p50`, `checks_max`: checks per message; `resolution_ms_p50/p99`: half send() call →
  the first end applied to it, or its discard; `checks_per_second`: checks by second of the run
  (check storms), with `checks_per_s_max`; `checks_histogram`: messages by number of checks
  (index = checks, the last bin 16 and more).

`txn_violations` = committed_lost + rolled_back_visible. Both are null when the scenario has no
transactional producer.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from typing import Any

import numpy as np

from models.records import (
    BROKER_STORED,
    PRODUCER_SEND_FAILED,
    PRODUCER_SENT,
    TXN_CHECK_ANSWERED,
    TXN_CHECKED,
    TXN_DISCARDED,
    TXN_ENDED,
    TXN_HALF_LOST,
    TXN_LOCAL_DONE,
)

SEQ_BITS = 32
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # TopicValidator (models/message.py has it too)
SEQ_MASK = (1 << SEQ_BITS) - 1
GROW = 4096
# per-message state bits
HALF_STORED, COMMITTED, DECIDED, COMMIT_APPLIED, ROLLBACK_APPLIED = 1, 2, 4, 8, 16
DISCARDED, HALF_LOST, COMMIT_FROM_CHECK, COMMIT_FROM_PRODUCER = 32, 64, 128, 256
CHECKS_HIST_CAP = 16  # checks-per-message histogram: 16 and more in the last bin (the default maximum is 15)
CAUSES_LOST = ("real_message_lost", "rolled_back", "discarded", "half_lost")
CAUSES_VISIBLE = ("commit_by_check", "commit_by_producer")


class TxnLedger:
    """Per transactional producer: compact arrays by message sequence number; a Tracer chunk observer."""

    def __init__(self, producers: list[Any]) -> None:
        self.transactional = [bool(getattr(p, "transactional", False)) for p in producers]
        self.topics = [p.topic for p in producers]
        n = len(producers)
        self.state = [array("H") for _ in range(n)]
        self.checks = [array("H") for _ in range(n)]
        self.commits = [bytearray() for _ in range(n)]
        self.born_us = [array("q") for _ in range(n)]
        self.resolved_us = [array("q") for _ in range(n)]
        self.checks_by_second: Counter = Counter()
        self.answers: Counter = Counter()
        self.local_states: Counter = Counter()
        self._handlers = {PRODUCER_SENT: self._sent, PRODUCER_SEND_FAILED: self._send_failed,
                          BROKER_STORED: self._stored, TXN_LOCAL_DONE: self._local_done, TXN_CHECKED: self._checked,
                          TXN_ENDED: self._ended, TXN_DISCARDED: self._discarded, TXN_HALF_LOST: self._half_lost,
                          TXN_CHECK_ANSWERED: self._answered}

    @property
    def enabled(self) -> bool:
        return any(self.transactional)

    def feed(self, chunk: list[tuple]) -> None:
        handlers = self._handlers
        for record in chunk:
            handler = handlers.get(record[2])
            if handler is not None:
                handler(record)

    def _slot(self, msg_id: int) -> tuple[int, int]:
        """(producer index, seq) of a transactional producer's message, arrays grown; (-1, 0) otherwise."""
        p = msg_id >> SEQ_BITS
        if p >= len(self.transactional) or not self.transactional[p]:
            return -1, 0
        seq = msg_id & SEQ_MASK
        if seq >= len(self.state[p]):
            for arr, fill in ((self.state[p], 0), (self.checks[p], 0), (self.born_us[p], -1),
                              (self.resolved_us[p], -1)):
                arr.extend(array(arr.typecode, [fill]) * (seq + GROW - len(arr)))
            self.commits[p].extend(bytes(seq + GROW - len(self.commits[p])))
        return p, seq

    def _sent(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p >= 0:
            self.born_us[p][seq] = r[10]

    def _send_failed(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p >= 0:
            self.born_us[p][seq] = r[8]

    def _stored(self, r: tuple) -> None:
        if r[4] == RMQ_SYS_TRANS_HALF_TOPIC:
            p, seq = self._slot(r[3])
            if p >= 0:
                self.state[p][seq] |= HALF_STORED

    def _local_done(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p >= 0:
            self.state[p][seq] |= DECIDED | (COMMITTED if r[4] == "COMMIT" else 0)
            self.local_states[r[5]] += 1

    def _checked(self, r: tuple) -> None:
        self.checks_by_second[r[0] // 1_000_000] += 1
        p, seq = self._slot(r[3])
        if p >= 0 and self.checks[p][seq] < 65535:
            self.checks[p][seq] += 1

    def _ended(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p < 0 or r[6] != 0:
            return
        if r[4] == "COMMIT":
            self.state[p][seq] |= COMMIT_APPLIED | (COMMIT_FROM_CHECK if r[5] else COMMIT_FROM_PRODUCER)
            self.commits[p][seq] = min(255, self.commits[p][seq] + 1)
        else:
            self.state[p][seq] |= ROLLBACK_APPLIED
        if self.resolved_us[p][seq] < 0:
            self.resolved_us[p][seq] = r[0]

    def _discarded(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p >= 0:
            self.state[p][seq] |= DISCARDED
            if self.resolved_us[p][seq] < 0:
                self.resolved_us[p][seq] = r[0]

    def _half_lost(self, r: tuple) -> None:
        p, seq = self._slot(r[3])
        if p >= 0:
            self.state[p][seq] |= HALF_LOST

    def _answered(self, r: tuple) -> None:
        self.answers[r[4]] += 1

    def unresolved(self) -> int:
        """Half messages stored and not yet resolved (no end applied, not discarded, not lost):
        transactions the broker is still checking back (the quiescence check, rmqsim/quiescence.py)."""
        done = COMMIT_APPLIED | ROLLBACK_APPLIED | DISCARDED | HALF_LOST
        total = 0
        for state in self.state:
            if len(state):
                arr = np.frombuffer(state, np.uint16)
                total += int(np.count_nonzero((arr & HALF_STORED != 0) & (arr & done == 0)))
        return total

    # --- results ----------------------------------------------------------------------------
    def outcomes(self, ledger: Any, p: int, n: int) -> tuple[dict[str, np.ndarray], bool]:
        """(outcome masks over producer `p`'s first `n` messages, judged by consumption)."""
        state = np.frombuffer(self.state[p], np.uint16)[:n]
        visible, pending_retry, consumed_basis = _visibility(ledger, p, self.topics[p], n)
        return _outcome_masks(state, visible, pending_retry), consumed_basis

    def message(self, ledger: Any, msg_id: int) -> dict[str, Any] | None:
        """One transactional message's outcome (the mask `results` counted it in), its checks,
        commits applied and whether it was discarded; None if it is not in the population."""
        p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
        if p >= len(self.transactional) or not self.transactional[p] or seq >= len(self.state[p]):
            return None
        outcomes, _basis = self.outcomes(ledger, p, len(self.state[p]))
        outcome = next((name for name, mask in outcomes.items() if mask[seq]), None)
        if outcome is None:
            return None
        state = self.state[p][seq]
        return {"outcome": outcome, "checks": self.checks[p][seq], "commits": self.commits[p][seq],
                "committed": bool(state & COMMITTED), "discarded": bool(state & DISCARDED)}

    def results(self, ledger: Any) -> dict[str, Any]:
        """`txn` and `txn_violations` (module docstring); null without a transactional producer.
        `ledger`: the run's analysis.checkers.ledger.Ledger (consumption by unit, copies stored)."""
        if not self.enabled:
            return {"txn": None, "txn_violations": None}
        c: Counter = Counter()
        lost_causes = dict.fromkeys(CAUSES_LOST, 0)
        visible_causes = dict.fromkeys(CAUSES_VISIBLE, 0)
        checks, resolution = [], []
        by_consumption = False
        for p, is_txn in enumerate(self.transactional):
            if not is_txn:
                continue
            n = len(self.state[p])
            state = np.frombuffer(self.state[p], np.uint16)[:n]
            pop = (state & HALF_STORED) != 0
            outcomes, consumed_basis = self.outcomes(ledger, p, n)
            by_consumption |= consumed_basis
            c["transactions"] += int(pop.sum())
            for outcome, mask in outcomes.items():
                kind, _, cause = outcome.partition(":")
                if kind == "committed_lost":
                    lost_causes[cause] += int(mask.sum())
                elif kind == "rolled_back_visible":
                    visible_causes[cause] += int(mask.sum())
                else:
                    c[kind] += int(mask.sum())
            c["discarded"] += int((pop & ((state & DISCARDED) != 0)).sum())
            c["double_commits"] += int((np.frombuffer(self.commits[p], np.uint8)[:n] > 1).sum())
            checks.append(np.frombuffer(self.checks[p], np.uint16)[:n][pop].astype(np.int64))
            born = np.frombuffer(self.born_us[p], np.int64)[:n]
            done = np.frombuffer(self.resolved_us[p], np.int64)[:n]
            ok = pop & (done >= 0) & (born >= 0)
            resolution.append(done[ok] - born[ok])
        committed_lost = sum(lost_causes.values())
        rolled_back_visible = sum(visible_causes.values())
        all_checks = np.concatenate(checks) if checks else np.zeros(0, np.int64)
        all_resolution = np.concatenate(resolution) if resolution else np.zeros(0, np.int64)
        per_second = dict(sorted(self.checks_by_second.items()))
        txn = {
            "transactions": c["transactions"],
            "committed_visible": c["committed_visible"],
            "rolled_back_hidden": c["rolled_back_hidden"],
            "committed_lost": committed_lost,
            "committed_lost_causes": lost_causes,
            "rolled_back_visible": rolled_back_visible,
            "rolled_back_visible_causes": visible_causes,
            "pending": c["pending"],
            "discarded": c["discarded"],
            "double_commits": c["double_commits"],
            "checks": int(all_checks.sum()),
            "checks_p50": _nearest_rank(all_checks, 0.5),
            "checks_max": int(all_checks.max()) if len(all_checks) else None,
            "resolution_ms_p50": _ms(_nearest_rank(all_resolution, 0.5)),
            "resolution_ms_p99": _ms(_nearest_rank(all_resolution, 0.99)),
            "resolution_ms_max": _ms(int(all_resolution.max())) if len(all_resolution) else None,
            "checks_histogram": np.bincount(np.minimum(all_checks, CHECKS_HIST_CAP),
                                            minlength=CHECKS_HIST_CAP + 1).tolist(),
            "checks_per_s_max": max(per_second.values()) if per_second else 0,
            "checks_per_second": [[s, n] for s, n in per_second.items()],  # [second of the run, checks]
            "local_states": dict(sorted(self.local_states.items())),
            "check_answers": dict(sorted(self.answers.items())),
            "visible_by": "consumed" if by_consumption else "stored",
        }
        return {"txn": txn, "txn_violations": committed_lost + rolled_back_visible}


def _outcome_masks(state: np.ndarray, visible: np.ndarray, pending_retry: np.ndarray) -> dict[str, np.ndarray]:
    """Each message's outcome (module docstring) as masks over one producer's messages:
    `committed_visible`, `rolled_back_hidden`, `committed_lost:<cause>`, `pending`,
    `rolled_back_visible:<cause>`; a message of no mask is not in the population."""
    pop = (state & HALF_STORED) != 0
    committed = (state & COMMITTED) != 0
    out = {"committed_visible": pop & committed & visible, "rolled_back_hidden": pop & ~committed & ~visible}
    left = pop & committed & ~visible
    for cause, bit in (("real_message_lost", COMMIT_APPLIED), ("rolled_back", ROLLBACK_APPLIED),
                       ("discarded", DISCARDED), ("half_lost", HALF_LOST)):
        hit = left & ((state & bit) != 0)
        if cause == "real_message_lost":
            hit &= ~pending_retry  # still on its way through the retry path
        out[f"committed_lost:{cause}"] = hit
        left &= ~hit
    out["pending"] = left
    wrong = pop & ~committed & visible
    by_check = wrong & ((state & COMMIT_FROM_CHECK) != 0)
    out["rolled_back_visible:commit_by_check"] = by_check
    out["rolled_back_visible:commit_by_producer"] = wrong & ~by_check
    return out


def _visibility(ledger: Any, p: int, topic: str, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(visible, in a retry path, judged by consumption) for producer `p`'s first `n` messages."""
    units = [u for u in ledger.units.values() if u.topic == topic]
    if not units:
        copies = _fit(ledger.copies[p], np.uint8, n, 0)
        return copies > 0, np.zeros(n, bool), False
    visible = np.zeros(n, bool)
    retry = np.zeros(n, bool)
    for unit in units:
        visible |= _fit(unit.ok_count[p], np.uint16, n, 0) > 0
        retry |= _fit(unit.retry[p], np.uint8, n, 0) > 0
    return visible, retry & ~visible, True


def _fit(arr: Any, dtype: Any, n: int, fill: int) -> np.ndarray:
    view = np.frombuffer(arr, dtype)[:n]
    return view if len(view) == n else np.concatenate([view, np.full(n - len(view), fill, dtype)])


def _nearest_rank(values: np.ndarray, q: float) -> int | None:
    if not len(values):
        return None
    ordered = np.sort(values)
    return int(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


def _ms(value_us: int | None) -> float | None:
    return None if value_us is None else value_us / 1000
