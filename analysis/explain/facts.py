"""One message's life as facts, one per line, from the records explain kept (explain_collect.py).

`message_facts(records, ...)` turns the message's own records (born, each send attempt and its
outcome, each stored copy, flush, replication, dispatch, deliveries, send-backs, POP receipts,
acks and revives, timer parking and deliveries, transaction steps, a copy destroyed or an offset
reused) and the records around it (faults; crashes, restarts and shutdowns of the nodes it passed
through and of its POP groups' members; in controller mode, their groups' elections,
SyncStateSets, role changes and truncations to the epochs' consistent point — the last election
and SyncStateSet before it was born, and the faults then in force, too; ownership changes of its
queues; clients joining or leaving its groups; the route its producer used) into `Fact`s sorted by
simulated time.

The 5.x stories — a POP message's receipts, acks and revives, the real topic of each copy a
consumer read, what a controller-mode truncation cut, an offset reuse told by its first record, a
timer slot read again — are told with the help of analysis/explain/stories.py.

Offset records (a client's commit reaching a broker, consumerOffset.json written, reloaded after a
restart, copied to a slave, rolled back) are shown where they change whether the message is
*covered* — a committed offset above the message's queue offset means its group will not read it
again from there: the first record of each (stage, node, group, client) that covers it, and any
later one that no longer does; a reload after a restart is always shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import models.records as rec
from analysis.checkers.ledger_codes import display_key
from analysis.explain.stories import DLQ_PREFIX, PROXY_MAX_ATTEMPTS, PUSH_MAX_RECONSUME_TIMES, Receipt, Story, seconds
from sim import trace

INTERNAL_PREFIXES = ("%", "SCHEDULE_", "RMQ_SYS", "rmq_sys_", "TRANS_CHECK_MAX_TIME_TOPIC")
_STAGE = {rec.BROKER_OFFSET_COMMITTED: "commit", rec.BROKER_OFFSET_FILE_WRITTEN: "file",
          rec.BROKER_OFFSET_LOADED: "reload", rec.BROKER_OFFSET_SYNCED: "slave_sync"}


@dataclass
class Fact:
    t_us: int
    fact: str  # a short name: born, send_attempt, sent, stored, flushed, delivered, offset_commit, ...
    text: str
    data: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{seconds(self.t_us):>12}  {self.text}"

    def as_json(self) -> dict[str, Any]:
        return {"t_us": self.t_us, "t": seconds(self.t_us), "fact": self.fact, "text": self.text, **self.data}


@dataclass
class Context:
    """What the fact builder needs besides the records."""

    msg_id: int
    names: list[str]  # producer names by index (display keys)
    broker_of: dict[str, str]  # node → broker group
    watched: dict[tuple[str, str, int], int]  # (broker, topic, queue id) → the message's queue offset there
    end_us: int  # the run's end
    groups: tuple[str, ...] = ()  # the consumer groups subscribed to its topic
    pop_clients: dict[str, str] = field(default_factory=dict)  # POP group → its client: simple / push
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)  # consumer group → its consumer nodes
    timer_flush_ms: dict[str, int] = field(default_factory=dict)  # broker group → timerFlushIntervalMs
    max_reconsume: dict[str, int] = field(default_factory=dict)  # group → maxReconsumeTimes (-1 read as 16)


def message_facts(records: list[tuple], ctx: Context) -> list[Fact]:
    """The message's facts in time order (module docstring)."""
    mine = [r for r in records if _names_message(r, ctx.msg_id)]
    story = Story(records, mine, ctx)
    nodes = _involved_nodes(mine, ctx) | {x.node for x in story.receipts}
    nodes |= {n for g in ctx.groups if g in ctx.pop_clients for n in ctx.members.get(g, ())}
    born = min((r[0] for r in mine), default=0)
    for r in mine:
        if r[2] in (rec.PRODUCER_SENT, rec.PRODUCER_SEND_FAILED):
            born = min(born, r[trace.field_index(r[2], "born_us")])
    last = max((r[0] for r in mine), default=born)
    lost_or_open = not any(r[2] == rec.CONSUMER_CONSUMED and r[9] for r in mine)
    window = (born, ctx.end_us if lost_or_open else last)
    facts: list[Fact] = []
    covered: dict[tuple, bool] = {}
    crashed: set[str] = set()  # a node's first start is a launch, a later one a restart
    early = _in_force(records, born, nodes, ctx)
    reused: set[tuple] = set()  # (other message, position) reuses told (a later record of one is not news)
    for i, r in enumerate(records):
        if r[2] == trace.NODE_CRASHED:
            crashed.add(r[1])
        if _names_message(r, ctx.msg_id):
            facts += _own_facts(r, ctx, story)
        elif r[2] in _STAGE:
            fact = _offset_fact(r, ctx, covered)
            if fact is not None:
                facts.append(fact)
        elif r[2] in (rec.COMMIT_LOG_FLUSHED, rec.CONSUME_QUEUE_DISPATCHED, rec.HA_APPENDED):  # kept for its copies
            facts.append(_copy_fact(r, ctx))
        elif r[2] in (rec.OFFSET_REUSED, rec.COMMIT_LOG_DESTROYED):  # its positions, whenever
            fact = _position_fact(r, ctx, story, reused)
            if fact is not None:
                facts.append(fact)
        elif window[0] <= r[0] <= window[1] or i in early:
            fact = _context_fact(r, ctx, nodes, crashed, story)
            if fact is not None:
                facts.append(fact)
    facts += _route(records, mine, born)
    facts += [f for x in story.receipts if (f := _ack_fact(x, ctx)) is not None]
    facts.sort(key=lambda f: f.t_us)  # stable: emission order on ties
    return facts


