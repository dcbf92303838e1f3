"""DefaultLitePullConsumer (models/consumer/lite_pull_consumer.py) against DefaultLitePullConsumerImpl
5.3.3, one rule per test, each read from the Java method it names:

- poll / maybeAutoCommit: the application's first poll comes at start-up and commits (deadline −1),
  commits happen only at the start of a poll() call, each at the first poll at or after the previous
  commit + autoCommitIntervalMillis — and after a crash and restart the cadence starts again from
  the restart, not from the dead process's deadline;
- poll / ProcessQueue.removeMessage: the consume offset is removeMessage's answer (the next cached
  offset across a gap, one past the highest fetched when none is);
- commit(MessageQueue): increaseOnly=false; a dropped queue's cached requests are skipped and its
  consume offset forgotten;
- PullTaskImpl / pullSyncImpl: no commit offset on pulls, 20 s long polling, the first pull at once
  after the rebalance, at most pullThreadNums (20) pulls at a time, pullThresholdForAll flow control;
- subscribe: no %RETRY% subscription; RebalanceImpl: no pull-expiry drop for CONSUME_ACTIVELY;
  MQClientInstance.resetOffset: ignored by a lite pull consumer.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import models.records  # noqa: F401  (declares the record kinds field_index reads)
from models.consumer.config import PULL_MAX_IDLE_TIME_US
from models.consumer.consume_batch import remove_message
from models.consumer.lite_pull_consumer import (
    LITE_BROKER_SUSPEND_MAX_TIME_US,
    POLL_TIMEOUT_US,
    PULL_THREAD_NUMS,
    PULL_THRESHOLD_FOR_ALL,
)
from models.consumer.process_queue import ProcessQueue
from models.message import MessageExt, MessageQueue
from models.protocol import Heartbeat, PullMessage, ResetConsumerClientOffset
from models.records import CONSUMER_QUEUE_STARTED, CONSUMER_REBALANCED
from rmqsim.runner import build, run_scenario, start
from rmqsim.scenario.spec import Scenario, from_data
from sim.trace import NODE_RESTARTED, field_index

S = 1_000_000
MS = 1_000
INTERVAL_US = 5 * S  # autoCommitIntervalMillis
START_MS = 2_000  # a consumer started once the broker is in the NameServer's routes


def lite_scenario(queues: int = 4, rate: int = 100, duration_ms: int = 40_000, *, consume_ms: float = 1,
                  producer: dict[str, Any] | None = None, version: str = "5.x", consumer_start_ms: int = 0,
                  lite: bool = True, actions: list | None = None) -> Scenario:
    return from_data({"actions": actions or [],
        "name": "lite_pull_audit", "version": version, "duration_ms": duration_ms, "settle_ms": 0,
        "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": queues}]},
        "producers": [{"name": "p", "topic": "orders", "rate_per_s": rate, "start_ms": 1_000, **(producer or {})}],
        "consumers": [{"name": "c", "group": "billing", "topic": "orders", "start_ms": consumer_start_ms,
                       "consume_time_ms": {"dist": "exponential", "mean": consume_ms},
                       "lite_pull": {} if lite else None}]})


def msg(offset: int, queue_id: int = 0) -> MessageExt:
    return MessageExt(offset, "orders", queue_id, offset, offset * 100, 100, 0, None, 0, 10, None)


def spy_broker(world: Any, payload_type: type, log: list) -> None:
    """Record (arrival µs, source, request) of every `payload_type` request to broker-a."""
    broker = world.nodes["broker-a"]
    handler = broker.handlers[payload_type]

    def spy(src: str, req_id: int, req: Any) -> None:
        log.append((world.env.now, src, req))
        handler(src, req_id, req)
    broker.handlers[payload_type] = spy


# --- auto-commit cadence ------------------------------------------------------------------------
@functools.cache
def commit_timeline(seed: int) -> dict[str, Any]:
    """Run a lite pull consumer; crash it 1 s after its first commit past 15 s and restart it 0.5 s
    later. Log every poll() start, every commitAll and every (re)start of the process."""
    world = build(lite_scenario(), seed, keep_records=True)
    node, svc = world.nodes["c"], world.models["c"].consume
    log: list[tuple[int, str]] = []
    poll, commit_all, done = svc.poll, svc._commit_all, svc._done
    crash_at: list[int] = []

    def poll_spy() -> None:
        log.append((world.env.now, "poll"))
        poll()

    def commit_spy() -> None:
        now = world.env.now
        log.append((now, "commit"))
        if now > 15 * S and not crash_at:
            crash_at.append(now + 1 * S)
            world.env.call_later(1 * S, node.crash)
            world.env.call_later(1 * S + 500 * MS, node.restart)
        commit_all()

    def done_spy(*args: Any) -> None:
        log.append((world.env.now, "processed"))
        done(*args)
    svc.poll, svc._commit_all, svc._done = poll_spy, commit_spy, done_spy
    starts = [0]
    node.on_start(lambda: starts.append(world.env.now))
    start(world)
    world.env.run(until=40 * S)
    records = world.env.tracer.records + world.env.tracer.chunk
    restarted = [x[0] for x in records if x[2] == NODE_RESTARTED and x[1] == "c"]
    return {"log": log, "crash": crash_at[0], "restarted": restarted}


def incarnations(t: dict[str, Any]) -> list[list[tuple[int, str]]]:
    """The log split at the crash: the first process's events, then the restarted one's."""
    return [[e for e in t["log"] if e[0] < t["crash"]], [e for e in t["log"] if e[0] > t["crash"]]]


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_auto_commit_runs_at_poll_starts_on_its_own_cadence_and_restarts_with_the_process(seed: int) -> None:
    t = commit_timeline(seed)
    assert len(t["restarted"]) == 1, "the crash and restart happened"
    restart_us = t["restarted"][0]
    for events, started_us in zip(incarnations(t), (0, restart_us), strict=True):
        polls = [u for u, what in events if what == "poll"]
        commits = [u for u, what in events if what == "commit"]
        # poll() is called at start-up, when the application has processed what the last one returned,
        # or when the last one returned empty after pollTimeoutMillis — never while one is blocked
        for i, (u, what) in enumerate(events):
            if what == "poll" and u != started_us:
                assert events[i - 1] == (u, "processed") or u - max(p for p in polls if p < u) == POLL_TIMEOUT_US, \
                    (u, events[max(0, i - 3):i + 1])
        # every commit is made by a poll() call that begins at that instant
        for i, (u, what) in enumerate(events):
            if what == "commit":
                assert i > 0 and events[i - 1] == (u, "poll"), (u, events[max(0, i - 3):i + 1])
        # the application polls as soon as the process starts, and that first poll commits (deadline −1)
        assert polls[0] == started_us and commits[0] == started_us
        # each later commit: the first poll at or after the previous commit + autoCommitIntervalMillis
        for prev, nxt in zip(commits, commits[1:], strict=False):
            assert nxt == min(u for u in polls if u >= prev + INTERVAL_US), (prev, nxt)
        assert len(commits) >= 3
    # the mechanism: the process died less than one interval after its last commit, so the dead
    # process's deadline lay after the restart — and the restarted one committed at once anyway
    last_before = max(u for u, what in incarnations(t)[0] if what == "commit")
    assert restart_us < last_before + INTERVAL_US


# --- the consume offset: removeMessage ------------------------------------------------------------
def test_remove_message_answers_the_next_cached_offset_across_a_gap_and_one_past_the_last_when_empty() -> None:
    pq = ProcessQueue(0, 0)
    first, second = [msg(5), msg(9)], [msg(16)]  # a tag filter left gaps (6-8, 10-15)
    pq.put(first)
    pq.put(second)
    assert remove_message(pq, first) == 16
    assert remove_message(pq, second) == 17
    assert remove_message(pq, second) == -1  # nothing cached
    assert not pq.msgs and pq.msg_size_bytes == 0


def test_poll_sets_the_consume_offset_removes_the_messages_and_skips_a_dropped_queue() -> None:
    """Component: poll() blocks on an empty cache; a request for a dropped queue does not wake it;
    the next one is handed over, its messages leave the ProcessQueue at once, and the queue's
    consume offset is removeMessage's answer."""
    world = build(lite_scenario(), 1)
    consumer = world.models["c"]
    svc = consumer.consume
    q0, q1 = MessageQueue("orders", "broker-a", 0), MessageQueue("orders", "broker-a", 1)
    dropped, live = ProcessQueue(0, 0), ProcessQueue(0, 0)
    consumer.process_queues.update({q0: dropped, q1: live})
    svc.poll()
    assert svc.blocked is not None and not svc.busy
    dropped.put([msg(1)])
    consumer.drop_queue(q0, dropped)
    svc.submit(dropped, q0, [msg(1)])
    assert svc.blocked is not None and not svc.busy and q0 not in svc.consume_offsets
    live.put([msg(5, 1), msg(9, 1)])
    live.put([msg(16, 1)])
    svc.submit(live, q1, [msg(5, 1), msg(9, 1)])
    assert svc.blocked is None and svc.busy
    assert svc.consume_offsets[q1] == 16 and list(live.msgs) == [16]
    # q1 leaves this client and comes back: its consume offset went with it, so the next commitAll
    # leaves the offset the rebalance read alone (AssignedMessageQueue state is new)
    consumer.drop_queue(q1, live)
    consumer.process_queues[q1] = ProcessQueue(40, 0)
    consumer.offset_store.update(q1, 40, increase_only=False)
    svc._commit_all()
    assert consumer.offset_store.read_memory(q1) == 40


