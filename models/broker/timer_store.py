"""Timer messages: 5.x TimerMessageStore (store/timer/), with HookUtils' transform (5.3.3).

**Put** (`timer_slot_ms`, HookUtils.handleScheduleMessage / transformTimerMessage). A message with
a delivery time (`Message.setDeliverTimeMs`: PROPERTY_TIMER_DELIVER_MS, carried here in sim µs
and read by the broker in whole ms, as Java's property is) and no delay level, reaching a 5.x
master with `timerWheelEnable` (true): a time not after the broker's clock (`deliverMs >
currentTimeMillis` fails) leaves the message as it is (delivered at once); one more than
`timerMaxDelaySec` (3 days) ahead is refused before the write, WHEEL_TIMER_MSG_ILLEGAL, which
SendMessageProcessor answers MESSAGE_ILLEGAL (the producer does not retry it); otherwise its slot
is the time rounded down to `timerPrecisionMs` (1 s), one precision earlier when it falls exactly
on one, and it is stored in `rmq_sys_wheel_timer` queue 0 with its real topic and queue as
properties (REAL_TOPIC, REAL_QID, TIMER_OUT_MS = the slot). A 4.x broker has no timer.

**Enqueue → wheel → dequeue.** TimerEnqueueGetService reads the timer topic's ConsumeQueue from
`currQueueOffset`; when it finds nothing it waits `100 × timerPrecisionMs / 1000` ms (100 ms) and
nothing wakes it earlier, so its reads fall on a 100 ms grid from the thread's start.
TimerEnqueuePutService puts each unit into the timer log and its wheel slot — on a master one
whose slot is already behind the current time (`delayTime < currWriteTimeMs`) goes straight to
the dequeue put queue: delivered at once. TimerDequeueGetService reads the slot `currReadTimeMs`
while it is behind the current time formatted to the precision (`currReadTimeMs <
currWriteTimeMs`; an empty slot is passed at once), else waits the same 100 ms: its reads fall on
its own 100 ms grid. TimerDequeuePutMessageService puts each message back into its real topic,
timer properties cleared, then `moveReadTime`. So a message is delivered at the first dequeue
poll at or after its slot's end: in [requested time, requested time + precision + 100 ms).
TimerFlushService, every `timerFlushIntervalMs` (1 s), flushes the timer log and the wheel and
writes the checkpoint (`prepareTimerCheckPoint`): `lastReadTimeMs` (the read position),
`masterTimerQueueOffset` (a master's enqueue position) and `lastTimerQueueOffset`.

**Crash and power loss.** `recover()` restarts reading at the checkpoint's `lastReadTimeMs` and
enqueuing at `min(the timer log's last unit + 1, masterTimerQueueOffset)`: the slots read since
the last checkpoint are read again (`timer.delivered` with `replay` true) and the units enqueued
since are enqueued again (those whose slot has passed: delivered at once, `replay` false). After a
process crash the timer log and wheel survive in the page cache, so both give a second delivery
(the timer is at-least-once), counted by the checkers as the duplicate cause `timer_redelivered`.
After a power loss the wheel is as flushed at the last checkpoint: entries enqueued since are
gone but enqueued again from the ConsumeQueue (if the CommitLog kept their timer-topic copy; a
copy it lost is lost with the CommitLog's causes). A message the timer had not delivered is never
lost by the timer.

**Slaves and failover** (5.x, controller mode: replicas_manager.py). The timer runs on every
broker of the group; on a slave (`shouldRunningDequeue` false) it does not dequeue, and it
enqueues its replicated timer units only up to the master's `masterTimerQueueOffset`. Every 3 s
the slave copies the master's checkpoint (ReplicasManager.handleSlaveSynchronize →
SlaveSynchronize.syncTimerCheckPoint, GET_TIMER_CHECK_POINT: `lastReadTimeMs`,
`masterTimerQueueOffset`) and reads from it (`syncLastReadTimeMs`). A promoted slave
(changeScheduleServiceStatus(true), then checkBrokerRole) reads from the last copied
`lastReadTimeMs`: the slots its old master read in the last ~4 s are read again (delivered twice,
`replay` true), nothing the old master had parked and replicated is lost, and what it had read
before is not read again.

Simplified: the poll grids are kept lazily (a read is scheduled for the first poll of the grid at
or after the time it has something to do; the idle polls, which change nothing, are not events);
`currWriteTimeMs` is the current time formatted to the precision (Java's put thread moves it at
least every 10 ms); the timer log and the wheel are one in-memory table of slot → entries, slots
below the last flushed `lastReadTimeMs` dropped at each flush (Java's wheel keeps 7 days: only a
slave whose copied read time went backwards after following a new master, then promoted within
seconds, would read one of them again); the flow control (`isReject`, `timerCongestNumEachSlot`
= Integer.MAX_VALUE by default: never) and delete messages (TIMER_DEL_UNIQKEY) are not modelled;
a time beyond `timerMaxDelaySec` reaching the store other than by a single send (an
end-transaction commit, a batch) is stored at once (EndTransactionProcessor's refusal is not
modelled); the messages of a batch send are parked one by one (broker.py's batch path: in 5.3.3
the hook reads only the MessageBatch's own properties, which carry no delivery time, so a batch is
stored at once); a classic (non-controller) slave has no timer, since it never becomes master.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

from models.broker.config import TIMER_MAX_DELAY_SEC, MessageStoreConfig
from models.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    record_bytes,
)
from models.protocol import MESSAGE_ILLEGAL, SUCCESS, SYSTEM_ERROR, SendResponse
from models.records import BROKER_SEND_REJECTED, TIMER_DELIVERED, TIMER_ENQUEUED
from sim.env import ms

_TIMER_ONLY = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
POLL_PER_PRECISION_MS = 100  # TimerEnqueueGetService / TimerDequeueGetService: waitForRunning(100L * precisionMs / 1000)
US_PER_MS = 1_000


class TimerMessageIllegal(ValueError):
    """PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL: a delivery time more than timerMaxDelaySec ahead
    (SendMessageProcessor.handlePutMessageResult answers ResponseCode.MESSAGE_ILLEGAL)."""


def _java_div(a: int, b: int) -> int:
    """Java's long division (truncates toward zero; Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def timer_slot_ms(now_ms: int, deliver_ms: int, precision_ms: int = 1000,
                  max_delay_s: int = TIMER_MAX_DELAY_SEC) -> int | None:
    """HookUtils.transformTimerMessage (5.3.3): the wheel slot (ms) a message asking for delivery
    at `deliver_ms` is parked in when it reaches the broker at `now_ms`; None when it is delivered
    at once (`deliverMs > currentTimeMillis` fails). Raises TimerMessageIllegal when the time is
    more than `max_delay_s` (timerMaxDelaySec) ahead. The slot is `deliverMs` rounded down to the
    precision, one precision earlier when it falls exactly on one (so the slot read one precision
    later is never before the requested time)."""
    if deliver_ms <= now_ms:
        return None
    if deliver_ms - now_ms > max_delay_s * 1000:
        raise TimerMessageIllegal(f"delay {deliver_ms - now_ms} ms > timerMaxDelaySec {max_delay_s} s")
    return _slot(deliver_ms, precision_ms)


