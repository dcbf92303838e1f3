"""Broker store: CommitLog append, flush services, fault durability, dispatch, getMessage.

Reference: rocketmq-semantics.md 5.2 (append), 5.3 (flush), 5.4 (faults), 5.5 (dispatch),
5.6 (getMessage).
"""

from __future__ import annotations

import pytest

from models.broker.broker import Broker
from models.broker.commit_log import BLANK_MIN_BYTES, FLUSH_DISK_TIMEOUT, PUT_OK, CommitLog, queue_key
from models.broker.config import BrokerConfig, FlushDiskType, MessageStoreConfig
from models.broker.consume_queue import ConsumeQueue
from models.broker.mapped_file import F_QUEUE_OFFSET, F_SIZE
from models.broker.message_store import (
    FOUND,
    NO_MATCHED_LOGIC_QUEUE,
    NO_MATCHED_MESSAGE,
    NO_MESSAGE_IN_QUEUE,
    OFFSET_OVERFLOW_BADLY,
    OFFSET_OVERFLOW_ONE,
    OFFSET_TOO_SMALL,
)
from models.message import Message, java_string_hash, msg_id_of, record_bytes
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
    return Message(msg_id_of(0, _seq[0]), topic, tags, -1, body, 0, record_bytes(topic, body, tags))


def body_for(size: int, tags: str | None = None) -> int:
    """Body length giving a record of exactly `size` bytes."""
    return size - record_bytes(TOPIC, 0, tags)


def append(log: CommitLog, m: Message, queue_id: int) -> tuple[int, int]:
    """CommitLog.append of a producer's message: (physical offset, queue offset)."""
    return log.append(m.msg_id, m.topic, queue_id, m.size_bytes, m.tags, 0, 0, None)


def put(broker: Broker, m: Message, queue_id: int) -> tuple[int, int]:
    """The broker's put path (append + broker.stored + dispatch wake-up): (phys, queue offset)."""
    return broker.put_message(m.msg_id, m.topic, queue_id, m.size_bytes, m.body_bytes, m.tags, 0, None)


def put_end(broker: Broker, m: Message, queue_id: int) -> int:
    """`put`, returning the end of the new record (the next offset a flush request waits for)."""
    return put(broker, m, queue_id)[0] + m.size_bytes


def stored(log: CommitLog) -> list[tuple[int, int, int]]:
    """Every CommitLog record as (physical offset, size, queue offset), in offset order."""
    return [(f.offset(i), f.record(i)[F_SIZE], f.record(i)[F_QUEUE_OFFSET])
            for f in log.files.files for i in range(len(f))]


def at(env: SimEnv, t_us: int, fn, *args) -> None:
    env.call_later(t_us - env.now, fn, *args)


def flushed_timeline(env: SimEnv) -> list[tuple[int, int]]:
    return [(r[0], r[3]) for r in env.tracer.of_kind(COMMIT_LOG_FLUSHED)]


# --- CommitLog append -----------------------------------------------------------------------------

def test_record_size_formula():
    # 91 fixed + body + topic + properties (UNIQ_KEY 42 + WAIT 10 [+ TAGS 6+len])
    assert record_bytes("T", 100) == 91 + 100 + 1 + 52
    assert record_bytes("T", 100, "TagA") == 91 + 100 + 1 + 52 + 10


def test_append_offsets_and_queue_offsets():
    env, broker = make_broker()
    log = broker.commit_log
    sizes, recs = [], []
    for body, qid in [(100, 0), (200, 1), (300, 0), (50, 0), (10, 1)]:
        m = msg(body)
        sizes.append(m.size_bytes)
        recs.append(append(log, m, qid))
    phys = [p for p, _q in recs]
    assert phys == [0, sizes[0], sum(sizes[:2]), sum(sizes[:3]), sum(sizes[:4])]
    assert [size for _p, size, _q in stored(log)] == sizes
    assert [q for _p, q in recs] == [0, 0, 1, 2, 1]
    assert log.wrote_position == sum(sizes)
    assert log.flushed_position == 0


def test_blank_padding_at_mapped_file_end():
    env, broker = make_broker()
    log = broker.commit_log
    size = 10_000
    recs = [append(log, msg(body_for(size)), 0) for _ in range(7)]
    # 6 records fill 60000 bytes; 5536 < 10000 + 8 left: a blank fills the file
    assert [p for p, _q in recs] == [0, 10_000, 20_000, 30_000, 40_000, 50_000, FILE]
    assert log.wrote_position == FILE + size
    assert [q for _p, q in recs] == list(range(7))


