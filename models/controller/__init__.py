"""The 5.x controller (controller mode, RIP-44): the nodes that elect each broker group's master.

config.py (ControllerConfig and the scenario's `cluster.controller`), raft.py (the DLedger group's
leadership, simplified), replicas_info.py (ReplicasInfoManager: the replicated per-group state),
elect_policy.py (DefaultElectPolicy: `elect_master`, the Java-checked entry point exported here),
controller.py (one controller node: heartbeats and the request processors).
The brokers' side is models/broker/replicas_manager.py and auto_switch_ha.py. Built only for a
scenario with a `cluster.controller` section, for the groups with `broker.enable_controller_mode`;
without it, the classic deployment (no automatic failover).
"""

from models.controller.elect_policy import elect_master

__all__ = ["elect_master"]
