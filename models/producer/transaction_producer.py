"""client.producer.TransactionMQProducer: DefaultMQProducerImpl.sendMessageInTransaction,
endTransaction and checkTransactionState (5.3.3; 4.9.8 alike in what is modelled).

`send_message_in_transaction(msg)` (the workload's send) is synchronous in the application's
calling thread: the thread is blocked through the half send (with its retries), the local
transaction and the oneway end. The application has `transaction.threads` such threads per
instance (default 1); an arrival while all are busy waits in the application, in arrival order,
and is handed to the next free thread — its send() call, and its born time, is then. What still
waits when the run ends was never sent (the summary's `txn.waiting_at_end`). A crash loses the
waiting arrivals with the application's heap.
1. A delay level the application set is cleared first (`msg.getDelayTimeLevel() != 0` →
   clearProperty(DELAY), 4.9.8 and 5.3.3: the fix of apache/rocketmq#1540, PR #1543 in 4.7.0;
   before it the committed message went to SCHEDULE_TOPIC_XXXX and came back as a half message,
   looping through RMQ_SYS_TRANS_HALF_TOPIC — which ScheduleMessageService also refuses since PR
   #1626: unreachable from a 4.9.8 / 5.3.3 client, not modelled). So the message is delivered at
   its commit, without the delay (`producer.txn_delay_cleared` once a message).
   The message gets TRAN_MSG=true and PGROUP=<group> (and CHECK_IMMUNITY_TIME_IN_SECONDS when
   the application sets it) and goes out on the ordinary SYNC path (producer.py: up to 3
   attempts; a timed-out attempt may leave an extra half message on a broker).
2. The send throws (`producer.send_failed`): no local transaction, no end.
3. SEND_OK: the local transaction runs (local_transaction.py); when it ends, its state goes to
   the broker that stored the half as a **oneway** END_TRANSACTION (COMMIT / ROLLBACK, or
   TRANSACTION_NOT_TYPE for UNKNOW and for an exception), carrying the half's CommitLog and queue
   offsets from the send result. Nobody learns whether it arrived.
4. FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE: the local transaction is not
   executed; the end says ROLLBACK.

Check-back (`ClientRemotingProcessor.checkTransactionState` → `checkTransactionState`): the client
finds its producer of the request's group (none after shutdown: ignored) and queues the request
on the check executor — one thread (`checkThreadPoolMinSize` = `checkThreadPoolMaxSize` = 1), a
queue of `checkRequestHoldMax` (2000; a full queue rejects the request). The thread calls
checkLocalTransaction (the application's log) and answers with a oneway END_TRANSACTION
(`fromTransactionCheck`) to the broker the check came from, with the offsets of the checked copy.

Shutdown (`transaction.shutdown_ms`, DefaultMQProducer.shutdown): the producer unregisters from
the client instance (its heartbeats stop naming the group) and sends UNREGISTER_CLIENT to every
broker; local transactions still running end, but their endTransaction fails (client shut down);
checks are no longer answered. It never starts again.

Simplified: endTransaction is written on the broker's channel without the reconnect a closed
channel would need; the check executor's keep-alive is not modelled.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from models.message import (
    PROPERTY_BORN_TIMESTAMP,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
)
from models.producer.local_transaction import (
    COMMIT_MESSAGE,
    ROLLBACK,
    ROLLBACK_MESSAGE,
    LocalTransactionApp,
    TransactionLog,
)
from models.producer.producer import Producer
from models.producer.transaction_config import TransactionSpec
from models.protocol import (
    SEND_OK,
    SEND_STATUS_BY_CODE,
    SUCCESS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    CheckTransactionState,
    EndTransaction,
    UnregisterClient,
)
from models.records import PRODUCER_TXN_DELAY_CLEARED, TXN_CHECK_ANSWERED, TXN_LOCAL_DONE
from sim.env import ms
from sim.node import CONNECT_FAILED

NOT_EXECUTED = "NOT_EXECUTED"
DELAY_PROPERTY_BYTES = 7  # `DELAY` + its two separators, as the workload counts it (models/producer/workload.py)
END_TYPE = {COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE, ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE}


class TransactionMQProducer(Producer):
    def __init__(self, env: Any, name: str, zone: str, cfg: Any, namesrvs: list[str], topics: list[str], *,
                 group: str, client_version: str, spec: TransactionSpec, log: TransactionLog) -> None:
        super().__init__(env, name, zone, cfg, namesrvs, topics, "SYNC", group=group, client_version=client_version)
        self.spec = spec
        self.app = LocalTransactionApp(self.node, spec, log)
        self.send = self.send_message_in_transaction
        self._results: dict[int, Any] = {}  # msg id -> the stored send response of its latest attempt
        self.check_queue: deque = deque()  # the check executor's queue (heap)
        self.check_busy = False
        self.threads_busy = 0  # the application's threads inside sendMessageInTransaction
        self.waiting: deque = deque()  # arrivals waiting for a thread (the application's heap)
        self.shut_down = False
        self.shutdown_us = ms(spec.shutdown_ms) if spec.shutdown_ms is not None else None
        self.node.handle(CheckTransactionState, self.on_check)
        self.node.on_crash(self._lose_heap)
        self.node.on_start(self._arm_shutdown)

    def _lose_heap(self) -> None:
        self._results.clear()
        self.check_queue.clear()
        self.check_busy = False
        self.threads_busy = 0
        self.waiting.clear()

    # --- the application's threads -----------------------------------------------------------------
    def send_message_in_transaction(self, msg: Any) -> None:
        """An arrival: a free thread calls sendMessageInTransaction now, else it waits for one."""
        if self.threads_busy >= self.spec.threads:
            self.waiting.append(msg)
            return
        self.threads_busy += 1
        self._call(msg)

    def _thread_free(self) -> None:
        """A thread returned from sendMessageInTransaction: it takes the next waiting arrival."""
        if self.waiting and not self.shut_down:
            msg = self.waiting.popleft()
            self._call(msg._replace(born_us=self.node.env._now))
        else:
            self.threads_busy = max(0, self.threads_busy - 1)

    def waiting_count(self) -> int:
        return len(self.waiting)

    # --- sendMessageInTransaction ----------------------------------------------------------------
    def _call(self, msg: Any) -> None:
        if self.shut_down:
            self.threads_busy = max(0, self.threads_busy - 1)
            return  # the service state is not OK: the application gets an exception, nothing is sent
        added = {PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: self.group,
                 PROPERTY_BORN_TIMESTAMP: msg.born_us}
        if self.spec.check_immunity_time_s is not None:
            added[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = self.spec.check_immunity_time_s
        extra = sum(len(name) + 2 + len(str(value)) for name, value in added.items())  # as properties_bytes counts
        props = {**msg.props, **added} if msg.props else added
        if msg.delay_level:  # MessageAccessor.clearProperty(msg, PROPERTY_DELAY_TIME_LEVEL): its bytes go too
            self.node.trace(PRODUCER_TXN_DELAY_CLEARED, msg.msg_id, msg.delay_level)
            extra -= DELAY_PROPERTY_BYTES + len(str(msg.delay_level))
        self._send_sync(msg._replace(props=props, size_bytes=msg.size_bytes + extra, delay_level=0))

    def _on_response(self, msg: Any, info: Any, mq: Any, times: int, last: Any, steered: int, begin_us: int,
                     response: Any) -> None:
        if response is not None and response is not CONNECT_FAILED:
            if response.code in SEND_STATUS_BY_CODE:
                self._results[msg.msg_id] = response
            if response.code == SUCCESS:
                if self.fault_on:
                    self._update_fault(mq.broker_name, begin_us, False, True)
                return self.sent(msg, mq, times, SEND_OK, steered)
        return super()._on_response(msg, info, mq, times, last, steered, begin_us, response)

    def sent(self, msg: Any, mq: Any, times: int, status: str, steered: int) -> None:
        super().sent(msg, mq, times, status, steered)
        response = self._results.pop(msg.msg_id, None)
        if status == SEND_OK:
            self.node.call_later(self.app.begin(msg.msg_id), self._local_transaction_done, msg.msg_id, mq, response)
            return
        self.app.record_rollback(msg.msg_id)  # stored, not OK: ROLLBACK without executing
        self.node.trace(TXN_LOCAL_DONE, msg.msg_id, ROLLBACK, NOT_EXECUTED)
        self.end_transaction(msg.msg_id, ROLLBACK_MESSAGE, mq, response)
        self._thread_free()

    def fail(self, msg: Any, times: int, reason: str, broker: str, steered: int) -> None:
        super().fail(msg, times, reason, broker, steered)
        self._results.pop(msg.msg_id, None)
        self._thread_free()  # the send threw: the thread returns with the exception

    def _local_transaction_done(self, msg_id: int, mq: Any, response: Any) -> None:
        outcome, state = self.app.decide(msg_id)
        self.node.trace(TXN_LOCAL_DONE, msg_id, outcome, state)
        if not self.shut_down:
            self.end_transaction(msg_id, state, mq, response)
        self._thread_free()

    def end_transaction(self, msg_id: int, state: str, mq: Any, response: Any) -> None:
        """endTransaction: oneway to the master of the broker that stored the half."""
        addr = self.client.publish_addr.get(mq.broker_name)
        if addr is None or response is None:
            return  # an exception, logged and swallowed
        self.node.send(addr, EndTransaction(self.group, response.queue_offset, response.phys_offset, msg_id,
                                            END_TYPE.get(state, TRANSACTION_NOT_TYPE), False))

    # --- checkTransactionState --------------------------------------------------------------------
    def on_check(self, src: str, req_id: int, req: CheckTransactionState) -> None:
        if self.client.producers.get(req.producer_group) is not self:
            return  # no producer of that group in this client
        if len(self.check_queue) >= self.spec.check_request_hold_max:
            return  # RejectedExecutionException: the check is dropped
        self.check_queue.append((src, req))
        if not self.check_busy:
            self._next_check()

    def _next_check(self) -> None:
        if not self.check_queue:
            self.check_busy = False
            return
        self.check_busy = True
        src, req = self.check_queue.popleft()
        self.node.call_later(self.app.check_duration_us(), self._check_done, src, req)

    def _check_done(self, src: str, req: CheckTransactionState) -> None:
        state = self.app.check(req.msg_id)
        self.node.trace(TXN_CHECK_ANSWERED, req.msg_id, state)
        self.node.send(src, EndTransaction(self.group, req.tran_state_table_offset, req.commit_log_offset, req.msg_id,
                                           END_TYPE.get(state, TRANSACTION_NOT_TYPE), True))
        self._next_check()

    # --- shutdown ---------------------------------------------------------------------------------
    def _arm_shutdown(self) -> None:
        if self.shutdown_us is not None and not self.shut_down:
            self.node.call_later(max(0, self.shutdown_us - self.node.env._now), self.shutdown)

    def shutdown(self) -> None:
        """DefaultMQProducer.shutdown: unregisterProducer + unregisterClient to every broker."""
        self.shut_down = True
        self.client.producers.pop(self.group, None)
        for addrs in self.client.broker_addr_table.values():
            for addr in addrs.values():
                self.node.send(addr, UnregisterClient(self.client.client_id, producer_group=self.group))
