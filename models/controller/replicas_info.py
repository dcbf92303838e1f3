"""controller.impl.manager.ReplicasInfoManager (5.3.3), electing through elect_policy.py's
DefaultElectPolicy.elect.

Per broker group (broker set): the registered brokers (controller-assigned id → address), the
master (its id, or none), the master epoch, the SyncStateSet and its epoch. This is the state
machine the controllers replicate (raft.py); the request checks are the real ones, in order:

- electMaster: the first election of a group (master epoch 0) makes the requester master;
  afterwards `elect_master` (DefaultElectPolicy.elect, elect_policy.py) picks among the *alive*
  SyncStateSet members (alive by the leader's heartbeat table, controller.py): the old master if
  it is among them, else the first by the policy's comparator (epoch, then the `(int)` cast of the
  max-offset difference, then brokerElectionPriority; equals: the first in HashSet order, the
  lowest id). With `enableElectUncleanMaster` every registered broker is the second pool. A new
  master gets master epoch + 1 and a SyncStateSet of itself only (SyncStateSet epoch + 1). No
  candidate: a controller-triggered election still writes the event — master none, master
  epoch + 1, the SyncStateSet kept — and a broker-triggered one fails
  (CONTROLLER_ELECT_MASTER_FAILED) and changes nothing. The same master again:
  CONTROLLER_MASTER_STILL_EXIST, nothing changes.
- alterSyncStateSet: refused unless the requester is the current master with the current master
  epoch and SyncStateSet epoch, every member is registered (else CONTROLLER_INVALID_REPLICAS) and
  alive (else CONTROLLER_BROKER_NOT_ALIVE) — the first offending member in the request set's
  HashSet order decides —, and the master is in it.

Not modelled: the admin's designated election (`preferBrokerId`; elect_master takes it, no
request here carries it).
"""

from __future__ import annotations

from typing import Any

from models.controller.elect_policy import elect_master, java_long_hash_set_order
from models.protocol import (
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
    CONTROLLER_BROKER_NOT_ALIVE,
    CONTROLLER_ELECT_MASTER_FAILED,
    CONTROLLER_FENCED_MASTER_EPOCH,
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
    CONTROLLER_INVALID_MASTER,
    CONTROLLER_INVALID_REPLICAS,
    CONTROLLER_MASTER_NOT_AVAILABLE,
    CONTROLLER_MASTER_STILL_EXIST,
    SUCCESS,
    ReplicaInfo,
)

NO_MASTER = 0  # brokerId of "no master" in the answers (controller ids start at 1)


class BrokerSet:
    """SyncStateInfo + BrokerReplicaInfo of one broker group."""

    __slots__ = ("name", "addrs", "master_id", "master_epoch", "members", "ss_epoch")

    def __init__(self, name: str) -> None:
        self.name = name
        self.addrs: dict[int, str] = {}  # controller id -> address
        self.master_id = NO_MASTER
        self.master_epoch = 0
        self.members: tuple[int, ...] = ()  # SyncStateSet, sorted ids
        self.ss_epoch = 0

    def info(self, alive: Any = None) -> ReplicaInfo:
        """The answer; `alive(addr)` given: the master is named only if it is alive (registerBroker)."""
        addr = self.addrs.get(self.master_id, "")
        if alive is not None and addr and not alive(addr):
            return ReplicaInfo(SUCCESS, NO_MASTER, "", self.master_epoch, self.members, self.ss_epoch)
        return ReplicaInfo(SUCCESS, self.master_id, addr, self.master_epoch, self.members, self.ss_epoch)


class ReplicasInfoManager:
    def __init__(self, unclean: bool) -> None:
        self.unclean = unclean  # enableElectUncleanMaster
        self.sets: dict[str, BrokerSet] = {}

    def register(self, name: str, broker_id: int, addr: str) -> BrokerSet:
        group = self.sets.get(name)
        if group is None:
            group = self.sets[name] = BrokerSet(name)
        group.addrs[broker_id] = addr
        return group

    def elect(self, name: str, requester: int, live: Any) -> tuple[int, BrokerSet | None, int]:
        """(code, broker set, old master id). `requester` -1: triggered by the controller.
        `live(addr)` is the leader's heartbeat entry (epoch, max offset, priority) or None."""
        group = self.sets.get(name)
        if group is None:
            return CONTROLLER_ELECT_MASTER_FAILED, None, NO_MASTER
        old = group.master_id
        if group.master_epoch == 0 and requester > 0:
            new = requester
        else:
            new = self._policy(group, live)
        if new == NO_MASTER:
            if requester > 0:
                return CONTROLLER_ELECT_MASTER_FAILED, group, old
            group.master_id = NO_MASTER
            group.master_epoch += 1
            return CONTROLLER_MASTER_NOT_AVAILABLE, group, old
        if new == old:
            return CONTROLLER_MASTER_STILL_EXIST, group, old
        group.master_id = new
        group.master_epoch += 1
        group.members = (new,)
        group.ss_epoch += 1
        return SUCCESS, group, old

    def _policy(self, group: BrokerSet, live: Any) -> int:
        """DefaultElectPolicy.elect over the group (`live(addr)`: the heartbeat entry or None)."""
        brokers = {}
        for broker_id, addr in group.addrs.items():
            entry = live(addr)
            if entry is not None:
                brokers[broker_id] = {"alive": True, "epoch": entry[0], "max_offset": entry[1], "priority": entry[2]}
        old = None if group.master_id == NO_MASTER else group.master_id
        new = elect_master(group.members, tuple(group.addrs), old, None, brokers, self.unclean)
        return NO_MASTER if new is None else new

    def alter(self, name: str, master_id: int, master_epoch: int, members: tuple[int, ...], ss_epoch: int,
              live: Any) -> int:
        group = self.sets.get(name)
        if group is None or set(members) == set(group.members):
            return CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if master_id != group.master_id:
            return CONTROLLER_INVALID_MASTER
        if master_epoch != group.master_epoch:
            return CONTROLLER_FENCED_MASTER_EPOCH
        if ss_epoch != group.ss_epoch:
            return CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        for broker_id in java_long_hash_set_order(set(members)):
            if broker_id not in group.addrs:
                return CONTROLLER_INVALID_REPLICAS
            if live(group.addrs[broker_id]) is None:
                return CONTROLLER_BROKER_NOT_ALIVE
        if master_id not in members:
            return CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        group.members = tuple(sorted(members))
        group.ss_epoch += 1
        return SUCCESS
