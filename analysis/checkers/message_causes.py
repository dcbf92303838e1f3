"""Which messages the checkers counted, and why: the per-message side of the summary's counts.

The checkers (analysis/checkers/metrics.py, duplicates.py, order.py) give every lost message, duplicate
delivery and order violation its cause as they count it; `MessageCauses` is handed each one
there, so a message's cause in `rmqsim explain` comes from the very computation that counted it
and the two can never disagree. Always kept: the summary's samples, `lost_sample`,
`duplicate_sample` and `order_violation_sample` — per cause, the display keys of up to
`SAMPLE` messages (lost: by sequence number, then producer; duplicates and violations: in the
order they happened), a step from a count to `rmqsim explain RUN_DIR KEY`. Kept only when asked
(`keep`, i.e. `details`): everything, per unit — lost messages with their causes, the messages
still pending in the retry path, in the DLQ or delayed, each duplicate delivery, each violation.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from analysis.checkers.ledger_codes import SEQ_BITS, display_key

SAMPLE = 10


class Duplicate(NamedTuple):
    unit: str
    msg_id: int
    t_us: int  # the duplicate delivery
    cause: str


class Violation(NamedTuple):
    unit: str
    msg_id: int  # the late message
    overtaken_by: int  # the latest-sent message of its stream consumed before it
    first_us: int  # the late message's first successful consumption
    cause: str


class MessageCauses:
    def __init__(self, producer_names: list[str], loss_causes: tuple[str, ...], keep: bool = False) -> None:
        self.names = producer_names
        self.loss_causes = loss_causes
        self.keep = keep
        self.lost: dict[str, dict[int, str]] = defaultdict(dict)  # unit → msg id → cause (keep)
        self.states: dict[str, dict[int, str]] = defaultdict(dict)  # unit → msg id → pending_retry / dlq / ...
        self.duplicates: list[Duplicate] = []
        self.violations: list[Violation] = []
        self._lost_sample: dict[str, set[tuple[int, int]]] = defaultdict(set)  # cause → (seq, producer)

    # --- fed by the checkers ----------------------------------------------------------------------
    def add_lost(self, unit: str, p: int, seqs: np.ndarray, causes: np.ndarray) -> None:
        """Lost messages `seqs` (ascending) of producer `p` in `unit`, with their cause indexes
        (metrics.LOSS_CAUSES)."""
        for c in np.unique(causes).tolist():
            cause = self.loss_causes[c]
            of_cause = seqs[causes == c]
            sample = self._lost_sample[cause]
            sample.update((s, p) for s in of_cause[:SAMPLE].tolist())
            if len(sample) > SAMPLE:
                self._lost_sample[cause] = set(sorted(sample)[:SAMPLE])
            if self.keep:
                self.lost[unit].update(dict.fromkeys(((np.int64(p) << SEQ_BITS) | of_cause).tolist(), cause))

    def add_states(self, unit: str, p: int, **seqs: np.ndarray) -> None:
        """Messages of producer `p` not lost and not consumed in `unit`, by state (kept only with `keep`)."""
        if self.keep:
            for state, of_state in seqs.items():
                self.states[unit].update(dict.fromkeys(((np.int64(p) << SEQ_BITS) | of_state).tolist(), state))

    def add_duplicates(self, unit: Any, timed: list[Any]) -> None:
        """`unit`'s duplicate deliveries (ledger `unit.dups`) with their causes (duplicates.timed_causes)."""
        for dup, t in zip(unit.dups, timed, strict=True):
            self.duplicates.append(Duplicate(unit.name, dup[6] << SEQ_BITS | dup[7], t.t_us, t.cause))

    def violation_list(self, unit: str) -> list[Violation]:
        """A list order.order_violations appends `unit`'s violations to (see `add_violation`)."""
        return _Collector(self, unit)

    # --- read -------------------------------------------------------------------------------------
    def key(self, msg_id: int) -> str:
        return display_key(msg_id, self.names)

    def samples(self) -> dict[str, Any]:
        """The summary's sample keys (module docstring)."""
        lost = {c: [self.key(p << SEQ_BITS | s) for s, p in sorted(self._lost_sample[c])]
                for c in self.loss_causes if self._lost_sample.get(c)}
        return {"lost_sample": lost,
                "duplicate_sample": _first_keys(((d.t_us, d.msg_id, d.cause) for d in self.duplicates), self.key),
                "order_violation_sample": _first_keys(((v.first_us, v.msg_id, v.cause) for v in self.violations),
                                                      self.key)}


class _Collector(list):
    """Order violations of one unit, appended by order.order_violations as (late id, overtaking
    id, late first consumption, cause)."""

    def __init__(self, causes: MessageCauses, unit: str) -> None:
        super().__init__()
        self.causes, self.unit = causes, unit

    def append(self, item: tuple[int, int, int, str]) -> None:
        self.causes.violations.append(Violation(self.unit, *item))


def _first_keys(items: Any, key: Any) -> dict[str, list[str]]:
    """cause → the display keys of its first SAMPLE distinct messages, by time (then id)."""
    out: dict[str, list[str]] = {}
    seen: dict[str, set[int]] = defaultdict(set)
    for _t, msg_id, cause in sorted(items):
        if msg_id not in seen[cause] and len(seen[cause]) < SAMPLE:
            seen[cause].add(msg_id)
            out.setdefault(cause, []).append(key(msg_id))
    return out
