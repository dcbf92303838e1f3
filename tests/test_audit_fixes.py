"""The 5.3.3 / 4.9.8 audit's fixes (issue 30 item 4), each as a story with a bound over seeds:

- 4.9.8's OFFSET_ILLEGAL: the queue is dropped, its offset updated and persisted only 10 s later,
  with no rebalance (the next round takes it up); 5.2.0+ does it all at once and rebalances now;
- 5.2.0+ RebalanceService: a round that could not start an allocated queue is followed by the
  next one after 1 s; a 4.x client waits 20 s;
- the transactional producer's application threads: with `threads: 1` one transaction at a time
  per instance (half send → local transaction → end), arrivals waiting meanwhile;
- EndTransactionProcessor: a commit whose final put the store refuses (disk full) keeps its half,
  which a later check commits;
- version-dependent defaults: a 4.x scenario gets 4.9.8's transactionCheckInterval (60 s).
"""

from __future__ import annotations

import functools

import pytest

import models.records  # noqa: F401  (declares the record kinds field_index reads)
import rmqsim
from rmqsim.scenario import spec as scenario
from sim.trace import field_index
from tests.conftest import ROOT

SEEDS = (1, 2, 3)
S = 1_000_000


def path(name: str) -> str:
    return str(ROOT / "scenarios" / f"{name}.yaml")


@functools.cache
def run(name: str, seed: int, overrides: tuple[str, ...]) -> rmqsim.RunResult:
    return rmqsim.run(path(name), seed=seed, overrides=list(overrides), keep_records=True)


def recs(r: rmqsim.RunResult, kind: str) -> list[tuple]:
    return [x for x in r.records if x[2] == kind]


# --- OFFSET_ILLEGAL ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_offset_illegal_4x_takes_the_queue_up_again_only_after_10_s(seed: int) -> None:
    group, queue = field_index("consumer.offset_moved", "group"), field_index("consumer.offset_moved", "queue_id")
    for version, low, high in (("4.x", 10 * S, 31 * S), ("5.x", 0, int(1.1 * S))):
        r = run("retention_lagging_consumer", seed, (f"client_version={version}",))
        moved = recs(r, "consumer.offset_moved")
        assert moved, version
        started = recs(r, "consumer.queue_started")
        qi = field_index("consumer.queue_started", "queue_id")
        for m in moved:
            again = [s for s in started if s[0] > m[0] and s[1] == m[1] and s[qi] == m[queue]]
            if again:  # the run may end first
                assert low <= again[0][0] - m[0] <= high, (version, m, again[0])
        assert r.summary["lost_by_cause"]["other"] == 0
        assert all(m[group] == "archive" for m in moved)


# --- RebalanceService's 1 s after an unbalanced round ---------------------------------------------
CUT_OFF = ("producers[0].rate_per_s=100",
           "faults=[{at_ms: 500, kind: partition, groups: [[c-3], [broker-b]], duration_ms: 30s}]")


@pytest.mark.parametrize("seed", SEEDS)
def test_an_unbalanced_round_is_retried_after_1_s_from_5_2_0(seed: int) -> None:
    """c-3 owns broker-b's queues but cannot reach broker-b: its offset lookups time out (3 s)."""
    rounds = {}
    for version in ("5.x", "4.x"):
        r = run("baseline", seed, (f"client_version={version}", *CUT_OFF))
        rounds[version] = [x[0] for x in recs(r, "consumer.rebalanced") if x[1] == "c-3"]
    five = [t for t in rounds["5.x"] if t < 30 * S]
    four = [t for t in rounds["4.x"] if t < 30 * S]  # a 4.x round that fails leaves c-3 none or one or two
    gaps5 = [b - a for a, b in zip(five, five[1:], strict=False) if b - a > 0]
    gaps4 = [b - a for a, b in zip(four, four[1:], strict=False) if b - a > 0]
    # a retry 3 s (the offset lookup's timeout) + at most 1 s later; a round whose member list came from
    # broker-b fails without becoming unbalanced, so the chain may stop there
    assert gaps5 and min(gaps5) <= 4 * S + 100_000, five
    assert len(four) <= 2, (four, five)  # 1 s retries would give a chain like 5.x's
    assert all(g >= 19 * S for g in gaps4), four  # 4.9.8 RebalanceService: only its 20 s wait, never 1 s


# --- the transactional producer's threads ------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_one_thread_runs_one_transaction_at_a_time(seed: int) -> None:
    r = run("txn_baseline", seed, ("producers[0].transaction.threads=1",))
    born = field_index("producer.sent", "born_us")
    ends = {x[3]: x[0] for x in recs(r, "txn.local_done")}
    for producer in ("p-1", "p-2"):
        calls = sorted((x[born], x[3]) for x in recs(r, "producer.sent") if x[1] == producer)
        assert len(calls) > 100
        for (_b1, m1), (b2, _m2) in zip(calls, calls[1:], strict=False):
            if m1 in ends:
                assert b2 >= ends[m1], "the next sendMessageInTransaction starts after the previous one ended"
    wide = run("txn_baseline", seed, ())
    # 16 threads keep up with 200/s: every send() is called by the end of the workload (30 s); one
    # thread does not: the arrivals wait, and the last of them is sent long after
    last = {n: max(x[born] for x in recs(w, "producer.sent")) for n, w in (("one", r), ("wide", wide))}
    assert last["wide"] <= 30 * S < last["one"], last


# --- EndTransaction: the final put refused ---------------------------------------------------------
DISK_FULL = ("cluster.brokers[0].disk.size_bytes=16MiB", "cluster.brokers[0].store.mapped_file_size_commit_log_bytes=1MiB",
             "duration_ms=90s")


@pytest.mark.parametrize("seed", SEEDS)
def test_a_commit_refused_on_a_full_disk_keeps_its_half_for_a_check(seed: int) -> None:
    r = run("txn_baseline", seed, DISK_FULL)
    code = field_index("txn.ended", "code")
    refused = {x[3] for x in recs(r, "txn.ended") if x[1] == "broker-a" and x[code] == 14}
    full = [x[0] for x in recs(r, "broker.disk_state") if x[1] == "broker-a" and x[3]]
    assert full, "broker-a's disk filled"
    if refused:
        checked = {x[3] for x in recs(r, "txn.checked")}
        assert refused <= checked, "each refused commit's half stayed open and was checked"
    txn = r.summary["txn"]
    assert txn["committed_lost"] == 0 and txn["rolled_back_visible"] == 0
    assert r.summary["lost"] == 0


# --- version-dependent defaults ---------------------------------------------------------------------
def test_a_4x_scenario_gets_4_9_8_defaults_where_it_leaves_them_out() -> None:
    def interval(data: dict) -> int:
        return scenario.from_data(data).cluster.brokers[0].broker.transaction_check_interval_ms

    assert interval({"version": "4.x"}) == 60_000
    assert interval({"version": "5.x"}) == 30_000
    assert interval({"version": "4.x", "cluster": {"brokers": [{"broker": {"transaction_check_interval_ms": "20s"}}]}}) \
        == 20_000
    r4, r5 = run("txn_end_lost", 1, ("version=4.x",)), run("txn_end_lost", 1, ())
    assert min(x[0] for x in recs(r4, "txn.checked")) >= 60 * S  # the first round one interval after start
    assert 30 * S <= min(x[0] for x in recs(r5, "txn.checked")) < 60 * S
