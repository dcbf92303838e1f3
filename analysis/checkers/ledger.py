"""The run's ground truth as compact arrays, fed record chunks as they are emitted.

The checkers of Maelstrom's queue vocabulary (lost, duplicated, reordered) need, per message,
only a few facts; the `Ledger` keeps exactly those, in arrays indexed by the message's sequence
number, one set per producer (message ids are `producer_index << 32 | seq`, models/message.py):

- per message: the send() call's time (`born_us`), the send outcome (SEND_OK, another store
  status, failed, oneway), whether it was parked by its send — in SCHEDULE_TOPIC_XXXX (a delay
  level) or in rmq_sys_wheel_timer (a 5.x timer message) — and whether twice, whether the timer
  put it back into its real topic once or more (`timer.delivered`: the duplicate cause
  `timer_redelivered`), how many copies the brokers stored under the user topic and when the
  first was stored;
- per message: its send latency (RT = outcome time - born_us) when the send returned a result
  (not ONEWAY, not failed), 4 bytes; per run, counts of send outcomes by status, by failure
  reason, by broker and second of birth (the per-broker send share), retried and steered-away
  sends, and (for a run showing progress) the running count, sum and maximum of send RTs (the
  progress line's Max/Average RT);
- per consumption *unit* (a consumer group; each member of a BROADCASTING group is its own unit)
  and message: the first successful consumption time, the number of successful consumptions,
  whether the message went down the retry path (a failed consumption) or to the DLQ, and the
  stored copy and consumer of the first consumption (duplicate causes).

That is 14 bytes a message (the two times take 4 bytes each while they fit, analysis/checkers/time_column.py;
4 more with an orderly group: the sharding key) plus 21 per consumed message and unit, instead of
the records themselves. The facts behind loss causes arrive only with faults and are kept sparse, by message
id: copies a fault destroyed on a master (`commit_log.destroyed`: the fault — or
`failover_truncated`, a broker rejoining as a slave that cut its CommitLog to the epochs'
consistent point —, whether the group
had slaves and whether one held the copy; a user-topic copy, or the rmq_sys_wheel_timer copy of
a timer message the timer had not put back), a group's retry-path copy destroyed and not stored
again since, and messages stored at a queue offset reused after a truncation
(`consume_queue.offset_reused`). `Tracer` hands each chunk of records to `feed`; `results()` computes every metric at
the end with NumPy over the arrays (see `results` for the definitions).
"""

# compiled with Cython: the C declarations of this module's classes are in ledger.pxd beside it

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import cython
import numpy as np

from analysis.checkers.ledger_codes import (
    ACKED,
    DESTROYED_CRASH,
    DESTROYED_EXPIRED,
    DESTROYED_FAILOVER,
    DESTROYED_FSYNC_ERROR,
    DESTROYED_POWER,
    FAILED,
    GROUP_HAS_REPLICAS,
    IN_DLQ,
    IN_RETRY,
    NO_RT,
    NOT_OK,
    ONEWAY,
    PARKED_TWICE,
    REPLICATED,
    RT_CAP_US,
    SCHEDULED,
    SEQ_BITS,
    SEQ_MASK,
    TIMER_ONCE,
    TIMER_TWICE,
)
from analysis.checkers.ledger_codes import display_key as display_key  # re-exported: readers of the ledger's ids
from analysis.checkers.metrics import DELIVERY_COUNT_CAP as DELIVERY_COUNT_CAP  # re-exported: the ledger's tests
from analysis.checkers.metrics import judge_units
from analysis.checkers.send_failures import SendFailures
from analysis.checkers.time_column import TimeColumn
from models.records import (
    BROKER_LOCK_GRANTED,
    BROKER_OFFSET_BEHIND_REPLICA,
    BROKER_OFFSET_ROLLED_BACK,
    BROKER_ROLE,
    BROKER_STORED,
    COMMIT_LOG_DESTROYED,
    CONSUMER_CONSUMED,
    CONSUMER_OFFSET_MOVED,
    CONSUMER_PULL_FAILED,
    CONSUMER_QUEUE_DROPPED,
    CONSUMER_QUEUE_STARTED,
    CONSUMER_REBALANCED,
    CONSUMER_SHUTDOWN,
    CONTROLLER_ELECTED,
    NAMESRV_BROKER_UNREGISTERED,
    OFFSET_REUSED,
    POP_ACK_FAILED,
    POP_ACK_LATE,
    POP_ORDER_REDELIVERED,
    POP_REVIVED,
    PRODUCER_ROUTE_UPDATED,
    PRODUCER_SEND_FAILED,
    PRODUCER_SENT,
    TIMER_DELIVERED,
)
from sim.trace import NODE_CRASHED, NODE_RESTARTED

