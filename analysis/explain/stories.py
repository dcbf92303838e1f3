"""The POP, controller-failover and timer parts of one message's life (analysis/explain/facts.py).

A `Story` is built once per explained message from the records explain kept (its own records and
the rare ones, analysis/explain/collect.py) and answers what a single record cannot:

- **POP** (models/broker/pop_*.py, models/consumer/pop_consumer.py). Each receipt — a consumer's
  `pop.received` (a detail record), or the broker's `pop.popped` naming the client whose pop it
  answered — has an outcome, the first that applies: the consumer's listener succeeded and its ack
  came in time (`acked`), came too late (`late`: `pop.ack_late`, the listener ended after the
  handle's invisible time) or failed (`ack_failed`: `pop.ack_failed`); the listener failed
  (`failed`: not acked — a SimpleConsumer leaves it to its invisible time, the POP-mode push
  consumer changes it to popDelayLevel[reconsumeTimes]); the consumer crashed or shut down holding
  it (`crashed`, `shutdown`); it was never processed before the invisible time ran out
  (`unprocessed`; a push consumer skips a message already visible again); the client was already
  gone when the broker handed it out (`nobody`: a dead client's parked receive); still open at the
  run's end (`open`). A `pop.revived` is matched to the last receipt of the copy it revived (its
  `from_*` queue position on the same broker group) whose handle had turned visible again by then
  (its deadline, or a push consumer's popDelayLevel after a failure), and told with that receipt's
  outcome; an in-time ack followed by a revive did not take effect (`ack_lost`: lost with the
  broker, or a checkpoint revived again after a restart reloaded an older revive offset, `replay`).
- **Queue labels.** A consumption record names the topic the application sees (the user topic
  of a retry copy); the fact names the copy's real topic: the consumer's receipt of that copy
  (POP), else the stored copy of the message at that broker group, queue id and offset (a retry
  copy when the consumption carries a reconsume count, else the user topic).
- **Failover** (controller mode). The copies of the message each node of a group held (stored
  there, or replicated: `ha.appended`) tell what a truncation to the epochs' consistent point
  (`ha.truncated`) cut and what it kept; an offset reuse is told as the new master giving the
  offset again (when it was stored) or as a rejoining replica cutting the old record at that offset
  (a later record of the same reuse: the first one made the message unreachable).
- **Timer** (models/broker/timer_store.py). A delivery is told against the time the send asked
  for; a delivery read again (`replay`) names what made the timer read the slot again: the
  broker's restart (it reads from its last checkpoint, written every `timerFlushIntervalMs`, which
  had not yet passed the slot) or its promotion to master (it reads from the checkpoint it last
  copied from the old master, every 3 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import models.records as rec
from sim import trace

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
PROXY_MAX_ATTEMPTS = 17  # the proxy's maxAttempts: SubscriptionGroupConfig.retryMaxTimes (16) + 1
PUSH_MAX_RECONSUME_TIMES = 16  # DefaultMQPushConsumer maxReconsumeTimes -1 → 16 (the push consumer's DLQ limit)
SLAVE_CHECKPOINT_SYNC_MS = 3000  # ReplicasManager.handleSlaveSynchronize: the timer checkpoint copied every 3 s
TRUNCATION_SAME_US = 10_000  # a reuse recorded by a replica's truncation: within 10 ms of its ha.truncated
# DefaultMQPushConsumer popDelayLevel (s): a POP-mode push consumer's failed message is made
# invisible for popDelayLevel[reconsumeTimes] (ChangeInvisibleTime) instead of waiting out its handle
POP_DELAY_LEVEL_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


def seconds(t_us: int) -> str:
    """Simulated time as people read it: seconds with ms precision (27.355 s)."""
    return f"{t_us / 1e6:.3f} s"


@dataclass
class Receipt:
    """A message handed out by a pop, and what came of it (module docstring)."""

    t_us: int  # when the consumer received it (the broker's hand-out time for `pop.popped` alone)
    node: str  # the consumer
    group: str
    topic: str  # the copy's real topic
    queue_id: int
    queue_offset: int
    pop_us: int
    invisible_us: int
    broker: str = ""  # the broker group of the copy ("" unknown)
    received: bool = True  # False: only the broker's pop.popped names it
    outcome: str = "open"
    at_us: int | None = None  # when the outcome happened
    reason: str = ""  # a failed ack's reason
    visible_us: int | None = None  # when it turned visible again, if not at its deadline (a push consumer's failure)

    @property
    def deadline_us(self) -> int:
        return self.pop_us + self.invisible_us

    @property
    def revivable_us(self) -> int:
        """The earliest its checkpoint can be revived: when its handle turned visible again."""
        return self.deadline_us if self.visible_us is None else self.visible_us

    def where(self) -> str:
        return f"{self.broker + ' ' if self.broker else ''}{self.topic} q{self.queue_id} @{self.queue_offset}"


class Story:
    """What the facts of one message need beyond a single record (module docstring)."""

    def __init__(self, records: list[tuple], mine: list[tuple], ctx: Any) -> None:
        self.ctx = ctx
        self.mine = mine
        self.stored = [r for r in mine if r[2] == rec.BROKER_STORED]
        self.enqueued = [r for r in mine if r[2] == rec.TIMER_ENQUEUED]
        self.timer_deliveries = [r for r in mine if r[2] == rec.TIMER_DELIVERED]
        self.downs: dict[str, list[tuple[int, str]]] = {}  # node → (t, "lost power" / "crashed" / "shut down")
        self.ups: dict[str, list[int]] = {}  # node → restart times
        self.roles: dict[str, list[tuple[int, str]]] = {}  # node → (t, role)
        self.truncations: list[tuple] = []
        self.elections: list[tuple] = []
        self.appended: list[tuple] = []
        for r in records:
            self._note(r)
        self.receipts = self._receipts()

    def _note(self, r: tuple) -> None:
        kind = r[2]
        if kind == trace.NODE_CRASHED:
            self.downs.setdefault(r[1], []).append((r[0], "lost power" if r[3] else "crashed"))
        elif kind == rec.CONSUMER_SHUTDOWN:
            self.downs.setdefault(r[1], []).append((r[0], "shut down"))
        elif kind == trace.NODE_RESTARTED:
            self.ups.setdefault(r[1], []).append(r[0])
        elif kind == rec.BROKER_ROLE:
            self.roles.setdefault(r[1], []).append((r[0], r[4]))
        elif kind == rec.HA_TRUNCATED:
            self.truncations.append(r)
        elif kind == rec.CONTROLLER_ELECTED:
            self.elections.append(r)
        elif kind == rec.HA_APPENDED:
            self.appended.append(r)

    def group_of(self, node: str) -> str:
        return self.ctx.broker_of.get(node, node)

    # --- nodes up and down ------------------------------------------------------------------------
    def went_down(self, node: str, since_us: int, until_us: int) -> tuple[int, str] | None:
        """The first crash, power loss or shutdown of `node` in [since, until)."""
        return next(((t, how) for t, how in self.downs.get(node, ()) if since_us <= t < until_us), None)

    def down_at(self, node: str, t_us: int) -> tuple[int, str] | None:
        """The crash or shutdown that had taken `node` down at `t_us` (None: it was up)."""
        last = None
        for t, how in self.downs.get(node, ()):
            if t <= t_us:
                last = (t, how)
        if last is None:
            return None
        if any(last[0] < up <= t_us for up in self.ups.get(node, ())):
            return None
        return last

    # --- POP receipts -----------------------------------------------------------------------------
    def _receipts(self) -> list[Receipt]:
        out = []
        for r in self.mine:
            if r[2] == rec.POP_RECEIVED:
                _g, _m, topic, qid, qoff, pop_us, inv = r[3], r[4], r[5], r[6], r[7], r[8], r[9]
                out.append(Receipt(r[0], r[1], r[3], topic, qid, qoff, pop_us, inv,
                                   self._copy_group(topic, qid, qoff, r[0])))
        for r in self.mine:
            if r[2] == rec.POP_POPPED:
                group, topic, qid, qoff, client, pop_us, inv = r[3], r[5], r[6], r[7], r[8], r[9], r[10]
                broker = self.group_of(r[1])
                if not any(x.node == client and x.pop_us == pop_us and x.queue_offset == qoff and x.topic == topic
                           for x in out):
                    out.append(Receipt(r[0], client, group, topic, qid, qoff, pop_us, inv, broker, received=False))
        out.sort(key=lambda x: x.t_us)
        for x in out:
            self._judge(x, out)
        return out

    def _copy_group(self, topic: str, qid: int, qoff: int, before_us: int) -> str:
        """The broker group holding the message's copy at that position (the latest stored before)."""
        found = [r for r in self.stored if r[4] == topic and r[5] == qid and r[6] == qoff and r[0] <= before_us]
        return self.group_of(found[-1][1]) if found else ""

    def _judge(self, x: Receipt, receipts: list[Receipt]) -> None:
        """The receipt's outcome (module docstring)."""
        if not x.received:
            gone = self.down_at(x.node, x.t_us)
            if gone is not None:
                x.outcome, x.at_us, x.reason = "nobody", gone[0], gone[1]
            return
        later = [y.t_us for y in receipts if y is not x and y.node == x.node and y.t_us > x.t_us and y.received]
        until = min(later, default=self.ctx.end_us + 1)
        consumed = next((r for r in self.mine if r[2] == rec.CONSUMER_CONSUMED and r[1] == x.node and r[3] == x.group
                         and r[7] == x.queue_id and r[8] == x.queue_offset and x.t_us <= r[0] < until), None)
        if consumed is None:
            gone = self.went_down(x.node, x.t_us, x.deadline_us)
            if gone is not None:
                x.outcome, x.at_us, x.reason = ("crashed" if gone[1] != "shut down" else "shutdown"), gone[0], gone[1]
            elif x.deadline_us <= self.ctx.end_us:
                x.outcome, x.at_us = "unprocessed", x.deadline_us
            return
        x.at_us = consumed[0]
        if not consumed[9]:
            x.outcome = "failed"
            below_limit = consumed[10] < self.ctx.max_reconsume.get(x.group, PUSH_MAX_RECONSUME_TIMES)
            # changePopInvisibleTime(popDelayLevel[reconsumeTimes]); at the limit checkNeedAckOrDelay acks or
            # delays it by its age (models/consumer/pop_consumer.py): no fixed time to tell
            if self.ctx.pop_clients.get(x.group) == "push" and below_limit:
                x.visible_us = consumed[0] + POP_DELAY_LEVEL_S[min(consumed[10], len(POP_DELAY_LEVEL_S) - 1)] * 1_000_000
            return
        if any(r[2] == rec.POP_ACK_LATE and r[1] == x.node and r[0] == consumed[0] for r in self.mine):
            x.outcome = "late"
            return
        failed = next((r for r in self.mine if r[2] == rec.POP_ACK_FAILED and r[1] == x.node and r[3] == x.group
                       and consumed[0] <= r[0] < until), None)
        if failed is not None:
            x.outcome, x.at_us, x.reason = "ack_failed", failed[0], failed[5]
            return
        x.outcome = "acked"

    def receipt_of(self, node: str, qid: int, qoff: int, broker: str, t_us: int) -> Receipt | None:
        """`node`'s last receipt of the copy at (broker group, queue id, offset) up to `t_us`."""
        found = [x for x in self.receipts if x.node == node and x.received and x.queue_id == qid
                 and x.queue_offset == qoff and x.broker in (broker, "") and x.t_us <= t_us]
        return found[-1] if found else None

    def revived_receipt(self, r: tuple) -> Receipt | None:
        """The receipt whose checkpoint a `pop.revived` record revived: the last receipt of the copy
        at its from_* position whose handle had turned visible again by then (a later receipt of the
        same copy — popped again after a restart went back on the offset — has its own checkpoint)."""
        broker = self.group_of(r[1])
        found = [x for x in self.receipts if x.topic == r[9] and x.queue_id == r[10] and x.queue_offset == r[11]
                 and x.broker in (broker, "") and x.t_us < r[0] and x.revivable_us <= r[0]]
        return found[-1] if found else None

    # --- queue labels -----------------------------------------------------------------------------
    def delivered_topic(self, r: tuple) -> str:
        """The real topic of the copy a `consumer.consumed` record read (module docstring)."""
        node, group, user_topic, broker, qid, qoff, reconsume = r[1], r[3], r[5], r[6], r[7], r[8], r[10]
        got = self.receipt_of(node, qid, qoff, broker, r[0])
        if got is not None and got.group == group:
            return got.topic
        copies = [s for s in self.stored if self.group_of(s[1]) == broker and s[5] == qid and s[6] == qoff
                  and s[0] <= r[0] and not s[4].startswith(DLQ_PREFIX)]
        retry = [s for s in copies if s[4].startswith(RETRY_PREFIX)]
        plain = [s for s in copies if s[4] == user_topic]
        chosen = (retry or plain) if reconsume else (plain or retry)
        return chosen[-1][4] if chosen else user_topic

    # --- failover ---------------------------------------------------------------------------------
    def copies_held(self, node: str, before_us: int) -> list[tuple[str, int, int, int, int]]:
        """(topic, queue id, queue offset, start, end) of each copy of the message `node` held at
        `before_us`: stored there, or replicated to it (a slave's ha.appended range holding it)."""
        group = self.group_of(node)
        out = []
        for s in self.stored:
            if self.group_of(s[1]) != group or s[0] > before_us:
                continue
            start, end = s[7], s[7] + s[8]
            held = s[1] == node or any(a[1] == node and a[3] <= start < a[4] and a[0] <= before_us
                                       for a in self.appended)
            if held:
                out.append((s[4], s[5], s[6], start, end))
        return out

    def truncation_text(self, r: tuple) -> str:
        """What a truncation to the consistent point did to the copies of the message its node held."""
        cut, kept = [], []
        for topic, qid, qoff, start, end in self.copies_held(r[1], r[0]):
            if start >= r[3]:
                cut.append(f"{topic} q{qid} @{qoff} (position {start})")
            elif end <= r[3]:
                kept.append(f"{topic} q{qid} @{qoff}")
        out = f"; it cut this message's copy {', '.join(cut)}" if cut else ""
        return out + (f"; this message's copies below it were kept: {', '.join(kept)}" if kept else "")

    def election_before(self, group: str, t_us: int) -> tuple | None:
        """The last election of `group` that named a master, before `t_us`."""
        found = [e for e in self.elections if e[3] == group and e[4] and e[0] <= t_us]
        return found[-1] if found else None

    def reuse_text(self, r: tuple) -> str:
        """An offset_reused record of this message, told as what happened then (module docstring)."""
        t, node, topic, qid, qoff = r[0], r[1], r[4], r[5], r[6]
        group = self.group_of(node)
        stored = [s for s in self.stored if s[1] == node and s[4] == topic and s[5] == qid and s[6] == qoff]
        cut = next((x for x in self.truncations if self.group_of(x[1]) == group and x[1] != node
                    and abs(x[0] - t) <= TRUNCATION_SAME_US), None)
        if stored and t > stored[0][0] and cut is not None:
            return (f"{cut[1]}, rejoining {group} as a slave, truncated at its consistent point the record it held at "
                    f"{topic} q{qid} @{qoff}, the offset {node} had given this message (the same reuse, recorded "
                    "again: the first record is what made it unreachable)")
        elected = self.election_before(group, t)
        if elected is not None and elected[4] == node:
            return (f"{node}, master of {group} since the election at {seconds(elected[0])} (epoch {elected[6]}), gave "
                    f"it @{qoff} in {topic} q{qid}: an offset the old master {elected[5] or '(none)'} had already "
                    "given to another message, which the new master never had")
        return f"its offset @{qoff} in {topic} q{qid} on {node} is one the broker assigned again after a truncation"

    # --- timer ------------------------------------------------------------------------------------
    def timer_text(self, r: tuple) -> str:
        """A timer delivery: against the requested time; a replay with what made the slot be read again."""
        t, node, slot, replay = r[0], r[1], r[5], r[6]
        due = next((e[5] for e in self.enqueued if e[0] <= t), None)
        late = f", {(t - due) / 1000:.0f} ms after the time its send asked for ({seconds(due)})" if due is not None else ""
        if not replay:
            return late
        before = [d for d in self.timer_deliveries if d[0] < t and d[5] == slot]
        first = f" (first read at {seconds(before[0][0])} by {before[0][1]})" if before else ""
        restart = max((u for u in self.ups.get(node, ()) if u <= t), default=None)
        roles = [(rt, role) for rt, role in self.roles.get(node, ()) if rt <= t]
        promoted = max((rt for rt, role in roles if role == "master"), default=None)
        was_slave = promoted is not None and any(role == "slave" and (restart or 0) <= rt < promoted for rt, role in roles)
        if promoted is not None and was_slave:
            return (f"{late}; read again: {node} became master at {seconds(promoted)} and its timer read from the "
                    f"checkpoint it had last copied from the old master (every {SLAVE_CHECKPOINT_SYNC_MS} ms), "
                    f"which had not yet passed slot {seconds(slot)}{first}")
        if restart is not None:
            flush_ms = self.ctx.timer_flush_ms.get(self.group_of(node))
            every = f", written every {flush_ms} ms (timerFlushIntervalMs)" if flush_ms else ""
            gone = self.down_at(node, restart - 1)
            why = f" (it {gone[1]} at {seconds(gone[0])})" if gone else ""
            return (f"{late}; read again: {node} restarted at {seconds(restart)}{why} and its timer recovered from "
                    f"its last checkpoint{every}, which had not yet passed slot {seconds(slot)}{first}")
        return f"{late}; read again (a slot read again after a restart){first}"
