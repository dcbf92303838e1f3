"""The bundled broker scenarios: each validates, states its question and expected outcome in its
header, and the two not covered by test_broker_fault_stories.py (broker_busy,
reset_offset_by_time) show what their headers promise, as bounds over several seeds.

Reference: rocketmq-semantics.md 1.9 (BrokerFastFailure, busy codes), 6.5 (offset by time and
the reset).
"""

from __future__ import annotations

import pytest

from models.protocol import SYSTEM_BUSY
from rmqsim.scenario.spec import load
from tests.conftest import ROOT
from tests.test_broker_fault_stories import fi, recs, run  # one cache of runs for both files

BROKER_SCENARIOS = ("process_crash_async_flush", "power_loss_sync_master", "power_loss_async_master",
                    "transient_store_pool_crash", "broker_busy", "reset_offset_by_time")
SEEDS = (1, 2)
SEC = 1_000_000  # µs


@pytest.mark.parametrize("name", BROKER_SCENARIOS)
def test_broker_scenario_validates_and_states_question_and_expectation(name: str) -> None:
    path = ROOT / "scenarios" / f"{name}.yaml"
    assert load(str(path)).name == name
    header = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    text = " ".join(header)
    assert header[0].startswith("# Question:") and "Expected" in text


def test_power_loss_scenarios_draw_the_fault_time_from_the_seed() -> None:
    for name in ("power_loss_sync_master", "power_loss_async_master"):
        faults = load(str(ROOT / "scenarios" / f"{name}.yaml")).faults
        assert any(f.kind == "power_loss" and f.jitter_ms > 0 for f in faults)


# --- broker_busy ----------------------------------------------------------------------------------

DISK_SLOW_AT_US, DISK_SLOW_US = 20 * SEC, 5 * SEC
PC_BUSY = ("REJECTREQUEST", "PCBUSY_CLEAN_QUEUE", "PC_SYNCHRONIZED")


@pytest.mark.parametrize("seed", SEEDS)
def test_busy_broker_answers_system_busy_and_producers_lose_nothing(seed: int) -> None:
    r = run("broker_busy", seed, "duration_ms=30s")
    s = r.summary
    assert s["lost"] == 0 and s["sent_ok"] > 0 and s["verdict"] == "valid"
    reason = fi("broker.busy", "reason")
    busy = recs(r, "broker.busy")
    # below saturation nothing is busy: the first busy answer comes with the slow disk
    assert busy and min(x[0] for x in busy) >= DISK_SLOW_AT_US
    assert any(x[reason] == "TIMEOUT_CLEAN_QUEUE" for x in busy)  # 200 ms in the send queue
    page_cache_busy = [x[0] for x in busy if x[reason] in PC_BUSY]
    # the put lock is held over 1 s (osPageCacheBusyTimeOutMills) only on the slow broker, after
    # at least that long into the slowdown and until the lock holder in the slowdown lets go
    assert page_cache_busy and {x[1] for x in busy if x[reason] in PC_BUSY} == {"broker-a"}
    assert DISK_SLOW_AT_US + SEC <= min(page_cache_busy) and max(page_cache_busy) < DISK_SLOW_AT_US + DISK_SLOW_US + 3 * SEC
    # producers retry SYSTEM_BUSY on the other broker; what fails, fails after its attempts (labelled
    # with the last attempt's broker code, SYSTEM_BUSY here) or its timeout
    failed = recs(r, "producer.send_failed")
    reasons = {x[fi("producer.send_failed", "reason")] for x in failed}
    assert reasons <= {f"broker_code_{SYSTEM_BUSY}", "failed_after_3_times", "call_timeout", "timeout"}, reasons
    assert s["latency_ms"]["p99"] > 100  # the tail waits in send queues


# --- reset_offset_by_time -------------------------------------------------------------------------

RESET_AT_US, TO_TIME_US = 40 * SEC, 10 * SEC
REBALANCE_INTERVAL_US = 20 * SEC  # RebalanceService.waitInterval
CLIENT_RESET_PAUSE_US = 10 * SEC  # MQClientInstance.resetOffset: sleep(10 s)


def _reconsumed(result) -> tuple[dict[int, int], dict[int, int], set[int]]:
    """(msg id → store time, msg id → first consumption after the reset, ids consumed before and after)."""
    ok, mid = fi("consumer.consumed", "ok"), fi("consumer.consumed", "msg_id")
    smid = fi("broker.stored", "msg_id")
    stored = {x[smid]: x[0] for x in recs(result, "broker.stored")}
    before: set[int] = set()
    after: dict[int, int] = {}
    for x in recs(result, "consumer.consumed"):
        if x[ok]:
            if x[0] < RESET_AT_US:
                before.add(x[mid])
            else:
                after.setdefault(x[mid], x[0])
    return stored, after, before & set(after)


