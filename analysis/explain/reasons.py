"""A message's verdict in each consumption unit, and the one-line reason behind its cause label.

The label is the checkers' (analysis/checkers/message_causes.py: the same computation that counted it in
the summary); the reason restates the facts the labelling rule looked at, from the records explain
kept: the destroyed copy and the fault (`commit_log.destroyed`), the reused offset and the message
that held it before, the duplicate checker's evidence (analysis/checkers/duplicates.py
`cause_and_evidence`: first consumption, the ownership that re-read it, the event that ended the
first one), the two queues of an order violation, a transaction's checks. `RULES` states each
label's rule as the checkers' docstrings do. Each verdict also names when and where its mechanism
happened (`event_us`, `node`), which `--fault` uses to attribute it to a fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import models.records as rec
from analysis.checkers.duplicates import cause_and_evidence
from analysis.checkers.ledger_codes import ACKED, FAILED, ONEWAY, SEQ_BITS, SEQ_MASK
from analysis.explain.stories import seconds
from sim import trace

RULES = {
    "unflushed_at_power_loss": "a power loss destroyed the acknowledged copy on its master beyond the last flush "
                               "(and if the group has slaves, one of them held it: no failover brings it back)",
    "replica_not_synced": "a power loss destroyed the acknowledged copy on its master beyond the last flush, and no "
                          "slave of the group held it (replication lag)",
    "truncated_on_failover": "a broker rejoining its group as a slave after a failover (controller mode) cut its "
                             "CommitLog to the consistent point of its epochs, and the copy it cut was the last one: "
                             "the new master never had it",
    "truncated_on_recovery": "a process crash destroyed it (the transient store pool's uncommitted buffer)",
    "offset_skipped_after_recovery": "stored at a queue offset the broker assigned again after a truncation, which "
                                     "the consumer's offset had already passed",
    "expired_file_deleted": "deleted with its CommitLog file by retention (fileReservedTime) or disk pressure "
                            "before the group consumed it",
    "fsync_error_swallowed": "a power loss destroyed the acknowledged copy on its master although the store had "
                             "reported it flushed: the fsync failed (an I/O error) and MappedFile.flush logged the "
                             "error and moved the flushed position all the same",
    "other": "none of the known mechanisms applies",
    "producer_retry": "another stored copy was delivered: the brokers stored the message twice (a retried send)",
    "txn_double_commit": "another stored copy was delivered: its half was committed twice",
    "timer_redelivered": "another stored copy was delivered: the 5.x timer put the message back into its real "
                         "topic more than once (a wheel slot read again after a broker restart, from its last "
                         "checkpoint, or by a promoted slave, from the checkpoint it last copied from the old "
                         "master), its send having parked it once",
    "send_back": "another stored copy was delivered and one of them came through the retry path",
    "invisible_time_expired": "POP: the broker put it back into the group's POP retry topic because the listener "
                              "call that consumed it ended after its invisible time, so its ack came too late",
    "ack_lost": "POP: the broker put it back into the group's POP retry topic although it was consumed in time: "
                "the ack failed or was lost with the broker",
    "rebalance": "the same copy re-read after its queue was handed over (or owned twice) before the first "
                 "consumer's offset reached the broker",
    "consumer_crash": "the same copy re-read after the consumer that consumed it was killed before its offset "
                      "reached the broker",
    "consumer_shutdown": "the same copy re-read after the consumer that consumed it shut down",
    "broker_offset_rollback": "the same copy re-read after the broker restarted from an older consumerOffset.json "
                              "that put the committed offset at or below it",
    "offset_reset": "the same copy re-read after the queue's offset was corrected (OFFSET_MOVED / OFFSET_ILLEGAL)",
    "failover": "the same copy re-read after a replica behind another one answered the offset query",
    "send_side": "the two messages of one key were stored in different queues: the producer's hash selector saw a "
                 "different route",
    "retry_path": "one of the two messages was first consumed from the retry topic",
    "broker_lost_locks": "one queue, two consumers, after a restarted broker granted a lock anew",
    "lock_expired": "one queue, two consumers, after an expired lock was taken over",
    "discarded": "its local transaction committed, but the half reached transactionCheckMax and went to "
                 "TRANS_CHECK_MAX_TIME_TOPIC",
    "real_message_lost": "committed, and a power loss destroyed the real message the commit wrote",
    "rolled_back": "committed, but the broker applied a ROLLBACK (a check got a wrong answer)",
    "half_lost": "committed, and a power loss destroyed the unresolved half",
}


@dataclass
class Verdict:
    unit: str
    msg_id: int
    verdict: str  # delivered, lost, duplicate, order_violation, pending_retry, dlq, ..., txn
    cause: str | None
    reason: str
    event_us: int | None = None  # when its mechanism happened (fault attribution)
    node: str | None = None  # where: a node, or a broker group

    def line(self) -> str:
        label = f"{self.verdict}: {self.cause}" if self.cause else self.verdict
        return f"{label} — {self.reason}"

    def as_json(self, key: str) -> dict[str, Any]:
        return {"unit": self.unit, "msg_id": self.msg_id, "key": key, "verdict": self.verdict, "cause": self.cause,
                "reason": self.reason, "rule": RULES.get(self.cause or "", None), "event_us": self.event_us,
                "node": self.node}


def message_verdicts(f: Any, msg_id: int, records: list[tuple] | None = None) -> list[Verdict]:
    """Every verdict on one message: per unit of its topic its outcome, then each duplicate
    delivery and order violation; `records`: the message mode's records (richer reasons)."""
    p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
    ledger = f.ledger
    if f.txn.transactional[p]:
        return [txn_verdict(f, msg_id)]
    out: list[Verdict] = []
    for name in sorted(ledger.units):
        unit = ledger.units[name]
        if unit.topic != ledger.producers[p].topic:
            continue
        out.append(_outcome(f, unit, p, seq, msg_id, records))
    out += [duplicate_verdict(f, d, records) for d in f.causes.duplicates if d.msg_id == msg_id]
    out += [violation_verdict(f, v) for v in f.causes.violations if v.msg_id == msg_id]
    return out