def _in_force(records: list[tuple], born: int, nodes: set[str], ctx: Context) -> set[int]:
    """Positions of the rare records before the message was born that still shaped its life: the
    faults in force then, and the last election and SyncStateSet of each broker group it passed."""
    groups = {ctx.broker_of.get(n) for n in nodes} - {None}
    faults: dict[tuple, int] = {}
    last: dict[tuple, int] = {}
    for i, r in enumerate(records):
        if r[0] >= born:
            break
        if r[2] == trace.FAULT_INJECTED:
            faults[(r[3], r[4])] = i
        elif r[2] == trace.FAULT_HEALED:
            faults.pop((r[3], r[4]), None)
        elif r[2] in (rec.CONTROLLER_ELECTED, rec.CONTROLLER_SYNC_STATE_SET) and r[3] in groups:
            last[(r[2], r[3])] = i
    return set(faults.values()) | set(last.values())


def _route(records: list[tuple], mine: list[tuple], born: int) -> list[Fact]:
    """The route its producer had installed for its topic when it was born (detail records)."""
    sent = next((r for r in mine if r[2] in (rec.PRODUCER_SENT, rec.PRODUCER_SEND_FAILED)), None)
    if sent is None:
        return []
    routes = [r for r in records if r[2] == rec.CLIENT_ROUTE_UPDATED and r[1] == sent[1] and r[3] == sent[4]
              and r[0] <= born]
    if not routes:
        return []
    r = routes[-1]
    return [Fact(r[0], "route", f"{r[1]} installed the route of {r[3]} it sent this message with: {r[4]} "
                                "(broker:write queues)", {"producer": r[1], "queues": r[4]})]


def _names_message(r: tuple, msg_id: int) -> bool:
    fields = trace.KINDS[r[2]]
    return "msg_id" in fields and r[len(trace.ENVELOPE) + fields.index("msg_id")] == msg_id


def _involved_nodes(mine: list[tuple], ctx: Context) -> set[str]:
    """Nodes the message passed through: its producer, brokers holding a copy (and their group's
    other nodes), consumers that consumed it."""
    nodes = {r[1] for r in mine}
    groups = {ctx.broker_of.get(n) for n in nodes} - {None}
    return nodes | {n for n, b in ctx.broker_of.items() if b in groups}


