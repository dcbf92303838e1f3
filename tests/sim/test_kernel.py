"""Kernel tests: Rng streams, Dist sampling, Node, Network, Disk, FaultInjector.

Timeline style: collect `(t_us, event)` tuples into a list and compare with the expected list.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
from typing import NamedTuple

import pytest
from pydantic import TypeAdapter, ValidationError

from sim import trace
from sim.disk import Disk, DiskConfig
from sim.dist import Constant, Dist, Empirical, Exponential, Lognormal, Uniform
from sim.env import SimEnv
from sim.faults import FaultInjector, FaultSpec
from sim.network import TCP_RTO_MIN_US, Network
from sim.node import CONNECT_FAILED, Node
from sim.rng import Rng, derive_seed
from sim.trace import Tracer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIST = TypeAdapter(Dist)


class Ping(NamedTuple):
    n: int


class Pong(NamedTuple):
    n: int


def make_env(seed: int = 1, latency: object = None) -> tuple[SimEnv, Network]:
    env = SimEnv()
    env.rng = Rng(seed)
    env.tracer = Tracer(env)
    net = Network(env, latency if latency is not None else Constant(value=1.0))  # 1 ms one way
    return env, net


def add_nodes(env: SimEnv, net: Network, *names: str) -> list[Node]:
    nodes = []
    for name in names:
        node = Node(env, name)
        net.add_node(node)
        node.start()
        nodes.append(node)
    return nodes


# --- Rng ---------------------------------------------------------------------------------------

def draws(stream, n: int = 5) -> list[float]:
    return [stream.random() for _ in range(n)]


def test_same_seed_and_name_give_same_draws():
    assert draws(Rng(7).stream("broker-a.disk")) == draws(Rng(7).stream("broker-a.disk"))


def test_different_seed_or_name_give_different_draws():
    base = draws(Rng(7).stream("broker-a.disk"))
    assert draws(Rng(8).stream("broker-a.disk")) != base
    assert draws(Rng(7).stream("broker-b.disk")) != base


def test_stream_independent_of_creation_order_of_other_streams():
    r1 = Rng(42)
    r1.stream("a")
    r1.stream("c")
    s1 = r1.stream("b")
    r2 = Rng(42)
    s2 = r2.stream("b")
    r2.stream("a")
    assert draws(s1, 20) == draws(s2, 20)
    assert r1.names == ["a", "c", "b"]


def test_duplicate_stream_name_raises():
    rng = Rng(1)
    rng.stream("x")
    with pytest.raises(ValueError, match="twice"):
        rng.stream("x")


def test_derive_seed_is_blake2b():
    expected = int.from_bytes(hashlib.blake2b(b"3/net.a->b", digest_size=8).digest(), "big")
    assert derive_seed(3, "net.a->b") == expected


def test_streams_do_not_depend_on_pythonhashseed():
    code = ("from sim.rng import Rng, derive_seed; s = Rng(5).stream('broker-a.disk'); "
            "print(derive_seed(5, 'broker-a.disk'), [s.random() for _ in range(3)], hash('salt') != 0)")
    outs = set()
    for hashseed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        outs.add(res.stdout)
    assert len(outs) == 1
    s = Rng(5).stream("broker-a.disk")
    assert outs.pop().startswith(f"{derive_seed(5, 'broker-a.disk')} {[s.random() for _ in range(3)]}")


# --- Dist ----------------------------------------------------------------------------------------

def test_bare_number_is_constant():
    d = DIST.validate_python(5)
    assert isinstance(d, Constant) and d.value == 5
    assert d.sample_us(Rng(1).stream("s")) == 5000
    assert d.sampler_us(Rng(1).stream("t"))() == 5000
    assert DIST.validate_python(0.25).sample_us(None) == 250


def test_constant_rounds_to_whole_us():
    assert Constant(value=0.0014).sample_us(None) == 1
    assert Constant(value=0.0016).sample_us(None) == 2
    assert Constant(value=0).sample_us(None) == 0
    assert isinstance(Constant(value=1.2345).sample_us(None), int)


def test_uniform_bounds():
    d = DIST.validate_python({"dist": "uniform", "low": 1, "high": 3})
    assert isinstance(d, Uniform)
    s = Rng(1).stream("u")
    xs = [d.sample_us(s) for _ in range(5000)]
    assert all(isinstance(x, int) and 1000 <= x <= 3000 for x in xs)
    assert min(xs) < 1100 and max(xs) > 2900
    f = d.sampler_us(Rng(1).stream("u2"))
    assert all(1000 <= f() <= 3000 for _ in range(1000))


@pytest.mark.parametrize("spec", [3, {"dist": "uniform", "low": 1, "high": 3},
                                  {"dist": "exponential", "mean": 2},
                                  {"dist": "lognormal", "p50": 0.5, "p99": 4},
                                  {"dist": "empirical", "values": [1, 2, 8]}])
def test_block_sampler_hands_out_the_sampler_draws_in_order(spec):
    """Network links pop latencies from blocks; the values and their order are the sampler's."""
    d = DIST.validate_python(spec)
    one_by_one = d.sampler_us(Rng(3).stream("x"))
    next_block = d.block_sampler(Rng(3).stream("x"), 1000)
    popped: list[int] = []
    while len(popped) < 2500:  # crosses block boundaries
        popped += next_block()[::-1]
    assert popped[:2500] == [one_by_one() for _ in range(2500)]
    assert all(isinstance(v, int) and v >= 0 for v in popped)


