"""HA components with timelines: slave catch-up, SYNC_MASTER acknowledgement and its timeout,
4.x SLAVE_NOT_AVAILABLE, reads from a slave (5.x refuses by default, 4.x serves), divergence
after a master power loss, consumer offsets committed to a slave.

Reference: rocketmq-semantics.md 6.3; store/ha (DefaultHAService, DefaultHAConnection,
DefaultHAClient, GroupTransferService) in 5.3.3, HAService in 4.9.8.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.broker.broker import Broker
from models.broker.config import BrokerConfig, BrokerRole, MessageStoreConfig
from models.message import Message, msg_id_of, record_bytes
from models.protocol import (
    FLUSH_SLAVE_TIMEOUT,
    PULL_NOT_FOUND,
    SLAVE_NOT_AVAILABLE,
    SUCCESS,
    SYSTEM_BUSY,
    PullMessage,
    PullResponse,
    QueryConsumerOffset,
    SendMessage,
    SendResponse,
    UpdateConsumerOffset,
)
from models.records import BROKER_OFFSET_BEHIND_REPLICA, HA_CONNECTED, SLAVE_SYNCED
from sim.disk import DiskConfig
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

TOPIC = "T"
LATENCY_US = 500  # one way


def make_group(master_role: str = "ASYNC_MASTER", version: str = "5.x", slave: bool = True,
               file_size: int = 1 << 20, broker: dict | None = None, **store_kw: Any) -> tuple[SimEnv, dict[str, Any]]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=LATENCY_US / 1000))
    disk = DiskConfig(fsync_latency_ms=2, bandwidth_bytes_per_s=10**12)
    bcfg = BrokerConfig(**(broker or {}))
    out: dict[str, Any] = {}
    cfg = MessageStoreConfig(broker_role=master_role, mapped_file_size_commit_log_bytes=file_size, **store_kw)
    out["master"] = Broker(env, "broker-a", "z", cfg, bcfg, disk, {TOPIC: 1}, [], version=version)
    net.add_node(out["master"].node)
    if slave:
        scfg = cfg.model_copy(update={"broker_role": BrokerRole.SLAVE})
        out["slave"] = Broker(env, "broker-a-s1", "z", scfg, bcfg, disk, {TOPIC: 1}, [], broker_name="broker-a",
                              broker_id=1, version=version, master="broker-a")
        out["slave"].commit_log.share_interns(out["master"].commit_log)
        net.add_node(out["slave"].node)
    client = out["client"] = Node(env, "client")
    net.add_node(client)
    for name in ("master", "slave", "client"):
        if name in out:
            (out[name].node if name != "client" else client).start()
    return env, out


def send(env: SimEnv, group: dict, seq: int, replies: list, body: int = 1000) -> None:
    m = Message(msg_id_of(0, seq), TOPIC, None, -1, body, 0, record_bytes(TOPIC, body))
    group["client"].rpc("broker-a", SendMessage(m, 0), 10_000_000,
                        lambda r: replies.append((env.now, seq, r.code if isinstance(r, SendResponse) else r)))


# --- replication ------------------------------------------------------------------------------------


def offset_calls(env: Any, client: Any, got: list) -> tuple[Callable, Callable]:
    """update(dst, offset) commits group g's offset of queue 0 to `dst`; query(dst) appends
    (second, dst, answered offset) to `got`."""

    def update(dst: str, offset: int) -> None:
        client.rpc(dst, UpdateConsumerOffset("g", TOPIC, 0, offset), 3_000_000, lambda r: None)

    def query(dst: str) -> None:
        client.rpc(dst, QueryConsumerOffset("g", TOPIC, 0), 3_000_000,
                   lambda r: got.append((env.now // 1_000_000, dst, r.offset)))

    return update, query

def test_slave_catches_up_and_follows_within_the_100_ms_writer_wait():
    env, g = make_group(broker={"startup_ms": 0})
    master, slave = g["master"], g["slave"]
    slave.node.crash()  # the slave starts late: the master has a backlog
    replies: list = []
    for i in range(50):
        env.call_later(1_000 + i * 100, send, env, g, i + 1, replies)
    env.call_later(1_000_000, slave.node.restart)
    env.run(until=1_500_000)
    assert slave.commit_log.wrote_position == master.commit_log.wrote_position > 0
    # connect request, its answer, the first offset report: three latencies after the restart
    assert [r[0] for r in env.tracer.of_kind(HA_CONNECTED)] == [1_000_000 + 3 * LATENCY_US]
    # caught up right after connecting: connect + report + one frame (each one latency)
    assert slave.reput.queue(TOPIC, 0).max_offset == 50
    # a message appended now reaches the slave at the writer's next 100 ms wake-up
    env.call_later(0, send, env, g, 51, replies)
    t0 = env.now
    env.run(until=t0 + 50_000)
    assert slave.commit_log.wrote_position < master.commit_log.wrote_position
    env.run(until=t0 + 101_000 + 2 * LATENCY_US)
    assert slave.commit_log.wrote_position == master.commit_log.wrote_position


def test_new_slave_starts_from_the_masters_last_file():
    env, g = make_group(file_size=1 << 16, broker={"startup_ms": 0})
    master, slave = g["master"], g["slave"]
    slave.node.crash()
    replies: list = []
    for i in range(100):  # ~108 KB: two 64 KiB files
        env.call_later(1_000 + i * 100, send, env, g, i + 1, replies)
    env.call_later(1_000_000, slave.node.restart)
    env.run(until=2_000_000)
    files = slave.commit_log.files.files
    assert [f.file_from_offset for f in files] == [1 << 16]  # nothing of the first file
    assert slave.commit_log.wrote_position == master.commit_log.wrote_position


# --- SYNC_MASTER ------------------------------------------------------------------------------------

def test_5x_sync_master_with_in_sync_replicas_2_answers_after_the_slave_acknowledges():
    env, g = make_group("SYNC_MASTER", in_sync_replicas=2)
    replies: list = []
    env.call_later(1_000_000, send, env, g, 1, replies)
    env.run(until=2_000_000)
    # request → master (latency), frame → slave, ack → master, response → client: 4 latencies
    assert replies == [(1_000_000 + 4 * LATENCY_US, 1, SUCCESS)]


def test_5x_sync_master_with_default_in_sync_replicas_does_not_wait():
    env, g = make_group("SYNC_MASTER")
    replies: list = []
    env.call_later(1_000_000, send, env, g, 1, replies)
    env.run(until=2_000_000)
    assert replies == [(1_000_000 + 2 * LATENCY_US, 1, SUCCESS)]


def test_sync_master_without_slave_ack_times_out_after_slave_timeout():
    env, g = make_group("SYNC_MASTER", in_sync_replicas=2)
    g["slave"].node.crash()
    replies: list = []
    env.call_later(2_000_000, send, env, g, 1, replies)
    env.run(until=10_000_000)
    # stored on the master, answered FLUSH_SLAVE_TIMEOUT after slaveTimeout (3 s)
    assert replies == [(2_000_000 + LATENCY_US + 3_000_000 + LATENCY_US, 1, FLUSH_SLAVE_TIMEOUT)]
    assert g["master"].store.max_offset(TOPIC, 0) == 1


def test_4x_sync_master_without_a_slave_answers_slave_not_available_at_once():
    env, g = make_group("SYNC_MASTER", version="4.x", slave=False)
    replies: list = []
    env.call_later(1_000_000, send, env, g, 1, replies)
    env.run(until=2_000_000)
    assert replies == [(1_000_000 + 2 * LATENCY_US, 1, SLAVE_NOT_AVAILABLE)]


def test_4x_sync_master_with_a_slave_waits_for_it():
    env, g = make_group("SYNC_MASTER", version="4.x")
    replies: list = []
    env.call_later(1_000_000, send, env, g, 1, replies)
    env.run(until=2_000_000)
    assert replies == [(1_000_000 + 4 * LATENCY_US, 1, SUCCESS)]


# --- reads from a slave ---------------------------------------------------------------------------

def _pull_from_slave(version: str, slave_read_enable: bool = False) -> PullResponse:
    env, g = make_group(version=version, broker={"slave_read_enable": slave_read_enable})
    replies: list = []
    for i in range(5):
        env.call_later(1_000_000 + i * 1_000, send, env, g, i + 1, replies)
    env.call_later(1_500_000, g["master"].node.crash)  # the master is gone; its slave has the data
    got: list = []
    pull = PullMessage("g", TOPIC, 0, 0, 32, -1, 15_000_000, None)
    env.call_later(2_000_000, g["client"].rpc, "broker-a-s1", pull, 30_000_000, got.append)
    env.run(until=3_000_000)
    return got[0]


def test_5x_slave_rejects_pulls_by_default():
    response = _pull_from_slave("5.x")
    assert response.code == SYSTEM_BUSY and response.msgs == ()


def test_5x_slave_with_slave_read_enable_serves_and_suggests_the_master():
    response = _pull_from_slave("5.x", slave_read_enable=True)
    assert response.code == SUCCESS and len(response.msgs) == 5
    assert response.suggest_which_broker_id == 0


def test_4x_slave_serves_pulls_whatever_slave_read_enable_says():
    response = _pull_from_slave("4.x")
    assert response.code == SUCCESS and [m.queue_offset for m in response.msgs] == [0, 1, 2, 3, 4]


def test_4x_slave_holds_a_caught_up_pull_and_wakes_it_only_by_the_5_s_scan():
    env, g = make_group(version="4.x")
    replies: list = []
    got: list = []
    pull = PullMessage("g", TOPIC, 0, 0, 32, -1, 15_000_000, None)
    env.call_later(1_000_000, g["client"].rpc, "broker-a-s1", pull, 30_000_000,
                   lambda r: got.append((env.now, r.code, len(r.msgs))))
    env.call_later(1_200_000, send, env, g, 1, replies)  # replicated within ~100 ms
    env.run(until=20_000_000)
    # held on the slave (not found), woken by the hold service's 5 s scan, not by the arrival
    assert got == [(5_000_000 + LATENCY_US, SUCCESS, 1)]


def test_slave_keeps_its_own_queue_offsets_when_the_pull_offset_is_out_of_range():
    env, g = make_group(version="4.x")
    got: list = []
    pull = PullMessage("g", TOPIC, 0, 7, 32, -1, 0, None)  # beyond the slave's max offset (0)
    env.call_later(1_000_000, g["client"].rpc, "broker-a-s1", pull, 30_000_000, got.append)
    env.run(until=2_000_000)
    assert got[0].code not in (SUCCESS,) and got[0].next_begin_offset == 7 and got[0].code != PULL_NOT_FOUND


# --- consumer offsets on a slave ------------------------------------------------------------------

def test_4x_offsets_committed_to_a_slave_are_overwritten_by_the_returning_masters():
    """SlaveSynchronize (4.9.8: first after 3 s, then every 10 s) copies the master's offsets over
    the slave's; an offset a consumer commits to the slave while the master is down is kept
    until the master is back, then replaced (putAll of the group's table), and never copied back
    to the master."""
    env, g = make_group(version="4.x", broker={"startup_ms": 0})
    master, slave, client = g["master"], g["slave"], g["client"]
    got: list = []
    update, query = offset_calls(env, client, got)

    env.call_later(500_000, update, "broker-a", 5)
    env.call_later(3_500_000, query, "broker-a-s1")  # the first sync (3 s) brought the master's 5
    env.call_later(12_000_000, master.node.crash)  # after the master's first persist (10 s)
    env.call_later(12_500_000, update, "broker-a-s1", 9)  # the slave accepts a commit
    env.call_later(14_000_000, query, "broker-a-s1")  # the 13 s sync found no master: still 9
    env.call_later(15_000_000, master.node.restart)
    env.call_later(24_000_000, query, "broker-a-s1")  # the 23 s sync: the master's 5 again
    env.call_later(24_000_000, query, "broker-a")  # the slave's 9 never reached the master
    env.run(until=25_000_000)
    assert [x for x in got if x[1] == "broker-a-s1"] == [(3, "broker-a-s1", 5), (14, "broker-a-s1", 9),
                                                         (24, "broker-a-s1", 5)]
    assert (24, "broker-a", 5) in got
    assert slave.offsets.table[("g", TOPIC, 0)] == 5


def test_5x_slave_copies_offsets_first_after_a_minute_and_answers_behind_the_master_are_recorded():
    """5.3.3 SlaveSynchronize: `lastSyncTimeMs` starts at the broker's start, so the 3 s checks
    (from 10 s) copy the master's offsets first at 61 s. A QUERY_CONSUMER_OFFSET answered below
    what the other replica holds is recorded (ground truth for the `failover` duplicate cause):
    the slave before its first copy, the slave after the master took a newer commit and crashed,
    the returning master without the commit the slave took meanwhile; not an answer that agrees."""
    env, g = make_group(version="5.x", broker={"startup_ms": 0})
    master, slave, client = g["master"], g["slave"], g["client"]
    master.offsets.peers, slave.offsets.peers = (slave.offsets,), (master.offsets,)  # as rmqsim/runner.py wires them
    got: list = []
    update, query = offset_calls(env, client, got)

    env.call_later(500_000, update, "broker-a", 5)
    env.call_later(30_000_000, query, "broker-a-s1")  # no copy yet: not found
    env.call_later(62_000_000, query, "broker-a-s1")  # the 61 s copy: 5, no record
    env.call_later(63_000_000, update, "broker-a", 8)
    env.call_later(64_000_000, master.node.crash)
    env.call_later(65_000_000, query, "broker-a-s1")  # 5, the crashed master had 8
    env.call_later(66_000_000, update, "broker-a-s1", 9)
    env.call_later(70_000_000, master.node.restart)
    env.call_later(72_000_000, query, "broker-a")  # its file's 5, the slave took 9
    env.run(until=73_000_000)
    assert [r[0] // 1_000_000 for r in env.tracer.of_kind(SLAVE_SYNCED)] == [61]
    assert [x[2] for x in got] == [-1, 5, 5, 5]
    behind = [(r[0] // 1_000_000, r[1], r[-2], r[-1]) for r in env.tracer.of_kind(BROKER_OFFSET_BEHIND_REPLICA)]
    assert behind == [(30, "broker-a-s1", -1, 5), (65, "broker-a-s1", 5, 8), (72, "broker-a", 5, 9)]