def test_a_blocked_poll_keeps_its_deadline_when_only_a_dropped_queues_request_arrives() -> None:
    """poll(timeout) waits for `endTime - now` after skipping a dropped queue's request: it still
    returns empty pollTimeoutMillis after it began, and the application polls again then."""
    world = build(lite_scenario(), 1)
    consumer = world.models["c"]
    svc = consumer.consume
    q0 = MessageQueue("orders", "broker-a", 0)
    dropped = ProcessQueue(0, 0)
    dropped.dropped = True
    svc.poll()
    calls: list[int] = []
    poll = svc.poll
    svc.poll = lambda: (calls.append(world.env.now), poll())
    world.env.call_later(3 * S, svc.submit, dropped, q0, [msg(1)])
    world.env.run(until=12 * S)
    assert calls[:2] == [POLL_TIMEOUT_US, 2 * POLL_TIMEOUT_US]


def test_commit_all_sets_the_consume_offset_even_below_the_stored_one() -> None:
    """commit(mq) → updateOffset(increaseOnly=false): after a server-side reset the consume offset
    went back, and so does the committed one; a queue without a known consume offset is left alone."""
    world = build(lite_scenario(), 1)
    consumer = world.models["c"]
    q0, q1 = MessageQueue("orders", "broker-a", 0), MessageQueue("orders", "broker-a", 1)
    consumer.process_queues.update({q0: ProcessQueue(0, 0), q1: ProcessQueue(0, 0)})
    consumer.offset_store.update(q0, 500, increase_only=False)
    consumer.offset_store.update(q1, 700, increase_only=False)
    consumer.consume.consume_offsets[q0] = 120
    consumer.consume._commit_all()
    assert consumer.offset_store.read_memory(q0) == 120
    assert consumer.offset_store.read_memory(q1) == 700


