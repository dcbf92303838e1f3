"""Which latency distribution a directed link takes (sim/network.py, Network.link): the link's own
(`links:` in a scenario, Network.set_link_latency) for that direction only, else its zone pair's,
else the default; an override given after the link exists replaces its distribution."""

from __future__ import annotations

from sim.dist import Constant
from sim.env import SimEnv
from sim.network import Network
from sim.node import Node
from sim.rng import Rng
from sim.trace import Tracer

DEFAULT, CROSS_ZONE, A_TO_B, LATE = (Constant(value=v) for v in (0.5, 2.0, 7.0, 9.0))


def _network() -> Network:
    env = SimEnv()
    env.rng = Rng(1)
    env.tracer = Tracer(env)
    net = Network(env, DEFAULT)
    for name, zone in (("a", "z1"), ("b", "z2"), ("c", "z1")):
        net.add_node(Node(env, name, zone))
    net.set_zone_latency("z1", "z2", CROSS_ZONE)
    return net


def test_a_links_own_latency_wins_over_its_zones_for_its_direction_only() -> None:
    net = _network()
    net.set_link_latency("a", "b", A_TO_B)  # before the link exists
    assert net.link("a", "b").dist is A_TO_B
    assert net.link("b", "a").dist is CROSS_ZONE  # the other direction keeps its zones'
    assert net.link("c", "b").dist is CROSS_ZONE and net.link("a", "c").dist is DEFAULT


def test_an_override_after_the_link_exists_replaces_its_distribution() -> None:
    net = _network()
    assert net.link("c", "b").dist is CROSS_ZONE
    net.set_link_latency("c", "b", LATE)
    assert net.link("c", "b").dist is LATE and net.link("b", "c").dist is CROSS_ZONE
    assert net.link("c", "b").sample_us() == 9_000
