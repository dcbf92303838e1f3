"""Broker store: CommitLog append, flush services, fault durability, dispatch, getMessage.

Reference: rocketmq-semantics.md 5.2 (append), 5.3 (flush), 5.4 (faults), 5.5 (dispatch),
5.6 (getMessage).
"""

from __future__ import annotations

import pytest

from models.broker.broker import Broker
from models.broker.commit_log import BLANK_MIN_BYTES, FLUSH_DISK_TIMEOUT, PUT_OK, R_PHYS, R_QOFF, R_SIZE
from models.broker.config import BrokerConfig, FlushDiskType, MessageStoreConfig
from models.broker.message_store import (
    FOUND,
    NO_MATCHED_LOGIC_QUEUE,
    NO_MATCHED_MESSAGE,
    NO_MESSAGE_IN_QUEUE,
    OFFSET_OVERFLOW_BADLY,
    OFFSET_OVERFLOW_ONE,
    OFFSET_TOO_SMALL,
)
from models.message import Message, record_bytes
from models.protocol import FLUSH_DISK_TIMEOUT as CODE_FLUSH_DISK_TIMEOUT
from models.protocol import SUCCESS, SendMessage
from models.records import COMMIT_LOG_FLUSHED
from sim.disk import DiskConfig
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

TOPIC = "T"
FSYNC_US = 2_000
BANDWIDTH = 1_000_000_000  # 1 byte per ns: transfer_us = bytes // 1000
FILE = 65_536


def make_broker(flush: str = "ASYNC_FLUSH", **store_kw) -> tuple[SimEnv, Broker]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env)
    store_kw.setdefault("mapped_file_size_commit_log_bytes", FILE)
    cfg = MessageStoreConfig(flush_disk_type=flush, **store_kw)
    disk = DiskConfig(fsync_latency_ms=FSYNC_US / 1000, bandwidth_bytes_per_s=BANDWIDTH)
    broker = Broker(env, "broker-a", "zone-a", cfg, BrokerConfig(), disk, {TOPIC: 4}, [])
    net.add_node(broker.node)
    broker.node.start()
    return env, broker


_seq = [0]


def msg(body: int = 100, tags: str | None = None, topic: str = TOPIC) -> Message:
    _seq[0] += 1
    return Message(f"p-{_seq[0]}", topic, tags, None, body, 0, "p")


def body_for(size: int, tags: str | None = None) -> int:
    """Body length giving a record of exactly `size` bytes."""
    return size - record_bytes(msg(0, tags))


def at(env: SimEnv, t_us: int, fn, *args) -> None:
    env.call_later(t_us - env.now, fn, *args)


def flushed_timeline(env: SimEnv) -> list[tuple[int, int]]:
    return [(r[0], r[3]) for r in env.tracer.of_kind(COMMIT_LOG_FLUSHED)]


# --- CommitLog append -----------------------------------------------------------------------------

def test_record_size_formula():
    # 91 fixed + body + topic + properties (UNIQ_KEY 42 + WAIT 10 [+ TAGS 6+len])
    assert record_bytes(Message("k", "T", None, None, 100, 0, "p")) == 91 + 100 + 1 + 52
    assert record_bytes(Message("k", "T", "TagA", None, 100, 0, "p")) == 91 + 100 + 1 + 52 + 10


def test_append_offsets_and_queue_offsets():
    env, broker = make_broker()
    log = broker.commit_log
    sizes, recs = [], []
    for body, qid in [(100, 0), (200, 1), (300, 0), (50, 0), (10, 1)]:
        m = msg(body)
        sizes.append(record_bytes(m))
        recs.append(log.append(m, qid))
    phys = [r[R_PHYS] for r in recs]
    assert phys == [0, sizes[0], sum(sizes[:2]), sum(sizes[:3]), sum(sizes[:4])]
    assert [r[R_SIZE] for r in recs] == sizes
    assert [r[R_QOFF] for r in recs] == [0, 0, 1, 2, 1]
    assert log.wrote_position == sum(sizes)
    assert log.flushed_position == 0


def test_blank_padding_at_mapped_file_end():
    env, broker = make_broker()
    log = broker.commit_log
    size = 10_000
    recs = [log.append(msg(body_for(size)), 0) for _ in range(7)]
    # 6 records fill 60000 bytes; 5536 < 10000 + 8 left: a blank fills the file
    assert [r[R_PHYS] for r in recs] == [0, 10_000, 20_000, 30_000, 40_000, 50_000, FILE]
    assert log.wrote_position == FILE + size
    assert [r[R_QOFF] for r in recs] == list(range(7))


