"""broker.controller.ReplicasManager (5.3.3): a controller-mode broker's side of elections.

Start (every process start): the broker is fenced — it takes no writes (a send is refused as a
slave's is) and does not register with the NameServers — while startBasicService runs: find the
controller leader (GetMetaData), register (the answer names the master if it is alive; then the
broker becomes its slave, or master again), one heartbeat, and if there is no master, ask for an
election (the first election of a group makes the asker master). A failed step starts again after
5 s. Then it runs: heartbeats to every controller each `brokerHeartbeatInterval` (1 s), the leader
looked up again each `syncControllerMetadataPeriod` (10 s) and whenever a request finds it gone,
GetReplicaInfo each `syncBrokerMetadataPeriod` (5 s; a higher master epoch changes the role, a
higher epoch without a master makes the broker ask for an election), and NOTIFY_BROKER_ROLE_CHANGED
from the controller. A role change is applied only for a master epoch above the broker's.

changeToMaster: the SyncStateSet, the slave sync stopped, AutoSwitchHAService.changeToMaster (an
epoch entry at the max offset; dispatch caught up; the queue offsets rebuilt), brokerId 0, role
SYNC_MASTER, the schedule, transaction check and timer services started, the SyncStateSet check
every `checkSyncStateSetPeriod` (5 s), DataVersion's stateVersion = the epoch, registerBrokerAll.
changeToSlave: role SLAVE, those services stopped, brokerId = the controller id, the slave sync and
the HA client pointed at the new master (which truncates at the handshake), registerBrokerAll.
A master that cannot reach the controllers keeps its role and its writes until it sees a higher
epoch (there is no lease in 5.3.3).

Simplified: the brokers of a group start one after another in list order, 1 s apart (an operator's
rolling start), so the first listed wins the group's first election; the slave's HA client takes
the master's address from the controller's answer, not from a NameServer registration result;
the timer wheel's state is not carried across a failover (timer_store.py runs where it was built,
and a new master's timer starts from its own, empty, checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.commit_log import QUEUE_ID_BITS
from models.broker.config import MASTER_ID, BrokerRole
from models.coverage_points import COV_IN_SYNC_REPLICAS_NOT_ENOUGH
from models.protocol import (
    CONTROLLER_MASTER_STILL_EXIST,
    SUCCESS,
    SYSTEM_ERROR,
    AlterSyncStateSet,
    BrokerHeartbeatToController,
    ControllerMetadata,
    ElectMaster,
    GetControllerMetadata,
    GetReplicaInfo,
    NotifyBrokerRoleChanged,
    RegisterBrokerToController,
    ReplicaInfo,
    SendResponse,
)
from models.records import BROKER_ROLE, BROKER_SEND_REJECTED, OFFSET_REUSED
from sim.env import ms

RPC_TIMEOUT_US = 3_000_000  # BrokerOuterAPI controller requests: 3 s
RETRY_US = 5_000_000  # ReplicasManager.RETRY_INTERVAL_SECOND
STAGGER_US = 1_000_000  # simulator: a group's brokers start 1 s apart, in list order
FIRST_SYNC_US = 3_000_000  # schedulingSyncBrokerMetadata / updateControllerMetadata initial delay
CONTROLLER_METADATA_PERIOD_US = 10_000_000  # syncControllerMetadataPeriod
QUEUE_MASK = (1 << QUEUE_ID_BITS) - 1


class ReplicasManager:
    def __init__(self, broker: Any, controllers: list[str], peers: dict[str, int]) -> None:
        self.broker = broker
        self.node = broker.node
        self.cfg = broker.cfg
        self.controllers = list(controllers)
        self.peers = dict(peers)  # node name → controller id (the group's brokers)
        self.names = {i: n for n, i in peers.items()}
        self.controller_id = peers[broker.name]
        self.leader = ""
        self.master_epoch = 0
        self.master_addr = ""
        self.ss_epoch = 0
        self.running = False
        self.started_once = False
        self.truth_peers: tuple = ()  # the group's other brokers, for ground truth only (rmqsim/runner.py)
        self.node.on_start(self._start)
        self.node.handle(NotifyBrokerRoleChanged, self.on_notify)
        broker.ha_client.on_truncating = self.reused_by_master

    # --- start --------------------------------------------------------------------------------
    def _start(self) -> None:
        self.master_epoch, self.master_addr, self.ss_epoch, self.leader = 0, "", 0, ""
        self.running = False
        self._fence()
        delay = 0 if self.started_once else STAGGER_US * (self.controller_id - 1)
        self.started_once = True
        self.node.env.process(self._basic_service(delay))  # this incarnation's: it dies with it

    def _basic_service(self, delay_us: int) -> Generator[Any, Any, None]:
        """startBasicService, retried every 5 s until it succeeds."""
        node = self.node
        yield node.sleep_us(delay_us)
        while True:
            if (yield from self._find_leader()):
                info = yield node.rpc_event(self.leader, RegisterBrokerToController(
                    self.broker.broker_name, self.controller_id, node.name), RPC_TIMEOUT_US)
                if isinstance(info, ReplicaInfo) and info.code == SUCCESS:
                    if info.master_addr:
                        self.apply(info)
                    self.heartbeat()
                    if not info.master_addr:
                        yield from self._elect()
                    if self.master_addr:  # startBasicService needs a master (itself or another)
                        break
            yield node.sleep_us(RETRY_US)
        self.running = True
        self.broker.isolated = False
        self.broker.register_all()
        node.env.process(self._heartbeat_loop())
        node.env.process(self._sync_metadata_loop())
        node.env.process(self._controller_metadata_loop())

    def _find_leader(self) -> Generator[Any, Any, bool]:
        """updateControllerMetadata: ask the controllers in turn which one leads."""
        for controller in self.controllers:
            answer = yield self.node.rpc_event(controller, GetControllerMetadata(), RPC_TIMEOUT_US)
            if isinstance(answer, ControllerMetadata) and answer.leader:
                self.leader = answer.leader
                return True
        return False

    def _elect(self) -> Generator[Any, Any, None]:
        """brokerElect: CONTROLLER_MASTER_STILL_EXIST counts as success."""
        info = yield self.node.rpc_event(self.leader, ElectMaster(self.broker.broker_name, self.controller_id),
                                         RPC_TIMEOUT_US)
        if isinstance(info, ReplicaInfo) and info.code in (SUCCESS, CONTROLLER_MASTER_STILL_EXIST):
            self.apply(info)
        elif not isinstance(info, ReplicaInfo):  # timed out, or another answer: look the leader up again
            self.leader = ""

    # --- running ------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """sendHeartbeatToController: oneway, to every controller."""
        broker = self.broker
        hb = BrokerHeartbeatToController(broker.broker_name, self.controller_id, self.node.name,
                                         broker.ha.epochs.last_epoch(), broker.commit_log.wrote_position,
                                         ms(self.cfg.controller_heart_beat_timeout_ms),
                                         self.cfg.broker_election_priority)
        for controller in self.controllers:
            self.node.send(controller, hb)

    def _heartbeat_loop(self) -> Generator[Any, Any, None]:
        period = ms(self.cfg.broker_heartbeat_interval_ms)
        while True:
            yield self.node.sleep_us(period)
            self.heartbeat()

    def _controller_metadata_loop(self) -> Generator[Any, Any, None]:
        yield self.node.sleep_us(FIRST_SYNC_US)
        while True:
            yield from self._find_leader()
            yield self.node.sleep_us(CONTROLLER_METADATA_PERIOD_US)

    def _sync_metadata_loop(self) -> Generator[Any, Any, None]:
        """schedulingSyncBrokerMetadata: GetReplicaInfo from the leader."""
        node = self.node
        yield node.sleep_us(FIRST_SYNC_US)
        while True:
            if not self.leader:
                yield from self._find_leader()
            if self.leader:
                info = yield node.rpc_event(self.leader, GetReplicaInfo(self.broker.broker_name), RPC_TIMEOUT_US)
                if isinstance(info, ReplicaInfo) and info.code == SUCCESS:
                    if info.master_epoch > self.master_epoch and not info.master_addr:
                        yield from self._elect()
                    else:
                        self.apply(info)
                else:
                    self.leader = ""  # timed out or not the leader: look it up again
            yield node.sleep_us(ms(self.cfg.sync_broker_metadata_period_ms))

    def on_notify(self, src: str, req_id: int, req: NotifyBrokerRoleChanged) -> None:
        self.apply(req.info)

    # --- role changes -------------------------------------------------------------------------
    def apply(self, info: ReplicaInfo) -> None:
        """changeBrokerRole: act on a higher master epoch; same epoch on the master: the set."""
        if info.master_epoch > self.master_epoch and info.master_addr:
            self.master_epoch = info.master_epoch
            if info.master_addr == self.node.name:
                self.change_to_master(info)
            else:
                self.change_to_slave(info.master_addr)
        elif info.master_epoch == self.master_epoch and self.master_addr == self.node.name:
            self._accept_set(info)

    def _accept_set(self, info: ReplicaInfo) -> None:
        if info.sync_state_set_epoch > self.ss_epoch:
            self.ss_epoch = info.sync_state_set_epoch
            self.broker.ha.set_members({self.names[i] for i in info.members if i in self.names})

    def _fence(self) -> None:
        """setFenced(true) at start: no writes, no NameServer registration, no special services."""
        broker = self.broker
        broker.isolated = True
        self._become_slave_side("")
        self.node.trace(BROKER_ROLE, broker.broker_name, "fenced", 0)

    def change_to_master(self, info: ReplicaInfo) -> None:
        broker, ha = self.broker, self.broker.ha
        members = {self.names[i] for i in info.members if i in self.names}
        if self.master_addr == self.node.name and not broker.slave:  # changeToMasterWhenLastRoleIsMaster
            self.ss_epoch = info.sync_state_set_epoch
            ha.epochs.append(info.master_epoch, broker.commit_log.wrote_position)
            ha.set_members(members)
            self.node.env.process(self._check_sync_state_set(self.master_epoch))  # the old one ends with its epoch
            self.node.trace(BROKER_ROLE, broker.broker_name, "master", self.master_epoch)
            broker.register_all()
            return
        self.master_addr = self.node.name
        self.ss_epoch = info.sync_state_set_epoch
        broker.slave_sync.master = ""
        broker.ha_client.stop()
        broker.reput.dispatch(broker.commit_log.wrote_position)  # changeToMaster waits until dispatch caught up
        broker.reput.replica = False
        broker.commit_log.rebuild_queue_offsets({k: cq.max_offset for k, cq in broker.reput.queues.items()})
        self._mark_reused_offsets()
        ha.change_to_master(info.master_epoch, members)
        broker.broker_id = MASTER_ID
        broker.role = BrokerRole.SYNC_MASTER
        broker.slave = False
        broker.commit_log.master = True
        broker.offsets.slave = False
        broker.store.correct_offsets = True
        broker.replica_waits = broker._waits_for_replicas()
        broker.waits = broker._waits_for_store()
        broker._compose = broker._suggest_compose if broker.cfg.slave_read_enable else None
        broker.register_master_handlers()
        self._special_services(True)
        self.node.env.process(self._check_sync_state_set(self.master_epoch))
        self.node.trace(BROKER_ROLE, broker.broker_name, "master", self.master_epoch)
        broker.register_all()

    def _mark_reused_offsets(self) -> None:
        """Ground truth, not behaviour: queue offsets another replica of the group already gave out
        beyond this one's queues will be given out again here, to other messages; appends below
        them are recorded as `consume_queue.offset_reused` (a consumer past them skips them)."""
        log = self.broker.commit_log
        for other in self.truth_peers:
            for key, cq in other.reput.queues.items():
                high = max(cq.max_offset, other.commit_log.reused_below.get(key, 0))
                if high > log.queue_offsets.get(key, 0) and high > log.reused_below.get(key, 0):
                    log.reused_below[key] = high
        log._update_slow_append()

    def reused_by_master(self, ranges: dict[int, tuple[int, int]]) -> None:
        """Ground truth, not behaviour: this replica is about to cut records whose queue offsets its
        new master (the one the controller named) has given to other messages meanwhile;
        those messages are recorded as stored at a reused offset (consume_queue.offset_reused), and
        so are the ones it will store below the highest offset cut."""
        for peer in self.truth_peers:
            if peer.node.name != self.master_addr or peer.slave or not peer.node.up:
                continue
            for key, (low, high) in ranges.items():
                cq = peer.reput.queues.get(key)
                if cq is None:
                    continue
                topic = peer.commit_log.topics[key >> QUEUE_ID_BITS]
                for offset in range(max(low, cq.min_offset), min(high + 1, cq.max_offset)):
                    msg = peer.store.look_message_by_offset(cq.unit(offset)[0])
                    if msg is not None:
                        peer.node.trace(OFFSET_REUSED, msg.msg_id, topic, key & QUEUE_MASK, offset)
                if high + 1 > max(cq.max_offset, peer.commit_log.reused_below.get(key, 0)):
                    peer.commit_log.reused_below[key] = high + 1  # and the ones it has yet to give
            peer.commit_log._update_slow_append()

    def change_to_slave(self, master: str) -> None:
        broker = self.broker
        self.master_addr = master
        self._become_slave_side(master)
        self.node.trace(BROKER_ROLE, broker.broker_name, "slave", self.master_epoch)
        broker.register_all()

    def _become_slave_side(self, master: str) -> None:
        broker = self.broker
        broker.ha.change_to_slave()
        broker.broker_id = self.controller_id
        broker.role = BrokerRole.SLAVE
        broker.slave = True
        broker.commit_log.master = False
        broker.offsets.slave = True
        broker.store.correct_offsets = broker.store_cfg.offset_check_in_slave
        broker.reput.replica = True
        broker.replica_waits = False
        broker.waits = False
        broker._compose = broker.slave_processors.compose
        broker.slave_processors.register()
        self._special_services(False)
        broker.slave_sync.master = master
        if master:
            broker.ha_client.follow(master)
        else:
            broker.ha_client.stop()

    def _special_services(self, start: bool) -> None:
        """changeSpecialServiceStatus: schedule, timer dequeue (transaction checks read `slave`)."""
        broker = self.broker
        broker.schedule.set_running(start)
        if broker.timer is not None:
            broker.timer.running = start

    # --- SyncStateSet -------------------------------------------------------------------------
    def _check_sync_state_set(self, epoch: int) -> Generator[Any, Any, None]:
        """schedulingCheckSyncStateSet: shrink by haMaxTimeSlaveNotCatchup, every 5 s (first 3 s)."""
        yield self.node.sleep_us(FIRST_SYNC_US)
        while self.master_epoch == epoch and self.master_addr == self.node.name:
            ha = self.broker.ha
            keep = ha.maybe_shrink()
            if keep != ha.members:
                ha.propose(keep)
            yield self.node.sleep_us(ms(self.cfg.check_sync_state_set_period_ms))

    def alter_sync_state_set(self, members: set[str]) -> None:
        """doReportSyncStateSetChanged: AlterSyncStateSet to the leader (3 s)."""
        if not self.leader or self.master_addr != self.node.name:
            self.broker.ha.remote = None
            return
        ids = tuple(sorted(self.peers[m] for m in members))
        request = AlterSyncStateSet(self.broker.broker_name, self.controller_id, self.master_epoch, ids,
                                    self.ss_epoch)
        self.node.rpc(self.leader, request, RPC_TIMEOUT_US, self._altered, self.master_epoch)

    def _altered(self, epoch: int, info: Any) -> None:
        ha = self.broker.ha
        if epoch != self.master_epoch:
            return
        if isinstance(info, ReplicaInfo) and info.code == SUCCESS:
            self._accept_set(info)
        else:
            ha.remote = None  # the alteration failed: the local set stays
            if not isinstance(info, ReplicaInfo):
                self.leader = ""

    # --- sends --------------------------------------------------------------------------------
    def gate(self, handler: Callable[[str, int, Any], None]) -> Callable[[str, int, Any], None]:
        """CommitLog.asyncPutMessage's check before the write: fewer SyncStateSet members than
        minInSyncReplicas → IN_SYNC_REPLICAS_NOT_ENOUGH (SYSTEM_ERROR to the client)."""
        ha, need, node = self.broker.ha, self.broker.store_cfg.min_in_sync_replicas, self.node
        if need <= 1:
            return handler

        def gated(src: str, req_id: int, req: Any) -> None:
            if ha.in_sync_nums() < need:
                node.env.coverage[COV_IN_SYNC_REPLICAS_NOT_ENOUGH] += 1
                msg = req.msg if hasattr(req, "msg") else req.msgs[0]
                node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, SYSTEM_ERROR)
                node.reply(src, req_id, SendResponse(SYSTEM_ERROR))
                return
            handler(src, req_id, req)

        return gated
