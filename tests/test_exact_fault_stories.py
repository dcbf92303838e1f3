"""Two-sided fault stories (issue 25): where the mechanism fixes the number, the test derives it
from the trace's ground truth and asserts equality, over three seeds — not a one-sided bound
(which a doubled flush interval or a mislabelled duplicate passes) and not a pinned number.

- ASYNC_FLUSH power loss: what is lost is exactly the acknowledged records the consumers never
  consumed, among those beyond the last flush before the loss (`unflushed_at_power_loss`) and
  those stored afterwards at a queue offset the consumers had already passed
  (`offset_skipped_after_recovery`); the timed flush runs every 500 ms (+ its fsync) under load.
- Rebalance duplicates (a consumer joins a busy group): every duplicate delivery has its hand-over
  record — the queue's new owner starting, or the old owner dropping it — between the two
  deliveries, or is a listener call that ended on a queue its consumer had already dropped; as
  many as the summary counts, second by second.

Reference: ../shared/reference/rocketmq-semantics.md 5.3 (FlushRealTimeService), 5.4 (what a power
loss destroys), 3.3 (rebalance) and 8 (where duplicates and losses come from).
"""

from __future__ import annotations

import functools
from collections import defaultdict

import pytest

import rmqsim
from sim.trace import field_index
from tests.conftest import ROOT, first_seed_in_ci

SEEDS = (1, 2, 3)
FLUSH_INTERVAL_COMMIT_LOG_US = 500_000  # flushIntervalCommitLog (RocketMQ default, ms): not read from the model
FSYNC_ALLOWANCE_US = 50_000  # the fsync of one round here takes 2-3 ms
HAND_OVER_REASONS = ("rebalance", "pull_expired")


@functools.cache
def run(name: str, seed: int, *overrides: str):
    return rmqsim.run(str(ROOT / "scenarios" / f"{name}.yaml"), seed=seed, overrides=list(overrides), keep_records=True)


def recs(result, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind]


def col(kind: str, *fields: str) -> tuple[int, ...]:
    return tuple(field_index(kind, f) for f in fields)


# --- ASYNC_FLUSH power loss: exactly the acknowledged, unconsumed records beyond the last flush -------