def test_index_sampler_is_uniform_over_its_range_and_seeded():
    from sim.dist import index_sampler

    draw = index_sampler(Rng(1).stream("i"), 16)
    xs = [draw() for _ in range(32_000)]
    assert set(xs) == set(range(16))
    assert all(1700 < xs.count(i) < 2300 for i in range(16))
    again = index_sampler(Rng(1).stream("i"), 16)
    assert [again() for _ in range(32_000)] == xs


def test_uniform_high_below_low_rejected():
    with pytest.raises(ValidationError):
        DIST.validate_python({"dist": "uniform", "low": 3, "high": 1})


def test_exponential_mean_and_non_negative():
    d = DIST.validate_python({"dist": "exponential", "mean": 2})
    assert isinstance(d, Exponential) and d.mean() == 2
    s = Rng(1).stream("e")
    xs = [d.sample_us(s) for _ in range(20000)]
    assert all(isinstance(x, int) and x >= 0 for x in xs)
    assert abs(statistics.fmean(xs) - 2000) < 60
    f = d.sampler_us(Rng(1).stream("e2"))
    ys = [f() for _ in range(20000)]
    assert all(isinstance(y, int) and y >= 0 for y in ys)
    assert abs(statistics.fmean(ys) - 2000) < 60


def test_lognormal_median_sigma():
    d = DIST.validate_python({"dist": "lognormal", "median": 0.5, "sigma": 0.4})
    s = Rng(2).stream("l")
    xs = [d.sample_us(s) for _ in range(20000)]
    assert abs(statistics.median(xs) - 500) < 15


@pytest.mark.parametrize("sampler", ["sample_us", "sampler_us"])
def test_lognormal_p50_p99_form(sampler):
    d = DIST.validate_python({"dist": "lognormal", "p50": 0.5, "p99": 4})
    assert isinstance(d, Lognormal)
    s = Rng(3).stream("l")
    draw = d.sampler_us(s) if sampler == "sampler_us" else (lambda: d.sample_us(s))
    xs = sorted(draw() for _ in range(40000))
    assert all(isinstance(x, int) and x >= 0 for x in xs)
    assert abs(statistics.median(xs) - 500) / 500 < 0.03
    p99 = xs[int(0.99 * len(xs))]
    assert abs(p99 - 4000) / 4000 < 0.10


def test_lognormal_needs_one_complete_form():
    with pytest.raises(ValidationError, match="median"):
        DIST.validate_python({"dist": "lognormal", "median": 0.5})
    with pytest.raises(ValidationError):
        DIST.validate_python({"dist": "lognormal", "p50": 4, "p99": 1})


def test_empirical_values_equally_likely():
    d = DIST.validate_python({"dist": "empirical", "values": [1, 2, 8]})
    assert isinstance(d, Empirical)
    s = Rng(1).stream("emp")
    xs = [d.sample_us(s) for _ in range(3000)]
    assert set(xs) == {1000, 2000, 8000}
    for v in (1000, 2000, 8000):
        assert 850 < xs.count(v) < 1150


def test_sample_int_rounds():
    assert Constant(value=1024.4).sample_int(None) == 1024
    assert Constant(value=0).sample_int(None) == 0


# --- Node ----------------------------------------------------------------------------------------

def test_call_later_runs_at_its_time():
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []
    a.call_later(10, lambda: log.append((env.now, "x")))
    a.call_later(5, lambda: log.append((env.now, "y")))
    env.run(until=100)
    assert log == [(5, "y"), (10, "x")]


