"""The store's memory per message (issue 41 item 5): ConsumeQueue units that share a tags code are held
in 12 bytes and read back exactly as the 20-byte ones; a run's stores can be freed before its analysis.

Component tests over a bare broker node (tests/models/test_store.py's helpers), and one run through
the runner with and without `release_store`.
"""

from __future__ import annotations

import json
import struct

import pytest

from models.broker.consume_queue import CQ_UNIT_BYTES, HASH_UNIT_BYTES, SAME_CODE_UNIT_BYTES, ConsumeQueue
from models.broker.message_store import FOUND, NO_MATCHED_MESSAGE
from models.message import PROPERTY_DELAY_TIME_LEVEL, SCHEDULE_TOPIC, java_string_hash, record_bytes
from rmqsim import runner
from rmqsim.scenario import spec as scenario_mod
from tests.models.test_store import TOPIC, get, make_broker, msg, put, stored


def wide_units(cq: ConsumeQueue) -> list[tuple[int, int, int]]:
    """Every unit as RocketMQ lays it out on disk (phys, size, tags code), through `unit`."""
    return [cq.unit(o) for o in range(cq.min_offset, cq.max_offset)]


def test_untagged_queue_holds_12_byte_units_that_read_back_as_20_byte_ones():
    env, broker = make_broker()
    for _ in range(5):
        put(broker, msg(50), 2)
    env.run(until=10_000)
    cq = broker.store.reput.queue(TOPIC, 2)
    assert cq.narrow and cq.code == 0 and len(cq.units) == SAME_CODE_UNIT_BYTES * 5 == 60
    assert wide_units(cq) == [(phys, size, 0) for phys, size, _q in stored(broker.commit_log)]
    assert [struct.unpack_from("<qi", cq.units, 12 * i) for i in range(5)] == \
        [(phys, size) for phys, size, _q in stored(broker.commit_log)]


def test_a_second_tags_code_widens_the_queue_to_16_byte_units_and_every_unit_keeps_its_code():
    env, broker = make_broker()
    tags = ["TagA", "TagA", "TagA", "TagB", None, "TagA", "polygenelubricants"]  # the last: -2^31
    for tag in tags:
        put(broker, msg(50, tag), 0)
        env.run(until=env.now + 2_000)  # each dispatched on its own: the widening happens mid-queue
    cq = broker.store.reput.queue(TOPIC, 0)
    codes = [java_string_hash(t) if t else 0 for t in tags]
    assert not cq.narrow and cq.code == 0 and len(cq.units) == HASH_UNIT_BYTES * len(tags)
    assert wide_units(cq) == [(phys, size, code) for (phys, size, _q), code in
                              zip(stored(broker.commit_log), codes, strict=True)]
    status, _nxt, _mx, msgs = get(broker, 0, tags={"TagA"})
    assert status == FOUND and [m.queue_offset for m in msgs] == [0, 1, 2, 5]
    assert [m.queue_offset for m in get(broker, 0, tags={"polygenelubricants"})[3]] == [6]


def test_a_narrow_queue_filters_by_its_shared_code():
    env, broker = make_broker()
    for _ in range(4):
        put(broker, msg(50, "TagA"), 0)
    env.run(until=10_000)
    cq = broker.store.reput.queue(TOPIC, 0)
    assert cq.narrow and cq.code == java_string_hash("TagA")
    assert [m.queue_offset for m in get(broker, 0, tags={"TagA"})[3]] == [0, 1, 2, 3]
    assert get(broker, 1, tags={"TagB"})[:2] == (NO_MATCHED_MESSAGE, 4)


def test_delay_level_queue_is_20_bytes_from_the_start_with_delivery_times():
    env, broker = make_broker()
    props = {PROPERTY_DELAY_TIME_LEVEL: 3}
    size = record_bytes(TOPIC, 50, None, 0, props, 0)
    broker.put_message(1, TOPIC, 0, size, 50, None, 0, props)
    env.run(until=10_000)
    queues = [cq for cq in broker.store.reput.queues.values() if cq.topic == SCHEDULE_TOPIC]
    assert len(queues) == 1
    cq = queues[0]
    assert not cq.narrow and len(cq.units) == CQ_UNIT_BYTES
    (phys, _size, _q), = stored(broker.commit_log)
    store_us = broker.store.store_time_us(cq, 0)
    assert cq.unit(0)[:1] == (phys,) and cq.unit(0)[2] == broker.store.reput.delivery_us(3, store_us) > store_us


