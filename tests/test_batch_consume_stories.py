"""Concurrent batch consumption (models/consumer/consume_batch.py) on scenarios/batch_consume_failures.yaml,
over three seeds: every failed batch sends back exactly the messages after its ackIndex (the whole
batch with RECONSUME_LATER), nothing else is sent back, nothing is lost, and only RECONSUME_LATER
makes duplicates (cause send_back). Plus the header's claims and a component timeline."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

import rmqsim
from sim.trace import field_index
from tests.conftest import ROOT

SCENARIO = ROOT / "scenarios" / "batch_consume_failures.yaml"
SEEDS = (1, 2, 3)
POLICIES = ("reconsume_later", "ack_index")
BATCH = 8  # the scenario's consumeMessageBatchMaxSize


@functools.cache
def run(seed: int, policy: str) -> rmqsim.RunResult:
    return rmqsim.run(SCENARIO, seed=seed, overrides=[f"consumers[0].batch_failure={policy}"], keep_records=True)


def batches(records: list[tuple], cap: int = BATCH) -> list[list[tuple]]:
    """Listener calls: consecutive consumption records of one consumer, queue and instant, of
    consecutive queue offsets and at most `cap` (two calls on one queue may end in the same µs)."""
    out: list[list[tuple]] = []
    key = None
    b, q, off = (field_index("consumer.consumed", f) for f in ("broker", "queue_id", "queue_offset"))
    for r in records:
        if r[2] != "consumer.consumed":
            key = None
            continue
        k = (r[0], r[1], r[b], r[q])
        if k == key and r[off] == out[-1][-1][off] + 1 and len(out[-1]) < cap:
            out[-1].append(r)
        else:
            out.append([r])
            key = k
    return out


def expected_send_backs(records: list[tuple], policy: str) -> Counter:
    ok, times = field_index("consumer.consumed", "ok"), field_index("consumer.consumed", "reconsume_times")
    want: Counter = Counter()
    for batch in batches(records):
        failed = [i for i, r in enumerate(batch) if not r[ok]]
        if not failed:
            continue
        first = failed[0]
        assert all(not r[ok] for r in batch[first:]), "a listener stops at its first failure"
        sent = batch if policy == "reconsume_later" else batch[first:]
        want.update((r[4], r[times]) for r in sent)
    return want


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_failed_batch_sends_back_exactly_what_follows_its_ack_index(seed: int, policy: str) -> None:
    r = run(seed, policy)
    recs = r.records
    sent = Counter((x[4], x[5]) for x in recs if x[2] == "consumer.sent_back")
    want = expected_send_backs(recs, policy)
    assert want, "some batch failed"
    assert sent == want
    full = [b for b in batches(recs) if len(b) == BATCH]
    assert len(full) > 100, "the pulls bring full batches of consumeMessageBatchMaxSize"


@pytest.mark.parametrize("seed", SEEDS)
def test_only_reconsume_later_consumes_processed_messages_twice(seed: int) -> None:
    later, acked = run(seed, "reconsume_later").summary, run(seed, "ack_index").summary
    for s in (later, acked):
        assert s["lost"] == 0 and s["dlq"] == 0, s["lost_by_cause"]
    assert later["duplicates"] > 0 and later["duplicates"] == later["duplicates_by_cause"]["send_back"]
    assert acked["duplicates"] == 0
    # RECONSUME_LATER sends back more (the processed part of each failed batch too)
    assert later["retries"] > acked["retries"]


def test_the_header_states_question_and_expectation_and_its_expect_holds() -> None:
    header = [line for line in SCENARIO.read_text().splitlines() if line.startswith("#")]
    text = " ".join(header)
    assert header[0].startswith("# Question:") and "Expectation:" in text
    assert run(1, "reconsume_later").summary["verdict"] == "valid"
    assert run(1, "ack_index").summary["verdict"] == "valid"


def test_a_batch_takes_the_sum_of_its_messages_times_on_one_thread() -> None:
    """Component timeline: one consume thread, 2 ms a message: each listener call ends (its records,
    all at one instant) at least 2 ms × its size after the previous one, exactly so back to back."""
    r = rmqsim.run(SCENARIO, seed=1, keep_records=True, overrides=[
        "consumers[0].consume_time_ms=2", "consumers[0].failure_probability=0", "consumers[0].count=1",
        "consumers[0].client.consume_thread_max=1", "producers[0].stop_ms=6s"])
    calls = batches(r.records, cap=10**9)  # one thread: one call per instant and queue
    assert max(len(b) for b in calls) == BATCH  # the pulls are cut into requests of at most 8
    assert sum(len(b) == BATCH for b in calls) > 50
    ends = [b[0][0] for b in calls]
    assert all(y - x >= 2_000 * len(b) for x, y, b in zip(ends, ends[1:], calls[1:], strict=False))
    assert any(y - x == 16_000 for x, y, b in zip(ends, ends[1:], calls[1:], strict=False) if len(b) == 8)
    assert r.summary["duplicates"] == 0 and r.summary["lost"] == 0