def _outcome(f: Any, unit: Any, p: int, seq: int, msg_id: int, records: list[tuple] | None) -> Verdict:
    lost = f.causes.lost.get(unit.name, {}).get(msg_id)
    if lost is not None:
        return lost_verdict(f, unit.name, msg_id, lost, records)
    state = f.causes.states.get(unit.name, {}).get(msg_id)
    ok = unit.ok_count[p][seq] if seq < len(unit.ok_count[p]) else 0
    if ok:
        return Verdict(unit.name, msg_id, "delivered", None, f"consumed successfully {ok} time(s), first at "
                                                             f"{seconds(unit.first_ok_us[p][seq])}")
    bits = f.ledger.state[p][seq] if seq < len(f.ledger.state[p]) else 0
    if not bits & ACKED:
        why = "the send failed" if bits & FAILED else "a ONEWAY send" if bits & ONEWAY else \
            "the send returned another status than SEND_OK" if bits else "it was never sent"
        return Verdict(unit.name, msg_id, "not_acknowledged", None, f"{why}: not judged by at-least-once")
    texts = {"pending_retry": "consumption failed; on its way back through the retry topic when the run ended",
             "pending_delay": "a delayed or timer message still waiting in SCHEDULE_TOPIC_XXXX or "
                              "rmq_sys_wheel_timer when the run ended",
             "dlq": "moved to the dead-letter queue after its retries"}
    if state == "dlq":
        moved = [r for r in records or () if r[2] == rec.BROKER_STORED and r[3] == msg_id
                 and r[4] == f"%DLQ%{unit.group}"]
        if moved:
            r = moved[-1]
            texts["dlq"] = f"moved to the dead-letter queue {r[4]} on {r[1]} at {seconds(r[0])} after its retries " \
                           f"(reconsume {r[9]})"
    if state in texts:
        return Verdict(unit.name, msg_id, state, None, texts[state])
    return Verdict(unit.name, msg_id, "unconsumed", None, "not consumed when the run stopped at its bound")


