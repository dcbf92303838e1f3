"""The broker's send thread pool, the CommitLog put lock, and broker.latency.BrokerFastFailure.

SEND_MESSAGE requests run on `sendMessageExecutor`: `sendMessageThreadPoolNums` threads
(min(cores, 4)) over a queue of `sendThreadPoolQueueCapacity` (10000). A thread's put holds the
CommitLog put lock — one put at a time — for `send_put_time_ms` (a model parameter, times the
disk's slow factor: mmap writes stall on a slow disk); the lock's hold start is
`beginTimeInLock`, and the page cache counts as busy (`isOSPageCacheBusy`) while one put has
held it longer than `osPageCacheBusyTimeOutMills` (1 s). Busy answers, all SYSTEM_BUSY (code 2,
retried by 5.3.0+ producers, thrown to the caller by older ones), traced `broker.busy`:

- `[REJECTREQUEST]`: a new request while the page cache is busy (SendMessageProcessor.rejectRequest
  at the remoting layer);
- `[OVERLOAD]`: the queue is full (RejectedExecutionException);
- `[PC_SYNCHRONIZED]`: a thread takes a request while the page cache is busy (the store's
  checkBeforePutMessage → OS_PAGE_CACHE_BUSY);
- `[PCBUSY_CLEAN_QUEUE]`, `[TIMEOUT_CLEAN_QUEUE]`: BrokerFastFailure (`brokerFastFailureEnable`),
  every 10 ms (first after 1 s), empties the queue while the page cache is busy, then answers
  every request that has waited in it `waitTimeMillsInSendQueue` (200 ms) or longer.

With `send_put_time_ms` 0 (the default) a send costs no broker time and none of this is
built: the broker handles SEND_MESSAGE directly (broker.py). Pull requests run on their own
pool, which is not modelled (pulls cost no broker time).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from models.broker.config import FAST_FAILURE_INITIAL_DELAY_US, FAST_FAILURE_PERIOD_US, BrokerConfig, MessageStoreConfig
from models.coverage_points import COV_BROKER_BUSY_REJECTED
from models.protocol import SYSTEM_BUSY, SendBatchMessage, SendMessage, SendResponse
from models.records import BROKER_BUSY
from sim.env import ms

REJECT_REQUEST = "REJECTREQUEST"
OVERLOAD = "OVERLOAD"
PC_SYNCHRONIZED = "PC_SYNCHRONIZED"
PCBUSY_CLEAN_QUEUE = "PCBUSY_CLEAN_QUEUE"
TIMEOUT_CLEAN_QUEUE = "TIMEOUT_CLEAN_QUEUE"


class SendMessageExecutor:
    def __init__(self, node: Any, cfg: BrokerConfig, store_cfg: MessageStoreConfig,
                 process: Callable[[str, int, SendMessage | SendBatchMessage], None]) -> None:
        self.node = node
        self.process = process  # SendMessageProcessor: append, then answer (or wait for flush/HA)
        self.threads = cfg.send_message_thread_pool_nums
        self.free = self.threads
        self.capacity = cfg.send_thread_pool_queue_capacity
        self.queue: deque = deque()  # (queued µs, src, req_id, request)
        self.lock_waiters: deque = deque()  # threads blocked on the put lock
        self.lock_since_us = -1  # beginTimeInLock of the put holding the lock (-1: free)
        self.busy_timeout_us = ms(store_cfg.os_page_cache_busy_time_out_mills)
        self.wait_in_queue_us = ms(cfg.wait_time_mills_in_send_queue)
        self.fast_failure = cfg.broker_fast_failure_enable
        self.put_time = cfg.send_put_time_ms
        self.stream = node.env.rng.stream(f"{node.name}.send_put")
        self.scan_armed = False
        self.started_us = 0
        node.on_crash(self._reset)
        node.on_start(self._started)

    def _reset(self) -> None:
        self.free = self.threads
        self.queue.clear()
        self.lock_waiters.clear()
        self.lock_since_us = -1
        self.scan_armed = False

    def _started(self) -> None:
        self.started_us = self.node.env._now

    def page_cache_busy(self) -> bool:
        """DefaultMessageStore.isOSPageCacheBusy."""
        since = self.lock_since_us
        return since >= 0 and self.node.env._now - since > self.busy_timeout_us

    def _busy(self, src: str, req_id: int, req: SendMessage | SendBatchMessage, reason: str) -> None:
        self.node.env.coverage[COV_BROKER_BUSY_REJECTED] += 1
        msg = req.msgs[0] if isinstance(req, SendBatchMessage) else req.msg  # a batch: its first message
        self.node.trace(BROKER_BUSY, msg.msg_id, reason)
        self.node.reply(src, req_id, SendResponse(SYSTEM_BUSY))

    # --- NettyRemotingAbstract.processRequestCommand ------------------------------------------
    def submit(self, src: str, req_id: int, req: SendMessage | SendBatchMessage) -> None:
        if self.page_cache_busy():
            self._busy(src, req_id, req, REJECT_REQUEST)
        elif self.free:
            self._run(src, req_id, req)
        elif len(self.queue) < self.capacity:
            self.queue.append((self.node.env._now, src, req_id, req))
            self._arm_scan()
        else:
            self._busy(src, req_id, req, OVERLOAD)

    def _run(self, src: str, req_id: int, req: SendMessage | SendBatchMessage) -> None:
        """A thread takes the request."""
        self.free -= 1
        if self.page_cache_busy():
            self._busy(src, req_id, req, PC_SYNCHRONIZED)
            self._thread_done()
        elif self.lock_since_us < 0:
            self._lock(src, req_id, req)
        else:
            self.lock_waiters.append((src, req_id, req))

    def _lock(self, src: str, req_id: int, req: SendMessage | SendBatchMessage) -> None:
        self.lock_since_us = self.node.env._now
        hold = int(self.put_time.sample_us(self.stream) * self.node.disk.slow_factor)
        self.node.call_later(hold, self._unlock, src, req_id, req)

    def _unlock(self, src: str, req_id: int, req: SendMessage | SendBatchMessage) -> None:
        self.process(src, req_id, req)
        self.lock_since_us = -1
        if self.lock_waiters:
            self._lock(*self.lock_waiters.popleft())
        self._thread_done()

    def _thread_done(self) -> None:
        self.free += 1
        if self.queue:
            _t, src, req_id, req = self.queue.popleft()
            self._run(src, req_id, req)

    # --- BrokerFastFailure.cleanExpiredRequest ---------------------------------------------
    def _arm_scan(self) -> None:
        if self.fast_failure and not self.scan_armed:
            self.scan_armed = True
            now = self.node.env._now
            first = self.started_us + FAST_FAILURE_INITIAL_DELAY_US
            wait = first - now if now < first else -(now - first) % FAST_FAILURE_PERIOD_US
            self.node.call_later(wait if wait > 0 else FAST_FAILURE_PERIOD_US, self._scan)

    def _scan(self) -> None:
        self.scan_armed = False
        queue, now = self.queue, self.node.env._now
        while queue and self.page_cache_busy():
            _t, src, req_id, req = queue.popleft()
            self._busy(src, req_id, req, PCBUSY_CLEAN_QUEUE)
        while queue and now - queue[0][0] >= self.wait_in_queue_us:
            _t, src, req_id, req = queue.popleft()
            self._busy(src, req_id, req, TIMEOUT_CLEAN_QUEUE)
        if queue:
            self._arm_scan()
