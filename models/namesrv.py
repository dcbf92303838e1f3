"""namesrv.routeinfo.RouteInfoManager: broker registration and topic routes (5.x NameServer).

Brokers register every 30 s; a broker whose last registration is older than 120 s is removed by
a scan every 5 s (`scanNotActiveBrokerInterval`). When a broker *process* dies the NameServer's
TCP channel closes and the broker is unregistered at once (BrokerHousekeepingService); after a
power loss or a partition it lingers until expiry. Clients learn of changes only when they poll.

One address per (brokerName, brokerId) (`brokerAddrsMap`): a registration at an id another live
address holds replaces it, unless the holder's DataVersion stateVersion — the master epoch, in
controller mode — is higher: then the newcomer is ignored (5.3.3 registerBroker), so a deposed
master still calling itself brokerId 0 cannot take the route back from the elected one.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.protocol import (
    SUCCESS,
    TOPIC_NOT_EXIST,
    BrokerData,
    CodeResponse,
    GetRouteInfo,
    QueueData,
    RegisterBroker,
    TopicRouteData,
)
from models.records import NAMESRV_BROKER_UNREGISTERED
from sim.node import Node

SCAN_NOT_ACTIVE_BROKER_INTERVAL_US = 5_000_000  # NamesrvConfig.scanNotActiveBrokerInterval
BROKER_CHANNEL_EXPIRED_TIME_US = 120_000_000  # BrokerLiveInfo heartbeatTimeoutMillis default


class NameServer:
    def __init__(self, env: Any, name: str, zone: str = "default") -> None:
        self.node = Node(env, name, zone)
        self.brokers: dict[str, RegisterBroker] = {}  # addr -> last registration
        self.last_update_us: dict[str, int] = {}
        node = self.node
        node.handle(RegisterBroker, self.on_register)
        node.handle(GetRouteInfo, self.on_get_route)
        node.add_service(self.scan_not_active_broker)
        node.on_crash(self.brokers.clear)
        node.on_crash(self.last_update_us.clear)

    def on_register(self, src: str, req_id: int, req: RegisterBroker) -> None:
        holder = self._holder(req)
        if holder is not None:
            if self.brokers[holder].state_version > req.state_version:  # a stale master: ignored
                self._unregister(req.addr, "stale_state_version")
                self.node.reply(src, req_id, CodeResponse(SUCCESS))
                return
            self._unregister(holder, "replaced")
        if req.addr not in self.brokers:
            self.node.env.network.watch(self.node, req.addr, self.channel_closed)
        self.brokers[req.addr] = req
        self.last_update_us[req.addr] = self.node.env._now
        self.node.reply(src, req_id, CodeResponse(SUCCESS))

    def _holder(self, req: RegisterBroker) -> str | None:
        """The other address registered at the request's (brokerName, brokerId), if any."""
        for addr, reg in self.brokers.items():
            if addr != req.addr and reg.broker_name == req.broker_name and reg.broker_id == req.broker_id:
                return addr
        return None

    def channel_closed(self, addr: str) -> None:
        self._unregister(addr, "channel_closed")

    def _unregister(self, addr: str, reason: str) -> None:
        if self.brokers.pop(addr, None) is not None:
            self.last_update_us.pop(addr, None)
            self.node.trace(NAMESRV_BROKER_UNREGISTERED, addr, reason)

    def on_get_route(self, src: str, req_id: int, req: GetRouteInfo) -> None:
        self.node.reply(src, req_id, self.route(req.topic) or CodeResponse(TOPIC_NOT_EXIST))

    def route(self, topic: str) -> TopicRouteData | None:
        queue_datas: dict[str, QueueData] = {}
        addrs: dict[str, list[tuple[int, str]]] = {}
        for reg in self.brokers.values():
            for name, read_q, write_q in reg.topics:
                if name == topic:
                    queue_datas[reg.broker_name] = QueueData(reg.broker_name, read_q, write_q)
                    addrs.setdefault(reg.broker_name, []).append((reg.broker_id, reg.addr))
        if not queue_datas:
            return None
        names = sorted(queue_datas)
        return TopicRouteData(topic, tuple(queue_datas[n] for n in names),
                              tuple(BrokerData(n, tuple(sorted(addrs[n]))) for n in names))

    def scan_not_active_broker(self) -> Generator:
        while True:
            yield self.node.sleep_us(SCAN_NOT_ACTIVE_BROKER_INTERVAL_US)
            now = self.node.env._now
            for addr, last in list(self.last_update_us.items()):
                if now - last > BROKER_CHANNEL_EXPIRED_TIME_US:
                    self._unregister(addr, "expired")
