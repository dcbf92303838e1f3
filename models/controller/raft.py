"""The controllers' DLedger (Raft) group, reduced to what the brokers see: which controller leads.

DLedgerController processes a request only on the leader; a write (register, elect, alter the
SyncStateSet) must be appended to a quorum of peers. What is modelled (5.3.3 with DLedger's
defaults, config.py):
- The leader keeps leading while it is up and connected (sim/network.py `connected`: both
  serve, no partition between them) to a majority of the peers, itself included. When it is not,
  it steps down 6 s later (maxHeartBeatLeak 3 × heartBeatTimeIntervalMs 2 s), or at once if its
  process died; until then it still answers reads from memory, and its writes fail after 5 s
  (SYSTEM_ERROR), as appendToDLedgerAndWait's wait runs out.
- Without a leader, the first peer in the configured order that is connected to a majority
  becomes leader after a vote delay drawn from 300-1000 ms (stream `controller.vote`); a peer
  that lost the leader waits for the same 6 s before it stands, so a dead leader is replaced about
  6.3-7 s after it died. No peer connected to a majority: no leader, no election, nothing written.
- The replicated state machine is one ReplicasInfoManager shared by the peers: a committed write
  is on a majority, which is the only side that can elect the next leader, so the next leader
  always has it. Raft's log, terms and votes are not simulated message by message, and the time a
  write takes to reach the quorum (one round trip) is not charged.
- Each peer keeps its own broker-liveness table (heartbeats are not replicated in DLedger mode):
  controller.py.

The checks run every 500 ms (the simulator's granularity for leadership, not a Java period).
At t=0 the first configured peer leads: the controllers start as an established group.
"""

from __future__ import annotations

from typing import Any

from models.controller.config import (
    DLEDGER_HEARTBEAT_INTERVAL_US,
    DLEDGER_MAX_HEARTBEAT_LEAK,
    DLEDGER_VOTE_INTERVAL_US,
)
from models.records import CONTROLLER_LEADER

CHECK_US = 500_000
STEP_DOWN_US = DLEDGER_MAX_HEARTBEAT_LEAK * DLEDGER_HEARTBEAT_INTERVAL_US


class ControllerQuorum:
    def __init__(self, env: Any, peers: list[Any]) -> None:
        self.env = env
        self.peers = peers  # models.controller.controller.Controller, in configured order
        self.majority = len(peers) // 2 + 1
        self.leader: Any = None
        self.term = 0
        self.lost_since_us = -1  # the leader's first check without a majority
        self.voting = False
        self.vote_rng = env.rng.stream("controller.vote")

    def start(self) -> None:
        self._lead(self.peers[0])
        self.env.call_later(CHECK_US, self._check)

    def has_majority(self, peer: Any) -> bool:
        network = self.env.network
        return sum(1 for other in self.peers if network.connected(peer.node.name, other.node.name)) >= self.majority

    def can_write(self, peer: Any) -> bool:
        """A write on `peer` reaches a quorum now."""
        return peer is self.leader and self.has_majority(peer)

    def _lead(self, peer: Any, keep_lost: bool = False) -> None:
        self.leader = peer
        self.term += 1
        if not keep_lost:
            self.lost_since_us = -1
        name = "" if peer is None else peer.node.name
        self.env.tracer.emit(name or self.peers[0].node.name, CONTROLLER_LEADER, name, self.term)

    def _check(self) -> None:
        now = self.env._now
        leader = self.leader
        if leader is not None:
            if not leader.node.up:
                self.lost_since_us = now
                self._lead(None, keep_lost=True)
            elif self.has_majority(leader):
                self.lost_since_us = -1
            elif self.lost_since_us < 0:
                self.lost_since_us = now
            elif now - self.lost_since_us >= STEP_DOWN_US:
                self._lead(None, keep_lost=True)
        if self.leader is None and not self.voting:
            if self._candidate() is not None:
                self.voting = True
                low, high = DLEDGER_VOTE_INTERVAL_US
                since = now if self.lost_since_us < 0 else self.lost_since_us
                at = max(now, since + STEP_DOWN_US) + self.vote_rng.randint(low, high)
                self.env.call_later(at - now, self._vote)
        self.env.call_later(CHECK_US, self._check)

    def _candidate(self) -> Any:
        """The first peer, in configured order, that is up and connected to a majority."""
        return next((p for p in self.peers if p.node.up and self.has_majority(p)), None)

    def _vote(self) -> None:
        """The first peer connected to a majority wins the vote (or the next round tries again)."""
        self.voting = False
        if self.leader is not None:
            return
        candidate = self._candidate()
        if candidate is not None:
            self._lead(candidate)
        else:
            self.lost_since_us = -1
