"""Timer messages: 5.x TimerMessageStore (store/timer/), with HookUtils' transform (5.3.3).

**Put.** A message with a delivery time (`Message.setDeliverTimeMs`; PROPERTY_TIMER_DELIVER_MS,
here in sim µs) reaching a 5.x master with `timerWheelEnable` (true) is rewritten by
`HookUtils.transformTimerMessage`: if the time is still ahead, its slot is the time rounded down to
`timerPrecisionMs` (1 s), one precision earlier when it falls exactly on one; the real topic and
queue go to properties (REAL_TOPIC, REAL_QID, TIMER_OUT_MS = the slot) and it is stored in
`rmq_sys_wheel_timer` queue 0. A time already passed leaves the message as it is (delivered at
once); one more than `timerMaxDelaySec` (3 days) ahead is refused (WHEEL_TIMER_MSG_ILLEGAL; here
stored at once, see below). A 4.x broker has no timer: it stores the message at once.

**Enqueue → wheel → dequeue.** TimerEnqueueGetService reads the timer topic's ConsumeQueue from
`currQueueOffset` and TimerEnqueuePutService writes each unit into the timer log and the wheel
slot; TimerDequeueGetService reads the slot `currReadTimeMs` once it is behind the current time
formatted to the precision (`currReadTimeMs < currWriteTimeMs`), and TimerDequeuePutMessageService
puts each message back into its real topic, timer properties cleared, then `moveReadTime`. So a
message is delivered in [requested time, requested time + precision): its slot is read one
precision after the slot starts. TimerFlushService, every `timerFlushIntervalMs` (1 s), flushes
the timer log and the wheel and writes the checkpoint: `lastReadTimeMs` (the read slot) and
`lastTimerQueueOffset` / `masterTimerQueueOffset` (the enqueued queue offset).

**Crash and power loss.** `recover()` restarts reading at the checkpoint's `lastReadTimeMs` and
enqueuing at its queue offset (`min(revised offset, masterTimerQueueOffset)`): the slots read
since the last checkpoint are read again and the units enqueued since are enqueued again. After a
process crash the timer log and wheel survive in the page cache, so both give a second delivery
(the timer is at-least-once): `timer.delivered` with `replay` true, counted by the checkers as the
duplicate cause `timer_redelivered`. After a power loss the wheel is as flushed at the last
checkpoint: entries enqueued since are gone but enqueued again from the ConsumeQueue (if the
CommitLog kept their timer-topic copy; a copy it lost is lost with the CommitLog's causes), and
the slots read since are read again. A message the timer had not delivered is never lost by the
timer itself.

Simplified: the enqueue reads the ConsumeQueue when the reput dispatches a timer unit (Java polls
it every 100 ms), and the dequeue reads a slot the moment it is due (Java's thread polls every
100 ms), so the delivery times lack that 0..100 ms jitter; the timer log and the wheel are one
in-memory table of slot → messages; the refusal above `timerMaxDelaySec` and the flow control
(`isReject`, `timerCongestNumEachSlot`) are not modelled; the timer runs on masters only (a
slave's timer, which follows the master's checkpoint, is not modelled).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config import MessageStoreConfig
from models.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    record_bytes,
)
from models.records import TIMER_DELIVERED, TIMER_ENQUEUED
from sim.env import ms

_TIMER_ONLY = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)


def slot_of(deliver_us: int, precision_us: int) -> int:
    """HookUtils.transformTimerMessage's rounding: down to the precision, one earlier on the dot."""
    if deliver_us % precision_us == 0:
        return deliver_us - precision_us
    return deliver_us // precision_us * precision_us


