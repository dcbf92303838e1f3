"""Producer fault stories (the bundled producer scenarios), each a bound or invariant over 3 seeds:
fault-latency selection in both client versions, producer-retry duplicates vs ONEWAY loss, stale
routes after a broker dies, orderly sends, delayed and batch messages."""

from __future__ import annotations

import functools
from collections import defaultdict
from pathlib import Path

import pytest

import rmqsim
from models.message import SEQ_BITS
from rmqsim.runner import run_scenario
from rmqsim.scenario.spec import from_data, load
from sim.trace import field_index

ROOT = Path(__file__).resolve().parent.parent
SEEDS = (1, 2, 3)
SEC = 1_000_000


def path(name: str) -> str:
    return str(ROOT / "scenarios" / f"{name}.yaml")


@functools.cache
def run(name: str, seed: int, *overrides: str, keep: bool = False):
    return rmqsim.run(path(name), seed=seed, overrides=list(overrides), keep_records=keep)


def fi(kind: str, field: str) -> int:
    return field_index(kind, field)


def of_kind(result, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind]


@pytest.mark.parametrize("name", ["slow_broker_fault_latency", "response_loss_producer_retry",
                                  "stale_route_broker_down", "orderly_send"])
def test_header_states_question_and_expectation(name: str) -> None:
    text = Path(path(name)).read_text(encoding="utf-8")
    assert text.startswith("# Question: ") and "Expect" in text
    sc = load(path(name))
    assert sc.duration_ms + (0 if sc.settle_auto else sc.settle_ms) <= 120_000  # auto: until quiet


# --- sendLatencyFaultEnable and a slow broker --------------------------------------------------------

@pytest.mark.parametrize("version", ["5.x", "4.x"])
@pytest.mark.parametrize("seed", SEEDS)
def test_fault_latency_steers_sends_away_from_a_slow_broker(version: str, seed: int) -> None:
    on = run("slow_broker_fault_latency", seed, f"client_version={version}").summary
    off = run("slow_broker_fault_latency", seed, f"client_version={version}",
              "producers[0].client.send_latency_fault_enable=false").summary
    share_on = on["send_share_by_broker_in_faults"]["broker-a"]
    share_off = off["send_share_by_broker_in_faults"]["broker-a"]
    assert 0.45 <= share_off <= 0.55  # round robin: half the sends wait for the slow flush
    assert share_on <= 0.2  # isolated after each slow answer (5.x: ~12 %, 4.x: ~4 %)
    assert on["send_steered_away"] > 1000 and off["send_steered_away"] == 0
    assert on["send_latency_ms_in_faults"]["p99"] < 0.85 * off["send_latency_ms_in_faults"]["p99"]
    assert on["send_latency_ms"]["p99"] <= off["send_latency_ms"]["p99"]
    assert on["lost"] == off["lost"] == 0 and on["sends"] == off["sends"] == on["sent_ok"]


# --- lost responses: producer_retry duplicates vs ONEWAY loss ------------------------------------------

BROKER_RESTART_CAUSES = ("rebalance", "broker_offset_rollback")


@pytest.mark.parametrize("seed", SEEDS)
def test_lost_responses_make_producer_retry_duplicates(seed: int) -> None:
    s = run("response_loss_producer_retry", seed).summary
    by_cause = s["duplicates_by_cause"]
    assert by_cause["producer_retry"] >= 500
    # every producer_retry duplicate is a second stored copy (a second copy the power loss destroyed
    # unflushed, before its answer, is stored but never consumed)
    assert by_cause["producer_retry"] <= s["stored_duplicates"] <= by_cause["producer_retry"] + 20
    # the rest comes from the broker's restart: until every consumer's heartbeat reached it, the
    # restarted broker lists part of the group, a rebalance there gives a queue two owners
    assert {c for c, n in by_cause.items() if n} <= set(BROKER_RESTART_CAUSES) | {"producer_retry"}, by_cause
    assert s["lost"] == 0 and s["send_failed"] == 0 and s["oneway_unstored"] == 0
    assert s["send_retried"] >= s["stored_duplicates"]  # retried: the duplicates plus the cut requests
    assert s["sends"] == s["sent_ok"] + s["sent_not_ok"] + s["send_failed"]
    assert s["sent_attempts"] >= s["sends"] + s["send_retried"]