def test_record_fits_when_exactly_blank_min_remains():
    env, broker = make_broker()
    log = broker.commit_log
    first = log.append(msg(body_for(40_000)), 0)
    second = log.append(msg(body_for(FILE - 40_000 - BLANK_MIN_BYTES)), 0)  # leaves exactly 8 bytes
    third = log.append(msg(body_for(300)), 0)
    assert (first[R_PHYS], second[R_PHYS], third[R_PHYS]) == (0, 40_000, FILE)
    assert second[R_PHYS] + second[R_SIZE] == FILE - BLANK_MIN_BYTES


def test_record_does_not_fit_when_less_than_blank_min_would_remain():
    env, broker = make_broker()
    log = broker.commit_log
    log.append(msg(body_for(40_000)), 0)
    second = log.append(msg(body_for(FILE - 40_000 - BLANK_MIN_BYTES + 1)), 0)
    assert second[R_PHYS] == FILE


# --- FlushRealTimeService (ASYNC_FLUSH) ----------------------------------------------------------

def test_async_flush_timeline():
    env, broker = make_broker()
    log = broker.commit_log
    at(env, 1_200_000, log.append, msg(body_for(300)), 0)  # < 4 pages: waits for the thorough flush
    # 5 pages at 11.2 s: flushed at the next 500 ms tick
    at(env, 11_200_000, lambda: [log.append(msg(body_for(4_200)), 0) for _ in range(5)])
    # 2 pages crossed at 12.2 s: not enough, waits for the next thorough flush
    at(env, 12_200_000, lambda: [log.append(msg(body_for(4_000)), 0) for _ in range(2)])
    env.run(until=30_000_000)
    # checks at 0, 0.5, …, 10.0 s (thorough: now ≥ 0 + 10 s) → flush at 10.5 s + 2 ms fsync
    first = (10_502_000, 300)
    # then checks at 10.502, 11.002 → flush at 11.502 s: 21000 bytes → fsync 2 ms + 21 µs
    second = (11_502_000 + FSYNC_US + 21, 300 + 21_000)
    # checks every 500 ms from 11.504021; the first at ≥ 20.0 s (10 s after the 10.0 s thorough
    # check) is 20.004021 → flush at 20.504021, 8000 bytes → 2 ms + 8 µs
    third = (20_504_021 + FSYNC_US + 8, 300 + 21_000 + 8_000)
    assert flushed_timeline(env) == [first, second, third]
    assert log.flushed_position == log.wrote_position


def test_async_first_flush_after_start_is_thorough():
    env, broker = make_broker()
    log = broker.commit_log
    at(env, 100_000, log.append, msg(body_for(300)), 0)  # 1 dirty page only
    env.run(until=2_000_000)
    assert flushed_timeline(env) == [(500_000 + FSYNC_US, 300)]


