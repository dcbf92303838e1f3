"""How large a world set-up would build, estimated from a validated scenario (assembly edge).

What set-up and the first seconds of a run allocate grows with the topic routes: every client
instance (a producer or a push consumer) keeps the route of its topic, one entry per queue of
every broker group that hosts it (MessageQueue objects, per-queue tables, rebalance lists), and a
consumer also the route of its `%RETRY%` topic (one queue per group); every broker keeps its own
consume queues. Measured on the 2-core development VM (Python 3.11, compiled modules), the run's
resident memory grows by about `BYTES_PER_ENTRY` and its wall time by about `US_PER_ENTRY` per
entry, whether the clients are producers or consumers (0.33–0.45 KB an entry from 0.26 M to
1.3 M entries: 20 groups × 256 queues × 50 consumers, 50 × 256 × 100, 100 producers of 50 × 256),
while topics no client uses add almost nothing. 100 broker groups × 1,024 queues read
by 1,000 consumers are 102 M entries: about 40 GB.

`setup_problems` refuses a scenario whose estimate exceeds `limits.max_route_entries` (default
sim/limits.py: DEFAULT_MAX_ROUTE_ENTRIES), naming the estimate and the key to raise; the run
itself is bounded by memory and wall time all the same (sim/watchdog.py).
"""

from __future__ import annotations

from typing import Any

BYTES_PER_ENTRY = 420  # resident memory per route entry (module docstring)
US_PER_ENTRY = 8  # wall µs of set-up and first rebalance per route entry


def route_entries(sc: Any) -> tuple[int, str]:
    """(the estimate, where most of it comes from) for a validated Scenario."""
    groups = [b.name for b in sc.cluster.brokers]
    replicas = {b.name: 1 if b.replicas is None else len(b.replicas) for b in sc.cluster.brokers}
    hosts = {t.name: [g for g in groups if t.brokers is None or g in t.brokers] for t in sc.cluster.topics}
    per_broker = {t.name: t.queues for t in sc.cluster.topics}
    queues = {t.name: t.queues * len(hosts[t.name]) for t in sc.cluster.topics}
    readers: dict[str, int] = dict.fromkeys(queues, 0)
    total = sum(t.queues * sum(replicas[g] for g in hosts[t.name]) for t in sc.cluster.topics)  # the brokers'
    for client in (*sc.producers, *sc.consumers):
        if client.topic in readers:
            readers[client.topic] += client.count
    total += sum(readers[t] * queues[t] for t in queues)
    total += sum(c.count for c in sc.consumers) * len(groups)  # each consumer's %RETRY% route
    top = max(queues, key=lambda t: readers[t] * queues[t], default=None)
    if top is None or not readers[top]:
        return total, "the brokers' own queues"
    return total, (f"topic {top!r}: {queues[top]:,} queues ({len(hosts[top]):,} broker groups × "
                   f"{per_broker[top]:,}) in the routes of {readers[top]:,} client instances")


def setup_problems(sc: Any) -> list[str]:
    """A problem if set-up would exceed `limits.max_route_entries` (module docstring)."""
    limit = sc.limits.max_route_entries
    total, largest = route_entries(sc)
    if total <= limit:
        return []
    mb, minutes = total * BYTES_PER_ENTRY / (1 << 20), total * US_PER_ENTRY / 60e6
    return [f"(top level): set-up would build about {total:,} route entries ({largest}; about {mb:,.0f} MB "
            f"and {minutes:,.1f} min of set-up), above limits.max_route_entries ({limit:,}); if that is meant, "
            f"raise it in the scenario's limits section (limits: {{max_route_entries: ...}})"]
