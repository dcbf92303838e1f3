"""The model features issue 42's atlas needed, as stories over seeds (bounds and the mechanism seen).

- `fsync_error` (sim/disk.py, models/broker/commit_log.py): a failed fsync is swallowed as
  MappedFile.flush does — SYNC_FLUSH sends still get SEND_OK — and a later power loss cuts the
  CommitLog at the first failed fsync (cause `fsync_error_swallowed`); a process crash loses nothing.
- `service_error` on `transaction_check` (models/broker/transaction_check.py): a round that throws
  stores neither consume offset (#9500), so unresolved halves are checked from their originals
  every round and each copy's COMMIT writes the message again.
- a delay level on a transactional message (models/producer/transaction_producer.py):
  sendMessageInTransaction clears it, so the commit is visible at once (#1540).
"""

from __future__ import annotations

import functools

import pytest

import rmqsim
from rmqsim.scenario.spec import load
from sim.config import ConfigError
from sim.trace import field_index
from tests.conftest import ROOT

SEEDS = (1, 2, 3)
ATLAS = ROOT / "scenarios" / "atlas"


@functools.cache
def run(name: str, seed: int, *overrides: str):
    return rmqsim.run(str(ATLAS / f"{name}.yaml"), seed=seed, overrides=list(overrides), keep_records=True)


def recs(result, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind]


def col(kind: str, field: str) -> int:
    return field_index(kind, field)


