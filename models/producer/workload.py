"""The application in front of a producer: an arrival process, message sizes, tags and keys.

Arrivals are open-loop (`poisson` or `constant` gaps at `rate_per_s`), so a slow broker does
not slow the offered load, as with many independent request threads. Each message gets a uniq
key `<producer>-<n>` (deterministic stand-in for MessageClientIDSetter's 32 hex chars), a body
size drawn from `message_bytes`, a tag drawn uniformly from `tags`, and, with `keys` > 0, a
sharding key `k<i>` (the message's KEYS) used by the order checker.
"""

from __future__ import annotations

from typing import Any

from models.message import NEW_MESSAGE_DEFAULTS, new_message
from models.producer.producer import Producer
from sim.dist import Exponential, index_sampler


class Workload:
    def __init__(self, producer: Producer, topic: str, rate_per_s: float, arrival: str,
                 message_bytes: Any, tags: list[str], keys: int, start_us: int, stop_us: int) -> None:
        self.producer = producer
        self.node = producer.node
        self.topic = topic
        self.mean_gap_us = 1_000_000 / rate_per_s
        self.poisson = arrival == "poisson"
        self.message_bytes = message_bytes
        self.tags = tags
        self.keys = keys
        self.start_us, self.stop_us = start_us, stop_us
        self.stream = self.node.env.rng.stream(f"{self.node.name}.workload")
        self.body_bytes = message_bytes.sampler_int(self.stream)
        self.poisson_gap_us = Exponential(dist="exponential", mean=self.mean_gap_us / 1000).sampler_us(self.stream)
        self.tag_index = index_sampler(self.stream, len(tags)) if tags else None
        self.shard_index = index_sampler(self.stream, keys) if keys else None
        self.seq = 0
        self.node.on_start(self._schedule_first)

    def _schedule_first(self) -> None:
        now = self.node.env._now
        self.node.call_later(max(0, self.start_us - now), self._arrive)

    def _gap_us(self) -> int:
        if self.poisson:
            return max(1, self.poisson_gap_us())
        return max(1, int(self.mean_gap_us))

    def _arrive(self) -> None:
        now = self.node.env._now
        if now >= self.stop_us:
            return
        self.seq += 1
        tag = self.tags[self.tag_index()] if self.tags else None
        shard = f"k{self.shard_index()}" if self.keys else ""
        msg = new_message((f"{self.node.name}-{self.seq}", self.topic, tag, shard or None,
                           self.body_bytes(), now, self.node.name) + NEW_MESSAGE_DEFAULTS)
        self.producer.send(msg, shard)
        self.node.call_later(self._gap_us(), self._arrive)