def _own_facts(r: tuple, ctx: Context, story: Story) -> list[Fact]:
    t, node, kind = r[0], r[1], r[2]
    if kind == rec.PRODUCER_SENT:
        _m, topic, shard, broker, qid, status, attempts, born, _st = r[3:]
        return [_born(born, node, topic, shard),
                Fact(t, "sent", f"send returned {status} from {broker} q{qid} after {attempts} attempt(s), "
                                f"RT {(t - born) / 1000:.3f} ms",
                     {"broker": broker, "queue_id": qid, "status": status, "attempts": attempts, "rt_us": t - born})]
    if kind == rec.PRODUCER_SEND_FAILED:
        _m, topic, shard, attempts, reason, born, broker, _st = r[3:]
        return [_born(born, node, topic, shard),
                Fact(t, "send_failed", f"send failed after {attempts} attempt(s): {reason}"
                                       + (f" (last broker {broker})" if broker else ""),
                     {"attempts": attempts, "reason": reason, "broker": broker})]
    if kind == rec.PRODUCER_ATTEMPT_FAILED:
        _m, broker, qid, reason, rt = r[3:]
        return [Fact(t, "send_attempt", f"send attempt to {broker} q{qid} failed: {reason} after {rt / 1000:.3f} ms",
                     {"broker": broker, "queue_id": qid, "outcome": reason, "rt_us": rt})]
    if kind == rec.BROKER_STORED:
        return [_stored(r, ctx)]
    if kind == rec.COMMIT_LOG_DESTROYED:
        _m, topic, qid, qoff, fault, replicas, replicated = r[3:]
        held = "; a slave holds a copy" if replicated else "; no slave holds a copy" if replicas else ""
        why = "its CommitLog file was deleted by retention (clean service) before every group had consumed it" \
            if fault == "expired" else \
            "it was beyond the consistent point of the epochs it shared with the new master, which never had it" \
            if fault == "failover_truncated" else f"it was beyond what the broker had flushed{held}"
        who = f"retention on {node}" if fault == "expired" else \
            f"{node}'s CommitLog truncation on rejoining as a slave" if fault == "failover_truncated" else \
            f"{fault} of {node}"
        return [Fact(t, "destroyed", f"{who} destroyed this copy ({topic} q{qid} @{qoff}): {why}",
                     {"node": node, "fault": fault, "topic": topic, "queue_id": qid, "queue_offset": qoff,
                      "replicated": replicated})]
    if kind == rec.OFFSET_REUSED:
        _m, topic, qid, qoff = r[3:]
        return [Fact(t, "offset_reused", story.reuse_text(r),
                     {"node": node, "topic": topic, "queue_id": qid, "queue_offset": qoff})]
    return _pop_facts(r, ctx, story) or _delivery_facts(r, story) or _txn_facts(r)


def _born(born_us: int, node: str, topic: str, shard: int) -> Fact:
    key = f", sharding key k{shard}" if shard >= 0 else ""
    return Fact(born_us, "born", f"born on {node}: send() called, topic {topic}{key}",
                {"producer": node, "topic": topic, "shard": shard})


def _stored(r: tuple, ctx: Context) -> Fact:
    t, node = r[0], r[1]
    _m, topic, qid, qoff, phys, size, reconsume = r[3:]
    data = {"node": node, "topic": topic, "queue_id": qid, "queue_offset": qoff, "phys_offset": phys,
            "size_bytes": size, "reconsume_times": reconsume}
    where = f"{topic} q{qid} @{qoff}, commit-log position {phys}"
    if topic.startswith("%RETRY%"):
        text = f"stored on {node} in the retry topic: {where} (reconsume {reconsume})"
    elif topic.startswith(DLQ_PREFIX):
        text = f"moved to the dead-letter queue on {node}: {where}{_dlq_why(topic, reconsume, ctx)}"
    elif topic == "SCHEDULE_TOPIC_XXXX":
        text = f"parked on {node} in SCHEDULE_TOPIC_XXXX q{qid} (delay level {qid + 1}), commit-log position {phys}"
    elif topic == "RMQ_SYS_TRANS_HALF_TOPIC":
        text = f"half message stored on {node}: {where}"
    elif topic == "rmq_sys_wheel_timer":
        text = f"parked on {node} in rmq_sys_wheel_timer (a timer message) @{qoff}, commit-log position {phys}"
    elif topic.startswith(INTERNAL_PREFIXES):
        text = f"stored on {node} in {topic}"
    else:
        text = f"stored on {node}: {where}"
    return Fact(t, "stored", text, data)


def _dlq_why(topic: str, reconsume: int, ctx: Context) -> str:
    """Why a copy went to %DLQ%<group>: the group's retry limit (POP: the proxy's receive filter)."""
    group = topic[len(DLQ_PREFIX):]
    if ctx.pop_clients.get(group) == "simple":
        return (f" (popped with reconsume {reconsume}, at least maxAttempts {PROXY_MAX_ATTEMPTS} = retryMaxTimes 16 + 1: "
                "the proxy's receive filter sent it here and acked it)")
    return (f" (reconsume {reconsume}: its retries used up — a message sent back at maxReconsumeTimes, "
            f"{PUSH_MAX_RECONSUME_TIMES} by default, goes to the DLQ instead of the retry topic)")


