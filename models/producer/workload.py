"""The application in front of a producer: arrivals, message sizes, tags, keys, delay, batches.

Arrivals are open-loop and per producer instance (`rate_per_s` is each instance's rate), so a slow
broker does not slow the offered load, as with many independent request threads:

- `constant`: one message every 1/rate;
- `poisson`: exponential gaps of mean 1/rate;
- `bursts`: `burst_size` messages at one instant, bursts at Poisson times (mean rate `rate_per_s`);
- `on_off`: Poisson arrivals at `rate_per_s` during on periods, none during off periods, their
  lengths drawn from `on_ms` and `off_ms` (mean rate = rate × on / (on + off)), starting on.

Each message gets the integer id `producer_index << 32 | seq` (models/message.py; its display key is
`<producer>-<seq>`), a body size drawn from `message_bytes`, a tag drawn uniformly from `tags`,
a KEYS property whose length is drawn from `key_bytes` if given, and the delay level
`delay_level` (0: none). Sharding keys are drawn only for orderly sends (a `hash` selector:
`send_mode: ORDERLY` or `selector: hash`): index `i` in [0, keys) with Zipf skew `key_skew`
(P(i) ∝ 1/(i+1)^skew; 0 = uniform), carried as the KEYS property `k<i>` (unless `key_bytes` sets
the length) and as the selector's argument. With `batch_size` > 1, every `batch_size`-th arrival
sends the last `batch_size` messages as one MessageBatch. A message is born (its `born_us`) when
the application calls send(), as RocketMQ's bornTimestamp. The encoded record size is computed
here once per message, as the client encodes it once.
"""

# compiled with Cython: the C declarations of this module's classes are in workload.pxd beside it

from __future__ import annotations

from typing import Any

from models.message import PROPERTY_TIMER_DELIVER_MS, SEQ_BITS, new_message, properties_bytes, record_bytes
from models.producer.config import ProducerSpec
from models.producer.producer import Producer, batch_of
from sim.dist import Constant, Exponential, index_sampler, zipf_index_sampler
from sim.env import Clock
from sim.node import Node

# a delivery-time property's bytes in the record (TIMER_DELIVER_MS=<13-digit ms>)
TIMER_PROPERTY_BYTES = properties_bytes(None, 0, {PROPERTY_TIMER_DELIVER_MS: 10**12}) - properties_bytes(None, 0, None)


