"""ASYNC sends: DefaultMQProducerImpl.send(msg, callback, timeout) and MQClientAPIImpl.sendMessageAsync.

Follows 5.3.3 or 4.9.8 (the producer's `client_version`).

1. Back-pressure (5.x, `enableBackpressureForAsyncMode`): the caller takes one permit of
   `semaphoreAsyncSendNum` (at least 10) and body-length permits of `semaphoreAsyncSendSize` (at
   least 1 MiB), each waiting at most the rest of `sendMsgTimeout`; failing either ends the send
   ("backpressure_num" / "backpressure_size"). The permits return when the callback runs.
2. The async sender executor runs `sendDefaultImpl` (or `sendSelectImpl`) with one attempt: a task
   that starts after the budget is spent fails ("async_call_timeout"). The executor and the
   callback executor run tasks the moment they are submitted (their threads and the 50,000-task
   queue are not modelled).
3. The request takes a permit of the remoting `semaphoreAsync` (`clientAsyncSemaphoreValue`,
   65535; waiting at most the attempt's timeout) and is sent. A response future expires only when
   NettyRemotingClient's `scanResponseTable` (first after 3 s, then every 1 s) finds it older than
   its timeout + 1000 ms, so an ASYNC attempt times out 1 to 2 s after its budget.
4. Outcome (`sendMessageAsync` callbacks): a stored status completes the send; an error code
   fails it (`processSendResponse` throws; never retried); a transport failure (timeout, refused
   or lost connection, no permit) goes to `onExceptionImpl`, which retries while
   `++times <= retryTimesWhenSendAsyncFailed` and (5.x only) time remains: it picks a broker with
   `selectOneMessageQueue(topicPublishInfo, failedBroker)` (fault tolerance applies; the same
   broker for selector sends) and re-sends the **same request**, with its original queue id, to
   that broker's master with the remaining time. 5.x does not retry a RemotingTooMuchRequest
   (no permit and no time left). 4.x retries even without time left: the request is then refused
   at once by `invokeAsync` ("call_timeout") until the retries run out.
5. `updateFaultItem`: after the request is issued (latency ~0, no isolation: in 4.x this makes an
   isolated broker available again), and from the callback with the attempt's latency (isolation
   on every failure).

The send's latency (RT) runs from the send() call to the callback, as RocketMQ's benchmark
measures it. Simplified: the thread-local index is the producer's one index; the sender, callback
and remoting threads are not a bottleneck.
"""

from __future__ import annotations

from typing import Any

from models.coverage_points import COV_ASYNC_BACKPRESSURE_REJECTED, COV_SEND_RETRIED_OTHER_BROKER
from models.message import Message, MessageQueue
from models.producer.config import (
    MIB,
    SCAN_RESPONSE_TABLE_INITIAL_DELAY_US,
    SCAN_RESPONSE_TABLE_PERIOD_US,
    SCAN_RESPONSE_TABLE_SLACK_US,
    SEMAPHORE_ASYNC_NUM_MIN,
)
from models.producer.semaphore import Semaphore
from models.protocol import SEND_STATUS_BY_CODE, SendBatchMessage, new_send_message
from sim.node import CONNECT_FAILED


class AsyncSend:
    """One ASYNC send() in flight (the callback's state)."""

    __slots__ = ("msg", "info", "queue_id", "request", "times", "attempts", "num_acquired", "size_acquired",
                 "steered")

    def __init__(self, msg: Any) -> None:
        self.msg = msg
        self.info: Any = None  # TopicPublishInfo of a sendDefaultImpl send; None for a selector send
        self.queue_id = -1
        self.request: Any = None
        self.times = 0  # onExceptionImpl's AtomicInteger
        self.attempts = 0  # requests issued (the record's `attempts`)
        self.num_acquired = self.size_acquired = False
        self.steered = 0