def _pop_facts(r: tuple, ctx: Context, story: Story) -> list[Fact]:
    """A POP record of the message: received, handed out, revived, an ack late or failed, handed out again."""
    t, node, kind = r[0], r[1], r[2]
    if kind == rec.POP_RECEIVED:
        x = next(x for x in story.receipts if x.received and x.node == node and x.t_us == t)
        return [Fact(t, "popped", f"{node} received it for {x.group} (a POP) from {x.where()}: popped at "
                                  f"{seconds(x.pop_us)}, invisible until {seconds(x.deadline_us)}",
                     {"consumer": node, "group": x.group, "broker": x.broker, "topic": x.topic,
                      "queue_id": x.queue_id, "queue_offset": x.queue_offset, "pop_time_us": x.pop_us,
                      "invisible_until_us": x.deadline_us})]
    if kind == rec.POP_POPPED:
        group, _m, topic, qid, qoff, client, pop_us, inv = r[3:]
        gone = story.down_at(client, t)
        dead = f"; {client} had {gone[1]} at {seconds(gone[0])}: nobody received it (a dead client's parked " \
            "receive)" if gone else ""
        return [Fact(t, "handed_out", f"{node} handed it out from {topic} q{qid} @{qoff} to {client}'s pop for {group}: "
                                      f"invisible until {seconds(pop_us + inv)}{dead}",
                     {"broker": node, "client": client, "group": group, "topic": topic, "queue_id": qid,
                      "queue_offset": qoff, "pop_time_us": pop_us, "invisible_until_us": pop_us + inv})]
    if kind == rec.POP_REVIVED:
        group, _m, topic, qid, qoff, reconsume, from_topic, from_qid, from_offset, replay = r[3:]
        revived = story.revived_receipt(r)
        return [Fact(t, "revived", f"{node}'s revive service put it back into {topic} q{qid} @{qoff} with reconsume "
                                   f"{reconsume}: its checkpoint of {from_topic} q{from_qid} @{from_offset} reached its "
                                   f"invisible time un-acked; {_revive_why(r, revived, ctx, story)}",
                     {"broker": node, "group": group, "topic": topic, "queue_id": qid, "queue_offset": qoff,
                      "reconsume_times": reconsume, "from_topic": from_topic, "from_queue_id": from_qid,
                      "from_offset": from_offset, "replay": replay, "why": _revive_code(revived),
                      "consumer": revived.node if revived is not None else None})]
    if kind == rec.POP_ACK_LATE:
        return [Fact(t, "ack_late", f"{node}'s listener ended after the handle's invisible time ran out at "
                                    f"{seconds(r[5])}: its ack came too late (the broker revives it)",
                     {"consumer": node, "group": r[3], "invisible_until_us": r[5]})]
    if kind == rec.POP_ACK_FAILED:
        failed = next((y for y in story.receipts if y.node == node and y.outcome == "ack_failed" and y.at_us == t), None)
        until = f": the handle stays un-acked until its invisible time runs out at {seconds(failed.deadline_us)}" \
            if failed is not None else ""
        return [Fact(t, "ack_failed", f"{node}'s ack failed ({r[5]}){until}",
                     {"consumer": node, "group": r[3], "reason": r[5]})]
    if kind == rec.POP_ORDER_REDELIVERED:
        group, _m, topic, qid, qoff, reconsume = r[3:]
        return [Fact(t, "order_redelivered", f"{node} handed it out again in place from {topic} q{qid} @{qoff} to "
                                             f"{group}, reconsume {reconsume} (orderly POP: a message of its batch "
                                             "stayed un-acked past the invisible time)",
                     {"broker": node, "group": group, "topic": topic, "queue_id": qid, "queue_offset": qoff,
                      "reconsume_times": reconsume})]
    return []


def _revive_code(x: Receipt | None) -> str:
    """Why a revive happened, as a code: the receipt's outcome (`ack_lost` for an in-time ack)."""
    if x is None:
        return "nobody"
    if x.outcome == "acked":
        return "ack_lost"
    return x.outcome