def _consumed_since_but_not_again(stored: dict[int, int], again: set[int], result) -> set[int]:
    """Messages stored from the reset time until shortly before the reset and consumed before the
    reset that were not consumed again after it (the reset brings each of them back)."""
    ok, mid = fi("consumer.consumed", "ok"), fi("consumer.consumed", "msg_id")
    consumed_before = {x[mid] for x in recs(result, "consumer.consumed") if x[ok] and x[0] < RESET_AT_US}
    return {m for m, t in stored.items() if TO_TIME_US <= t < RESET_AT_US - SEC and m in consumed_before} - again


@pytest.mark.parametrize("seed", SEEDS)
def test_5x_reset_by_time_redelivers_exactly_what_was_stored_since(seed: int) -> None:
    r = run("reset_offset_by_time", seed)
    s = r.summary
    assert s["lost"] == 0 and s["duplicates"] == s["duplicate_causes"]["redelivery"] > 0
    # every re-read explained by the reset, the copies consumed from a dropped queue's cache included
    assert s["duplicates"] == s["duplicates_by_cause"]["offset_reset"], s["duplicates_by_cause"]
    stored, after, again = _reconsumed(r)
    # LOWER: the first message stored at or after 10 s; everything consumed since comes again
    assert all(stored[m] >= TO_TIME_US for m in again)
    assert not _consumed_since_but_not_again(stored, again, r)
    # on the broker: the next pull of each queue answers PULL_OFFSET_MOVED
    assert RESET_AT_US < min(after[m] for m in again) < RESET_AT_US + 2 * SEC
    assert all(x[-1] for x in recs(r, "admin.offset_reset"))  # server_side
    assert recs(r, "consumer.offset_moved")


def test_4x_reset_by_time_is_pushed_to_clients_which_pause_then_rebalance() -> None:
    r = run("reset_offset_by_time", 1, "version=4.x")
    s = r.summary
    assert s["lost"] == 0 and s["duplicates"] > 0
    assert not any(x[-1] for x in recs(r, "admin.offset_reset"))  # pushed to the clients
    client_resets = [x[0] for x in recs(r, "consumer.offset_reset")]
    assert client_resets and all(RESET_AT_US + CLIENT_RESET_PAUSE_US <= t < RESET_AT_US + CLIENT_RESET_PAUSE_US + SEC
                                 for t in client_resets)
    stored, after, again = _reconsumed(r)
    first = min(after[m] for m in again)
    assert RESET_AT_US + CLIENT_RESET_PAUSE_US <= first <= RESET_AT_US + CLIENT_RESET_PAUSE_US + REBALANCE_INTERVAL_US + SEC
    # nearest: a message stored just before 10 s may be the one it lands on, never one long before
    assert all(stored[m] >= TO_TIME_US - SEC for m in again)
    assert not _consumed_since_but_not_again(stored, again, r)


# --- CONSUME_FROM_TIMESTAMP -----------------------------------------------------------------------

def test_new_group_consuming_from_timestamp_starts_at_the_first_message_stored_since() -> None:
    """A group that starts at 20 s with CONSUME_FROM_TIMESTAMP at 10 s: the brokers know no offset
    for it, and their queue heads are out of memory (a small host, so the 5.1.0+ rule "hot head →
    start at 0" does not apply), so each queue starts at searchOffset(10 s)."""
    small_host = [f"cluster.brokers[{i}].store.physical_memory_bytes=5000000" for i in (0, 1)]
    r = run("reset_offset_by_time", 1, "actions=[]", "duration_ms=30s", "consumers[0].start_ms=20s",
            "consumers[0].client.consume_from_where=CONSUME_FROM_TIMESTAMP",
            "consumers[0].client.consume_timestamp_ms=10s", *small_host)
    smid = fi("broker.stored", "msg_id")
    stored = {x[smid]: x[0] for x in recs(r, "broker.stored")}
    ok, mid = fi("consumer.consumed", "ok"), fi("consumer.consumed", "msg_id")
    consumed = {x[mid] for x in recs(r, "consumer.consumed") if x[ok]}
    assert consumed and min(stored[m] for m in consumed) >= TO_TIME_US
    assert not {m for m, t in stored.items() if t >= TO_TIME_US} - consumed
    # what was stored before the timestamp is never consumed by this group: reported as lost
    assert r.summary["lost"] == sum(1 for t in stored.values() if t < TO_TIME_US) > 0
