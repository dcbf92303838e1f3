"""Duplicate causes: one mechanism per duplicate delivery, from the simulator's ground truth.

A duplicate delivery is a successful consumption of a message the unit had already consumed
successfully (analysis/checkers/ledger.py notes each one with its stored copy: broker, queue id, queue
offset, reconsume times). Its cause, `CAUSES`:

- a delivery of *another stored copy* than the first successful one:
  - `send_back`: either copy came through the retry path (reconsume times > 0): a send-back or
    inner-producer re-send whose answer was lost, a local resubmission, cleanExpiredMsg;
  - `timer_redelivered`: a 5.x timer message the timer put back into its real topic more than
    once (two or more `timer.delivered`: after a crash or a power loss, or on a promoted slave from
    the checkpoint it copied, the timer reads again the wheel slots read since that checkpoint;
    models/broker/timer_store.py), parked once by its
    send (parked twice, the second delivery is the retried send's: `producer_retry`);
  - `producer_retry`: the producer's send was retried and the brokers stored the message twice;
  - `txn_double_commit`: the same for a transactional producer, whose real messages are written
    by commits: one half committed twice (a late endTransaction plus a check answer, or a half
    written back by a check round and committed again; analysis/checkers/txn_checker.py);
  - in a POP group (5.x: the copy came from the broker's revive service, `pop.revived`; models/
    consumer/pop_consumer.py), the ack of the first delivery did not cancel the revive:
    `invisible_time_expired` when a listener call of the message ended after its handle's
    invisible time (`pop.ack_late`: the ack came too late — a consumer slower than its invisible
    time); `broker_offset_rollback` when the broker's offset rolled back over the first copy before
    the duplicate (it was popped twice, and one of those deliveries was revived) or its revive
    offset did (`pop.revived` with `replay`: a restarted broker revived a checkpoint again); `invisible_time_expired` for an orderly
    batch handed out again in place (`pop.order_redelivered`: another of its messages stayed
    un-acked past the invisible time); else `ack_lost` (the ack was sent in time and failed,
    `pop.ack_failed`, or was lost with the broker: a power loss took the ack record);
  - `other`: anything else;
- a *re-read of the same stored copy* (the consumer's starting offset was behind what had been
  consumed). The re-reading consumer's queue ownership started at some time t0 (its latest
  `consumer.queue_started` for that queue); looking at what happened between the first
  consumption (t1) and t0:
  - `offset_reset`: the queue's offset was corrected (OFFSET_MOVED / OFFSET_ILLEGAL) meanwhile;
    or the re-reading consumer's own pull offset was moved back over the message within its
    ownership (a `consumer.offset_moved` of it, at or after t0, from past the message's offset — it
    had been fetched — to at or below it; t1 may fall after the move, a fetched message still
    cached then; or a move of its own before the first consumption, whose dropped queue's cache still
    handed the message to the listener): a lite pull consumer keeps its queue on OFFSET_ILLEGAL (DefaultLitePullConsumerImpl
    only moves its pull offset), so a server-side reset (an admin reset, 5.x) re-reads without a
    new ownership;
  - `broker_offset_rollback`: the broker restarted from an older consumerOffset.json that puts
    the committed offset at or below this message (`broker.offset_rolled_back`);
  - `failover`: the re-reading consumer's offset query for the queue was answered by a replica
    behind another replica of the group (`broker.offset_behind_replica`: a slave whose copy of
    the master's offsets lagged — SlaveSynchronize — while the master was away, or a master back
    with its own table, without what clients committed on the slave meanwhile) and the message
    lies between the offset answered and the one the other replica held;
  - else by how the first consumer's ownership of the queue ended before t0: killed
    (`consumer_crash`), shut down gracefully (`consumer_shutdown`), dropped by a rebalance or as
    pull-expired (`rebalance`), dropped after OFFSET_ILLEGAL (`offset_reset`) — a drop before t1
    counts when t1 is a listener call that ended on the dropped queue (its offset is not
    committed); still owning it at t0 (two owners at once during a rebalance) → `rebalance`;
  - `other` when none of these explains it.
  A POP group owns no queue: its re-read of the same copy is `broker_offset_rollback` when the
  broker's offset table rolled back over it before the second consumption (the pop had moved the
  offset; a crash reloaded an older consumerOffset.json, and the copy was popped again — the
  first consumption may itself come from the later pop, the earlier one's listener still
  running); else, an orderly queue handing it out again in place, `invisible_time_expired` or
  `ack_lost` by its first delivery's ack (late, failed); else `other`.
A pull a slave serves never moves the consumer's offset back (slave_read.py: no OFFSET_MOVED
without offsetCheckInSlave, and with it the correction is an `offset_reset`), so `failover` is
only the offset answer above.

The retry topic and the user topic share (broker, queue id); a copy with reconsume times > 0 is
matched with the `%RETRY%` queue's ownership, others with the user topic's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import TYPE_CHECKING, Any, NamedTuple

from analysis.checkers.ledger_codes import PARKED_TWICE, SEQ_BITS, TIMER_TWICE
from models.records import (
    BROKER_OFFSET_BEHIND_REPLICA,
    BROKER_OFFSET_ROLLED_BACK,
    CONSUMER_OFFSET_MOVED,
    CONSUMER_QUEUE_DROPPED,
    CONSUMER_QUEUE_STARTED,
    CONSUMER_SHUTDOWN,
    POP_ACK_FAILED,
    POP_ACK_LATE,
    POP_ORDER_REDELIVERED,
    POP_REVIVED,
)
from sim.trace import NODE_CRASHED

if TYPE_CHECKING:  # annotations only: importing CAUSES (verdict.py, a scenario's validation) loads no NumPy
    import numpy as np

CAUSES = ("producer_retry", "rebalance", "consumer_crash", "consumer_shutdown", "broker_offset_rollback",
          "offset_reset", "failover", "send_back", "txn_double_commit", "timer_redelivered",
          "invisible_time_expired", "ack_lost", "other")
_OFFSET_MASK = 0xFFFFFFFF
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX (analysis reads only record schemas from models)


def empty_causes() -> dict[str, int]:
    return dict.fromkeys(CAUSES, 0)


class Timeline:
    """The ledger's ownership records, indexed for the look-ups below."""

    def __init__(self, events: list[tuple]) -> None:
        self.started: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # (group, node, broker, qid, retry)
        self.ended: dict[tuple, list[tuple[int, str]]] = defaultdict(list)
        self.node_ends: dict[str, list[tuple[int, int, str]]] = defaultdict(list)  # crash / shutdown
        self.moved: dict[tuple, list[tuple[int, str, int, int]]] = defaultdict(list)  # (group, broker, qid) →
        #                                                                        (t, consumer, from, to)
        self.rolled_back: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)  # (group, broker, qid, retry)
        self.behind: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)  # (group, client, broker, qid, retry)
        # (group, msg id) → (t, broker, popped topic, queue id, offset, replay) of each revive
        self.pop_revived: dict[tuple, list[tuple]] = defaultdict(list)
        self.pop_late: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # (group, msg id) → (t, deadline)
        self.pop_failed: dict[tuple, list[tuple[int, str]]] = defaultdict(list)  # (group, msg id) → (t, reason)
        self.pop_in_place: set[tuple] = set()  # (group, msg id) an orderly pop handed out again in place
        for r in sorted(events, key=lambda e: e[0]):
            kind = r[2]
            if kind == CONSUMER_QUEUE_STARTED:  # (t, node, kind, group, topic, broker, qid, offset)
                self.started[(r[3], r[1], r[5], r[6], r[4].startswith(RETRY_GROUP_TOPIC_PREFIX))].append((r[0], r[7]))
            elif kind == CONSUMER_QUEUE_DROPPED:  # (t, node, kind, group, topic, broker, qid, reason)
                self.ended[(r[3], r[1], r[5], r[6], r[4].startswith(RETRY_GROUP_TOPIC_PREFIX))].append((r[0], r[7]))
            elif kind == NODE_CRASHED:  # (a shut-down process exits right after its shutdown record)
                self.node_ends[r[1]].append((r[0], 1, "consumer_crash"))
            elif kind == CONSUMER_SHUTDOWN:
                self.node_ends[r[1]].append((r[0], 0, "consumer_shutdown"))
            elif kind == CONSUMER_OFFSET_MOVED:  # (t, node, kind, group, broker, qid, from, to)
                self.moved[(r[3], r[4], r[5])].append((r[0], r[1], r[6], r[7]))
            elif kind == BROKER_OFFSET_ROLLED_BACK:  # (t, broker, kind, group, topic, qid, from, to)
                key = (r[3], r[1], r[5], r[4].startswith(RETRY_GROUP_TOPIC_PREFIX))
                self.rolled_back[key].append((r[0], r[6], r[7]))
            elif kind == BROKER_OFFSET_BEHIND_REPLICA:  # (t, node, kind, group, topic, broker, qid, client, offset, held)
                key = (r[3], r[7], r[5], r[6], r[4].startswith(RETRY_GROUP_TOPIC_PREFIX))
                self.behind[key].append((r[0], r[8], r[9]))
            elif kind == POP_REVIVED:  # (t, broker, kind, group, msg_id, topic, qid, offset, reconsume,
                #                           from topic, from qid, from offset, replay)
                self.pop_revived[(r[3], r[4])].append((r[0], r[1], r[9], r[10], r[11], r[12]))
            elif kind == POP_ORDER_REDELIVERED:  # in place (orderly POP): (t, broker, kind, group, msg_id, topic, qid,
                #                                   offset, n)
                self.pop_revived[(r[3], r[4])].append((r[0], r[1], r[5], r[6], r[7], False))
                self.pop_in_place.add((r[3], r[4]))
            elif kind == POP_ACK_LATE:  # (t, node, kind, group, msg_id, deadline)
                self.pop_late[(r[3], r[4])].append((r[0], r[5]))
            elif kind == POP_ACK_FAILED:  # (t, node, kind, group, msg_id, reason)
                self.pop_failed[(r[3], r[4])].append((r[0], r[5]))

    def owned_since(self, key: tuple, t_us: int) -> int | None:
        """Start of the ownership of `key` in force at `t_us` (its latest start at or before it)."""
        starts = self.started.get(key)
        if not starts:
            return None
        i = bisect_right(starts, (t_us, 1 << 62))
        return starts[i - 1][0] if i else None

    def end_after(self, key: tuple, node: str, t_us: int) -> tuple[int, str] | None:
        """The first end of `node`'s ownership of `key` after `t_us`: a drop, a crash or a shutdown;
        or a drop of the ownership in force at `t_us` before it (a batch whose listener call ended
        after its queue was dropped: the orderly removal waits for it, its offset is not committed)."""
        since = self.owned_since(key, t_us)
        ends = [(t, 2, reason) for t, reason in self.ended.get(key, ())
                if t > t_us or (since is not None and t >= since)]
        ends += [e for e in self.node_ends.get(node, ()) if e[0] > t_us]
        if not ends:
            return None
        t, _rank, reason = min(ends)
        return t, reason


