"""DefaultMQProducerImpl in the simulator, against scripted stub brokers: the send loop's rules
(reference section 1.2/1.3), selector sends, ONEWAY, ASYNC retries, the detector, and the client
instance (NameServer choice, heartbeats)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models.message import java_string_hash, new_message, shard_key
from models.namesrv import NameServer
from models.producer.config import ProducerConfig
from models.producer.producer import Producer
from models.protocol import (
    GO_AWAY,
    SUCCESS,
    SYSTEM_BUSY,
    CodeResponse,
    GetMaxOffset,
    GetRouteInfo,
    Heartbeat,
    OffsetResponse,
    RegisterBroker,
    SendMessage,
    SendResponse,
)
from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import KINDS, Tracer

MS = 1_000
SEC = 1_000_000
TOPIC = "T"


class StubBroker:
    """A broker master (or slave) of one topic that answers SEND_MESSAGE as `answer(request)`
    says: a response code, or None for no answer. It registers with the NameServer at start."""

    def __init__(self, env: Any, name: str, queues: int = 1, answer: Callable[[Any], int | None] = lambda r: SUCCESS,
                 broker_name: str | None = None, broker_id: int = 0, namesrvs: tuple[str, ...] = ("ns",)) -> None:
        self.node = node = Node(env, name)
        self.answer = answer
        self.sends: list[tuple[int, int, int]] = []  # (t, msg_id, queue_id)
        self.heartbeats: list[Heartbeat] = []
        self.probes = 0
        self.registration = RegisterBroker(broker_name or name, broker_id, name, ((TOPIC, queues, queues),))
        node.handle(SendMessage, self.on_send)
        node.handle(Heartbeat, self.on_heartbeat)
        node.handle(GetMaxOffset, self.on_probe)
        node.on_start(lambda: [node.rpc(ns, self.registration, SEC, lambda r: None) for ns in namesrvs])

    def on_send(self, src: str, req_id: int, req: SendMessage) -> None:
        self.sends.append((self.node.env._now, req.msg.msg_id, req.queue_id))
        code = self.answer(req)
        if code is not None:
            self.node.reply(src, req_id, SendResponse(code, len(self.sends) - 1, 0))

    def on_heartbeat(self, src: str, req_id: int, req: Heartbeat) -> None:
        self.heartbeats.append(req)
        self.node.reply(src, req_id, CodeResponse(SUCCESS))

    def on_probe(self, src: str, req_id: int, req: GetMaxOffset) -> None:
        self.probes += 1
        self.node.reply(src, req_id, OffsetResponse(SUCCESS, 0))


class World:
    """A NameServer, stub brokers and one producer on a 0.1 ms network (built by `make`)."""

    env: Any
    net: Network
    namesrvs: list[NameServer]
    brokers: list[StubBroker]
    producer: Producer
    seq: int

    def start(self) -> None:
        for ns in self.namesrvs:
            ns.node.start()
        for b in self.brokers:
            b.node.start()
        self.producer.node.start()

    def send_at(self, t_us: int, shard: int = -1) -> int:
        """The application calls send() at `t_us`; returns the message id."""
        self.seq += 1
        msg_id = self.seq

        def send() -> None:
            self.producer.send(new_message((msg_id, TOPIC, None, shard, 100, self.env._now, 300, 0, 0, None)))

        self.env.call_later(t_us - self.env._now, send)
        return msg_id

    def set_index(self, t_us: int, value: int) -> None:
        """At `t_us` (after the first route poll), set the publish index's stored value."""
        self.env.call_later(t_us - self.env._now, lambda: setattr(self.producer.publish[TOPIC], "send_which_queue",
                                                                   value))

    def run(self, until_us: int) -> None:
        self.env.run(until=until_us)

    def records(self, kind: str) -> list[dict[str, Any]]:
        names = ("t_us", "node", "kind", *KINDS[kind])
        return [dict(zip(names, r, strict=True)) for r in self.env.tracer.of_kind(kind)]

    def outcome(self, msg_id: int) -> dict[str, Any]:
        out = [r for kind in ("producer.sent", "producer.send_failed") for r in self.records(kind)
               if r["msg_id"] == msg_id]
        assert len(out) == 1, out
        return out[0]


