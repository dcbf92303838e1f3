"""CommitLog flush services: FlushRealTimeService (ASYNC_FLUSH) and GroupCommitService (SYNC_FLUSH).

FlushRealTimeService's loop (4.9.8 and 5.3.3 alike): at the top of each round, use leastPages
0 if `flushCommitLogThoroughInterval` (10 s) has passed since the last thorough round, else
`flushCommitLogLeastPages` (4); then wait `flushIntervalCommitLog` (500 ms); then force the
file holding the flushed position if that many whole pages are dirty. How it waits is
`flushCommitLogTimed`:

- true (the default in 4.9.8 and 5.3.3; it became so in 4.9.1): `Thread.sleep(500)`, nothing
  wakes it, so under load the flush trails the writes by up to one interval plus the fsync;
- false (the default up to 4.9.0): `waitForRunning(500)`, which a wake-up ends early. 4.x wakes
  the flush thread on every put (`CommitLog.handleDiskFlush`), so under load it flushes as soon
  as 4 pages are dirty; 5.x wakes it on puts only with `wakeFlushWhenPutMessage` (default
  false). With the transient store pool, every commit wakes it (both versions).

GroupCommitService: a put with WAIT=true queues `(next_offset, deadline, callback)`; the service
swaps its request list, forces the CommitLog (one fsync covers every request taken: group
commit) and completes each request PUT_OK, or FLUSH_DISK_TIMEOUT when `syncFlushTimeout` passes
first (FlushDiskWatcher). With no request it still flushes everything every 10 ms, which is how
WAIT=false puts and an HA slave's appends reach the disk (`wakeup`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.commit_log import FLUSH_DISK_TIMEOUT, PUT_OK, CommitLog
from models.broker.config import GROUP_COMMIT_WAIT_US
from models.coverage_points import COV_FLUSH_DISK_TIMEOUT
from sim.env import ms


class FlushRealTimeService:
    """CommitLog.FlushRealTimeService with flushCommitLogTimed=true (module docstring)."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log

    def run(self) -> Generator[Any, Any, None]:
        log, node, cfg = self.log, self.log.node, self.log.cfg
        last_thorough_us = -ms(cfg.flush_commit_log_thorough_interval_ms)  # lastFlushTimestamp = 0
        while True:
            least_pages = cfg.flush_commit_log_least_pages
            if node.env.now >= last_thorough_us + ms(cfg.flush_commit_log_thorough_interval_ms):
                last_thorough_us = node.env.now
                least_pages = 0
            yield node.sleep_us(ms(cfg.flush_interval_commit_log_ms))
            nbytes = log.flush(least_pages)
            if nbytes:
                target = log.flushed_position + nbytes
                yield node.sleep_us(node.disk.fsync_duration_us(nbytes))
                log.mark_flushed(target)


