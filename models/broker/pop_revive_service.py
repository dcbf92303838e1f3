"""broker.processor.PopReviveService with the revive topic's checkpoints and acks (5.3.3).

**Checkpoints.** Each POP that finds messages in a queue writes one PopCheckPoint (store/pop/PopCheckPoint:
start offset, the popped offsets, popTime, invisibleTime, a bitmap of acks) to the revive topic
`rmq_sys_REVIVE_LOG_<cluster>`, queue `reviveQid` — the POP requests take the `reviveQueueNum` (8)
queues in turn (`ckMessageNumber % reviveQueueNum`). With `enablePopBufferMerge` false (the
default) the checkpoint is written synchronously at the pop (PopBufferMergeService.addCkJustOffset);
an ack (AckMessageProcessor) is written to the same revive queue, and a ChangeInvisibleTime writes a
new checkpoint of one message (popTime = now) and then acks the old one.

**Revive.** One PopReviveService thread per revive queue, on the master only (5.3.3 run,
consumeReviveMessage, mergeAndRevive): it waits `reviveInterval` (1 s), then scans the queue's
records — checkpoints and acks, each a timer message that the timer puts into the revive queue when
its 1 s slot has passed (a checkpoint is due 1 s before its reviveTime = popTime + invisibleTime, an
ack at the reviveTime of its checkpoint) — and revives, in their order in the revive queue, each
checkpoint whose reviveTime is more than 2 s (`ackTimeInterval` + 1 s) behind the scan's endTime, the
newest deliver time it has read; it stops at the first checkpoint not yet due. A scan that has read
everything there is polls every 100 ms for more, and on a queue that has stayed idle, more than 3 s
past its endTime, takes `now` as the endTime (`now - endTime > 3 s`): an idle queue revives a
checkpoint about 2 s after its reviveTime (the checkpoint's deliver time + 3 s), a busy one when a
record delivered more than 2 s after the reviveTime has been read. A scan ends when it revives, or
after 4 s without a new record (41 empty polls); after a scan that read no checkpoint the thread
waits 1 s more per such scan, up to `reviveMaxSlow` 3. Each popped offset whose bit is not acked is
read from its queue and put into the group's POP retry topic `%RETRY%<group>_<topic>` (V1 naming,
`enableRetryTopicV2` false; a message read from the retry topic goes back into it) with
reconsumeTimes + 1, no delay level and no dead-letter check (the proxy's receive filter does that,
pop_message_processor.py); `pop.revived` records each one. An ack written before its checkpoint is
revived cancels the retry; a later one is ignored (the broker accepts it: a late ack is a race with
the revive, not an error).

**Crash and power loss.** Checkpoints and acks are CommitLog records: a process crash keeps them; a
power loss destroys those written after the CommitLog's flushed position (the records are not
appended to the modelled CommitLog; each notes the CommitLog's written position when it was written
and is dropped when the power loss leaves that position unflushed).

**Revive offset.** After each round the revive queue's progress (the number of checkpoints it
has handled: its reviveOffset) is committed as the consumer offset of `CID_RMQ_SYS_REVIVE_GROUP` on
`rmq_sys_REVIVE_LOG_<cluster>`, queue = revive queue, and persisted with consumerOffset.json every
`flushConsumerOffsetInterval` (5 s). A restarted broker reloads that file and scans again from the
offset it holds: the checkpoints revived since are revived a second time (`pop.revived` with
`replay` true: a second retry copy of each un-acked message, the duplicate cause
`broker_offset_rollback`). Acks that came after a checkpoint's first revive are not re-applied
at its replay.

Simplified: a message that can no longer be read is skipped (5.3.3 re-puts the checkpoint with
growing backoff); the ack and checkpoint records take no CommitLog space; PopBufferMergeService's
merge (`enablePopBufferMerge` true) is not modelled; the scan's endTime is the newest deliver time
of every record read since the broker started (5.3.3: of those past the revive offset, read by this
scan — the same whenever a checkpoint waits, as the records before it are older), an ack of a
checkpoint already revived is not counted, and a power loss does not take it back; the timer's
dequeue and enqueue lag (`timerDelay`, `commitLogDelay`) is taken as zero.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from models.coverage_points import COV_POP_ACK_AFTER_REVIVE, COV_POP_REVIVED
from models.message import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC, RETRY_GROUP_TOPIC_PREFIX, record_bytes
from models.records import POP_REVIVED
from sim.env import ms

if TYPE_CHECKING:  # broker.py builds this service (through pop_message_processor.py): annotations only
    from models.broker.broker import Broker

REVIVE_QUEUE_NUM = 8  # BrokerConfig.reviveQueueNum
REVIVE_INTERVAL_US = 1_000_000  # BrokerConfig.reviveInterval
REVIVE_MAX_SLOW = 3  # BrokerConfig.reviveMaxSlow
ACK_TIME_INTERVAL_US = 1_000_000  # PopAckConstants.ackTimeInterval
TIMER_PRECISION_US = 1_000_000  # MessageStoreConfig.timerPrecisionMs: a revive-topic record's visibility
REVIVE_DUE_AFTER_US = ACK_TIME_INTERVAL_US + 1_000_000  # mergeAndRevive: endTime - reviveTime > 2 s
IDLE_END_JUMP_US = 3_000_000  # consumeReviveMessage: now - endTime > 3 s → endTime = now (3 * PopAckConstants.SECOND)
SCAN_POLL_US = 100_000  # consumeReviveMessage: Thread.sleep(100) after an empty read
SCAN_IDLE_BREAK_US = 4_000_000  # noMsgCount * 100 > 4000: the scan ends after 4 s (41 empty reads) without a record
ORDER_REVIVE_QID = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: an orderly pop's handle (no checkpoint)
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # PopAckConstants.REVIVE_GROUP
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"  # PopAckConstants.REVIVE_TOPIC + brokerClusterName


def pop_retry_topic(group: str, topic: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1: `%RETRY%<group>_<topic>`; a retry topic stays itself."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def record_visible_at_us(deliver_us: int) -> int:
    """When a revive-topic record (a timer message due at `deliver_us`) is in the revive queue:
    TimerMessageStore.dequeue reads a 1 s slot once the current second has passed it, so from the
    start of the second after its slot on."""
    return (deliver_us // TIMER_PRECISION_US + 1) * TIMER_PRECISION_US


def scan_end_time_us(newest_us: int, now_us: int) -> int:
    """consumeReviveMessage's endTime once the scan has read all there is: the newest deliver time it
    read, or `now` when that is more than 3 s old (an idle revive queue); -1 when it read nothing."""
    if newest_us >= 0 and now_us - newest_us > IDLE_END_JUMP_US:
        return now_us
    return newest_us


def checkpoint_due(end_us: int, revive_us: int) -> bool:
    """mergeAndRevive: a checkpoint is revived once endTime - reviveTime > ackTimeInterval + 1 s."""
    return end_us - revive_us > REVIVE_DUE_AFTER_US


class PopCheckPoint:
    """store.pop.PopCheckPoint: the messages one pop took from one queue, and which are acked."""

    __slots__ = ("acked", "ack_positions", "group", "invisible_us", "offsets", "pop_time_us", "position",
                 "queue_id", "revive_qid", "topic")

    def __init__(self, group: str, topic: str, queue_id: int, offsets: list[int], pop_time_us: int,
                 invisible_us: int, revive_qid: int, position: int) -> None:
        self.group, self.topic, self.queue_id = group, topic, queue_id
        self.offsets = offsets  # the popped queue offsets (startOffset + queueOffsetDiff)
        self.pop_time_us, self.invisible_us = pop_time_us, invisible_us
        self.revive_qid = revive_qid
        self.position = position  # the CommitLog's written position when it was written (power loss)
        self.acked = 0  # bitMap: bit i = offsets[i] acked
        self.ack_positions: list[tuple[int, int]] = []  # (position, bit) of each ack record

    @property
    def revive_us(self) -> int:
        """getReviveTime: popTime + invisibleTime."""
        return self.pop_time_us + self.invisible_us

    def key(self) -> tuple:
        return self.topic, self.group, self.queue_id, self.offsets[0], self.pop_time_us


class PopReviveService:
    """One master's revive queues (module docstring)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node = broker.node
        self.clock = self.node.env.clock
        self.cov: list[int] = self.node.env.coverage
        # per revive queue, a heap of (due slot, order, unique tie, checkpoint): the revive queue's order
        # (order: the write sequence, negative for a checkpoint scanned again after a restart)
        self.queues: list[list[tuple[int, int, int, PopCheckPoint]]] = [[] for _ in range(REVIVE_QUEUE_NUM)]
        self._seq = itertools.count()
        self.by_key: dict[tuple, PopCheckPoint] = {}  # the checkpoints not yet revived
        self.ck_number = 0  # ckMessageNumber
        self.revive_offsets = [0] * REVIVE_QUEUE_NUM  # checkpoints handled per revive queue (reviveOffset)
        # per revive queue, (revive offset, checkpoint) of each one revived: scanned again after a restart
        # that reloads an older revive offset; trimmed to what the offset file does not yet cover
        self.revived: list[list[tuple[int, PopCheckPoint]]] = [[] for _ in range(REVIVE_QUEUE_NUM)]
        # per revive queue, (visible at, deliver time) of the records the timer has not yet put into it, and
        # the newest deliver time of those it has (-1: none): what a scan reads for its endTime
        self.unread: list[list[tuple[int, int]]] = [[] for _ in range(REVIVE_QUEUE_NUM)]
        self.newest_us = [-1] * REVIVE_QUEUE_NUM
        self.node.on_power_loss(self._power_loss)
        self.node.on_start(self._rescan)
        for qid in range(REVIVE_QUEUE_NUM):
            self.node.add_service(lambda qid=qid: self.revive_loop(qid))  # type: ignore[misc]  # qid bound per loop
        self.node.add_service(self._trim_loop)

    def next_revive_qid(self) -> int:
        """ckMessageNumber.getAndIncrement() % reviveQueueNum: once per pop request."""
        qid = self.ck_number % REVIVE_QUEUE_NUM
        self.ck_number += 1
        return qid

    def _position(self) -> int:
        return self.broker.commit_log.wrote_position

    def add_ck(self, group: str, topic: str, queue_id: int, offsets: list[int], invisible_us: int,
               revive_qid: int, pop_time_us: int | None = None) -> PopCheckPoint:
        """Write a checkpoint (the pop's, or ChangeInvisibleTime's new one of one message)."""
        now = self.clock.now_us if pop_time_us is None else pop_time_us
        ck = PopCheckPoint(group, topic, queue_id, offsets, now, invisible_us, revive_qid, self._position())
        slot = (ck.revive_us - ACK_TIME_INTERVAL_US) // TIMER_PRECISION_US  # the ck's deliverTimeMs, its timer slot
        seq = next(self._seq)
        heapq.heappush(self.queues[revive_qid], (slot, seq, seq, ck))  # order ≥ 0: not a replay
        self.by_key[ck.key()] = ck
        self._record(revive_qid, ck.revive_us - ACK_TIME_INTERVAL_US)
        return ck

    def _record(self, qid: int, deliver_us: int) -> None:
        """A record written to revive queue `qid`, due at `deliver_us` (the timer delivers it later)."""
        heapq.heappush(self.unread[qid], (record_visible_at_us(deliver_us), deliver_us))

    def ack(self, group: str, topic: str, queue_id: int, ck_start_offset: int, pop_time_us: int,
            queue_offset: int) -> bool:
        """An ack record: sets its bit if the checkpoint is still waiting (True), else it is ignored."""
        ck = self.by_key.get((topic, group, queue_id, ck_start_offset, pop_time_us))
        if ck is None:
            self.cov[COV_POP_ACK_AFTER_REVIVE] += 1
            return False
        try:
            bit = ck.offsets.index(queue_offset)
        except ValueError:
            return False
        ck.acked |= 1 << bit
        ck.ack_positions.append((self._position(), bit))
        self._record(ck.revive_qid, ck.revive_us)  # an ack record is due at its checkpoint's reviveTime
        return True

    # --- PopReviveService ------------------------------------------------------------------
    def revive_loop(self, qid: int) -> Generator:
        """PopReviveService.run: wait 1 s, scan; after a scan that read no checkpoint, 1 s more per
        such scan (up to reviveMaxSlow)."""
        slow = 1
        while True:
            yield self.node.sleep_us(REVIVE_INTERVAL_US)
            if self.broker.slave:  # shouldRunPopRevive: the master only
                continue
            read = yield from self.scan(qid)
            if read:
                slow = 1
            else:
                yield self.node.sleep_us(slow * REVIVE_INTERVAL_US)
                slow = min(slow + 1, REVIVE_MAX_SLOW)

    def scan(self, qid: int) -> Generator[Any, Any, bool]:
        """consumeReviveMessage + mergeAndRevive on one revive queue (module docstring); True if it
        read a checkpoint. It polls every 100 ms while a checkpoint it read is not yet due; with
        nothing to read it waits for the next record the timer delivers, or its 4 s without one."""
        give_up = self.clock.now_us + SCAN_IDLE_BREAK_US + SCAN_POLL_US  # after the 41st empty read
        read = False
        while not self.broker.slave:
            now = self.clock.now_us
            if now >= give_up:
                return read
            if self._read_delivered(qid, now):
                give_up = now + SCAN_IDLE_BREAK_US + SCAN_POLL_US  # noMsgCount = 0
            head = self._visible_head(qid, now)
            if head is not None:
                read = True
                end = scan_end_time_us(self.newest_us[qid], now)
                if checkpoint_due(end, head.revive_us):
                    self._merge_and_revive(qid, now, end)
                    return True
            yield self.node.sleep_us(self._poll_wait_us(qid, now, head is not None, give_up))
        return read

    def _poll_wait_us(self, qid: int, now: int, waiting_ck: bool, give_up_us: int) -> int:
        """Until the next poll that can find something new: the next one (a checkpoint read is not yet
        due: any record delivered can make it due), else the first poll at or after the next known
        record's delivery or the scan's end, at most 1 s on (a checkpoint written meanwhile is
        delivered 4 s after it at the earliest: invisible times are at least 5 s)."""
        if waiting_ck:
            return SCAN_POLL_US
        target = min(give_up_us, now + REVIVE_INTERVAL_US)
        if self.unread[qid]:
            target = min(target, self.unread[qid][0][0])
        polls = -(-(target - now) // SCAN_POLL_US)  # on the 100 ms grid of this scan's polls
        return max(1, polls) * SCAN_POLL_US

    def _read_delivered(self, qid: int, now: int) -> bool:
        """The records the timer has put into the revive queue by `now`: True if there were new ones."""
        unread = self.unread[qid]
        fresh = False
        while unread and unread[0][0] <= now:
            _at, deliver_us = heapq.heappop(unread)
            self.newest_us[qid] = max(self.newest_us[qid], deliver_us)
            fresh = True
        return fresh

    def _visible_head(self, qid: int, now: int) -> PopCheckPoint | None:
        """The revive queue's first checkpoint not yet revived, if the timer has delivered it (a
        checkpoint scanned again after a restart is there already)."""
        pending = self.queues[qid]
        if not pending:
            return None
        slot = pending[0][0]
        return pending[0][3] if slot < 0 or (slot + 1) * TIMER_PRECISION_US <= now else None

    def _merge_and_revive(self, qid: int, now: int, end_us: int) -> None:
        """mergeAndRevive: the checkpoints read, in order, while due; then the new revive offset."""
        pending = self.queues[qid]
        while True:
            ck = self._visible_head(qid, now)
            if ck is None or not checkpoint_due(end_us, ck.revive_us):
                break
            _slot, replay, _tie, _ck = heapq.heappop(pending)
            self.revive_offsets[qid] += 1
            self.revived[qid].append((self.revive_offsets[qid], ck))
            self._revive(ck, replay < 0)
        self.broker.offsets.commit(REVIVE_GROUP, REVIVE_TOPIC, qid, self.revive_offsets[qid])

    def _revive(self, ck: PopCheckPoint, replay: bool) -> None:
        self.by_key.pop(ck.key(), None)
        for bit, offset in enumerate(ck.offsets):
            if not ck.acked >> bit & 1:
                self._revive_retry(ck, offset, replay)

    def _rescan(self) -> None:
        """A (re)started broker scans each revive queue from the revive offset its consumerOffset.json
        held: the checkpoints revived past it go back into the queue, before the others."""
        for qid in range(REVIVE_QUEUE_NUM):
            loaded = max(0, self.broker.offsets.table.get((REVIVE_GROUP, REVIVE_TOPIC, qid), 0))
            again = [(offset, ck) for offset, ck in self.revived[qid] if offset > loaded]
            self.revived[qid] = [(offset, ck) for offset, ck in self.revived[qid] if offset <= loaded]
            for offset, ck in again:  # a negative sequence: first, in their old order, and marked replayed
                heapq.heappush(self.queues[qid], (-1, offset - loaded - len(again) - 1, next(self._seq), ck))
                self.by_key[ck.key()] = ck
            self.revive_offsets[qid] = loaded

    def _trim_loop(self) -> Generator:
        """Forget revived checkpoints the persisted revive offsets cover (one file read per interval)."""
        while True:
            yield self.node.sleep_us(ms(self.broker.cfg.flush_consumer_offset_interval_ms))
            persisted = self.broker.offsets.persisted
            for qid in range(REVIVE_QUEUE_NUM):
                covered = persisted.get((REVIVE_GROUP, REVIVE_TOPIC, qid), 0)
                self.revived[qid] = [(o, ck) for o, ck in self.revived[qid] if o > covered]

    def _revive_retry(self, ck: PopCheckPoint, offset: int, replay: bool) -> None:
        """reviveRetry: the message into the POP retry topic, reconsumeTimes + 1."""
        broker = self.broker
        cq = broker.reput.queue(ck.topic, ck.queue_id)
        if cq is None:
            return
        _status, _next, _max, msgs = broker.store.get_message(cq, offset, 1, None)
        if not msgs or msgs[0].queue_offset != offset:
            return
        msg = msgs[0]
        topic = pop_retry_topic(ck.group, ck.topic)
        broker.topics.setdefault(topic, 1)  # PopAckConstants.retryQueueNum, created on first use
        props = dict(msg.props or {})
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.user_topic)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        reconsume = msg.reconsume_times + 1
        size = record_bytes(topic, msg.body_bytes, msg.tags, 0, props, reconsume)
        phys, queue_offset = broker.put_no_wait(msg.msg_id, topic, 0, size, msg.body_bytes, msg.tags, reconsume,
                                                props)
        if phys < 0:
            return
        self.cov[COV_POP_REVIVED] += 1
        self.node.trace(POP_REVIVED, ck.group, msg.msg_id, topic, 0, queue_offset, reconsume, ck.topic, ck.queue_id,
                        offset, replay)

    # --- power loss ------------------------------------------------------------------------
    def _power_loss(self) -> None:
        """Records past the CommitLog's flushed position are gone: checkpoints and acks."""
        flushed = self.broker.commit_log.flushed_position
        self.revived = [[(o, ck) for o, ck in log if ck.position <= flushed] for log in self.revived]
        for qid, pending in enumerate(self.queues):
            kept = []
            for entry in pending:
                ck = entry[3]
                if ck.position > flushed:
                    self.by_key.pop(ck.key(), None)
                    continue
                for position, bit in ck.ack_positions:
                    if position > flushed:
                        ck.acked &= ~(1 << bit)
                ck.ack_positions = [(p, b) for p, b in ck.ack_positions if p <= flushed]
                kept.append(entry)
            heapq.heapify(kept)
            self.queues[qid] = kept
