"""controller.ControllerConfig (5.3.3) and the scenario's `cluster.controller` section.

A controller-mode cluster runs a DLedger group of controller nodes (standalone here; the
NameServer-embedded deployment behaves the same for the brokers). Brokers of a group with
`broker.enable_controller_mode` register with it and have their master elected by it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sim.config import NodeName, PositiveIntMs

# DLedger (openmessaging dledger, DLedgerConfig defaults; DLedgerController sets none of them):
# the leader heartbeats every 2 s and a follower that missed 3 of them stands for election, a
# leader that missed 3 acknowledgements from a quorum steps down; votes wait 300-1000 ms
DLEDGER_HEARTBEAT_INTERVAL_US = 2_000_000  # heartBeatTimeIntervalMs
DLEDGER_MAX_HEARTBEAT_LEAK = 3  # maxHeartBeatLeak
DLEDGER_VOTE_INTERVAL_US = (300_000, 1_000_000)  # minVoteIntervalMs, maxVoteIntervalMs
WRITE_TIMEOUT_US = 5_000_000  # DLedgerController appendToDLedgerAndWait: 5 s, then SYSTEM_ERROR
FIRST_SCAN_US = 2_000_000  # DefaultBrokerHeartbeatManager: scanNotActiveBroker's initial delay
ELECT_MASTER_MAX_RETRY_COUNT = 3  # ControllerConfig.electMasterMaxRetryCount
ELECT_TRY_TIMEOUT_US = 3_000_000  # ControllerManager.triggerElectMaster: each try's get(3, TimeUnit.SECONDS)


class ControllerNodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: NodeName = Field(description="node name of this controller (a DLedger peer)")
    zone: NodeName = Field("zone-a", description="zone (machine room) of its host")


class ControllerConfig(BaseModel):
    """ControllerConfig subset, plus the controller nodes."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    nodes: list[ControllerNodeSpec] = Field(
        default_factory=lambda: [ControllerNodeSpec(name=f"controller-{i}") for i in (1, 2, 3)],
        min_length=1, max_length=9, description=(
            "the controllers (DLedger peers; default controller-1..3); the first is the Raft leader at start"))
    scan_not_active_broker_interval_ms: PositiveIntMs = Field(5_000, description=(
        "scanNotActiveBrokerInterval (ms between scans for brokers whose heartbeat timed out)"))
    enable_elect_unclean_master: bool = Field(False, description=(
        "enableElectUncleanMaster (elect a broker outside the SyncStateSet when none in it is alive)"))
    notify_broker_role_changed: bool = Field(True, description=(
        "notifyBrokerRoleChanged (tell a group's brokers of an election at once)"))
