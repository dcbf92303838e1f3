"""One run's transactions, per message, from its trace: the data of the report's transaction panel.

RocketMQ's transactional send (TransactionMQProducer.sendMessageInTransaction) stores a *half*
message in RMQ_SYS_TRANS_HALF_TOPIC, runs the local transaction and sends its end
(EndTransactionProcessor: COMMIT writes the real message, ROLLBACK deletes the half); a half
still undecided after transactionTimeOut is *checked back* by the broker
(TransactionalMessageCheckService, every transactionCheckInterval) until it is resolved or has
been checked transactionCheckMax times, when it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.

`txn_messages(data)` gives, per message of which a broker stored a half (the population of
analysis/checkers/txn_checker.py), the times of its half send() call, first half stored, first check-back
and resolution, its number of check-backs, and how it was resolved — the first end a broker
applied (`txn.ended` with code 0: by the producer's endTransaction or by a check-back answer), or
its discard (`txn.discarded`) — else `unresolved` when the run ended. Every transaction counts
(there is no warm-up here, as in the summary's `txn`), so the checks per message and the
resolution times agree with the summary's `txn.checks_histogram` and `txn.resolution_ms_*`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.checkers.txn_checker import RMQ_SYS_TRANS_HALF_TOPIC
from analysis.reports import run_data as rd

OUTCOMES = ("commit_by_producer", "commit_by_check", "rollback_by_producer", "rollback_by_check", "discarded",
            "unresolved")
(COMMIT_BY_PRODUCER, COMMIT_BY_CHECK, ROLLBACK_BY_PRODUCER, ROLLBACK_BY_CHECK, DISCARDED, UNRESOLVED) = range(len(OUTCOMES))
NONE_US = -1


@dataclass
class TxnMessages:
    """Aligned per-message arrays, sorted by `msg_id`; times in simulated µs, NONE_US when absent."""

    msg_id: np.ndarray
    born_us: np.ndarray  # the half's send() call
    half_us: np.ndarray  # its first half stored by a broker
    first_check_us: np.ndarray
    resolved_us: np.ndarray  # the first end applied, or the discard
    checks: np.ndarray  # check-backs the broker made for it
    outcome: np.ndarray  # index into OUTCOMES

    def __len__(self) -> int:
        return len(self.msg_id)


def first_times(ids: np.ndarray, t_us: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of the sorted unique `wanted` ids: the earliest `t_us` of its rows in (`ids`, `t_us`)
    (NONE_US when it has none) and the index of that row (-1 when none)."""
    if not len(ids):
        return np.full(len(wanted), NONE_US, np.int64), np.full(len(wanted), -1, np.int64)
    order = np.lexsort((t_us, ids))
    uniq, first = np.unique(ids[order], return_index=True)
    pos = np.clip(np.searchsorted(uniq, wanted), 0, len(uniq) - 1)
    hit = uniq[pos] == wanted
    rows = np.where(hit, order[first[pos]], -1)
    return np.where(hit, t_us[np.maximum(rows, 0)], NONE_US).astype(np.int64), rows


def txn_messages(data: rd.RunData) -> TxnMessages | None:
    """The run's transactional messages (module docstring); None when no half message was stored."""
    stored = data.kind(rd.BROKER_STORED)
    half = stored["topic"] == RMQ_SYS_TRANS_HALF_TOPIC if stored else np.zeros(0, bool)
    if not half.any():
        return None
    ids = np.unique(stored["msg_id"][half])
    half_us, _rows = first_times(stored["msg_id"][half], stored["t_us"][half], ids)
    born_us = _born(data, ids)
    checked = data.kind(rd.TXN_CHECKED)
    first_check_us, _rows = first_times(checked.get("msg_id", np.zeros(0, np.int64)),
                                        checked.get("t_us", np.zeros(0, np.int64)), ids)
    checks = _counts(checked.get("msg_id", np.zeros(0, np.int64)), ids)
    resolved_us, outcome = _resolutions(data, ids)
    return TxnMessages(ids, born_us, half_us, first_check_us, resolved_us, checks, outcome)