# --- the pull tasks -------------------------------------------------------------------------------
@functools.cache
def pulls(queues: int, rate: int, seed: int = 1) -> dict[str, Any]:
    """A lite pull consumer started at 2 s on broker-a: every PullMessage and Heartbeat it sends, the
    queue starts, its rebalances."""
    world = build(lite_scenario(queues, rate, 30_000, producer={"start_ms": 25_000}, consumer_start_ms=START_MS),
                  seed, keep_records=True)
    pull_log: list = []
    beats: list = []
    spy_broker(world, PullMessage, pull_log)
    spy_broker(world, Heartbeat, beats)
    start(world)
    world.env.run(until=30 * S)
    records = world.env.tracer.records + world.env.tracer.chunk
    topic, qid = field_index(CONSUMER_QUEUE_STARTED, "topic"), field_index(CONSUMER_QUEUE_STARTED, "queue_id")
    started = {(x[topic], x[qid]): x[0] for x in records if x[2] == CONSUMER_QUEUE_STARTED}
    rebalanced = [x[0] for x in records if x[2] == CONSUMER_REBALANCED and x[1] == "c"]
    return {"pulls": [(u, req) for u, src, req in pull_log if src == "c"],
            "beats": [(u, req) for u, src, req in beats if src == "c"], "started": started,
            "rebalanced": rebalanced}


def test_pulls_carry_no_commit_offset_and_long_poll_20_s() -> None:
    p = pulls(4, 100)
    assert len(p["pulls"]) > 100
    assert {req.commit_offset for _u, req in p["pulls"]} == {-1}
    assert {req.suspend_timeout_us for _u, req in p["pulls"]} == {LITE_BROKER_SUSPEND_MAX_TIME_US} == {20 * S}
    assert {req.max_msg_nums for _u, req in p["pulls"]} == {10}  # DefaultLitePullConsumer.pullBatchSize


def test_only_the_topic_is_subscribed_and_each_new_queue_is_pulled_at_once() -> None:
    p = pulls(4, 100)
    assert set(p["started"]) == {("orders", q) for q in range(4)}  # no %RETRY%billing queue
    assert p["beats"] and all(dict(req.consumer_groups)["billing"] == ("orders",) for _u, req in p["beats"])
    for (_topic, q), started_us in p["started"].items():
        first = min(u for u, req in p["pulls"] if req.queue_id == q)
        assert started_us <= first <= started_us + 50 * MS  # schedule(task, 0), not dispatchPullRequest(…, 500)


def test_start_neither_heartbeats_nor_rebalances_the_first_rebalance_follows_the_scheduled_heartbeat() -> None:
    """DefaultLitePullConsumerImpl.start fetches routes only: the first heartbeat is the client
    instance's scheduled one (1 s after start), and the first rebalance comes after it (the broker's
    NOTIFY_CONSUMER_IDS_CHANGED), not at start as a push consumer's."""
    p = pulls(4, 100)
    first_beat = p["beats"][0][0]
    assert START_MS * MS + S <= first_beat < START_MS * MS + S + 50 * MS
    assert first_beat < p["rebalanced"][0] < first_beat + 50 * MS