def _slot(deliver: int, precision: int) -> int:
    """transformTimerMessage's rounding: `deliverMs % precision == 0 ? deliverMs - precision :
    deliverMs / precision * precision` (Java's % and Python's agree on a zero remainder)."""
    if deliver % precision == 0:
        return deliver - precision
    return _java_div(deliver, precision) * precision


def slot_of(deliver_us: int, precision_us: int) -> int:
    """The same rounding in µs (tests/test_timer_stories.py; the model goes through timer_slot_ms)."""
    return _slot(deliver_us, precision_us)


class GetTimerCheckPoint(NamedTuple):
    """GET_TIMER_CHECK_POINT (AdminBrokerProcessor.getTimerCheckPoint): a slave's
    SlaveSynchronize.syncTimerCheckPoint asks its master."""


class TimerCheckPointAnswer(NamedTuple):
    """The master's TimerCheckpoint (the fields a slave copies); SYSTEM_ERROR: it has no timer."""

    code: int
    last_read_us: int = 0  # lastReadTimeMs
    master_timer_queue_offset: int = 0  # masterTimerQueueOffset


class TimerCheckpoint(NamedTuple):
    """store.timer.TimerCheckpoint: the read slot and enqueue offsets (immutable: a flushed copy
    and the in-memory one are separate values)."""

    last_read_us: int = 0  # lastReadTimeMs
    last_timer_queue_offset: int = 0  # lastTimerQueueOffset
    master_timer_queue_offset: int = 0  # masterTimerQueueOffset