GROW = 4096  # arrays grow in steps of this many messages
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC (5.x; models/message.py has it too)
PARKING_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)  # where a send parks a message until its delivery time
RETRY_PREFIX = "%RETRY%"
SCHEDULE_PREFIX = "SCHEDULE_"
# system topics (TopicValidator): not user topics; the timer's is lower case (rmq_sys_wheel_timer)
INTERNAL_TOPIC_PREFIXES = ("%", "SCHEDULE_", "RMQ_SYS", "rmq_sys_", "TRANS_CHECK_MAX_TIME_TOPIC")
DLQ_PREFIX = "%DLQ%"
_KIND = itemgetter(2)
_MSG_ID = itemgetter(3)
# (kind, handler, the record positions it reads; () for a handler given the records whole); a kind's code is its index here
_HANDLED = ((PRODUCER_SENT, "_sent", (0, 3, 5, 6, 8, 9, 10, 11)), (BROKER_STORED, "_stored", (0, 3, 4, 9)),
            (CONSUMER_CONSUMED, "_consumed", (0, 1, 3, 4, 6, 7, 8, 9, 10)),
            (PRODUCER_SEND_FAILED, "_send_failed", (3, 6, 7, 8, 10)),
            (COMMIT_LOG_DESTROYED, "_destroyed", (3, 4, 7, 8, 9)), (OFFSET_REUSED, "_reused", (3, 4)),
            # rare ownership facts, kept whole for the duplicate causes (analysis/checkers/duplicates.py)
            (CONSUMER_QUEUE_STARTED, "_event", ()), (CONSUMER_QUEUE_DROPPED, "_event", ()),
            (CONSUMER_SHUTDOWN, "_event", ()), (NODE_CRASHED, "_event", ()),
            (CONSUMER_OFFSET_MOVED, "_event", ()), (BROKER_OFFSET_ROLLED_BACK, "_event", ()),
            (CONSUMER_REBALANCED, "_event", ()), (BROKER_LOCK_GRANTED, "_event", ()),
            (BROKER_OFFSET_BEHIND_REPLICA, "_event", ()),
            # POP facts (5.x): revivals, late and failed acks, kept whole for the duplicate causes
            (POP_REVIVED, "_event", ()), (POP_ACK_LATE, "_event", ()), (POP_ACK_FAILED, "_event", ()),
            (POP_ORDER_REDELIVERED, "_event", ()),
            # per-message timer facts, not kept: `_event` turns them into state bits
            (TIMER_DELIVERED, "_event", ()),
            # master availability facts: only mark the chunk for `rare_observers` (with NODE_CRASHED)
            (NODE_RESTARTED, "_ignore", ()), (BROKER_ROLE, "_ignore", ()), (CONTROLLER_ELECTED, "_ignore", ()),
            # the mechanisms behind an outage (analysis/checkers/availability_witness.py): rare, read by observers only
            (PRODUCER_ROUTE_UPDATED, "_ignore", ()), (CONSUMER_PULL_FAILED, "_ignore", ()),
            (NAMESRV_BROKER_UNREGISTERED, "_ignore", ()))
_KIND_CODES = {kind: code for code, (kind, _h, _c) in enumerate(_HANDLED)}
# the kinds that hand a chunk to `Ledger.rare_observers` (analysis/checkers/failover_checker.py)
_RARE_CODES = tuple(_KIND_CODES[k] for k in (NODE_CRASHED, NODE_RESTARTED, BROKER_ROLE, CONTROLLER_ELECTED,
                                             PRODUCER_ROUTE_UPDATED, CONSUMER_PULL_FAILED, NAMESRV_BROKER_UNREGISTERED))
_DESTROYED_CODE = _KIND_CODES[COMMIT_LOG_DESTROYED]
_NO_CODES = itertools.repeat(-1)


@dataclass
class ProducerInfo:
    name: str
    topic: str
    transactional: bool = False  # a TransactionMQProducer: judged by analysis/checkers/txn_checker.py, not at-least-once


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
    # the first successful consumption's stored copy and consumer (analysis/checkers/duplicates.py)
    first_pos: list[array] = field(default_factory=list)
    first_node: list[array] = field(default_factory=list)
    # every duplicate delivery: (t_us, node, broker, queue_id, queue_offset, reconsume_times, producer, seq)
    dups: list[tuple] = field(default_factory=list)