class TimedCause(NamedTuple):
    """One duplicate delivery: when it was consumed and why."""

    t_us: int
    cause: str


def timed_causes(unit: Any, ledger: Any, copies: list[np.ndarray], timeline: Timeline) -> list[TimedCause]:
    """The cause of every duplicate delivery of `unit`, with its consumption time."""
    names = ledger.node_names
    return [TimedCause(t_us, _cause(unit, ledger, copies, timeline, names, t_us, node, broker, qid, offset,
                                    reconsume, p, seq))
            for t_us, node, broker, qid, offset, reconsume, p, seq in unit.dups]


def count_causes(timed: list[TimedCause]) -> dict[str, int]:
    """Duplicates per cause, every cause present (their sum is the unit's duplicates)."""
    causes = empty_causes()
    for d in timed:
        causes[d.cause] += 1
    return causes


def causes_by_second(timed: list[TimedCause]) -> dict[str, list[list[int]]]:
    """cause → [[simulated second, duplicates], ...] over the seconds that had any, seconds ascending;
    causes with none are left out (sparse: a run has few duplicates, and an hour has 3,600 seconds)."""
    per: dict[str, dict[int, int]] = defaultdict(dict)
    for d in timed:
        second = d.t_us // 1_000_000
        per[d.cause][second] = per[d.cause].get(second, 0) + 1
    return {c: [[s, n] for s, n in sorted(per[c].items())] for c in CAUSES if c in per}


