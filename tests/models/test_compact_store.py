"""The compact store (issue 9): MappedFile tables, ConsumeQueue units, lookups, recovery.

Component tests over a bare broker node: each states what RocketMQ's layout promises (a record
never spans a mapped file, a CQ unit is 20 bytes, the tags code is Java's String.hashCode, the
scan window grows with maxMsgNums) and checks it on the compact tables, with timelines where
time matters (dispatch after a restart).
"""

from __future__ import annotations

import struct

import pytest

from models.broker.commit_log import BLANK_MIN_BYTES
from models.broker.config import MAX_SCAN_BYTES
from models.broker.consume_queue import CQ_UNIT_BYTES
from models.broker.mapped_file import (
    F_MSG_ID,
    F_QUEUE_ID,
    F_QUEUE_OFFSET,
    F_RECONSUME,
    F_SIZE,
    F_STORE_US,
    F_TAGS,
    F_TOPIC,
    RECORD,
    RECORD_BYTES,
    MappedFile,
    MappedFileQueue,
)
from models.broker.message_store import FOUND, NO_MATCHED_MESSAGE
from models.message import (
    PROPERTY_RETRY_TOPIC,
    SCHEDULE_TOPIC,
    MessageExt,
    java_string_hash,
    record_bytes,
)
from tests.models.test_store import FILE, TOPIC, at, body_for, get, make_broker, msg, put, stored


def files_of(broker) -> list[MappedFile]:
    return broker.commit_log.files.files


def units(cq) -> list[tuple[int, int, int]]:
    """A ConsumeQueue's units decoded with the documented layouts (consume_queue.py): phys (8), size
    (4), tags code (8) on disk and in a delay-level queue; phys (8), size (4) and the shared code while
    the queue's units share one (`narrow`); phys (8), size (4), tags code (4, an int) otherwise."""
    raw = bytes(cq.units)
    if cq.narrow:
        assert len(raw) % 12 == 0
        return [(*struct.unpack_from("<qi", raw, i), cq.code) for i in range(0, len(raw), 12)]
    layout = "<qiq" if cq.topic == SCHEDULE_TOPIC else "<qii"
    width = struct.calcsize(layout)
    assert cq.width == width and len(raw) % width == 0
    return [struct.unpack_from(layout, raw, i) for i in range(0, len(raw), width)]


def dispatched(env, broker) -> list[tuple[int, str, int, int]]:
    out: list[tuple[int, str, int, int]] = []
    broker.store.reput.listeners.append(lambda cq: out.append((env.now, cq.topic, cq.queue_id, cq.max_offset)))
    return out


# --- MappedFile roll-over -------------------------------------------------------------------------

def test_mapped_files_roll_over_at_the_file_size_and_no_record_spans_two():
    env, broker = make_broker()
    # file 1: 9000 + 30000 + 26528 ends exactly BLANK_MIN_BYTES before the file end (it fits);
    # file 2: 12000 + 40000, then 20000 would leave less than a blank record: next file;
    # file 3: 20000 + 5000, then 60000 does not fit; file 4: 60000
    sizes = [9_000, 30_000, 26_528, 12_000, 40_000, 20_000, 5_000, 60_000]
    for size in sizes:
        put(broker, msg(body_for(size)), 0)
    files = files_of(broker)
    assert [f.file_from_offset for f in files] == [0, FILE, 2 * FILE, 3 * FILE]
    assert [len(f) for f in files] == [3, 2, 2, 1]
    assert files[0].end() == FILE - BLANK_MIN_BYTES
    for f in files:
        for i in range(len(f)):
            start, size = f.offset(i), f.record(i)[F_SIZE]
            assert f.file_from_offset <= start and start + size <= f.file_from_offset + FILE - BLANK_MIN_BYTES
        assert len(f.data) == len(f) * RECORD_BYTES  # one fixed-width record per message
    assert [size for _p, size, _q in stored(broker.commit_log)] == sizes
    assert [q for _p, _s, q in stored(broker.commit_log)] == list(range(len(sizes)))
    assert len(broker.commit_log.files) == broker.commit_log.record_count == len(sizes)


def test_mapped_file_record_holds_the_message_facts():
    env, broker = make_broker()
    m = msg(100, "TagA")
    at(env, 1_234, put, broker, m, 2)
    env.run(until=10_000)
    (mapped,) = files_of(broker)
    record = mapped.record(0)
    assert record[F_SIZE] == record_bytes(TOPIC, 100, "TagA")
    assert record[F_STORE_US] == 1_234
    assert (record[F_QUEUE_ID], record[F_QUEUE_OFFSET], record[F_RECONSUME]) == (2, 0, 0)
    assert record[F_MSG_ID] == m.msg_id
    assert broker.commit_log.topics[record[F_TOPIC]] == TOPIC and broker.commit_log.tags[record[F_TAGS]] == "TagA"


# --- power loss: truncation as slices -------------------------------------------------------------

