"""ReplicasManager (5.3.3, models/broker/replicas_manager.py) on timelines against scripted
controllers and a scripted master: what a controller-mode broker asks, whom, and when.

- startBasicService: GetMetaData 3 tries 1 s apart, then RETRY_INTERVAL_SECOND (5 s); register 5
  tries, each failure followed by `random.nextInt(1000)` ms from the broker's own stream, then
  5 s, from the failed step on (a finished step is not repeated);
- controllerLeaderAddress changes only in updateControllerMetadata (3 s after the first
  success, then every syncControllerMetadataPeriod), never because a request failed;
- changeToSlave with the same master and a higher epoch keeps the HA connection; another master
  reconnects; handleSlaveSynchronize's task copies the master's timer checkpoint every 3 s.

Each latency is 0.5 ms one way, so a request sent at t arrives at t + 500 µs and its answer at
t + 1 ms.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.broker.timer_store import GetTimerCheckPoint, TimerCheckPointAnswer
from models.protocol import (
    CONTROLLER_NOT_LEADER,
    SUCCESS,
    SYSTEM_ERROR,
    AllConsumerOffsets,
    AllDelayOffsets,
    AlterSyncStateSet,
    BrokerHeartbeatToController,
    CodeResponse,
    ControllerMetadata,
    ElectMaster,
    GetAllConsumerOffset,
    GetAllDelayOffset,
    GetControllerMetadata,
    GetReplicaInfo,
    HaClose,
    HaConnect,
    HaHandshake,
    HaReport,
    NotifyBrokerRoleChanged,
    RegisterBrokerToController,
    ReplicaInfo,
)
from models.records import BROKER_ROLE
from sim.disk import DiskConfig
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng, derive_seed
from sim.trace import Tracer

S, MS = 1_000_000, 1_000
HALF = 500  # one-way latency, µs
SEED = 1
PEERS = {"broker-a": 1, "broker-b": 2, "broker-c": 3}
ROLE_B = ReplicaInfo(SUCCESS, 2, "broker-b", 1, (2,), 1)  # broker-b master at epoch 1


class Fake:
    """A scripted peer: logs every request (arrival µs, payload) and answers by payload type."""

    def __init__(self, env: SimEnv, name: str) -> None:
        self.node = Node(env, name, "zone-a")
        self.env = env
        self.log: list[tuple[int, Any]] = []
        self.answers: dict[type, Callable[[Any], Any]] = {}
        for kind in (GetControllerMetadata, RegisterBrokerToController, GetReplicaInfo, ElectMaster, AlterSyncStateSet,
                     BrokerHeartbeatToController, HaConnect, HaReport, HaClose, GetTimerCheckPoint,
                     GetAllConsumerOffset, GetAllDelayOffset):
            self.node.handle(kind, self._on)

    def _on(self, src: str, req_id: int, req: Any) -> None:
        self.log.append((self.env.now, req))
        answer = self.answers.get(type(req))
        if req_id and answer is not None:
            self.node.reply(src, req_id, answer(req))

    def arrivals(self, kind: type) -> list[int]:
        return [t for t, r in self.log if type(r) is kind]


def world(**broker_kw: Any) -> tuple[SimEnv, Broker, dict[str, Fake]]:
    env = SimEnv()
    env.rng = Rng(SEED)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=HALF / 1000))
    cfg = BrokerConfig(enable_controller_mode=True, **broker_kw)
    b = Broker(env, "broker-a", "zone-a", MessageStoreConfig(mapped_file_size_commit_log_bytes=1 << 20), cfg,
               DiskConfig(), {"T": 4}, [], broker_name="g", controllers=["c1", "c2"], peers=PEERS)
    net.add_node(b.node)
    fakes = {name: Fake(env, name) for name in ("c1", "c2", "broker-b", "broker-c")}
    for fake in fakes.values():
        net.add_node(fake.node)
        fake.node.start()
        fake.answers[HaConnect] = lambda _r: HaHandshake(SUCCESS, 0, ())
        fake.answers[GetTimerCheckPoint] = lambda _r: TimerCheckPointAnswer(SUCCESS, 0, 0)
        fake.answers[GetAllConsumerOffset] = lambda _r: AllConsumerOffsets(SUCCESS, ())
        fake.answers[GetAllDelayOffset] = lambda _r: AllDelayOffsets(SUCCESS, ())
    b.node.start()
    return env, b, fakes


def leader_is(fakes: dict[str, Fake], leader: str) -> None:
    for name in ("c1", "c2"):
        fakes[name].answers[GetControllerMetadata] = lambda _r: ControllerMetadata(SUCCESS, leader)


def serve(fake: Fake, info: ReplicaInfo = ROLE_B) -> None:
    """A leader that names broker-b the master."""
    fake.answers[RegisterBrokerToController] = lambda _r: info
    fake.answers[GetReplicaInfo] = lambda _r: info


def test_get_metadata_three_tries_one_second_apart_then_the_five_second_retry() -> None:
    env, _b, fakes = world()
    leader_is(fakes, "")  # no controller knows a leader
    env.run(until=20 * S)
    # a try asks c1 then c2 (2 ms); 3 tries 1 s apart, 1 s after the last, then 5 s
    block = 3 * (2 * MS + 1 * S) + 5 * S
    starts = [b0 + k * (2 * MS + 1 * S) for b0 in (0, block) for k in range(3)]
    assert fakes["c1"].arrivals(GetControllerMetadata)[:6] == [t + HALF for t in starts]
    assert fakes["c2"].arrivals(GetControllerMetadata)[:6] == [t + 1 * MS + HALF for t in starts]
    assert not fakes["c1"].arrivals(RegisterBrokerToController)
    assert not fakes["c1"].arrivals(BrokerHeartbeatToController)  # scheduleSendHeartbeat skips a fenced broker


def test_register_five_tries_with_the_broker_streams_random_sleeps_then_five_seconds() -> None:
    env, b, fakes = world()
    leader_is(fakes, "c1")
    fakes["c1"].answers[RegisterBrokerToController] = lambda _r: CodeResponse(SYSTEM_ERROR)
    env.run(until=16 * S)
    draws = random.Random(derive_seed(SEED, "broker-a.replicas_manager"))
    t, want = 1 * MS, []  # GetMetaData answered at 1 ms
    for _block in range(2):
        for _try in range(5):
            want.append(t + HALF)
            t += 1 * MS + draws.randrange(1000) * MS  # the answer, then Thread.sleep(random.nextInt(1000))
        t += 5 * S  # RETRY_INTERVAL_SECOND, then startBasicService from the register step
    assert fakes["c1"].arrivals(RegisterBrokerToController)[:10] == want
    # GetMetaData is not asked again by the retries: only by updateControllerMetadata's schedule
    assert fakes["c1"].arrivals(GetControllerMetadata) == [HALF, 1 * MS + 3 * S + HALF, 1 * MS + 13 * S + HALF]
    assert b.broker_id == 1 and b.isolated  # still fenced, never registered


def test_the_leader_address_changes_only_at_update_controller_metadata() -> None:
    env, b, fakes = world(sync_broker_metadata_period_ms=3_000)
    leader_is(fakes, "c1")
    serve(fakes["c1"])
    serve(fakes["c2"])
    env.run(until=14 * S)
    assert b.replicas.running and b.replicas.master_addr == "broker-b"
    leader_is(fakes, "c2")  # c1 steps down at 14 s
    fakes["c1"].answers[GetReplicaInfo] = lambda _r: CodeResponse(CONTROLLER_NOT_LEADER)
    env.run(until=30 * S)
    # RUNNING at 2 ms: GetReplicaInfo at 2 ms + 3 s + k·3 s; GetMetaData's schedule from 1 ms:
    # 3 s, then every 10 s (23.001 s: the answer names c2 at 23.002 s)
    asked = sorted([(t, "c1") for t in fakes["c1"].arrivals(GetReplicaInfo)] +
                   [(t, "c2") for t in fakes["c2"].arrivals(GetReplicaInfo)])
    after = [(t, who) for t, who in asked if t > 14 * S]
    sent = [2 * MS + 3 * S + k * 3 * S + HALF for k in range(4, 8)]
    assert after[:4] == list(zip(sent, ["c1", "c1", "c1", "c2"], strict=True)), after
    assert fakes["c1"].arrivals(GetControllerMetadata) == [HALF] + [1 * MS + s * S + HALF for s in (3, 13, 23)]


def test_same_master_higher_epoch_keeps_the_connection_another_master_reconnects() -> None:
    env, b, fakes = world()
    leader_is(fakes, "c1")
    serve(fakes["c1"])
    env.run(until=10 * S)
    master = fakes["broker-b"]
    assert master.arrivals(HaConnect) == [2 * MS + HALF]  # followed at the register answer (1.5 ms + 0.5)
    fakes["c1"].node.send("broker-a", NotifyBrokerRoleChanged(ReplicaInfo(SUCCESS, 2, "broker-b", 2, (2,), 2)))
    env.run(until=12 * S)
    assert b.replicas.master_epoch == 2
    assert master.arrivals(HaConnect) == [2 * MS + HALF] and not master.arrivals(HaClose)
    roles = [(r[4], r[5]) for r in env.tracer.of_kind(BROKER_ROLE)]
    assert roles[-2:] == [("slave", 1), ("slave", 2)]
    fakes["c1"].node.send("broker-a", NotifyBrokerRoleChanged(ReplicaInfo(SUCCESS, 3, "broker-c", 3, (3,), 3)))
    env.run(until=13 * S)
    assert master.arrivals(HaClose) == [12 * S + 2 * HALF]  # sent at 12 s: the old connection closed
    assert fakes["broker-c"].arrivals(HaConnect) == [12 * S + 2 * HALF]


def test_the_slave_copies_the_masters_timer_checkpoint_every_three_seconds_from_the_role_change() -> None:
    env, b, fakes = world()
    leader_is(fakes, "c1")
    serve(fakes["c1"])
    fakes["broker-b"].answers[GetTimerCheckPoint] = lambda _r: TimerCheckPointAnswer(SUCCESS, 7 * S, 0)
    env.run(until=10 * S)
    # changeToSlave at the register answer (1.5 ms... answer at 2 ms): the task at +3 s, +6 s, +9 s
    assert fakes["broker-b"].arrivals(GetTimerCheckPoint) == [2 * MS + k * 3 * S + HALF for k in (1, 2, 3)]
    assert b.timer.checkpoint.last_read_us == 7 * S and b.timer.curr_read_us == 7 * S
    # the same master at a higher epoch: the task goes on, unrescheduled
    fakes["c1"].node.send("broker-a", NotifyBrokerRoleChanged(ReplicaInfo(SUCCESS, 2, "broker-b", 2, (2,), 2)))
    env.run(until=16 * S)
    assert fakes["broker-b"].arrivals(GetTimerCheckPoint)[3:] == [2 * MS + k * 3 * S + HALF for k in (4, 5)]


def test_a_new_master_checks_its_sync_state_set_at_once_and_every_five_seconds_from_three() -> None:
    """changeToMaster submits checkSyncStateSetAndDoReport at once: a member with no connection to
    the new master (broker-b here never connects) leaves the set; then schedulingCheckSyncStateSet."""
    env, b, fakes = world()
    leader_is(fakes, "c1")
    serve(fakes["c1"], ReplicaInfo(SUCCESS, 1, "broker-a", 1, (1, 2), 1))
    fakes["c1"].answers[AlterSyncStateSet] = lambda _r: CodeResponse(SYSTEM_ERROR)  # refused: checked again
    env.run(until=14 * S)
    assert b.replicas.master_addr == "broker-a" and not b.slave
    alters = [(t, r.members) for t, r in fakes["c1"].log if type(r) is AlterSyncStateSet]
    # master at the register answer (2 ms): at once, then 3 s, 8 s, 13 s later
    assert alters == [(2 * MS + HALF + k, (1,)) for k in (0, 3 * S, 8 * S, 13 * S)]
    # heartbeats: the one of startBasicService (at 2 ms), then every 1 s from the start, unfenced
    beats = fakes["c1"].arrivals(BrokerHeartbeatToController)
    assert beats[:3] == [2 * MS + HALF, 1 * S + HALF, 2 * S + HALF]
