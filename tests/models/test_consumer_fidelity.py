"""Push-consumer fidelity (issue 12): start-up rebalance and the 20 s RebalanceService timer,
send-back through the inner producer, cleanExpiredMsg (reference 3.2, 3.6, 3.7)."""

from __future__ import annotations

import pytest

from rmqsim.runner import run_scenario
from rmqsim.scenario.spec import from_data
from sim.trace import field_index

SEC = 1_000_000


def world(**over) -> dict:
    data = {
        "name": "fidelity",
        "duration_ms": 30_000,
        "settle_ms": 30_000,
        "cluster": {"brokers": [{"name": "broker-a"}, {"name": "broker-b"}],
                    "topics": [{"name": "orders", "queues": 4}]},
        "producers": [{"name": "p", "topic": "orders", "rate_per_s": 100, "start_ms": 3_000}],
        "consumers": [{"name": "c", "count": 2, "group": "billing", "topic": "orders"}],
    }
    for key, value in over.items():
        data[key] = value
    return data


def run(data: dict, seed: int = 1, **kw):
    return run_scenario(from_data(data, data["name"]), seed=seed, keep_records=True, **kw)


def records(result, kind: str) -> list[tuple]:
    return [r for r in result.records if r[2] == kind]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rebalance_timer_runs_without_broker_notifications(seed):
    """notifyConsumerIdsChangedEnable=false: the start-up rebalance and the 20 s timer alone
    assign every queue; nothing is lost."""
    data = world()
    data["cluster"]["brokers"] = [{"name": b, "broker": {"notify_consumer_ids_changed_enable": False}}
                                  for b in ("broker-a", "broker-b")]
    result = run(data, seed)
    s = result.summary
    assert s["lost"] == 0 and s["pending_retry"] == 0
    assert s["groups"]["billing"]["consumed_ok_distinct"] == s["sent_ok"] > 0
    # both consumers own user-topic queues by the first timer round after the 2nd joined
    rebalanced = records(result, "consumer.rebalanced")
    i_topic, i_queues = field_index("consumer.rebalanced", "topic"), field_index("consumer.rebalanced", "queues")
    owners = {r[1] for r in rebalanced if r[i_topic] == "orders" and r[i_queues] > 0}
    assert owners == {"c-1", "c-2"}


def rebalance_timeline(data: dict, until_us: int) -> tuple[list[int], list[int], list[tuple]]:
    """Run `data` (seed 1) to `until_us`, noting when consumer `c`'s RebalanceService is woken
    up (rebalanceImmediately) and when its rounds run; returns (wake-ups, rounds, records)."""
    from rmqsim.runner import build, start

    w = build(from_data(data, data["name"]), 1, keep_records=True)
    rebalancer = w.models["c"].rebalancer
    wakeups: list[int] = []
    rounds: list[int] = []
    wakeup, run_round = rebalancer.wakeup, rebalancer.run_round

    def noted_wakeup() -> None:
        wakeups.append(w.env._now)
        wakeup()

    def noted_round() -> None:
        rounds.append(w.env._now)
        run_round()

    rebalancer.wakeup, rebalancer.run_round = noted_wakeup, noted_round
    start(w)
    w.env.run(until=until_us)
    assert not list(w.env.tracer.of_kind("net.dropped"))  # a healthy run
    return wakeups, rounds, list(w.env.tracer.of_kind("consumer.rebalanced"))


def test_start_up_rebalance_waits_for_min_interval():
    """RebalanceService (5.3.3): a consumer started at 2 s, when the brokers are in the routes,
    heartbeats at start and wakes the service up (rebalanceImmediately) at once, but
    `lastRebalanceTimestamp` was set when the client was created, so the first round waits to
    exactly 1 s after start; the brokers' notifications of the new member fall in that second
    too. Then a round every 20 s."""
    data = world(consumers=[{"name": "c", "group": "billing", "topic": "orders", "start_ms": 2_000}],
                 duration_ms=45_000, settle_ms=0)
    wakeups, rounds, rebalanced = rebalance_timeline(data, 45 * SEC)
    assert wakeups and 2 * SEC < wakeups[0] < 2 * SEC + 10_000  # after the start-up heartbeat round
    assert all(w < 3 * SEC for w in wakeups)  # the heartbeat's, then the two brokers' notifications
    assert rounds == [3 * SEC, 23 * SEC, 43 * SEC]
    assert rebalanced and 3 * SEC < rebalanced[0][0] < 3 * SEC + 10_000  # the first round assigned


def test_first_rebalance_after_a_start_without_routes():
    """A consumer created with the cluster (t = 0), before the brokers have registered with the
    NameServer: its start-up route fetches find no route, so the broker address table is empty,
    sendHeartbeatToAllBrokerWithLock returns false and start() does not call
    rebalanceImmediately. The first wake-up is the first broker's NOTIFY_CONSUMER_IDS_CHANGED
    after the scheduled heartbeat at 1 s registered the consumer; it comes more than 1 s after
    the client was created, so the round runs at once, and assigns every queue."""
    data = world(consumers=[{"name": "c", "group": "billing", "topic": "orders", "start_ms": 0}],
                 duration_ms=25_000, settle_ms=0)
    wakeups, rounds, rebalanced = rebalance_timeline(data, 25 * SEC)
    assert wakeups and SEC < wakeups[0] < SEC + 10_000  # the first notification
    assert rounds[0] == wakeups[0]  # not deferred: created more than minInterval before
    i_topic, i_queues = field_index("consumer.rebalanced", "topic"), field_index("consumer.rebalanced", "queues")
    first = next(r for r in rebalanced if r[i_topic] == "orders")
    assert rounds[0] < first[0] < rounds[0] + 10_000 and first[i_queues] == 8


