"""TransactionalMessageServiceImpl.deletePrepareMessage and TransactionalOpBatchService (5.3.3).

An end that commits or rolls back a half message "deletes" it by an op record: its half queue
offset. 5.1.0+ batches them: the offset is appended as `"<offset>,"` to an in-memory buffer of
the half queue (`deleteContext`, at most 20,000 entries); TransactionalOpBatchService writes
one op message per queue when the buffer holds more than `transactionOpMsgMaxSize` (4096) bytes
(the append wakes it) or `transactionOpBatchInterval` (3000 ms) has passed since the queue's last
op write (or the buffer's creation), so an op record waits up to two intervals; an op message
takes at most about `transactionOpMsgMaxSize` bytes of the buffer. A
buffer that cannot take an entry (full for 100 ms) makes the end write its op message directly.
The buffers are heap: **a broker crash loses the buffered op records**, and the check-back asks
the producers about those halves again — a committed one is then committed again.

4.x (`version: 4.x`): every end writes its op message at once (no buffer).

Simplified: the buffer's 100 ms offer wait is not modelled (full means direct write at once).
"""

from __future__ import annotations

from typing import Any

from models.broker.transactional_message_bridge import OFFSET_SEPARATOR, TransactionalMessageBridge
from models.coverage_points import COV_TXN_OP_BATCH_LOST_IN_CRASH
from sim.env import ms

OP_CONTEXT_CAPACITY = 20_000  # MessageQueueOpContext's LinkedBlockingQueue(20000)
OVERSIZE_SLACK_BYTES = 100  # getOpMessage: a builder of maxSize + 100 chars when the buffer is over


class _OpContext:
    """MessageQueueOpContext: the queue's buffered op entries and their total length."""

    __slots__ = ("entries", "total_size", "last_write_us")

    def __init__(self, now_us: int) -> None:
        self.entries: list[str] = []
        self.total_size = 0
        self.last_write_us = now_us


class TransactionalOpBatchService:
    def __init__(self, node: Any, bridge: TransactionalMessageBridge, cfg: Any, batched: bool) -> None:
        self.node = node
        self.bridge = bridge
        self.batched = batched  # 5.1.0+; False: 4.x writes each op message at once
        self.interval_us = ms(cfg.transaction_op_batch_interval_ms)
        self.max_size = cfg.transaction_op_msg_max_size_bytes
        self.delete_context: dict[int, _OpContext] = {}
        self._timer: Any = None
        node.on_crash(self._lose_heap)
        if batched:
            node.on_start(self._start)

    def _lose_heap(self) -> None:
        if any(ctx.entries for ctx in self.delete_context.values()):  # buffered op records die with the heap
            self.node.env.coverage[COV_TXN_OP_BATCH_LOST_IN_CRASH] += 1
        self.delete_context.clear()
        self._timer = None

    def _start(self) -> None:
        self._arm(self.node.env._now + self.interval_us)

    def _arm(self, at_us: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.node.timer(max(0, at_us - self.node.env._now), self._run)

    def wakeup(self) -> None:
        self._arm(self.node.env._now)

    def _run(self) -> None:
        self._timer = None
        wakeup_us = self.batch_send_op_message()
        self._arm(wakeup_us if wakeup_us else self.node.env._now)

    # --- TransactionalMessageServiceImpl ------------------------------------------------------
    def delete_prepare_message(self, queue_id: int, queue_offset: int) -> None:
        """deletePrepareMessage: buffer (5.x) or write (4.x) the op entry of a resolved half."""
        data = f"{queue_offset}{OFFSET_SEPARATOR}"
        if not self.batched:
            self.bridge.write_op(queue_id, data)
            return
        ctx = self.delete_context.get(queue_id)
        if ctx is None:
            ctx = self.delete_context[queue_id] = _OpContext(self.node.env._now)
        if len(ctx.entries) < OP_CONTEXT_CAPACITY:
            ctx.entries.append(data)
            ctx.total_size += len(data)
            if ctx.total_size > self.max_size:
                self.wakeup()
            return
        self.wakeup()
        self.bridge.write_op(queue_id, self._op_body(ctx, data))

    def _op_body(self, ctx: _OpContext, more: str = "") -> str:
        """getOpMessage: `more` plus buffered entries until the text reaches transactionOpMsgMaxSize."""
        parts, length = [more] if more else [], len(more)
        taken = 0
        while taken < len(ctx.entries) and length < self.max_size:
            parts.append(ctx.entries[taken])
            length += len(ctx.entries[taken])
            taken += 1
        del ctx.entries[:taken]
        ctx.total_size -= length - len(more)
        ctx.last_write_us = self.node.env._now
        return "".join(parts)

    def batch_send_op_message(self) -> int:
        """batchSendOpMessage: write the due queues' op messages; returns the next wake-up time
        (0: at once, the buffer is still over the size)."""
        start = now = self.node.env._now
        first = start
        over_size = False
        for queue_id, ctx in self.delete_context.items():
            if ctx.total_size <= 0 or not ctx.entries or (
                    ctx.total_size < self.max_size and start - ctx.last_write_us < self.interval_us):
                continue
            body = self._op_body(ctx)
            if not body:
                continue
            self.bridge.write_op(queue_id, body)
            first = min(first, ctx.last_write_us)  # just set to now, as in the Java code
            if ctx.total_size >= self.max_size:
                over_size = True
        wakeup = first + self.interval_us
        return wakeup if not over_size and wakeup > now else 0