FLUSH_VARIANTS = {
    "consumers_start_after_the_loss": (),  # the bundled scenario: consumers start at 25 s
    "consumers_read_before_the_loss": ("consumers[0].start_ms=1s",),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("variant", FLUSH_VARIANTS)
def test_async_flush_power_loss_loses_exactly_the_acked_unconsumed_records_beyond_the_last_flush(
        variant: str, seed: int) -> None:
    r = run("power_loss_async_flush", seed, *FLUSH_VARIANTS[variant])
    s = r.summary
    (t_loss,) = [x[0] for x in recs(r, "fault.injected") if x[3] == "power_loss" and x[4] == "broker-a"]

    # the mechanism: under load the timed flush forces broker-a every 500 ms plus the fsync
    (pos,) = col("commit_log.flushed", "position")
    flushes = [(x[0], x[pos]) for x in recs(r, "commit_log.flushed") if x[1] == "broker-a" and x[0] <= t_loss]
    recent = [t for t, _p in flushes if t > t_loss - 5_000_000]
    gaps = [b - a for a, b in zip(recent, recent[1:], strict=False)]
    assert len(gaps) >= 8
    assert all(FLUSH_INTERVAL_COMMIT_LOG_US <= g < FLUSH_INTERVAL_COMMIT_LOG_US + FSYNC_ALLOWANCE_US for g in gaps), gaps
    last_flush_t, last_flushed = flushes[-1]
    assert t_loss - last_flush_t < FLUSH_INTERVAL_COMMIT_LOG_US + 2 * FSYNC_ALLOWANCE_US

    # ground truth from the trace: acknowledgements, broker-a's copies, consumption
    st, pmid = col("producer.sent", "status", "msg_id")
    acked = {x[pmid] for x in recs(r, "producer.sent") if x[st] == "SEND_OK"}
    ok, cmid = col("consumer.consumed", "ok", "msg_id")
    consumed = {x[cmid] for x in recs(r, "consumer.consumed") if x[ok]}
    smid, topic, qid, qoff, phys, size = col("broker.stored", "msg_id", "topic", "queue_id", "queue_offset",
                                             "phys_offset", "size_bytes")
    stored_a = [x for x in recs(r, "broker.stored") if x[1] == "broker-a"]
    before = [x for x in stored_a if x[0] <= t_loss]
    # a power loss keeps only whole records below the last flushed position
    beyond = {x[smid] for x in before if x[phys] + x[size] > last_flushed}
    assert beyond == {x[field_index("commit_log.destroyed", "msg_id")] for x in recs(r, "commit_log.destroyed")}
    queue_top: dict[tuple, int] = defaultdict(int)
    for x in before:
        queue_top[(x[topic], x[qid])] = max(queue_top[(x[topic], x[qid])], x[qoff] + 1)
    # after recovery broker-a hands out the destroyed records' queue offsets again
    reused = {x[smid] for x in stored_a if x[0] > t_loss and x[qoff] < queue_top[(x[topic], x[qid])]}

    unflushed = (acked & beyond) - consumed
    skipped = (acked & reused) - consumed - unflushed
    lost = acked - consumed
    assert lost == unflushed | skipped  # every loss is one of the two
    causes = dict.fromkeys(s["lost_by_cause"], 0) | {"unflushed_at_power_loss": len(unflushed),
                                                     "offset_skipped_after_recovery": len(skipped)}
    assert s["lost_by_cause"] == causes
    assert s["lost"] == len(lost) and s["pending_retry"] == s["dlq"] == 0
    if variant == "consumers_start_after_the_loss":
        # nobody read anything before the loss: every acknowledged record beyond the flush is gone
        assert unflushed and unflushed == acked & beyond and not skipped
    else:
        # the consumers had pulled what lay beyond the flush (it was still in the page cache) and
        # consumed it; the loss lands instead on new records stored at the re-used offsets
        assert not unflushed and skipped


# --- rebalance duplicates: the hand-over lies between the two deliveries ---------------------------

# the newcomer joins at 20 s and the hand-overs are over by ~25 s; the old members' backlog keeps
# them consuming cached messages of queues the newcomer already owns (two owners at once)
JOIN = ("duration_ms=24s", "settle_ms=20s")


def deliveries_and_hand_overs(result, group: str):
    ok, mid, grp, topic, broker, qid, qoff, rc = col("consumer.consumed", "ok", "msg_id", "group", "topic", "broker",
                                                     "queue_id", "queue_offset", "reconsume_times")
    deliveries: dict[int, list[tuple]] = defaultdict(list)
    for x in recs(result, "consumer.consumed"):
        if x[ok] and x[grp] == group:
            deliveries[x[mid]].append((x[0], x[1], (x[topic], x[broker], x[qid]), x[qoff], x[rc]))
    started: dict[tuple, list[tuple]] = defaultdict(list)  # queue -> [(t, node)]
    dropped: dict[tuple, list[tuple]] = defaultdict(list)  # queue -> [(t, node)] by a rebalance or pull expiry
    sg, st, sb, sq = col("consumer.queue_started", "group", "topic", "broker", "queue_id")
    for x in recs(result, "consumer.queue_started"):
        if x[sg] == group:
            started[(x[st], x[sb], x[sq])].append((x[0], x[1]))
    dg, dt, db, dq, why = col("consumer.queue_dropped", "group", "topic", "broker", "queue_id", "reason")
    for x in recs(result, "consumer.queue_dropped"):
        if x[dg] == group and x[why] in HAND_OVER_REASONS:
            dropped[(x[dt], x[db], x[dq])].append((x[0], x[1]))
    return deliveries, started, dropped


def handed_over(first: tuple, again: tuple, started: dict, dropped: dict) -> bool:
    """A hand-over record of the queue lies between the two deliveries of one stored copy — the
    re-reader's ownership starting, or the first consumer's ending — or the first delivery was a
    listener call that ended after its consumer had dropped the queue (its offset never committed)."""
    (t1, node1, queue, _o, _r), (t2, node2, _q, _o2, _r2) = first, again
    if any(t1 <= t <= t2 and node == node2 for t, node in started[queue]):
        return True
    if any(t1 <= t <= t2 and node == node1 for t, node in dropped[queue]):
        return True
    own_start = max((t for t, node in started[queue] if node == node1 and t <= t1), default=None)
    return own_start is not None and any(own_start <= t <= t1 and node == node1 for t, node in dropped[queue])


@pytest.mark.parametrize("seed", first_seed_in_ci(SEEDS))  # ~8 s a seed: 2 and 3 by scripts/test.sh --slow
def test_every_rebalance_duplicate_has_its_hand_over_between_the_two_deliveries(seed: int) -> None:
    r = run("consumer_joins_busy_group", seed, *JOIN)
    s = r.summary
    deliveries, started, dropped = deliveries_and_hand_overs(r, "billing")
    explained: dict[int, int] = defaultdict(int)  # second -> duplicates
    unexplained = []
    for ds in deliveries.values():
        first = ds[0]
        for again in ds[1:]:
            assert (again[2], again[3], again[4]) == (first[2], first[3], first[4])  # the same stored copy
            if handed_over(first, again, started, dropped):
                explained[again[0] // 1_000_000] += 1
            else:
                unexplained.append((first, again))
    assert not unexplained, unexplained[:5]
    total = sum(explained.values())
    assert total > 0 and s["lost"] == 0
    assert s["duplicates"] == s["duplicates_by_cause"]["rebalance"] == total
    by_second = s["groups"]["billing"]["duplicates_by_second"]
    assert by_second == {"rebalance": [[sec, n] for sec, n in sorted(explained.items())]}