def lost_verdict(f: Any, unit: str, msg_id: int, cause: str, records: list[tuple] | None = None) -> Verdict:
    """A lost message: the destroyed copy or the reused offset behind its cause."""
    destroyed = f.rare_by_msg.get((rec.COMMIT_LOG_DESTROYED, msg_id), [])
    if cause in ("unflushed_at_power_loss", "replica_not_synced", "truncated_on_recovery",
                 "fsync_error_swallowed") and destroyed:
        d = destroyed[-1]
        what, when = _destroyed_copy(d, msg_id, records)
        where = f"stored{when} as {f.run_broker(d[1])} {d[4]} q{d[5]} @{d[6]}"
        if cause == "truncated_on_recovery":
            tail = f"{d[7]} of {d[1]} at {seconds(d[0])} destroyed {what} in the uncommitted transient store pool"
        elif cause == "fsync_error_swallowed":
            tail = (f"power_loss of {d[1]} at {seconds(d[0])} destroyed {what}, which the store had reported "
                    "flushed: its fsync had failed and the error was swallowed")
        else:
            slaves = "; a slave held it, but nothing fails over to it" if d[9] else \
                "; no slave of the group held it (replication lag)" if d[8] else ""
            tail = f"{d[7]} of {d[1]} at {seconds(d[0])} destroyed {what} before flush{slaves}"
        return Verdict(unit, msg_id, "lost", cause, f"{where}; {tail}", d[0], d[1])
    if cause == "truncated_on_failover" and destroyed:
        return _failover_truncated(f, unit, msg_id, destroyed, records)
    if cause == "offset_skipped_after_recovery":
        return _skipped(f, unit, msg_id, records)
    if cause == "expired_file_deleted" and destroyed:
        d = destroyed[-1]
        stored = [r for r in records or () if r[2] == rec.BROKER_STORED and r[3] == msg_id and r[1] == d[1]
                  and r[0] <= d[0]]
        when = f" at {seconds(stored[-1][0])}" if stored else ""
        return Verdict(unit, msg_id, "lost", cause, f"stored{when} as {f.run_broker(d[1])} {d[4]} q{d[5]} @{d[6]}; "
                                                    f"{d[1]} deleted its CommitLog file at {seconds(d[0])} before "
                                                    f"{unit} had consumed it", d[0], d[1])
    return Verdict(unit, msg_id, "lost", cause, "acknowledged and stored, never consumed successfully, and no fault "
                                                "destroyed it or reused its offset")


def _destroyed_copy(d: tuple, msg_id: int, records: list[tuple] | None) -> tuple[str, str]:
    """Which copy a `commit_log.destroyed` record `d` names ("it", its retry or parked copy) and
    " at <when it was stored>" ("" without the records)."""
    what = "its retry copy" if d[4].startswith("%RETRY%") else \
        "its parked copy (not yet put back by the timer)" if d[4] == "rmq_sys_wheel_timer" else "it"
    stored = [r for r in records or () if r[2] == rec.BROKER_STORED and r[3] == msg_id and r[1] == d[1]
              and r[4] == d[4] and r[6] == d[6] and r[0] <= d[0]]
    return what, f" at {seconds(stored[-1][0])}" if stored else ""