def _cause(unit: Any, ledger: Any, copies: list[np.ndarray], timeline: Timeline, names: list[str], t_us: int,
           node: str, broker: str, qid: int, offset: int, reconsume: int, p: int, seq: int) -> str:
    return cause_and_evidence(unit, ledger, copies, timeline, names, t_us, node, broker, qid, offset, reconsume,
                              p, seq)[0]


def cause_and_evidence(unit: Any, ledger: Any, copies: list[np.ndarray], timeline: Timeline, names: list[str],
                       t_us: int, node: str, broker: str, qid: int, offset: int, reconsume: int, p: int,
                       seq: int) -> tuple[str, dict[str, Any]]:
    """The cause of one duplicate delivery (module docstring) and the facts the rule used
    (`rmqsim explain` prints them): `t_first`/`first_node` (the first successful consumption),
    `offset` (the queue offset re-read), `t0` (start of the re-reading consumer's ownership), and the one fact that decided it —
    `moved_us`, `rolled_back` (t, from, to), `behind` (t, answered, held), `end` (t, reason) —
    or, for another stored copy, `first_reconsume`, `copies` and `timer_twice` (the timer delivered it twice)."""
    first_pos = unit.first_pos[p][seq]
    position = (((ledger.brokers[broker] << 12 | qid) << 8 | min(reconsume, 255)) << 32) | (offset & _OFFSET_MASK)
    t_first = unit.first_ok_us[p][seq]
    first_node = names[unit.first_node[p][seq]]
    why: dict[str, Any] = {"t_first": t_first, "first_node": first_node, "same_copy": position == first_pos,
                           "offset": offset}
    if position != first_pos:
        first_reconsume = (first_pos >> 32) & 0xFF
        why["first_reconsume"] = first_reconsume
        why["copies"] = int(copies[p][seq]) if seq < len(copies[p]) else 0
        msg_id = unit_msg_id(p, seq)
        revived = [r for r in timeline.pop_revived.get((unit.group, msg_id), ()) if r[0] <= t_us]
        if revived:  # a POP group: the broker put it back (module docstring)
            return _pop_cause(ledger, timeline, unit.group, msg_id, first_pos, t_us, why, revived)
        if reconsume > 0 or first_reconsume > 0:
            return "send_back", why
        state = ledger.state[p][seq] if seq < len(ledger.state[p]) else 0
        why["timer_twice"] = bool(state & TIMER_TWICE) and not state & PARKED_TWICE
        if why["timer_twice"]:  # the timer put it back twice, not a second send
            return "timer_redelivered", why
        if why["copies"] > 1:  # a transactional message's copies are commits
            return ("txn_double_commit" if getattr(ledger.producers[p], "transactional", False)
                    else "producer_retry"), why
        return "other", why
    group, retry = unit.group, reconsume > 0
    key = (group, node, broker, qid, retry)
    t0 = why["t0"] = timeline.owned_since(key, t_us)
    if t0 is None:  # no queue ownership: a POP group (module docstring)
        return _pop_same_copy(timeline, group, broker, qid, retry, offset, unit_msg_id(p, seq), t_us, why)
    moved = _moved_back(timeline, group, node, broker, qid, offset, t_first, t0, t_us)
    if moved is not None:
        why["moved_us"] = moved
        return "offset_reset", why
    for t, before, after in timeline.rolled_back.get((group, broker, qid, retry), ()):
        if t_first < t <= t0 and after <= offset < before:
            why["rolled_back"] = (t, before, after)
            return "broker_offset_rollback", why
    for t, answered, held in timeline.behind.get(key, ()):
        if t_first < t <= t0 and answered <= offset < held:
            why["behind"] = (t, answered, held)
            return "failover", why
    first_key = (group, first_node, broker, qid, retry)
    end = timeline.end_after(first_key, first_node, t_first)
    why["end"] = end
    if end is None or end[0] > t0:
        return ("rebalance" if first_node != node else "other"), why
    reason = end[1]
    if reason in ("rebalance", "pull_expired"):
        return "rebalance", why
    if reason == "offset_moved":
        return "offset_reset", why
    return reason, why  # consumer_crash / consumer_shutdown


