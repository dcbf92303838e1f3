"""Concurrent batch consumption (models/consumer/consume_batch.py) against
ConsumeMessageConcurrentlyService 5.3.3 (and 4.9.8 where it differs), one rule per test:

- submitConsumeRequest: a pulled list is cut, in order, into requests of consumeMessageBatchMaxSize;
- processConsumeResult: ackIndex (CONSUME_SUCCESS clamps it to size − 1, RECONSUME_LATER makes it
  −1); the messages after it are sent back one after another, each after the previous one's answer;
  those whose send-back failed get reconsumeTimes + 1 and come back *together* 5 s later, cached
  meanwhile; only then is the rest removed in one removeMessage and the offset stored — the
  committed offset passes none of a batch before all its send-backs answered; 5.x skips a message
  cleanExpiredMsg already took (containsMessage), 4.9.8 sends it back anyway;
- ConsumeRequest.run: CONSUME_START_TIME is overwritten by every call (no stale cleanExpiredMsg start).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import models.records  # noqa: F401  (declares the record kinds field_index reads)
from models.consumer.config import LOCAL_RETRY_DELAY_US
from models.consumer.consume_batch import ack_index_of
from models.consumer.process_queue import ProcessQueue
from models.message import MessageExt, MessageQueue
from models.protocol import SYSTEM_ERROR, CodeResponse, ConsumerSendMsgBack, SendMessage
from rmqsim.runner import build, start
from rmqsim.scenario.spec import Scenario, from_data
from sim.trace import field_index
from tests.test_batch_consume_stories import batches

S = 1_000_000
MS = 1_000
BATCH = 8


def batch_scenario(version: str = "5.x", failure_probability: float = 0.02, batch_failure: str = "reconsume_later",
                   duration_ms: int = 30_000) -> Scenario:
    return from_data({
        "name": "batch_audit", "version": version, "duration_ms": duration_ms, "settle_ms": 0,
        "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 4}]},
        "producers": [{"name": "p", "topic": "orders", "rate_per_s": 400, "start_ms": 1_000}],
        "consumers": [{"name": "c", "count": 2, "group": "billing", "topic": "orders",
                       "consume_time_ms": {"dist": "exponential", "mean": 2},
                       "failure_probability": failure_probability, "batch_failure": batch_failure,
                       "client": {"consume_message_batch_max_size": BATCH, "pull_interval_ms": 200}}]})


def msg(offset: int, reconsume: int = 0) -> MessageExt:
    return MessageExt(1_000 + offset, "orders", 0, offset, offset * 100, 100, 0, None, reconsume, 10, None)


class SendBackStub:
    """Stands in for send_back.py: records each sendMessageBack and keeps its callback to answer."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.calls: list[tuple[int, MessageExt, Any]] = []

    def send(self, mq: Any, message: MessageExt, delay_level: int, done: Any) -> None:
        self.calls.append((self.env.now, message, done))


def answer_all(stub: SendBackStub, ok_of: Any) -> None:
    """Answer each pending sendMessageBack in turn (an answer may start the next one)."""
    answered = 0
    while answered < len(stub.calls):
        _t, m, done = stub.calls[answered]
        answered += 1
        done(ok_of(m))


def component(version: str = "5.x") -> tuple[Any, Any, Any, ProcessQueue, MessageQueue, SendBackStub]:
    """A built (not started) world's c-1 batch service with one cached queue of offsets 0..7."""
    world = build(batch_scenario(version), 1, keep_records=True)
    consumer = world.models["c-1"]
    svc = consumer.consume
    svc.failure_probability = 0.0
    stub = SendBackStub(world.env)
    svc.send_back = stub
    mq, pq = MessageQueue("orders", "broker-a", 0), ProcessQueue(0, 0)
    consumer.process_queues[mq] = pq
    pq.put([msg(o) for o in range(BATCH)])
    consumer.offset_store.update(mq, 0, increase_only=False)
    return world, consumer, svc, pq, mq, stub


# --- ackIndex -----------------------------------------------------------------------------------
@pytest.mark.parametrize("size, failed_at, policy, want", [
    (8, 8, False, 7), (8, 8, True, 7),  # CONSUME_SUCCESS, context ackIndex MAX_VALUE → size − 1
    (8, 3, False, -1),  # RECONSUME_LATER
    (8, 3, True, 2),  # CONSUME_SUCCESS with setAckIndex(failed − 1)
    (8, 0, True, -1),  # nothing acknowledged
    (8, -1, True, -1), (8, -1, False, -1),  # interrupted at shutdown: an exception → RECONSUME_LATER
])
def test_ack_index(size: int, failed_at: int, policy: bool, want: int) -> None:
    assert ack_index_of(size, failed_at, policy) == want