class TimerMessageStore:
    """One broker's timer (module docstring)."""

    def __init__(self, broker: Any, cfg: MessageStoreConfig) -> None:
        self.broker, self.node = broker, broker.node
        self.precision_ms = cfg.timer_precision_ms
        self.precision_us = ms(cfg.timer_precision_ms)
        self.poll_us = POLL_PER_PRECISION_MS * cfg.timer_precision_ms // 1000 * US_PER_MS
        self.max_delay_s = cfg.timer_max_delay_sec
        self.flush_us = ms(cfg.timer_flush_interval_ms)
        self.wheel: dict[int, list[tuple[int, int]]] = {}  # slot µs → [(phys, msg id)]: timer log + wheel
        self.enqueued_since: list[tuple[int, int]] = []  # (slot, phys) put into the wheel since the last flush
        self.curr_queue_offset = 0  # currQueueOffset: the next timer-topic unit to enqueue
        self.curr_read_us = 0  # currReadTimeMs: the next slot to read
        self.checkpoint = TimerCheckpoint()  # in memory (what GET_TIMER_CHECK_POINT answers)
        self.flushed = TimerCheckpoint()  # the checkpoint file: survives crashes and power loss
        self.should_running_dequeue = False  # shouldRunningDequeue: the broker is the master
        self.master_at_start = True  # BrokerController.start: changeSpecialServiceStatus(brokerId == 0)
        # ground truth, not behaviour (the `replay` flag of timer.delivered): slots below it were
        # read before by this group's timers (replicas_manager.py carries it to a promoted slave)
        self.read_high_us = 0
        self.running = False  # the service threads are up
        self.started = False
        self.enqueue_armed = False
        self.dequeue_armed_us = -1
        self.enqueue_origin_us = self.dequeue_origin_us = 0  # each poll grid's origin (thread start)
        self.listening = False
        self.phase = self.node.env.rng.stream(f"{self.node.name}.timer_flush")  # the flush thread's start phase
        self.poll_phase = self.node.env.rng.stream(f"{self.node.name}.timer_poll")  # the get threads' phases
        self.node.add_service(self.flush_loop)
        self.node.on_crash(self._crash)
        self.node.on_power_loss(self._power_loss)
        self.node.on_start(self._start)
        self.node.handle(GetTimerCheckPoint, self.on_get_checkpoint)

    # --- put (HookUtils) ----------------------------------------------------------------------
    def refused(self, src: str, req_id: int, msg: Any, props: dict, delay_level: int) -> bool:
        """handleScheduleMessage's refusal before the write (SendMessageProcessor): a delivery
        time beyond timerMaxDelaySec → MESSAGE_ILLEGAL to the producer, nothing stored. A delay
        level wins over a delivery time (checkIfTimerMessage)."""
        if delay_level > 0 or PROPERTY_TIMER_DELIVER_MS not in props:
            return False
        try:
            timer_slot_ms(self.node.env._now // US_PER_MS, props[PROPERTY_TIMER_DELIVER_MS] // US_PER_MS,
                          self.precision_ms, self.max_delay_s)
        except TimerMessageIllegal:
            self.node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, MESSAGE_ILLEGAL)
            self.node.reply(src, req_id, SendResponse(MESSAGE_ILLEGAL))
            return True
        return False

    def transform(self, msg_id: int, topic: str, queue_id: int, props: dict) -> tuple[str, int, dict] | None:
        """The timer topic, queue and properties of a message with a delivery time still ahead, or None."""
        deliver_ms = props[PROPERTY_TIMER_DELIVER_MS] // US_PER_MS
        try:
            slot_ms = timer_slot_ms(self.node.env._now // US_PER_MS, deliver_ms, self.precision_ms, self.max_delay_s)
        except TimerMessageIllegal:
            return None  # not through a send (refused there): stored at once (module docstring)
        if slot_ms is None:
            return None
        slot = slot_ms * US_PER_MS
        self._listen()
        self.node.trace(TIMER_ENQUEUED, msg_id, topic, deliver_ms * US_PER_MS, slot)
        return TIMER_TOPIC, 0, dict(props, **{PROPERTY_TIMER_OUT_MS: slot, PROPERTY_REAL_TOPIC: topic,
                                               PROPERTY_REAL_QUEUE_ID: queue_id})

    def _listen(self) -> None:
        """Follow the timer topic's dispatches from the first timer message on (before, the
        enqueue thread's polls find nothing: no event is spent on them)."""
        if not self.listening:
            self.listening = True
            self.broker.store.reput.listeners.append(self._on_dispatched)

    # --- the poll grids -----------------------------------------------------------------------
    def _next_poll_us(self, origin_us: int, at_us: int) -> int:
        """The first poll of a 100 ms grid from `origin_us` at or after `at_us`."""
        return at_us + (origin_us - at_us) % self.poll_us

    def _last_poll_us(self, origin_us: int, at_us: int) -> int:
        """The last poll of the grid at or before `at_us` (at least its origin)."""
        return max(origin_us, at_us - (at_us - origin_us) % self.poll_us)

    def _floor_us(self, t_us: int) -> int:
        """formatTimeMs: down to the precision."""
        return t_us // self.precision_us * self.precision_us

    # --- enqueue ------------------------------------------------------------------------------
    def _on_dispatched(self, cq: Any) -> None:
        if cq.topic == TIMER_TOPIC:
            self._arm_enqueue()

    def _arm_enqueue(self) -> None:
        if self.running and not self.enqueue_armed:
            self.enqueue_armed = True
            now = self.node.env._now
            self.node.call_later(self._next_poll_us(self.enqueue_origin_us, now) - now, self._enqueue_poll)

    def _enqueue_poll(self) -> None:
        self.enqueue_armed = False
        if self.running:
            self.enqueue()

    def enqueue(self) -> None:
        """TimerMessageStore.enqueue + TimerEnqueuePutService: the units from currQueueOffset into
        their slots; a slave stops at the master's masterTimerQueueOffset (isRunningEnqueue)."""
        cq = self.broker.store.reput.queue(TIMER_TOPIC, 0)
        if cq is None:
            return
        store = self.broker.store
        offset = max(self.curr_queue_offset, cq.min_offset)
        limit = cq.max_offset
        if not self.should_running_dequeue:
            limit = min(limit, self.checkpoint.master_timer_queue_offset)
        while offset < limit:
            phys = cq.unit(offset)[0]
            msg = store.look_message_by_offset(phys)
            if msg is not None and msg.props and PROPERTY_TIMER_OUT_MS in msg.props:
                self._put_to_wheel(msg.props[PROPERTY_TIMER_OUT_MS], phys, msg.msg_id)
            offset += 1
        self.curr_queue_offset = max(self.curr_queue_offset, offset)
        self._arm_dequeue()

    def _put_to_wheel(self, slot: int, phys: int, msg_id: int) -> None:
        """putMessageToTimerWheel: on a master, a slot already behind currWriteTimeMs is delivered
        at once (not from a slot read again: `replay` false, even for a unit enqueued again)."""
        if self.should_running_dequeue and slot < self._floor_us(self.node.env._now):
            self._deliver(phys, msg_id, slot, False)
            return
        self.wheel.setdefault(slot, []).append((phys, msg_id))
        self.enqueued_since.append((slot, phys))

    # --- dequeue ------------------------------------------------------------------------------
    def _arm_dequeue(self) -> None:
        """Schedule the dequeue poll that will find the earliest unread slot due."""
        if not self.running or not self.should_running_dequeue:
            return
        first = min((s for s in self.wheel if s >= self.curr_read_us), default=None)
        if first is None:
            return
        due = max(first + self.precision_us, self.node.env._now)
        poll = self._next_poll_us(self.dequeue_origin_us, due)
        if self.dequeue_armed_us < 0 or poll < self.dequeue_armed_us:
            self.dequeue_armed_us = poll
            self.node.call_later(poll - self.node.env._now, self._dequeue_poll, poll)

    def _dequeue_poll(self, poll_us: int) -> None:
        if poll_us != self.dequeue_armed_us:
            return  # re-armed earlier, or stopped
        self.dequeue_armed_us = -1
        if self.running and self.should_running_dequeue:
            self._read_until(self._floor_us(poll_us))
            self._arm_dequeue()

    def _catch_up(self) -> None:
        """The read position as the dequeue thread's last poll left it (the idle polls move it
        over empty slots; they are not events: module docstring)."""
        if self.running and self.should_running_dequeue:
            self._read_until(self._floor_us(self._last_poll_us(self.dequeue_origin_us, self.node.env._now)))

    def _read_until(self, limit_us: int) -> None:
        """TimerMessageStore.dequeue, repeated while currReadTimeMs < currWriteTimeMs."""
        if self.curr_read_us >= limit_us:
            return
        high = self.read_high_us
        for slot in sorted(s for s in self.wheel if self.curr_read_us <= s < limit_us):
            self.curr_read_us = slot
            for phys, msg_id in self.wheel[slot]:
                self._deliver(phys, msg_id, slot, slot < high)
        self.curr_read_us = limit_us  # moveReadTime, past the empty slots too
        self.read_high_us = max(high, limit_us)

    def _deliver(self, phys: int, msg_id: int, slot: int, replay: bool) -> None:
        """TimerDequeuePutMessageService: back into the real topic, timer properties cleared."""
        msg = self.broker.store.look_message_by_offset(phys)
        if msg is None or msg.msg_id != msg_id or msg.topic != TIMER_TOPIC:
            return  # its timer-topic copy is gone (retention; a truncation, the position since reused)
        props = msg.props or {}
        topic, queue_id = props[PROPERTY_REAL_TOPIC], props[PROPERTY_REAL_QUEUE_ID]
        real = {k: v for k, v in props.items() if k not in _TIMER_ONLY} or None
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, real, msg.reconsume_times)
        self.broker.put_no_wait(msg.msg_id, topic, queue_id, size, msg.body_bytes, msg.tags, msg.reconsume_times, real)
        self.node.trace(TIMER_DELIVERED, msg.msg_id, topic, slot, replay)

    # --- role (changeScheduleServiceStatus, checkBrokerRole) -----------------------------------
    def set_role(self, master: bool) -> None:
        """changeScheduleServiceStatus(shouldStart): syncLastReadTimeMs, setShouldRunningDequeue;
        then (the enqueue thread's next checkBrokerRole) a new master enqueues from
        min(currQueueOffset, masterTimerQueueOffset) and writes its checkpoint."""
        if master == self.should_running_dequeue:
            return
        self.curr_read_us = self.checkpoint.last_read_us
        self.should_running_dequeue = master
        if not master:
            self.dequeue_armed_us = -1
            return
        self.curr_queue_offset = min(self.curr_queue_offset, self.checkpoint.master_timer_queue_offset)
        self._prepare_checkpoint()
        self.flushed = self.checkpoint
        if self.broker.store.reput.queue(TIMER_TOPIC, 0) is not None:
            self._listen()  # a promoted slave that never copied a checkpoint still enqueues what it holds
        self._arm_enqueue()
        self._arm_dequeue()

    def synced(self, last_read_us: int, master_timer_queue_offset: int) -> None:
        """SlaveSynchronize.syncTimerCheckPoint (only while not dequeuing): the master's read
        position and enqueue offset, read from at once (syncLastReadTimeMs)."""
        if self.should_running_dequeue:
            return
        self.checkpoint = TimerCheckpoint(last_read_us, min(self.curr_queue_offset, master_timer_queue_offset),
                                          master_timer_queue_offset)
        self.curr_read_us = last_read_us
        if master_timer_queue_offset > self.curr_queue_offset:  # units the slave may now enqueue
            self._listen()
            self._arm_enqueue()

    def on_get_checkpoint(self, src: str, req_id: int, req: GetTimerCheckPoint) -> None:
        cp = self.checkpoint
        self.node.reply(src, req_id, TimerCheckPointAnswer(SUCCESS, cp.last_read_us, cp.master_timer_queue_offset))

    # --- checkpoint, crash, recovery ------------------------------------------------------------
    def _prepare_checkpoint(self) -> None:
        """prepareTimerCheckPoint: a master also records its enqueue position."""
        cp = self.checkpoint
        master_offset = self.curr_queue_offset if self.should_running_dequeue else cp.master_timer_queue_offset
        self.checkpoint = TimerCheckpoint(self.curr_read_us, min(self.curr_queue_offset, master_offset), master_offset)

    def flush_loop(self) -> Generator[Any, Any, None]:
        """TimerFlushService: flush the timer log and wheel, then the checkpoint. Its thread starts
        with the broker at no particular millisecond: the phase of its period against the slot
        boundaries is drawn at each start (else every checkpoint would fall on a slot's read)."""
        yield self.node.sleep_us(1 + int(self.phase.random() * (self.flush_us - 1)))
        while True:
            self._catch_up()
            self._prepare_checkpoint()
            self.flushed = self.checkpoint
            self.enqueued_since = []
            for slot in [s for s in self.wheel if s < self.flushed.last_read_us]:
                del self.wheel[slot]  # read before the flushed read position: never read again here
            yield self.node.sleep_us(self.flush_us)

    def _start(self) -> None:
        """The threads start (each with its own phase); a restart recovers first."""
        now = self.node.env._now
        self.enqueue_origin_us = now + int(self.poll_phase.random() * self.poll_us)
        self.dequeue_origin_us = now + int(self.poll_phase.random() * self.poll_us)
        if self.started:
            self._recover()
        self.started, self.running = True, True
        if self.master_at_start:
            self.set_role(True)
        if self.listening:
            self._arm_enqueue()
        self._arm_dequeue()

    def _crash(self) -> None:
        """The threads stop and the JVM's fields go; the timer log and the wheel stay in the page cache."""
        self.running, self.should_running_dequeue = False, False
        self.enqueue_armed, self.dequeue_armed_us = False, -1

    def _power_loss(self) -> None:
        """The wheel as flushed at the last checkpoint: entries enqueued since are gone."""
        for slot, phys in self.enqueued_since:
            entries = self.wheel.get(slot, [])
            for i, (p, _msg_id) in enumerate(entries):
                if p == phys:
                    del entries[i]
                    break
            if not entries:
                self.wheel.pop(slot, None)
        self.enqueued_since = []
        self.curr_queue_offset = min(self.curr_queue_offset, self.flushed.last_timer_queue_offset)

    def _recover(self) -> None:
        """recover(): read again from the checkpoint's slot, enqueue again from
        min(the timer log's end, masterTimerQueueOffset), within the ConsumeQueue."""
        cp = self.checkpoint = self.flushed
        self.curr_read_us = cp.last_read_us
        offset = min(self.curr_queue_offset, cp.master_timer_queue_offset)
        cq = self.broker.store.reput.queue(TIMER_TOPIC, 0)
        if cq is not None:
            offset = min(max(offset, cq.min_offset), cq.max_offset)
        self.curr_queue_offset = offset


def no_timer_checkpoint(node: Any) -> None:
    """GET_TIMER_CHECK_POINT on a broker without a timer: SYSTEM_ERROR ("The checkpoint is null")."""
    node.handle(GetTimerCheckPoint, lambda src, req_id, req: node.reply(src, req_id, TimerCheckPointAnswer(SYSTEM_ERROR)))