def test_record_fits_when_exactly_blank_min_remains():
    env, broker = make_broker()
    log = broker.commit_log
    first = append(log, msg(body_for(40_000)), 0)
    second_msg = msg(body_for(FILE - 40_000 - BLANK_MIN_BYTES))  # leaves exactly 8 bytes
    second = append(log, second_msg, 0)
    third = append(log, msg(body_for(300)), 0)
    assert (first[0], second[0], third[0]) == (0, 40_000, FILE)
    assert second[0] + second_msg.size_bytes == FILE - BLANK_MIN_BYTES


def test_record_does_not_fit_when_less_than_blank_min_would_remain():
    env, broker = make_broker()
    log = broker.commit_log
    append(log, msg(body_for(40_000)), 0)
    second = append(log, msg(body_for(FILE - 40_000 - BLANK_MIN_BYTES + 1)), 0)
    assert second[0] == FILE


# --- FlushRealTimeService (ASYNC_FLUSH) ----------------------------------------------------------

def test_async_flush_timeline():
    env, broker = make_broker()
    log = broker.commit_log
    at(env, 1_200_000, append, log, msg(body_for(300)), 0)  # < 4 pages: waits for the thorough flush
    # 5 pages at 11.2 s: flushed at the next 500 ms tick
    at(env, 11_200_000, lambda: [append(log, msg(body_for(4_200)), 0) for _ in range(5)])
    # 2 pages crossed at 12.2 s: not enough, waits for the next thorough flush
    at(env, 12_200_000, lambda: [append(log, msg(body_for(4_000)), 0) for _ in range(2)])
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
    at(env, 100_000, append, log, msg(body_for(300)), 0)  # 1 dirty page only
    env.run(until=2_000_000)
    assert flushed_timeline(env) == [(500_000 + FSYNC_US, 300)]