# --- processConsumeResult, step by step ------------------------------------------------------------
def test_send_backs_go_one_by_one_and_the_batch_leaves_the_cache_only_after_the_last_answer() -> None:
    """ackIndex 2 on offsets 0..7: 3..7 are sent back one after another; 4's send-back fails. Until
    7's answer nothing leaves the cache and the offset stays; then all but 4 leave at once, the
    offset moves to 4 (still cached), and 5 s later 4 comes back with reconsumeTimes 1."""
    world, consumer, svc, pq, mq, stub = component()
    batch = [pq.msgs[o] for o in range(BATCH)]
    svc._process_result(pq, mq, batch, 2)
    for i, offset in enumerate(range(3, BATCH)):
        assert len(stub.calls) == i + 1 and stub.calls[-1][1].queue_offset == offset  # one at a time
        assert list(pq.msgs) == list(range(BATCH)) and consumer.offset_store.read_memory(mq) == 0
        stub.calls[-1][2](offset != 4)  # answer it: 4's send-back (and its fallback) failed
    assert len(stub.calls) == 5
    assert list(pq.msgs) == [4] and consumer.offset_store.read_memory(mq) == 4
    world.env.run(until=LOCAL_RETRY_DELAY_US + 100 * MS)  # the local retry: consumed again, acknowledged
    consumed = [x for x in world.env.tracer.records + world.env.tracer.chunk if x[2] == "consumer.consumed"]
    off, times = field_index("consumer.consumed", "queue_offset"), field_index("consumer.consumed", "reconsume_times")
    assert [(x[off], x[times]) for x in consumed] == [(4, 1)]
    assert LOCAL_RETRY_DELAY_US <= consumed[0][0] < LOCAL_RETRY_DELAY_US + 100 * MS
    assert not pq.msgs and consumer.offset_store.read_memory(mq) == BATCH


def test_the_messages_whose_send_back_failed_come_back_together_in_one_request() -> None:
    world, consumer, svc, pq, mq, stub = component()
    submitted: list[list[tuple[int, int]]] = []
    svc.submit = lambda pq_, mq_, msgs: submitted.append([(m.queue_offset, m.reconsume_times) for m in msgs])
    batch = [pq.msgs[o] for o in range(BATCH)]
    svc._process_result(pq, mq, batch, -1)  # RECONSUME_LATER: all eight sent back
    answer_all(stub, lambda m: m.queue_offset % 2 == 0)  # the odd offsets' send-backs fail
    assert [m.queue_offset for _t, m, _d in stub.calls] == list(range(BATCH))
    assert list(pq.msgs) == [1, 3, 5, 7] and consumer.offset_store.read_memory(mq) == 1
    world.env.run(until=LOCAL_RETRY_DELAY_US - 1)
    assert not submitted
    world.env.run(until=LOCAL_RETRY_DELAY_US + 1)
    assert submitted == [[(1, 1), (3, 1), (5, 1), (7, 1)]]  # one submitConsumeRequest, reconsumeTimes + 1


@pytest.mark.parametrize("version, sent", [("5.x", [1, 2]), ("4.x", [0, 1, 2])])
def test_a_message_clean_expired_msg_took_is_sent_back_again_only_by_4x(version: str, sent: list[int]) -> None:
    _world, _consumer, svc, pq, mq, stub = component(version)
    batch = [pq.msgs[o] for o in range(3)]
    pq.remove(0)  # cleanExpiredMsg sent it back and took it out of the cache meanwhile
    svc._process_result(pq, mq, batch, -1)
    answer_all(stub, lambda m: True)
    assert [m.queue_offset for _t, m, _d in stub.calls] == sent


def test_a_dropped_queue_keeps_its_offset_but_its_send_backs_still_go() -> None:
    """Dropped while the send-backs run: Java's loop goes on (the copies are made), but the offset is
    not stored (updateOffset only when not dropped)."""
    _world, consumer, svc, pq, mq, stub = component()
    batch = [pq.msgs[o] for o in range(BATCH)]
    svc._process_result(pq, mq, batch, 5)
    pq.dropped = True
    for _ in range(2):
        stub.calls[-1][2](True)
    assert [m.queue_offset for _t, m, _d in stub.calls] == [6, 7]
    assert consumer.offset_store.read_memory(mq) == 0


def test_every_call_sets_the_consume_start_time_a_short_one_clears_an_old_one() -> None:
    world, _consumer, svc, pq, mq, _stub = component()
    batch = [pq.msgs[o] for o in range(2)]
    svc._mark_consume_start(pq, batch, svc.consume_timeout_us + 1)
    assert pq.long_consuming == {0: 0, 1: 0}
    svc._mark_consume_start(pq, batch[:1], 1_000)  # 0 consumed again, briefly
    assert pq.long_consuming == {1: 0}
    world.env.run(until=svc.consume_timeout_us + 2 * S)
    svc._clean_expired(mq, pq)  # 0 is the smallest cached, but its current call is short: not cleaned
    assert 0 in pq.msgs