@pytest.mark.parametrize("code, first_code, width", [(0, 0, 12), (0, 7, 16), (None, 0, 20)])
def test_truncate_dirty_and_drop_head_in_every_layout(code, first_code, width):
    cq = ConsumeQueue(TOPIC, 0, 0, code)
    codes = [first_code] + [0] * 5
    for k in range(6):
        cq.append(1_000 * k, 900, codes[k])
    assert cq.width == width and len(cq.units) == 6 * width
    cq.drop_head(2)
    assert (cq.min_offset, cq.max_offset) == (2, 6) and len(cq.units) == 4 * cq.width
    assert wide_units(cq) == [(1_000 * k, 900, 0) for k in range(2, 6)]
    assert cq.truncate_dirty(4_000) == 2  # units referencing data at or past 4000 go
    assert wide_units(cq) == [(2_000, 900, 0), (3_000, 900, 0)] and cq.last_end() == 3_900


# --- releasing the stores after the run -------------------------------------------------------------

def _scenario():
    return scenario_mod.load("scenarios/baseline.yaml", ["duration_ms=4500", "settle_ms=3000"])


def _store_sizes(result: runner.RunResult) -> tuple[int, int]:
    """(CommitLog records, ConsumeQueue unit bytes) still held by the run's brokers."""
    brokers = [m for m in result.world.models.values() if isinstance(m, runner.Broker)]
    assert brokers
    records = sum(len(f.rel) + len(f.data) for b in brokers for f in b.store.commit_log.files.files)
    units = sum(len(cq.units) for b in brokers for cq in b.store.reput.queues.values())
    return records, units


def test_release_store_frees_the_tables_and_changes_no_result():
    kept = runner.run_scenario(_scenario(), seed=3)
    released = runner.run_scenario(_scenario(), seed=3, release_store=True)
    assert kept.summary["sent_ok"] > 1_000 and all(_store_sizes(kept))  # the default keeps the store
    assert _store_sizes(released) == (0, 0)  # the mechanism ran: nothing per message is left
    assert released.summary == kept.summary  # the analysis read none of it


def test_units_and_reads_across_files_carry_physical_offsets():
    """Records in the third and later files: the CommitLog tables hold offsets from each file's
    start, the units and the messages read back the physical offsets (each record's own)."""
    env, broker = make_broker(mapped_file_size_commit_log_bytes=1 << 16)
    for k in range(60):
        put(broker, msg(3_000), k % 2)
        env.run(until=env.now + 2_000)
    log = broker.commit_log
    assert len(log.files.files) >= 3 and log.files.files[2].file_from_offset == 2 << 16
    records = stored(log)
    for queue_id in (0, 1):
        cq = broker.store.reput.queue(TOPIC, queue_id)
        mine = [(phys, size) for phys, size, _q in records[queue_id::2]]
        assert [u[:2] for u in wide_units(cq)] == mine
        read = []
        offset = 0
        while offset < cq.max_offset:  # from the head: lookups by offset, not the last unit's hint
            status, offset, _mx, msgs = get(broker, offset, queue_id=queue_id)
            assert status == FOUND
            read += [(m.phys_offset, m.size_bytes) for m in msgs]
        assert read == mine
    assert all(broker.store.look_message_by_offset(p).phys_offset == p for p, _s, _q in records)


def test_rmqsim_run_releases_the_stores_before_its_analysis(tmp_path, monkeypatch):
    """The CLI's run path frees the stores (its peak memory is then the simulation's), and after
    the run's quiescence verdict: the summary it writes is the in-process run's."""
    from rmqsim import cli

    released: list[int] = []
    real = runner.release_stores
    monkeypatch.setattr(runner, "release_stores", lambda world: (released.append(1), real(world)))
    out = tmp_path / "run"
    assert cli.main(["run", "scenarios/baseline.yaml", "--seed", "3", "--set", "duration_ms=4500",
                     "--set", "settle_ms=3000", "--out", str(out)]) == 0
    assert released == [1]
    assert json.loads((out / "summary.json").read_text()) == runner.run_scenario(_scenario(), seed=3).summary