def _revive_why(r: tuple, x: Receipt | None, ctx: Context, story: Story) -> str:
    """The revived copy's last receipt and what came of it (module docstring of stories.py)."""
    t, broker_node, replay = r[0], r[1], r[12]
    again = f" (a second revive of the same checkpoint: {broker_node} restarted from an older revive offset)" \
        if replay else ""
    if x is None:
        return _nobody_why(r, ctx, story) + again
    got = f"{x.node} got it at {seconds(x.t_us)}" if x.received else \
        f"{story.group_of(broker_node)} handed it to {x.node}'s pop at {seconds(x.t_us)}"
    outcome = x.outcome
    at = x.at_us or 0
    if outcome == "acked":
        lost = next((g for n, b in sorted(ctx.broker_of.items()) if b == story.group_of(broker_node)
                     if (g := story.went_down(n, at, t)) is not None), None)
        tail = f" (lost with the broker, which {lost[1]} at {seconds(lost[0])})" if lost and not replay else ""
        return f"{got} and acked it in time at {seconds(at)}, but the ack did not take effect{tail}{again}"
    texts = {"late": f"its listener ended at {seconds(at)}, after the invisible time ran out at "
                     f"{seconds(x.deadline_us)}: its ack came too late",
             "ack_failed": f"its ack failed ({x.reason}) at {seconds(at)}",
             "failed": f"its listener failed at {seconds(at)}: not acked",
             "crashed": f"it {x.reason} at {seconds(at)} holding it un-acked",
             "shutdown": f"it shut down at {seconds(at)} holding it un-acked",
             "unprocessed": f"it had not processed it when the invisible time ran out at {seconds(x.deadline_us)}",
             "open": "it had not acked it"}
    if outcome == "nobody":
        return f"{got}, but {x.node} had {x.reason} at {seconds(at)}: nobody received it{again}"
    return f"{got}; {texts[outcome]}{again}"


def _nobody_why(r: tuple, ctx: Context, story: Story) -> str:
    """A revived copy no consumer received: the members of its group that had gone when it was stored."""
    group = r[3]
    stored = [s for s in story.stored if s[4] == r[9] and s[5] == r[10] and s[6] == r[11] and s[0] < r[0]]
    since = stored[-1][0] if stored else r[0]
    gone = [(n, d) for n in ctx.members.get(group, ()) if (d := story.down_at(n, since)) is not None]
    who = "; ".join(f"{n} of {group} had {how} at {seconds(at)}" for n, (at, how) in gone)
    return "no consumer received that copy: the broker handed it out to a pop nobody received" + \
        (f" ({who})" if who else "")


def _ack_fact(x: Receipt, ctx: Context) -> Fact | None:
    """Whether a receipt's consumer acked the message, when no record of its own says so."""
    data = {"consumer": x.node, "group": x.group, "outcome": x.outcome, "invisible_until_us": x.deadline_us}
    until = seconds(x.deadline_us)
    if x.outcome == "acked" and x.at_us is not None:
        return Fact(x.at_us, "pop_acked", f"{x.node} acked it: its listener succeeded before the invisible time ran "
                                          f"out at {until}", data)
    if x.outcome == "failed" and x.at_us is not None:
        after = "the POP push consumer changes its invisible time to popDelayLevel[reconsumeTimes]" \
            if ctx.pop_clients.get(x.group) == "push" else f"it stays invisible until {until}"
        return Fact(x.at_us, "pop_not_acked", f"{x.node} did not ack it: its listener failed; {after}", data)
    if x.outcome in ("crashed", "shutdown") and x.at_us is not None:
        how = x.reason or "shut down"
        return Fact(x.at_us, "pop_not_acked", f"{x.node} {how} holding it un-acked (received at {seconds(x.t_us)}): "
                                              f"it stays invisible until {until}", data)
    if x.outcome == "unprocessed":
        return Fact(x.deadline_us, "pop_not_acked", f"{x.node} had not processed it when its invisible time ran out "
                                                    f"at {until}", data)
    return None


