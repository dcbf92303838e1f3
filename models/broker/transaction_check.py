"""TransactionalMessageCheckService and TransactionalMessageServiceImpl.check (5.3.3), with the
check listener (AbstractTransactionalMessageCheckListener / DefaultTransactionalMessageCheckListener).

Every `transactionCheckInterval` (30 s in 5.1.1+; the wait starts after the previous round ends,
the first round one interval after start) the broker runs one check round over the half queue:

1. `halfOffset`, `opOffset`: CID_RMQ_SYS_TRANS's consume offsets of the half queue and its op queue.
2. Pull up to 32 op messages from `opOffset` (`fillOpRemoveMap`): each listed half offset at or
   above `halfOffset` goes into `removeMap` (half offset → op offset); an op message all of whose
   offsets are below `halfOffset` is "done".
3. Scan half offsets `i` from `halfOffset`, for at most 60 s (`MAX_PROCESS_TIME_LIMIT`; the round
   then ends and the rest waits for the next round):
   - `i` in removeMap: resolved, next;
   - read the half at `i` (none: stop at the queue's end; otherwise jump once to the offset the
     store suggests);
   - discard (to TRANS_CHECK_MAX_TIME_TOPIC) when its TRANSACTION_CHECK_TIMES reached
     `transactionCheckMax` (15), or it is older than fileReservedTime (72 h); else the count goes
     up by one (absent: 1);
   - stop when the half was stored after the round started (the copies this round wrote back);
   - immunity = `transactionTimeOut` (6 s), or CHECK_IMMUNITY_TIME_IN_SECONDS × 1000 if the half
     carries it. Without the property, a half younger than that (0 ≤ age < immunity in 5.3.3 and
     4.9.8; develop has ≤) stops the scan (later ones are younger still). With it and within it: a first copy is written back carrying
     TRAN_PREPARED_QUEUE_OFFSET; a copy whose original offset is in removeMap is resolved;
   - check only when no op message was found by the last op pull and the half is older than the
     immunity (or the newest op was born more than `transactionTimeOut` after the round
     started, or the clock went back); otherwise pull the next 32 op messages and look at `i`
     again (5.x: after a 1 s sleep when that pull finds none; 4.9.8 at once): a half is checked
     only after every op record has been consulted;
   - check: write the half back to the end of the half queue (with the new check count), then
     send CHECK_TRANSACTION_STATE about the *new copy* to one producer of its group.
4. Store the new consume offsets: the half queue's past the scanned offsets, the op queue's past
   the contiguous run of done op messages.

The check request is oneway, to `ProducerManager.getAvailableChannel(group)`: a round-robin
counter over the group's registered channels (registered by heartbeats; a dead process's channel
closes; 120 s without heartbeat expires it). No channel: the check is only logged, but the count
went up anyway, so a group that stays away has its halves discarded after 15 rounds.

4.9.8 pulls the op queue again at once where 5.x sleeps. When that pull finds nothing new
(NO_NEW_MSG) nothing in the loop changes but `System.currentTimeMillis()`: a half exactly
`transactionTimeOut` old (age = immunity: neither "new arrived" nor "needs check") keeps the
Java loop pulling until its clock moves, which takes less than a millisecond (the age then
exceeds the immunity and the half is checked; a newer op message, if one arrived meanwhile, is
read first; `MAX_PROCESS_TIME_LIMIT` bounds the round in any case). Here the clock moves only
between events, so that spin is modelled as a wait of one clock tick (`SPIN_TICK_US`) before each
such pull: the same decisions, never a loop at one simulated instant (which would never end).
No other 4.x pass waits, so runs that never reached that state are unchanged.

An exception in a round (the `service_error` fault with service `transaction_check`, e.g. the
NPE of a null pull result while the store cannot be read): check() catches every Throwable
around its whole per-queue loop (`log.error("Check error", e)`), and the consume offsets are
stored only at the end of that loop, so a round that throws stores neither — 4.9.8 and 5.3.3
alike (apache/rocketmq#9500, still open; the fix proposed in PR #9523 moves the updates into a
`finally`). The model throws at the end of the scan, the work of the round done: its check
requests sent, its copies written back (`txn.check_error`). The next round starts from the same
offsets and checks each unresolved half again from its original, whose check count never grew
(the count lives in the copies), so it is never discarded; every round adds a copy of it, and
every copy is checked and answered, so a half that a check answers COMMIT is committed once per
copy: duplicates (`txn_double_commit`). #9500's other consequence — with a long op backlog the
next round cannot read to the op queue's end within MAX_PROCESS_TIME_LIMIT — needs the time each
op pull takes, which the model does not cost (below).

Simplified: processing costs no simulated time except the 1 s sleeps (5.x) and the 4.9.8 spin
above (so the 60 s limit binds only through those); the 2..5-thread check executor sends at
once; the `enableSlaveActingMaster` escape is not modelled (no slaves here).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.transactional_message_bridge import (
    HALF_QUEUE_ID,
    NO_MATCHED_MSG,
    NO_NEW_MSG,
    OFFSET_ILLEGAL,
    OFFSET_SEPARATOR,
    PULL_FOUND,
    REMOVE_TAG,
    PullResult,
    TransactionalMessageBridge,
)
from models.coverage_points import COV_TXN_CHECK_MAX_REACHED, COV_TXN_CHECK_NO_PRODUCER
from models.message import (
    PROPERTY_BORN_TIMESTAMP,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_OP_BODY,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    MessageExt,
    record_bytes,
)
from models.protocol import CheckTransactionState
from models.records import TXN_CHECK_ERROR, TXN_CHECKED, TXN_DISCARDED
from sim.env import ms

MAX_PROCESS_TIME_LIMIT_US = 60_000_000  # TransactionalMessageServiceImpl.MAX_PROCESS_TIME_LIMIT
OP_MSG_PULL_NUMS = 32  # TransactionalMessageServiceImpl.OP_MSG_PULL_NUMS
SLEEP_WHILE_NO_OP_US = 1_000_000  # TransactionalMessageServiceImpl.SLEEP_WHILE_NO_OP
PULL_MSG_RETRY_NUMBER = 1  # getHalfMsg pulls one message
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1  # TransactionalMessageServiceImpl.MAX_RETRY_COUNT_WHEN_HALF_NULL
FILE_RESERVED_TIME_US = 72 * 3_600_000_000  # MessageStoreConfig.fileReservedTime (72 h): needSkip
TCMT_QUEUE_NUMS = 1  # TopicValidator / DefaultTransactionalMessageCheckListener: TRANS_CHECK_MAX_TIME_TOPIC queues
GET_AVAILABLE_CHANNEL_RETRY_COUNT = 3  # ProducerManager.GET_AVAILABLE_CHANNEL_RETRY_COUNT (all channels read as active)
SPIN_TICK_US = 1  # 4.9.8's op-pull spin lasts until the clock moves: one tick of the µs clock (module docstring)


class TransactionalMessageCheckService:
    def __init__(self, broker: Any, bridge: TransactionalMessageBridge, cfg: Any, v5: bool = True) -> None:
        self.broker = broker
        self.sleep_while_no_op_us = SLEEP_WHILE_NO_OP_US if v5 else 0  # 4.9.8 pulls again at once
        self.node = broker.node
        self.cov = broker.node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.bridge = bridge
        self.cfg = cfg
        self.interval_us = ms(cfg.transaction_check_interval_ms)
        self.timeout_us = ms(cfg.transaction_timeout_ms)
        self.check_max = cfg.transaction_check_max
        self.positive_counter = 0  # ProducerManager.positiveAtomicCounter (heap)
        self.error_until_us = 0  # a round ending before this throws (the `service_error` fault)
        self.node.on_crash(self._lose_heap)
        self.node.add_service(self.run)

    def _lose_heap(self) -> None:
        self.positive_counter = 0

    def throw_until(self, until_us: int) -> None:
        """The `service_error` fault: every round that ends before `until_us` throws (0: none)."""
        self.error_until_us = until_us

    def run(self) -> Generator[Any, Any, None]:
        """ServiceThread loop: wait the interval, run one round, wait again."""
        node = self.node
        while True:
            yield node.sleep_us(self.interval_us)
            if not self.broker.slave:  # controller mode: a demoted master checks nothing
                yield from self.check()

    # --- TransactionalMessageServiceImpl.check ------------------------------------------------
    def check(self) -> Generator[Any, Any, None]:
        """One round over half queue 0 (the only half queue: every half goes to queue 0)."""
        bridge, node = self.bridge, self.node
        start = node.env._now
        half_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        op_offset = bridge.fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
        done_op: list[int] = []
        remove: dict[int, int] = {}
        op_map: dict[int, set[int]] = {}
        pull = self._fill_op_remove_map(remove, op_offset, half_offset, op_map, done_op)
        null_count = 1
        new_offset = i = half_offset
        next_op_offset = pull.next_begin_offset
        while node.env._now - start <= MAX_PROCESS_TIME_LIMIT_US and not self.broker.slave:  # (demoted: stop)
            removed_op = remove.pop(i, None)
            if removed_op is not None:
                members = op_map[removed_op]
                members.discard(i)
                if not members:
                    del op_map[removed_op]
                    done_op.append(removed_op)
                new_offset = i = i + 1
                continue
            half_pull = bridge.get_half_message(i, PULL_MSG_RETRY_NUMBER)
            if not half_pull.msgs:
                null_count += 1
                if null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL or half_pull.status == NO_NEW_MSG:
                    break
                new_offset = i = half_pull.next_begin_offset
                continue
            half = half_pull.msgs[0]
            props = dict(half.props or {})
            now = node.env._now
            born = props.get(PROPERTY_BORN_TIMESTAMP, half.store_us)
            if self._need_discard(props) or now - born > FILE_RESERVED_TIME_US:
                self.resolve_discard_msg(half, props)
                new_offset = i = i + 1
                continue
            if half.store_us >= start:
                break  # fresh stored: this round's own copies and later ones
            age = now - born
            immunity = self.timeout_us
            immunity_s = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_s is not None:
                immunity = self.timeout_us if immunity_s == -1 else immunity_s * 1_000_000
                if age < immunity and self._check_prepare_queue_offset(remove, done_op, half, props):
                    new_offset = i = i + 1
                    continue
            elif 0 <= age < immunity:
                break  # new arrived: check it later
            ops = pull.msgs if pull.status == PULL_FOUND else None
            need_check = (ops is None and age > immunity) or (
                ops is not None and ops[-1].store_us - start > self.timeout_us) or age <= -1000
            if need_check:
                phys, queue_offset = bridge.put_back_half_message(half, props)
                self.resolve_half_msg(half, props, phys, queue_offset)
            else:
                if pull.status == NO_NEW_MSG and not self.sleep_while_no_op_us:
                    yield node.sleep_us(SPIN_TICK_US)  # 4.9.8 spins until its clock moves (module docstring)
                next_op_offset = pull.next_begin_offset
                pull = self._fill_op_remove_map(remove, next_op_offset, half_offset, op_map, done_op)
                if pull.status in (NO_NEW_MSG, OFFSET_ILLEGAL, NO_MATCHED_MSG) and self.sleep_while_no_op_us:
                    yield node.sleep_us(self.sleep_while_no_op_us)
                continue
            new_offset = i = i + 1
        if node.env._now < self.error_until_us:  # the Throwable check() catches: no offset is stored
            node.trace(TXN_CHECK_ERROR, half_offset, new_offset, op_offset)
            return
        if new_offset != half_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, new_offset)
        new_op_offset = _calculate_op_offset(done_op, op_offset)
        if new_op_offset != op_offset:
            bridge.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, new_op_offset)

    def _fill_op_remove_map(self, remove: dict[int, int], op_offset: int, mini_offset: int,
                            op_map: dict[int, set[int]], done_op: list[int]) -> PullResult:
        pull = self.bridge.get_op_message(HALF_QUEUE_ID, op_offset, OP_MSG_PULL_NUMS)
        if pull.status in (OFFSET_ILLEGAL, NO_MATCHED_MSG):
            self.bridge.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, pull.next_begin_offset)
            return pull
        if pull.status == NO_NEW_MSG:
            return pull
        for op in pull.msgs:
            body = (op.props or {}).get(PROPERTY_OP_BODY)
            if body is None:
                done_op.append(op.queue_offset)
                continue
            members: set[int] = set()
            if op.tags == REMOVE_TAG:
                for text in body.split(OFFSET_SEPARATOR):
                    if not text:
                        continue  # Java's split drops the trailing empty string
                    offset = int(text)
                    if offset < mini_offset:
                        continue
                    remove[offset] = op.queue_offset
                    members.add(offset)
            if members:
                op_map[op.queue_offset] = members
            else:
                done_op.append(op.queue_offset)
        return pull

    def _need_discard(self, props: dict[str, Any]) -> bool:
        """needDiscard: at the maximum → True; else the in-memory count goes up (absent: 1)."""
        times = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        if times is None:
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = 1
            return False
        if times >= self.check_max:
            self.cov[COV_TXN_CHECK_MAX_REACHED] += 1
            return True
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = times + 1
        return False

    def _check_prepare_queue_offset(self, remove: dict[int, int], done_op: list[int], half: MessageExt,
                                    props: dict[str, Any]) -> bool:
        """checkPrepareQueueOffset: True = skip this half (resolved, or its immunity copy was written)."""
        prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            return self._put_immunity_back(half, dict(props, **{PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET:
                                                                half.queue_offset}))
        op = remove.pop(prepared, None)
        if op is not None:
            done_op.append(op)
            return True
        return self._put_immunity_back(half, props)

    def _put_immunity_back(self, half: MessageExt, props: dict[str, Any]) -> bool:
        self.bridge.put_back_half_message(half, props)
        return True

    # --- the check listener -------------------------------------------------------------------
    def resolve_half_msg(self, half: MessageExt, props: dict[str, Any], phys: int, queue_offset: int) -> None:
        """resolveHalfMsg → sendCheckMessage: CHECK_TRANSACTION_STATE about the new copy, oneway."""
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        channel = self.available_channel(group)
        self.node.trace(TXN_CHECKED, half.msg_id, props[PROPERTY_TRANSACTION_CHECK_TIMES], channel or "")
        if channel is not None:
            self.node.send(channel, CheckTransactionState(group, queue_offset, phys, half.msg_id,
                                                          self.broker.broker_name))
        else:  # only logged: the check count went up anyway
            self.cov[COV_TXN_CHECK_NO_PRODUCER] += 1

    def available_channel(self, group: str) -> str | None:
        """ProducerManager.getAvailableChannel: round robin over the group's channels (a channel
        is active until the broker learns its process died)."""
        channels = self.broker.producers.channels(group)
        if not channels:
            return None
        self.positive_counter = (self.positive_counter + 1) & 0x7FFFFFFF
        return channels[self.positive_counter % len(channels)]

    def resolve_discard_msg(self, half: MessageExt, props: dict[str, Any]) -> None:
        """DefaultTransactionalMessageCheckListener.resolveDiscardMsg: to TRANS_CHECK_MAX_TIME_TOPIC
        (never to the real topic)."""
        size = record_bytes(TRANS_CHECK_MAX_TIME_TOPIC, half.body_bytes, half.tags, 0, props)
        self.bridge.put_unwaited(half.msg_id, TRANS_CHECK_MAX_TIME_TOPIC, 0 % TCMT_QUEUE_NUMS, size, half.body_bytes,
                                 half.tags, props)
        self.bridge.resolved(half.msg_id)
        self.node.trace(TXN_DISCARDED, half.msg_id, props.get(PROPERTY_TRANSACTION_CHECK_TIMES, 0))


def _calculate_op_offset(done: list[int], old_offset: int) -> int:
    """calculateOpOffset: past the contiguous run of done op offsets from `old_offset`."""
    new_offset = old_offset
    for offset in sorted(done):
        if offset == new_offset:
            new_offset += 1
        else:
            break
    return new_offset