def _moved_back(timeline: Timeline, group: str, node: str, broker: str, qid: int, offset: int, t_first: int,
                t0: int, t_us: int) -> int | None:
    """When the queue's offset was corrected in a way that explains a re-read at `t_us` (module
    docstring): any move after the first consumption and before the re-reader's ownership began, else
    a move of the re-reader's own pull offset within that ownership, from past `offset` to at or
    below it (a lite pull consumer's), or one before the first consumption (the fetched copy was
    consumed from the dropped queue's cache after the move ended that ownership); None if neither."""
    moves = timeline.moved.get((group, broker, qid), ())
    before = next((t for t, _mover, _from, _to in moves if t_first < t <= t0), None)
    if before is not None:
        return before
    return next((t for t, mover, moved_from, moved_to in moves
                 if mover == node and (t0 <= t or t < t_first) and t <= t_us and moved_to <= offset < moved_from),
                None)


def unit_msg_id(p: int, seq: int) -> int:
    """The message id of producer index `p`'s message `seq` (models/message.py msg_id_of)."""
    return p << SEQ_BITS | seq


def _pop_cause(ledger: Any, timeline: Timeline, group: str, msg_id: int, first_pos: int, t_us: int,
               why: dict[str, Any], revived: list[tuple]) -> tuple[str, dict[str, Any]]:
    """A POP redelivery's cause: a late listener call; else the broker's offset rolled back over the
    first copy (it was popped twice, and one of those deliveries was revived); else an orderly batch handed
    out again in place (another of its messages stayed un-acked past the invisible time); else a
    lost ack."""
    why["revived_us"] = revived[-1][0]
    if _ack_was_late(timeline, group, msg_id, t_us, why):
        return "invisible_time_expired", why
    broker_index, qid = first_pos >> 52, (first_pos >> 40) & 0xFFF
    broker = next((name for name, i in ledger.brokers.items() if i == broker_index), None)
    replayed = next((r for r in revived if r[5]), None)
    if replayed is not None:  # revived again: a restart reloaded an older revive offset
        why["revive_replayed"] = (replayed[0], replayed[1])
        return "broker_offset_rollback", why
    popped = [(broker, qid, first_pos & _OFFSET_MASK, (first_pos >> 32) & 0xFF > 0)]
    popped += [(node, q, off, topic.startswith(RETRY_GROUP_TOPIC_PREFIX)) for _t, node, topic, q, off, _r in revived]
    if any(_rolled_back_over(timeline, group, node, q, retry, offset, t_us, why)  # popped twice
           for node, q, offset, retry in popped):
        return "broker_offset_rollback", why
    if (group, msg_id) in timeline.pop_in_place:
        return "invisible_time_expired", why
    why["ack_failed"] = next((f for f in timeline.pop_failed.get((group, msg_id), ()) if f[0] <= t_us), None)
    return "ack_lost", why


