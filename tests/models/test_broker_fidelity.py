"""Broker components with timelines: transient-pool commit, 4.x wake-on-put flush, offset files
and `.bak` recovery, the send thread pool and BrokerFastFailure, offsets by time, destroyed-copy
facts. HA (slave catch-up, SYNC_MASTER, slave reads) is in test_ha.py.

Reference: rocketmq-semantics.md 5.3 (flush, commit), 5.4 (faults), 6.2 (offset files),
1.9 (busy codes), 6.5 (offset by time); the Java classes named in each model's docstring.
"""

from __future__ import annotations

from typing import Any

from models.broker.broker import Broker
from models.broker.config import BrokerConfig, MessageStoreConfig
from models.message import PROPERTY_DELAY_TIME_LEVEL, Message, msg_id_of, record_bytes
from models.protocol import SUCCESS, SYSTEM_BUSY, SendMessage, SendResponse
from models.records import (
    BROKER_BUSY,
    COMMIT_LOG_DESTROYED,
    COMMIT_LOG_FLUSHED,
    CONSUMER_OFFSETS_LOADED,
    OFFSET_REUSED,
    SCHEDULE_DELIVERED,
)
from sim.disk import DiskConfig
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

TOPIC = "T"
FSYNC_US = 2_000
PAGE = 4096


def make_broker(version: str = "5.x", broker: dict | None = None, disk: dict | None = None,
                **store_kw: Any) -> tuple[SimEnv, Broker]:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, Constant(value=0.5))
    store_kw.setdefault("mapped_file_size_commit_log_bytes", 1 << 20)
    cfg = MessageStoreConfig(**store_kw)
    disk_cfg = DiskConfig(fsync_latency_ms=FSYNC_US / 1000, bandwidth_bytes_per_s=10**12, **(disk or {}))
    b = Broker(env, "broker-a", "zone-a", cfg, BrokerConfig(**(broker or {})), disk_cfg, {TOPIC: 4}, [],
               version=version)
    net.add_node(b.node)
    b.node.start()
    return env, b


def page_msg(seq: int) -> Message:
    """A message whose record is exactly one page (4096 bytes)."""
    body = PAGE - record_bytes(TOPIC, 0)
    return Message(msg_id_of(0, seq), TOPIC, None, -1, body, 0, PAGE)


def put(b: Broker, seq: int, queue_id: int = 0) -> int:
    m = page_msg(seq)
    return b.put_message(m.msg_id, m.topic, queue_id, m.size_bytes, m.body_bytes, None, 0, None)[0]


def flushed(env: SimEnv) -> list[tuple[int, int]]:
    return [(r[0], r[3]) for r in env.tracer.of_kind(COMMIT_LOG_FLUSHED)]


# --- transient store pool ------------------------------------------------------------------------

def test_transient_pool_commits_every_4_pages_or_200_ms_and_only_then_is_readable():
    env, b = make_broker(transient_store_pool_enable=True)
    log = b.commit_log
    env.run(until=1_000_000)
    for i in range(3):  # 3 pages: below commitCommitLogLeastPages
        env.call_later(i * 1_000, put, b, i + 1)
    env.run(until=1_010_000)
    assert (log.wrote_position, log.committed_position) == (3 * PAGE, 0)
    assert b.store.reput.confirm_position() == 0  # dispatch sees only committed data
    env.call_later(0, put, b, 4)  # the 4th page: the put wakes the commit, which moves 4 pages
    env.run(until=1_011_000)
    assert log.committed_position == 4 * PAGE
    env.call_later(0, put, b, 5)  # one more page waits for the 200 ms thorough commit
    env.run(until=1_100_000)
    assert log.committed_position == 4 * PAGE
    env.run(until=1_400_000)
    assert log.committed_position == 5 * PAGE


def test_process_crash_with_transient_pool_loses_the_uncommitted_buffer():
    env, b = make_broker(transient_store_pool_enable=True)
    env.run(until=1_000_000)
    for i in range(6):
        env.call_later(i * 1_000, put, b, i + 1)  # 4 pages committed at once, 2 left in the buffer
    env.call_later(10_000, b.node.crash)
    env.run(until=1_020_000)
    destroyed = [r[3] for r in env.tracer.of_kind(COMMIT_LOG_DESTROYED)]
    assert destroyed == [msg_id_of(0, 5), msg_id_of(0, 6)]
    assert {r[7] for r in env.tracer.of_kind(COMMIT_LOG_DESTROYED)} == {"process_crash"}
    assert b.commit_log.wrote_position == 4 * PAGE


def test_process_crash_without_pool_loses_nothing():
    env, b = make_broker()
    env.run(until=1_000_000)
    for i in range(6):
        env.call_later(i * 1_000, put, b, i + 1)
    env.call_later(10_000, b.node.crash)
    env.run(until=1_020_000)
    assert list(env.tracer.of_kind(COMMIT_LOG_DESTROYED)) == []
    assert b.commit_log.wrote_position == 6 * PAGE