def _saturating_add(counts: np.ndarray, index: np.ndarray, cap: int) -> None:
    """counts[i] += (occurrences of i in index), capped at `cap` (duplicates in `index` count)."""
    where, times = np.unique(index, return_counts=True)
    counts[where] = np.minimum(counts[where].astype(np.int64) + times, cap)


class _Columns(dict):
    """The records of one kind by column: `cols[c]` is column `c` as a list, `cols.ints(c)` as a
    NumPy array; each is extracted from the records on first use, in C (np.fromiter over an
    itemgetter: no intermediate list for a numeric column)."""

    def __init__(self, records: tuple) -> None:
        super().__init__()
        self.records = records
        self._arrays: dict[tuple[int, type], np.ndarray] = {}

    def __missing__(self, c: int) -> list:
        column = self[c] = _column(self.records, c)
        return column

    def ints(self, c: int, dtype: type = np.int64) -> np.ndarray:
        array = self._arrays.get((c, dtype))
        if array is None:
            array = self._arrays[c, dtype] = _int_column(self.records, c, dtype)
        return array


@cython.locals(records=tuple, c=cython.Py_ssize_t)
def _column(records: Any, c: int) -> list:
    """Field `c` of each record, as a list (compiled: a C loop; pure: a map over an itemgetter, in C too)."""
    if not cython.compiled:
        return list(map(itemgetter(c), records))
    return [record[c] for record in records]


@cython.locals(records=tuple, c=cython.Py_ssize_t, i=cython.Py_ssize_t, n=cython.Py_ssize_t, out=cython.longlong[:])
def _int_column(records: Any, c: int, dtype: type) -> np.ndarray:
    """Field `c` of each record as a NumPy array of `dtype`. Compiled (sim/compiled.py), an int64
    or bool column is filled in a C loop (about a sixth of np.fromiter's cost over an
    itemgetter); a value that is not an integer of that range (bool included) goes to
    np.fromiter, which converts or refuses it as it always does."""
    if not cython.compiled or (dtype is not np.int64 and dtype is not np.bool_):
        return np.fromiter(map(itemgetter(c), records), dtype, len(records))
    n = len(records)
    column = np.empty(n, np.int64)
    out = column
    for i in range(n):
        value = records[i][c]
        if not isinstance(value, int):
            return np.fromiter(map(itemgetter(c), records), dtype, n)
        out[i] = value
    return column if dtype is np.int64 else column != 0


@cython.locals(by_kind=list, codes_of=dict, code=cython.Py_ssize_t, destroyed=cython.Py_ssize_t)
def _by_kind(chunk: list[tuple]) -> list[list[tuple]] | None:
    """The chunk's records by kind code (`_HANDLED`'s order), each kind's in emission order; None
    for a chunk holding a destroyed-copy fact (`Ledger.feed` cuts it in parts around those)."""
    by_kind = [[] for _ in _HANDLED]
    codes_of, destroyed = _KIND_CODES, _DESTROYED_CODE
    for record in chunk:
        code = codes_of.get(record[2], -1)
        if code >= 0:
            if code == destroyed:
                return None
            by_kind[code].append(record)
    return by_kind


def _distinct(column: list) -> Iterable:
    """A column's values in first-seen order; a column of one repeated value (the usual chunk:
    one topic, one group) is recognised with `list.count`, in C, without hashing every value."""
    first = column[0]
    return (first,) if column.count(first) == len(column) else dict.fromkeys(column)


def _indices(names: list, table: dict[str, int], register: Callable[[str], int], dtype: type) -> np.ndarray:
    """Each name's index in `table`; names not seen before are registered first, in first-seen order."""
    try:
        return np.fromiter(map(table.__getitem__, names), dtype, len(names))
    except KeyError:
        for name in dict.fromkeys(names):
            register(name)
        return np.fromiter(map(table.__getitem__, names), dtype, len(names))


def _mark_again(state: np.ndarray, seqs: np.ndarray, once: int, again: int) -> None:
    """state[seqs] |= once, and |= again where it was set before or `seqs` holds the message twice."""
    seen, n = np.unique(seqs, return_counts=True)
    twice = seen[((state[seen] & once) != 0) | (n > 1)]
    state[seen] |= once
    if len(twice):
        state[twice] |= again