def _delivery_facts(r: tuple, story: Story) -> list[Fact]:
    t, node, kind = r[0], r[1], r[2]
    if kind == rec.CONSUMER_CONSUMED:
        group, _m, user_topic, broker, qid, qoff, ok, reconsume = r[3:]
        topic = story.delivered_topic(r)
        result = "CONSUME_SUCCESS" if ok else "failed (RECONSUME_LATER)"
        again = f", reconsume {reconsume}" if reconsume else ""
        return [Fact(t, "delivered", f"delivered to {group}/{node} from {broker} {topic} q{qid} @{qoff}: listener "
                                     f"{result}{again}",
                     {"group": group, "consumer": node, "broker": broker, "topic": topic, "user_topic": user_topic,
                      "queue_id": qid, "queue_offset": qoff, "ok": ok, "reconsume_times": reconsume})]
    if kind in (rec.CONSUMER_SENT_BACK, rec.CONSUMER_RESENT_AS_NORMAL):
        group, _m, reconsume, ok = r[3:]
        how = "sent it back to the broker" if kind == rec.CONSUMER_SENT_BACK else "re-sent it with its inner producer"
        return [Fact(t, "retry", f"{node} {how} for {group} (reconsume {reconsume}): {'ok' if ok else 'failed'}",
                     {"group": group, "consumer": node, "reconsume_times": reconsume, "ok": ok})]
    if kind == rec.CONSUMER_EXPIRED_CLEANED:
        group, _m, broker, qid, qoff = r[3:]
        return [Fact(t, "retry", f"{node} took it out of its cache after consumeTimeout (cleanExpiredMsg) and sent "
                                 f"it back for {group} ({broker} q{qid} @{qoff})", {"group": group, "consumer": node})]
    if kind == rec.SCHEDULE_DELIVERED:
        _m, topic, level = r[3:]
        return [Fact(t, "scheduled", f"{node} moved it from SCHEDULE_TOPIC_XXXX (level {level}) to {topic}",
                     {"topic": topic, "delay_level": level})]
    if kind == rec.TIMER_ENQUEUED:
        _m, topic, deliver_us, slot_us = r[3:]
        return [Fact(t, "timer", f"{node}'s timer took it for {topic}, to deliver at {seconds(deliver_us)}: parked in "
                                 f"wheel slot {seconds(slot_us)}, read once that slot has passed",
                     {"node": node, "topic": topic, "deliver_us": deliver_us, "slot_us": slot_us})]
    if kind == rec.TIMER_DELIVERED:
        _m, topic, slot_us, replay = r[3:]
        again = " again" if replay else ""
        return [Fact(t, "scheduled", f"{node}'s timer put it back into {topic}{again} from wheel slot "
                                     f"{seconds(slot_us)}{story.timer_text(r)}",
                     {"node": node, "topic": topic, "slot_us": slot_us, "replay": replay})]
    if kind in (rec.BROKER_SEND_REJECTED, rec.BROKER_BUSY):
        detail = f"code {r[5]}" if kind == rec.BROKER_SEND_REJECTED else f"SYSTEM_BUSY {r[4]}"
        return [Fact(t, "rejected", f"{node} refused the send: {detail}", {"node": node})]
    return []


def _txn_facts(r: tuple) -> list[Fact]:
    t, node, kind = r[0], r[1], r[2]
    if kind == rec.TXN_LOCAL_DONE:
        return [Fact(t, "txn_local", f"local transaction on {node}: {r[4]} (executeLocalTransaction returned {r[5]})",
                     {"outcome": r[4], "state": r[5]})]
    if kind == rec.TXN_CHECKED:
        asked = f"asked {r[5]}" if r[5] else "no producer to ask"
        return [Fact(t, "txn_check", f"check {r[4]} by {node}: half written back, {asked}",
                     {"check_times": r[4], "producer": r[5]})]
    if kind == rec.TXN_CHECK_ANSWERED:
        return [Fact(t, "txn_check_answer", f"{node} answered the check: {r[4]}", {"state": r[4]})]
    if kind == rec.TXN_ENDED:
        by = " (answer to a check)" if r[5] else ""
        done = "applied" if r[6] == 0 else f"refused, code {r[6]}"
        return [Fact(t, "txn_end", f"{node}: END_TRANSACTION {r[4]}{by} {done}",
                     {"action": r[4], "from_check": r[5], "code": r[6]})]
    if kind == rec.TXN_DISCARDED:
        return [Fact(t, "txn_discarded", f"{node} discarded it after {r[4]} checks (transactionCheckMax): moved to "
                                         "TRANS_CHECK_MAX_TIME_TOPIC", {"check_times": r[4]})]
    if kind == rec.TXN_HALF_LOST:
        return [Fact(t, "txn_half_lost", f"a power loss of {node} destroyed its unresolved half", {"node": node})]
    return []