def test_async_flush_of_full_file_does_not_wait_for_pages():
    env, broker = make_broker()
    log = broker.commit_log
    # fill the first file (7th record rolls over) at 1.2 s; the 7th is less than 4 pages into file 2
    at(env, 1_200_000, lambda: [log.append(msg(body_for(10_000)), 0) for _ in range(7)])
    env.run(until=3_000_000)
    # flush at 1.5 s forces only the full first file (up to its end, blank included)
    assert flushed_timeline(env) == [(1_500_000 + FSYNC_US + FILE // 1000, FILE)]


def test_process_crash_keeps_page_cache():
    env, broker = make_broker()
    log = broker.commit_log
    for _ in range(3):
        log.append(msg(), 0)
    wrote = log.wrote_position
    broker.node.crash()
    assert len(log.records) == 3 and log.wrote_position == wrote and log.flushed_position == 0


def test_power_loss_keeps_only_whole_records_below_flushed_position():
    env, broker = make_broker()
    log = broker.commit_log
    recs = [log.append(msg(), 0) for _ in range(3)]
    log.mark_flushed(recs[1][R_PHYS] + recs[1][R_SIZE] // 2)  # mid second record
    broker.node.crash(power_loss=True)
    assert log.records == recs[:1]
    assert log.wrote_position == recs[0][R_SIZE]
    assert log.flushed_position == recs[0][R_SIZE]


def test_power_loss_after_async_flush_then_restart_reuses_queue_offsets():
    env, broker = make_broker()
    log, store = broker.commit_log, broker.store
    at(env, 1_200_000, log.append, msg(), 0)
    at(env, 1_200_000, broker.store.reput.wake)
    at(env, 10_600_000, lambda: [log.append(msg(), 0) for _ in range(2)])
    at(env, 10_600_000, broker.store.reput.wake)
    at(env, 10_700_000, broker.node.crash, True)
    env.run(until=10_800_000)
    assert len(log.records) == 1
    broker.node.restart()
    env.run(until=14_000_000)  # startup 2 s
    assert store.max_offset(TOPIC, 0) == 1
    rec = log.append(msg(), 0)
    assert rec[R_QOFF] == 1 and rec[R_PHYS] == log.records[0][R_SIZE]


# --- GroupCommitService (SYNC_FLUSH) -------------------------------------------------------------

class Client:
    """A node sending SendMessage requests to the broker and logging (t_us, code) answers."""

    def __init__(self, env: SimEnv, name: str = "client") -> None:
        self.node = Node(env, name)
        env.network.add_node(self.node)
        self.node.start()
        self.log: list[tuple[int, int]] = []

    def send(self, m: Message, qid: int = 0, timeout_us: int = 30_000_000) -> None:
        self.node.rpc("broker-a", SendMessage(m, qid), timeout_us,
                      lambda r: self.log.append((self.node.env.now, None if r is None else r.code)))


def test_group_commit_put_ok_after_fsync():
    env, broker = make_broker("SYNC_FLUSH")
    gc = broker.group_commit
    out = []
    at(env, 1_000, lambda: gc.put_request(broker.put_internal(msg(), 0)[R_SIZE],
                                          lambda s: out.append((env.now, s))))
    env.run(until=100_000)
    assert out == [(1_000 + FSYNC_US, PUT_OK)]


def test_group_commit_one_fsync_covers_requests_taken_together():
    env, broker = make_broker("SYNC_FLUSH")
    gc = broker.group_commit
    out = []

    def put(tag):
        rec = broker.put_internal(msg(), 0)
        gc.put_request(rec[R_PHYS] + rec[R_SIZE], lambda s: out.append((env.now, tag, s)))

    at(env, 1_000, lambda: (put("a"), put("b")))  # same round
    at(env, 2_000, put, "c")  # arrives during the fsync: next round
    env.run(until=100_000)
    assert out == [(3_000, "a", PUT_OK), (3_000, "b", PUT_OK), (5_000, "c", PUT_OK)]
    second = broker.commit_log.records[1]
    assert flushed_timeline(env) == [(3_000, second[R_PHYS] + second[R_SIZE]),
                                     (5_000, broker.commit_log.wrote_position)]


def test_sync_flush_send_path_success():
    env, broker = make_broker("SYNC_FLUSH")
    client = Client(env)
    at(env, 1_000, client.send, msg())
    env.run(until=1_000_000)
    # request arrives after the default network latency; answer only after the fsync
    assert len(client.log) == 1 and client.log[0][1] == SUCCESS
    stored = next(env.tracer.of_kind("broker.stored"))[0]
    assert client.log[0][0] > stored + FSYNC_US


def test_flush_disk_timeout_when_fsync_stall_exceeds_sync_flush_timeout():
    env, broker = make_broker("SYNC_FLUSH")
    gc = broker.group_commit
    out = []
    at(env, 500, lambda: setattr(broker.node.disk, "stall_until_us", 500 + 6_000_000))
    at(env, 1_000, lambda: gc.put_request(broker.put_internal(msg(), 0)[R_SIZE],
                                          lambda s: out.append((env.now, s))))
    env.run(until=20_000_000)
    assert out == [(1_000 + 5_000_000, FLUSH_DISK_TIMEOUT)]  # exactly once, at the deadline
    # the message is stored regardless and flushed when the stall ends
    assert flushed_timeline(env) == [(6_000_500 + FSYNC_US, broker.commit_log.wrote_position)]
    assert broker.store.max_offset(TOPIC, 0) == 1


def test_flush_disk_timeout_response_code_on_send_path():
    env, broker = make_broker("SYNC_FLUSH")
    client = Client(env)
    at(env, 500, lambda: setattr(broker.node.disk, "stall_until_us", 10_000_000))
    at(env, 1_000, client.send, msg())
    env.run(until=20_000_000)
    assert [code for _, code in client.log] == [CODE_FLUSH_DISK_TIMEOUT]


def test_stall_shorter_than_timeout_is_put_ok():
    env, broker = make_broker("SYNC_FLUSH")
    gc = broker.group_commit
    out = []
    at(env, 500, lambda: setattr(broker.node.disk, "stall_until_us", 4_000_000))
    at(env, 1_000, lambda: gc.put_request(broker.put_internal(msg(), 0)[R_SIZE],
                                          lambda s: out.append((env.now, s))))
    env.run(until=20_000_000)
    assert out == [(4_000_000 + FSYNC_US, PUT_OK)]


# --- ReputMessageService -------------------------------------------------------------------------

def dispatch_timeline(env: SimEnv, broker: Broker) -> list[tuple[int, str, int, int]]:
    out: list[tuple[int, str, int, int]] = []
    broker.store.reput.listeners.append(lambda topic, qid, mx: out.append((env.now, topic, qid, mx)))
    return out


def test_reput_dispatches_on_1ms_grid_async():
    env, broker = make_broker()
    out = dispatch_timeline(env, broker)
    at(env, 1_500, broker.put_internal, msg(), 0)
    at(env, 1_700, broker.put_internal, msg(), 1)
    at(env, 2_300, broker.put_internal, msg(), 0)
    at(env, 7_000, broker.put_internal, msg(), 0)  # on a tick: dispatched at the next one
    env.run(until=20_000)
    assert out == [(2_000, TOPIC, 0, 1), (2_000, TOPIC, 1, 1), (3_000, TOPIC, 0, 2),
                   (8_000, TOPIC, 0, 3)]


def test_reput_sync_flush_dispatches_only_after_flush():
    env, broker = make_broker("SYNC_FLUSH")
    out = dispatch_timeline(env, broker)
    gc = broker.group_commit
    visible = []
    at(env, 1_000, lambda: gc.put_request(broker.put_internal(msg(), 0)[R_SIZE], lambda s: None))
    for t in (2_000, 2_999, 3_001, 4_001):
        at(env, t, lambda: visible.append((env.now, broker.store.max_offset(TOPIC, 0))))
    env.run(until=20_000)
    # fsync done at 3.000 ms; dispatch at the next 1 ms tick (4.000 ms)
    assert out == [(4_000, TOPIC, 0, 1)]
    assert visible == [(2_000, 0), (2_999, 0), (3_001, 0), (4_001, 1)]


def test_reput_grid_follows_restart_time():
    env, broker = make_broker()
    out = dispatch_timeline(env, broker)
    at(env, 10_000, broker.node.crash)
    at(env, 10_300, broker.node.restart)  # serves after startup_ms = 2000 → grid origin 2_010_300
    at(env, 2_020_500, broker.put_internal, msg(), 0)
    env.run(until=2_100_000)
    assert out == [(2_021_300, TOPIC, 0, 1)]


# --- getMessage ----------------------------------------------------------------------------------

def filled(n: int, body: int = 100, tags=None, **kw) -> tuple[SimEnv, Broker]:
    env, broker = make_broker(**kw)
    for i in range(n):
        broker.put_internal(msg(body, tags(i) if tags else None), 0)
    env.run(until=10_000)
    assert broker.store.max_offset(TOPIC, 0) == n
    return env, broker


def test_get_message_statuses():
    env, broker = filled(5)
    store = broker.store
    assert store.get_message(TOPIC, 3, 0, 32, None)[:3] == (NO_MATCHED_LOGIC_QUEUE, 0, 0)
    assert store.get_message("Other", 0, 0, 32, None)[:3] == (NO_MATCHED_LOGIC_QUEUE, 0, 0)
    assert store.get_message(TOPIC, 0, -1, 32, None)[:3] == (OFFSET_TOO_SMALL, 0, 5)
    assert store.get_message(TOPIC, 0, 5, 32, None) == (OFFSET_OVERFLOW_ONE, 5, 5, [])
    assert store.get_message(TOPIC, 0, 9, 32, None) == (OFFSET_OVERFLOW_BADLY, 5, 5, [])
    status, nxt, mx, recs = store.get_message(TOPIC, 0, 2, 32, None)
    assert (status, nxt, mx, [r[R_QOFF] for r in recs]) == (FOUND, 5, 5, [2, 3, 4])


def test_get_message_empty_queue():
    env, broker = make_broker()
    broker.store.queues[(TOPIC, 0)] = []
    assert broker.store.get_message(TOPIC, 0, 0, 32, None)[:3] == (NO_MESSAGE_IN_QUEUE, 0, 0)


def test_get_message_max_msg_nums():
    env, broker = filled(40)
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 10, None)
    assert (status, nxt, len(recs)) == (FOUND, 10, 10)


def test_get_message_in_memory_count_limit_32():
    env, broker = filled(40)
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 100, None)
    assert (status, nxt, len(recs)) == (FOUND, 32, 32)


def test_get_message_in_memory_byte_limit():
    env, broker = filled(5, body=100_000, mapped_file_size_commit_log_bytes=1 << 20)
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 32, None)
    # 2 × ~100 KB ≤ 256 KiB, a third would exceed it
    assert (status, nxt, len(recs)) == (FOUND, 2, 2)