@pytest.mark.parametrize("seed", SEEDS)
def test_oneway_loses_instead_of_duplicating(seed: int) -> None:
    s = run("response_loss_producer_retry", seed, "producers[0].send_mode=ONEWAY").summary
    # no retry, so no second stored copy; duplicates only from the broker's restart (see above)
    assert s["stored_duplicates"] == 0 and s["duplicates_by_cause"]["producer_retry"] == 0
    assert {c for c, n in s["duplicates_by_cause"].items() if n} <= set(BROKER_RESTART_CAUSES), s["duplicates_by_cause"]
    assert s["oneway_unstored"] >= 500  # the writes into the dead host's connections
    assert s["sent_ok"] == 0 and s["lost"] == 0  # nothing acknowledged, so nothing counted lost
    # after the reboot the host resets the old connections: the client knows, those sends fail
    assert set(s["send_failures_by_reason"]) <= {"connect_failed"}
    assert s["send_status"] == {"ONEWAY": s["sends"] - s["send_failed"]} and s["sent_attempts"] == s["sends"]


# --- a dead broker and stale routes -----------------------------------------------------------------

STALE = ("duration_ms=35s", "settle_ms=10s")
POLL_US = 30 * SEC + 10_000  # the route poll after the crash (every 30 s, first after 10 ms)


@pytest.mark.parametrize("seed", SEEDS)
def test_stale_route_costs_retries_until_the_next_poll(seed: int) -> None:
    r = run("stale_route_broker_down", seed, *STALE, keep=True)
    s = r.summary
    retried_born = [rec[fi("producer.sent", "born_us")] for rec in of_kind(r, "producer.sent")
                    if rec[fi("producer.sent", "attempts")] > 1]
    assert s["send_retried"] >= 1500  # ~half the sends of the 15 s before the poll picked broker-a
    assert min(retried_born) >= 15 * SEC - 5_000 and max(retried_born) <= POLL_US + 5_000
    assert s["send_failed"] == 0 and s["lost"] == 0


@pytest.mark.parametrize("version", ["5.x", "4.x"])
@pytest.mark.parametrize("seed", SEEDS)
def test_fault_tolerance_fails_over_sooner(version: str, seed: int) -> None:
    off = run("stale_route_broker_down", seed, *STALE, f"client_version={version}").summary
    on = run("stale_route_broker_down", seed, *STALE, f"client_version={version}",
             "producers[0].client.send_latency_fault_enable=true").summary
    assert on["send_retried"] <= 20 and on["send_retried"] * 50 <= off["send_retried"]
    assert on["send_steered_away"] >= 1000
    assert on["send_failed"] == off["send_failed"] == 0 and on["lost"] == 0


# --- orderly sends ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_orderly_key_stored_in_one_queue_in_send_order(seed: int) -> None:
    """While the route is stable (sends born before broker-a's crash at 20 s), every message of a
    (producer, sharding key) is stored in one queue, at increasing offsets in send order; the
    failed sends are exactly those of broker-a's keys between the crash and the next route poll."""
    r = run("orderly_send", seed, keep=True)
    shard_of, born_of = {}, {}
    for rec in of_kind(r, "producer.sent"):
        shard_of[rec[fi("producer.sent", "msg_id")]] = rec[fi("producer.sent", "shard")]
        born_of[rec[fi("producer.sent", "msg_id")]] = rec[fi("producer.sent", "born_us")]
    stored = defaultdict(list)  # (producer, shard) -> [(seq, broker, queue, offset)]
    for rec in of_kind(r, "broker.stored"):
        msg_id = rec[fi("broker.stored", "msg_id")]
        if msg_id in born_of and born_of[msg_id] < 20 * SEC:
            stored[(msg_id >> SEQ_BITS, shard_of[msg_id])].append(
                (msg_id & ((1 << SEQ_BITS) - 1), rec[1], rec[fi("broker.stored", "queue_id")],
                 rec[fi("broker.stored", "queue_offset")]))
    assert len(stored) >= 50 and all(shard >= 0 for _p, shard in stored)
    for entries in stored.values():
        assert len({(b, q) for _s, b, q, _o in entries}) == 1
        offsets = [o for _s, _b, _q, o in sorted(entries)]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    failed = of_kind(r, "producer.send_failed")
    assert failed and {rec[fi("producer.send_failed", "reason")] for rec in failed} == {"connect_failed"}
    assert {rec[fi("producer.send_failed", "broker")] for rec in failed} == {"broker-a"}
    assert all(20 * SEC <= rec[fi("producer.send_failed", "born_us")] <= POLL_US for rec in failed)
    assert r.summary["lost"] == 0