def _born(data: rd.RunData, ids: np.ndarray) -> np.ndarray:
    """The send() call time of each message, from its send outcome (sent or failed)."""
    born = np.full(len(ids), NONE_US, np.int64)
    for kind in (rd.PRODUCER_SENT, rd.PRODUCER_SEND_FAILED):
        cols = data.kind(kind)
        if cols:
            t, _rows = first_times(cols["msg_id"], cols["born_us"], ids)
            born = np.where(born == NONE_US, t, born)
    return born


def _counts(rows_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    uniq, counts = np.unique(rows_ids, return_counts=True)
    if not len(uniq):
        return np.zeros(len(ids), np.int64)
    pos = np.clip(np.searchsorted(uniq, ids), 0, len(uniq) - 1)
    return np.where(uniq[pos] == ids, counts[pos], 0).astype(np.int64)


def _resolutions(data: rd.RunData, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(time, OUTCOMES index) of each message's first applied end, else its discard, else unresolved."""
    ended, discarded = data.kind(rd.TXN_ENDED), data.kind(rd.TXN_DISCARDED)
    resolved = np.full(len(ids), NONE_US, np.int64)
    outcome = np.full(len(ids), UNRESOLVED, np.int64)
    if ended:
        applied = ended["code"] == 0  # an end the broker refused changed nothing
        t, rows = first_times(ended["msg_id"][applied], ended["t_us"][applied], ids)
        found = rows >= 0
        commit = ended["action"][applied][np.maximum(rows, 0)] == "COMMIT"
        by_check = ended["from_check"][applied][np.maximum(rows, 0)].astype(bool)
        kind = np.where(commit, np.where(by_check, COMMIT_BY_CHECK, COMMIT_BY_PRODUCER),
                        np.where(by_check, ROLLBACK_BY_CHECK, ROLLBACK_BY_PRODUCER))
        resolved, outcome = np.where(found, t, resolved), np.where(found, kind, outcome)
    if discarded:
        t, rows = first_times(discarded["msg_id"], discarded["t_us"], ids)
        use = (rows >= 0) & (resolved == NONE_US)
        resolved = np.where(use, t, resolved)
        outcome = np.where(use, DISCARDED, outcome)
    return resolved, outcome


def waiting_per_second(m: TxnMessages, end_s: float) -> dict[str, np.ndarray]:
    """Half messages stored and not yet resolved at each second's end, and those of them the broker
    had already checked back at least once."""
    done = m.resolved_us >= 0
    waiting = np.cumsum(rd.per_second(m.half_us, end_s)) - np.cumsum(rd.per_second(m.resolved_us[done], end_s))
    checked = (m.first_check_us >= 0) & (~done | (m.first_check_us < m.resolved_us))
    in_check = (np.cumsum(rd.per_second(m.first_check_us[checked], end_s))
                - np.cumsum(rd.per_second(m.resolved_us[checked & done], end_s)))
    return {"half messages waiting for a decision": waiting, "of which checked back at least once": in_check}


def outcomes_per_second(m: TxnMessages, end_s: float) -> dict[str, np.ndarray]:
    """Resolutions per second by outcome (OUTCOMES but `unresolved`)."""
    return {name: rd.per_second(m.resolved_us[m.outcome == i], end_s)
            for i, name in enumerate(OUTCOMES) if i != UNRESOLVED}


def resolution_ms(m: TxnMessages) -> dict[str, np.ndarray]:
    """Half send() call → resolution, in ms: `all` resolved messages, then by way of resolution."""
    ok = (m.resolved_us >= 0) & (m.born_us >= 0)
    ms = (m.resolved_us - m.born_us) / 1000
    ways = {"by the producer's end": (m.outcome == COMMIT_BY_PRODUCER) | (m.outcome == ROLLBACK_BY_PRODUCER),
            "by a check-back answer": (m.outcome == COMMIT_BY_CHECK) | (m.outcome == ROLLBACK_BY_CHECK),
            "discarded (check maximum)": m.outcome == DISCARDED}
    return {"all": ms[ok]} | {name: ms[ok & sel] for name, sel in ways.items() if (ok & sel).any()}


def per_second_by_state(cols: dict[str, np.ndarray], end_s: float) -> dict[str, np.ndarray]:
    """`state` → occurrences per second (check answers, local transaction results)."""
    if not cols:
        return {}
    return {str(s): rd.per_second(cols["t_us"][cols["state"] == s], end_s) for s in sorted(set(cols["state"].tolist()))}