def test_get_message_first_message_always_taken():
    env, broker = filled(3, body=300_000, mapped_file_size_commit_log_bytes=1 << 20)
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 32, None)
    assert (status, nxt, len(recs)) == (FOUND, 1, 1)


def test_get_message_on_disk_limits():
    # 1000 B of RAM → 400 B memory window: every message but the last ones counts as on disk
    env, broker = filled(20, physical_memory_bytes=1_000)
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 32, None)
    assert (status, nxt, len(recs)) == (FOUND, 8, 8)


def test_get_message_tag_filter():
    env, broker = filled(10, tags=lambda i: "A" if i % 2 == 0 else "B")
    store = broker.store
    assert store.get_message(TOPIC, 0, 0, 32, frozenset({"C"})) == (NO_MATCHED_MESSAGE, 10, 10, [])
    status, nxt, _, recs = store.get_message(TOPIC, 0, 0, 32, frozenset({"B"}))
    assert (status, nxt, [r[R_QOFF] for r in recs]) == (FOUND, 10, [1, 3, 5, 7, 9])
    status, nxt, _, recs = store.get_message(TOPIC, 0, 0, 2, frozenset({"A"}))
    # offsets 0 and 2 taken; the filtered-out unit 1 counts as scanned; stop before unit 3
    assert (status, nxt, [r[R_QOFF] for r in recs]) == (FOUND, 3, [0, 2])


