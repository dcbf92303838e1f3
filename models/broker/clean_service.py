"""Retention and disk pressure: DefaultMessageStore.CleanCommitLogService and CleanConsumeQueueService (5.3.3).

One task every `cleanResourceInterval` (10 s) at a fixed rate, the first 60 s after the store
starts (`DefaultMessageStore.addScheduleTask`, scheduleAtFixedRate), on masters and slaves alike:
1. `isSpaceToDelete`: the disk's used share (`DiskConfig.size_bytes`; the CommitLog bytes still
   held, from its first file to the write position, plus 20 bytes a ConsumeQueue unit) above
   `diskSpaceWarningLevelRatio` (90 %, clamped to 35..90 as Java does) marks the store disk-full
   (`RunningFlags.getAndMakeDiskFull`: every producer send is refused with SERVICE_NOT_AVAILABLE
   until a later run finds it below) and cleans at once; above `diskSpaceCleanForciblyRatio` (85 %,
   clamped to 30..85) cleans at once; otherwise the store is marked OK, and above
   `diskMaxUsedSpaceRatio` (75 %) expired files are deleted whatever the hour.
2. `isTimeToDelete`: the hour of the simulated day is one of `deleteWhen` ("04"; run time 0 is
   00:00:00 of day 0).
3. If either: `CommitLog.deleteExpiredFile` → `MappedFileQueue.deleteExpiredFileByTime`: from the
   oldest file, never the last one, each file whose last write is `fileReservedTime` (72 h) old —
   or any file, when cleaning at once (`cleanFileForciblyEnable`) — is deleted, at most
   `deleteFileBatchMax` (10) a run, `deleteCommitLogFilesInterval` (100 ms) apart; the first
   file not yet expired stops the run (files are deleted in order only).
4. CleanConsumeQueueService: each ConsumeQueue's units pointing below the CommitLog's new first
   offset go (`ConsumeQueue.deleteExpiredFile` + `correctMinOffset`): its min offset moves up,
   and a pull below it answers OFFSET_TOO_SMALL → PULL_OFFSET_MOVED, which makes a push consumer
   jump forward (models/consumer/push_consumer.py).

Ground truth for the checkers: a `commit_log.expired_deleted` record per deleted file, and on a
master a `commit_log.destroyed` fact (fault `expired`) for every deleted message that some group
had not consumed as far as this broker knows: a queue offset at or past the lowest offset a group
committed for its queue here, or a queue no group committed on, or a delayed message not yet
delivered (SCHEDULE_TOPIC_XXXX). A lost message with that fact has the cause
`expired_file_deleted` (analysis/checkers/metrics.py). Deletions pay no file-system time.

Simplified: a file is destroyed at once (`DefaultMappedFile.destroy` waits up to
`destroyMapedFileIntervalForcibly`, 120 s, for readers still holding it; here none do); the
last-modified time of a file is the store time of its last record; one disk partition holds the
CommitLog and the ConsumeQueues, and nothing else fills it (no index files, no checkpoint); only
producer sends (SEND_MESSAGE, SEND_BATCH_MESSAGE, half messages) are refused on a full disk:
the broker's own puts (delayed deliveries, send-backs, transaction ops) go on, and so does a
slave's replication; a manual deletion (`executeDeleteFilesManually`) is not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.config import MessageStoreConfig, clamp_ratio, delete_hours  # re-exported (the lint reads config's)
from models.broker.consume_queue import CQ_UNIT_BYTES
from models.broker.mapped_file import F_MSG_ID, F_QUEUE_ID, F_QUEUE_OFFSET, F_STORE_US, F_TOPIC, MappedFile
from models.coverage_points import COV_COMMIT_LOG_FILE_DELETED_FORCIBLY, COV_COMMIT_LOG_FILE_EXPIRED
from models.message import PROPERTY_REAL_TOPIC, SCHEDULE_TOPIC
from models.records import BROKER_DISK_STATE, COMMIT_LOG_DESTROYED, COMMIT_LOG_EXPIRED_DELETED
from sim.disk import DiskConfig
from sim.env import ms

FIRST_RUN_DELAY_US = 60_000_000  # DefaultMessageStore.addScheduleTask: initialDelay 1000 * 60
HOUR_US = 3_600_000_000
SYSTEM_TOPIC_PREFIX = "RMQ_SYS_"  # half and op topics: judged by the transaction checker


class CleanService:
    """CleanCommitLogService + CleanConsumeQueueService of one broker's store (module docstring)."""

    def __init__(self, broker: Any, cfg: MessageStoreConfig, disk: DiskConfig, master: bool,
                 set_disk_full: Callable[[bool], None]) -> None:
        self.broker, self.cfg, self.master = broker, cfg, master
        self.node = broker.node
        self.size_bytes = disk.size_bytes
        self.set_disk_full = set_disk_full
        self.disk_full = False
        self.warning = clamp_ratio(cfg.disk_space_warning_level_ratio, 35, 90)
        self.forcibly = clamp_ratio(cfg.disk_space_clean_forcibly_ratio, 30, 85)
        self.max_used = cfg.disk_max_used_space_ratio / 100.0
        self.hours = delete_hours(cfg)
        self.reserved_us = ms(cfg.file_reserved_time_ms)
        self.node.add_service(self.loop)

    def loop(self) -> Generator[Any, Any, None]:
        """scheduleAtFixedRate: runs at start + 60 s + k × interval; one that ends late (its 100 ms
        pauses between deletions) is followed at once by the next due one."""
        self._mark(False)  # a new process: RunningFlags start clear
        due_us = self.node.env._now + FIRST_RUN_DELAY_US
        while True:
            if due_us > self.node.env._now:
                yield self.node.sleep_us(due_us - self.node.env._now)
            yield from self.run_once()
            due_us += ms(self.cfg.clean_resource_interval_ms)

    def used_ratio(self) -> float:
        """The disk's used share (module docstring), 0 without a size."""
        if self.size_bytes is None:
            return 0.0
        log = self.broker.store.commit_log
        files = log.files.files
        held = log.wrote_position - (files[0].file_from_offset if files else log.wrote_position)
        units = sum(cq.max_offset - cq.min_offset for cq in self.broker.store.reput.queues.values())
        return (held + units * CQ_UNIT_BYTES) / self.size_bytes

    def run_once(self) -> Generator[Any, Any, None]:
        """One run of CleanCommitLogService.deleteExpiredFiles, then CleanConsumeQueueService."""
        ratio = self.used_ratio()
        at_once = ratio > self.forcibly
        if ratio > self.warning:
            self._mark(True)
        elif not at_once:
            self._mark(False)
        time_up = (self.node.env._now // HOUR_US) % 24 in self.hours
        if not (time_up or at_once or ratio > self.max_used):
            return
        at_once = at_once and self.cfg.clean_file_forcibly_enable
        deleted = 0
        files = self.broker.store.commit_log.files.files
        while len(files) > 1 and deleted < self.cfg.delete_file_batch_max:
            mapped = files[0]
            expired = not len(mapped) or mapped.record(len(mapped) - 1)[F_STORE_US] + self.reserved_us <= \
                self.node.env._now
            if not (expired or at_once):
                break  # deleteExpiredFileByTime: never past a file not yet expired
            self.broker.cov[COV_COMMIT_LOG_FILE_EXPIRED if expired else COV_COMMIT_LOG_FILE_DELETED_FORCIBLY] += 1
            self._delete_first(forced=not expired)
            deleted += 1
            if deleted < self.cfg.delete_file_batch_max and len(files) > 1 and self.cfg.delete_commit_log_files_interval_ms:
                yield self.node.sleep_us(ms(self.cfg.delete_commit_log_files_interval_ms))
        if deleted:
            self.correct_min_offsets()

    def _mark(self, full: bool) -> None:
        if full != self.disk_full:
            self.disk_full = full
            self.set_disk_full(full)
            self.node.trace(BROKER_DISK_STATE, full, int(self.used_ratio() * 100))

    def _delete_first(self, forced: bool) -> None:
        """Destroy the CommitLog's first file: its unconsumed messages' facts, then the file."""
        log = self.broker.store.commit_log
        mapped = log.files.files[0]
        unconsumed = self._expired_facts(mapped) if self.master else 0
        del log.files.files[0]
        for cq in self.broker.store.reput.queues.values():
            if cq.hint_file is mapped:
                cq.hint_phys, cq.hint_file, cq.hint_index = -1, None, -1
        self.node.trace(COMMIT_LOG_EXPIRED_DELETED, mapped.file_from_offset, len(mapped), forced, unconsumed)

    def _expired_facts(self, mapped: MappedFile) -> int:
        """`commit_log.destroyed` (fault `expired`) for each message of `mapped` some group had not
        consumed as far as this broker knows (module docstring); returns how many."""
        lowest: dict[tuple[str, int], int] = {}
        for (_group, topic, queue_id), offset in self.broker.offsets.table.items():
            key = (topic, queue_id)
            lowest[key] = min(lowest.get(key, offset), offset)
        log, count = self.broker.store.commit_log, 0
        for i in range(len(mapped)):
            record = mapped.record(i)
            topic = log.topics[record[F_TOPIC]]
            if topic.startswith(SYSTEM_TOPIC_PREFIX):
                continue
            queue_id, queue_offset = record[F_QUEUE_ID], record[F_QUEUE_OFFSET]
            if topic == SCHEDULE_TOPIC:
                topic = mapped.props.get(i, {}).get(PROPERTY_REAL_TOPIC, topic)
            elif queue_offset < lowest.get((topic, queue_id), -1):
                continue  # every group that committed on this queue is past it (none committed: -1)
            count += 1
            self.node.trace(COMMIT_LOG_DESTROYED, record[F_MSG_ID], topic, queue_id, queue_offset, "expired",
                            log.replicas, log.replica_has(mapped.offset(i), record[F_MSG_ID]))
        return count

    def correct_min_offsets(self) -> None:
        """CleanConsumeQueueService: drop each queue's units below the CommitLog's first offset."""
        files = self.broker.store.commit_log.files.files
        if not files:
            return
        first = files[0].file_from_offset
        for cq in self.broker.store.reput.queues.values():
            lo, hi = 0, cq.max_offset - cq.min_offset
            while lo < hi:  # units are in CommitLog order: the first at or past `first`
                mid = (lo + hi) // 2
                if cq.unit(cq.min_offset + mid)[0] < first:
                    lo = mid + 1
                else:
                    hi = mid
            if lo:
                cq.drop_head(lo)
