"""store.TransientStorePool with CommitLog.CommitRealTimeService (`transientStorePoolEnable`).

With the pool, appends go to an off-heap write buffer (a DirectByteBuffer per mapped file),
not into the mmap; CommitRealTimeService moves them into the file channel — the page cache —
and only then are they readable (dispatch, pulls, HA) and flushable. Its loop (4.9.8 and 5.3.3
alike): use leastPages 0 if `commitCommitLogThoroughInterval` (200 ms) has passed since the
last commit that moved data, else `commitCommitLogLeastPages` (4); commit the file holding the
committed position; if anything moved, remember the time and wake the flush service; then
`waitForRunning(commitIntervalCommitLog)` (200 ms), which every put ends early (4.x always,
5.x with `wakeCommitWhenPutMessage`, default true). So under load the buffer holds less than 4
pages, and a trickle waits up to ~200 ms.

What a crash destroys (CommitLog.lose_write_buffer): the buffer is process memory, so a *process
crash* loses everything not yet committed — unlike without the pool, where a kill -9 loses
nothing — and a power loss loses everything not yet flushed, as always.

Only ASYNC_FLUSH masters use the pool (MessageStoreConfig.isTransientStorePoolEnable in 4.9.8;
DefaultMessageStore.isTransientStorePoolEnable in 5.3.3 drops the flush-type condition, but a
SYNC_FLUSH put never waits on the commit there either); slaves never do.

Simplified: a wake-up runs the commit at once (the commit is a memory copy); the pool's buffer
count (`transientStorePoolSize`, 5) never runs out; `isTransientStorePoolDeficient` is never true.
"""

from __future__ import annotations

from typing import Any

from models.broker.commit_log import CommitLog
from models.broker.config import OS_PAGE_SIZE_BYTES
from sim.env import ms


class CommitRealTimeService:
    def __init__(self, log: CommitLog, wake_on_put: bool, on_commit: Any) -> None:
        self.log = log
        self.node = log.node
        cfg = log.cfg
        self.interval_us = ms(cfg.commit_interval_commit_log_ms)
        self.thorough_us = ms(cfg.commit_commit_log_thorough_interval_ms)
        self.least_pages = cfg.commit_commit_log_least_pages
        self.on_commit = on_commit  # wake the flush service and readers
        self.last_commit_us = -self.thorough_us
        self.deadline_us = 0
        self.timer_armed = False
        if wake_on_put:
            log.set_put_hook(self.wakeup)
        self.node.on_start(self._start)
        self.node.on_crash(self._stop)

    def _start(self) -> None:
        self.last_commit_us = -self.thorough_us
        self.wakeup()

    def _stop(self) -> None:
        self.timer_armed = False

    def wakeup(self) -> None:
        """One round of the loop; the wait that follows ends at the next wake-up or timeout."""
        now = self.node.env._now
        least = self.least_pages
        if now >= self.last_commit_us + self.thorough_us:
            self.last_commit_us = now
            least = 0
        if self.commit(least):
            self.last_commit_us = now
            self.on_commit()
        self.deadline_us = now + self.interval_us
        if not self.timer_armed:
            self.timer_armed = True
            self.node.call_later(self.interval_us, self._timeout)

    def _timeout(self) -> None:
        now = self.node.env._now
        if now < self.deadline_us:
            self.node.call_later(self.deadline_us - now, self._timeout)
            return
        self.timer_armed = False
        self.wakeup()

    def commit(self, least_pages: int) -> bool:
        """MappedFileQueue.commit(leastPages): move the buffered bytes of the file holding the
        committed position into the file channel; True if anything moved."""
        log = self.log
        committed = log.committed_position
        target = min(log.wrote_position, log.file_end(committed))
        if target <= committed:
            return False
        full = target == log.file_end(committed)
        pages = target // OS_PAGE_SIZE_BYTES - committed // OS_PAGE_SIZE_BYTES
        if not full and least_pages > 0 and pages < least_pages:
            return False
        log.committed_position = target
        return True
