"""What `rmqsim explain` keeps of a run's records: only what its question needs.

A `Collector` is a chunk observer fed every record of the run (from its trace or a replay,
analysis/explain/source.py). It always keeps the *rare* records whole — faults, crashes and
restarts, recoveries, destroyed copies and reused offsets, elections, SyncStateSets, role changes
and truncations of controller mode, queue ownership, rebalances, locks, offset rollbacks and
resets, membership and route changes — the send outcomes that were not SEND_OK (with every failed
attempt), and the timer's deliveries from a slot read again (`replay`): a run has few of them, and
they are the facts behind every cause and behind a fault's recovery time. Asked about one message
(`msg_id`), it also keeps:

- every record that names the message (sent, stored, consumed, sent back, checked, ...);
- where its copies went next: per node holding a copy (a master's store, a slave's `ha.appended`
  range), the first `commit_log.flushed` reaching the copy's end, the first dispatched range
  holding it (a truncation in between — a recovery's, or a replica's to the consistent point of
  its epochs — cancels the wait: the copy is gone); a slave's range counts as the copy only while
  the group's master holds it (a new master that never had it appends its own records there);
- the offset records of the queues its copies were stored in (committed by a client, written to
  consumerOffset.json, loaded, copied to a slave), each only when its value changed, and once a
  value passed the copy only the change that passed it (or a later fall below it); before a
  queue holds a copy, the last `RING` changes per queue, so that what was committed before the
  message was stored (an offset passed before it was reused) is still there.

Memory stays bounded by the rare records, the message's own records and its queues' offset
changes, whatever the length of the run.
"""

from __future__ import annotations

from collections import deque

import models.records as rec
from sim import trace

RING = 16
RARE = frozenset((
    trace.FAULT_INJECTED, trace.FAULT_HEALED, trace.NODE_CRASHED, trace.NODE_RESTARTED, trace.RUN_ENDED,
    rec.BROKER_RECOVERED, rec.COMMIT_LOG_TRUNCATED, rec.CONSUMER_OFFSETS_LOADED, rec.COMMIT_LOG_DESTROYED,
    rec.OFFSET_REUSED, rec.HA_CONNECTED, rec.HA_DISCONNECTED, rec.HA_DIVERGED, rec.ADMIN_OFFSET_RESET,
    rec.BROKER_CONSUMER_IDS_CHANGED, rec.NAMESRV_BROKER_UNREGISTERED, rec.CONSUMER_REBALANCED,
    rec.CONSUMER_OFFSET_MOVED, rec.CONSUMER_QUEUE_STARTED, rec.CONSUMER_QUEUE_DROPPED, rec.CONSUMER_SHUTDOWN,
    rec.BROKER_LOCK_GRANTED, rec.BROKER_LOCK_REFUSED, rec.BROKER_UNLOCKED, rec.CONSUMER_LOCK_LOST,
    rec.BROKER_OFFSET_ROLLED_BACK, rec.BROKER_OFFSET_BEHIND_REPLICA, rec.TXN_DISCARDED, rec.TXN_HALF_LOST,
    rec.CONSUMER_OFFSET_RESET, rec.PRODUCER_ROUTE_UPDATED, rec.CLIENT_ROUTE_UPDATED, rec.BROKER_CLIENT_REGISTERED,
    rec.BROKER_CLIENT_UNREGISTERED, rec.PRODUCER_ATTEMPT_FAILED, rec.PRODUCER_SEND_FAILED,
    rec.CONTROLLER_ELECTED, rec.CONTROLLER_SYNC_STATE_SET, rec.BROKER_ROLE, rec.HA_TRUNCATED))
OFFSET_KINDS = frozenset((rec.BROKER_OFFSET_COMMITTED, rec.BROKER_OFFSET_FILE_WRITTEN, rec.BROKER_OFFSET_LOADED,
                          rec.BROKER_OFFSET_SYNCED))
# position of `msg_id` in a record tuple, per kind that has one
MSG_FIELD = {kind: len(trace.ENVELOPE) + fields.index("msg_id") for kind, fields in trace.KINDS.items()
             if "msg_id" in fields}
_STATUS = trace.field_index(rec.PRODUCER_SENT, "status")
_REPLAY = trace.field_index(rec.TIMER_DELIVERED, "replay")