@pytest.mark.parametrize("cut", ["mid_record", "record_end", "file_boundary"])
def test_power_loss_keeps_exactly_the_records_below_the_flushed_position(cut):
    env, broker = make_broker()
    log = broker.commit_log
    for size in [20_000, 20_000, 20_000, 20_000, 20_000, 20_000, 20_000]:  # 3 per file
        put(broker, msg(body_for(size)), size % 7)
    before = stored(log)
    assert [f.file_from_offset for f in files_of(broker)] == [0, FILE, 2 * FILE]
    flushed = {"mid_record": before[4][0] + 10_000,  # inside the 5th record (2nd of file 2)
               "record_end": before[4][0] + before[4][1],  # exactly the end of the 5th
               "file_boundary": FILE}[cut]
    log.mark_flushed(flushed)
    broker.node.crash(power_loss=True)
    kept = [r for r in before if r[0] + r[1] <= flushed]
    assert stored(log) == kept
    assert len(kept) == {"mid_record": 4, "record_end": 5, "file_boundary": 3}[cut]
    assert log.wrote_position == kept[-1][0] + kept[-1][1]
    assert log.flushed_position == min(flushed, log.wrote_position)
    for f in files_of(broker):  # the tables were cut, not rebuilt: arrays stay parallel
        assert len(f.data) == len(f.rel) * RECORD_BYTES
    assert files_of(broker)[-1].file_from_offset <= kept[-1][0]
    truncated = next(broker.node.env.tracer.of_kind("commit_log.truncated"))
    assert truncated[3:] == (log.wrote_position, len(before) - len(kept))


def test_truncation_drops_the_properties_of_lost_records():
    queue = MappedFileQueue(FILE)
    mapped = queue.last(0)
    for i in range(4):
        mapped.rel.append(i * 1_000)
        mapped.data += RECORD.pack(1_000, 0, 0, i, i, 0, 0, 1, 0)
        mapped.props[i] = {PROPERTY_RETRY_TOPIC: "T"}
    assert queue.truncate_to(2_500) == 2  # records end at 1000, 2000 | 3000, 4000
    assert list(mapped.rel) == [0, 1_000] and sorted(mapped.props) == [0, 1]
    assert queue.end() == 2_000


# --- ConsumeQueue units ---------------------------------------------------------------------------

def test_consume_queue_units_are_phys_size_tags_hash_code():
    """20 bytes a unit on disk (CQ_UNIT_BYTES); held in 16 once a queue's codes differ (an int each)."""
    env, broker = make_broker()
    tags = ["TagA", None, "hello world", "polygenelubricants", "\U0001F600"]
    for tag in tags:
        put(broker, msg(50, tag), 1)
    env.run(until=10_000)
    cq = broker.store.reput.queue(TOPIC, 1)
    assert CQ_UNIT_BYTES == 20 and isinstance(cq.units, bytearray)
    assert len(cq.units) == 16 * len(tags) and cq.max_offset == len(tags)
    log_records = stored(broker.commit_log)
    # Java String.hashCode values, as the JDK computes them (UTF-16 code units, int overflow)
    java_codes = [2_598_919, 0, 1_794_106_052, -(2**31), 1_772_899]
    assert [java_string_hash(t) for t in tags if t] == [c for c, t in zip(java_codes, tags, strict=True) if t]
    assert units(cq) == [(phys, size, code) for (phys, size, _q), code in zip(log_records, java_codes, strict=True)]
    assert [cq.unit(i) for i in range(len(tags))] == units(cq)


def test_broker_filters_by_tags_hash_code_so_collisions_pass():
    """The broker compares hash codes only ("Aa" and "BB" share 2112); the client re-checks strings."""
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    env, broker = make_broker()
    for tag in ["Aa", "BB", "Cc", None, "Aa"]:
        put(broker, msg(50, tag), 0)
    env.run(until=10_000)
    status, nxt, _mx, msgs = get(broker, 0, tags={"Aa"})
    assert (status, nxt) == (FOUND, 5)
    assert [(m.queue_offset, m.tags) for m in msgs] == [(0, "Aa"), (1, "BB"), (4, "Aa")]
    assert get(broker, 0, tags={"Zz"})[:2] == (NO_MATCHED_MESSAGE, 5)
    assert [m.queue_offset for m in get(broker, 0)[3]] == [0, 1, 2, 3, 4]  # '*': no filter


@pytest.mark.parametrize("max_msg_nums, scanned", [(32, 800), (800, 800), (900, 900), (1_000, 1_000)])
def test_scan_window_grows_with_max_msg_nums(max_msg_nums, scanned):
    """max(16000, maxMsgNums × 20) bytes of units are scanned per getMessage."""
    env, broker = make_broker()
    for _ in range(1_200):
        put(broker, msg(10, "B"), 0)
    env.run(until=10_000)
    assert max(MAX_SCAN_BYTES, max_msg_nums * CQ_UNIT_BYTES) // CQ_UNIT_BYTES == scanned
    assert get(broker, 0, max_msg_nums, tags={"A"}) == (NO_MATCHED_MESSAGE, scanned, 1_200, ())
    assert get(broker, 1_000, max_msg_nums, tags={"A"})[:2] == (NO_MATCHED_MESSAGE, min(1_200, 1_000 + scanned))