def refusal(tmp_path, text: str) -> str:
    """The ConfigError a scenario file of `text` is refused with (it must be refused)."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load(path)
    return str(err.value)


def fault_window_us(result, kind: str) -> tuple[int, int]:
    start = next(r[0] for r in recs(result, "fault.injected") if r[3] == kind)
    detail = next(r[5] for r in recs(result, "fault.injected") if r[3] == kind)
    return start, start + int(float(detail.split("=", 1)[1]) * 1000)


# --- fsync_error ----------------------------------------------------------------------------------

FSYNC = "31_fsync_error_swallowed"


@pytest.mark.parametrize("seed", SEEDS)
def test_failed_fsync_is_acknowledged_then_lost_at_power_loss(seed: int) -> None:
    r = run(FSYNC, seed, "settle_ms=20s")
    s = r.summary
    errors = recs(r, "commit_log.flush_error")
    start, end = fault_window_us(r, "fsync_error")
    assert errors and all(start <= e[0] < end for e in errors)  # the mechanism, inside the fault window only
    assert errors[-1][0] >= end - 100_000  # ... and through all of it (SYNC_FLUSH forces every few ms)
    lost_from = {e[col("commit_log.flush_error", "lost_from")] for e in errors}
    assert len(lost_from) == 1  # one hole: the flushed position before the first failed fsync
    hole = lost_from.pop()
    positions = [e[col("commit_log.flush_error", "position")] for e in errors]
    assert positions == sorted(positions) and positions[0] > hole  # the flushed position moved on regardless
    assert s["sent_not_ok"] == 0  # never FLUSH_DISK_TIMEOUT: GroupCommitService saw flushedWhere move
    assert s["lost"] >= 1 and s["lost"] == s["lost_by_cause"]["fsync_error_swallowed"]
    # every lost message was acknowledged and stored on broker-a at or past the hole
    st, mid = col("producer.sent", "status"), col("producer.sent", "msg_id")
    acked = {x[mid] for x in recs(r, "producer.sent") if x[st] == "SEND_OK"}
    phys = {x[3]: x[col("broker.stored", "phys_offset")] for x in recs(r, "broker.stored")
            if x[1] == "broker-a" and x[0] < fault_window_us(r, "power_loss")[0]}
    destroyed = {x[3] for x in recs(r, "commit_log.destroyed") if x[col("commit_log.destroyed", "fault")] ==
                 "fsync_error"}
    assert destroyed and destroyed <= acked
    assert all(phys[m] >= hole for m in destroyed)
    truncated = recs(r, "commit_log.truncated")
    assert truncated and truncated[0][col("commit_log.truncated", "position")] <= hole


def test_without_the_failed_fsync_sync_flush_loses_nothing() -> None:
    r = run(FSYNC, 1, "settle_ms=20s", "faults[0].at_ms=29s", "faults[0].jitter_ms=0", "faults[0].duration_ms=500ms")
    assert not [e for e in recs(r, "commit_log.flush_error") if e[0] < 16_000_000]
    assert r.summary["lost"] == 0


def test_failed_fsync_then_process_crash_loses_nothing() -> None:
    """The pages the kernel did not write stay in the page cache: a process crash keeps them."""
    r = run(FSYNC, 1, "settle_ms=20s", "faults[1].kind=process_crash")
    assert recs(r, "commit_log.flush_error")
    assert r.summary["lost"] == 0


def test_fsync_error_needs_a_broker_and_a_duration(tmp_path) -> None:
    text = refusal(tmp_path, "consumers: [{name: c, group: g, topic: TopicTest}]\n"
                             "faults:\n  - {at_ms: 1s, kind: fsync_error, node: c, duration_ms: 1s}\n"
                             "  - {at_ms: 1s, kind: fsync_error, node: broker-a}\n")
    assert "faults[0].node: fsync_error needs a node with a disk (a broker)" in text
    assert "kind 'fsync_error' needs duration_ms" in text


# --- service_error: the transaction check throws ----------------------------------------------------

CHECK = "35_txn_check_exception"


@pytest.mark.parametrize("seed", SEEDS)
def test_check_round_that_throws_keeps_its_offsets_and_commits_again(seed: int) -> None:
    r = run(CHECK, seed)
    s = r.summary
    start, end = fault_window_us(r, "service_error")
    errors = recs(r, "txn.check_error")
    assert len(errors) >= 2 and all(start <= e[0] < end for e in errors)
    half = [e[col("txn.check_error", "half_offset")] for e in errors]
    scanned = [e[col("txn.check_error", "scanned_to")] for e in errors]
    assert len(set(half)) == 1  # every round starts from the same half offset: none was stored
    assert all(t > h for t, h in zip(scanned, half, strict=True))  # though each round scanned past it
    # the originals are checked every round, with check count 1 each time (the count lives in the copies)
    checked = recs(r, "txn.checked")
    in_window = [c for c in checked if start <= c[0] < end]
    by_msg: dict[int, int] = {}
    for c in in_window:
        by_msg[c[3]] = by_msg.get(c[3], 0) + 1
    assert max(by_msg.values()) >= 2
    assert s["txn"]["double_commits"] >= 1 and s["duplicates_by_cause"]["txn_double_commit"] >= 1
    assert s["txn"]["discarded"] == 0 and s["lost"] == 0


def test_without_the_exception_each_unknown_half_commits_once() -> None:
    r = run(CHECK, 1, "faults[0].at_ms=39s", "faults[0].duration_ms=500ms")
    assert not [e for e in recs(r, "txn.check_error") if e[0] < 39_000_000]
    assert r.summary["txn"]["checks"] >= 1  # UNKNOW halves were checked ...
    assert r.summary["txn"]["double_commits"] == 0  # ... and committed once


@pytest.mark.parametrize(("fault", "problem"), [
    ("{at_ms: 1s, kind: service_error, node: broker-a, service: transaction_chek, duration_ms: 1s}",
     "faults[0].service: a broker has no service 'transaction_chek' that can throw (did you mean "
     "'transaction_check'?)"),
    ("{at_ms: 1s, kind: service_error, node: c, service: transaction_check, duration_ms: 1s}",
     "faults[0].node: service_error needs a master broker"),
    ("{at_ms: 1s, kind: service_error, node: broker-a, duration_ms: 1s}", "needs service"),
])
def test_service_error_is_validated(tmp_path, fault: str, problem: str) -> None:
    assert problem in refusal(tmp_path, f"consumers: [{{name: c, group: g, topic: TopicTest}}]\nfaults:\n  - {fault}\n")


# --- a delay level on a transactional message -----------------------------------------------------

DELAY = "34_txn_delay_level_cleared"


@pytest.mark.parametrize("seed", SEEDS)
def test_transactional_delay_level_is_cleared_and_the_commit_visible_at_once(seed: int) -> None:
    r = run(DELAY, seed)
    s = r.summary
    cleared = recs(r, "producer.txn_delay_cleared")
    assert cleared and len(cleared) == s["txn"]["transactions"]  # the mechanism: every send cleared it
    assert {c[col("producer.txn_delay_cleared", "delay_level")] for c in cleared} == {3}
    assert not [x for x in recs(r, "broker.stored") if x[4] == "SCHEDULE_TOPIC_XXXX"]
    assert s["txn"]["committed_lost"] == 0 and s["txn"]["committed_visible"] == s["txn"]["transactions"]


# --- two consumers with one instanceName (one client id) ------------------------------------------

SAME_ID = "30_same_instance_name"


@pytest.mark.parametrize("seed", SEEDS)
def test_two_members_with_one_client_id_take_the_same_queues(seed: int) -> None:
    r = run(SAME_ID, seed)
    s = r.summary
    qid, ok = col("consumer.consumed", "queue_id"), col("consumer.consumed", "ok")
    by_node: dict[str, set[int]] = {}
    for c in recs(r, "consumer.consumed"):
        if c[ok] and 5_000_000 < c[0] < 12_000_000:  # after the start-up rebalances, before d stops
            by_node.setdefault(c[1], set()).add(c[qid])
    # both allocate as index 0 of cidAll [X, X]: AVG gives each the first half of the 4 queues
    assert sorted(by_node.values(), key=sorted) == [{0, 1}, {0, 1}], by_node
    assert s["duplicates"] >= 100 and s["duplicates_by_cause"]["rebalance"] == s["duplicates"]
    assert s["lag_max"] >= 500  # queues 2 and 3: nobody's while both run
    # once d shut down, the survivor owns every queue and drains them
    assert s["groups"]["billing"]["consumed_ok_distinct"] == s["stored"] and s["lost"] == 0


def test_distinct_instance_names_share_the_queues() -> None:
    r = run(SAME_ID, 1, "consumers[0].client.instance_name=null", "consumers[0].client.client_ip=null")
    assert r.summary["duplicates"] == 0
    assert r.summary["groups"]["billing"]["consumed_ok_distinct"] == r.summary["stored"]


def test_client_id_is_client_ip_at_instance_name() -> None:
    from models.client_instance import build_mq_client_id
    assert build_mq_client_id("c-1") == "c-1"  # DEFAULT → <pid>#<nanoTime>: unique, the node name stands for it
    assert build_mq_client_id("c-1", None, "app") == "c-1@app"
    assert build_mq_client_id("c-1", "10.0.0.7", "app") == build_mq_client_id("c-2", "10.0.0.7", "app")


@pytest.mark.parametrize(("client", "problem"), [
    ("{client_ip: 10.0.0.7}", "client.client_ip enters the client id only with client.instance_name"),
    ("{client_ip: 'bad ip', instance_name: app}", "client_ip"),
])
def test_client_id_fields_are_validated(tmp_path, client: str, problem: str) -> None:
    assert problem in refusal(tmp_path, f"consumers: [{{name: c, group: g, topic: TopicTest, client: {client}}}]\n")
