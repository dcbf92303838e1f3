"""RemoteBrokerOffsetStore (clustering) and LocalFileOffsetStore (broadcasting).

Offsets live in heap memory (a crash loses everything since the last persist) and are
persisted every `persistConsumerOffsetInterval` (first after 10 s): clustering sends a oneway
UPDATE_CONSUMER_OFFSET per owned queue to the queue's master and drops entries of queues no
longer owned; broadcasting rewrites the local offsets file, which survives a crash. Pulls also
carry the offset to the broker (commitOffset).
"""

# compiled with Cython: the C declarations of this module's classes are in offset_store.pxd beside it

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.message import MessageQueue
from models.protocol import UpdateConsumerOffset


class OffsetStore:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("broadcasting", "group", "local_file", "node", "offsets")

    def __init__(self, node: Any, group: str, broadcasting: bool) -> None:
        self.node = node
        self.group = group
        self.broadcasting = broadcasting
        self.offsets: dict[MessageQueue, int] = {}
        self.local_file: dict[MessageQueue, int] = {}  # LocalFileOffsetStore's offsets.json
        node.on_crash(self.offsets.clear)

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offsets.get(mq)
        if old is None or not increase_only or offset > old:
            self.offsets[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self.offsets.get(mq, -1)

    def read_local_file(self, mq: MessageQueue) -> int:
        return self.local_file.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)

    def persist(self, mq: MessageQueue, addr_of: Callable[[str], str | None]) -> None:
        offset = self.offsets.get(mq)
        if offset is None:
            return
        if self.broadcasting:
            self.local_file[mq] = offset
            return
        addr = addr_of(mq.broker_name)
        if addr is not None:
            self.node.send(addr, UpdateConsumerOffset(self.group, mq.topic, mq.queue_id, offset))

    def persist_all(self, owned: dict[MessageQueue, Any], addr_of: Callable[[str], str | None]) -> int:
        for mq in list(self.offsets):
            if mq in owned:
                self.persist(mq, addr_of)
            elif not self.broadcasting:
                del self.offsets[mq]
        return len(self.offsets)