class Workload:
    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("_arrive_bound", "_bodies", "_body_block", "_gap_block", "_gaps", "_key_len", "_off_us", "_on_us",
                 "_deliver", "_shard_block", "_shards", "_tag_block", "_tags", "batch_size", "burst", "clock", "delay_level",
                 "header_bytes", "id_base", "node", "on_off", "on_until_us", "pending", "producer", "seq", "single",
                 "start_us", "stop_us", "stream", "tags", "topic")

    def __init__(self, producer: Producer, producer_index: int, spec: ProducerSpec, start_us: int,
                 stop_us: int) -> None:
        """`spec`: a producer entry of the scenario (config.py's ProducerSpec)."""
        self.producer: Producer = producer
        self.node: Node = producer.node
        node = self.node
        self.clock: Clock = node.env.clock
        self.topic = topic = spec.topic
        self.id_base = producer_index << SEQ_BITS
        self.tags = spec.tags
        self.delay_level = spec.delay_level
        self.batch_size = spec.batch_size
        self.burst = spec.burst_size if spec.arrival == "bursts" else 1
        self.start_us, self.stop_us = start_us, stop_us
        self.stream = stream = node.env.rng.stream(f"{node.name}.workload")
        # the draws come in blocks (sim/dist.py block_sampler), last draw first: `_message` pops
        self._body_block = spec.message_bytes.block_sampler(stream, 1)
        mean_gap_ms = 1000 * self.burst / spec.rate_per_s
        gap = Constant(value=mean_gap_ms) if spec.arrival == "constant" else \
            Exponential(dist="exponential", mean_value=mean_gap_ms)
        self._gap_block = gap.block_sampler(stream, 1000)
        self._tag_block = index_sampler(stream, len(self.tags), blocks=True) if self.tags else None
        orderly = spec.send_mode == "ORDERLY" or spec.selector == "hash"
        self._shard_block = None
        if orderly and spec.keys:
            self._shard_block = zipf_index_sampler(stream, spec.keys, spec.key_skew) if spec.key_skew else \
                index_sampler(stream, spec.keys, blocks=True)
        self._key_len = spec.key_bytes.sampler_int(stream) if spec.key_bytes is not None else None
        # a timer message's delivery time (ms after send, drawn from a stream of its own)
        self._deliver = None if spec.deliver_time_ms is None else \
            spec.deliver_time_ms.sampler_us(node.env.rng.stream(f"{node.name}.timer"))
        self.on_off = spec.arrival == "on_off"
        if self.on_off:
            self._on_us, self._off_us = spec.on_ms.sampler_us(stream), spec.off_ms.sampler_us(stream)
        self.on_until_us = 0
        self._bodies: list[int] = []
        self._gaps: list[int] = []
        self._tags: list[int] = []
        self._shards: list[int] = []
        # record size without the body, per tag (index -1: no tags); a delay level adds DELAY=<level>
        extra = 0 if not self.delay_level else 7 + len(str(self.delay_level))
        self.header_bytes = {i: record_bytes(topic, 0, tag) + extra for i, tag in enumerate(self.tags)}
        self.header_bytes[-1] = record_bytes(topic, 0) + extra
        self.seq = 0
        self.pending = 0  # arrivals waiting for their batch
        self.single = self.burst == 1 and self.batch_size == 1 and self._shard_block is None and \
            self._key_len is None and self._deliver is None
        # bound once: reading a method off `self` makes a new bound-method object each time
        self._arrive_bound = self._arrive
        node.on_start(self._schedule_first)

    def _schedule_first(self) -> None:
        now = self.clock.now_us
        first = max(now, self.start_us)
        if self.on_off:
            self.on_until_us = first + self._on_us()
        self.node.call_later(first - now, self._arrive)

    def _arrive(self) -> None:
        """Messages arrive from the application: send them, schedule the next arrival."""
        node = self.node
        now = self.clock.now_us
        if now >= self.stop_us:
            return
        send = self.producer.send
        if self.single:  # one message per arrival: `_message` inlined (the hot path)
            self.seq = seq = self.seq + 1
            draws = self._bodies
            body = draws.pop() if draws else self._refill(draws, self._body_block)
            tag = None
            if self._tag_block is not None:
                draws = self._tags
                tag_i = draws.pop() if draws else self._refill(draws, self._tag_block)
                tag = self.tags[tag_i]
                size = body + self.header_bytes[tag_i]
            else:
                size = body + self.header_bytes[-1]
            send(new_message((self.id_base | seq, self.topic, tag, -1, body, now, size, 0, self.delay_level, None)))
        elif self.batch_size == 1:
            for _ in range(self.burst):
                send(self._message(now))
        else:
            self.pending += self.burst
            while self.pending >= self.batch_size:
                self.pending -= self.batch_size
                send(batch_of([self._message(now) for _ in range(self.batch_size)]))
        draws = self._gaps
        gap = draws.pop() if draws else self._refill(draws, self._gap_block)
        if gap <= 0:
            gap = 1
        if self.on_off and now + gap > self.on_until_us:
            gap = self._next_on_period(now)
        node.call_later(gap, self._arrive_bound)

    def _next_on_period(self, now: int) -> int:
        """The gap to the first arrival of the next on period (Poisson: a fresh gap after its start)."""
        start = self.on_until_us
        while True:
            start += self._off_us()
            self.on_until_us = start + self._on_us()
            draws = self._gaps
            gap = max(1, draws.pop() if draws else self._refill(draws, self._gap_block))
            if start + gap <= self.on_until_us:
                return start + gap - now
            start = self.on_until_us

    def _message(self, now: int) -> Any:
        self.seq = seq = self.seq + 1
        draws = self._bodies
        body = draws.pop() if draws else self._refill(draws, self._body_block)
        size = body
        tag = None
        shard = -1
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
            if self._key_len is None:
                size += 7 + len(str(shard))  # KEYS=k<shard>
        if self._key_len is not None:
            size += 6 + self._key_len()  # KEYS=<key_bytes>
        props = None
        if self._deliver is not None:  # Message.setDeliverTimeMs: a property (its bytes in the record)
            props = {PROPERTY_TIMER_DELIVER_MS: now + self._deliver()}
            size += TIMER_PROPERTY_BYTES
        return new_message((self.id_base | seq, self.topic, tag, shard, body, now, size, 0, self.delay_level, props))

    @staticmethod
    def _refill(draws: list[int], block: Any) -> int:
        """The next draw of an exhausted buffer (the buffer gets the rest of a new block)."""
        draws += block()
        return draws.pop()