def test_call_later_dropped_after_crash_even_after_restart():
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []
    a.call_later(10_000, lambda: log.append((env.now, "old")))
    env.call_later(5_000, a.crash)
    env.call_later(6_000, a.restart)
    env.call_later(7_000, lambda: a.call_later(10_000, lambda: log.append((env.now, "new"))))
    env.run(until=100_000)
    assert log == [(17_000, "new")]


def test_pending_calls_lists_this_incarnations_calls_in_call_order():
    """What a shutdown interrupts: the calls still due, the earliest made first (far-future
    ones included), not those already run, not another function's, not a dead incarnation's."""
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []

    def done(n: int) -> None:
        log.append((env.now, n))

    a.call_later(30, done, 1)
    a.call_later(10, done, 2)
    a.call_later(3_600_000_000, done, 3)  # staged in the far heap (sim/env.py)
    a.call_later(20, log.append, "other")
    b.call_later(20, done, 9)
    env.run(until=15)
    assert a.pending_calls(done) == [(1,), (3,)]
    a.crash()
    a.restart()
    a.call_later(5, done, 4)
    assert a.pending_calls(done) == [(4,)]
    assert b.pending_calls(done) == [(9,)]


def test_sleep_of_crashed_service_never_resumes():
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []

    def service():
        while True:
            yield a.sleep_us(1_000)
            log.append(env.now)

    env.process(service())
    env.call_later(2_500, a.crash)
    env.run(until=10_000)
    assert log == [1_000, 2_000]


def test_pause_defers_timers_and_deliveries_preserving_order():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    a.handle(Ping, lambda src, req_id, p: log.append((env.now, f"ping{p.n}")))
    a.call_later(10_000, lambda: log.append((env.now, "timer1")))
    a.call_later(20_000, lambda: log.append((env.now, "timer2")))
    a.call_later(40_000, lambda: log.append((env.now, "timer3")))
    env.call_later(5_000, a.pause, 30_000)  # paused until 35 ms
    env.call_later(11_000, b.send, "a", Ping(1))  # arrives at 12 ms, during the pause
    env.call_later(30_000, b.send, "a", Ping(2))  # arrives at 31 ms
    env.call_later(35_000, b.send, "a", Ping(3))  # arrives at 36 ms, after the pause
    env.run(until=100_000)
    assert log == [(35_000, "timer1"), (35_000, "ping1"), (35_000, "timer2"), (35_000, "ping2"),
                   (36_000, "ping3"), (40_000, "timer3")]


def test_rpc_reply():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: b.reply(src, req_id, Pong(p.n + 1)))
    log = []
    a.rpc("b", Ping(1), 50_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(2_000, Pong(2))]


def test_rpc_timeout_returns_none():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: None)  # never answers
    log = []
    a.rpc("b", Ping(1), 5_000, lambda r: log.append((env.now, r)))
    env.call_later(1_000, a.rpc, "b", Ping(2), 5_000, lambda r: log.append((env.now, r)))
    env.call_later(1_500, a.rpc, "b", Ping(3), 3_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(4_500, None), (5_000, None), (6_000, None)]


def test_rpc_late_reply_after_timeout_is_ignored():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: b.call_later(10_000, b.reply, src, req_id, Pong(0)))
    log = []
    a.rpc("b", Ping(1), 5_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(5_000, None)]


def test_rpc_to_crashed_process_gets_connect_failed():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: b.reply(src, req_id, Pong(0)))
    b.crash()
    log = []
    a.rpc("b", Ping(1), 50_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(2_000, CONNECT_FAILED)]  # one round trip


def test_rpc_to_booting_process_gets_connect_failed():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.startup_us = 20_000
    b.crash()
    b.restart()
    log = []
    a.rpc("b", Ping(1), 50_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(2_000, CONNECT_FAILED)]


def test_rpc_to_power_lost_host_times_out():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: b.reply(src, req_id, Pong(0)))
    b.crash(power_loss=True)
    log = []
    a.rpc("b", Ping(1), 50_000, lambda r: log.append((env.now, r)))
    env.run(until=100_000)
    assert log == [(50_000, None)]


def test_crash_of_requester_drops_pending_rpc():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: None)
    log = []
    a.rpc("b", Ping(1), 5_000, lambda r: log.append((env.now, r)))
    env.call_later(1_000, a.crash)
    env.run(until=100_000)
    assert log == []


def test_node_call_later_is_fire_and_forget_timer_is_cancellable():
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []
    assert a.call_later(1_000, log.append, "call") is None  # not cancellable: no handle
    keep = a.timer(2_000, lambda: log.append((env.now, "kept")))
    dropped = a.timer(3_000, lambda: log.append((env.now, "cancelled")))
    far = a.timer(200_000, lambda: log.append((env.now, "far cancelled")))  # staged far ahead
    env.call_later(1_500, dropped.cancel)
    env.call_later(1_500, far.cancel)
    env.run(until=1_000_000)
    assert log == ["call", (2_000, "kept")]
    assert keep is not dropped