class WakeableFlushService:
    """CommitLog.FlushRealTimeService with flushCommitLogTimed=false: `waitForRunning(interval)`
    ended early by `wakeup()` (a put or a commit). A wake-up during a flush is remembered
    (ServiceThread.hasNotified) and makes the next wait return at once. The wait's timeout is
    one re-armed timer (its deadline moves with each wait), so a wake-up per put costs no event."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.node = log.node
        self.cfg = log.cfg
        self.interval_us = ms(self.cfg.flush_interval_commit_log_ms)
        self.thorough_us = ms(self.cfg.flush_commit_log_thorough_interval_ms)
        self.last_thorough_us = -self.thorough_us
        self.least_pages = 0
        self.waiting = False
        self.notified = False
        self.deadline_us = 0
        self.timer_armed = False
        self.node.on_start(self._round)
        self.node.on_crash(self._stop)

    def _stop(self) -> None:
        self.waiting = self.notified = self.timer_armed = False
        self.last_thorough_us = -self.thorough_us

    def _round(self) -> None:
        """Top of the loop: choose leastPages, then waitForRunning(interval)."""
        now = self.node.env._now
        self.least_pages = self.cfg.flush_commit_log_least_pages
        if now >= self.last_thorough_us + self.thorough_us:
            self.last_thorough_us = now
            self.least_pages = 0
        if self.notified:
            self.notified = False
            self._flush()
            return
        self.waiting = True
        self.deadline_us = now + self.interval_us
        if not self.timer_armed:
            self.timer_armed = True
            self.node.call_later(self.interval_us, self._timeout)

    def _timeout(self) -> None:
        now = self.node.env._now
        if not self.waiting:
            self.timer_armed = False
        elif now < self.deadline_us:
            self.node.call_later(self.deadline_us - now, self._timeout)
        else:
            self.timer_armed = False
            self.waiting = False
            self._flush()

    def wakeup(self) -> None:
        if self.waiting:
            self.waiting = False
            self._flush()
        else:
            self.notified = True

    def _flush(self) -> None:
        nbytes = self.log.flush(self.least_pages)
        if not nbytes:
            self._round()
            return
        target = self.log.flushed_position + nbytes
        self.node.call_later(self.node.disk.fsync_duration_us(nbytes), self._flushed, target)

    def _flushed(self, target: int) -> None:
        self.log.mark_flushed(target)
        self._round()


class GroupCommitService:
    """CommitLog.GroupCommitService + FlushDiskWatcher (SYNC_FLUSH), module docstring."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        self.node = log.node
        self.cov = log.node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.requests: list[list] = []  # [next_offset, deadline_us, callback, done]
        self.in_flight: list[list] = []  # requests covered by the fsync under way
        self.flushing = False
        self.idle_flush = False  # data appended without a request waits for the 10 ms round
        self.watcher_armed = False
        self.node.on_crash(self._reset)

    def _reset(self) -> None:
        self.requests.clear()
        self.in_flight = []
        self.flushing = False
        self.idle_flush = False
        self.watcher_armed = False

    def put_request(self, next_offset: int, callback: Callable[[str], None]) -> None:
        deadline = self.node.env._now + ms(self.log.cfg.sync_flush_timeout_ms)
        self.requests.append([next_offset, deadline, callback, False])
        if not self.flushing:
            self.flushing = True
            self.node.call_later(0, self._round)
        if not self.watcher_armed:
            self.watcher_armed = True
            self.node.call_later(deadline - self.node.env._now, self._watch)

    def wakeup(self) -> None:
        """Data appended without a request (WAIT=false, an HA slave): flushed within 10 ms."""
        if not self.idle_flush:
            self.idle_flush = True
            self.node.call_later(GROUP_COMMIT_WAIT_US, self._idle_round)

    def _idle_round(self) -> None:
        self.idle_flush = False
        if self.flushing:  # a flush is under way: look again at the next 10 ms round
            self.wakeup()
            return
        self.flushing = True
        self._round(idle=True)

    def _round(self, idle: bool = False) -> None:
        taken, self.requests = self.requests, []
        if not taken and not idle:
            self.flushing = False
            return
        nbytes = self.log.flush(0)
        if nbytes == 0:
            self._complete(taken)
            self.node.call_later(GROUP_COMMIT_WAIT_US if self.requests else 0, self._round)
            return
        target = self.log.flushed_position + nbytes
        self.in_flight = taken
        self.node.call_later(self.node.disk.fsync_duration_us(nbytes), self._flushed, target, taken)

    def _flushed(self, target: int, taken: list[list]) -> None:
        self.in_flight = []
        self.log.mark_flushed(target)
        pending = [r for r in taken if r[0] > self.log.flushed_position and not r[3]]
        if pending:  # the data spans another mapped file: flush again (5.x retries up to 1000×)
            self.requests = pending + self.requests
        self._complete([r for r in taken if r[0] <= self.log.flushed_position])
        self._round()

    def _complete(self, requests: list[list]) -> None:
        for request in requests:
            if not request[3]:
                request[3] = True
                request[2](PUT_OK if request[0] <= self.log.flushed_position else FLUSH_DISK_TIMEOUT)

    def _watch(self) -> None:
        """FlushDiskWatcher: complete overdue requests with FLUSH_DISK_TIMEOUT."""
        now = self.node.env._now
        pending = [r for r in self.requests + self.in_flight if not r[3]]
        for request in pending:
            if request[1] <= now:
                self.cov[COV_FLUSH_DISK_TIMEOUT] += 1
                request[3] = True
                request[2](FLUSH_DISK_TIMEOUT)
        upcoming = [r[1] for r in pending if not r[3]]
        self.watcher_armed = bool(upcoming)
        if upcoming:
            self.node.call_later(min(upcoming) - now, self._watch)


def make_flush_service(log: CommitLog, sync_flush: bool, timed: bool) -> Any:
    """The CommitLog's flush service for its configuration (registered with the node)."""
    if sync_flush:
        log.group_commit = GroupCommitService(log)
        return log.group_commit
    if timed:
        service = FlushRealTimeService(log)
        log.node.add_service(service.run)
        return service
    return WakeableFlushService(log)