def test_get_message_scan_limited_to_800_units():
    env, broker = filled(1_000, body=10, tags=lambda i: "B")
    status, nxt, _, recs = broker.store.get_message(TOPIC, 0, 0, 32, frozenset({"A"}))
    assert (status, nxt, recs) == (NO_MATCHED_MESSAGE, 800, [])


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_flush_type_enum_accepted(flush):
    env, broker = make_broker(flush)
    assert broker.store_cfg.flush_disk_type is FlushDiskType(flush)
    assert (broker.group_commit is None) == (flush == "ASYNC_FLUSH")


def test_fast_constructors_build_the_same_payloads_as_the_namedtuples():
    """Hot paths build payloads from a tuple of all fields; they must equal the keyword form."""
    from models.message import NEW_MESSAGE_DEFAULTS, new_message
    from models.protocol import (
        PullMessage,
        PullResponse,
        SendResponse,
        new_pull_message,
        new_pull_response,
        new_send_message,
        new_send_response,
    )

    msg = new_message(("p-1", "orders", "t", "k1", 100, 5, "p") + NEW_MESSAGE_DEFAULTS)
    assert msg == Message("p-1", "orders", "t", "k1", 100, 5, "p") and type(msg) is Message
    assert msg.real_queue_id == -1 and msg.origin_topic == ""
    assert new_send_message((msg, 3)) == SendMessage(msg=msg, queue_id=3)
    assert type(new_send_message((msg, 3))) is SendMessage
    assert new_send_response((0, 7, 9)) == SendResponse(code=0, queue_offset=7, phys_offset=9)
    pull = new_pull_message(("g", "orders", 1, 2, 32, -1, 15_000_000, None))
    assert type(pull) is PullMessage and pull.max_msg_nums == 32 and pull.tags is None
    assert new_pull_response((0, 3, 0, 4, ())) == PullResponse(0, 3, 0, 4)