def test_timer_dies_with_its_incarnation_and_waits_out_a_pause():
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []
    a.timer(10_000, lambda: log.append((env.now, "old incarnation")))
    env.call_later(5_000, a.crash)
    env.call_later(6_000, a.restart)
    env.call_later(7_000, lambda: a.timer(10_000, lambda: log.append((env.now, "paused"))))
    env.call_later(15_000, a.pause, 20_000)  # paused until 35 ms
    env.run(until=100_000)
    assert log == [(35_000, "paused")]


def test_far_future_entries_keep_scheduling_order_with_near_ones():
    """Staged far-future entries (sim/env.py FAR_US) run in the same (time, scheduling) order
    as entries pushed straight into the main heap."""
    env, net = make_env()
    (a,) = add_nodes(env, net, "a")
    log = []
    a.timer(100_000, log.append, "staged first")  # more than FAR_US ahead: staged
    env.call_later(100_000, log.append, "heap second")  # a Call goes straight to the heap
    a.timer(100_000, log.append, "staged third")
    env.call_later(60_000, lambda: a.call_later(40_000, log.append, "near fourth"))
    env.call_later(60_000, lambda: a.timer(39_999, log.append, "earlier"))
    env.run(until=1_000_000)
    assert log == ["earlier", "staged first", "heap second", "staged third", "near fourth"]


def test_run_max_events_stops_exactly_and_processed_counts():
    env, net = make_env()
    log = []
    for t in (1, 2, 3, 4, 5):
        env.call_later(t, log.append, t)
    before = env.processed()
    assert env.run(until=100, max_events=3) is True  # stopped by the bound, events left
    assert log == [1, 2, 3] and env.now == 3
    assert env.processed() == before + 3
    assert env.run(until=100) is False  # the first run's stop entry must not end this one early
    assert log == [1, 2, 3, 4, 5] and env.now == 100
    assert env.run(max_events=10) is False  # ran dry


def test_run_until_contract():
    env, _net = make_env()
    log = []
    env.call_later(10, log.append, 10)
    env.run(until=10)  # an event at `until` itself is not processed
    assert log == [] and env.now == 10
    with pytest.raises(ValueError):
        env.run(until=10)
    with pytest.raises(TypeError):
        env.run(until=env.timeout(5))
    with pytest.raises(ValueError):
        env.call_later(-1, log.append, 0)


# --- Network -------------------------------------------------------------------------------------

def test_link_is_fifo_with_random_latency():
    env, net = make_env(latency=Uniform(dist="uniform", low=0.1, high=20))
    a, b = add_nodes(env, net, "a", "b")
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    for i in range(300):
        env.call_later(i * 100, a.send, "b", Ping(i))
    env.run(until=1_000_000)
    assert [n for _, n in log] == list(range(300))
    times = [t for t, _ in log]
    assert times == sorted(times)
    # latency really is random: without FIFO clamping some messages would overtake
    assert len(set(t - 100 * n for t, n in log)) > 50


def test_links_have_their_own_streams():
    # adding traffic on another link does not change this link's draws
    def arrivals(extra: bool) -> list[tuple[int, int]]:
        env, net = make_env(seed=9, latency=Uniform(dist="uniform", low=0.1, high=5))
        a, b, c = add_nodes(env, net, "a", "b", "c")
        log = []
        b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
        c.handle(Ping, lambda src, req_id, p: None)
        for i in range(20):
            if extra:
                env.call_later(i * 1000, a.send, "c", Ping(i))
            env.call_later(i * 1000, a.send, "b", Ping(i))
        env.run(until=1_000_000)
        return log

    assert arrivals(False) == arrivals(True)


def test_partition_holds_traffic_and_heal_retransmits_it_in_order():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    env.call_later(0, a.send, "b", Ping(1))  # on the wire when the partition starts: arrives
    env.call_later(500, net.partition, [["a"], ["b"]])
    env.call_later(600, a.send, "b", Ping(2))  # sent into the partition: held by TCP
    env.call_later(700, a.send, "b", Ping(3))
    env.call_later(2_000, net.heal)
    env.call_later(2_000, a.send, "b", Ping(4))  # new data cannot overtake the retransmission
    env.run(until=1_000_000)
    # Ping(2)'s first retransmission is one RTO after it was sent; Ping(4) queues behind it
    retransmit = 600 + TCP_RTO_MIN_US + 1_000
    assert log == [(1_000, 1), (retransmit, 2), (retransmit, 3), (retransmit, 4)]
    assert [r[3:] for r in env.tracer.of_kind(trace.NET_HELD)] == [("a", "b", "Ping")] * 2
    assert list(env.tracer.of_kind(trace.NET_DROPPED)) == []