def test_at_most_pull_thread_nums_pulls_at_a_time() -> None:
    """24 queues of a topic idle until 25 s: each pull holds one of the 20 pull threads for its 20 s
    long poll, so 20 queues are pulled first and the other 4 only when the first long polls end."""
    p = pulls(24, 1)
    starts = max(p["started"].values())
    first = {}
    for u, req in p["pulls"]:
        first.setdefault(req.queue_id, u)
    early = [q for q, u in first.items() if u < starts + 10 * S]
    assert len(early) == PULL_THREAD_NUMS == 20
    late = [u for q, u in first.items() if q not in early]
    assert len(late) == 4
    assert all(u >= min(first.values()) + LITE_BROKER_SUSPEND_MAX_TIME_US for u in late)


def test_pull_threshold_for_all_bounds_the_cache_across_queues() -> None:
    """A backlog of 20,000 messages on 16 queues and a slow application: the per-queue limit (1000)
    would let 16,000 messages into the cache; pullThresholdForAll (10,000 messages, 1000 requests of
    10) stops the pulls first."""
    world = build(lite_scenario(16, 2_000, 20_000, consume_ms=50, producer={"stop_ms": 10_000},
                                consumer_start_ms=12_000), 1)
    svc = world.models["c"].consume
    sizes: list[int] = []
    submit = svc.submit

    def submit_spy(pq: Any, mq: Any, msgs: Any) -> None:
        submit(pq, mq, msgs)
        sizes.append(len(svc.cache))
    svc.submit = submit_spy
    start(world)
    world.env.run(until=20 * S)
    limit = PULL_THRESHOLD_FOR_ALL // 10
    assert max(sizes) >= limit  # the limit was reached
    assert max(sizes) <= limit + 16  # at most one more pull per queue in flight when it was


# --- rebalance and reset ---------------------------------------------------------------------------
@pytest.mark.parametrize("lite, kept", [(True, True), (False, False)])
def test_a_pull_expired_queue_is_dropped_only_by_a_push_consumer(lite: bool, kept: bool) -> None:
    world = build(lite_scenario(lite=lite), 1)
    consumer = world.models["c"]
    q0 = MessageQueue("orders", "broker-a", 0)
    pq = ProcessQueue(0, 0)
    consumer.process_queues[q0] = pq
    world.env.run(until=PULL_MAX_IDLE_TIME_US + S)
    consumer.rebalancer.update_table("orders", [q0])
    assert (consumer.process_queues.get(q0) is pq and not pq.dropped) is kept


def test_a_lite_pull_consumer_ignores_a_client_offset_reset() -> None:
    world = build(lite_scenario(version="4.x"), 1)
    consumer = world.models["c"]
    q0 = MessageQueue("orders", "broker-a", 0)
    pq = ProcessQueue(0, 0)
    pq.put([msg(3)])
    consumer.process_queues[q0] = pq
    consumer.offset_store.update(q0, 3, increase_only=False)
    node = world.nodes["c"]
    node.handlers[ResetConsumerClientOffset]("broker-a", 0, ResetConsumerClientOffset(
        "orders", "billing", (("broker-a", 0, 0),)))
    world.env.run(until=15 * S)
    assert consumer.process_queues.get(q0) is pq and not pq.dropped and list(pq.msgs) == [3]
    assert consumer.offset_store.read_memory(q0) == 3


def test_a_lite_pull_group_sees_a_server_side_reset_through_offset_illegal_and_commits_it() -> None:
    """5.x server-side reset (the broker answers the next pull PULL_OFFSET_MOVED): the lite consumer
    moves its pull offset back, re-polls the range and commits the lower offsets it consumes — the
    broker's committed offset goes back below where it stood before the reset."""
    sc = lite_scenario(2, 40, 45_000, consume_ms=10, actions=[
        {"at_ms": 25_000, "kind": "reset_offset", "group": "billing", "to_time_ms": 5_000}])
    r = run_scenario(sc, seed=1, keep_records=True, detail=True)
    off, via, client = (field_index("broker.offset_committed", f) for f in ("offset", "via", "client"))
    q = field_index("broker.offset_committed", "queue_id")
    updates = [(x[0], x[q], x[off]) for x in r.records
               if x[2] == "broker.offset_committed" and x[client] == "c" and x[via] == "update"]
    for queue in (0, 1):
        seq = [(u, o) for u, qq, o in updates if qq == queue]
        assert len(seq) >= 6
        went_back = [o for i, (u, o) in enumerate(seq) if u > 25 * S and o < max(p for _u, p in seq[:i]) - 100]
        assert went_back, seq
    assert r.summary["duplicates"] > 500 and r.summary["lost"] == 0  # the range consumed again
