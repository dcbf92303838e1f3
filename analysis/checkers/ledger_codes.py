"""What the Ledger's arrays hold, as numbers: the codes the ledger writes and the checkers read.

- message ids: `producer index << SEQ_BITS | seq` (models/message.py), and the key a person
  reads for one (`display_key`: `<producer node>-<seq>`);
- per message, its send outcome bits (`ACKED`, `NOT_OK`, `FAILED`, `ONEWAY`, `SCHEDULED`), its
  parking and timer bits (`PARKED_TWICE`, `TIMER_ONCE`, `TIMER_TWICE`) and its send latency, kept
  as uint32 µs with `NO_RT` for none;
- per consumption unit and message, its retry-path mark (`IN_RETRY`, `IN_DLQ`);
- per destroyed copy (sparse, by message id), its fact bits (`DESTROYED_POWER`, `DESTROYED_CRASH`, `DESTROYED_EXPIRED` (retention),
  `DESTROYED_FAILOVER` (a rejoining slave's truncation to the epochs' consistent point, controller
  mode), `DESTROYED_FSYNC_ERROR` (a power loss after a swallowed fsync error), `GROUP_HAS_REPLICAS`,
  `REPLICATED`).

The Ledger (analysis/checkers/ledger.py) writes them; the code that judges its arrays (analysis/checkers/metrics.py,
message_causes.py) reads them from here, below the ledger, whose `results()` calls that code.
"""

from __future__ import annotations

SEQ_BITS = 32  # message ids: producer index << 32 | seq (models/message.py)
SEQ_MASK = (1 << SEQ_BITS) - 1

# send outcome bits (per message); SCHEDULED: parked by its send, stored in SCHEDULE_TOPIC_XXXX (a delay
# level) or rmq_sys_wheel_timer (a 5.x timer message, a delivery time)
ACKED, NOT_OK, FAILED, ONEWAY, SCHEDULED = 1, 2, 4, 8, 16
# TIMER_ONCE: the timer put it back into its real topic (`timer.delivered`); TIMER_TWICE: it did so
# more than once (the duplicate cause timer_redelivered); PARKED_TWICE: parked twice (a retried send stored twice)
TIMER_ONCE, TIMER_TWICE, PARKED_TWICE = 32, 64, 128  # the state is one byte a message: every bit is taken
NO_RT = 2**32 - 1  # send latencies are kept as uint32 µs; this value: no latency (no result)
RT_CAP_US = NO_RT - 1  # 71.6 min: longer send latencies read as this
# retry path (per unit and message)
IN_RETRY, IN_DLQ = 1, 2
# destroyed-copy facts (per message id, sparse)
DESTROYED_POWER, DESTROYED_CRASH, GROUP_HAS_REPLICAS, REPLICATED, DESTROYED_EXPIRED = 1, 2, 4, 8, 16
# fault "failover_truncated": a broker rejoining its group as a slave (controller mode) cut its CommitLog
# to the consistent point of its epochs, and the copy cut was the last one (the cause truncated_on_failover)
DESTROYED_FAILOVER = 32
# fault "fsync_error": a power loss destroyed a copy the store had reported flushed, its fsync having failed
# and the error swallowed (models/broker/commit_log.py; the cause fsync_error_swallowed)
DESTROYED_FSYNC_ERROR = 64


def display_key(msg_id: int, producer_names: list[str]) -> str:
    """The key a person reads for a message id: `<producer node>-<seq>` (models/message.py)."""
    return f"{producer_names[msg_id >> SEQ_BITS]}-{msg_id & SEQ_MASK}"
