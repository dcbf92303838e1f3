"""broker.client.ProducerManager: the producer channels of each producer group.

Producers register on every heartbeat (group → client id → last heartbeat). A channel is
removed when the client process dies (the OS closes the socket: ClientHousekeepingService's
channel-close event) or when it has sent no heartbeat for 120 s (`CHANNEL_EXPIRED_TIMEOUT`,
scanned every 10 s). The table lives in heap memory. Transaction check-back (a later model)
asks it for a live channel of a group (`available_channel`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config import CHANNEL_EXPIRED_TIMEOUT_US, CONSUMER_SCAN_INTERVAL_US

PRODUCER_SCAN_INTERVAL_US = CONSUMER_SCAN_INTERVAL_US  # ClientHousekeepingService: every 10 s, both tables


class ProducerManager:
    def __init__(self, node: Any) -> None:
        self.node = node
        self.groups: dict[str, dict[str, int]] = {}  # groupChannelTable: group -> client id -> last heartbeat µs
        node.on_crash(self.groups.clear)
        node.add_service(self.scan_not_active_channel)

    def register_producer(self, group: str, client_id: str) -> None:
        members = self.groups.setdefault(group, {})
        if client_id not in members:
            self.node.env.network.watch(self.node, client_id, self.do_channel_close_event)
        members[client_id] = self.node.env._now

    def unregister_producer(self, group: str, client_id: str) -> None:
        """unregisterProducer: the client's channel leaves the group's table."""
        members = self.groups.get(group)
        if members is not None:
            members.pop(client_id, None)

    def channels(self, group: str) -> tuple[str, ...]:
        return tuple(self.groups.get(group, {}))

    def available_channel(self, group: str) -> str | None:
        """getAvailableChannel: a registered, live channel of the group (here: the most recent)."""
        members = self.groups.get(group)
        if not members:
            return None
        return max(members, key=lambda c: (members[c], c))

    def do_channel_close_event(self, client_id: str) -> None:
        for members in self.groups.values():
            members.pop(client_id, None)

    def scan_not_active_channel(self) -> Generator[Any, Any, None]:
        while True:
            yield self.node.sleep_us(PRODUCER_SCAN_INTERVAL_US)
            now = self.node.env._now
            for members in self.groups.values():
                for client_id in [c for c, t in members.items() if now - t > CHANNEL_EXPIRED_TIMEOUT_US]:
                    del members[client_id]