def test_partition_keeps_the_callers_timeout():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    served, replies = [], []
    b.handle(Ping, lambda src, req_id, p: (served.append(env.now), b.reply(src, req_id, Pong(p.n))))
    net.partition([["a"], ["b"]])
    a.rpc("b", Ping(1), 100_000, lambda r: replies.append((env.now, r)))
    env.call_later(5_000_000, net.heal)  # long after the caller gave up
    env.run(until=30_000_000)
    assert replies == [(100_000, None)]  # timed out at its deadline; the late Pong is ignored
    # the request itself is retransmitted after the heal and processed: 0.2+0.4+0.8+1.6+3.2 s
    assert served == [6_200_000 + 1_000]


def test_partition_longer_than_tcp_gives_up_resets_the_connection():
    from sim.network import TCP_GIVE_UP_US

    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    served, replies = [], []
    b.handle(Ping, lambda src, req_id, p: served.append(env.now))
    net.partition([["a"], ["b"]])
    a.rpc("b", Ping(1), 2 * TCP_GIVE_UP_US, lambda r: replies.append((env.now, r)))
    env.call_later(TCP_GIVE_UP_US + 1_000_000, net.heal)
    env.run(until=3 * TCP_GIVE_UP_US)
    assert served == [] and replies == [(TCP_GIVE_UP_US + 1_000_000, CONNECT_FAILED)]


def test_reboot_resets_stale_connections_and_fails_pending_requests_at_once():
    """A host that reboots has no connections: a request pending on it (a held pull) fails as
    soon as the client sends anything else on the old connection, not at its timeout."""
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: None)  # holds every request (a long poll)
    replies, closed = [], []
    net.watch(a, "b", lambda name: closed.append((env.now, name)))
    a.rpc("b", Ping(1), 30_000_000, lambda r: replies.append((env.now, 1, r)))
    env.call_later(10_000, b.crash, True)  # power loss: nobody is told
    env.call_later(20_000, b.restart)  # host up again
    env.call_later(50_000, a.rpc, "b", Ping(2), 30_000_000, lambda r: replies.append((env.now, 2, r)))
    env.call_later(60_000, a.rpc, "b", Ping(3), 30_000_000, lambda r: replies.append((env.now, 3, r)))
    env.run(until=40_000_000)
    # Ping(2) meets the RST (one round trip): both requests on the old connection fail at once;
    # Ping(3) goes on a new connection and is held by b like any request
    assert replies == [(52_000, 1, CONNECT_FAILED), (52_000, 2, CONNECT_FAILED), (30_060_000, 3, None)]
    assert closed == [(52_000, "b")]
    assert [r[-1] for r in env.tracer.of_kind(trace.NET_DROPPED)] == ["reset"]


def test_segment_lost_to_a_powered_off_host_is_reset_at_its_retransmission():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: None)
    replies = []
    a.send("b", Ping(0))  # the connection exists
    env.call_later(10_000, b.crash, True)
    env.call_later(20_000, a.rpc, "b", Ping(1), 30_000_000, lambda r: replies.append((env.now, r)))
    env.call_later(1_000_000, b.restart)
    env.run(until=40_000_000)
    # retransmissions at 0.22, 0.62, 1.42 s: the one after the reboot (1.42 s) meets a RST
    assert replies == [(20_000 + 1_400_000 + 2_000, CONNECT_FAILED)]


def test_one_way_partition():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    a.handle(Ping, lambda src, req_id, p: log.append((env.now, "a", p.n)))
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, "b", p.n)))
    net.partition([["a"], ["b"]], one_way=True)
    a.send("b", Ping(1))
    b.send("a", Ping(2))
    env.run(until=100_000)
    assert log == [(1_000, "a", 2)]


def test_packet_loss_delays_never_loses():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    net.link("a", "b").loss_probability = 0.3
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    for i in range(200):
        env.call_later(i * 1_000, a.send, "b", Ping(i))
    env.run(until=200_000_000)
    assert [n for _, n in log] == list(range(200))  # all delivered, in order
    delays = [t - 1_000 * n for t, n in log]
    assert min(delays) == 1_000
    assert max(delays) >= 1_000 + TCP_RTO_MIN_US  # some were retransmitted
    assert list(env.tracer.of_kind(trace.NET_DROPPED)) == []