def _failover_truncated(f: Any, unit: str, msg_id: int, destroyed: list[tuple],
                        records: list[tuple] | None) -> Verdict:
    """The copy a rejoining slave's truncation cut (fault `failover_truncated`), with the election
    before it that gave its group another master."""
    cuts = [d for d in destroyed if d[7] == "failover_truncated"] or destroyed
    d = cuts[-1]
    what, when = _destroyed_copy(d, msg_id, records)
    group = f.run_broker(d[1])
    elected = [r for r in f.collector.rare if r[2] == rec.CONTROLLER_ELECTED and r[3] == group and r[4]
               and r[4] != d[1] and r[0] <= d[0]]
    after = f" after the controller elected {elected[-1][4]} master of {group} at {seconds(elected[-1][0])} " \
            f"(epoch {elected[-1][6]}, {elected[-1][7]})" if elected else ""
    # the failover is the mechanism: the election that gave the group another master (the truncation
    # comes when the old master rejoins, after its fault has ended)
    return Verdict(unit, msg_id, "lost", "truncated_on_failover",
                   f"stored{when} as {group} {d[4]} q{d[5]} @{d[6]} on {d[1]}; {d[1]} rejoined as a slave{after} and "
                   f"at {seconds(d[0])} truncated its CommitLog to the consistent point of its epochs, destroying "
                   f"{what}: the new master never had it", elected[-1][0] if elected else d[0], d[1])


def _skipped(f: Any, unit: str, msg_id: int, records: list[tuple] | None) -> Verdict:
    """A message stored at a reused queue offset its group had passed. The first reuse record is the
    one that made it unreachable (its store at that offset); a later one of the same message is a
    replica cutting the old record at that offset on rejoining (models/broker/replicas_manager.py)."""
    reused = f.rare_by_msg.get((rec.OFFSET_REUSED, msg_id), [])
    if not reused:
        return Verdict(unit, msg_id, "lost", "offset_skipped_after_recovery", "stored at a reused queue offset")
    r = reused[0]
    t, node, topic, qid, qoff = r[0], r[1], r[4], r[5], r[6]
    group = f.run_broker(node)
    held = f.destroyed_in_group.get((group, topic, qid, qoff), [])
    before = [d for d in held if d[0] <= t]
    text = f"stored at {seconds(t)} as {group} {topic} q{qid} @{qoff}"
    event, where = t, node
    elected = [e for e in f.collector.rare if e[2] == rec.CONTROLLER_ELECTED and e[3] == group and e[4] == node
               and e[0] <= t]
    if before:
        d = before[-1]
        text += f", an offset the broker assigned again: it first held {f.key(d[3])}, which the {d[7]} of {d[1]} at " \
                f"{seconds(d[0])} destroyed"
        event, where = _destroyed_event(f, d), d[1]
    elif elected:
        e = elected[-1]
        cut = [d for d in held if d[0] > t]
        old = f"{f.key(cut[0][3])}, which {cut[0][1]}'s truncation on rejoining cut at {seconds(cut[0][0])}" if cut \
            else "another message"
        text += f" on {node}, master since the election at {seconds(e[0])} (epoch {e[6]}, {e[7]}): an offset the " \
                f"old master {e[5] or '(none)'} had already given to {old}, which {node} never had"
    group_name = unit.split("/")[0]
    passed = [c for c in records or () if c[2] == rec.BROKER_OFFSET_COMMITTED and c[3] == group_name
              and f.run_broker(c[1]) == group and c[4] == topic and c[5] == qid and c[6] > qoff and c[0] <= t]
    text += f"; {group_name} had already passed it"
    if passed:
        c = passed[-1]
        text += f" ({c[7]} had committed {c[6]} at {seconds(c[0])})"
    return Verdict(unit, msg_id, "lost", "offset_skipped_after_recovery", text, event, where)


