"""store.DefaultMessageStore: the read side (getMessage) over CommitLog + ConsumeQueues.

`get_message` returns a GetMessageStatus with the next begin offset as in the real table
(OFFSET_TOO_SMALL → min, OFFSET_OVERFLOW_BADLY → max, FOUND → offset + units scanned). A batch
follows `isTheBatchFull`: the first message is always taken; then at most `maxMsgNums`, and the
in-memory (32 messages / 256 KiB) or on-disk (8 / 64 KiB) transfer limits, "in memory" meaning
within 40 % of physical RAM of the CommitLog end.

Simplified: tag filtering compares tag strings (the real broker compares hash codes on the
ConsumeQueue and the client re-checks strings, so the result is the same barring collisions).
"""

from __future__ import annotations

from typing import Any

from models.broker.commit_log import R_MSG, R_PHYS, R_SIZE, CommitLog
from models.broker.config import MAX_SCAN_UNITS, MessageStoreConfig
from models.broker.consume_queue import ReputMessageService

FOUND = "FOUND"
NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"


class MessageStore:
    def __init__(self, node: Any, cfg: MessageStoreConfig) -> None:
        self.cfg = cfg
        self.commit_log = CommitLog(node, cfg)
        self.reput = ReputMessageService(node, self.commit_log, cfg.flush_disk_type)
        self.memory_window_bytes = cfg.physical_memory_bytes * cfg.access_message_in_memory_max_ratio // 100

    @property
    def queues(self) -> dict[tuple[str, int], list[tuple]]:
        return self.reput.queues

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.reput.queues.get((topic, queue_id))
        return len(cq) if cq else 0

    def head_in_memory(self, topic: str, queue_id: int) -> bool:
        """5.1.0+ queryConsumerOffset rule: the unit at offset 0 exists and is page-cache hot."""
        cq = self.reput.queues.get((topic, queue_id))
        if not cq:
            return False
        return self.commit_log.wrote_position - cq[0][R_PHYS] <= self.memory_window_bytes

    def get_message(self, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tags: frozenset | None) -> tuple[str, int, int, list]:
        """Returns (status, next_begin_offset, max_offset, records)."""
        cq = self.reput.queues.get((topic, queue_id))
        if cq is None:
            return NO_MATCHED_LOGIC_QUEUE, 0, 0, []
        max_offset = len(cq)
        if max_offset == 0:
            return NO_MESSAGE_IN_QUEUE, 0, 0, []
        if offset < 0:
            return OFFSET_TOO_SMALL, 0, max_offset, []
        if offset == max_offset:
            return OFFSET_OVERFLOW_ONE, offset, max_offset, []
        if offset > max_offset:
            return OFFSET_OVERFLOW_BADLY, max_offset, max_offset, []
        found = self._scan(cq, offset, min(max_offset, offset + MAX_SCAN_UNITS), max_msg_nums, tags)
        records, next_offset = found
        return (FOUND if records else NO_MATCHED_MESSAGE), next_offset, max_offset, records

    def _scan(self, cq: list[tuple], start: int, stop: int, max_msg_nums: int,
              tags: frozenset | None) -> tuple[list, int]:
        cfg, end = self.cfg, self.commit_log.wrote_position
        window = self.memory_window_bytes
        records: list[tuple] = []
        total = 0
        i = start
        while i < stop:
            record = cq[i]
            size = record[R_SIZE]
            if records:
                if len(records) >= max_msg_nums:
                    break
                if end - record[R_PHYS] <= window:
                    if total + size > cfg.max_transfer_bytes_on_message_in_memory or \
                            len(records) >= cfg.max_transfer_count_on_message_in_memory:
                        break
                elif total + size > cfg.max_transfer_bytes_on_message_in_disk or \
                        len(records) >= cfg.max_transfer_count_on_message_in_disk:
                    break
            i += 1
            if tags is not None and record[R_MSG].tags not in tags:
                continue
            records.append(record)
            total += size
        return records, i
