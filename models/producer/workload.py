"""The application in front of a producer: an arrival process, message sizes, tags and keys.

Arrivals are open-loop (`poisson` or `constant` gaps at `rate_per_s`, per producer instance), so
a slow broker does not slow the offered load, as with many independent request threads. Each
message gets the integer id `producer_index << 32 | seq` (models/message.py; its display key is
`<producer>-<seq>`), a body size drawn from `message_bytes`, a tag drawn uniformly from `tags`,
and, with `keys` > 0, a sharding key index (the KEYS property `k<i>`) used by the order checker.
The encoded record size is computed here once per message, as the client encodes it once.
"""

from __future__ import annotations

from typing import Any

from models.message import SEQ_BITS, new_message, record_bytes
from models.producer.producer import Producer
from sim.dist import Constant, Exponential, index_sampler


class Workload:
    def __init__(self, producer: Producer, producer_index: int, topic: str, rate_per_s: float, arrival: str,
                 message_bytes: Any, tags: list[str], keys: int, start_us: int, stop_us: int) -> None:
        self.producer = producer
        self.node = producer.node
        self.topic = topic
        self.id_base = producer_index << SEQ_BITS
        self.mean_gap_us = 1_000_000 / rate_per_s
        self.poisson = arrival == "poisson"
        self.tags = tags
        self.keys = keys
        self.start_us, self.stop_us = start_us, stop_us
        self.stream = self.node.env.rng.stream(f"{self.node.name}.workload")
        # the draws come in blocks (sim/dist.py block_sampler), last draw first: `_arrive` pops
        self._body_block = message_bytes.block_sampler(self.stream, 1)
        gap = Exponential(dist="exponential", mean=self.mean_gap_us / 1000) if self.poisson else \
            Constant(value=self.mean_gap_us / 1000)
        self._gap_block = gap.block_sampler(self.stream, 1000)
        self._tag_block = index_sampler(self.stream, len(tags), blocks=True) if tags else None
        self._shard_block = index_sampler(self.stream, keys, blocks=True) if keys else None
        self._bodies: list[int] = []
        self._gaps: list[int] = []
        self._tags: list[int] = []
        self._shards: list[int] = []
        # record size without the body, per tag (index -1: no tags)
        self.header_bytes = {i: record_bytes(topic, 0, tag) for i, tag in enumerate(tags)}
        self.header_bytes[-1] = record_bytes(topic, 0)
        self.seq = 0
        self.node.on_start(self._schedule_first)

    def _schedule_first(self) -> None:
        now = self.node.env._now
        self.node.call_later(max(0, self.start_us - now), self._arrive)

    def _arrive(self) -> None:
        """One message arrives from the application: draw it, send it, schedule the next."""
        node = self.node
        now = node.env._now
        if now >= self.stop_us:
            return
        self.seq = seq = self.seq + 1
        draws = self._bodies
        body = draws.pop() if draws else self._refill(draws, self._body_block)
        size = body
        tag = shard = None
        if self._tag_block is not None:
            draws = self._tags
            tag_i = draws.pop() if draws else self._refill(draws, self._tag_block)
            tag = self.tags[tag_i]
            size += self.header_bytes[tag_i]
        else:
            size += self.header_bytes[-1]
        if self._shard_block is not None:
            draws = self._shards
            shard = draws.pop() if draws else self._refill(draws, self._shard_block)
            size += 7 + len(str(shard))  # KEYS=k<shard>
        self.producer.send(new_message((self.id_base | seq, self.topic, tag, -1 if shard is None else shard, body,
                                        now, size, 0, 0, None)))
        draws = self._gaps
        gap = draws.pop() if draws else self._refill(draws, self._gap_block)
        node.call_later(gap if gap > 0 else 1, self._arrive)

    @staticmethod
    def _refill(draws: list[int], block: Any) -> int:
        """The next draw of an exhausted buffer (the buffer gets the rest of a new block)."""
        draws += block()
        return draws.pop()