def _grow(arr: Any, seq: int, fill: int) -> None:
    """Make `arr[seq]` valid (new slots hold `fill`)."""
    missing = seq + GROW - len(arr)
    arr.extend(array(arr.typecode, [fill]) * missing if isinstance(arr, array) else bytes([fill]) * missing)


class Ledger:
    warmup_us = 0  # messages born before this are left out of latency statistics (analysis/checkers/metrics.py)

    def __init__(self, producers: list[ProducerInfo], subscriptions: dict[str, str],
                 broadcasting: tuple[str, ...] = (), orderly: tuple[str, ...] = (),
                 members: dict[str, list[str]] | None = None, pop: tuple[str, ...] = ()) -> None:
        """`subscriptions`: group → topic; `members`: group → its consumer node names (needed
        for broadcasting groups, judged per member); `pop`: the POP groups (no queue ownership)."""
        self.producers = producers
        self.subscriptions = subscriptions
        self.broadcasting = frozenset(broadcasting)
        self.orderly = frozenset(orderly)
        self.pop = frozenset(pop)
        n = len(producers)
        self.born_us = [TimeColumn() for _ in range(n)]  # 4 bytes a message while times fit (time_column.py)
        self.state = [bytearray() for _ in range(n)]
        self.copies = [bytearray() for _ in range(n)]
        self.store_us = [TimeColumn() for _ in range(n)]  # first copy's store time (consume latency)
        self.rt_us = [array("I") for _ in range(n)]  # send latency of a send that returned a result
        self.shard = [array("i") for _ in range(n)] if self.orderly else None
        self.top_seq = [0] * n
        self.units: dict[str, _Unit] = {}
        self.events: list[tuple] = []  # the rare ownership records, whole, in time order
        self.rare_observers: list[Callable[[list[tuple]], None]] = []  # see `_tell_rare`
        self.last_us = 0  # the latest record's time (the end of the lag series)
        self.brokers: dict[str, int] = {}  # broker name → index in position keys
        self.nodes: dict[str, int] = {}  # consumer node name → index (first_node)
        self.node_names: list[str] = []
        self.destroyed: dict[int, int] = {}  # msg id → DESTROYED_* | GROUP_HAS_REPLICAS | REPLICATED bits
        self.retry_destroyed: dict[str, dict[int, int]] = {}  # group → {msg id: bits}, not re-stored since
        self.reused: dict[int, None] = {}  # msg ids stored at a reused queue offset of a user topic
        self.retry_reused: dict[str, dict[int, None]] = {}  # group → msg ids stored so in %RETRY%group
        self.counts = {"sent_attempts": 0, "sent_ok": 0, "sent_not_ok": 0, "send_failed": 0, "stored": 0}
        self.send_status: Counter = Counter()  # producer.sent records by status
        self.send_failures: Counter = Counter()  # producer.send_failed records by reason
        self.send_failed_us = array("q")  # each producer.send_failed record's time (quiescence: rmqsim/quiescence.py)
        self.failed_sends = SendFailures()  # every send without SEND_OK, ONEWAY aside (write outages)
        self.sends_by_second: Counter = Counter()  # (second of born_us, broker) -> producer.sent records
        self.send_retried = 0  # send outcomes that took more than one attempt
        self.send_steered = 0  # send outcomes with at least one attempt steered away
        # RT of the sends that returned a result so far, every send (the progress line's Max/Average RT;
        # counted only when `count_rt` is set, by a run that shows progress)
        self.count_rt = False
        self.rt_count, self.rt_sum_us, self.rt_max_us = 0, 0, 0
        self._brokers: dict[str, None] = {}  # brokers seen in send outcomes
        for group, topic in subscriptions.items():
            if group in self.broadcasting:
                for member in (members or {}).get(group, []):
                    self._add_unit(f"{group}/{member}", group, topic)
            else:
                self._add_unit(group, group, topic)

    def _add_unit(self, name: str, group: str, topic: str | None) -> _Unit:
        n = len(self.producers)
        unit = _Unit(name, group, topic, group in self.orderly, [array("q") for _ in range(n)],
                     [array("H") for _ in range(n)], [bytearray() for _ in range(n)],
                     first_pos=[array("q") for _ in range(n)], first_node=[array("h") for _ in range(n)])
        self.units[name] = unit
        return unit

    # --- streaming --------------------------------------------------------------------------
    def feed(self, chunk: list[tuple]) -> None:
        """A Tracer chunk observer: update the arrays from one chunk of records, kind by kind, with
        NumPy (the records of a kind are gathered, and the columns a handler reads extracted, in C).
        A chunk holding destroyed-copy facts is fed in parts around them, so that a retry copy
        stored again after it was destroyed is seen in that order."""
        if chunk:
            self.last_us = max(self.last_us, chunk[-1][0])
        if cython.compiled:  # one C loop sorts the records by kind (pure: NumPy, below)
            by_kind = _by_kind(chunk)
            if by_kind is not None:
                for code, records in enumerate(by_kind):
                    if records:
                        self._handle(code, tuple(records))
                if self.rare_observers and any(by_kind[c] for c in _RARE_CODES):
                    self._tell_rare(chunk)
                return
        codes = np.fromiter(map(_KIND_CODES.get, map(_KIND, chunk), _NO_CODES), np.int8, len(chunk))
        if self.rare_observers and np.isin(codes, _RARE_CODES).any():
            self._tell_rare(chunk)
        destroyed = codes == _DESTROYED_CODE
        if not destroyed.any():
            self._feed_kinds(chunk, codes)
            return
        cuts = np.flatnonzero(np.diff(destroyed.astype(np.int8))) + 1
        for start, stop in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(chunk)].tolist(), strict=True):
            self._feed_kinds(chunk[start:stop], codes[start:stop])

    def _feed_kinds(self, chunk: list[tuple], codes: np.ndarray) -> None:
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes + 1, minlength=len(_HANDLED) + 1)
        start = int(counts[0])  # records of kinds the ledger does not read sort first (code -1)
        for code in range(len(_HANDLED)):
            n = int(counts[code + 1])
            if n:
                index = order[start:start + n].tolist()
                self._handle(code, itemgetter(*index)(chunk) if n > 1 else (chunk[index[0]],))
                start += n

    def _handle(self, code: int, records: tuple) -> None:
        """Hand the records of one kind (`_HANDLED[code]`), in emission order, to its handler."""
        _kind, handler, columns = _HANDLED[code]
        if not columns:
            getattr(self, handler)(records)
        else:  # the columns the handler reads, each extracted when first read
            getattr(self, handler)(_Columns(records))

    def _tell_rare(self, chunk: list[tuple]) -> None:
        """A chunk holding a rare fact of `_RARE_CODES`' kinds goes whole, in emission order, to the
        observers that read only those (a chunk observer of its own would scan every chunk)."""
        for observe in self.rare_observers:
            observe(chunk)

    def _ignore(self, records: tuple) -> None:
        """Kinds read by `rare_observers` only."""

    def _event(self, records: tuple) -> None:
        if records[0][2] == TIMER_DELIVERED:  # the records of one kind: the timer put messages back
            ids = np.fromiter(map(_MSG_ID, records), np.int64, len(records))
            for p, _sel, seqs in self._by_producer(ids):
                _mark_again(np.frombuffer(self.state[p], np.uint8), seqs, TIMER_ONCE, TIMER_TWICE)
            return
        self.events.extend(records)

    def _broker_index(self, name: str) -> int:
        index = self.brokers.get(name)
        if index is None:
            index = self.brokers[name] = len(self.brokers)
        return index

    def _node_index(self, name: str) -> int:
        index = self.nodes.get(name)
        if index is None:
            index = self.nodes[name] = len(self.node_names)
            self.node_names.append(name)
        return index

    def _grow_messages(self, p: int, top: int) -> None:
        if top >= len(self.state[p]):
            self.born_us[p].extend_to(top + GROW)
            _grow(self.state[p], top, 0)
            _grow(self.copies[p], top, 0)
            self.store_us[p].extend_to(top + GROW)
            _grow(self.rt_us[p], top, NO_RT)
            if self.shard is not None:
                _grow(self.shard[p], top, -1)
        if top > self.top_seq[p]:
            self.top_seq[p] = top

    def _by_producer(self, ids: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(producer index, selector, sequence numbers) for each producer among `ids`, with the
        producer's message arrays grown to hold them."""
        producers = ids >> SEQ_BITS
        first, last = int(producers.min()), int(producers.max())
        if first == last:
            groups = [(first, slice(None))]
        else:  # a short range of producer indexes is cheaper to walk than to np.unique
            candidates = range(first, last + 1) if last - first < 16 else np.unique(producers).tolist()
            groups = [(p, sel) for p in candidates if (sel := producers == p).any()]
        out = []
        for p, sel in groups:
            seqs = ids[sel] & SEQ_MASK
            self._grow_messages(p, int(seqs.max()))
            out.append((p, sel, seqs))
        return out

    def _sent(self, cols: _Columns) -> None:
        # (t, node, kind, msg_id, topic, shard, broker, queue_id, status, attempts, born_us, steered)
        ids = cols.ints(3)
        n, n_ok = len(ids), cols[8].count("SEND_OK")
        self._count_send(cols[9], cols[11])
        self.counts["sent_ok"] += n_ok
        self.counts["sent_not_ok"] += n - n_ok
        if n_ok:
            self.send_status["SEND_OK"] += n_ok
        born = cols.ints(10)
        self._count_by_second(born // 1_000_000, cols[6])
        rt = np.minimum(cols.ints(0) - born, RT_CAP_US)
        if n_ok == n:  # the usual chunk: every outcome SEND_OK (no status array to build)
            bits = np.full(n, ACKED, np.uint8)
            answered = rt
        else:
            status = np.array(cols[8], object)
            ok, oneway = status == "SEND_OK", status == "ONEWAY"
            self.send_status.update(itertools.compress(cols[8], (~ok).tolist()))
            self._not_ok(cols, np.flatnonzero(~ok & ~oneway).tolist())
            answered = rt[~oneway]
            rt = np.where(oneway, NO_RT, rt)
            bits = np.where(ok, ACKED, np.where(oneway, ONEWAY, NOT_OK)).astype(np.uint8)
        if self.count_rt:
            self._count_rt(answered)
        rt = rt.astype(np.uint32)
        shard = cols.ints(5, np.int32)
        for p, sel, seqs in self._by_producer(ids):
            self.born_us[p].put(seqs, born[sel])
            np.bitwise_or.at(np.frombuffer(self.state[p], np.uint8), seqs, bits[sel])
            np.frombuffer(self.rt_us[p], np.uint32)[seqs] = rt[sel]
            if self.shard is not None:
                np.frombuffer(self.shard[p], np.int32)[seqs] = shard[sel]

    def _not_ok(self, cols: _Columns, rows: list[int]) -> None:
        """Sends a broker stored but answered with another status than SEND_OK: not acknowledged."""
        if rows:
            t, born, ids, brokers, status = cols[0], cols[10], cols[3], cols[6], cols[8]
            self.failed_sends.add([t[r] for r in rows], [born[r] for r in rows], [ids[r] for r in rows],
                                  [brokers[r] for r in rows], [status[r] for r in rows])

    def _count_send(self, attempts: list[int], steered: list[int]) -> None:
        """Attempts, retried and steered-away sends of a chunk's outcomes (list.count: in C)."""
        n = len(attempts)
        self.counts["sent_attempts"] += sum(attempts)
        self.send_retried += n - attempts.count(1) - attempts.count(0)
        self.send_steered += n - steered.count(0)

    def _count_rt(self, rt: np.ndarray) -> None:
        """Running count, sum and maximum of the RTs of a chunk's sends that returned a result."""
        if len(rt):
            self.rt_count += len(rt)
            self.rt_sum_us += int(rt.sum(dtype=np.int64))
            self.rt_max_us = max(self.rt_max_us, int(rt.max()))

    def _count_by_second(self, seconds: np.ndarray, brokers: list[str]) -> None:
        """sends_by_second += the (second, broker) pairs (a chunk spans a second or two; the brokers
        seen so far are counted with list.count, in C)."""
        first, last = int(seconds.min()), int(seconds.max())
        for second in [first] if first == last else np.unique(seconds).tolist():
            of_second = brokers if first == last else list(itertools.compress(brokers, (seconds == second).tolist()))
            left = len(of_second)
            for broker in self._brokers:
                n = of_second.count(broker)
                if n:
                    self.sends_by_second[(second, broker)] += n
                    left -= n
            if left:  # a broker not seen before
                for broker, n in Counter(b for b in of_second if b not in self._brokers).items():
                    self._brokers[broker] = None
                    self.sends_by_second[(second, broker)] += n

    def _send_failed(self, cols: _Columns) -> None:
        # (t, node, kind, msg_id, topic, shard, attempts, reason, born_us, broker, steered)
        ids = cols.ints(3)
        self._count_send(cols[6], cols[10])
        self.counts["send_failed"] += len(ids)
        self.send_failures.update(cols[7])
        self.send_failed_us.extend(cols.ints(0).tolist())
        self.failed_sends.add(cols.ints(0).tolist(), cols[8], cols[3], cols[9], cols[7])
        born = cols.ints(8)
        for p, sel, seqs in self._by_producer(ids):
            self.born_us[p].put(seqs, born[sel])
            np.bitwise_or.at(np.frombuffer(self.state[p], np.uint8), seqs, FAILED)

    def _stored(self, cols: _Columns) -> None:
        # (t, node, kind, msg_id, topic, queue_id, queue_offset, phys_offset, size_bytes, reconsume_times)
        ids, distinct = cols.ints(3), _distinct(cols[4])
        topics = np.array(cols[4], object) if len(distinct) > 1 else None  # usually one topic a chunk
        first_copy = cols.ints(9) == 0
        for topic in distinct:
            of_topic = topics == topic if topics is not None else np.ones(len(ids), bool)
            if topic.startswith(DLQ_PREFIX):
                self._mark_dlq(ids[of_topic], topic[len(DLQ_PREFIX):])
            elif not topic.startswith(INTERNAL_TOPIC_PREFIXES):
                self._count_copies(ids[of_topic & first_copy], cols.ints(0)[of_topic & first_copy])
                continue
            if topic in PARKING_TOPICS:  # a delayed or timer message parked by its send, or a retry copy on its way
                self._mark_scheduled(ids[of_topic & first_copy])
            if topic == TIMER_TOPIC and self.destroyed:  # parked again (a retried send): on its way again
                for msg_id in ids[of_topic & first_copy].tolist():
                    if self.copies[msg_id >> SEQ_BITS][msg_id & SEQ_MASK] == 0:
                        self.destroyed.pop(msg_id, None)
            if self.retry_destroyed and topic.startswith((RETRY_PREFIX, SCHEDULE_PREFIX)):
                self._retry_restored(ids[of_topic].tolist())

    def _retry_restored(self, ids: list[int]) -> None:
        """A retry-path copy was stored again (a redelivery from the schedule topic, a new
        send-back): the message is on its way again."""
        for table in self.retry_destroyed.values():
            for msg_id in ids:
                table.pop(msg_id, None)

    def _destroyed(self, cols: _Columns) -> None:
        # (t, node, kind, msg_id, topic, queue_id, queue_offset, fault, replicas, replicated)
        for msg_id, topic, fault, replicas, replicated in zip(cols[3], cols[4], cols[7], cols[8], cols[9],
                                                              strict=True):
            bits = (DESTROYED_POWER if fault == "power_loss" else DESTROYED_EXPIRED if fault == "expired"
                    else DESTROYED_FAILOVER if fault == "failover_truncated"
                    else DESTROYED_FSYNC_ERROR if fault == "fsync_error" else DESTROYED_CRASH) | \
                (GROUP_HAS_REPLICAS if replicas else 0) | (REPLICATED if replicated else 0)
            if topic.startswith(RETRY_PREFIX):
                table = self.retry_destroyed.setdefault(topic[len(RETRY_PREFIX):], {})
                table[msg_id] = table.get(msg_id, 0) | bits
            elif topic == TIMER_TOPIC:  # a parked timer message's only copy, if the timer had not put it back
                p, seq = msg_id >> SEQ_BITS, msg_id & SEQ_MASK
                if p < len(self.copies) and seq < len(self.copies[p]) and self.copies[p][seq] == 0:
                    self.destroyed[msg_id] = self.destroyed.get(msg_id, 0) | bits
            elif not topic.startswith(INTERNAL_TOPIC_PREFIXES):
                self.destroyed[msg_id] = self.destroyed.get(msg_id, 0) | bits

    def _reused(self, cols: _Columns) -> None:
        # (t, node, kind, msg_id, topic, queue_id, queue_offset)
        for msg_id, topic in zip(cols[3], cols[4], strict=True):
            if topic.startswith(RETRY_PREFIX):
                self.retry_reused.setdefault(topic[len(RETRY_PREFIX):], {})[msg_id] = None
            elif not topic.startswith(INTERNAL_TOPIC_PREFIXES):
                self.reused[msg_id] = None

    def _mark_scheduled(self, ids: np.ndarray) -> None:
        """A delayed or timer message parked by its send (not a consumer's retry: reconsume_times 0);
        parked a second time: a retried send stored twice (PARKED_TWICE)."""
        if not len(ids):
            return
        for p, _sel, seqs in self._by_producer(ids):
            _mark_again(np.frombuffer(self.state[p], np.uint8), seqs, SCHEDULED, PARKED_TWICE)

    def _count_copies(self, ids: np.ndarray, times: np.ndarray) -> None:
        if not len(ids):
            return
        self.counts["stored"] += len(ids)
        for p, sel, seqs in self._by_producer(ids):
            _saturating_add(np.frombuffer(self.copies[p], np.uint8), seqs, 255)
            stored = self.store_us[p]
            first = stored.unset(seqs)  # records are in time order: keep the first copy's time
            stored.put(seqs[first][::-1], times[sel][first][::-1])

    def _unit_arrays(self, unit: _Unit, p: int, top: int) -> None:
        if top >= len(unit.ok_count[p]):
            _grow(unit.first_ok_us[p], top, -1)
            _grow(unit.ok_count[p], top, 0)
            _grow(unit.retry[p], top, 0)
            _grow(unit.first_pos[p], top, -1)
            _grow(unit.first_node[p], top, -1)

    def _consumed(self, cols: _Columns) -> None:
        # (t, node, kind, group, msg_id, topic, broker, queue_id, queue_offset, ok, reconsume_times)
        distinct = _distinct(cols[3])
        groups = np.array(cols[3], object) if len(distinct) > 1 else None  # usually one group a chunk
        nodes = np.array(cols[1], object) if self.broadcasting else None
        for group in distinct:
            of_group = groups == group if groups is not None else np.ones(len(cols[3]), bool)
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

    def _positions(self, cols: _Columns, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each consumption's stored copy as one int64 (broker, queue id, reconsume times, queue
        offset) and its consumer's node index."""
        broker = _indices(cols[6], self.brokers, self._broker_index, np.int64)[sel]
        queue = cols.ints(7)[sel]
        reconsume = np.minimum(cols.ints(10)[sel], 255)
        offset = cols.ints(8)[sel]
        pos = (((broker << 12 | queue) << 8 | reconsume) << 32) | (offset & 0xFFFFFFFF)
        node = _indices(cols[1], self.nodes, self._node_index, np.int16)[sel]
        return pos, node

    def _consumed_by(self, unit: _Unit, cols: _Columns, sel: np.ndarray, clustering: bool) -> None:
        ids = cols.ints(4)[sel]
        ok = cols.ints(9, np.bool_)[sel]
        times = cols.ints(0)[sel]
        unit.attempts += len(ids)
        pos, node = self._positions(cols, sel)
        rows = np.nonzero(sel)[0]
        for p, psel, seqs in self._by_producer(ids):
            self._unit_arrays(unit, p, int(seqs.max()))
            p_ok, p_times = ok[psel], times[psel]
            done = seqs[p_ok]
            if len(done):
                first_of, where = np.unique(done, return_index=True)
                first = np.frombuffer(unit.first_ok_us[p], np.int64)
                counts = np.frombuffer(unit.ok_count[p], np.uint16)
                prior = counts[done]
                new = first[first_of] == -1
                first[first_of[new]] = p_times[p_ok][where[new]]  # records are in time order
                np.frombuffer(unit.first_pos[p], np.int64)[first_of[new]] = pos[psel][p_ok][where[new]]
                np.frombuffer(unit.first_node[p], np.int16)[first_of[new]] = node[psel][p_ok][where[new]]
                leading = np.zeros(len(done), bool)
                leading[where] = True
                dup = (prior > 0) | ~leading
                if dup.any():
                    self._note_dups(unit, cols, rows[psel][p_ok][dup], p, done[dup])
                _saturating_add(counts, done, 65535)
            failed = seqs[~p_ok]
            if clustering and len(failed):  # a failed clustering consumption goes down the retry path
                retry = np.frombuffer(unit.retry[p], np.uint8)
                retry[failed] = np.maximum(retry[failed], IN_RETRY)

    @staticmethod
    def _note_dups(unit: _Unit, cols: _Columns, rows: np.ndarray, p: int, seqs: np.ndarray) -> None:
        for row, seq in zip(rows.tolist(), seqs.tolist(), strict=True):
            unit.dups.append((cols[0][row], cols[1][row], cols[6][row], cols[7][row], cols[8][row], cols[10][row],
                              p, seq))

    def _mark_dlq(self, ids: np.ndarray, group: str) -> None:
        unit = self.units.get(group)
        if unit is None or not len(ids):
            return
        for p, _sel, seqs in self._by_producer(ids):
            self._unit_arrays(unit, p, int(seqs.max()))
            np.frombuffer(unit.retry[p], np.uint8)[seqs] = IN_DLQ

    # --- results ----------------------------------------------------------------------------
    def results(self, details: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every metric of the run (see metrics.py for the definitions); with a `details` dict,
        also the per-message facts sweeps and reports use (latency samples, delivery counts)."""
        return judge_units(self, details)