def duplicate_verdict(f: Any, d: Any, records: list[tuple] | None = None) -> Verdict:
    """One duplicate delivery, with the duplicate checker's own evidence."""
    unit = f.ledger.units[d.unit]
    p, seq = d.msg_id >> SEQ_BITS, d.msg_id & SEQ_MASK
    t_us, node, broker, qid, offset, reconsume = f.dups[(d.unit, d.msg_id, d.t_us)][:6]
    cause, why = cause_and_evidence(unit, f.ledger, f.copies, f.timeline, f.ledger.node_names, t_us, node,
                                    broker, qid, offset, reconsume, p, seq)
    assert cause == d.cause, (cause, d.cause)  # one computation: the checker's
    first = f"{why['first_node']} consumed it at {seconds(why['t_first'])}"
    again = f"{node} consumed it again at {seconds(t_us)}"
    if not why["same_copy"]:
        text = {"producer_retry": f"the brokers stored it {why['copies']} times (a retried send whose answer the "
                                  f"producer did not get); {first}, {again} from {broker} q{qid} @{offset}",
                "txn_double_commit": f"its half was committed {why['copies']} times; {first}, {again}",
                "timer_redelivered": f"the timer put it back into its topic more than once (a slot read again "
                                     f"after a broker restart or failover): {why['copies']} stored copies; {first}, "
                                     f"{again} from {broker} q{qid} @{offset}",
                "send_back": f"{first}; {again} from a retry-path copy (reconsume {reconsume})",
                "invisible_time_expired": (f"{first}, after its invisible time had ended at "
                                           f"{seconds(why['ack_late'][1])}; the broker revived it at "
                                           f"{seconds(why.get('revived_us', 0))}; {again} (reconsume {reconsume})")
                if "ack_late" in why else (f"{first}; another message of its orderly batch stayed un-acked past the "
                                           f"invisible time, so the broker handed the batch out again in place at "
                                           f"{seconds(why.get('revived_us', 0))}; {again} (reconsume {reconsume})"),
                "broker_offset_rollback": f"{first}; its broker restarted from an older consumerOffset.json "
                                          + ("and revived its checkpoint again (the revive offset went back)"
                                             if why.get("revive_replayed") else
                                             "and handed it out again (its popped offset went back), and one of "
                                             "the two deliveries was revived")
                                          + f"; {again} (reconsume {reconsume})",
                "ack_lost": f"{first} in time, but its ack did not take effect"
                            + (f" ({why['ack_failed'][1]} at {seconds(why['ack_failed'][0])})"
                               if why.get("ack_failed") else "")
                            + f"; the broker revived it at {seconds(why.get('revived_us', 0))}; {again}"}.get(
                    cause, f"{first}; {again} from another stored copy")
        if cause == "timer_redelivered":  # the timer's re-read follows its broker's restart or promotion
            event, where = _timer_reread(f, d.msg_id)
            return Verdict(d.unit, d.msg_id, "duplicate", cause, text, event or t_us, where or broker)
        if cause in ("invisible_time_expired", "ack_lost", "broker_offset_rollback"):
            event, where = _pop_event(f, cause, why, broker)
            return Verdict(d.unit, d.msg_id, "duplicate", cause, text, event or t_us, where)
        born = f.born_us(d.msg_id)
        return Verdict(d.unit, d.msg_id, "duplicate", cause, text, born if cause != "send_back" else t_us)
    text = f"{first}; {again} from the same copy ({broker} q{qid} @{offset}) in an ownership that started at " \
           f"{seconds(why['t0'])}" if why.get("t0") is not None else f"{first}; {again}"
    event, where = why.get("t0") or t_us, None
    if "moved_us" in why:
        text += f"; the queue's offset was corrected (OFFSET_MOVED) at {seconds(why['moved_us'])}"
        event = why["moved_us"]
    elif "rolled_back" in why:
        t, before, after = why["rolled_back"]
        text += f"; {broker} restarted at {seconds(t)} from an older consumerOffset.json: {unit.group}'s offset went " \
                f"from {before} back to {after}, at or below {offset}"
        event, where = _went_down(f, broker, t) or t, broker
    elif "behind" in why:
        t, answered, held = why["behind"]
        text += f"; its offset query was answered {answered} at {seconds(t)} by a replica behind another that held {held}"
        event, where = t, broker
    elif why.get("end") is not None and why["end"][0] <= why["t0"]:
        t_end, reason = why["end"]
        text += f"; {why['first_node']}'s ownership ended at {seconds(t_end)} ({reason}) before a commit covering it " \
                f"reached {broker}" + _last_commit(records, unit.group, broker, qid, why, t_end, f)
        event, where = t_end, why["first_node"]
    elif cause == "rebalance":
        text += f"; {why['first_node']} still owned the queue then (two owners during a rebalance)"
    return Verdict(d.unit, d.msg_id, "duplicate", cause, text, event, where)


