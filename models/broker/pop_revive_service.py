"""broker.processor.PopReviveService with the revive topic's checkpoints and acks (5.3.3).

**Checkpoints.** Each POP that finds messages in a queue writes one PopCheckPoint (store/pop/PopCheckPoint:
start offset, the popped offsets, popTime, invisibleTime, a bitmap of acks) to the revive topic
`rmq_sys_REVIVE_LOG_<cluster>`, queue `reviveQid` — the POP requests take the `reviveQueueNum` (8)
queues in turn (`ckMessageNumber % reviveQueueNum`). With `enablePopBufferMerge` false (the
default) the checkpoint is written synchronously at the pop (PopBufferMergeService.addCkJustOffset);
an ack (AckMessageProcessor) is written to the same revive queue, and a ChangeInvisibleTime writes a
new checkpoint of one message (popTime = now) and then acks the old one.

**Revive.** One PopReviveService thread per revive queue, on the master only: every `reviveInterval`
(1 s; after a round with no checkpoint, 1 s more per idle round up to `reviveMaxSlow` 3) it reads the
queue's checkpoints and acks and revives, in their order in the revive queue, each checkpoint whose
`reviveTime` (popTime + invisibleTime) is more than 2 s (`ackTimeInterval` + 1 s) behind the newest
timer time it has read — a checkpoint is a timer message due 1 s before its reviveTime, and the timer
puts it into the revive queue within its 1 s slot, so that is `now - 1 s`, and the queue's order is
the order of the checkpoints' due slots (within a slot, of their writing): a ChangeInvisibleTime's
10 s checkpoint is revived before older 60 s ones. It stops at the first checkpoint not yet due. Each popped offset whose bit is not acked is read from its queue and put into the group's
POP retry topic `%RETRY%<group>_<topic>` (V1 naming, `enableRetryTopicV2` false; a message read from
the retry topic goes back into it) with reconsumeTimes + 1, no delay level and no dead-letter check
(the proxy's receive filter does that, pop_message_processor.py); `pop.revived` records each one.
An ack written before its checkpoint is revived cancels the retry; a later one is ignored (the
broker accepts it: a late ack is a race with the revive, not an error).

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
merge (`enablePopBufferMerge` true) is not modelled; an idle revive queue revives 3 s after the
reviveTime like a busy one (5.3.3's idle scan takes `now` as its end time after 3 s without a
record, about 1 s earlier).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator
from typing import TYPE_CHECKING

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
ORDER_REVIVE_QID = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: an orderly pop's handle (no checkpoint)
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # PopAckConstants.REVIVE_GROUP
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"  # PopAckConstants.REVIVE_TOPIC + brokerClusterName


def pop_retry_topic(group: str, topic: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1: `%RETRY%<group>_<topic>`; a retry topic stays itself."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


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
        return ck

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
        return True

    # --- PopReviveService ------------------------------------------------------------------
    def revive_loop(self, qid: int) -> Generator:
        slow = 1
        while True:
            yield self.node.sleep_us(REVIVE_INTERVAL_US)
            if self.broker.slave:  # shouldRunPopRevive: the master only
                continue
            if self.revive_round(qid):
                slow = 1
            else:
                yield self.node.sleep_us(slow * REVIVE_INTERVAL_US)
                slow = min(slow + 1, REVIVE_MAX_SLOW)

    def revive_round(self, qid: int) -> bool:
        """consumeReviveMessage + mergeAndRevive on one revive queue; True if it held checkpoints."""
        pending = self.queues[qid]
        if not pending:
            return False
        now = self.clock.now_us
        end_us = now - TIMER_PRECISION_US  # the newest timer time the scan has read
        handled = False
        while pending and end_us - pending[0][3].revive_us > REVIVE_DUE_AFTER_US:
            _slot, replay, _tie, ck = heapq.heappop(pending)
            self.revive_offsets[qid] += 1
            self.revived[qid].append((self.revive_offsets[qid], ck))
            self._revive(ck, replay < 0)
            handled = True
        if handled:  # the round's new revive offset
            self.broker.offsets.commit(REVIVE_GROUP, REVIVE_TOPIC, qid, self.revive_offsets[qid])
        return True

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