# --- the story: sequential send-backs, local retries under a refusing broker -----------------------
@functools.cache
def refusing_run(seed: int) -> dict[str, Any]:
    """batch_scenario with RECONSUME_LATER; from 10 s to 16 s broker-a refuses every send-back and
    every send to %RETRY%billing (SYSTEM_ERROR). Every sendMessageBack of c-1 and c-2 is logged:
    [start µs, answer µs, ok, msg id, reconsume times]."""
    world = build(batch_scenario(failure_probability=0.03), seed, keep_records=True)
    broker = world.nodes["broker-a"]
    for payload_type in (ConsumerSendMsgBack, SendMessage):
        handler = broker.handlers[payload_type]

        def gate(src: str, req_id: int, req: Any, handler: Any = handler,
                 back: bool = payload_type is ConsumerSendMsgBack) -> None:
            if (back or req[0].topic.startswith("%RETRY%")) and REFUSING[0] <= world.env.now < REFUSING[1]:
                broker.reply(src, req_id, CodeResponse(SYSTEM_ERROR))
                return
            handler(src, req_id, req)
        broker.handlers[payload_type] = gate
    log: dict[str, list[list]] = {}
    for name in ("c-1", "c-2"):
        log[name] = entries = []
        real = world.models[name].consume.send_back

        def send(mq: Any, m: MessageExt, level: int, done: Any, real: Any = real, entries: list = entries) -> None:
            entry = [world.env.now, None, None, m.msg_id, m.reconsume_times]
            entries.append(entry)

            def answered(ok: bool) -> None:
                entry[1:3] = [world.env.now, ok]
                done(ok)
            real.send(mq, m, level, answered)
        world.models[name].consume.send_back = type("Spy", (), {"send": staticmethod(send)})()
    start(world)
    world.env.run(until=30 * S)
    return {"log": log, "records": world.env.tracer.records + world.env.tracer.chunk}


REFUSING = (10 * S, 16 * S)


def failed_calls(run: dict[str, Any]) -> list[tuple[list[tuple], list[list]]]:
    """Each listener call with a failure (RECONSUME_LATER: all of it sent back), with the first
    send-back log entry of each of its messages at or after the call's end."""
    ok, times = field_index("consumer.consumed", "ok"), field_index("consumer.consumed", "reconsume_times")
    out = []
    for call in batches(run["records"]):
        if all(x[ok] for x in call):
            continue
        entries = run["log"][call[0][1]]
        out.append((call, [next(e for e in entries if e[3] == x[4] and e[4] == x[times] and e[0] >= x[0])
                           for x in call]))
    return out


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_a_failed_batch_is_sent_back_one_message_after_another(seed: int) -> None:
    """Each RECONSUME_LATER batch: its messages' send-backs start when the listener returns, in
    batch order, each once the previous one has answered."""
    chains = 0
    for call, sends in failed_calls(refusing_run(seed)):
        assert sends[0][0] == call[0][0]
        for prev, nxt in zip(sends, sends[1:], strict=False):
            assert prev[1] is not None and nxt[0] >= prev[1], (prev, nxt)
        chains += len(sends) >= 2
    assert chains >= 5


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_the_messages_a_refusing_broker_did_not_take_back_come_back_together_5_s_later(seed: int) -> None:
    """While broker-a refuses send-backs and the inner producer's %RETRY% sends, a failed batch's
    refused messages get reconsumeTimes + 1 and are consumed again locally — from the same queue
    offsets, still cached — together (one call: one instant), 5 s after the last send-back answered."""
    run = refusing_run(seed)
    times, off, q = (field_index("consumer.consumed", f) for f in ("reconsume_times", "queue_offset", "queue_id"))
    consumed = [x for x in run["records"] if x[2] == "consumer.consumed"]
    together = 0
    for call, sends in failed_calls(run):
        refused = {x[4]: x for x, e in zip(call, sends, strict=True) if e[2] is False}
        if not refused or sends[-1][1] is None or sends[-1][1] > 25 * S:
            continue
        again = {}
        for x in consumed:  # the first local re-consumption of each refused message
            first = refused.get(x[4])
            if first is not None and x[1] == first[1] and (x[q], x[off], x[times]) == (
                    first[q], first[off], first[times] + 1):
                again.setdefault(x[4], x)
        assert set(again) == set(refused), (call, sends)
        assert len({x[0] for x in again.values()}) == 1  # one listener call
        assert min(x[0] for x in again.values()) >= sends[-1][1] + LOCAL_RETRY_DELAY_US
        together += len(refused) >= 2
    assert together >= 1
