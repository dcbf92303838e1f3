"""Timer messages (5.x TimerMessageStore, models/broker/timer_store.py): were they delivered, once,
and when? From the simulator's ground truth (records), per message.

A timer message (`Message.setDeliverTimeMs`) is parked by its send in `rmq_sys_wheel_timer`
(`timer.enqueued`: its requested delivery time `deliver_us`), and the timer puts it back into its
real topic when its wheel slot is read (`timer.delivered`; `replay` true for a slot read again
after a broker restart, or by a promoted slave from the checkpoint it copied from its master). Summary keys, both null when the run had no timer message:

- `timer`: `messages` (messages enqueued in the timer), `delivered` (delivered at least once),
  `pending` (never delivered: still waiting, or their timer-topic copy was destroyed), and
  `delivered_twice` (delivered two times or more: the timer is at-least-once, it reads again the
  slots read since its last checkpoint; their duplicates get the cause `timer_redelivered`,
  analysis/checkers/duplicates.py), `replays` (`timer.delivered` records with `replay` true);
- `timer_delay_error_ms`: over the delivered messages, the first `timer.delivered` time minus the
  requested delivery time, nearest-rank percentiles `p50`, `p90`, `p99` and `max`, `min`, in ms
  (3 decimals; each null when no message was delivered). The model delivers within
  [requested, requested + timerPrecisionMs + 100 ms) while the broker is up (the dequeue
  services' 100 ms polls); a message due while its
  broker was down comes late.

Whether a delivered message was consumed, lost or consumed twice is the Ledger's (analysis/checkers/ledger.py:
a parked message never delivered is `pending_delay`, not lost).
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from models.records import TIMER_DELIVERED, TIMER_ENQUEUED

SEQ_BITS = 32  # message ids: producer index << 32 | seq (models/message.py)
SEQ_MASK = (1 << SEQ_BITS) - 1
GROW = 4096
NONE = -1  # no time (not enqueued, not delivered)
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


class TimerChecker:
    """Per producer index: compact arrays by message sequence number; a Tracer chunk observer."""

    def __init__(self) -> None:
        self.deliver_us: list[array] = []  # the requested delivery time (NONE: not a timer message)
        self.first_us: list[array] = []  # the first timer.delivered (NONE: not yet)
        self.deliveries: list[bytearray] = []  # timer.delivered records, up to 255
        self.replays = 0

    def feed(self, chunk: list[tuple]) -> None:
        for r in chunk:
            kind = r[2]
            if kind == TIMER_ENQUEUED:  # (t, node, kind, msg_id, topic, deliver_us, slot_us)
                p, seq = self._slot(r[3])
                if self.deliver_us[p][seq] == NONE:  # a send stored twice asks for the same time
                    self.deliver_us[p][seq] = r[5]
            elif kind == TIMER_DELIVERED:  # (t, node, kind, msg_id, topic, slot_us, replay)
                p, seq = self._slot(r[3])
                if self.first_us[p][seq] == NONE:
                    self.first_us[p][seq] = r[0]
                self.deliveries[p][seq] = min(255, self.deliveries[p][seq] + 1)
                if r[6]:
                    self.replays += 1

    def _slot(self, msg_id: int) -> tuple[int, int]:
        """(producer index, seq) of a message, arrays grown to hold it."""
        p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
        while p >= len(self.deliver_us):
            self.deliver_us.append(array("q"))
            self.first_us.append(array("q"))
            self.deliveries.append(bytearray())
        if seq >= len(self.deliveries[p]):
            missing = seq + GROW - len(self.deliveries[p])
            self.deliver_us[p].extend(array("q", [NONE]) * missing)
            self.first_us[p].extend(array("q", [NONE]) * missing)
            self.deliveries[p].extend(bytes(missing))
        return p, seq

    def results(self) -> dict[str, Any]:
        """`timer` and `timer_delay_error_ms` (module docstring); both null without a timer message."""
        messages = delivered = twice = 0
        errors = []
        for p in range(len(self.deliver_us)):
            requested = np.frombuffer(self.deliver_us[p], np.int64)
            first = np.frombuffer(self.first_us[p], np.int64)
            count = np.frombuffer(self.deliveries[p], np.uint8)
            timer = requested != NONE  # deliveries of a message not seen enqueued are not judged
            done = timer & (count > 0)
            messages += int(timer.sum())
            delivered += int(done.sum())
            twice += int((timer & (count > 1)).sum())
            errors.append(first[done] - requested[done])
        if not messages:
            return {"timer": None, "timer_delay_error_ms": None}
        return {"timer": {"messages": messages, "delivered": delivered, "pending": messages - delivered,
                          "delivered_twice": twice, "replays": self.replays},
                "timer_delay_error_ms": delay_error_ms(np.concatenate(errors))}


def delay_error_ms(errors_us: np.ndarray) -> dict[str, float | None]:
    """Nearest-rank percentiles, max and min of delivery errors (µs), in ms with 3 decimals."""
    ordered = np.sort(np.asarray(errors_us, np.int64))
    n = len(ordered)
    if not n:
        return {name: None for name, _ in PERCENTILES} | {"max": None, "min": None}
    out: dict[str, float | None] = {name: _ms(ordered[max(0, math.ceil(q * n) - 1)]) for name, q in PERCENTILES}
    return out | {"max": _ms(ordered[-1]), "min": _ms(ordered[0])}


def _ms(value_us: Any) -> float:
    return round(int(value_us) / 1000, 3)