# --- flushCommitLogTimed=false: 4.x wakes the flush on every put --------------------------------------

def _flush_after_puts(version: str, timed: bool) -> list[tuple[int, int]]:
    env, b = make_broker(version=version, flush_commit_log_timed=timed)
    env.run(until=11_000_000)  # past the first thorough flush
    for i in range(8):
        env.call_later(i * 1_000, put, b, i + 1)
    env.run(until=12_000_000)
    return [f for f in flushed(env) if f[0] > 11_000_000]


def test_4x_flush_woken_by_puts_flushes_as_soon_as_4_pages_are_dirty():
    # put i at 11.000 + i ms; the 4th page at 11.003 s wakes the flush: fsync 2 ms
    assert _flush_after_puts("4.x", timed=False) == [(11_005_000, 4 * PAGE), (11_009_000, 8 * PAGE)]


def test_timed_flush_and_5x_without_wake_flush_wait_for_the_interval():
    timed = _flush_after_puts("4.x", timed=True)
    five = _flush_after_puts("5.x", timed=False)  # wakeFlushWhenPutMessage false: puts do not wake it
    assert timed and five
    assert timed[0][0] >= 11_100_000 and five[0][0] >= 11_100_000
    assert timed[0][1] == five[0][1] == 8 * PAGE


# --- facts for the loss checkers --------------------------------------------------------------------

def test_power_loss_emits_destroyed_records_and_marks_reused_offsets():
    env, b = make_broker()
    env.run(until=11_000_000)
    for i in range(3):  # 3 pages: below 4, not flushed by the 500 ms flush
        env.call_later(i * 1_000, put, b, i + 1)
    env.call_later(100_000, b.node.crash, True)
    env.call_later(200_000, b.node.restart)
    env.call_later(3_000_000, put, b, 4)  # reuses queue offset 0
    env.run(until=15_000_000)
    destroyed = [(r[3], r[6], r[7]) for r in env.tracer.of_kind(COMMIT_LOG_DESTROYED)]
    assert destroyed == [(msg_id_of(0, i), i - 1, "power_loss") for i in (1, 2, 3)]
    assert [(r[3], r[6]) for r in env.tracer.of_kind(OFFSET_REUSED)] == [(msg_id_of(0, 4), 0)]


# --- offset files: string2File without fsync, .bak ------------------------------------------------------

def _offsets_after_power_loss(version: str, loss_at_us: int) -> tuple[dict, str, int]:
    env, b = make_broker(version=version)
    offsets = b.offsets
    for t in range(1, 200):  # the committed offset counts the seconds (until the crash: node timers)
        b.node.call_later(t * 1_000_000, offsets.commit, "g", TOPIC, 0, t)
    env.call_later(loss_at_us, b.node.crash, True)
    env.call_later(loss_at_us + 1_000_000, b.node.restart)
    env.run(until=loss_at_us + 5_000_000)
    loaded = list(env.tracer.of_kind(CONSUMER_OFFSETS_LOADED))[-1]
    return dict(offsets.table), loaded[4], offsets.query("g", TOPIC, 0)


def test_5_3_3_offset_file_rewritten_in_place_survives_as_last_written_back():
    # persisted every 5 s from 10 s (the commit of second t comes first). The file, dirty from its
    # first write at 10 s, is written back at the flusher's 40 s wake-up (30 s dirty expiry, 5 s
    # grid; before that instant's write) with the 35 s content; dirty again from 40 s, it is
    # written back at 70 s with the 65 s content
    assert _offsets_after_power_loss("5.x", 73_000_000)[1:] == ("file", 65)
    assert _offsets_after_power_loss("5.x", 69_000_000)[1:] == ("file", 35)  # 34 s of commits lost


def test_4_9_8_renamed_offset_file_reads_empty_after_power_loss_and_bak_is_loaded():
    # each persist renames a fresh file into place, which is never 30 s old: empty after the
    # power loss. `.bak`, rewritten in place from 15 s, was written back at 45 s holding what it
    # got at 40 s: the file's content before the 40 s persist (35 s)
    assert _offsets_after_power_loss("4.x", 73_000_000)[1:] == ("bak", 35)


def test_offset_file_survives_a_process_crash_as_last_persisted():
    env, b = make_broker()
    for t in range(1, 60):
        b.node.call_later(t * 1_000_000, b.offsets.commit, "g", TOPIC, 0, t)
    env.call_later(33_000_000, b.node.crash)
    env.call_later(34_000_000, b.node.restart)
    env.run(until=40_000_000)
    assert b.offsets.query("g", TOPIC, 0) == 30  # the 30 s persist: the page cache survives


# --- send thread pool and BrokerFastFailure --------------------------------------------------------

