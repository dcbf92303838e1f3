"""ConsumeMessageConcurrentlyService.processConsumeResult (consumeMessageBatchMaxSize 1,
models/consumer/consume_service.py): 5.3.3 skips the send-back of a failed message that is no longer in
its ProcessQueue (`containsMessage`: cleanExpiredMsg sent it back and took it out while its listener call
ran); 4.9.8 has no such check and sends it back a second time.

The timeline: offset 0's listener call lasts consumeTimeout + 2 s and fails; cleanExpiredMsg runs at
consumeTimeout + 1 s, sends 0 back with delay level 3 and removes it; at consumeTimeout + 2 s the call
returns RECONSUME_LATER."""

from __future__ import annotations

from typing import Any

import pytest

from models.message import MessageExt, MessageQueue
from models.version import V4, V5
from rmqsim.runner import build
from rmqsim.scenario.spec import from_data

S = 1_000_000
EXPIRED_LEVEL = 3  # cleanExpiredMsg's sendMessageBack(msg, 3)


class SendBackStub:
    """Stands in for send_back.py: logs (time, offset, delay level) and answers OK at once."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.calls: list[tuple[int, int, int]] = []

    def send(self, mq: Any, message: MessageExt, delay_level: int, done: Any) -> None:
        self.calls.append((self.env.now, message.queue_offset, delay_level))
        done(True)


def _msg(offset: int) -> MessageExt:
    return MessageExt(1_000 + offset, "orders", 0, offset, offset * 100, 100, 0, None, 0, 10, None)


def _component(version: str) -> tuple[Any, Any, Any, Any, MessageQueue, SendBackStub]:
    """A built (not started) world's c-1 single-message service, one cached queue of offsets 0..2,
    every listener call failing, the next call lasting consumeTimeout + 2 s."""
    world = build(from_data({
        "name": "contains_message", "version": version, "duration_ms": 10_000,
        "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 1}]},
        "producers": [], "consumers": [{"name": "c", "group": "billing", "topic": "orders"}]}), 1)
    consumer = world.models["c-1"] if "c-1" in world.models else world.models["c"]
    svc = consumer.consume
    svc.failure_probability = 1.0
    svc._times = [svc.consume_timeout_us + 2 * S]
    stub = SendBackStub(world.env)
    svc.send_back = stub
    mq = MessageQueue("orders", "broker-a", 0)
    pq = consumer.process_queue_class(0, 0)
    consumer.process_queues[mq] = pq
    pq.put([_msg(o) for o in range(3)])
    return world, consumer, svc, pq, mq, stub


@pytest.mark.parametrize("version, second_send_back", [(V5, False), (V4, True)])
def test_a_failed_call_on_a_message_clean_expired_msg_took_is_sent_back_again_only_by_4x(
        version: str, second_send_back: bool) -> None:
    world, consumer, svc, pq, mq, stub = _component(version)
    timeout_us = svc.consume_timeout_us
    svc._start(pq, mq, pq.msgs[0])
    world.env.run(until=timeout_us + 1 * S)
    svc._clean_expired(mq, pq)
    assert 0 not in pq.msgs  # taken out of the cache after its send-back
    world.env.run(until=timeout_us + 3 * S)
    want = [(timeout_us + 1 * S, 0, EXPIRED_LEVEL)]
    if second_send_back:
        want.append((timeout_us + 2 * S, 0, 0))  # the listener's RECONSUME_LATER: the context's level
    assert stub.calls == want
    # either way the offset moves past it: removeMessage returns the smallest still cached
    assert consumer.offset_store.read_memory(mq) == 1


@pytest.mark.parametrize("version", [V5, V4])
def test_a_failed_call_on_a_message_still_cached_is_sent_back_in_both_versions(version: str) -> None:
    """containsMessage is true for a message nobody took: the listener's failure sends it back at once."""
    world, consumer, svc, pq, mq, stub = _component(version)
    svc._times = [2 * S]
    svc._start(pq, mq, pq.msgs[1])
    world.env.run(until=3 * S)
    assert stub.calls == [(2 * S, 1, 0)]
    assert 1 not in pq.msgs and consumer.offset_store.read_memory(mq) == 0  # 0 still cached: the offset stays
