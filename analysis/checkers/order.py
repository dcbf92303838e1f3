"""Per-sharding-key order of an orderly group (consume_mode ORDERLY), with each violation's cause.

Definition. A *stream* is one producer's acknowledged (SEND_OK) messages of one sharding key (only
messages sent with the orderly selector have one; the others are not ordered by anyone), in
send order (the producer's sequence numbers: an orderly send is synchronous, so sequence order is
send order). Each message is placed by its *first successful consumption* in the group (time,
then message id on ties). A message m is an order violation when, at its first successful
consumption, a later-sent message of its stream had already been consumed successfully. Each
late message counts once, however many messages overtook it. What does not count: redeliveries
of a message already consumed (its second and later successful consumptions are duplicates,
analysis/checkers/duplicates.py, and do not move it); failed listener calls (SUSPEND_CURRENT_QUEUE_A_MOMENT
retries a message in place); messages never consumed (lost or still pending).

Cause (`CAUSES`), from ground truth, comparing m with the message that overtook it (the
latest-sent message of the stream consumed before m), first match wins:
- `retry_path`: either was first consumed from a copy with reconsume times > 0 (read from
  `%RETRY%<group>`, after a send-back or the DLQ path of a broadcasting/concurrent detour);
- `send_side`: the two were stored in different queues: the producer's selector (hash of the key
  over the publish list) saw a different route between the two sends, e.g. after a broker left
  or rejoined it, and the new queue was consumed ahead of the old one's backlog;
- same queue, consumed first by two different consumers (two owners at once):
  `broker_lost_locks` when the lock of the one that consumed later was granted `new` by a broker
  that had crashed (losing its lock table) since the other consumer's last grant on that queue;
  `lock_expired` when it was taken over from an expired lock (`expired`);
- `other`: anything else (e.g. two owners after an orderly unlock, or one consumer).

Under this definition two owners of one queue are rarely a cause by themselves: each consumer
reads a queue in offset order from at most the committed offset, so the first consumptions of
one queue stay in offset order; the overlap shows as duplicates that an application sees out of
order (a redelivery of m after m'), which are counted as duplicates, not here. They become
violations only together with a start offset past unconsumed messages.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, NamedTuple

from models.records import BROKER_LOCK_GRANTED
from sim.trace import NODE_CRASHED

if TYPE_CHECKING:  # NumPy is imported by order_violations: importing CAUSES (verdict.py) loads none
    import numpy as np

CAUSES = ("send_side", "retry_path", "broker_lost_locks", "lock_expired", "other")
SEQ_BITS = 32  # message id = producer index << 32 | sequence number (models/message.py)
_OFFSET_BITS = 32
_RECONSUME_MASK = 0xFF


def empty_order_causes() -> dict[str, int]:
    return dict.fromkeys(CAUSES, 0)


class FirstConsumed(NamedTuple):
    """Columns over the acknowledged, consumed messages of one unit (one entry per message)."""

    first_us: np.ndarray  # first successful consumption
    producer: np.ndarray
    seq: np.ndarray
    shard: np.ndarray
    position: np.ndarray  # the first consumption's stored copy (analysis/checkers/duplicates.py's key)
    node: np.ndarray  # the consumer of the first consumption (ledger node index)


class LockHistory:
    """Lock grants per (group, broker, topic, queue id) and broker crashes, in time order."""

    def __init__(self, events: list[tuple]) -> None:
        self.grants: dict[tuple, list[tuple[int, str, str]]] = defaultdict(list)
        self.crashes: dict[str, list[int]] = defaultdict(list)
        for r in sorted(events, key=lambda e: e[0]):
            if r[2] == BROKER_LOCK_GRANTED:  # (t, broker, kind, group, client, topic, qid, how)
                self.grants[(r[3], r[1], r[5], r[6])].append((r[0], r[4], r[7]))
            elif r[2] == NODE_CRASHED:
                self.crashes[r[1]].append(r[0])

    def cause(self, group: str, broker: str, topic: str, queue_id: int, later: str, earlier: str,
              t_us: int) -> str:
        """Why `later` consumed the queue while `earlier` also did: its grant in force at `t_us`."""
        grants = self.grants.get((group, broker, topic, queue_id), [])
        i = bisect_right(grants, (t_us, "\uffff", ""))
        mine = [g for g in grants[:i] if g[1] == later]
        if not mine:
            return "other"
        t_grant, _client, how = mine[-1]
        if how == "expired":
            return "lock_expired"
        if how == "new":
            theirs = [g[0] for g in grants[:i] if g[1] == earlier and g[0] <= t_grant]
            since = theirs[-1] if theirs else -1
            if any(since < t <= t_grant for t in self.crashes.get(broker, ())):
                return "broker_lost_locks"
        return "other"


def order_violations(rows: list[FirstConsumed], group: str, topic: str, brokers: list[str],
                     nodes: list[str], locks: LockHistory, found: list | None = None) -> tuple[int, dict[str, int]]:
    """(violations, by cause) of one orderly unit; `brokers` / `nodes`: index → name. `found`
    gets each violation as (late message id, id of the message that overtook it, the late one's
    first consumption, cause) (analysis/checkers/message_causes.py)."""
    import numpy as np

    causes = empty_order_causes()
    if not rows:
        return 0, causes
    cols = FirstConsumed(*(np.concatenate(c) for c in zip(*rows, strict=True)))
    keyed = cols.shard >= 0  # only orderly (selector) sends carry a sharding key: order is per key
    cols = FirstConsumed(*(c[keyed] for c in cols))
    msg_id = (cols.producer << SEQ_BITS) | cols.seq
    highest: dict[tuple[int, int], int] = {}  # stream → row of the latest-sent message consumed so far
    for i in np.lexsort((msg_id, cols.first_us)).tolist():
        stream = (int(cols.producer[i]), int(cols.shard[i]))
        top = highest.get(stream)
        if top is not None and cols.seq[i] < cols.seq[top]:
            cause = _cause(cols, i, top, group, topic, brokers, nodes, locks)
            causes[cause] += 1
            if found is not None:
                found.append((int(msg_id[i]), int(msg_id[top]), int(cols.first_us[i]), cause))
        else:
            highest[stream] = i
    return sum(causes.values()), causes


def _cause(cols: FirstConsumed, late: int, early: int, group: str, topic: str, brokers: list[str],
           nodes: list[str], locks: LockHistory) -> str:
    pos_late, pos_early = int(cols.position[late]), int(cols.position[early])
    queue_late, queue_early = pos_late >> (_OFFSET_BITS + 8), pos_early >> (_OFFSET_BITS + 8)
    reconsumed = ((pos_late >> _OFFSET_BITS) & _RECONSUME_MASK) or ((pos_early >> _OFFSET_BITS) & _RECONSUME_MASK)
    if reconsumed:
        return "retry_path"
    if queue_late != queue_early:
        return "send_side"
    node_late, node_early = nodes[int(cols.node[late])], nodes[int(cols.node[early])]
    if node_late == node_early:
        return "other"
    broker, queue_id = brokers[queue_late >> 12], queue_late & 0xFFF
    # the consumer that consumed the overtaking message while the other still held the queue
    return locks.cause(group, broker, topic, queue_id, node_early, node_late, int(cols.first_us[early]))