def _busy_broker(put_ms: float, n: int, gap_us: int, disk_slow: float = 1.0) -> tuple[SimEnv, list, list]:
    env, b = make_broker(broker={"send_put_time_ms": Constant(value=put_ms), "send_message_thread_pool_nums": 2})
    client = Node(env, "client")
    env.network.add_node(client)
    client.start()
    replies: list[tuple[int, int, int]] = []
    b.node.disk.slow_factor = disk_slow
    for i in range(n):
        m = page_msg(i + 1)
        env.call_later(2_000_000 + i * gap_us, client.rpc, "broker-a", SendMessage(m, 0), 10_000_000,
                       lambda r, i=i: replies.append((env.now, i, r.code if isinstance(r, SendResponse) else None)))
    env.run(until=20_000_000)
    return env, replies, [(r[0], r[3], r[4]) for r in env.tracer.of_kind(BROKER_BUSY)]


def test_send_queue_wait_over_200_ms_is_answered_system_busy_timeout_clean_queue():
    # 10 ms puts, one a ms: the put lock serves 100 a second, the queue grows ~9 a ms
    env, replies, busy = _busy_broker(10.0, 100, 1_000)
    codes = [c for _t, _i, c in replies]
    assert codes.count(SYSTEM_BUSY) > 0 and codes.count(SUCCESS) > 0
    reasons = {reason for _t, _m, reason in busy}
    assert reasons == {"TIMEOUT_CLEAN_QUEUE"}
    # a request is cleaned on the 10 ms BrokerFastFailure grid once it has waited 200 ms
    queued_at = {i: 2_000_000 + i * 1_000 for i in range(100)}
    for t, i, code in replies:
        if code == SYSTEM_BUSY:
            wait = t - 500 - queued_at[i]  # the reply's one-way latency is 0.5 ms
            assert 200_000 <= wait < 200_000 + 10_000 + 1_000
    # the first sends are served one put (10 ms) after another
    served = sorted(t for t, _i, c in replies if c == SUCCESS)
    assert served[:3] == [2_000_000 + 500 + 10_000 * k + 500 for k in (1, 2, 3)]


def test_put_lock_held_over_1_s_rejects_new_requests_and_cleans_the_queue():
    # a disk 200x slower: each 10 ms put holds the lock 2 s; isOSPageCacheBusy after 1 s
    env, replies, busy = _busy_broker(10.0, 20, 100_000, disk_slow=200.0)
    reasons = [reason for _t, _m, reason in busy]
    assert "REJECTREQUEST" in reasons
    assert "PCBUSY_CLEAN_QUEUE" in reasons or "PC_SYNCHRONIZED" in reasons
    first_reject = min(t for t, _m, reason in busy if reason == "REJECTREQUEST")
    assert first_reject > 2_000_500 + 1_000_000  # only once the first put has held the lock 1 s


def test_zero_put_time_keeps_the_direct_send_path():
    env, b = make_broker()
    assert b.send_executor is None


# --- getOffsetInQueueByTime -----------------------------------------------------------------------

def test_offset_by_time_5x_lower_bound_and_4x_nearest():
    results = {}
    for version in ("5.x", "4.x"):
        env, b = make_broker(version=version)
        for i, t_ms in enumerate((1_000, 2_000, 3_000, 4_000)):
            env.call_later(t_ms * 1_000, put, b, i + 1)
        env.run(until=5_000_000)
        by_time = b.reset_offset.offset_by_time
        results[version] = [by_time(TOPIC, 0, t_ms * 1_000) for t_ms in (500, 1_000, 1_400, 1_600, 4_500)]
    assert results["5.x"] == [0, 0, 1, 1, 4]  # first unit stored at or after; all older: one past the end
    assert results["4.x"] == [0, 0, 0, 1, 3]  # nearest; all older: the last unit


# --- ScheduleMessageService -----------------------------------------------------------------------

def test_delayed_message_into_an_empty_level_is_delivered_at_its_due_tick():
    """A delay-level-3 (10 s) message put while its level's ConsumeQueue is empty (the first one,
    and one after the level was drained) is delivered 10 s after storing, within one 100 ms
    DELAY_FOR_A_WHILE tick. (The dispatch told the service before the unit counted, so a lone
    message in a level was never delivered.)"""
    env, b = make_broker()
    stored = []
    for at_us, seq in ((2_000_000, 1), (30_000_000, 2)):  # (the service begins 1 s after start)
        env.run(until=at_us)
        m = page_msg(seq)
        b.put_message(m.msg_id, m.topic, 0, m.size_bytes, m.body_bytes, None, 0, {PROPERTY_DELAY_TIME_LEVEL: 3})
        stored.append((m.msg_id, env._now))
    env.run(until=60_000_000)
    delivered = {r[3]: r[0] for r in env.tracer.of_kind(SCHEDULE_DELIVERED)}
    assert set(delivered) == {msg_id for msg_id, _ in stored}
    for msg_id, at_us in stored:
        assert 10_000_000 <= delivered[msg_id] - at_us <= 10_100_000, (msg_id, delivered[msg_id] - at_us)