def _offset_fact(r: tuple, ctx: Context, covered: dict[tuple, bool]) -> Fact | None:
    """An offset record, where it changes whether the message is covered (module docstring)."""
    t, node, kind, group, topic, qid, offset = r[:7]
    broker = ctx.broker_of.get(node, node)
    qoff = ctx.watched.get((broker, topic, qid))
    if qoff is None:
        return None
    stage = _STAGE[kind]
    key = (stage, node, group, topic, qid, r[7] if kind == rec.BROKER_OFFSET_COMMITTED else "")
    covers = offset > qoff
    if covered.get(key, False) == covers and stage != "reload":  # a reload after a restart: always shown
        return None
    covered[key] = covers
    verdict = "covers it" if covers else f"no longer covers it (@{qoff})"
    if kind == rec.BROKER_OFFSET_COMMITTED:
        text = f"{r[7]} committed {group}'s offset {offset} on {node} via {r[8]} ({topic} q{qid}): {verdict}"
    elif kind == rec.BROKER_OFFSET_FILE_WRITTEN:
        text = f"{node} wrote {group}'s offset {offset} ({topic} q{qid}) to consumerOffset.json: {verdict}"
    elif kind == rec.BROKER_OFFSET_LOADED:
        text = f"{node} reloaded {group}'s offset {offset} ({topic} q{qid}) from {r[7]} after its restart: {verdict}"
    else:
        text = f"{node} copied {group}'s offset {offset} ({topic} q{qid}) from its master (SlaveSynchronize): {verdict}"
    return Fact(t, f"offset_{stage}", text, {"node": node, "group": group, "topic": topic, "queue_id": qid,
                                             "offset": offset, "covers": covers,
                                             **({"client": r[7], "via": r[8]} if stage == "commit" else {})})


def _context_fact(r: tuple, ctx: Context, nodes: set[str], crashed: set[str], story: Story) -> Fact | None:
    """A rare record about the message's surroundings, if it concerns it (module docstring)."""
    t, node, kind = r[0], r[1], r[2]
    if kind == trace.FAULT_INJECTED:
        return Fact(t, "fault", f"fault: {r[3]} of {r[4]}" + (f" ({r[5]})" if r[5] else ""),
                    {"fault": r[3], "target": r[4]})
    if kind == trace.FAULT_HEALED:
        return Fact(t, "fault_healed", f"fault healed: {r[3]} of {r[4]}", {"fault": r[3], "target": r[4]})
    if node in nodes and kind == trace.NODE_CRASHED:
        return Fact(t, "crashed", f"{node} {'lost power' if r[3] else 'crashed (kill -9)'}", {"node": node})
    if node in nodes and kind == trace.NODE_RESTARTED:
        return Fact(t, "restarted", f"{node} {'restarted' if node in crashed else 'started'}", {"node": node})
    if kind == rec.CONTROLLER_ELECTED and r[3] in {ctx.broker_of.get(n) for n in nodes}:
        chosen = f"elected {r[4]} master" if r[4] else "found no member of the SyncStateSet alive: no master"
        return Fact(t, "elected", f"controller {node} {chosen} of {r[3]} (epoch {r[6]}, {r[7]}"
                                  + (f"; was {r[5]})" if r[5] else ")"),
                    {"broker": r[3], "master": r[4], "old_master": r[5], "epoch": r[6]})
    if kind == rec.CONTROLLER_SYNC_STATE_SET and r[3] in {ctx.broker_of.get(n) for n in nodes}:
        return Fact(t, "sync_state_set", f"controller {node} set {r[3]}'s SyncStateSet to {r[4] or 'nobody'} "
                                         f"(epoch {r[5]})", {"broker": r[3], "members": r[4], "epoch": r[5]})
    if node in nodes and kind == rec.CONSUMER_SHUTDOWN:
        return Fact(t, "shutdown", f"{node} shut down ({r[3]})", {"node": node, "group": r[3]})
    if node in nodes and kind == rec.BROKER_ROLE:
        return Fact(t, "role", f"{node} is now {r[4]} of {r[3]} (epoch {r[5]})", {"node": node, "role": r[4]})
    if node in nodes and kind == rec.HA_TRUNCATED:
        return Fact(t, "ha_truncated", f"{node} truncated its CommitLog at {r[3]} ({r[4]} records) to the consistent "
                                       f"point of its epochs (epoch {r[5]}){story.truncation_text(r)}",
                    {"node": node, "position": r[3], "records": r[4], "epoch": r[5]})
    if node in nodes and kind == rec.BROKER_RECOVERED:
        return Fact(t, "recovered", f"{node} recovered its commit log: {r[3]} records, wrote position {r[4]}, "
                                    f"flushed position {r[5]}", {"node": node})
    if kind in (rec.BROKER_CLIENT_REGISTERED, rec.BROKER_CLIENT_UNREGISTERED):
        if node not in nodes or r[3] not in ctx.groups:
            return None
        verb = "registered in" if kind == rec.BROKER_CLIENT_REGISTERED else f"left ({r[5]})"
        return Fact(t, "membership", f"{r[4]} {verb} {r[3]} on {node}", {"group": r[3], "client": r[4], "node": node})
    return _queue_fact(r, ctx)


