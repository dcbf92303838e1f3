"""Offsets by time and the admin reset by time (SEARCH_OFFSET_BY_TIMESTAMP, INVOKE_BROKER_TO_RESET_OFFSET).

`resetOffsetByTimestamp` (mqadmin resetOffsetByTime) asks every master broker of the topic:

- 5.x with `useServerSideResetOffset` (default true; AdminBrokerProcessor.resetOffsetInner): for
  each read queue, the offset by time (getOffsetInQueueByTime, BoundaryType.LOWER; the max offset
  for a negative time) goes into the group's offset table and into the reset table; the next
  pull of each queue is answered PULL_OFFSET_MOVED with it (broker.py), and the client moves
  there (5.2.0+: update-and-freeze, persist, drop the queue, rebalance at once). No client is
  told directly. A slave refuses (SYSTEM_ERROR).
- 4.x, or 5.x without server-side reset (Broker2Client.resetOffset): for each write queue take
  the offset by time (4.x: the nearest unit) if `force` (the tool's default) or if it is below
  the group's committed offset, else keep the committed one; a queue without a committed offset
  aborts the reset ("consumer group not exist"). The offsets are pushed to every client of the
  group (RESET_CONSUMER_CLIENT_OFFSET, oneway), which pauses, drops the queues, waits 10 s,
  stores and persists the new offsets and lets the next rebalance take the queues again
  (models/consumer/reset_offset.py).

Either way messages consumed since that time are consumed again (duplicates, by design).
"""

from __future__ import annotations

from typing import Any

from models.protocol import SUCCESS, OffsetResponse, ResetConsumerClientOffset, SearchOffset
from models.records import ADMIN_OFFSET_RESET
from models.version import Version


class ResetOffsetService:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.node = broker.node
        self.lower = broker.version is Version.V5  # 5.1.1+: BoundaryType.LOWER; 4.x: nearest

    def offset_by_time(self, topic: str, queue_id: int, timestamp_us: int) -> int:
        store = self.broker.store
        if timestamp_us < 0:
            return store.max_offset(topic, queue_id)
        return store.get_offset_in_queue_by_time(store.reput.queue(topic, queue_id), timestamp_us, self.lower)

    def on_search_offset(self, src: str, req_id: int, req: SearchOffset) -> None:
        offset = self.offset_by_time(req.topic, req.queue_id, req.timestamp_us)
        self.node.reply(src, req_id, OffsetResponse(SUCCESS, offset))

    def reset(self, group: str, topic: str, timestamp_us: int, force: bool = True) -> bool:
        """The broker's part of resetOffsetByTimestamp (module docstring); False if refused."""
        broker = self.broker
        if broker.slave or not self.node.serving or topic not in broker.topics:
            return False
        queues = broker.topics[topic]
        server_side = broker.version is Version.V5 and broker.cfg.use_server_side_reset_offset
        if server_side:
            for queue_id in range(queues):
                broker.offsets.assign_reset(group, topic, queue_id, self.offset_by_time(topic, queue_id, timestamp_us))
        else:
            offsets = []
            for queue_id in range(queues):
                committed = broker.offsets.query(group, topic, queue_id)
                if committed < 0:
                    return False  # SYSTEM_ERROR: the consumer group does not exist here
                target = max(0, self.offset_by_time(topic, queue_id, timestamp_us))
                offsets.append((broker.broker_name, queue_id, target if force or target < committed else committed))
            request = ResetConsumerClientOffset(topic, group, tuple(offsets))
            for channel in broker.consumers.channels(group):
                self.node.send(channel, request)
        self.node.trace(ADMIN_OFFSET_RESET, group, topic, queues, server_side)
        return True