# --- lookMessageByOffset --------------------------------------------------------------------------

def test_look_message_by_offset():
    env, broker = make_broker()
    first, second = msg(100, "TagA"), msg(200)
    at(env, 1_000, put, broker, first, 3)
    at(env, 2_000, put, broker, second, 3)
    retry_props = {PROPERTY_RETRY_TOPIC: TOPIC}
    at(env, 3_000, lambda: broker.put_message(first.msg_id, "%RETRY%g", 0, record_bytes("%RETRY%g", 100, "TagA", 0,
                                                                                         retry_props, 1),
                                              100, "TagA", 1, retry_props))
    env.run(until=10_000)
    store = broker.store
    (p1, s1, _), (p2, s2, _), (p3, s3, _) = stored(broker.commit_log)
    got = store.look_message_by_offset(p1)
    assert got == MessageExt(first.msg_id, TOPIC, 3, 0, p1, s1, 1_000, "TagA", 0, 100, None)
    assert store.look_message_by_offset(p2) == MessageExt(second.msg_id, TOPIC, 3, 1, p2, s2, 2_000, None, 0, 200, None)
    retry = store.look_message_by_offset(p3)
    assert (retry.msg_id, retry.topic, retry.user_topic, retry.reconsume_times) == (first.msg_id, "%RETRY%g", TOPIC, 1)
    assert retry.props == retry_props and retry.tags == "TagA"
    assert store.look_message_by_offset(p1 + 1) is None  # not the start of a record
    assert store.look_message_by_offset(p3 + s3) is None  # beyond the last record
    assert store.look_message_by_offset(5 * FILE) is None  # no such file


def test_look_message_by_offset_after_power_loss_finds_only_surviving_records():
    env, broker = make_broker()
    for _ in range(3):
        put(broker, msg(), 0)
    (p1, s1, _), (p2, _s2, _), (p3, _s3, _) = stored(broker.commit_log)
    broker.commit_log.mark_flushed(p1 + s1)
    broker.node.crash(power_loss=True)
    assert broker.store.look_message_by_offset(p1) is not None
    assert broker.store.look_message_by_offset(p2) is None and broker.store.look_message_by_offset(p3) is None


# --- recovery re-dispatches -----------------------------------------------------------------------

def test_recovery_dispatches_records_appended_but_not_yet_dispatched():
    env, broker = make_broker()
    out = dispatched(env, broker)
    at(env, 1_200, put, broker, msg(), 0)
    at(env, 1_500, lambda: [put(broker, msg(), q) for q in (0, 1)])  # dispatch due at 2 ms
    at(env, 1_800, broker.node.crash)  # process crash: page cache kept, the dispatch never ran
    at(env, 1_900, broker.node.restart)  # serves (and recovers) after startup 2 s: 2_001_900
    env.run(until=3_000_000)
    assert out == [(2_001_900, TOPIC, 0, 2), (2_001_900, TOPIC, 1, 1)]
    assert broker.commit_log.queue_offsets  # topicQueueTable rebuilt from the queues
    assert put(broker, msg(), 0)[1] == 2 and put(broker, msg(), 1)[1] == 1


def test_recovery_after_power_loss_drops_dirty_units_and_dispatches_flushed_records():
    env, broker = make_broker()
    out = dispatched(env, broker)
    log = broker.commit_log
    at(env, 1_500, lambda: [put(broker, msg(), 0) for _ in range(3)])  # dispatched at 2 ms
    at(env, 2_500, lambda: [put(broker, msg(), 0) for _ in range(2)])  # due at 3 ms, never dispatched
    at(env, 2_600, lambda: log.mark_flushed(stored(log)[1][0] + stored(log)[1][1]))  # 2 records on disk
    at(env, 2_700, broker.node.crash, True)
    at(env, 2_800, broker.node.restart)
    env.run(until=3_000_000)
    assert out == [(2_000, TOPIC, 0, 3)]  # recovery shrinks the queue: no new units to announce
    assert broker.store.max_offset(TOPIC, 0) == 2  # units 2.. referenced lost CommitLog data
    assert len(units(broker.store.reput.queue(TOPIC, 0))) == 2
    assert put(broker, msg(), 0)[1] == 2  # queue offsets reused from the surviving queue

    env2, broker2 = make_broker()
    log2 = broker2.commit_log
    at(env2, 1_500, lambda: [put(broker2, msg(), 0) for _ in range(2)])  # dispatched at 2 ms
    at(env2, 2_500, lambda: [put(broker2, msg(), 0) for _ in range(2)])  # due at 3 ms
    at(env2, 2_600, lambda: log2.mark_flushed(log2.wrote_position))  # all four on disk, two dispatched
    at(env2, 2_700, broker2.node.crash, True)
    at(env2, 2_800, broker2.node.restart)
    env2.run(until=3_000_000)
    assert broker2.store.max_offset(TOPIC, 0) == 4  # the flushed, undispatched records re-dispatched
    assert [u[0] for u in units(broker2.store.reput.queue(TOPIC, 0))] == [p for p, _s, _q in stored(log2)]
