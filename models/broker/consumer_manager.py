"""broker.client.ConsumerManager + ClientHousekeepingService: who is in each consumer group.

Members are learnt from heartbeats. A new member, a closed connection (the client process died:
the OS resets the socket) or an expired channel (no heartbeat for 120 s, scanned every 10 s)
changes the group, and the broker then sends NOTIFY_CONSUMER_IDS_CHANGED oneway to every
member, which makes them rebalance at once. The table lives in heap memory.

registerConsumer (5.3.3 and 4.9.8) notifies only when the heartbeat's channel is new to the group
(ConsumerGroupInfo.updateChannel) or it adds or drops a topic of the group's subscriptions
(updateSubscription; a newer subVersion alone replaces the subscription silently): a member's later
heartbeats on its channel notify nobody. Each broker keeps its own table and notifies for itself,
so a join reaches every member once from every broker it heartbeats to — two notifications a
fraction of a millisecond apart with two brokers, which a 5.2.0+ client answers with two rounds a
second apart and a 4.9.8 client with two rounds at once (models/consumer/rebalance.py).

Members are keyed by channel (ConsumerGroupInfo.channelInfoTable: Channel → ClientChannelInfo),
here the client's node name, each with the client id its heartbeats carry. `client_ids(group)`
(GET_CONSUMER_LIST_BY_GROUP, getAllClientId) lists one id per channel, so two processes with one
client id (the same instanceName on one address: models/client_instance.py build_mq_client_id)
are listed twice under that id, and each allocates as the first of them. UNREGISTER_CLIENT
removes the channel it came on.

Simplified: the group's subscriptions are not kept.
So a group whose members subscribe to different topics — which Java sees as a subscription change at
every heartbeat of a member whose topics differ from the last one's (updateSubscription drops the
topics a heartbeat does not name), notifying the group each time — notifies only at joins and
leaves; and a client whose host lost power and came back heartbeats on a new channel while the
broker still holds the old, stale one: Java notifies for the new channel (and again when the old
one expires), the model for neither.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.config import CHANNEL_EXPIRED_TIMEOUT_US, CONSUMER_SCAN_INTERVAL_US, BrokerConfig
from models.protocol import NotifyConsumerIdsChanged
from models.records import BROKER_CLIENT_REGISTERED, BROKER_CLIENT_UNREGISTERED, BROKER_CONSUMER_IDS_CHANGED


class ConsumerManager:
    def __init__(self, node: Any, cfg: BrokerConfig) -> None:
        self.node = node
        self.cfg = cfg
        self.groups: dict[str, dict[str, int]] = {}  # group -> channel (client node) -> last heartbeat µs
        self.client_id_of: dict[str, str] = {}  # channel -> the client id its heartbeats carry, where it differs
        self.detail = node.env.tracer.detail  # trace who joins and leaves (detail kinds, sim/trace.py)
        node.on_crash(self.groups.clear)
        node.on_crash(self.client_id_of.clear)
        node.add_service(self.scan_not_active_channels)

    def heartbeat(self, channel: str, client_id: str, groups: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        """registerConsumer for each group of a heartbeat that came on `channel` (the client's node)."""
        now = self.node.env._now
        if client_id != channel:
            self.client_id_of[channel] = client_id
        for group, _topics in groups:
            members = self.groups.setdefault(group, {})
            is_new = channel not in members
            members[channel] = now
            if is_new:
                self.node.env.network.watch(self.node, channel, self.channel_closed)
                if self.detail:
                    self.node.trace(BROKER_CLIENT_REGISTERED, group, client_id)
                self._changed(group, "registered")

    def client_ids(self, group: str) -> tuple[str, ...]:
        """getAllClientId: the client id of each channel of the group (a shared id repeats)."""
        members = self.groups.get(group, {})
        if not self.client_id_of:
            return tuple(members)
        return tuple(self.client_id_of.get(channel, channel) for channel in members)

    def channels(self, group: str) -> tuple[str, ...]:
        """The group's channels: where the broker sends to its members."""
        return tuple(self.groups.get(group, {}))

    def unregister(self, channel: str, group: str) -> None:
        """unregisterConsumer (UNREGISTER_CLIENT): the member on `channel` leaves the group at once."""
        if self.groups.get(group, {}).pop(channel, None) is not None:
            self._left(group, channel, "unregistered")
            self._changed(group, "unregistered")

    def channel_closed(self, client_id: str) -> None:
        for group, members in self.groups.items():
            if members.pop(client_id, None) is not None:
                self._left(group, client_id, "closed")
                self._changed(group, "closed")

    def scan_not_active_channels(self) -> Generator[Any, Any, None]:
        while True:
            yield self.node.sleep_us(CONSUMER_SCAN_INTERVAL_US)
            now = self.node.env._now
            for group, members in self.groups.items():
                expired = [c for c, t in members.items() if now - t > CHANNEL_EXPIRED_TIMEOUT_US]
                for client_id in expired:
                    del members[client_id]
                    self._left(group, client_id, "expired")
                if expired:
                    self._changed(group, "expired")

    def _left(self, group: str, client_id: str, reason: str) -> None:
        if self.detail:
            self.node.trace(BROKER_CLIENT_UNREGISTERED, group, client_id, reason)

    def _changed(self, group: str, reason: str) -> None:
        members = self.groups.get(group, {})
        self.node.trace(BROKER_CONSUMER_IDS_CHANGED, group, len(members), reason)
        if self.cfg.notify_consumer_ids_changed_enable:
            for client_id in members:
                self.node.send(client_id, NotifyConsumerIdsChanged(group))