def _pop_same_copy(timeline: Timeline, group: str, broker: str, qid: int, retry: bool, offset: int, msg_id: int,
                   t_us: int, why: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A POP group's re-read of the same copy: the broker's offset rolled back over it (a rollback
    before both consumptions counts too: one of them came from a pop the restart had forgotten);
    else its first delivery's ack came too late or failed (an orderly queue hands the message out
    again in place, its count lost with a restarted broker's order table)."""
    if _rolled_back_over(timeline, group, broker, qid, retry, offset, t_us, why):
        return "broker_offset_rollback", why
    if _ack_was_late(timeline, group, msg_id, t_us, why):
        return "invisible_time_expired", why
    failed = next((f for f in timeline.pop_failed.get((group, msg_id), ()) if f[0] <= t_us), None)
    if failed is not None:
        why["ack_failed"] = failed
        return "ack_lost", why
    return "other", why


def _ack_was_late(timeline: Timeline, group: str, msg_id: int, t_us: int, why: dict[str, Any]) -> bool:
    """A listener call of the message ended after its handle's invisible time (`pop.ack_late`) by `t_us`."""
    late = next((x for x in timeline.pop_late.get((group, msg_id), ()) if x[0] <= t_us), None)
    if late is not None:
        why["ack_late"] = late
    return late is not None


def _rolled_back_over(timeline: Timeline, group: str, broker: str | None, qid: int, retry: bool, offset: int,
                      t_us: int, why: dict[str, Any]) -> bool:
    """The broker's offset of (group, queue) went back over `offset` at or before `t_us` (a POP
    group: the copy was then handed out, or revived, twice)."""
    for t, before, after in timeline.rolled_back.get((group, broker, qid, retry), ()):
        if t <= t_us and after <= offset < before:
            why["rolled_back"] = (t, before, after)
            return True
    return False