def _destroyed_event(f: Any, d: tuple) -> int:
    """When the mechanism behind a destroyed copy happened: the fault's moment, or for a rejoining
    replica's truncation (`failover_truncated`) the election that gave its group another master
    (the truncation itself comes when the old master is back, after its fault)."""
    if d[7] != "failover_truncated":
        return d[0]
    elected = [r[0] for r in f.collector.rare if r[2] == rec.CONTROLLER_ELECTED and r[3] == f.run_broker(d[1])
               and r[4] and r[4] != d[1] and r[0] <= d[0]]
    return elected[-1] if elected else d[0]


def _pop_event(f: Any, cause: str, why: dict, broker: str) -> tuple[int | None, str | None]:
    """(when, where) a POP redelivery's mechanism happened: the late listener call; the failed ack,
    or the crash of a broker between the first consumption and the revive (the ack lost with it);
    the crash before the restart that took the broker's offsets back."""
    if cause == "invisible_time_expired":
        return why.get("t_first"), why.get("first_node")
    if cause == "ack_lost":
        if why.get("ack_failed"):
            return why["ack_failed"][0], why.get("first_node")
        revived = why.get("revived_us")
        downs = [r for r in f.collector.rare if r[2] == trace.NODE_CRASHED and r[1] in f.collector.broker_of
                 and why.get("t_first", 0) <= r[0] <= (revived if revived is not None else r[0])]
        return (downs[-1][0], downs[-1][1]) if downs else (revived, broker)
    at = why.get("revive_replayed", (None,))[0] or why.get("rolled_back", (None,))[0]
    if at is None:
        return None, broker
    return _went_down(f, broker, at) or at, broker


def _went_down(f: Any, broker: str, t_us: int) -> int | None:
    """When a node of broker group `broker` last crashed or lost power at or before `t_us` (a
    restart's cause: what a finding made at the restart is attributed to)."""
    downs = [r[0] for r in f.collector.rare if r[2] == trace.NODE_CRASHED and f.run_broker(r[1]) == broker
             and r[0] <= t_us]
    return downs[-1] if downs else None


def _timer_reread(f: Any, msg_id: int) -> tuple[int | None, str | None]:
    """(when, where) the timer came to read the message's slot again: the crash or power loss
    before the restart of the broker that delivered it again, or the election that made it master."""
    replays = f.rare_by_msg.get((rec.TIMER_DELIVERED, msg_id), [])
    if not replays:
        return None, None
    t, node = replays[0][0], replays[0][1]
    down = [r[0] for r in f.collector.rare if r[2] == trace.NODE_CRASHED and r[1] == node and r[0] <= t]
    up = [r[0] for r in f.collector.rare if r[2] == trace.NODE_RESTARTED and r[1] == node and r[0] <= t]
    elected = [r[0] for r in f.collector.rare if r[2] == rec.CONTROLLER_ELECTED and r[4] == node and r[0] <= t]
    if elected and (not up or elected[-1] > up[-1]):
        return elected[-1], node
    return (down[-1], node) if down else (None, node)


def _last_commit(records: list[tuple] | None, group: str, broker: str, qid: int, why: dict, t_end: int,
                 f: Any) -> str:
    """The bound of a re-read: the last commit from the first consumer that reached the broker before its end."""
    commits = [c for c in records or () if c[2] == rec.BROKER_OFFSET_COMMITTED and c[3] == group
               and f.run_broker(c[1]) == broker and c[5] == qid and c[7] == why["first_node"] and c[0] <= t_end]
    if not commits:
        return ""
    c = commits[-1]
    return f"; the last commit of {c[7]} that reached {c[1]} was {c[6]} at {seconds(c[0])} (via {c[8]}), not past " \
           f"@{why['offset']}"