def test_send_to_down_host_dropped():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    a.send("b", Ping(1))
    env.call_later(500, b.crash)
    env.call_later(600, b.restart)
    env.run(until=100_000)
    assert log == []  # in flight to the old incarnation


def test_watch_sees_process_crash_not_power_loss():
    env, net = make_env()
    a, b, c = add_nodes(env, net, "a", "b", "c")
    log = []
    net.watch(a, "b", lambda name: log.append((env.now, name)))
    net.watch(a, "c", lambda name: log.append((env.now, name)))
    env.call_later(1_000, b.crash)
    env.call_later(1_000, c.crash, True)
    env.run(until=100_000)
    assert log == [(2_000, "b")]


def test_connection_reset_bumps_link_epoch():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    b.handle(Ping, lambda src, req_id, p: None)
    a.send("b", Ping(0))
    link = net.link("a", "b")
    assert link.epoch == link.generation == 0
    net.partition([["a"], ["b"]])
    assert link.epoch == 0 and link.cut and link.blocked  # a partition cuts, it does not reset
    net.heal()
    assert link.epoch == 0 and not link.cut and not link.blocked
    back = net.link("b", "a")
    b.crash()
    assert link.epoch == link.generation == 1 and not link.stale  # a process crash: a is told
    assert back.epoch == 0  # a crash resets only the connections *into* the crashed node


def test_delivery_after_crash_during_pause_is_not_deferred():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    a.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    b.send("a", Ping(0))  # the b→a connection exists before the pause
    env.call_later(5_000, a.pause, 30_000)  # paused until 35 ms
    env.call_later(10_000, a.crash)  # the crash ends the pause with the incarnation
    env.call_later(11_000, a.restart)  # startup_us 0: serving again at 11 ms
    env.call_later(12_000, b.send, "a", Ping(1))
    env.call_later(12_000, lambda: a.call_later(1_000, lambda: log.append((env.now, "timer"))))
    env.run(until=100_000)
    assert log == [(1_000, 0), (13_000, 1), (13_000, "timer")]


# --- Disk ----------------------------------------------------------------------------------------

def make_disk(**kw) -> tuple[SimEnv, Disk]:
    env = SimEnv()
    cfg = DiskConfig(fsync_latency_ms=2, bandwidth_bytes_per_s=1_000_000, **kw)
    return env, Disk(env, cfg, Rng(1).stream("disk"))


def test_fsync_duration_grows_with_bytes():
    env, disk = make_disk()
    assert disk.fsync_duration_us(0) == 2_000
    env.run(until=10_000)
    assert disk.fsync_duration_us(1_000) == 3_000  # 2 ms + 1000 B at 1 MB/s
    env.run(until=20_000)
    assert disk.fsync_duration_us(10_000) == 12_000


def test_fsyncs_queue_one_at_a_time():
    env, disk = make_disk()
    assert [disk.fsync_duration_us(0) for _ in range(3)] == [2_000, 4_000, 6_000]


def test_disk_slow_factor():
    env, disk = make_disk()
    disk.slow_factor = 3.0
    assert disk.fsync_duration_us(1_000) == 9_000
    env.run(until=20_000)
    disk.heal()
    assert disk.fsync_duration_us(1_000) == 3_000


def test_fsync_stall():
    env, disk = make_disk()
    env.run(until=1_000)
    disk.stall_until_us = 51_000
    assert disk.fsync_duration_us(0) == 52_000  # waits for the stall, then 2 ms
    env.run(until=60_000)
    assert disk.fsync_duration_us(0) == 2_000


# --- FaultInjector -------------------------------------------------------------------------------

def fault_timeline(env: SimEnv) -> list[tuple]:
    """The fault records so far (the kept records plus the tracer's current, unflushed chunk)."""
    kinds = {trace.FAULT_INJECTED, trace.FAULT_HEALED, trace.NODE_CRASHED, trace.NODE_RESTARTED}
    return [r for r in (*env.tracer.records, *env.tracer.chunk) if r[2] in kinds]