class Collector:
    """A chunk observer keeping what explain needs (module docstring); `broker_of`: node → its
    broker group's name. Kept records carry their position in the run (`seq`), for ties."""

    def __init__(self, broker_of: dict[str, str], msg_id: int | None = None) -> None:
        self.broker_of = broker_of
        self.msg_id = msg_id
        self.seen = 0  # records fed so far
        self.rare: list[tuple] = []
        self.rare_seq: list[int] = []
        self.mine: list[tuple[int, tuple]] = []  # message mode: (seq, record) of its records and facts
        self.watched: dict[tuple[str, str, int], int] = {}  # (broker, topic, queue id) → the copy's queue offset
        self._rings: dict[tuple[str, str, int], deque] = {}
        self._last: dict[tuple, int] = {}  # offset record key → last value seen
        self._copies: dict[str, tuple[int, int]] = {}  # node → (start, end) of its copy
        self._flush: set[str] = set()  # nodes whose copy awaits its flush
        self._dispatch: set[str] = set()  # nodes whose copy awaits its dispatch
        self._replica: dict[str, tuple[int, int]] = {}  # broker group → the master's copy, until a slave appends it

    def __call__(self, chunk: list[tuple]) -> None:
        target, base = self.msg_id, self.seen
        self.seen += len(chunk)
        for i, r in enumerate(chunk):
            kind = r[2]
            rare = kind in RARE or (kind == rec.PRODUCER_SENT and r[_STATUS] != "SEND_OK") or \
                (kind == rec.TIMER_DELIVERED and r[_REPLAY])
            if rare:
                self.rare.append(r)
                self.rare_seq.append(base + i)
            if target is None:
                continue
            at = MSG_FIELD.get(kind)
            if at is not None and r[at] == target:
                self._own(base + i, r, rare)
            elif kind in OFFSET_KINDS:
                self._offset(base + i, r)
            elif kind == rec.COMMIT_LOG_FLUSHED:
                if r[1] in self._flush and r[3] >= self._copies[r[1]][1]:
                    self._flush.discard(r[1])
                    self.mine.append((base + i, r))
            elif kind == rec.CONSUME_QUEUE_DISPATCHED:
                if r[1] in self._dispatch and r[3] <= self._copies[r[1]][0] < r[4]:
                    self._dispatch.discard(r[1])
                    self.mine.append((base + i, r))
            elif kind == rec.HA_APPENDED:
                self._appended(base + i, r)
            elif kind in (rec.COMMIT_LOG_TRUNCATED, rec.HA_TRUNCATED):
                self._truncated(r)
            elif kind == rec.BROKER_ROLE and r[4] == "master":
                self._new_master(r[1])
            if kind == trace.NODE_CRASHED:  # its table is gone: a commit of the same value is news again
                self._last = {k: v for k, v in self._last.items() if k[1] != r[1]}

    def _own(self, seq: int, r: tuple, rare: bool) -> None:
        """A record naming the message; a stored copy starts the watches on its node and queue."""
        if not rare:
            self.mine.append((seq, r))
        if r[2] != rec.BROKER_STORED:
            return
        _t, node, _k, _id, topic, queue_id, queue_offset, phys, size, _rc = r
        broker = self.broker_of.get(node, node)
        key = (broker, topic, queue_id)
        self.watched[key] = queue_offset
        self.mine += self._rings.pop(key, ())
        self._copies[node] = (phys, phys + size)
        self._flush.add(node)
        self._dispatch.add(node)
        self._replica[broker] = (phys, phys + size)

    def _appended(self, seq: int, r: tuple) -> None:
        copy = self._replica.get(self.broker_of.get(r[1], r[1]))
        if copy is not None and r[3] <= copy[0] < r[4] and self._copies.get(r[1]) != copy:
            self.mine.append((seq, r))
            self._copies[r[1]] = copy
            self._flush.add(r[1])
            self._dispatch.add(r[1])

    def _truncated(self, r: tuple) -> None:
        """A log cut below a copy's end no longer holds it: stop waiting for its flush and dispatch."""
        node, position = r[1], r[3]
        copy = self._copies.get(node)
        if copy is not None and copy[1] > position:
            del self._copies[node]
            self._flush.discard(node)
            self._dispatch.discard(node)

    def _new_master(self, node: str) -> None:
        """A node of a group holding a copy became master: if it does not hold the copy, the ranges
        its slaves append from now on are its own records (the positions may be the copy's, its data
        not): stop waiting for a slave to append the copy."""
        broker = self.broker_of.get(node, node)
        copy = self._replica.get(broker)
        if copy is not None and self._copies.get(node) != copy:
            del self._replica[broker]

    def _offset(self, seq: int, r: tuple) -> None:
        """(t, node, kind, group, topic, queue id, offset, ...): kept when its value changed; in a
        queue holding a copy, only while below the copy or as the change that first passes it."""
        key = (self.broker_of.get(r[1], r[1]), r[4], r[5])
        last_key = (r[2], r[1], r[3], r[4], r[5], *r[7:])
        before = self._last.get(last_key)
        if before == r[6]:
            return
        self._last[last_key] = r[6]
        qoff = self.watched.get(key)
        if qoff is not None:
            if r[6] <= qoff or before is None or before <= qoff:
                self.mine.append((seq, r))
            return
        ring = self._rings.get(key)
        if ring is None:
            ring = self._rings[key] = deque(maxlen=RING)
        ring.append((seq, r))

    def message_records(self) -> list[tuple]:
        """The message mode's records with the rare ones, in emission order."""
        return [r for _seq, r in sorted(self.mine + list(zip(self.rare_seq, self.rare, strict=True)),
                                        key=lambda item: item[0])]