def violation_verdict(f: Any, v: Any) -> Verdict:
    """An order violation: the message that overtook it and the queues both were first read from."""
    unit = f.ledger.units[v.unit]
    brokers = sorted(f.ledger.brokers, key=f.ledger.brokers.get)
    late, early = _first_position(unit, v.msg_id, brokers), _first_position(unit, v.overtaken_by, brokers)
    text = f"first consumed at {seconds(v.first_us)}, after {f.key(v.overtaken_by)} (same producer and key, sent " \
           f"later) had been; it was read from {late}, {f.key(v.overtaken_by)} from {early}"
    event = v.first_us
    if v.cause == "send_side":
        text += ": its producer's hash selector saw another route between the two sends" + _routes_between(f, v)
        event = f.born_us(v.overtaken_by) or v.first_us
    return Verdict(v.unit, v.msg_id, "order_violation", v.cause, text, event)


def _routes_between(f: Any, v: Any) -> str:
    """The routes the producer installed between the late message's send and the overtaking one's."""
    producer = f.names[v.msg_id >> SEQ_BITS]
    topic = f.ledger.producers[v.msg_id >> SEQ_BITS].topic
    since, until = f.born_us(v.msg_id), f.born_us(v.overtaken_by)
    if since is None or until is None:
        return ""
    routes = [r for r in f.collector.rare if r[2] == rec.CLIENT_ROUTE_UPDATED and r[1] == producer and r[3] == topic
              and since <= r[0] <= until]
    return "".join(f"; at {seconds(r[0])} {producer} installed the route {r[4]}" for r in routes)


def _first_position(unit: Any, msg_id: int, brokers: list[str]) -> str:
    p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
    pos = unit.first_pos[p][seq]
    queue = pos >> 40
    reconsume = (pos >> 32) & 0xFF
    retry = f" (retry topic, reconsume {reconsume})" if reconsume else ""
    return f"{brokers[queue >> 12]} q{queue & 0xFFF} @{pos & 0xFFFFFFFF}{retry}"


def txn_verdict(f: Any, msg_id: int) -> Verdict:
    """A transactional message: visible iff committed (analysis/checkers/txn_checker.py)."""
    facts = f.txn.message(f.ledger, msg_id)
    if facts is None:
        return Verdict("txn", msg_id, "txn", None, "no half message of it was stored: not a transaction")
    outcome, _, cause = facts["outcome"].partition(":")
    checks = f"checked {facts['checks']} time(s)"
    discarded = "; discarded at transactionCheckMax" if facts["discarded"] else ""
    text = {"committed_visible": f"committed and visible ({checks})",
            "rolled_back_hidden": f"{'rolled back' if not facts['committed'] else 'committed'} and never visible "
                                  f"({checks}{discarded})",
            "pending": f"committed, not yet visible: still being checked when the run ended ({checks})"}.get(outcome)
    if text is None:
        text = {"discarded": f"its local transaction committed, but the broker {checks} and discarded the half at "
                             "transactionCheckMax (TRANS_CHECK_MAX_TIME_TOPIC)",
                "real_message_lost": "committed, but a power loss destroyed the real message and nothing wrote it again",
                "rolled_back": f"committed, but the broker applied a ROLLBACK ({checks})",
                "half_lost": "committed, but a power loss destroyed its unresolved half",
                "commit_by_check": "never committed, yet a check answer committed it",
                "commit_by_producer": "never committed, yet the producer's END_TRANSACTION committed it"}[cause]
    discards = f.rare_by_msg.get((rec.TXN_DISCARDED, msg_id), [])
    return Verdict("txn", msg_id, f"txn {outcome}", cause or None, text, discards[0][0] if discards else None)