def make(brokers: list[tuple[str, int, Callable[[Any], int | None]]], **kw: Any) -> tuple[World, dict[str, StubBroker]]:
    """A world with stub brokers (name, queues, answer)."""
    world = World()
    env = SimEnv()
    env.rng = Rng(7)
    env.tracer = Tracer(env, keep=True)
    world.env = env
    world.net = Network(env, Constant(value=0.1))
    namesrvs = kw.pop("namesrvs", ("ns",))
    world.namesrvs = [NameServer(env, n) for n in namesrvs]
    stubs = {name: StubBroker(env, name, queues, answer, namesrvs=namesrvs) for name, queues, answer in brokers}
    world.brokers = list(stubs.values())
    version, send_mode, selector = kw.pop("version", "5.x"), kw.pop("send_mode", "SYNC"), kw.pop("selector", None)
    world.producer = Producer(env, "p", "default", ProducerConfig(**kw), list(namesrvs), [TOPIC], send_mode,
                              client_version=version, selector=selector)
    for node in [n.node for n in world.namesrvs] + [b.node for b in world.brokers] + [world.producer.node]:
        world.net.add_node(node)
    world.seq = 0
    world.start()
    return world, stubs


def ok(_req: Any) -> int:
    return SUCCESS


def silent(_req: Any) -> None:
    return None


# --- SYNC: sendDefaultImpl ------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_go_away_is_retried_in_5x_only(version: str) -> None:
    world, stubs = make([("a", 1, lambda r: GO_AWAY), ("b", 1, lambda r: GO_AWAY)], version=version)
    m = world.send_at(100 * MS)
    world.run(2 * SEC)
    out = world.outcome(m)
    assert out["kind"] == "producer.send_failed" and out["reason"] == f"broker_code_{GO_AWAY}"
    assert out["attempts"] == (3 if version == "5.x" else 1)  # 4.9.8's retryResponseCodes lack 1500
    assert sum(len(s.sends) for s in stubs.values()) == out["attempts"]


@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_system_busy_is_retried_in_5x_only(version: str) -> None:
    world, stubs = make([("a", 1, lambda r: SYSTEM_BUSY), ("b", 1, ok)], version=version)
    world.set_index(50 * MS, -1)  # the first send picks broker-a's queue
    m = world.send_at(100 * MS)
    world.run(2 * SEC)
    out = world.outcome(m)
    if version == "5.x":
        assert (out["kind"], out["broker"], out["attempts"]) == ("producer.sent", "b", 2)
    else:
        assert (out["kind"], out["reason"], out["attempts"]) == ("producer.send_failed", "broker_code_2", 1)


@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_queue_selection_comes_before_the_budget_check(version: str) -> None:
    """A first attempt that spends the whole budget: the loop still selects the next queue (one
    more increment of the index), then finds no budget left: call timeout, 1 attempt, no request
    to the second broker."""
    world, stubs = make([("a", 1, silent), ("b", 1, silent)], version=version)
    world.set_index(50 * MS, -1)
    m = world.send_at(100 * MS)
    world.run(5 * SEC)
    out = world.outcome(m)
    assert (out["reason"], out["attempts"], out["broker"]) == ("call_timeout", 1, "a")
    assert out["t_us"] == 100 * MS + 3 * SEC  # the attempt's timeout is the whole sendMsgTimeout
    assert world.producer.publish[TOPIC].send_which_queue == 1  # 0 → a, then 1 → b selected
    assert stubs["b"].sends == []


def test_timed_out_attempt_is_retried_within_the_per_request_cap() -> None:
    """5.3.3 sendMsgMaxTimeoutPerRequest: a capped attempt leaves budget for a retry elsewhere."""
    world, stubs = make([("a", 1, silent), ("b", 1, ok)], send_msg_max_timeout_per_request_ms=1000)
    world.set_index(50 * MS, -1)
    m = world.send_at(100 * MS)
    world.run(5 * SEC)
    out = world.outcome(m)
    assert (out["kind"], out["broker"], out["attempts"]) == ("producer.sent", "b", 2)
    assert stubs["b"].sends[0][0] >= 100 * MS + SEC  # after the capped first attempt


def test_fault_tolerance_off_keeps_no_fault_items() -> None:
    world, stubs = make([("a", 1, silent), ("b", 1, ok)], send_msg_max_timeout_per_request_ms=500)
    for i in range(4):
        world.send_at(100 * MS + i * 10 * MS)
    world.run(5 * SEC)
    assert world.producer.fault.fault_item_table == {}