def test_scripted_faults_timeline():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    for n in (a, b):
        n.disk = Disk(env, DiskConfig(), env.rng.stream(f"{n.name}.disk"))
    specs = [
        FaultSpec(at_ms=100, kind="process_crash", node="b", duration_ms=50),
        FaultSpec(at_ms=20, kind="pause", node="a", duration_ms=10),
        FaultSpec(at_ms=300, kind="disk_slow", node="a", factor=4, duration_ms=100),
        FaultSpec(at_ms=500, kind="power_loss", node="b"),  # healed only by heal_all
        FaultSpec(at_ms=2_000, kind="process_crash", node="a"),  # beyond the duration: never
    ]
    inj = FaultInjector(env, net.nodes, specs, [], duration_us=1_000_000)
    inj.start()
    seen = []
    env.call_later(25_000, lambda: seen.append(("a paused", a.paused_until)))
    env.call_later(350_000, lambda: seen.append(("slow", a.disk.slow_factor)))
    env.call_later(450_000, lambda: seen.append(("slow", a.disk.slow_factor)))
    env.call_later(600_000, lambda: seen.append(("b", b.up, b.host_up)))
    env.run(until=3_000_000)
    assert fault_timeline(env) == [
        (20_000, "faults", "fault.injected", "pause", "a", "duration_ms=10.0"),
        (100_000, "b", "node.crashed", False),
        (100_000, "faults", "fault.injected", "process_crash", "b", "duration_ms=50.0"),
        (150_000, "faults", "fault.healed", "process_crash", "b", ""),
        (150_000, "b", "node.restarted", 1),
        (300_000, "faults", "fault.injected", "disk_slow", "a", "factor=4.0"),
        (400_000, "faults", "fault.healed", "disk_slow", "a", ""),
        (500_000, "b", "node.crashed", True),
        (500_000, "faults", "fault.injected", "power_loss", "b", ""),
        (1_000_000, "faults", "fault.healed", "all", "cluster", "end of fault phase"),
        (1_000_000, "b", "node.restarted", 2),
    ]
    assert seen == [("a paused", 30_000), ("slow", 4.0), ("slow", 1.0), ("b", False, False)]
    assert a.up and b.up


def test_partition_fault_with_duration_heals():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    inj = FaultInjector(env, net.nodes, [FaultSpec(at_ms=10, kind="partition", groups=[["a"], ["b"]],
                                                   duration_ms=20)], [], duration_us=1_000_000)
    inj.start()
    for i, t in enumerate((5_000, 15_000, 29_000, 30_500)):
        env.call_later(t, a.send, "b", Ping(i))
    env.run(until=2_000_000)
    # sent into the partition: retransmitted one RTO after the first send, then the new data
    assert log == [(6_000, 0), (216_000, 1), (216_000, 2), (216_000, 3)]
    injected = [r[:5] for r in env.tracer.of_kind(trace.FAULT_INJECTED)]
    assert injected == [(10_000, "faults", "fault.injected", "partition", "a|b")]
    healed = [r[:4] for r in env.tracer.of_kind(trace.FAULT_HEALED)]
    assert healed[0] == (30_000, "faults", "fault.healed", "partition")


def test_partition_heal_record_names_the_groups():
    env, net = make_env()
    add_nodes(env, net, "a", "b")
    FaultInjector(env, net.nodes, [FaultSpec(at_ms=10, kind="partition", groups=[["a"], ["b"]],
                                             duration_ms=20)], [], duration_us=1_000_000).start()
    env.run(until=100_000)
    healed = [r for r in env.tracer.of_kind(trace.FAULT_HEALED)]
    assert healed[0][4] == "a|b"


def test_link_latency_fault_adds_latency_both_ways_then_heals():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    log = []
    a.handle(Ping, lambda src, req_id, p: log.append((env.now, "a", p.n)))
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, "b", p.n)))
    spec = FaultSpec(at_ms=10, kind="link_latency", src="a", dst="b", extra_latency_ms=5, duration_ms=10)
    FaultInjector(env, net.nodes, [spec], [], duration_us=1_000_000).start()
    env.call_later(12_000, a.send, "b", Ping(1))
    env.call_later(12_000, b.send, "a", Ping(2))
    env.call_later(25_000, a.send, "b", Ping(3))
    env.run(until=100_000)
    assert log == [(18_000, "b", 1), (18_000, "a", 2), (26_000, "b", 3)]


def test_heal_all_unpauses_heals_network_and_disks():
    env, net = make_env()
    a, b = add_nodes(env, net, "a", "b")
    a.disk = Disk(env, DiskConfig(), env.rng.stream("a.disk"))
    specs = [FaultSpec(at_ms=10, kind="partition", groups=[["a"], ["b"]]),
             FaultSpec(at_ms=20, kind="disk_slow", node="a", factor=10),
             FaultSpec(at_ms=30, kind="fsync_stall", node="a", duration_ms=60_000),
             FaultSpec(at_ms=40, kind="pause", node="b", duration_ms=60_000),
             FaultSpec(at_ms=50, kind="process_crash", node="a")]
    inj = FaultInjector(env, net.nodes, specs, [], duration_us=100_000)
    inj.start()
    log = []
    b.handle(Ping, lambda src, req_id, p: log.append((env.now, p.n)))
    env.call_later(100_000, a.send, "b", Ping(1))  # after heal_all at the same time
    env.run(until=200_000)
    assert log == [(101_000, 1)]
    assert a.up and a.disk.slow_factor == 1.0 and a.disk.stall_until_us == 0 and b.paused_until == 0
    assert not any(link.cut for link in net.links.values())
    # faults scripted after heal_all are ignored
    inj.inject(FaultSpec(at_ms=150, kind="process_crash", node="b"))
    assert b.up