def test_send_back_falls_back_to_inner_producer():
    """A send-back to a broker whose process is gone (connection refused) goes to the retry
    topic through the inner producer, which retries on the other broker; nothing is lost."""
    data = world(duration_ms=20_000, settle_ms=120_000)
    data["producers"] = [{"name": "p", "topic": "orders", "rate_per_s": 20, "start_ms": 3_000}]
    data["consumers"] = [{"name": "c", "group": "billing", "topic": "orders", "failure_probability": 0.5,
                          "consume_time_ms": {"dist": "constant", "value": 1_000}}]
    data["faults"] = [{"at_ms": 8_000, "kind": "process_crash", "node": "broker-a"},
                      {"at_ms": 20_000, "kind": "restart", "node": "broker-a"}]
    result = run(data)
    i_ok = field_index("consumer.sent_back", "ok")
    failed = [r for r in records(result, "consumer.sent_back") if not r[i_ok]]
    resent = records(result, "consumer.resent_as_normal")
    assert failed and resent
    assert all(8 * SEC <= r[0] < 20 * SEC for r in failed)
    assert any(r[field_index("consumer.resent_as_normal", "ok")] for r in resent)
    s = result.summary
    assert s["lost"] == 0  # a message still failing is pending_retry, not lost


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_failures_reach_dlq_after_16_reconsumes(seed):
    """Every consumption fails: each message is delivered 17 times (original + 16 retries at
    levels 3..18) and then stored in %DLQ%billing; retry k arrives after the level's delay
    (+ at most the schedule's 100 ms tick and the send-back and pull round trips). Every
    message, also one alone in its broker's delay level (seed 1: the only one on broker-b)."""
    data = world(duration_ms=4_000, settle_ms=6 * 3600_000)
    data["producers"] = [{"name": "p", "topic": "orders", "rate_per_s": 2, "start_ms": 3_000}]
    data["consumers"] = [{"name": "c", "group": "billing", "topic": "orders", "failure_probability": 0.999999}]
    result = run(data, seed)
    s = result.summary
    assert s["dlq"] == s["sent_ok"] > 0 and s["lost"] == 0 and s["pending_retry"] == 0
    i_id, i_r = field_index("consumer.consumed", "msg_id"), field_index("consumer.consumed", "reconsume_times")
    deliveries: dict[int, list[tuple[int, int]]] = {}
    for r in records(result, "consumer.consumed"):
        deliveries.setdefault(r[i_id], []).append((r[0], r[i_r]))
    assert len(deliveries) == s["sent_ok"]
    levels_s = [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
    for msg_id, times in deliveries.items():
        assert [t[1] for t in times] == list(range(17)), msg_id
        for k, delay in enumerate(levels_s, start=1):
            gap_s = (times[k][0] - times[k - 1][0]) / SEC
            assert delay <= gap_s < delay + 0.2, (msg_id, k, gap_s)  # one 100 ms tick + RPCs


def test_clean_expired_sends_back_a_listener_call_past_consume_timeout():
    """consumeTimeout 1 min, a listener call of 200 s: cleanExpiredMsg sends the message back
    (delay level 3) and takes it out of the cache, so the offset moves past it; the listener's
    own success later makes it a duplicate through the retry topic."""
    data = world(duration_ms=4_000, settle_ms=400_000)
    data["producers"] = [{"name": "p", "topic": "orders", "rate_per_s": 1, "start_ms": 3_000}]
    data["consumers"] = [{"name": "c", "group": "billing", "topic": "orders",
                          "consume_time_ms": {"dist": "constant", "value": 200_000},
                          "client": {"consume_timeout_min": 1}}]
    result = run(data)
    cleaned = records(result, "consumer.expired_cleaned")
    assert cleaned
    # the first clean round is one consumeTimeout after start-up, the call started ~4 s in
    assert 60 * SEC <= cleaned[0][0] <= 125 * SEC  # (its retry copies run 200 s too and are cleaned again)
    assert result.summary["lost"] == 0
    assert result.summary["duplicates"] >= 1


def test_broker_send_back_counts_reconsumes_from_the_stored_message():
    """consumerSendMsgBack: the retry copy's reconsume count is the *stored* message's + 1 (the
    request carries none; a local resubmission bumps only the client's copy), its delay level
    3 + the stored count (SCHEDULE_TOPIC_XXXX queue level − 1 = 2); at the maximum: the DLQ."""
    from models.protocol import ConsumerSendMsgBack
    from rmqsim.runner import build, start

    sc = from_data(world(duration_ms=5_000, settle_ms=0), "send_back_count")
    w = build(sc, 1, keep_records=True)
    start(w)
    w.env.run(until=5 * SEC)
    i_topic, i_phys = field_index("broker.stored", "topic"), field_index("broker.stored", "phys_offset")
    stored = next(r for r in w.env.tracer.of_kind("broker.stored") if r[i_topic] == "orders")
    broker = w.models[stored[1]]
    for max_times, topic in ((16, "%RETRY%billing"), (0, "%DLQ%billing")):
        before = len(list(w.env.tracer.of_kind("broker.stored")))
        # (the request carries no reconsume count: the broker reads the stored message's)
        broker.on_send_back("c-1", 0, ConsumerSendMsgBack("billing", stored[i_phys], stored[3], "orders", 0, max_times))
        new = list(w.env.tracer.of_kind("broker.stored"))[before:]
        assert len(new) == 1 and new[0][field_index("broker.stored", "reconsume_times")] == 1
        if topic.startswith("%RETRY%"):
            assert new[0][i_topic] == "SCHEDULE_TOPIC_XXXX" and new[0][field_index("broker.stored", "queue_id")] == 2
        else:
            assert new[0][i_topic] == topic