def test_async_flush_of_full_file_does_not_wait_for_pages():
    env, broker = make_broker()
    log = broker.commit_log
    # fill the first file (7th record rolls over) at 1.2 s; the 7th is less than 4 pages into file 2
    at(env, 1_200_000, lambda: [append(log, msg(body_for(10_000)), 0) for _ in range(7)])
    env.run(until=3_000_000)
    # flush at 1.5 s forces only the full first file (up to its end, blank included)
    assert flushed_timeline(env) == [(1_500_000 + FSYNC_US + FILE // 1000, FILE)]


def test_process_crash_keeps_page_cache():
    env, broker = make_broker()
    log = broker.commit_log
    for _ in range(3):
        append(log, msg(), 0)
    wrote, before = log.wrote_position, stored(log)
    broker.node.crash()
    assert log.record_count == 3 and stored(log) == before
    assert log.wrote_position == wrote and log.flushed_position == 0


def test_power_loss_keeps_only_whole_records_below_flushed_position():
    env, broker = make_broker()
    log = broker.commit_log
    for _ in range(3):
        append(log, msg(), 0)
    recs = stored(log)
    log.mark_flushed(recs[1][0] + recs[1][1] // 2)  # mid second record
    broker.node.crash(power_loss=True)
    assert stored(log) == recs[:1]
    assert log.wrote_position == recs[0][1]
    assert log.flushed_position == recs[0][1]


def test_power_loss_after_async_flush_then_restart_reuses_queue_offsets():
    env, broker = make_broker()
    log, store = broker.commit_log, broker.store
    at(env, 1_200_000, put, broker, msg(), 0)
    at(env, 10_600_000, lambda: [put(broker, msg(), 0) for _ in range(2)])
    at(env, 10_700_000, broker.node.crash, True)
    env.run(until=10_800_000)
    assert log.record_count == 1
    broker.node.restart()
    env.run(until=14_000_000)  # startup 2 s
    assert store.max_offset(TOPIC, 0) == 1
    phys, queue_offset = put(broker, msg(), 0)
    assert queue_offset == 1 and phys == stored(log)[0][1]


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
    at(env, 1_000, lambda: gc.put_request(put_end(broker, msg(), 0), lambda s: out.append((env.now, s))))
    env.run(until=100_000)
    assert out == [(1_000 + FSYNC_US, PUT_OK)]


def test_group_commit_one_fsync_covers_requests_taken_together():
    env, broker = make_broker("SYNC_FLUSH")
    gc = broker.group_commit
    out = []

    def request(tag):
        gc.put_request(put_end(broker, msg(), 0), lambda s: out.append((env.now, tag, s)))

    at(env, 1_000, lambda: (request("a"), request("b")))  # same round
    at(env, 2_000, request, "c")  # arrives during the fsync: next round
    env.run(until=100_000)
    assert out == [(3_000, "a", PUT_OK), (3_000, "b", PUT_OK), (5_000, "c", PUT_OK)]
    second_phys, second_size, _qoff = stored(broker.commit_log)[1]
    assert flushed_timeline(env) == [(3_000, second_phys + second_size),
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
    at(env, 1_000, lambda: gc.put_request(put_end(broker, msg(), 0), lambda s: out.append((env.now, s))))
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
    at(env, 1_000, lambda: gc.put_request(put_end(broker, msg(), 0), lambda s: out.append((env.now, s))))
    env.run(until=20_000_000)
    assert out == [(4_000_000 + FSYNC_US, PUT_OK)]


# --- ReputMessageService -------------------------------------------------------------------------

def dispatch_timeline(env: SimEnv, broker: Broker) -> list[tuple[int, str, int, int]]:
    out: list[tuple[int, str, int, int]] = []
    broker.store.reput.listeners.append(lambda cq: out.append((env.now, cq.topic, cq.queue_id, cq.max_offset)))
    return out


def test_reput_dispatches_on_1ms_grid_async():
    env, broker = make_broker()
    out = dispatch_timeline(env, broker)
    at(env, 1_500, put, broker, msg(), 0)
    at(env, 1_700, put, broker, msg(), 1)
    at(env, 2_300, put, broker, msg(), 0)
    at(env, 7_000, put, broker, msg(), 0)  # on a tick: dispatched at the next one
    env.run(until=20_000)
    assert out == [(2_000, TOPIC, 0, 1), (2_000, TOPIC, 1, 1), (3_000, TOPIC, 0, 2),
                   (8_000, TOPIC, 0, 3)]


def test_reput_sync_flush_dispatches_only_after_flush():
    env, broker = make_broker("SYNC_FLUSH")
    out = dispatch_timeline(env, broker)
    gc = broker.group_commit
    visible = []
    at(env, 1_000, lambda: gc.put_request(put_end(broker, msg(), 0), lambda s: None))
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
    at(env, 2_020_500, put, broker, msg(), 0)
    env.run(until=2_100_000)
    assert out == [(2_021_300, TOPIC, 0, 1)]


# --- getMessage ----------------------------------------------------------------------------------

def filled(n: int, body: int = 100, tags=None, **kw) -> tuple[SimEnv, Broker]:
    env, broker = make_broker(**kw)
    for i in range(n):
        put(broker, msg(body, tags(i) if tags else None), 0)
    env.run(until=10_000)
    assert broker.store.max_offset(TOPIC, 0) == n
    return env, broker


def get(broker: Broker, offset: int, max_msg_nums: int = 32, tags: set[str] | None = None,
        topic: str = TOPIC, queue_id: int = 0) -> tuple:
    """getMessage on (topic, queue id), filtering by the tags' hash codes as a subscription does."""
    codes = None if tags is None else frozenset(java_string_hash(t) for t in tags)
    return broker.store.get_message(broker.store.reput.queue(topic, queue_id), offset, max_msg_nums, codes)


def queue_offsets(msgs: tuple) -> list[int]:
    return [m.queue_offset for m in msgs]


def test_get_message_statuses():
    env, broker = filled(5)
    assert get(broker, 0, queue_id=3)[:3] == (NO_MATCHED_LOGIC_QUEUE, 0, 0)
    assert get(broker, 0, topic="Other")[:3] == (NO_MATCHED_LOGIC_QUEUE, 0, 0)
    assert get(broker, -1)[:3] == (OFFSET_TOO_SMALL, 0, 5)
    assert get(broker, 5) == (OFFSET_OVERFLOW_ONE, 5, 5, ())
    assert get(broker, 9) == (OFFSET_OVERFLOW_BADLY, 5, 5, ())
    status, nxt, mx, msgs = get(broker, 2)
    assert (status, nxt, mx, queue_offsets(msgs)) == (FOUND, 5, 5, [2, 3, 4])


def test_get_message_empty_queue():
    env, broker = make_broker()
    cq = ConsumeQueue(TOPIC, 0, queue_key(broker.commit_log.topic_id(TOPIC), 0))
    assert broker.store.get_message(cq, 0, 32, None)[:3] == (NO_MESSAGE_IN_QUEUE, 0, 0)


def test_get_message_max_msg_nums():
    env, broker = filled(40)
    status, nxt, _, msgs = get(broker, 0, 10)
    assert (status, nxt, len(msgs)) == (FOUND, 10, 10)


def test_get_message_in_memory_count_limit_32():
    env, broker = filled(40)
    status, nxt, _, msgs = get(broker, 0, 100)
    assert (status, nxt, len(msgs)) == (FOUND, 32, 32)


def test_get_message_in_memory_byte_limit():
    env, broker = filled(5, body=100_000, mapped_file_size_commit_log_bytes=1 << 20)
    status, nxt, _, msgs = get(broker, 0)
    # 2 × ~100 KB ≤ 256 KiB, a third would exceed it
    assert (status, nxt, len(msgs)) == (FOUND, 2, 2)


def test_get_message_first_message_always_taken():
    env, broker = filled(3, body=300_000, mapped_file_size_commit_log_bytes=1 << 20)
    status, nxt, _, msgs = get(broker, 0)
    assert (status, nxt, len(msgs)) == (FOUND, 1, 1)


def test_get_message_on_disk_limits():
    # 1000 B of RAM → 400 B memory window: every message but the last ones counts as on disk
    env, broker = filled(20, physical_memory_bytes=1_000)
    status, nxt, _, msgs = get(broker, 0)
    assert (status, nxt, len(msgs)) == (FOUND, 8, 8)


def test_get_message_tag_filter():
    env, broker = filled(10, tags=lambda i: "A" if i % 2 == 0 else "B")
    assert get(broker, 0, tags={"C"}) == (NO_MATCHED_MESSAGE, 10, 10, ())
    status, nxt, _, msgs = get(broker, 0, tags={"B"})
    assert (status, nxt, queue_offsets(msgs)) == (FOUND, 10, [1, 3, 5, 7, 9])
    assert {m.tags for m in msgs} == {"B"}
    status, nxt, _, msgs = get(broker, 0, 2, tags={"A"})
    # offsets 0 and 2 taken; the filtered-out unit 1 counts as scanned; stop before unit 3
    assert (status, nxt, queue_offsets(msgs)) == (FOUND, 3, [0, 2])


def test_get_message_scan_limited_to_800_units():
    env, broker = filled(1_000, body=10, tags=lambda i: "B")
    assert get(broker, 0, tags={"A"}) == (NO_MATCHED_MESSAGE, 800, 1_000, ())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_flush_type_enum_accepted(flush):
    env, broker = make_broker(flush)
    assert broker.store_cfg.flush_disk_type is FlushDiskType(flush)
    assert (broker.group_commit is None) == (flush == "ASYNC_FLUSH")


def test_fast_constructors_build_the_same_payloads_as_the_namedtuples():
    """Hot paths build payloads from a tuple of all fields; they must equal the keyword form."""
    from models.message import MessageExt, new_message, new_message_ext
    from models.protocol import (
        PullMessage,
        PullResponse,
        SendResponse,
        new_pull_message,
        new_pull_response,
        new_send_message,
        new_send_response,
    )

    defaults = tuple(Message._field_defaults.values())
    m = new_message((msg_id_of(1, 7), "orders", "t", 3, 100, 5, 250) + defaults)
    assert m == Message(msg_id_of(1, 7), "orders", "t", 3, 100, 5, 250) and type(m) is Message
    assert (m.reconsume_times, m.delay_level, m.props) == (0, 0, None)
    assert new_send_message((m, 3)) == SendMessage(msg=m, queue_id=3)
    assert type(new_send_message((m, 3))) is SendMessage
    assert new_send_response((0, 7, 9)) == SendResponse(code=0, queue_offset=7, phys_offset=9)
    pull = new_pull_message(("g", "orders", 1, 2, 32, -1, 15_000_000, None))
    assert type(pull) is PullMessage and pull.max_msg_nums == 32 and pull.tag_codes is None
    assert new_pull_response((0, 3, 0, 4, (), 0)) == PullResponse(0, 3, 0, 4)
    fields = (m.msg_id, "orders", 1, 4, 1_000, 250, 9, "t", 0, 100, None)
    ext = new_message_ext(fields)
    assert type(ext) is MessageExt and ext == MessageExt(*fields) and ext.user_topic == "orders"
    retry = ext._replace(topic="%RETRY%g", props={"RETRY_TOPIC": "orders"})
    assert retry.user_topic == "orders"