@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_fault_tolerance_isolates_a_refusing_broker(version: str) -> None:
    """A refused attempt isolates broker-a (5.x 10 s, 4.x 600 s): later sends are steered away."""
    world, stubs = make([("a", 1, ok), ("b", 1, ok)], version=version, send_latency_fault_enable=True)
    world.env.call_later(50 * MS, stubs["a"].node.crash)
    ids = [world.send_at(100 * MS + i * 10 * MS) for i in range(20)]
    world.run(3 * SEC)
    outs = [world.outcome(m) for m in ids]
    assert all(o["kind"] == "producer.sent" and o["broker"] == "b" for o in outs)
    assert sum(o["attempts"] > 1 for o in outs) == 1  # only the first send tried broker-a
    assert sum(o["steered"] for o in outs) >= 5  # round robin would have picked broker-a for about half
    assert not world.producer.fault.is_available("a", world.env._now // 1000)


# --- selector sends, ONEWAY -----------------------------------------------------------------------

def _shard_on_first_queue(size: int) -> int:
    return next(i for i in range(1000) if abs(java_string_hash(shard_key(i)) % size) == 0)


def test_selector_send_to_a_dead_broker_is_not_retried() -> None:
    world, stubs = make([("a", 1, ok), ("b", 1, ok)], send_mode="ORDERLY", selector="hash")
    world.env.call_later(50 * MS, stubs["a"].node.crash)  # its route stays cached until the next poll
    m = world.send_at(100 * MS, shard=_shard_on_first_queue(2))  # queue 0 of [a0, b0]: broker-a
    world.run(2 * SEC)
    out = world.outcome(m)
    assert (out["kind"], out["reason"], out["attempts"]) == ("producer.send_failed", "connect_failed", 1)
    assert stubs["b"].sends == []


def test_orderly_key_always_goes_to_its_queue() -> None:
    world, stubs = make([("a", 2, ok), ("b", 2, ok)], send_mode="ORDERLY", selector="hash")
    keys = [i % 5 for i in range(40)]
    ids = [world.send_at(100 * MS + i * MS, shard=k) for i, k in enumerate(keys)]
    world.run(2 * SEC)
    queue_of = {}
    for m, k in zip(ids, keys, strict=True):
        out = world.outcome(m)
        queue_of.setdefault(k, set()).add((out["broker"], out["queue_id"]))
    assert all(len(qs) == 1 for qs in queue_of.values())
    mqs = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert all(qs == {mqs[abs(java_string_hash(shard_key(k)) % 4)]} for k, qs in queue_of.items())


def test_oneway_to_a_dead_broker_is_not_sent() -> None:
    world, stubs = make([("a", 1, ok), ("b", 1, ok)], send_mode="ONEWAY")
    world.set_index(50 * MS, -1)
    first = world.send_at(100 * MS)  # connects to broker-a (no channel yet), written
    world.env.call_later(500 * MS, stubs["a"].node.crash)  # the OS closes the channel: the client learns it
    second = world.send_at(600 * MS)  # index 1 → b
    third = world.send_at(700 * MS)  # index 2 → a: reconnect refused
    world.run(2 * SEC)
    assert (world.outcome(first)["status"], world.outcome(second)["status"]) == ("ONEWAY", "ONEWAY")
    out = world.outcome(third)
    assert (out["kind"], out["reason"]) == ("producer.send_failed", "connect_failed")
    assert [s[1] for s in stubs["a"].sends] == [first]


def test_oneway_into_a_partition_is_sent_and_lost() -> None:
    world, stubs = make([("a", 1, ok)], send_mode="ONEWAY")
    first = world.send_at(100 * MS)
    world.env.call_later(200 * MS, lambda: world.net.partition([["a"], ["p"]]))
    second = world.send_at(300 * MS)
    world.run(SEC)
    assert world.outcome(first)["status"] == world.outcome(second)["status"] == "ONEWAY"
    assert [s[1] for s in stubs["a"].sends] == [first]  # the client never learns


# --- ASYNC ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_async_refused_connection_is_resent_with_the_same_queue_id(version: str) -> None:
    world, stubs = make([("a", 2, ok), ("b", 2, ok)], version=version, send_mode="ASYNC")
    world.env.call_later(50 * MS, stubs["a"].node.crash)
    world.set_index(50 * MS, 0)  # next increment 1 → a1
    m = world.send_at(100 * MS)
    world.run(2 * SEC)
    out = world.outcome(m)
    assert (out["kind"], out["broker"], out["queue_id"], out["attempts"]) == ("producer.sent", "b", 1, 2)
    assert [s[2] for s in stubs["b"].sends] == [1]  # the same request: queue id 1, not a new selection


@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_async_error_code_is_not_retried(version: str) -> None:
    world, stubs = make([("a", 1, lambda r: SYSTEM_BUSY), ("b", 1, ok)], version=version, send_mode="ASYNC")
    world.set_index(50 * MS, -1)
    m = world.send_at(100 * MS)
    world.run(2 * SEC)
    out = world.outcome(m)
    assert (out["kind"], out["reason"], out["attempts"]) == ("producer.send_failed", "broker_code_2", 1)
    assert stubs["b"].sends == []


@pytest.mark.parametrize("version", ["5.x", "4.x"])
def test_async_timeout_expires_at_the_scan_and_is_not_resent(version: str) -> None:
    """The response future expires at the first scanResponseTable tick (client start + 3 s + k s)
    at or after begin + timeout + 1 s; no time is left, so 5.x does not retry and 4.x's retries
    are refused before sending."""
    world, stubs = make([("a", 1, silent), ("b", 1, ok)], version=version, send_mode="ASYNC")
    world.set_index(50 * MS, -1)
    m = world.send_at(100 * MS + 300)
    world.run(8 * SEC)
    out = world.outcome(m)
    assert out["kind"] == "producer.send_failed"
    assert out["t_us"] == 5 * SEC  # begin + 3 s + 1 s = 4.1003 s → tick at 5 s
    assert (out["reason"], out["attempts"]) == (("timeout", 1) if version == "5.x" else ("call_timeout", 3))
    assert stubs["b"].sends == [] and len(stubs["a"].sends) == 1


def test_async_backpressure_rejects_beyond_the_permits() -> None:
    """5.x back-pressure: at most max(backPressureForAsyncSendNum, 10) sends in flight; the
    others wait for a permit up to the send timeout, then fail."""
    world, stubs = make([("a", 1, silent)], send_mode="ASYNC", enable_backpressure_for_async_mode=True,
                        back_pressure_for_async_send_num=1, send_msg_timeout_ms=1000)
    ids = [world.send_at(100 * MS + i * MS) for i in range(12)]
    world.run(5 * SEC)
    reasons = [world.outcome(m).get("reason") for m in ids]
    assert reasons.count("backpressure_num") == 2  # 10 permits (the minimum), 12 sends
    assert len(stubs["a"].sends) == 10


# --- the client instance and the detector ---------------------------------------------------------

def test_one_name_server_until_it_fails() -> None:
    world, _ = make([("a", 1, ok)], namesrvs=("ns1", "ns2"), poll_name_server_interval_ms=1000)
    asked: dict[str, list[int]] = {"ns1": [], "ns2": []}
    for ns in world.namesrvs:
        original = ns.on_get_route
        ns.node.handle(GetRouteInfo, lambda src, rid, req, ns=ns, original=original: (
            asked[ns.node.name].append(world.env._now), original(src, rid, req)))
    world.run(5 * SEC)
    used = [n for n, ts in asked.items() if ts]
    assert len(used) == 1  # kept while it works
    other = "ns2" if used[0] == "ns1" else "ns1"
    world.namesrvs[0 if used[0] == "ns1" else 1].node.crash()
    world.run(10 * SEC)
    assert asked[other] and min(asked[other]) > 5 * SEC


def test_producer_only_client_heartbeats_masters_only() -> None:
    world, stubs = make([("a", 1, ok)])
    slave = StubBroker(world.env, "a-slave", 1, ok, broker_name="a", broker_id=1)
    world.net.add_node(slave.node)
    slave.node.start()
    world.run(3 * SEC)
    assert stubs["a"].heartbeats and not slave.heartbeats
    assert stubs["a"].heartbeats[0].producer_groups == ("DEFAULT_PRODUCER",)


def test_detector_probes_an_unreachable_broker_back() -> None:
    """5.x with the detector: a RemotingException marks the broker unreachable; the detector's
    GET_MAX_OFFSET probe (every 3 s, first after 3 s) makes it reachable again."""
    world, stubs = make([("a", 1, silent), ("b", 1, ok)], send_latency_fault_enable=True,
                        start_detector_enable=True, send_msg_max_timeout_per_request_ms=500)
    world.set_index(50 * MS, -1)
    world.send_at(100 * MS)
    world.run(2 * SEC)
    item = world.producer.fault.fault_item("a")
    assert item is not None and item.reachable_flag is False and stubs["a"].probes == 0
    world.run(3 * SEC + 100 * MS)
    assert stubs["a"].probes == 1 and world.producer.fault.fault_item("a").reachable_flag is True
