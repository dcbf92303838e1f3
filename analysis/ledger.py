"""The run's ground truth as compact arrays, fed record chunks as they are emitted.

The checkers of Maelstrom's queue vocabulary (lost, duplicated, reordered) need, per message,
only a few facts; the `Ledger` keeps exactly those, in arrays indexed by the message's sequence
number, one set per producer (message ids are `producer_index << 32 | seq`, models/message.py):

- per message: the first attempt's time (`born_us`), the send outcome (SEND_OK, another store
  status, failed, oneway) and how many copies the brokers stored under the user topic;
- per consumption *unit* (a consumer group; each member of a BROADCASTING group is its own unit)
  and message: the first successful consumption time, the number of successful consumptions,
  and whether the message went down the retry path (a failed consumption) or to the DLQ.

That is about 10 bytes a message plus 11 per consumed message and unit, instead of the records
themselves. `Tracer` hands each chunk of records to `feed`; `results()` computes every metric at
the end with NumPy over the arrays (see `results` for the definitions).
"""

from __future__ import annotations

import itertools
from array import array
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from models.records import BROKER_STORED, CONSUMER_CONSUMED, PRODUCER_SEND_FAILED, PRODUCER_SENT

SEQ_BITS = 32  # message ids: producer index << 32 | seq (models/message.py)
SEQ_MASK = (1 << SEQ_BITS) - 1
GROW = 4096  # arrays grow in steps of this many messages

# send outcome bits (per message)
ACKED, NOT_OK, FAILED, ONEWAY = 1, 2, 4, 8
# retry path (per unit and message)
IN_RETRY, IN_DLQ = 1, 2
INTERNAL_TOPIC_PREFIXES = ("%", "SCHEDULE_", "RMQ_SYS")
DLQ_PREFIX = "%DLQ%"
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))
DELIVERY_COUNT_CAP = 10  # delivery-count histograms put 10 and more in the last bin
LOST_SAMPLE = 10
_KIND = itemgetter(2)
# (kind, handler, the record positions it reads); a kind's code is its index here
_HANDLED = ((PRODUCER_SENT, "_sent", (3, 5, 8, 9, 10)), (BROKER_STORED, "_stored", (3, 4, 9)),
            (CONSUMER_CONSUMED, "_consumed", (0, 1, 3, 4, 9)), (PRODUCER_SEND_FAILED, "_send_failed", (3, 6, 8)))
_KIND_CODES = {kind: code for code, (kind, _h, _c) in enumerate(_HANDLED)}
_NO_CODES = itertools.repeat(-1)


def display_key(msg_id: int, producer_names: list[str]) -> str:
    """The key a person reads for a message id: `<producer node>-<seq>` (models/message.py)."""
    return f"{producer_names[msg_id >> SEQ_BITS]}-{msg_id & SEQ_MASK}"


@dataclass
class ProducerInfo:
    name: str
    topic: str


@dataclass
class _Unit:
    """Per-message consumption facts of one unit, arrays per producer index."""

    name: str
    group: str
    topic: str | None  # None: a group the scenario does not subscribe (judged against no topic)
    orderly: bool
    first_ok_us: list[array] = field(default_factory=list)
    ok_count: list[array] = field(default_factory=list)
    retry: list[bytearray] = field(default_factory=list)
    attempts: int = 0


def _saturating_add(counts: np.ndarray, index: np.ndarray, cap: int) -> None:
    """counts[i] += (occurrences of i in index), capped at `cap` (duplicates in `index` count)."""
    where, times = np.unique(index, return_counts=True)
    counts[where] = np.minimum(counts[where].astype(np.int64) + times, cap)


def _grow(arr: Any, seq: int, fill: int) -> None:
    """Make `arr[seq]` valid (new slots hold `fill`)."""
    missing = seq + GROW - len(arr)
    arr.extend(array(arr.typecode, [fill]) * missing if isinstance(arr, array) else bytes([fill]) * missing)


