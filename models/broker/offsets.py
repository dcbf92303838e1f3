"""broker.offset.ConsumerOffsetManager: committed offsets per (group, topic, queue id).

Last writer wins (no monotonic check), from pulls carrying FLAG_COMMIT_OFFSET and from
UPDATE_CONSUMER_OFFSET. The table is persisted to `config/consumerOffset.json` every
`flushConsumerOffsetInterval` (first after 10 s); 5.x's ConfigManager.persist fsyncs the file,
so a crash or power loss rolls the table back to the last completed persist.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config import OFFSET_PERSIST_INITIAL_DELAY_US, BrokerConfig
from models.records import BROKER_OFFSET_ROLLED_BACK, CONSUMER_OFFSETS_PERSISTED
from sim.env import ms

ENTRY_JSON_BYTES = 48  # approximate JSON size of one table entry


class ConsumerOffsetManager:
    def __init__(self, node: Any, cfg: BrokerConfig) -> None:
        self.node = node
        self.cfg = cfg
        self.table: dict[tuple[str, str, int], int] = {}
        self.persisted: dict[tuple[str, str, int], int] = {}  # the file on disk
        self.before_crash: dict[tuple[str, str, int], int] = {}  # ground truth for the checkers only
        node.on_crash(self._crashed)
        node.on_start(self.load)
        node.add_service(self.run)

    def _crashed(self) -> None:
        self.before_crash = dict(self.table)
        self.table.clear()

    def load(self) -> None:
        """Start-up: the table is the file's. Every entry that goes back (or vanishes) against
        the table the crash destroyed is recorded (`broker.offset_rolled_back`)."""
        self.table.clear()
        self.table.update(self.persisted)
        for (group, topic, queue_id), offset in self.before_crash.items():
            loaded = self.persisted.get((group, topic, queue_id), -1)
            if loaded < offset:
                self.node.trace(BROKER_OFFSET_ROLLED_BACK, group, topic, queue_id, offset, loaded)
        self.before_crash = {}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)

    def run(self) -> Generator:
        node = self.node
        yield node.sleep_us(OFFSET_PERSIST_INITIAL_DELAY_US)
        while True:
            snapshot = dict(self.table)
            yield node.sleep_us(node.disk.write_duration_us(ENTRY_JSON_BYTES * len(snapshot)))
            self.persisted = snapshot
            node.trace(CONSUMER_OFFSETS_PERSISTED, len(snapshot))
            yield node.sleep_us(ms(self.cfg.flush_consumer_offset_interval_ms))
