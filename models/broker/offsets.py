"""broker.offset.ConsumerOffsetManager: committed offsets per (group, topic, queue id).

Last writer wins (no monotonic check), from pulls carrying FLAG_COMMIT_OFFSET and from
UPDATE_CONSUMER_OFFSET. The table is persisted to `config/consumerOffset.json` every
`flushConsumerOffsetInterval` (first after 10 s) without fsync, the previous content kept as
`.bak` (config_file.py): a process crash rolls the table back to the last persist, a power loss
to what the kernel had written back (older still, or the `.bak`).

5.x server-side reset (`useServerSideResetOffset`, AdminBrokerProcessor.resetOffsetInner): a
reset writes the new offset into the table and into `reset`, which the next pull of the queue
takes (`take_reset`: answered OFFSET_RESET → PULL_OFFSET_MOVED) and which makes an
UPDATE_CONSUMER_OFFSET for the queue be ignored until then.

An HA slave copies the master's table (SlaveSynchronize.syncConsumerOffset: the master's
entries replace its own) and still accepts UPDATE_CONSUMER_OFFSET while the master is away;
those entries are overwritten by the next copy and never reach the master.

Ground truth for the `failover` duplicate cause (checkers only, not a RocketMQ structure): the
replicas of the broker group know each other (`peers`); a slave keeps the entries clients
committed on it (`client_commits`, dropped when SlaveSynchronize overwrites them). A
QUERY_CONSUMER_OFFSET answered below what another replica holds — a master's table (the one a
crash destroyed while it is down), or a slave's client commits — is recorded
(`broker.offset_behind_replica`, `behind_replica`): rare, one per queue start at most.
"""

# compiled with Cython: the C declarations of this module's classes are in offsets.pxd beside it

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config import OFFSET_PERSIST_INITIAL_DELAY_US, BrokerConfig
from models.broker.config_file import ConfigFile
from models.coverage_points import COV_BROKER_OFFSET_ROLLED_BACK, COV_OFFSET_ANSWER_BEHIND_REPLICA
from models.records import (
    BROKER_OFFSET_BEHIND_REPLICA,
    BROKER_OFFSET_COMMITTED,
    BROKER_OFFSET_FILE_WRITTEN,
    BROKER_OFFSET_LOADED,
    BROKER_OFFSET_ROLLED_BACK,
    CONSUMER_OFFSETS_LOADED,
    CONSUMER_OFFSETS_PERSISTED,
)
from models.version import V5
from sim.env import ms

CONSUMER_OFFSET_FILE = "config/consumerOffset.json"


class ConsumerOffsetManager:
    def __init__(self, node: Any, cfg: BrokerConfig, version: str = V5, slave: bool = False) -> None:
        self.node = node
        self.cov: list[int] = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.cfg = cfg
        self.table: dict[tuple[str, str, int], int] = {}
        self.reset: dict[tuple[str, str, int], int] = {}  # resetOffsetTable (heap)
        self.file = ConfigFile(node, CONSUMER_OFFSET_FILE, version)
        self.before_crash: dict[tuple[str, str, int], int] = {}  # ground truth for the checkers only
        self.slave = slave
        self.client_commits: dict[tuple[str, str, int], int] = {}  # ground truth: a slave's own commits
        self.peers: tuple[ConsumerOffsetManager, ...] = ()  # ground truth: the group's other replicas
        self.detail = node.env.tracer.detail  # trace commits, file writes and loads (detail kinds, sim/trace.py)
        node.on_crash(self._crashed)
        node.on_crash(self.reset.clear)
        node.on_start(self.load)
        node.add_service(self.run)

    @property
    def persisted(self) -> dict[tuple[str, str, int], int]:
        """What consumerOffset.json holds now (page cache view)."""
        return self.file.load()[0]

    def _crashed(self) -> None:
        self.before_crash = dict(self.table)
        self.table.clear()

    def load(self) -> None:
        """Start-up: the table is the file's. Every entry that goes back (or vanishes) against
        the table the crash destroyed is recorded (`broker.offset_rolled_back`)."""
        table, source = self.file.load()
        self.table.clear()
        self.table.update(table)
        self.node.trace(CONSUMER_OFFSETS_LOADED, len(table), source)
        if self.detail:
            self.trace_entries(BROKER_OFFSET_LOADED, table, source)
        for (group, topic, queue_id), offset in self.before_crash.items():
            loaded = table.get((group, topic, queue_id), -1)
            if loaded < offset:
                self.cov[COV_BROKER_OFFSET_ROLLED_BACK] += 1
                self.node.trace(BROKER_OFFSET_ROLLED_BACK, group, topic, queue_id, offset, loaded)
        self.before_crash = {}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset
        if self.slave:
            self.client_commits[(group, topic, queue_id)] = offset

    def committed(self, client: str, group: str, topic: str, queue_id: int, offset: int, via: str) -> None:
        """A client's commit this broker applied (detail kind; `via` pull or update)."""
        self.node.trace(BROKER_OFFSET_COMMITTED, group, topic, queue_id, offset, client, via)

    def trace_entries(self, kind: str, table: dict, *extra: str) -> None:
        """One detail record of `kind` per table entry (a file written or loaded, a slave's copy)."""
        for (group, topic, queue_id), offset in table.items():
            self.node.trace(kind, group, topic, queue_id, offset, *extra)

    def held(self, key: tuple[str, str, int]) -> int:
        """Ground truth: the committed offset this replica holds for `key` that the others may
        lack — a master's (its crashed table while down), a slave's client commits; -1 if none."""
        if self.slave:
            return self.client_commits.get(key, -1)
        return max(self.table.get(key, -1), self.before_crash.get(key, -1))

    def behind_replica(self, client: str, broker_name: str, key: tuple[str, str, int], answered: int) -> None:
        """Record an offset answer below what another replica of the group holds (ground truth)."""
        ahead = max((peer.held(key) for peer in self.peers), default=-1)
        if ahead > max(answered, 0):
            self.cov[COV_OFFSET_ANSWER_BEHIND_REPLICA] += 1
            group, topic, queue_id = key
            self.node.trace(BROKER_OFFSET_BEHIND_REPLICA, group, topic, broker_name, queue_id, client, answered, ahead)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """ConsumerOffsetManager.assignResetOffset (5.x server-side reset)."""
        self.reset[(group, topic, queue_id)] = offset
        self.table[(group, topic, queue_id)] = offset

    def take_reset(self, group: str, topic: str, queue_id: int) -> int:
        """queryThenEraseResetOffset: the pending reset offset of the queue, or -1."""
        return self.reset.pop((group, topic, queue_id), -1) if self.reset else -1

    def run(self) -> Generator[Any, Any, None]:
        node = self.node
        yield node.sleep_us(OFFSET_PERSIST_INITIAL_DELAY_US)
        while True:
            self.file.persist(self.table)
            node.trace(CONSUMER_OFFSETS_PERSISTED, len(self.table))
            if self.detail:
                self.trace_entries(BROKER_OFFSET_FILE_WRITTEN, self.table)
            yield node.sleep_us(ms(self.cfg.flush_consumer_offset_interval_ms))