class AsyncSender:
    def __init__(self, producer: Any) -> None:
        self.p = p = producer
        self.node = node = producer.node
        self.cov = node.env.coverage  # rare-state counts (models/coverage_points.py)
        cfg = producer.cfg
        self.v5 = producer.v5
        self.backpressure = cfg.enable_backpressure_for_async_mode and producer.v5
        self.sem_num = Semaphore(node, max(cfg.back_pressure_for_async_send_num, SEMAPHORE_ASYNC_NUM_MIN))
        self.sem_size = Semaphore(node, max(cfg.back_pressure_for_async_send_size_bytes, MIB))
        self.sem_async = Semaphore(node, cfg.client_async_semaphore_value)
        self.retry_times = cfg.retry_times_when_send_async_failed
        self.timeout_us = p.timeout_us
        self.scan_origin_us = 0
        node.on_start(self._started)

    def _started(self) -> None:
        self.scan_origin_us = self.node.env._now  # NettyRemotingClient.start: the scan timer

    # --- send(msg, callback, timeout) -----------------------------------------------------------
    def send(self, msg: Any) -> None:
        s = AsyncSend(msg)
        if not self.backpressure:
            return self._run(s)
        return self._acquire(s, self.sem_num, 1, self._num_acquired)

    def _left_us(self, s: AsyncSend) -> int:
        return self.timeout_us - (self.node.env._now - s.msg.born_us)

    def _acquire(self, s: AsyncSend, semaphore: Semaphore, permits: int, then: Any) -> None:
        left = self._left_us(s)
        granted = semaphore.try_acquire(permits, left, then, s) if left > 0 else False
        if granted is not None:
            then(s, granted)

    def _num_acquired(self, s: AsyncSend, granted: bool) -> None:
        s.num_acquired = granted
        if not granted:
            self.cov[COV_ASYNC_BACKPRESSURE_REJECTED] += 1
            return self._fail(s, "backpressure_num", "")
        return self._acquire(s, self.sem_size, self._msg_len(s), self._size_acquired)

    def _size_acquired(self, s: AsyncSend, granted: bool) -> None:
        s.size_acquired = granted
        if not granted:
            self.cov[COV_ASYNC_BACKPRESSURE_REJECTED] += 1
            return self._fail(s, "backpressure_size", "")
        return self._run(s)

    @staticmethod
    def _msg_len(s: AsyncSend) -> int:
        return s.msg.body_bytes or 1

    def _run(self, s: AsyncSend) -> None:
        """The executor task: sendDefaultImpl / sendSelectImpl in ASYNC mode."""
        if self._left_us(s) <= 0:
            return self._fail(s, "async_call_timeout", "")
        if s.msg.body_bytes > self.p.max_message_size_bytes:
            return self._fail(s, "message_illegal", "")
        return self.p.find_route(s.msg, self._attempt, s)

    def _attempt(self, msg: Any, info: Any, s: AsyncSend) -> None:
        p, now = self.p, self.node.env._now
        default = p.selector is None
        if not default:
            mq = p.selector(info.message_queue_list, msg)
        elif p.fault_on:
            mq, s.steered = p.select_with_fault(info, None, False, now // 1000)
        else:
            mq = p.fault.select_one_message_queue(info, None, now // 1000)
        left = self._left_us(s)
        if left < 0:
            return self._fail(s, "call_timeout", "")
        addr = p.client.publish_addr.get(mq.broker_name)
        if addr is None:  # MQClientException in sendKernelImpl
            s.attempts = 1
            if default and p.fault_on:
                p.fault.update_fault_item(mq.broker_name, 0, not self.v5, now // 1000)
            return self._fail(s, "no_broker_address", mq.broker_name)
        s.info = info if default else None
        s.queue_id = mq.queue_id
        s.request = new_send_message((msg, mq.queue_id)) if type(msg) is Message else \
            SendBatchMessage(msg.msgs, mq.queue_id)
        self._send_message_async(s, addr, mq.broker_name, left)
        if default and p.fault_on:  # sendDefaultImpl: updateFaultItem once sendKernelImpl returned
            p.fault.update_fault_item(mq.broker_name, 0, False, now // 1000, True)
        return None

    # --- MQClientAPIImpl.sendMessageAsync -------------------------------------------------------
    def _send_message_async(self, s: AsyncSend, addr: str, broker: str, timeout_us: int) -> None:
        s.attempts += 1
        begin = self.node.env._now
        granted = self.sem_async.try_acquire(1, timeout_us, self._permit, s, addr, broker, timeout_us, begin)
        if granted is not None:
            self._permit(s, addr, broker, timeout_us, begin, granted)

    def _permit(self, s: AsyncSend, addr: str, broker: str, timeout_us: int, begin: int, granted: bool) -> None:
        if not granted:  # tryAcquire semaphore timeout / invoke too fast (no time left)
            cost = self.node.env._now - begin
            self._update_fault(broker, begin, True)
            return self._on_exception(s, broker, timeout_us - cost, "remoting_semaphore",
                                      not (self.v5 and timeout_us <= 0))
        self.node.rpc(addr, s.request, self._expiry_us(begin, timeout_us), self._on_response, s, broker,
                      timeout_us, begin)
        return None

    def _expiry_us(self, begin: int, timeout_us: int) -> int:
        """Delay until scanResponseTable expires a future sent at `begin` with `timeout_us`."""
        deadline = begin + max(timeout_us, 0) + SCAN_RESPONSE_TABLE_SLACK_US
        first = self.scan_origin_us + SCAN_RESPONSE_TABLE_INITIAL_DELAY_US
        ticks = max(0, -(-(deadline - first) // SCAN_RESPONSE_TABLE_PERIOD_US))
        return max(1, first + ticks * SCAN_RESPONSE_TABLE_PERIOD_US - self.node.env._now)

    def _on_response(self, s: AsyncSend, broker: str, timeout_us: int, begin: int, response: Any) -> None:
        self.sem_async.release(1)
        cost = self.node.env._now - begin
        if response is None or response is CONNECT_FAILED:  # operationFail (4.x: the response is null)
            self._update_fault(broker, begin, True)
            reason = "timeout" if response is None else "connect_failed"
            return self._on_exception(s, broker, timeout_us - cost, reason, True)
        status = SEND_STATUS_BY_CODE.get(response.code)
        if status is None:  # processSendResponse threw MQBrokerException: no retry
            self._update_fault(broker, begin, True)
            return self._on_exception(s, broker, timeout_us - cost, f"broker_code_{response.code}", False)
        self._update_fault(broker, begin, False)
        return self._complete(s, broker, status)

    def _on_exception(self, s: AsyncSend, broker: str, remaining_us: int, reason: str, need_retry: bool) -> None:
        """onExceptionImpl: retry on a broker chosen by the selection rules, else the callback fails."""
        s.times += 1
        if not (need_retry and s.times <= self.retry_times and (not self.v5 or remaining_us > 0)):
            return self._fail(s, reason, broker)
        p, now = self.p, self.node.env._now
        retry_broker = broker  # a selector send retries on the same broker
        if s.info is not None:
            if p.fault_on:
                mq, hit = p.select_with_fault(s.info, broker, False, now // 1000)
                s.steered += hit
            else:
                mq = p.fault.select_one_message_queue(s.info, broker, now // 1000)
            retry_broker = mq.broker_name
            if retry_broker != broker:
                self.cov[COV_SEND_RETRIED_OTHER_BROKER] += 1
        addr = p.client.publish_addr.get(retry_broker)
        if addr is None or remaining_us < 0:  # invokeAsync fails before sending (no address; 4.x no time)
            s.attempts += 1
            self._update_fault(retry_broker, now, True)
            return self._on_exception(s, retry_broker, remaining_us, "no_broker_address" if addr is None
                                      else "call_timeout", True)
        return self._send_message_async(s, addr, retry_broker, remaining_us)

    def _update_fault(self, broker: str, begin: int, isolation: bool) -> None:
        if self.p.fault_on:
            now = self.node.env._now
            self.p.fault.update_fault_item(broker, (now - begin) // 1000, isolation, now // 1000, True)

    # --- the callback ---------------------------------------------------------------------------
    def _release(self, s: AsyncSend) -> None:
        """BackpressureSendCallBack.semaphoreProcessor."""
        if s.size_acquired:
            self.sem_size.release(self._msg_len(s))
        if s.num_acquired:
            self.sem_num.release(1)

    def _complete(self, s: AsyncSend, broker: str, status: str) -> None:
        self._release(s)
        self.p.sent(s.msg, MessageQueue(s.msg.topic, broker, s.queue_id), s.attempts, status, s.steered)

    def _fail(self, s: AsyncSend, reason: str, broker: str) -> None:
        self._release(s)
        self.p.fail(s.msg, s.attempts, reason, broker, s.steered)
