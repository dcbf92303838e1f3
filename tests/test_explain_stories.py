"""`rmqsim explain` against ground truth (issue 26): scripted stories, each explained from its run
directory, its facts checked against the run's own trace (the ground truth explain must restate),
its cause against the checker that counted it in the summary.

Stories: an ASYNC_FLUSH power loss with an unflushed tail; a loss by offset reuse after recovery;
a producer-retry duplicate; a rebalance duplicate; a consumer-crash duplicate bounded by the last
commit that reached the broker; a broker offset rollback; a transaction discarded after 15
checks; an orderly `send_side` violation.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import pytest

import rmqsim
from analysis.explain.answer import explain_cause, explain_message, read_run
from rmqsim import cli
from tests.conftest import ROOT

OUT = Path("/tmp") / "rmqsim-test-explain"  # replaced per session by the fixture below


@pytest.fixture(scope="module", autouse=True)
def _out(tmp_path_factory) -> None:
    global OUT
    OUT = tmp_path_factory.mktemp("explain")


@functools.cache
def run_dir(scenario: str, seed: int, *sets: str, trace: bool = True) -> Path:
    """A run directory as `rmqsim run` writes it (with its trace: the ground truth here)."""
    out = OUT / f"{scenario}-{seed}-{hashlib.sha256(repr(sets).encode()).hexdigest()[:8]}-{'t' if trace else 'r'}"
    argv = ["run", str(ROOT / "scenarios" / f"{scenario}.yaml"), "--seed", str(seed), "--out", str(out)]
    argv += ["--trace"] if trace else []
    for item in sets:
        argv += ["--set", item]
    assert cli.main(argv) in (0, 1)
    return out


def facts(answer: dict, name: str) -> list[dict]:
    return [f for f in answer["facts"] if f["fact"] == name]


def verdict(answer: dict, kind: str) -> dict:
    (v,) = [v for v in answer["verdicts"] if v["verdict"] == kind]
    return v


def frame(directory: Path, kind: str):
    return rmqsim.load(directory).frame(kind)


def explain(directory: Path, key: str) -> dict:
    return explain_message(read_run(directory), key)


def test_power_loss_unflushed_tail() -> None:
    """A lost message: stored beyond the last flush, destroyed by the power loss; a message stored
    before it: flushed (at the first flush reaching its end) and dispatched, not destroyed."""
    d = run_dir("power_loss_async_flush", 1)
    summary = rmqsim.load(d).summary
    key = summary["lost_sample"]["unflushed_at_power_loss"][0]
    a = explain(d, key)
    (fault,) = summary["faults_applied"]
    loss_us = round(fault["start_ms"] * 1000)
    stored = frame(d, "broker.stored")
    (truth,) = stored[stored.msg_key == key].itertuples()
    (s,) = facts(a, "stored")
    assert (s["node"], s["topic"], s["queue_id"], s["queue_offset"], s["phys_offset"]) == \
        (truth.node, truth.topic, truth.queue_id, truth.queue_offset, truth.phys_offset) and s["t_us"] == truth.t_us
    flushed = frame(d, "commit_log.flushed")
    last_flush = flushed[(flushed.node == truth.node) & (flushed.t_us <= loss_us)].position.max()
    assert truth.phys_offset + truth.size_bytes > last_flush  # the ground truth: beyond the last flush
    assert not facts(a, "flushed") and not facts(a, "delivered")
    (gone,) = facts(a, "destroyed")
    assert gone["t_us"] == loss_us and gone["fault"] == "power_loss" and gone["node"] == "broker-a"
    v = verdict(a, "lost")
    assert v["cause"] == "unflushed_at_power_loss" and v["key"] == key
    assert f"stored at {truth.t_us / 1e6:.3f} s as broker-a orders q{truth.queue_id} @{truth.queue_offset}" in v["reason"]
    assert f"power_loss of broker-a at {loss_us / 1e6:.3f} s destroyed it before flush" in v["reason"]
    # an earlier message of broker-a: flushed when the flushed position first reached its end
    early = stored[(stored.node == "broker-a") & (stored.phys_offset + stored.size_bytes <= last_flush)
                   & (stored.topic == "orders")].iloc[-1]
    b = explain(d, early.msg_key)
    (f,) = facts(b, "flushed")
    reach = flushed[(flushed.node == "broker-a") & (flushed.position >= early.phys_offset + early.size_bytes)
                    & (flushed.t_us >= early.t_us)]
    assert f["t_us"] == reach.t_us.min()
    assert facts(b, "dispatched") and not facts(b, "destroyed")


def test_loss_by_offset_reuse_after_recovery() -> None:
    """Stored after the recovery at an offset a destroyed record held; the consumer had already
    committed past it before the loss."""
    d = run_dir("power_loss_async_flush", 1, "consumers[0].start_ms=1s")
    summary = rmqsim.load(d).summary
    key = summary["lost_sample"]["offset_skipped_after_recovery"][0]
    a = explain(d, key)
    v = verdict(a, "lost")
    assert v["cause"] == "offset_skipped_after_recovery"
    (s,) = facts(a, "stored")
    destroyed = frame(d, "commit_log.destroyed")
    (held,) = destroyed[(destroyed.node == s["node"]) & (destroyed.topic == s["topic"])
                        & (destroyed.queue_id == s["queue_id"]) & (destroyed.queue_offset == s["queue_offset"])
                        ].itertuples()
    assert held.t_us < s["t_us"] and f"it first held {held.msg_key}, which the power_loss" in v["reason"]
    (before,) = facts(a, "position_destroyed")
    assert before["other"] == held.msg_key and before["t_us"] == held.t_us
    commits = frame(d, "broker.offset_committed")
    passed = commits[(commits.node == s["node"]) & (commits.group == "billing") & (commits.topic == s["topic"])
                     & (commits.queue_id == s["queue_id"]) & (commits.offset > s["queue_offset"])
                     & (commits.t_us <= s["t_us"])]
    last = passed.iloc[-1]
    assert f"{last.client} had committed {last.offset} at {last.t_us / 1e6:.3f} s" in v["reason"]
    consumed = frame(d, "consumer.consumed")
    assert key not in set(consumed.msg_key)


def test_producer_retry_duplicate() -> None:
    """Two stored copies: the first attempt's answer was lost (a timeout), the retry stored it on
    the other broker; both copies were consumed."""
    d = run_dir("response_loss_producer_retry", 1)
    key = rmqsim.load(d).summary["duplicate_sample"]["producer_retry"][0]
    a = explain(d, key)
    stored = frame(d, "broker.stored")
    truth = stored[(stored.msg_key == key) & (stored.topic == "orders")]
    assert len(truth) == 2
    assert [(f["node"], f["queue_id"], f["queue_offset"]) for f in facts(a, "stored")] == \
        list(zip(truth.node, truth.queue_id, truth.queue_offset, strict=True))
    attempts = frame(d, "producer.attempt_failed")
    (failed,) = attempts[attempts.msg_key == key].itertuples()
    (f,) = facts(a, "send_attempt")
    assert (f["broker"], f["outcome"], f["rt_us"], f["t_us"]) == (failed.broker, failed.reason, failed.rt_us,
                                                                    failed.t_us)
    (sent,) = facts(a, "sent")
    assert sent["attempts"] == 2 and sent["broker"] == truth.node.iloc[1]
    assert len(facts(a, "delivered")) == 2
    assert verdict(a, "duplicate")["cause"] == "producer_retry"


def test_rebalance_duplicate() -> None:
    """Re-read after a hand-over: the first owner dropped the queue before a commit covering the
    message reached the broker; the hand-over lies between the two deliveries."""
    d = run_dir("consumer_joins_busy_group", 1, "duration_ms=24s", "settle_ms=20s")
    key = rmqsim.load(d).summary["duplicate_sample"]["rebalance"][0]
    a = explain(d, key)
    v = verdict(a, "duplicate")
    assert v["cause"] == "rebalance"
    first, again = facts(a, "delivered")[:2]
    hand_over = [f for f in facts(a, "queue_dropped") + facts(a, "queue_started")
                 if first["t_us"] <= f["t_us"] <= again["t_us"]]
    assert hand_over
    commits = frame(d, "broker.offset_committed")
    covering = commits[(commits.group == "billing") & (commits.queue_id == first["queue_id"])
                       & (commits.offset > first["queue_offset"]) & (commits.client == first["consumer"])]
    dropped = [f for f in facts(a, "queue_dropped") if f["consumer"] == first["consumer"]]
    assert dropped and (covering.empty or covering.t_us.min() > dropped[0]["t_us"])


def test_consumer_crash_duplicate_bound_is_the_last_commit_that_reached_the_broker() -> None:
    d = run_dir("restart_consumer", 1)
    key = rmqsim.load(d).summary["duplicate_sample"]["consumer_crash"][0]
    a = explain(d, key)
    v = verdict(a, "duplicate")
    assert v["cause"] == "consumer_crash"
    first, again = facts(a, "delivered")[:2]
    crashed = frame(d, "node.crashed")
    crash_us = int(crashed[crashed.node == first["consumer"]].t_us.min())
    commits = frame(d, "broker.offset_committed")
    mine = commits[(commits.client == first["consumer"]) & (commits.node == first["broker"])
                   & (commits.topic == first["topic"]) & (commits.queue_id == first["queue_id"])
                   & (commits.t_us <= crash_us)]
    bound = mine.iloc[-1]
    assert bound.offset <= first["queue_offset"]  # it never reached the broker covering the message
    assert f"the last commit of {first['consumer']} that reached {first['broker']} was {bound.offset} at " \
           f"{bound.t_us / 1e6:.3f} s" in v["reason"]
    (took,) = [f for f in facts(a, "queue_started") if f["consumer"] == again["consumer"]
               and first["t_us"] < f["t_us"] <= again["t_us"]]
    assert took["offset"] == bound.offset  # the new owner started from that bound


def test_broker_offset_rollback_duplicate() -> None:
    d = run_dir("orderly_broker_failure", 1)
    key = rmqsim.load(d).summary["duplicate_sample"]["broker_offset_rollback"][0]
    a = explain(d, key)
    v = verdict(a, "duplicate")
    assert v["cause"] == "broker_offset_rollback"
    rolled = frame(d, "broker.offset_rolled_back")
    first = facts(a, "delivered")[0]
    (truth,) = rolled[(rolled.group == "billing") & (rolled.topic == first["topic"])
                      & (rolled.queue_id == first["queue_id"])].itertuples()
    (f,) = facts(a, "offset_rolled_back")
    assert (f["t_us"], f["from_offset"], f["to_offset"]) == (truth.t_us, truth.from_offset, truth.to_offset)
    assert truth.to_offset <= first["queue_offset"] < truth.from_offset
    assert f"went from {truth.from_offset} back to {truth.to_offset}" in v["reason"]
    reloads = facts(a, "offset_reload")
    assert reloads and reloads[0]["offset"] == truth.to_offset and not reloads[0]["covers"]


def test_transaction_discarded_after_15_checks() -> None:
    d = run_dir("txn_producers_down", 1, "settle_ms=120s",
                *[f"cluster.brokers[{i}].broker.transaction_check_interval_ms=5000" for i in (0, 1)])
    listed = explain_cause(read_run(d), "discarded", limit=1)
    assert listed["total"] == rmqsim.load(d).summary["txn"]["committed_lost_causes"]["discarded"] > 0
    key = listed["messages"][0]["key"]
    local = frame(d, "txn.local_done")
    assert local[local.msg_key == key].outcome.tolist() == ["COMMIT"]
    discarded = frame(d, "txn.discarded")
    assert key in set(discarded.msg_key)
    a = explain(d, key)
    checks = facts(a, "txn_check")
    assert [f["check_times"] for f in checks] == list(range(1, 16))
    truth = frame(d, "txn.checked")
    assert [f["t_us"] for f in checks] == truth[truth.msg_key == key].t_us.tolist()
    (gone,) = facts(a, "txn_discarded")
    assert gone["check_times"] == 15
    (v,) = a["verdicts"]
    assert (v["verdict"], v["cause"]) == ("txn committed_lost", "discarded")


def test_orderly_send_side_violation() -> None:
    d = run_dir("orderly_broker_failure", 1)
    key = rmqsim.load(d).summary["order_violation_sample"]["send_side"][0]
    a = explain(d, key)
    v = verdict(a, "order_violation")
    assert v["cause"] == "send_side"
    overtaker = v["reason"].split("after ")[1].split(" ")[0]
    consumed = frame(d, "consumer.consumed")
    ok = consumed[consumed.ok].groupby("msg_key").first()
    late, early = ok.loc[key], ok.loc[overtaker]
    assert early.t_us < late.t_us  # sent later, consumed first
    assert (late.broker, late.queue_id) != (early.broker, early.queue_id)  # different queues: the send side
    sent = frame(d, "producer.sent")
    keyed = sent.set_index("msg_key")
    assert keyed.loc[key].shard == keyed.loc[overtaker].shard and keyed.loc[key].node == keyed.loc[overtaker].node
    assert int(key.rsplit("-", 1)[1]) < int(overtaker.rsplit("-", 1)[1])


def test_loss_by_retention_names_the_deleted_file() -> None:
    """A message the lagging group never read: stored, then its CommitLog file deleted by the clean
    service at least fileReservedTime (20 s) later; the group that kept up consumed it."""
    d = run_dir("retention_lagging_consumer", 1)
    summary = rmqsim.load(d).summary
    key = summary["lost_sample"]["expired_file_deleted"][0]
    a = explain(d, key)
    v = verdict(a, "lost")
    assert v["cause"] == "expired_file_deleted" and v["unit"] == "archive"
    (s,) = facts(a, "stored")
    (gone,) = facts(a, "destroyed")
    assert gone["fault"] == "expired" and gone["t_us"] - s["t_us"] >= 20_000_000
    deleted = frame(d, "commit_log.expired_deleted")
    assert gone["t_us"] in set(deleted.t_us)  # the deletion of its file, not any other moment
    assert f"deleted its CommitLog file at {gone['t_us'] / 1e6:.3f} s before archive had consumed it" in v["reason"]
    assert verdict(a, "delivered")["unit"] == "audit"
