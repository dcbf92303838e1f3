"""client.impl.factory.MQClientInstance: what the producers and consumers of one client process share.

One instance per client node, as in Java (one per `clientId`). It holds the route table
(`topicRouteTable`), the broker address table (`brokerAddrTable`: brokerName → {brokerId: addr},
written when a route changes and pruned by `cleanOfflineBroker`), the producer and consumer
tables, and runs the client's periodic tasks with their real initial delays
(`startScheduledTask`, fixed rate):

| task                                          | first after | then every                      |
| --------------------------------------------- | ----------- | ------------------------------- |
| updateTopicRouteInfoFromNameServer            | 10 ms       | pollNameServerInterval (30 s)   |
| cleanOfflineBroker + sendHeartbeatToAllBroker | 1 s         | heartbeatBrokerInterval (30 s)  |
| persistAllConsumerOffset (consumers only)     | 10 s        | persistConsumerOffsetInterval   |

Route polling asks the topics of every producer (its publish topics) and consumer (its
subscriptions) one after another, each a synchronous GET_ROUTEINFO_BY_TOPIC with
`mqClientApiTimeout`; a transport failure (timeout, refused connection) ends the round, as the
RemotingException escaping `updateTopicRouteInfoFromNameServer()` does; a TOPIC_NOT_EXIST answer
keeps the old route. A route is installed when it differs from the cached one or a client lacks
it: every producer gets a new TopicPublishInfo (`topicRouteData2TopicPublishInfo`), every
consumer a new subscribe set.

NameServer choice (remoting.netty.NettyRemotingClient.getAndCreateNameserverChannel): one
NameServer is used until its channel fails; the next choice is `namesrvList[abs(++index) % n]`,
the index starting at `Random.nextInt(999)`. A channel fails when a request times out
(`clientCloseSocketIfTimeout`, default true), the connection is refused, or the NameServer
process dies (the OS closes the socket).

Heartbeats (`sendHeartbeatToAllBroker`): one HEARTBEAT per address of the broker address table,
sent one after another (each waits up to `mqClientApiTimeout`); a client with no consumer
(producer-only) heartbeats to masters (brokerId 0) only. The heartbeat carries the producer
groups (the broker's ProducerManager) and the consumer groups with their subscriptions.

Channels: `channel_open(addr)` says whether the client holds a live connection to `addr`
(learnt from a response on it; lost when the peer process dies). ONEWAY sends need it: a oneway
request on a closed channel first reconnects, which a dead process refuses.

Channel events (5.x, `ClientConfig.enableHeartbeatChannelEventListener`, default true; 4.9.8 has no
such listener): every request goes through the remoting client's channel table
(NettyRemotingClient.getAndCreateChannel), so the first request to an address without a live
connection — the first ever, or the first after the peer process died or answered a stale
connection with a RST — opens one, which becomes active (NettyConnectManageHandler.channelActive)
when the peer accepts it: the peer process serves and no partition is in the way (sim/network.py
`connected`); a refused or unreachable connect opens nothing, and the next request tries again.
When a connection to a broker address of the broker address table becomes active, the listener
(MQClientInstance's onChannelActive) sends that broker a heartbeat — sendHeartbeatToBroker with the
heartbeat lock's tryLock: skipped while a heartbeat round holds it, as when the round's own
heartbeat opened the connection, and holding it, so that a round starting meanwhile is skipped —
and, if the broker answered SUCCESS, rebalances at once (rebalanceImmediately: every consumer of
the client that rebalances). So a restarted broker learns the client's groups within about one
round trip of the client's first request to it (a pull retried within pullTimeDelayMillsWhenException),
not at the next 30 s heartbeat. Simplified: the handshake takes no time (the heartbeat goes out right
after the request that opened the connection, both on it); a connection closes only when the peer
process dies or answers with a RST, not when a request to it times out
(`clientCloseSocketIfTimeout`).

Simplified (5.3.3 and 4.9.8 alike): the `lockNamesrv` lock is not modelled (an on-demand route
fetch runs beside a polling round); no TBW102 default-route fallback (a topic without a route
fails the send); heartbeat V2 fingerprints are not modelled; NameServer address fetching (only
without a configured address) is out of scope.
"""