# --- trace digest -----------------------------------------------------------------------------
def test_digest_depends_on_values_not_object_identity():
    """Equal strings that are one object or several encode alike (pickle's memo is off)."""
    node = "".join(["broker", "-a"])  # a fresh, non-interned object each time
    shared = [(i, node, "broker.stored", "k", i * 1.5, True, None) for i in range(5000)]
    distinct = [(i, "".join(["broker", "-a"]), "broker.stored", "k", i * 1.5, True, None)
                for i in range(5000)]
    assert trace.digest(shared) == trace.digest(distinct)
    assert trace.digest(shared) != trace.digest(shared[:-1])
    assert trace.digest(shared) != trace.digest([r[:5] + (False, None) for r in shared])  # bool ≠ int
    assert trace.digest([(1, "n", "k", 1)]) != trace.digest([(1, "n", "k", 1.0)])


def test_digest_is_pinned_for_a_fixed_record_list():
    """The canonical form does not drift between Python versions or platforms."""
    records = [(0, "broker-a", "broker.registered", "namesrv"),
               (3000196, "broker-a", "broker.stored", "p-1-1", "orders", 2, 0, 0, 1182, 0),
               (5, "c-1", "consumer.consumed", "g", "p-1-1", True, None, -7, 2.5, 1 << 40)]
    assert trace.digest(records) == hashlib.sha256(trace.canonical_bytes(records)).hexdigest()
    assert trace.digest(records) == "8bcecdea9edbceb57890401f0cfcd596e294cb846efb02b49297eebfd70409cf"


# --- the kernel's SimPy internals stay in sim/ ------------------------------------------------
def test_simpy_internals_stay_inside_sim():
    import ast
    from pathlib import Path

    offenders = []
    for folder in ("models", "analysis"):
        for path in sorted((Path(REPO) / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("_queue", "_eid"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
                if isinstance(node, ast.ImportFrom | ast.Import):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    offenders += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names
                                  if n.split(".")[0] == "simpy"]
    assert offenders == []


# --- streaming Tracer -------------------------------------------------------------------------
def emit_run(keep: bool, n: int, flush_every: int | None = None) -> tuple[Tracer, list[list[tuple]], str]:
    env = SimEnv()
    tracer = Tracer(env, keep=keep)
    chunks: list[list[tuple]] = []
    tracer.observers.append(lambda chunk: chunks.append(list(chunk)))
    for i in range(n):
        tracer.emit(f"node-{i % 3}", trace.RUN_ENDED, f"phase-{i}")
        if flush_every and i % flush_every == 0:
            tracer.flush()  # a caller's flush between records: digest chunks stay exact
    return tracer, chunks, tracer.close()


def test_tracer_streams_full_chunks_to_observers_and_keeps_only_when_asked():
    n = 2 * trace.DIGEST_CHUNK + 5
    kept, chunks, digest = emit_run(True, n)
    assert [len(c) for c in chunks] == [trace.DIGEST_CHUNK, trace.DIGEST_CHUNK, 5]
    assert kept.records == [r for c in chunks for r in c] and kept.count == n
    assert kept.records[0] == (0, "node-0", trace.RUN_ENDED, "phase-0")
    assert digest == trace.digest(kept.records)
    streamed, chunks2, digest2 = emit_run(False, n)
    assert streamed.records == [] and streamed.chunk == [] and streamed.count == n
    assert chunks2 == chunks and digest2 == digest


def test_tracer_digest_does_not_depend_on_flush_timing():
    n = trace.DIGEST_CHUNK + 100
    _t, chunks, digest = emit_run(True, n, flush_every=1_000)
    assert digest == emit_run(False, n)[2]
    assert sum(len(c) for c in chunks) == n
    assert all(len(c) % trace.DIGEST_CHUNK == 0 for c in chunks[:-1])  # only the final flush is partial
    assert trace.digest(r for c in chunks for r in c) == digest  # any iterable, rechunked