class Ledger:
    warmup_us = 0  # messages born before this are left out of latency statistics (analysis/checks.py)

    def __init__(self, producers: list[ProducerInfo], subscriptions: dict[str, str],
                 broadcasting: tuple[str, ...] = (), orderly: tuple[str, ...] = (),
                 members: dict[str, list[str]] | None = None) -> None:
        """`subscriptions`: group → topic; `members`: group → its consumer node names (needed
        for broadcasting groups, judged per member)."""
        self.producers = producers
        self.subscriptions = subscriptions
        self.broadcasting = frozenset(broadcasting)
        self.orderly = frozenset(orderly)
        n = len(producers)
        self.born_us = [array("q") for _ in range(n)]
        self.state = [bytearray() for _ in range(n)]
        self.copies = [bytearray() for _ in range(n)]
        self.shard = [array("i") for _ in range(n)] if self.orderly else None
        self.top_seq = [0] * n
        self.units: dict[str, _Unit] = {}
        self.counts = {"sent_attempts": 0, "sent_ok": 0, "sent_not_ok": 0, "send_failed": 0, "stored": 0}
        for group, topic in subscriptions.items():
            if group in self.broadcasting:
                for member in (members or {}).get(group, []):
                    self._add_unit(f"{group}/{member}", group, topic)
            else:
                self._add_unit(group, group, topic)

    def _add_unit(self, name: str, group: str, topic: str | None) -> _Unit:
        n = len(self.producers)
        unit = _Unit(name, group, topic, group in self.orderly, [array("q") for _ in range(n)],
                     [array("H") for _ in range(n)], [bytearray() for _ in range(n)])
        self.units[name] = unit
        return unit

    # --- streaming --------------------------------------------------------------------------
    def feed(self, chunk: list[tuple]) -> None:
        """A Tracer chunk observer: update the arrays from one chunk of records, kind by kind, with
        NumPy (the records of a kind are gathered, and the columns a handler reads extracted, in C)."""
        codes = np.fromiter(map(_KIND_CODES.get, map(_KIND, chunk), _NO_CODES), np.int8, len(chunk))
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes + 1, minlength=len(_HANDLED) + 1)
        start = int(counts[0])  # records of kinds the ledger does not read sort first (code -1)
        for code, (_kind, handler, columns) in enumerate(_HANDLED):
            n = int(counts[code + 1])
            if n:
                index = order[start:start + n].tolist()
                records = itemgetter(*index)(chunk) if n > 1 else (chunk[index[0]],)
                getattr(self, handler)({c: list(map(itemgetter(c), records)) for c in columns})
                start += n

    def _grow_messages(self, p: int, top: int) -> None:
        if top >= len(self.state[p]):
            _grow(self.born_us[p], top, -1)
            _grow(self.state[p], top, 0)
            _grow(self.copies[p], top, 0)
            if self.shard is not None:
                _grow(self.shard[p], top, -1)
        if top > self.top_seq[p]:
            self.top_seq[p] = top

    def _by_producer(self, ids: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(producer index, selector, sequence numbers) for each producer among `ids`, with the
        producer's message arrays grown to hold them."""
        producers = ids >> SEQ_BITS
        first, last = int(producers.min()), int(producers.max())
        groups = [(first, slice(None))] if first == last else \
            [(int(p), producers == p) for p in np.unique(producers)]
        out = []
        for p, sel in groups:
            seqs = ids[sel] & SEQ_MASK
            self._grow_messages(p, int(seqs.max()))
            out.append((p, sel, seqs))
        return out

    def _sent(self, cols: dict[int, list]) -> None:
        # (t, node, kind, msg_id, topic, shard, broker, queue_id, status, attempts, born_us)
        ids, status = np.array(cols[3], np.int64), np.array(cols[8], object)
        ok = status == "SEND_OK"
        n_ok = int(ok.sum())
        self.counts["sent_attempts"] += sum(cols[9])
        self.counts["sent_ok"] += n_ok
        self.counts["sent_not_ok"] += len(ids) - n_ok
        bits = np.where(ok, ACKED, np.where(status == "ONEWAY", ONEWAY, NOT_OK)).astype(np.uint8)
        born, shard = np.array(cols[10], np.int64), np.array(cols[5], np.int32)
        for p, sel, seqs in self._by_producer(ids):
            np.frombuffer(self.born_us[p], np.int64)[seqs] = born[sel]
            np.bitwise_or.at(np.frombuffer(self.state[p], np.uint8), seqs, bits[sel])
            if self.shard is not None:
                np.frombuffer(self.shard[p], np.int32)[seqs] = shard[sel]

    def _send_failed(self, cols: dict[int, list]) -> None:
        # (t, node, kind, msg_id, topic, shard, attempts, reason, born_us)
        ids = np.array(cols[3], np.int64)
        self.counts["sent_attempts"] += sum(cols[6])
        self.counts["send_failed"] += len(ids)
        born = np.array(cols[8], np.int64)
        for p, sel, seqs in self._by_producer(ids):
            np.frombuffer(self.born_us[p], np.int64)[seqs] = born[sel]
            np.bitwise_or.at(np.frombuffer(self.state[p], np.uint8), seqs, FAILED)

    def _stored(self, cols: dict[int, list]) -> None:
        # (t, node, kind, msg_id, topic, queue_id, queue_offset, phys_offset, size_bytes, reconsume_times)
        ids, topics = np.array(cols[3], np.int64), np.array(cols[4], object)
        first_copy = np.array(cols[9], np.int64) == 0
        for topic in dict.fromkeys(cols[4]):
            of_topic = topics == topic
            if topic.startswith(DLQ_PREFIX):
                self._mark_dlq(ids[of_topic], topic[len(DLQ_PREFIX):])
            elif not topic.startswith(INTERNAL_TOPIC_PREFIXES):
                self._count_copies(ids[of_topic & first_copy])

    def _count_copies(self, ids: np.ndarray) -> None:
        if not len(ids):
            return
        self.counts["stored"] += len(ids)
        for p, _sel, seqs in self._by_producer(ids):
            _saturating_add(np.frombuffer(self.copies[p], np.uint8), seqs, 255)

    def _unit_arrays(self, unit: _Unit, p: int, top: int) -> None:
        if top >= len(unit.ok_count[p]):
            _grow(unit.first_ok_us[p], top, -1)
            _grow(unit.ok_count[p], top, 0)
            _grow(unit.retry[p], top, 0)

    def _consumed(self, cols: dict[int, list]) -> None:
        # (t, node, kind, group, msg_id, topic, broker, queue_id, queue_offset, ok, reconsume_times)
        groups = np.array(cols[3], object)
        nodes = np.array(cols[1], object)
        for group in dict.fromkeys(cols[3]):
            of_group = groups == group
            if group not in self.broadcasting:
                self._consumed_by(self._unit(group, group), cols, of_group, True)
                continue
            for node in dict.fromkeys(nodes[of_group].tolist()):
                unit = self._unit(f"{group}/{node}", group)
                self._consumed_by(unit, cols, of_group & (nodes == node), False)

    def _unit(self, name: str, group: str) -> _Unit:
        """The unit `name`; a group that consumes without a subscription in the scenario is judged
        against no topic (nothing can be lost to it; its duplicates still count)."""
        unit = self.units.get(name)
        return unit if unit is not None else self._add_unit(name, group, self.subscriptions.get(group))

    def _consumed_by(self, unit: _Unit, cols: dict[int, list], sel: np.ndarray, clustering: bool) -> None:
        ids = np.array(cols[4], np.int64)[sel]
        ok = np.array(cols[9], bool)[sel]
        times = np.array(cols[0], np.int64)[sel]
        unit.attempts += len(ids)
        for p, psel, seqs in self._by_producer(ids):
            self._unit_arrays(unit, p, int(seqs.max()))
            p_ok, p_times = ok[psel], times[psel]
            done = seqs[p_ok]
            if len(done):
                first_of, where = np.unique(done, return_index=True)
                first = np.frombuffer(unit.first_ok_us[p], np.int64)
                new = first[first_of] == -1
                first[first_of[new]] = p_times[p_ok][where[new]]  # records are in time order
                _saturating_add(np.frombuffer(unit.ok_count[p], np.uint16), done, 65535)
            failed = seqs[~p_ok]
            if clustering and len(failed):  # a failed clustering consumption goes down the retry path
                retry = np.frombuffer(unit.retry[p], np.uint8)
                retry[failed] = np.maximum(retry[failed], IN_RETRY)

    def _mark_dlq(self, ids: np.ndarray, group: str) -> None:
        unit = self.units.get(group)
        if unit is None or not len(ids):
            return
        for p, _sel, seqs in self._by_producer(ids):
            self._unit_arrays(unit, p, int(seqs.max()))
            np.frombuffer(unit.retry[p], np.uint8)[seqs] = IN_DLQ

    # --- results ----------------------------------------------------------------------------
    def results(self, details: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every metric of the run (see checks.py for the definitions); with a `details` dict,
        also the per-message facts sweeps and reports use (latency samples, delivery counts)."""
        from analysis.checks import judge_units

        return judge_units(self, details)