# compiled with Cython: the C declarations of this module's classes are in client_instance.pxd beside it

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.message import MessageQueue
from models.perm_name import PERM_READ, PERM_WRITE
from models.protocol import SUCCESS, CodeResponse, GetRouteInfo, Heartbeat, TopicRouteData
from models.records import CLIENT_ROUTE_UPDATED
from models.topic_publish_info import QueueData as PublishQueueData
from models.topic_publish_info import TopicPublishInfo
from models.version import V4
from sim.env import ms
from sim.node import CONNECT_FAILED

ROUTE_POLL_INITIAL_DELAY_US = 10_000  # startScheduledTask: updateTopicRouteInfoFromNameServer first after 10 ms
HEARTBEAT_INITIAL_DELAY_US = 1_000_000  # cleanOfflineBroker + sendHeartbeatToAllBroker first after 1 s
PERSIST_INITIAL_DELAY_US = 10_000_000  # persistAllConsumerOffset first after 10 s
NAMESRV_INDEX_BOUND = 999  # NettyRemotingClient.initValueIndex: Random.nextInt(999)
MASTER_ID = 0  # MixAll.MASTER_ID


def heartbeat_channel_listener_enabled(setting: bool | None, client_version: str) -> bool:
    """ClientConfig.enableHeartbeatChannelEventListener: the setting, true when not set (5.3.3's
    default); a 4.9.8 client has no such listener whatever the setting."""
    if client_version == V4:
        return False
    return True if setting is None else setting


