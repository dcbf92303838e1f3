"""One controller node: ControllerManager, DLedgerController's request processing and
DefaultBrokerHeartbeatManager (5.3.3, DLedger mode).

- Heartbeats: every broker sends BROKER_HEARTBEAT (oneway) to every controller each
  `brokerHeartbeatInterval` (1 s); each controller keeps its own table (address → last heartbeat,
  the broker's timeout `controllerHeartBeatTimeoutMills` (10 s), epoch, max offset, priority; epoch
  and max offset are updated only upward, as onBrokerHeartbeat does). A scan every
  `scanNotActiveBrokerInterval` (5 s, first after 2 s) drops brokers whose timeout ran out; a
  broker whose connection closed (its process died) is dropped at once. A dropped broker that
  was its group's master makes the Raft leader trigger an election (electMaster with no
  requester); so does the leader's scanInactiveMasterAndTriggerReelect every 5 s for a group whose
  master is not alive while another of its brokers is.
- Requests (only the leader serves them; another peer answers CONTROLLER_NOT_LEADER at once):
  GetReplicaInfo is read from memory; register, elect and AlterSyncStateSet are writes — on a
  leader without a quorum they fail after 5 s with SYSTEM_ERROR (raft.py). After an election
  that named a new master the leader sends NOTIFY_BROKER_ROLE_CHANGED to the group's alive
  brokers (`notifyBrokerRoleChanged`, oneway, no retry).
- GetMetaData is answered by any peer with the leader it knows (the quorum's).
- A controller-triggered election (ControllerManager.triggerElectMaster) makes up to
  `electMasterMaxRetryCount` (3) tries, the next as soon as one answers anything but SUCCESS:
  an election that finds no candidate writes its masterless event each time (master epoch + 1
  per try), one that keeps the old master (CONTROLLER_MASTER_STILL_EXIST) changes nothing; a
  try on a controller that is no longer the leader is refused at once (CONTROLLER_NOT_LEADER);
  a try whose write cannot reach a quorum is given up after 3 s (`get(3, SECONDS)`) and the
  next is made then.

Simplified: controller ids equal the replica's position in the group + 1 (getNextBrokerId and
applyBrokerId's temp-file protocol are not modelled). A try without a quorum writes nothing
(DLedger's append waits 5 s; a quorum back within those 5 s would commit it late, and the
event scheduler runs the next try only after that wait ends): the next try checks the quorum
3 s later.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.controller.config import (
    ELECT_MASTER_MAX_RETRY_COUNT,
    ELECT_TRY_TIMEOUT_US,
    FIRST_SCAN_US,
    WRITE_TIMEOUT_US,
    ControllerConfig,
)
from models.controller.replicas_info import NO_MASTER, ReplicasInfoManager
from models.coverage_points import (
    COV_CONTROLLER_ELECTED_NEW_MASTER,
    COV_CONTROLLER_NO_CANDIDATE,
    COV_CONTROLLER_WRITE_WITHOUT_QUORUM,
)
from models.protocol import (
    CONTROLLER_MASTER_NOT_AVAILABLE,
    CONTROLLER_NOT_LEADER,
    SUCCESS,
    SYSTEM_ERROR,
    AlterSyncStateSet,
    BrokerHeartbeatToController,
    CodeResponse,
    ControllerMetadata,
    ElectMaster,
    GetControllerMetadata,
    GetReplicaInfo,
    NotifyBrokerRoleChanged,
    RegisterBrokerToController,
    ReplicaInfo,
)
from models.records import CONTROLLER_ELECTED, CONTROLLER_SYNC_STATE_SET
from sim.env import ms
from sim.node import Node


class Controller:
    def __init__(self, env: Any, name: str, zone: str, cfg: ControllerConfig, quorum_state: Any) -> None:
        self.node = Node(env, name, zone)
        self.cfg = cfg
        self.quorum: Any = None  # raft.ControllerQuorum, set once every peer exists
        self.replicas: ReplicasInfoManager = quorum_state  # shared: the replicated state machine
        # brokerLiveTable: addr -> [last heartbeat µs, timeout µs, epoch, max offset, priority, name]
        self.live: dict[str, list] = {}
        node = self.node
        node.handle(BrokerHeartbeatToController, self.on_heartbeat)
        node.handle(GetControllerMetadata, self.on_metadata)
        node.handle(RegisterBrokerToController, self.on_register)
        node.handle(GetReplicaInfo, self.on_replica_info)
        node.handle(ElectMaster, self.on_elect)
        node.handle(AlterSyncStateSet, self.on_alter)
        node.add_service(self.scan_not_active_broker)
        node.add_service(self.scan_inactive_master)
        node.on_crash(self.live.clear)

    # --- heartbeats ---------------------------------------------------------------------------
    def on_heartbeat(self, src: str, req_id: int, hb: BrokerHeartbeatToController) -> None:
        entry = self.live.get(hb.addr)
        now = self.node.env._now
        if entry is None:
            self.live[hb.addr] = [now, hb.timeout_us, hb.epoch, hb.max_offset, hb.priority, hb.broker_name]
            self.node.env.network.watch(self.node, hb.addr, self._channel_closed)
            return
        entry[0], entry[1], entry[4] = now, hb.timeout_us, hb.priority
        if hb.epoch > entry[2] or (hb.epoch == entry[2] and hb.max_offset > entry[3]):
            entry[2], entry[3] = hb.epoch, hb.max_offset

    def alive(self, addr: str) -> tuple[int, int, int] | None:
        """isBrokerActive: (epoch, max offset, priority) of a broker whose timeout has not run out."""
        entry = self.live.get(addr)
        if entry is None or entry[0] + entry[1] < self.node.env._now:
            return None
        return entry[2], entry[3], entry[4]

    def _channel_closed(self, addr: str) -> None:
        entry = self.live.pop(addr, None)
        if entry is not None:
            self._inactive(entry[5], addr)

    def scan_not_active_broker(self) -> Generator[Any, Any, None]:
        yield self.node.sleep_us(FIRST_SCAN_US)
        while True:
            now = self.node.env._now
            for addr, entry in list(self.live.items()):
                if entry[0] + entry[1] < now:
                    del self.live[addr]
                    self._inactive(entry[5], addr)
            yield self.node.sleep_us(ms(self.cfg.scan_not_active_broker_interval_ms))

    def _inactive(self, name: str, addr: str) -> None:
        """ControllerManager.onBrokerInactive: the leader re-elects if the master went."""
        if self.quorum.leader is not self:
            return
        group = self.replicas.sets.get(name)
        if group is not None and group.master_id != NO_MASTER and group.addrs.get(group.master_id) == addr:
            self.trigger_elect_master(name, "master_inactive")

    def scan_inactive_master(self) -> Generator[Any, Any, None]:
        """DLedgerController.scanInactiveMasterAndTriggerReelect (leader only, every 5 s)."""
        while True:
            yield self.node.sleep_us(ms(self.cfg.scan_not_active_broker_interval_ms))
            if self.quorum.leader is not self:
                continue
            for name, group in list(self.replicas.sets.items()):
                if group.master_id == NO_MASTER or self.alive(group.addrs.get(group.master_id, "")):
                    continue
                if any(self.alive(a) for a in group.addrs.values()):
                    self.trigger_elect_master(name, "master_inactive")

    # --- requests -----------------------------------------------------------------------------
    def on_metadata(self, src: str, req_id: int, req: GetControllerMetadata) -> None:
        leader = self.quorum.leader
        self.node.reply(src, req_id, ControllerMetadata(SUCCESS, "" if leader is None else leader.node.name))

    def _serve(self, src: str, req_id: int, write: Any) -> bool:
        """DLedgerController.appendEvent: not the leader → CONTROLLER_NOT_LEADER; a write on a
        leader without a quorum → SYSTEM_ERROR after the 5 s wait. True: the caller serves the
        request (False: it is answered already)."""
        if self.quorum.leader is not self:
            self.node.reply(src, req_id, CodeResponse(CONTROLLER_NOT_LEADER))
        elif write is not None and not self.quorum.can_write(self):
            self.node.env.coverage[COV_CONTROLLER_WRITE_WITHOUT_QUORUM] += 1
            self.node.call_later(WRITE_TIMEOUT_US, self.node.reply, src, req_id, CodeResponse(SYSTEM_ERROR))
        else:
            return True
        return False

    def trigger_elect_master(self, name: str, reason: str, tries_left: int = ELECT_MASTER_MAX_RETRY_COUNT) -> None:
        """ControllerManager.triggerElectMaster: up to electMasterMaxRetryCount tries (module docstring)."""
        while tries_left > 0:
            tries_left -= 1
            if self.quorum.leader is not self:
                return  # CONTROLLER_NOT_LEADER at once: every try left fails the same way
            if not self.quorum.can_write(self):
                if tries_left > 0:
                    self.node.call_later(ELECT_TRY_TIMEOUT_US, self.trigger_elect_master, name, reason, tries_left)
                return
            code, _group = self._elect(name, -1, reason)
            if code == SUCCESS:
                return

    def on_register(self, src: str, req_id: int, req: RegisterBrokerToController) -> None:
        if self._serve(src, req_id, True):
            group = self.replicas.register(req.broker_name, req.broker_id, req.addr)
            self.node.reply(src, req_id, group.info(self.alive))

    def on_replica_info(self, src: str, req_id: int, req: GetReplicaInfo) -> None:
        if self._serve(src, req_id, None):
            group = self.replicas.sets.get(req.broker_name)
            self.node.reply(src, req_id, group.info() if group is not None else ReplicaInfo(SUCCESS))

    def on_elect(self, src: str, req_id: int, req: ElectMaster) -> None:
        if self._serve(src, req_id, True):
            code, group = self._elect(req.broker_name, req.broker_id, "broker_request")
            info = group.info() if group is not None else ReplicaInfo(code)
            self.node.reply(src, req_id, info._replace(code=code))

    def _elect(self, name: str, requester: int, reason: str) -> tuple[int, Any]:
        code, group, old = self.replicas.elect(name, requester, self.alive)
        if group is not None and (code == SUCCESS or code == CONTROLLER_MASTER_NOT_AVAILABLE):
            master = group.addrs.get(group.master_id, "")
            if not master:
                self.node.env.coverage[COV_CONTROLLER_NO_CANDIDATE] += 1
            elif old != NO_MASTER:  # not a group's first election
                self.node.env.coverage[COV_CONTROLLER_ELECTED_NEW_MASTER] += 1
            self.node.trace(CONTROLLER_ELECTED, name, master, group.addrs.get(old, ""), group.master_epoch, reason)
            if code == SUCCESS:
                self._trace_set(group)
                if self.cfg.notify_broker_role_changed:
                    for addr in group.addrs.values():
                        if self.alive(addr):
                            self.node.send(addr, NotifyBrokerRoleChanged(group.info()))
        return code, group

    def on_alter(self, src: str, req_id: int, req: AlterSyncStateSet) -> None:
        if self._serve(src, req_id, True):
            code = self.replicas.alter(req.broker_name, req.master_id, req.master_epoch, req.members,
                                       req.sync_state_set_epoch, self.alive)
            group = self.replicas.sets.get(req.broker_name)
            if code == SUCCESS:
                self._trace_set(group)
            self.node.reply(src, req_id, group.info()._replace(code=code) if group else ReplicaInfo(code))

    def _trace_set(self, group: Any) -> None:
        members = ",".join(group.addrs[i] for i in group.members if i in group.addrs)
        self.node.trace(CONTROLLER_SYNC_STATE_SET, group.name, members, group.ss_epoch)