# --- delayed and batch messages ---------------------------------------------------------------------

def _scenario(producer: dict, brokers: list[dict] | None = None, **top) -> dict:
    return {"name": "producer_feature", "duration_ms": "12s", "settle_ms": "8s",
            "cluster": {"brokers": brokers or [{"name": "broker-a"}, {"name": "broker-b"}],
                        "topics": [{"name": "orders", "queues": 2}]},
            "producers": [{"name": "p", "topic": "orders", "rate_per_s": 50, "start_ms": "3s", **producer}],
            "consumers": [{"name": "c", "group": "g", "topic": "orders"}], **top}


@pytest.mark.parametrize("seed", SEEDS)
def test_delay_level_delivered_at_level_time(seed: int) -> None:
    """Delay level 3 (10 s): each message reaches the consumer 10 s (+ the schedule's 100 ms
    tick) after it was stored; the ones still delayed when the run ends are pending, not lost."""
    sc = from_data(_scenario({"delay_level": 3}))
    r = run_scenario(sc, seed=seed, keep_records=True)
    born = {rec[fi("producer.sent", "msg_id")]: rec[fi("producer.sent", "born_us")]
            for rec in of_kind(r, "producer.sent")}
    parked = {rec[fi("broker.stored", "msg_id")]: rec[0] for rec in of_kind(r, "broker.stored")
              if rec[fi("broker.stored", "topic")] == "SCHEDULE_TOPIC_XXXX"}
    delivered = {rec[fi("schedule.delivered", "msg_id")]: rec[0] for rec in of_kind(r, "schedule.delivered")}
    assert set(parked) == set(born) and delivered
    assert all(10 * SEC <= t - parked[m] <= 10 * SEC + 100_000 for m, t in delivered.items())
    s = r.summary
    assert s["pending_delay"] == len(born) - len(delivered) > 50  # parked after 12 s + 8 s - 10 s
    assert s["lost"] == 0 and s["latency_ms"]["p50"] >= 10_000


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_is_stored_all_or_nothing(seed: int) -> None:
    """Batches of 3 with random sizes against a broker limit that some batches exceed: a batch is
    either stored whole (one queue, consecutive offsets, one request) or rejected whole."""
    sc = from_data(_scenario({"batch_size": 3, "message_bytes": {"dist": "uniform", "low": 100, "high": 1500}},
                             brokers=[{"name": "broker-a", "store": {"max_message_size_bytes": 3000}}]))
    r = run_scenario(sc, seed=seed, keep_records=True)
    stored = {rec[fi("broker.stored", "msg_id")]: (rec[fi("broker.stored", "queue_id")],
                                                   rec[fi("broker.stored", "queue_offset")])
              for rec in of_kind(r, "broker.stored")}
    failed = {rec[fi("producer.send_failed", "msg_id")]: rec[fi("producer.send_failed", "reason")]
              for rec in of_kind(r, "producer.send_failed")}
    sent = {rec[fi("producer.sent", "msg_id")] for rec in of_kind(r, "producer.sent")}
    last = max([*stored, *failed])  # producer 0: message id = sequence number
    whole = rejected = 0
    for first in range(1, last + 1, 3):
        ids = [first, first + 1, first + 2]
        if all(m in stored for m in ids):
            queues = {stored[m][0] for m in ids}
            offsets = [stored[m][1] for m in ids]
            assert len(queues) == 1 and offsets == list(range(offsets[0], offsets[0] + 3))
            assert all(m in sent for m in ids)
            whole += 1
        else:
            assert not any(m in stored for m in ids) and all(failed.get(m) == "broker_code_13" for m in ids)
            rejected += 1
    assert whole >= 20 and rejected >= 20