def _copy_fact(r: tuple, ctx: Context) -> Fact:
    """A copy flushed, dispatched, or replicated to a slave (the collector kept only those)."""
    t, node, kind = r[0], r[1], r[2]
    if kind == rec.COMMIT_LOG_FLUSHED:
        return Fact(t, "flushed", f"flushed on {node} (its flushed position reached {r[3]})",
                    {"node": node, "position": r[3]})
    if kind == rec.CONSUME_QUEUE_DISPATCHED:
        return Fact(t, "dispatched", f"dispatched on {node}: in its ConsumeQueue, visible to pulls",
                    {"node": node})
    return Fact(t, "replicated", f"replicated to {node} (slave of {ctx.broker_of.get(node, node)})", {"node": node})


def _position_fact(r: tuple, ctx: Context, story: Story, reused: set[tuple]) -> Fact | None:
    """Another message at one of this message's positions: destroyed there before it was stored
    (its offset is then given again), or stored there after this one was destroyed or on a new
    master that never had it (told once: a replica's later truncation records the same reuse again)."""
    t, node = r[0], r[1]
    topic, qid, qoff = r[4], r[5], r[6]
    group = ctx.broker_of.get(node, node)
    if ctx.watched.get((group, topic, qid)) != qoff:
        return None
    other = display_key(r[3], ctx.names)
    data = {"node": node, "other": other, "topic": topic, "queue_id": qid, "queue_offset": qoff}
    if r[2] == rec.COMMIT_LOG_DESTROYED:
        return Fact(t, "position_destroyed", f"{r[7]} of {node} destroyed {other}, which held {topic} q{qid} @{qoff} "
                                             "(the offset this message got)", data)
    if (r[3], group, topic, qid, qoff) in reused:
        return None
    reused.add((r[3], group, topic, qid, qoff))
    elected = story.election_before(group, t)
    if elected is not None and elected[4] == node:
        return Fact(t, "offset_reused", f"{node}, master of {group} since the election at {seconds(elected[0])}, "
                                        f"gave {other} {topic} q{qid} @{qoff}, this message's offset on the old master "
                                        f"{elected[5] or '(none)'}", data)
    return Fact(t, "offset_reused", f"after the truncation {node} stored {other} at {topic} q{qid} @{qoff}", data)


def _queue_fact(r: tuple, ctx: Context) -> Fact | None:
    """Ownership changes, offset rollbacks and corrections of the message's queues."""
    t, node, kind = r[0], r[1], r[2]
    queues = {(b, tp, q) for b, tp, q in ctx.watched}
    if kind in (rec.CONSUMER_QUEUE_STARTED, rec.CONSUMER_QUEUE_DROPPED):
        group, topic, broker, qid = r[3:7]
        if (broker, topic, qid) not in queues:
            return None
        if kind == rec.CONSUMER_QUEUE_STARTED:
            return Fact(t, "queue_started", f"{node} ({group}) took {broker} {topic} q{qid}, starting at offset {r[7]}",
                        {"group": group, "consumer": node, "offset": r[7]})
        return Fact(t, "queue_dropped", f"{node} ({group}) dropped {broker} {topic} q{qid}: {r[7]}",
                    {"group": group, "consumer": node, "reason": r[7]})
    if kind == rec.BROKER_OFFSET_ROLLED_BACK:
        group, topic, qid, before, after = r[3:]
        if (ctx.broker_of.get(node, node), topic, qid) not in queues:
            return None
        return Fact(t, "offset_rolled_back", f"{node} restarted with {group}'s offset of {topic} q{qid} at {after}, "
                                             f"older than the {before} it held before (consumerOffset.json)",
                    {"group": group, "from_offset": before, "to_offset": after})
    if kind == rec.CONSUMER_OFFSET_MOVED:
        group, broker, qid, before, after = r[3:]
        if not any(b == broker and q == qid for b, _tp, q in queues):
            return None
        return Fact(t, "offset_moved", f"{node} ({group}) moved its offset of {broker} q{qid} from {before} to {after} "
                                       "(OFFSET_MOVED)", {"group": group, "from_offset": before, "to_offset": after})
    return None