class TimerMessageStore:
    """One master's timer (module docstring)."""

    def __init__(self, broker: Any, cfg: MessageStoreConfig) -> None:
        self.broker, self.node = broker, broker.node
        self.precision_us = ms(cfg.timer_precision_ms)
        self.flush_us = ms(cfg.timer_flush_interval_ms)
        self.wheel: dict[int, list[tuple[int, int, bool]]] = {}  # slot → [(phys, msg id, replay)]: timer log + wheel
        self.curr_queue_offset = 0  # the next timer-topic unit to enqueue
        self.curr_read_us = -1  # the next slot to read (-1: none yet)
        self.checkpoint = (0, -1)  # (queue offset, read slot) as last flushed: survives crashes
        self.read_since: list[tuple[int, list[tuple[int, int, bool]]]] = []  # slots read since the checkpoint
        self.enqueued_since: list[tuple[int, int]] = []  # (slot, phys) enqueued since the checkpoint
        self.armed_us = -1
        self.phase = self.node.env.rng.stream(f"{self.node.name}.timer_flush")  # the flush thread's start phase
        self.listening = False
        self.running = True
        self.node.add_service(self.flush_loop)
        self.node.on_crash(self._crash)
        self.node.on_power_loss(self._power_loss)
        self.node.on_start(self._recover)

    # --- put (HookUtils) ----------------------------------------------------------------------
    def transform(self, msg_id: int, topic: str, queue_id: int, props: dict) -> tuple[str, int, dict] | None:
        """The timer topic, queue and properties of a message with a delivery time still ahead, or None."""
        deliver_us = props[PROPERTY_TIMER_DELIVER_MS]
        if deliver_us <= self.node.env._now:
            return None
        slot = slot_of(deliver_us, self.precision_us)
        if not self.listening:  # the first timer message: follow the timer topic's dispatches
            self.listening = True
            self.broker.store.reput.listeners.append(self._on_dispatched)
        self.node.trace(TIMER_ENQUEUED, msg_id, topic, deliver_us, slot)
        return TIMER_TOPIC, 0, dict(props, **{PROPERTY_TIMER_OUT_MS: slot, PROPERTY_REAL_TOPIC: topic,
                                               PROPERTY_REAL_QUEUE_ID: queue_id})

    # --- enqueue ------------------------------------------------------------------------------
    def _on_dispatched(self, cq: Any) -> None:
        if cq.topic == TIMER_TOPIC and self.running:
            self._enqueue(cq, replay=False)

    def _enqueue(self, cq: Any, replay: bool) -> None:
        """TimerEnqueueGetService + TimerEnqueuePutService: the units from currQueueOffset into their slots."""
        store = self.broker.store
        offset = max(self.curr_queue_offset, cq.min_offset)
        while offset < cq.max_offset:
            phys = cq.unit(offset)[0]
            msg = store.look_message_by_offset(phys)
            if msg is not None and msg.props and PROPERTY_TIMER_OUT_MS in msg.props:
                slot = msg.props[PROPERTY_TIMER_OUT_MS]
                self.wheel.setdefault(slot, []).append((phys, msg.msg_id, replay))
                self.enqueued_since.append((slot, phys))
            offset += 1
        self.curr_queue_offset = offset
        self._arm()

    # --- dequeue ------------------------------------------------------------------------------
    def _arm(self) -> None:
        """Read the earliest slot when it is due: one precision after it starts."""
        if not self.wheel or not self.running:
            return
        due = min(self.wheel) + self.precision_us
        if self.armed_us < 0 or due < self.armed_us:
            self.armed_us = due
            self.node.call_later(max(0, due - self.node.env._now), self._dequeue, due)

    def _dequeue(self, due_us: int) -> None:
        if due_us != self.armed_us or not self.running:
            return  # re-armed earlier, or stopped
        self.armed_us = -1
        now = self.node.env._now
        for slot in sorted(s for s in self.wheel if s + self.precision_us <= now):
            entries = self.wheel.pop(slot)
            self.read_since.append((slot, entries))
            self.curr_read_us = slot + self.precision_us  # moveReadTime
            for phys, msg_id, replay in entries:
                self._deliver(phys, msg_id, slot, replay)
        self._arm()

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

    # --- checkpoint, crash, recovery ------------------------------------------------------------
    def flush_loop(self) -> Generator[Any, Any, None]:
        """TimerFlushService: flush the timer log and wheel, then the checkpoint. Its thread starts
        with the broker at no particular millisecond: the phase of its period against the slot
        boundaries is drawn at each start (else every checkpoint would fall on a slot's read)."""
        yield self.node.sleep_us(1 + int(self.phase.random() * (self.flush_us - 1)))
        while True:
            self.checkpoint = (self.curr_queue_offset, self.curr_read_us)
            self.read_since, self.enqueued_since = [], []
            yield self.node.sleep_us(self.flush_us)

    def _crash(self) -> None:
        self.running = False  # the threads stop; the timer log and the wheel stay in the page cache

    def _power_loss(self) -> None:
        """The wheel as flushed at the last checkpoint: entries enqueued since are gone."""
        for slot, phys in self.enqueued_since:
            entries = self.wheel.get(slot, [])
            for i, (p, _msg_id, _replay) in enumerate(entries):
                if p == phys:
                    del entries[i]
                    break
            if not entries:
                self.wheel.pop(slot, None)
        self.enqueued_since = []

    def _recover(self) -> None:
        """recover(): read again from the checkpoint's slot, enqueue again from its queue offset."""
        if self.running:
            return  # the first start
        self.running, self.armed_us = True, -1
        for slot, entries in self.read_since:  # slots read since the checkpoint: read again
            self.wheel.setdefault(slot, []).extend((phys, msg_id, True) for phys, msg_id, _replay in entries)
        self.read_since, self.enqueued_since = [], []
        self.curr_queue_offset, self.curr_read_us = self.checkpoint
        cq = self.broker.store.reput.queue(TIMER_TOPIC, 0)
        if cq is not None:
            self.curr_queue_offset = min(self.curr_queue_offset, cq.max_offset)
            self._enqueue(cq, replay=False)  # a second entry for what the wheel still holds
        self._arm()