def topic_route_data_to_publish_info(route: TopicRouteData, rng: Any, client_version: str) -> TopicPublishInfo:
    """MQClientInstance.topicRouteData2TopicPublishInfo: QueueData sorted by broker name; for each
    writable one whose broker group has a master, queues 0 .. writeQueueNums-1. `rng` draws the
    start of the new TopicPublishInfo's index (the producer's own stream)."""
    masters = {b.broker_name for b in route.broker_datas if any(i == MASTER_ID for i, _ in b.addrs)}
    queues: list[MessageQueue] = []
    for qd in sorted(route.queue_datas):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            queues.extend(MessageQueue(route.topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    queue_datas = [PublishQueueData(qd.broker_name, qd.write_queue_nums, qd.perm) for qd in route.queue_datas]
    return TopicPublishInfo(queues, queue_datas, rng=rng, client_version=client_version)


def topic_route_data_to_subscribe_info(route: TopicRouteData) -> list[MessageQueue]:
    """topicRouteData2TopicSubscribeInfo: queues 0 .. readQueueNums-1 of every readable QueueData,
    whether or not the broker group has a master."""
    return [MessageQueue(route.topic, qd.broker_name, i) for qd in route.queue_datas if qd.perm & PERM_READ
            for i in range(qd.read_queue_nums)]


def build_mq_client_id(node_name: str, client_ip: str | None = None, instance_name: str | None = None) -> str:
    """ClientConfig.buildMQClientId, `<clientIP>@<instanceName>` (4.9.8 and 5.3.3; no unitName, no
    stream type). Without an instanceName, start() turns "DEFAULT" into `<pid>#<nanoTime>`
    (changeInstanceNameToPID), unique per process, and the node name stands for the whole id. With
    one, two processes on one address (one host, or containers sharing the host's network) that
    set the same instanceName have the same client id: the brokers list it once per connection
    (ConsumerGroupInfo.getAllClientId), and each member allocates as the first of the two."""
    if instance_name is None:
        return node_name
    return f"{client_ip or node_name}@{instance_name}"


class MQClientInstance:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_heartbeat_running", "_transmit", "_watched", "api_timeout_us", "broker_addr_table",
                 "channel_event_listener", "client_id", "consumers", "heartbeat_interval_us", "namesrv_chosen",
                 "namesrv_index", "namesrvs", "node", "open_channels", "persist_interval_us", "poll_interval_us",
                 "producers", "publish_addr", "stream", "subscribe_addr", "topic_route_table")

    def __init__(self, node: Any, namesrvs: list[str], poll_name_server_interval_ms: int,
                 heartbeat_broker_interval_ms: int, mq_client_api_timeout_ms: int,
                 enable_heartbeat_channel_event_listener: bool = False, client_id: str | None = None) -> None:
        """`enable_heartbeat_channel_event_listener`: resolved already
        (`heartbeat_channel_listener_enabled`: false for a 4.9.8 client); `client_id`:
        `build_mq_client_id`'s (null: the node name, which then plays both parts)."""
        self.node = node
        self.client_id = client_id or node.name  # <clientIP>@<instanceName>; the address is still the node's
        self.namesrvs = list(namesrvs)
        self.poll_interval_us = ms(poll_name_server_interval_ms)
        self.heartbeat_interval_us = ms(heartbeat_broker_interval_ms)
        self.api_timeout_us = ms(mq_client_api_timeout_ms)
        self.persist_interval_us = 0
        self.stream = node.env.rng.stream(f"{node.name}.client")
        self.namesrv_index = 0  # NettyRemotingClient.namesrvIndex (set at start)
        self.namesrv_chosen: str | None = None  # namesrvAddrChoosed
        self.producers: dict[str, Any] = {}  # producerTable: group -> producer
        self.consumers: dict[str, Any] = {}  # consumerTable: group -> consumer
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        # lookups of the send and pull paths, rebuilt with broker_addr_table
        self.publish_addr: dict[str, str | None] = {}  # findBrokerAddressInPublish: the master
        self.subscribe_addr: dict[str, str] = {}  # findBrokerAddressInSubscribe(name, MASTER_ID, false)
        self.open_channels: dict[str, None] = {}
        self._watched: dict[str, None] = {}
        self._heartbeat_running = False
        self.channel_event_listener = enable_heartbeat_channel_event_listener
        self._transmit: Any = None  # the node's own request transmission, behind the channel table
        if enable_heartbeat_channel_event_listener:
            self._transmit = node._request
            node._request = self._request_on_channel  # every request passes getAndCreateChannel
        node.on_start(self._start)
        node.on_crash(self._lose_heap)
        node.add_service(self.poll_name_server_loop)
        node.add_service(self.heartbeat_loop)

    # --- registration ---------------------------------------------------------------------------
    def register_producer(self, group: str, producer: Any) -> None:
        self.producers[group] = producer

    def register_consumer(self, group: str, consumer: Any, persist_consumer_offset_interval_ms: int) -> None:
        if not self.consumers:
            self.persist_interval_us = ms(persist_consumer_offset_interval_ms)
            self.node.add_service(self.persist_loop)
        self.consumers[group] = consumer

    def _start(self) -> None:
        self.namesrv_index = self.stream.randrange(NAMESRV_INDEX_BOUND)
        self.namesrv_chosen = None

    def _lose_heap(self) -> None:
        self.topic_route_table.clear()
        self.broker_addr_table.clear()
        self.publish_addr.clear()
        self.subscribe_addr.clear()
        self.open_channels.clear()
        self.namesrv_chosen = None
        self._heartbeat_running = False

    # --- NameServer -----------------------------------------------------------------------------
    def _namesrv(self) -> str:
        """getAndCreateNameserverChannel: the chosen NameServer, or the next one in turn."""
        chosen = self.namesrv_chosen
        if chosen is None:
            self.namesrv_index += 1  # an AtomicInteger: wraps like a Java int (after 2^31 choices)
            chosen = self.namesrv_chosen = self.namesrvs[abs(self.namesrv_index) % len(self.namesrvs)]
            self._watch(chosen)
        return chosen

    def _namesrv_failed(self, addr: str) -> None:
        """The channel to `addr` failed (closeChannel): the next request chooses again."""
        if self.namesrv_chosen == addr:
            self.namesrv_chosen = None

    def fetch_route(self, topic: str, on_done: Callable[[bool], None] | None = None) -> None:
        """updateTopicRouteInfoFromNameServer(topic) on demand; `on_done(route_known)` afterwards."""
        addr = self._namesrv()
        self.node.rpc(addr, GetRouteInfo(topic), self.api_timeout_us, self._on_route_fetched, topic, addr, on_done)

    def _on_route_fetched(self, topic: str, addr: str, on_done: Callable[[bool], None] | None, response: Any) -> None:
        if response is None or response is CONNECT_FAILED:
            self._namesrv_failed(addr)
        else:
            self.install_route(topic, response)
        if on_done is not None:
            on_done(topic in self.topic_route_table)

    def poll_name_server_loop(self) -> Generator:
        """The scheduled route poll: every topic of every client, one request after another."""
        node = self.node
        yield node.sleep_us(ROUTE_POLL_INITIAL_DELAY_US)
        while True:
            started = node.env._now
            for topic in self.topics():
                addr = self._namesrv()
                response = yield node.rpc_event(addr, GetRouteInfo(topic), self.api_timeout_us)
                if response is None or response is CONNECT_FAILED:
                    self._namesrv_failed(addr)
                    break  # the RemotingException ends this round
                self.install_route(topic, response)
            yield node.sleep_us(max(0, started + self.poll_interval_us - node.env._now))

    def topics(self) -> list[str]:
        """Consumers' subscriptions, then producers' publish topics (each once)."""
        out: dict[str, None] = {}
        for consumer in self.consumers.values():
            out.update(dict.fromkeys(consumer.subscriptions))
        for producer in self.producers.values():
            out.update(dict.fromkeys(producer.topics))
        return list(out)

    def install_route(self, topic: str, route: Any) -> bool:
        """The body of updateTopicRouteInfoFromNameServer after the answer; True if installed."""
        if not isinstance(route, TopicRouteData):
            return False  # TOPIC_NOT_EXIST: MQClientException, logged; the old route stays
        if route == self.topic_route_table.get(topic) and not self._needs_update(topic):
            return False
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.addrs)
        self._rebuild_addr_lookups()
        for producer in self.producers.values():
            producer.update_topic_publish_info(topic, route)
        for consumer in self.consumers.values():
            consumer.update_topic_subscribe_info(topic, route)
        self.topic_route_table[topic] = route
        if self.node.env.tracer.detail:  # the route this client now uses (detail kind, sim/trace.py)
            self.node.trace(CLIENT_ROUTE_UPDATED, topic, ",".join(f"{q.broker_name}:{q.write_queue_nums}"
                                                                  for q in route.queue_datas))
        return True

    def _needs_update(self, topic: str) -> bool:
        """isNeedUpdateTopicRouteInfo: a producer or consumer of the topic lacks its route."""
        return any(p.publish_topic_needs_update(topic) for p in self.producers.values()) or \
            any(c.subscribe_topic_needs_update(topic) for c in self.consumers.values())

    def _rebuild_addr_lookups(self) -> None:
        self.publish_addr = {name: addrs.get(MASTER_ID) for name, addrs in self.broker_addr_table.items()}
        self.subscribe_addr = {name: addrs.get(MASTER_ID, addrs[min(addrs)]) for name, addrs in
                               self.broker_addr_table.items() if addrs}

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return self.publish_addr.get(broker_name)

    def find_broker_address_in_subscribe(self, broker_name: str) -> str | None:
        return self.subscribe_addr.get(broker_name)

    def all_broker_addrs(self) -> list[str]:
        return [addr for addrs in self.broker_addr_table.values() for addr in addrs.values()]

    def clean_offline_broker(self) -> None:
        """cleanOfflineBroker: forget addresses no route mentions any more."""
        live = {addr for route in self.topic_route_table.values() for bd in route.broker_datas for _, addr in bd.addrs}
        for name in list(self.broker_addr_table):
            addrs = {i: a for i, a in self.broker_addr_table[name].items() if a in live}
            if addrs:
                self.broker_addr_table[name] = addrs
            else:
                del self.broker_addr_table[name]
        self._rebuild_addr_lookups()

    # --- heartbeats -----------------------------------------------------------------------------
    def heartbeat_loop(self) -> Generator:
        node = self.node
        yield node.sleep_us(HEARTBEAT_INITIAL_DELAY_US)
        while True:
            started = node.env._now
            self.clean_offline_broker()
            yield from self._heartbeat_round()
            yield node.sleep_us(max(0, started + self.heartbeat_interval_us - node.env._now))

    def send_heartbeat_to_all_broker_with_lock(self, then: Callable[[], None], always: bool = False) -> None:
        """sendHeartbeatToAllBrokerWithLock from a callback (consumer start), then `then()` if it
        returned true: the Java caller blocks until the round is over (each heartbeat waits for
        its answer) and only then rebalances. It returns false, and `then()` is not called, when
        a round already holds the lock (tryLock fails), when the client has no producer and no
        consumer, or when the broker address table is empty (no route known yet: nothing was
        sent); a round that sent heartbeats returns true whatever their answers. `always`:
        `then()` whatever it returned (4.9.8's start rebalances after it regardless)."""
        if self._heartbeat_running or (not self.producers and not self.consumers) or not self.broker_addr_table:
            if always:
                then()
            return
        self.node.env.process(self._heartbeat_then(then))

    def _heartbeat_then(self, then: Callable[[], None]) -> Generator:
        epoch = self.node.epoch
        yield from self._heartbeat_round()
        if self.node.epoch == epoch:
            then()

    def _heartbeat_data(self) -> Heartbeat:
        """prepareHeartbeatData: the client's consumer groups with their subscriptions, its producer groups."""
        return Heartbeat(self.client_id, tuple((g, tuple(c.subscriptions)) for g, c in self.consumers.items()),
                         tuple(self.producers))

    def _heartbeat_round(self) -> Generator:
        if self._heartbeat_running or (not self.producers and not self.consumers):
            return
        self._heartbeat_running = True
        epoch = self.node.epoch
        beat = self._heartbeat_data()
        producer_only = not self.consumers
        targets = [addr for addrs in self.broker_addr_table.values() for bid, addr in addrs.items()
                   if addr is not None and not (producer_only and bid != MASTER_ID)]
        for addr in targets:
            response = yield self.node.rpc_event(addr, beat, self.api_timeout_us)
            if response is not None and response is not CONNECT_FAILED:
                self.channel_opened(addr)
        if self.node.epoch == epoch:
            self._heartbeat_running = False

    # --- channels -------------------------------------------------------------------------------
    def channel_open(self, addr: str) -> bool:
        return addr in self.open_channels

    def _request_on_channel(self, dst: str, req_id: int, payload: Any) -> None:
        """The node's requests with the channel event listener on (module docstring): sent as
        before; one that found no live connection to `dst` opens it, if `dst` accepts."""
        self._transmit(dst, req_id, payload)
        if dst not in self.open_channels and self.node.env.network.connected(self.node.name, dst):
            self.channel_opened(dst)
            self.on_channel_active(dst)

    def on_channel_active(self, addr: str) -> None:
        """ChannelEventListener.onChannelActive: a heartbeat to a broker address of the table
        (sendHeartbeatToBroker with the lock's tryLock), then rebalanceImmediately if it succeeded."""
        if not any(addr in addrs.values() for addrs in self.broker_addr_table.values()):
            return  # a NameServer's, or a broker the table does not hold
        if self._heartbeat_running or (not self.producers and not self.consumers):
            return  # tryLock failed, or nothing to send
        self._heartbeat_running = True
        self.node.rpc(addr, self._heartbeat_data(), self.api_timeout_us, self._channel_heartbeat_answered)

    def _channel_heartbeat_answered(self, response: Any) -> None:
        self._heartbeat_running = False  # the lock is released whatever the answer
        if isinstance(response, CodeResponse) and response.code == SUCCESS:
            self.rebalance_immediately()

    def rebalance_immediately(self) -> None:
        """rebalanceImmediately: the RebalanceService wakes up for every consumer that rebalances
        (a POP consumer does not)."""
        for consumer in self.consumers.values():
            rebalancer = getattr(consumer, "rebalancer", None)
            if rebalancer is not None:
                rebalancer.wakeup()

    def channel_opened(self, addr: str) -> None:
        if addr not in self.open_channels:
            self.open_channels[addr] = None
            self._watch(addr)

    def _watch(self, addr: str) -> None:
        if addr not in self._watched:
            self._watched[addr] = None
            self.node.env.network.watch(self.node, addr, self._channel_closed)

    def _channel_closed(self, addr: str) -> None:
        """The peer process died and the OS closed the connection (NettyConnectManageHandler)."""
        self.open_channels.pop(addr, None)
        self._namesrv_failed(addr)

    # --- consumer offsets -----------------------------------------------------------------------
    def persist_loop(self) -> Generator:
        node = self.node
        yield node.sleep_us(PERSIST_INITIAL_DELAY_US)
        while True:
            started = node.env._now
            for consumer in self.consumers.values():
                consumer.persist_consumer_offset()
            yield node.sleep_us(max(0, started + self.persist_interval_us - node.env._now))
