"""Every metric of a run, judged per consumption unit (Maelstrom's queue vocabulary) over the Ledger's arrays.

`judge_units(ledger)` is what `Ledger.results()` returns (analysis/checkers/ledger.py, which imports this
module: the ledger is read here through its attributes, never imported); analysis/checkers/checks.py's
`check` feeds a Ledger a record stream and judges it.

A unit is a consumer group, or one member of a BROADCASTING group (each member must see every
message). For each unit, over the messages of its subscribed topic:

- lost: acknowledged SEND_OK, never consumed successfully, and not in the retry path or the DLQ
  when the run ended; each lost message gets a cause (`lost_by_cause`, adding up to `lost`), from
  the simulator's ground truth, first match wins (`truncated_on_failover` first):
  - `unflushed_at_power_loss`: a power loss destroyed the acknowledged copy on its master
    (beyond the flushed position) and, if the group has slaves, one of them held it (no
    failover brings it back: it stays on the slave);
  - `replica_not_synced`: as above, and no slave of the group held it (replication lag);
  - `truncated_on_failover`: a broker rejoining its group as a slave after a failover (controller
    mode) cut its CommitLog to the consistent point of its epochs and the copy cut was the last
    one (`commit_log.destroyed` with fault `failover_truncated`: the new master never had it).
    It takes precedence over every other cause: whatever happened before, that truncation
    removed the last surviving copy;
  - `truncated_on_recovery`: a process crash destroyed it (the transient store pool's
    uncommitted buffer, cut off by recovery at the committed position);
  - `offset_skipped_after_recovery`: stored at a queue offset assigned again after a
    truncation, which the consumer's offset had already passed;
  - `expired_file_deleted`: deleted with its CommitLog file by retention or disk pressure before the
    group consumed it (models/broker/clean_service.py);
  - `fsync_error_swallowed`: a power loss destroyed the acknowledged copy on its master although the
    store had reported it flushed: its fsync failed (the `fsync_error` disk fault) and
    MappedFile.flush swallowed the error (models/broker/commit_log.py); checked right after
    `truncated_on_failover`, before the other power-loss causes;
  - `other`: none of these;
- pending_retry: acknowledged, not consumed successfully, but a consumption failed and the
  message went back through %RETRY% / SCHEDULE_TOPIC_XXXX (or a local re-consumption): it is
  still on its way, not lost — unless its retry-path copy was destroyed by a fault (or stored
  at a reused offset) and not stored again since: then nothing will deliver it, and it is lost
  (cause as above);
- dlq: acknowledged, moved to the group's dead-letter queue after its retries (not lost, but not
  consumed by the group);
- duplicates: successful consumptions of a message beyond the first, in the same unit; a
  redelivery after the listener itself failed is a retry, not a duplicate. `duplicates_by_cause`
  gives every duplicate delivery its mechanism (analysis/checkers/duplicates.py: producer_retry,
  rebalance, consumer_crash, consumer_shutdown, broker_offset_rollback, offset_reset, failover,
  send_back, txn_double_commit, timer_redelivered, other) and adds up to `duplicates`. The older
  two-way split `duplicate_causes` (`producer_retry` when the brokers stored the message more than
  once, else `redelivery`; a timer message the 5.x timer put back twice, parked once, is a
  `redelivery`) is kept for sweeps and stored results. Per group, `duplicates_by_second` gives
  the same causes over time (cause → [[second, duplicates], ...], seconds with any; the per-run
  report's "duplicates over time by cause" figure);
- transactional producers (a `transaction:` section): their messages are judged by
  analysis/checkers/txn_checker.py (visible iff the local transaction committed), not here: they count
  for duplicates only, and a duplicate of a message stored twice in its topic gets the cause
  `txn_double_commit` (two commits of one half; in `duplicate_causes` the key exists only with such a
  producer; `duplicates_by_cause` always has it);
- order_violations (orderly groups only; null elsewhere: order is not promised there): per
  (producer, sharding key), messages whose first successful consumption comes after that of a
  later-sent message (ties in consumption time are taken in message-id order);
  `order_violations_by_cause` labels each (analysis/checkers/order.py: send_side, retry_path,
  broker_lost_locks, lock_expired, other) and adds up to it;
- pending_delay: acknowledged, not consumed, and so far stored only in SCHEDULE_TOPIC_XXXX or
  rmq_sys_wheel_timer (a delayed or 5.x timer message whose delay had not run out when the run
  ended, or whose parked copy was never delivered): not counted as lost — except a timer message
  whose parked copy a fault destroyed before the timer put it back (and no retried send parked it
  again): nothing will deliver it, and it is lost with the fault's cause (`commit_log.destroyed`
  of its rmq_sys_wheel_timer copy; a destroyed SCHEDULE_TOPIC_XXXX copy is not told apart);
- unconsumed: only in a run stopped at a bound, a run that ended before the cluster was quiet
  (rmqsim/quiescence.py), or a unit nobody was left to drain (every member of its group down or
  shut down at the end; a BROADCASTING member down): acknowledged, not yet consumed, and destroyed
  by nothing the simulator knows of (else a loss of cause `other`) — nothing says it will not be
  consumed, so it is not lost; a message a fault destroyed stays lost with its cause;
- latency: send() call → first successful consumption, pooled over units, of the messages
  sent at or after the warm-up (`Ledger.warmup_us`, the scenario's `warmup_ms`; the counts
  above cover every message).

Send side (from the producer records, per message; a batch's outcome counts once per message):

- sends = sent_ok + sent_not_ok + send_failed: every message whose send() has an outcome
  (`sent_not_ok` holds the other store statuses and ONEWAY; `send_status` splits `sent_ok` +
  `sent_not_ok` by status, `send_failures_by_reason` splits `send_failed`); `sent_attempts` sums
  the requests those sends made; `send_retried` counts sends that needed more than one;
- send_latency_ms: RT (send() call → its result) of every send that returned a result (any store
  status; not ONEWAY, not failed) and was born at or after the warm-up (as for `latency_ms`; the
  send counts above cover every send), nearest-rank percentiles;
- send_share_by_broker: each broker's fraction of `producer.sent` records (the broker of the final
  attempt; ONEWAY included); `send_share_by_broker_in_faults` and `send_latency_ms_in_faults`:
  the share and the send latency over the sends born in a second that lies wholly inside a fault
  window, each window clipped at the run's end (null without fault windows; the seconds are kept
  as spans, `FaultSeconds`, so a fault far longer than the run costs no memory);
- send_steered_away: sends with at least one attempt steered away from a broker the fault
  strategy held unavailable (models/producer/producer.py);
- oneway_unstored: ONEWAY messages no broker ever stored (lost in transit; never in `lost`,
  which counts acknowledged messages only).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from analysis.checkers.availability import ReadWindows
from analysis.checkers.consumer_metrics import ownership, unit_metrics
from analysis.checkers.duplicates import Timeline, causes_by_second, count_causes, empty_causes, timed_causes
from analysis.checkers.ledger_codes import (
    ACKED,
    DESTROYED_CRASH,
    DESTROYED_EXPIRED,
    DESTROYED_FAILOVER,
    DESTROYED_FSYNC_ERROR,
    DESTROYED_POWER,
    GROUP_HAS_REPLICAS,
    IN_DLQ,
    IN_RETRY,
    NO_RT,
    ONEWAY,
    PARKED_TWICE,
    REPLICATED,
    SCHEDULED,
    SEQ_BITS,
    TIMER_TWICE,
    display_key,
)
from analysis.checkers.message_causes import MessageCauses
from analysis.checkers.order import CAUSES as ORDER_CAUSES
from analysis.checkers.order import FirstConsumed, LockHistory, order_violations
from analysis.checkers.percentiles import percentiles_ms

DELIVERY_COUNT_CAP = 10  # delivery-count histograms put 10 and more in the last bin
LOST_SAMPLE = 10

LOSS_CAUSES = ("unflushed_at_power_loss", "replica_not_synced", "truncated_on_failover", "truncated_on_recovery",
               "offset_skipped_after_recovery", "expired_file_deleted", "fsync_error_swallowed", "other")
(UNFLUSHED, NOT_SYNCED, FAILOVER, TRUNCATED, SKIPPED, EXPIRED, FSYNC_ERROR, OTHER) = range(len(LOSS_CAUSES))


class _Facts:
    """The sparse loss facts of a Ledger as sorted id arrays, for NumPy lookups."""

    def __init__(self, destroyed: dict[int, int], reused: dict[int, None]) -> None:
        ids = np.array(sorted(destroyed), np.int64)
        self.destroyed_ids = ids
        self.destroyed_bits = np.array([destroyed[i] for i in ids.tolist()], np.int64)
        self.reused_ids = np.array(sorted(reused), np.int64)

    def bits(self, ids: np.ndarray) -> np.ndarray:
        return _lookup(self.destroyed_ids, self.destroyed_bits, ids)

    def reused(self, ids: np.ndarray) -> np.ndarray:
        if not len(self.reused_ids):
            return np.zeros(len(ids), bool)
        at = np.minimum(np.searchsorted(self.reused_ids, ids), len(self.reused_ids) - 1)
        return self.reused_ids[at] == ids


def _lookup(keys: np.ndarray, values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """values[keys == id] for each id (0 where absent); `keys` sorted."""
    if not len(keys):
        return np.zeros(len(ids), np.int64)
    at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
    return np.where(keys[at] == ids, values[at], 0)


def loss_causes(bits: np.ndarray, reused: np.ndarray) -> np.ndarray:
    """The cause index (LOSS_CAUSES) of each lost message from its facts (module docstring): a
    failover truncation first (it removed the last surviving copy), then the order of LOSS_CAUSES."""
    power = (bits & DESTROYED_POWER) != 0
    not_synced = power & ((bits & GROUP_HAS_REPLICAS) != 0) & ((bits & REPLICATED) == 0)
    return np.select([(bits & DESTROYED_FAILOVER) != 0, (bits & DESTROYED_FSYNC_ERROR) != 0, not_synced, power,
                      (bits & DESTROYED_CRASH) != 0, reused, (bits & DESTROYED_EXPIRED) != 0],
                     [FAILOVER, FSYNC_ERROR, NOT_SYNCED, UNFLUSHED, TRUNCATED, SKIPPED, EXPIRED], OTHER)


def _view(arr: Any, dtype: Any, length: int) -> np.ndarray:
    """The first `length` values of a ledger array (shorter arrays read as the fill value)."""
    view = np.frombuffer(arr, dtype=dtype)
    return view[:length]


class _Producers:
    """NumPy views of the per-producer message arrays, cut to each producer's top sequence."""

    def __init__(self, ledger: Any) -> None:
        self.n = len(ledger.producers)
        self.length = [top + 1 if top else 0 for top in ledger.top_seq]
        self.born = ledger.born_us  # TimeColumns: read at the delivered messages only (`at`), no full copy
        self.state = [_view(ledger.state[p], np.uint8, self.length[p]) for p in range(self.n)]
        self.copies = [_view(ledger.copies[p], np.uint8, self.length[p]) for p in range(self.n)]
        self.topics = [info.topic for info in ledger.producers]
        self.transactional = [getattr(info, "transactional", False) for info in ledger.producers]


class _FirstOk:
    """A unit's first successful consumption time (µs, −1: none) of each message, by producer,
    padded to the producer's length on each read: a reader walking the producers holds one
    producer's array at a time (a list of them all would add 8 bytes a message to the summary's
    peak memory)."""

    def __init__(self, unit: Any, length: list[int]) -> None:
        self.unit = unit
        self.length = length

    def __getitem__(self, p: int) -> np.ndarray:
        return _padded(self.unit.first_ok_us[p], np.int64, self.length[p], -1)


def _padded(arr: Any, dtype: Any, length: int, fill: int) -> np.ndarray:
    view = np.frombuffer(arr, dtype=dtype)[:length]
    if len(view) == length:
        return view
    return np.concatenate([view, np.full(length - len(view), fill, dtype=dtype)])


def judge_units(ledger: Any, details: dict[str, Any] | None = None, stopped: bool = False,
                windows_us: list[tuple[int, int]] | None = None, idle: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every metric of the run (`Ledger.results`); `stopped`: the run stopped at a bound or ended
    before the cluster was quiet, so what was not yet consumed is `unconsumed`, not lost (module
    docstring); `windows_us`: the faults' [start, horizon) windows, whose read facts each unit's
    result carries as `_read` (analysis/checkers/availability.py; popped by the caller); `idle`: the
    units nobody was left to drain at the end (rmqsim/quiescence.py idle_units): their
    never-consumed messages are `unconsumed` too."""
    prods = _Producers(ledger)
    facts = _Facts(ledger.destroyed, ledger.reused)
    groups: dict[str, dict[str, Any]] = {}
    latencies: list[np.ndarray] = []
    timeline = Timeline(ledger.events)
    locks = LockHistory(ledger.events) if ledger.orderly else None
    own = ownership(ledger.events)
    found = MessageCauses([info.name for info in ledger.producers], LOSS_CAUSES, keep=details is not None)
    for name in sorted(ledger.units):
        unit = ledger.units[name]
        result, unit_latencies = _judge_unit(ledger, unit, prods, details, facts, locks,
                                             stopped or name in idle or unit.group in idle, found)
        timed = timed_causes(unit, ledger, prods.copies, timeline)
        found.add_duplicates(unit, timed)
        result["duplicates_by_cause"] = count_causes(timed)
        result["duplicates_by_second"] = causes_by_second(timed)
        result["retries"] = unit.attempts - result["consumed_ok_distinct"] - result["duplicates"]
        first_ok = _FirstOk(unit, prods.length)  # one producer's padded copy at a time, not every producer's
        read = ReadWindows(windows_us) if windows_us else None
        result.update(unit_metrics(unit, prods, first_ok, ledger.store_us, own, ledger.last_us,
                                   unit.group in ledger.broadcasting, unit.group in ledger.pop,
                                   lost=result.pop("_lost_seqs"), read=read))
        if windows_us is not None:
            result["_read"] = read
        groups[name] = result
        latencies.append(unit_latencies)
    if details is not None:
        details["message_causes"] = found  # which messages were counted, and why (rmqsim explain)
    return _totals(ledger, prods, groups, np.concatenate(latencies) if latencies else np.zeros(0, np.int64)) \
        | found.samples()


def _retry_facts(ledger: Any, group: str) -> _Facts:
    """A group's retry-path facts: copies destroyed (not stored again) or stored at reused offsets."""
    return _Facts(ledger.retry_destroyed.get(group, {}), ledger.retry_reused.get(group, {}))


def _judge_unit(ledger: Any, unit: Any, prods: _Producers, details: dict[str, Any] | None,
                facts: _Facts, locks: LockHistory | None, stopped: bool = False,
                found: MessageCauses | None = None) -> tuple[dict[str, Any], np.ndarray]:
    retry_facts = _retry_facts(ledger, unit.group)
    causes = np.zeros(len(LOSS_CAUSES), np.int64)
    lost_ids: list[np.ndarray] = []
    latencies: list[np.ndarray] = []
    c = {"lost": 0, "pending_retry": 0, "dlq": 0, "duplicates": 0, "duplicated_messages": 0, "unconsumed": 0,
         "consumed_ok_distinct": 0, "producer_retry": 0, "redelivery": 0, "pending_delay": 0, "txn_double_commit": 0}
    order_rows: list[tuple[np.ndarray, ...]] = []
    lost_by_producer: dict[int, np.ndarray] = {}  # lost masks: the lost messages are no backlog (consumer_metrics.py)
    for p in range(prods.n):
        length = prods.length[p]
        ok = _padded(unit.ok_count[p], np.uint16, length, 0)  # a view where nothing is missing: sums in int64
        # read at consumed messages only, which the unit's arrays (grown together) always cover: no padded copy
        first = np.frombuffer(unit.first_ok_us[p], np.int64)[:length]
        retry = _padded(unit.retry[p], np.uint8, length, 0)
        consumed = ok > 0
        # the deliveries beyond each message's first: ok − 1 where consumed, summed without an array of them
        distinct = int(np.count_nonzero(consumed))
        extra = int(ok.sum(dtype=np.int64)) - distinct
        c["consumed_ok_distinct"] += distinct
        c["duplicates"] += extra
        c["duplicated_messages"] += int(np.count_nonzero(ok > 1))
        # a timer message the timer put back twice (parked once) is redelivered, not sent twice
        timer_twice = ((prods.state[p] & TIMER_TWICE) != 0) & ((prods.state[p] & PARKED_TWICE) == 0)
        stored_twice = (prods.copies[p] > 1) & ~timer_twice
        del timer_twice
        extra_twice = int(ok.sum(dtype=np.int64, where=stored_twice)) - int(np.count_nonzero(consumed & stored_twice))
        del stored_twice
        # a transactional producer's real messages are written by commits: two copies = two commits
        c["txn_double_commit" if prods.transactional[p] else "producer_retry"] += extra_twice
        c["redelivery"] += extra - extra_twice
        if prods.topics[p] != unit.topic or prods.transactional[p]:
            continue  # transactional messages: judged by analysis/checkers/txn_checker.py (visible iff committed)
        acked = (prods.state[p] & ACKED) != 0
        missing = acked & ~consumed
        delayed = ((prods.state[p] & SCHEDULED) != 0) & (prods.copies[p] == 0) & (retry == 0)
        if len(facts.destroyed_ids):  # a timer message whose parked copy a fault destroyed: nothing will deliver it
            parked = np.nonzero(delayed)[0]
            delayed[parked[facts.bits((np.int64(p) << SEQ_BITS) | parked.astype(np.int64)) != 0]] = False
        lost = missing & (retry == 0) & ~delayed
        lost_causes = _causes(facts, p, np.flatnonzero(lost))
        if stopped:  # the run ended early: what nothing destroyed may yet be consumed (module docstring)
            waiting = lost_causes == OTHER
            c["unconsumed"] += int(np.count_nonzero(waiting))
            lost[lost] = ~waiting  # the lost messages in order, as `lost_causes` lists them
            lost_causes = lost_causes[~waiting]
            del waiting
        pending = np.nonzero(missing & (retry == IN_RETRY))[0]
        dead = _dead_retry(retry_facts, p, pending)  # its retry copy is gone: lost after all
        if found is not None:  # the messages behind the counts (analysis/checkers/message_causes.py)
            found.add_lost(unit.name, p, np.flatnonzero(lost), lost_causes)
            found.add_lost(unit.name, p, pending[dead >= 0], dead[dead >= 0])
            if found.keep:
                found.add_states(unit.name, p, pending_retry=pending[dead < 0], dlq=np.nonzero(missing & (retry == IN_DLQ))[0],
                                 pending_delay=np.nonzero(missing & delayed)[0])
        lost[pending[dead >= 0]] = True
        lost_by_producer[p] = lost  # the mask itself (1 byte a message), not its indexes (8)
        causes += np.bincount(np.concatenate([lost_causes, dead[dead >= 0]]), minlength=len(LOSS_CAUSES))
        c["lost"] += int(lost.sum())
        c["pending_delay"] += int((missing & delayed).sum())
        c["pending_retry"] += int((dead < 0).sum())
        c["dlq"] += int((missing & (retry == IN_DLQ)).sum())
        lost_seqs = np.nonzero(lost)[0][:LOST_SAMPLE]
        lost_ids.append((lost_seqs.astype(np.int64), np.full(len(lost_seqs), p, np.int64)))
        delivered = acked & consumed
        seqs = np.nonzero(delivered)[0]
        born = prods.born[p].at(seqs)
        unit_lat = first[seqs] - born
        latencies.append(unit_lat[born >= ledger.warmup_us])  # warm-up: not measured
        if unit.orderly:
            order_rows.append(FirstConsumed(first[seqs], np.full(len(seqs), p, np.int64), seqs.astype(np.int64),
                                            np.asarray(ledger.shard[p])[seqs],
                                            _padded(unit.first_pos[p], np.int64, length, -1)[seqs],
                                            _padded(unit.first_node[p], np.int16, length, 0)[seqs]))
        if details is not None:
            _add_details(details, unit.name, p, acked, ok, seqs, born, unit_lat)
    unit_latencies = np.concatenate(latencies) if latencies else np.zeros(0, np.int64)
    result = {
        "lost": c["lost"],
        "lost_by_cause": dict(zip(LOSS_CAUSES, causes.tolist(), strict=True)),
        "lost_sample": _lost_sample(ledger, lost_ids),
        "pending_retry": c["pending_retry"],
        "pending_delay": c["pending_delay"],
        "unconsumed": c["unconsumed"],
        "dlq": c["dlq"],
        "duplicates": c["duplicates"],
        "duplicated_messages": c["duplicated_messages"],
        "duplicate_causes": {"producer_retry": c["producer_retry"], "redelivery": c["redelivery"]}
        | ({"txn_double_commit": c["txn_double_commit"]} if any(prods.transactional) else {}),
        "consumed_ok_distinct": c["consumed_ok_distinct"],
        "consume_attempts": unit.attempts,
        **_order(ledger, unit, order_rows, locks, found),
        "latency_ms": percentiles_ms(unit_latencies, owned=True),  # a fresh concatenation; only its multiset is used after
        "_lost_seqs": lost_by_producer,
    }
    return result, unit_latencies


CAUSE_CHUNK = 1 << 20  # lost messages judged at a time: the lookups' temporaries stay a few MB


def _causes(facts: _Facts, p: int, seqs: np.ndarray) -> np.ndarray:
    """Cause index (int8) of each lost message `seqs` of producer `p`: `other` for all without a
    loss fact in the run, else looked up a chunk at a time (a run losing 10^8 messages would
    otherwise hold ids, fact bits and six masks of them all at once: issue 41)."""
    out = np.full(len(seqs), OTHER, np.int8)
    if not len(facts.destroyed_ids) and not len(facts.reused_ids):
        return out
    for start in range(0, len(seqs), CAUSE_CHUNK):
        ids = (np.int64(p) << SEQ_BITS) | seqs[start:start + CAUSE_CHUNK].astype(np.int64)
        out[start:start + CAUSE_CHUNK] = loss_causes(facts.bits(ids), facts.reused(ids))
    return out


def _dead_retry(retry_facts: _Facts, p: int, seqs: np.ndarray) -> np.ndarray:
    """For each pending message: the cause index if its retry-path copy is gone, else -1."""
    if not len(seqs) or (not len(retry_facts.destroyed_ids) and not len(retry_facts.reused_ids)):
        return np.full(len(seqs), -1, np.int64)
    ids = (np.int64(p) << SEQ_BITS) | seqs.astype(np.int64)
    bits, reused = retry_facts.bits(ids), retry_facts.reused(ids)
    return np.where((bits != 0) | reused, loss_causes(bits, reused), -1)


def _lost_sample(ledger: Any, lost_ids: list[tuple[np.ndarray, np.ndarray]]) -> list[str]:
    """The first lost messages by sequence number (then producer), as display keys."""
    pairs = sorted((int(s), int(p)) for seqs, ps in lost_ids for s, p in zip(seqs, ps, strict=True))
    names = [info.name for info in ledger.producers]
    return [display_key(p << SEQ_BITS | s, names) for s, p in pairs[:LOST_SAMPLE]]


def _order(ledger: Any, unit: Any, rows: list[FirstConsumed], locks: LockHistory | None,
           found: MessageCauses | None = None) -> dict[str, Any]:
    """`order_violations` and `order_violations_by_cause` of a unit (null unless orderly)."""
    if not unit.orderly or locks is None:
        return {"order_violations": None, "order_violations_by_cause": None}
    brokers = sorted(ledger.brokers, key=ledger.brokers.get)
    total, by_cause = order_violations(rows, unit.group, unit.topic, brokers, ledger.node_names, locks,
                                       found.violation_list(unit.name) if found is not None else None)
    return {"order_violations": total, "order_violations_by_cause": by_cause}


def _add_details(details: dict[str, Any], unit: str, p: int, acked: np.ndarray, ok: np.ndarray,
                 seqs: np.ndarray, born: np.ndarray, latency: np.ndarray) -> None:
    counts = details.setdefault("delivery_counts", [0] * (DELIVERY_COUNT_CAP + 1))
    histogram = np.bincount(np.minimum(ok[acked], DELIVERY_COUNT_CAP), minlength=DELIVERY_COUNT_CAP + 1)
    for i, n in enumerate(histogram.tolist()):
        counts[i] += n
    parts = details.setdefault("_latency_parts", [])
    parts.append((unit, (np.int64(p) << SEQ_BITS) | seqs.astype(np.int64), born, latency))


def latency_samples(details: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every acknowledged message's first successful consumption, per unit, as columns:
    `unit` (object), `msg_id`, `born_us`, `latency_us` (int64); empty arrays without samples."""
    parts = details.get("_latency_parts", [])
    if not parts:
        return {"unit": np.zeros(0, object), "msg_id": np.zeros(0, np.int64), "born_us": np.zeros(0, np.int64),
                "latency_us": np.zeros(0, np.int64)}
    return {"unit": np.concatenate([np.full(len(p[1]), p[0], dtype=object) for p in parts]),
            "msg_id": np.concatenate([p[1] for p in parts]), "born_us": np.concatenate([p[2] for p in parts]),
            "latency_us": np.concatenate([p[3] for p in parts])}


def _sum_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _totals(ledger: Any, prods: _Producers, groups: dict[str, dict[str, Any]],
            latencies: np.ndarray) -> dict[str, Any]:
    causes = {"producer_retry": 0, "redelivery": 0} | ({"txn_double_commit": 0} if any(prods.transactional) else {})
    for g in groups.values():
        for cause, n in g["duplicate_causes"].items():
            causes[cause] += n
    consume_latencies = [g.pop("_consume_latencies_us") for g in groups.values()]
    by_cause = empty_causes()
    for g in groups.values():
        for cause, n in g["duplicates_by_cause"].items():
            by_cause[cause] += n
    orderly = [g for g in groups.values() if g["order_violations"] is not None]
    stored_duplicates = sum(int(np.maximum(c.astype(np.int64) - 1, 0).sum()) for c in prods.copies)
    oneway_unstored = sum(int((((s & ONEWAY) != 0) & ((s & SCHEDULED) == 0) & (c == 0)).sum())
                          for s, c in zip(prods.state, prods.copies, strict=True))
    return {
        **ledger.counts,
        **send_metrics(ledger),
        "oneway_unstored": oneway_unstored,
        "stored_duplicates": stored_duplicates,
        "consumed": sum(g["consumed_ok_distinct"] + g["duplicates"] for g in groups.values()),
        "lost": sum(g["lost"] for g in groups.values()),
        "lost_by_cause": {cause: sum(g["lost_by_cause"][cause] for g in groups.values()) for cause in LOSS_CAUSES},
        "pending_retry": sum(g["pending_retry"] for g in groups.values()),
        "pending_delay": sum(g["pending_delay"] for g in groups.values()),
        "unconsumed": sum(g["unconsumed"] for g in groups.values()),
        "dlq": sum(g["dlq"] for g in groups.values()),
        "duplicates": sum(g["duplicates"] for g in groups.values()),
        "duplicated_messages": sum(g["duplicated_messages"] for g in groups.values()),
        "duplicate_causes": causes,
        "duplicates_by_cause": by_cause,
        "retries": sum(g["retries"] for g in groups.values()),
        "rebalances": _sum_or_none([g["rebalances"] for g in groups.values()]),
        "unowned_queue_s": _sum_or_none([g["unowned_queue_s"] for g in groups.values()]),
        "lag_max": max((g["lag_max"] for g in groups.values()), default=0),
        "consume_latency_ms": percentiles_ms(np.concatenate(consume_latencies) if consume_latencies
                                             else np.zeros(0, np.int64), owned=True),
        "order_violations": sum(g["order_violations"] for g in orderly) if orderly else None,
        "order_violations_by_cause": {c: sum(g["order_violations_by_cause"][c] for g in orderly)
                                      for c in ORDER_CAUSES} if orderly else None,
        "latency_ms": percentiles_ms(latencies, owned=True),  # a fresh concatenation (judge_units)
        "groups": groups,
    }


def send_metrics(ledger: Any) -> dict[str, Any]:
    """The send-side summary keys (module docstring)."""
    counts = ledger.counts
    return {
        "sends": counts["sent_ok"] + counts["sent_not_ok"] + counts["send_failed"],
        "send_retried": ledger.send_retried,
        "send_steered_away": ledger.send_steered,
        "send_status": dict(sorted(ledger.send_status.items())),
        "send_failures_by_reason": dict(sorted(ledger.send_failures.items())),
        "send_latency_ms": percentiles_ms(_send_latencies(ledger, None), owned=True),
        "send_share_by_broker": _shares(ledger.sends_by_second.items()),
    }


def _send_latencies(ledger: Any, seconds: FaultSeconds | None) -> np.ndarray:
    """RT (µs, uint32) of every send born at or after the warm-up that returned a result; with
    `seconds`, of those born in them. One array, no parts to concatenate (issue 41: peak memory)."""
    lengths = [top + 1 if top else 0 for top in ledger.top_seq]
    out = np.empty(sum(lengths), np.uint32)  # uint32: 4 bytes a sample, filled producer by producer
    filled = 0
    for p, n in enumerate(lengths):
        rt = np.frombuffer(ledger.rt_us[p], np.uint32)[:n]
        born = ledger.born_us[p].view(n)
        keep = (rt != NO_RT) & (born >= ledger.warmup_us)  # warm-up: not measured, as in latency_ms
        if seconds is not None:
            keep &= seconds.holds(born // 1_000_000)
        del born
        kept = int(np.count_nonzero(keep))
        np.compress(keep, rt, out=out[filled:filled + kept])
        filled += kept
    return out[:filled]


def _shares(counts: Iterable[tuple[tuple[int, str], int]]) -> dict[str, float]:
    by_broker: dict[str, int] = {}
    for (_second, broker), n in counts:
        by_broker[broker] = by_broker.get(broker, 0) + n
    total = sum(by_broker.values())
    return {b: round(n / total, 6) for b, n in sorted(by_broker.items())} if total else {}


class FaultSeconds:
    """The seconds of simulated time wholly inside a fault window, as sorted disjoint spans
    [first, stop) of whole seconds: memory by the number of windows, never by their length."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for first, stop in sorted(span for span in spans if span[1] > span[0]):
            if merged and first <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([first, stop])
        self.first = np.array([m[0] for m in merged], np.int64)
        self.stop = np.array([m[1] for m in merged], np.int64)

    def holds(self, seconds: np.ndarray) -> np.ndarray:
        """For each second (int64): inside one of the spans."""
        if not len(self.first):
            return np.zeros(len(seconds), bool)
        at = np.searchsorted(self.first, seconds, side="right") - 1
        return (at >= 0) & (seconds < self.stop[np.maximum(at, 0)])


def fault_seconds(windows: list[dict[str, Any]], run_end_ms: float) -> FaultSeconds | None:
    """The seconds of simulated time wholly inside a fault window [start, end) (`windows` as
    analysis/checkers/run_rows.py fault_windows gives them), each window clipped at the run's end
    `run_end_ms` first (a fault longer than the run ends with it); None without a window."""
    spans = []
    for w in windows:
        end_ms = None if w["end_ms"] is None else min(w["end_ms"], run_end_ms)
        if end_ms is not None and end_ms > w["start_ms"]:
            spans.append((math.ceil(w["start_ms"] / 1000), math.floor(end_ms / 1000)))
    return FaultSeconds(spans) if spans else None


def send_metrics_in_faults(ledger: Any, windows: list[dict[str, Any]], run_end_ms: float) -> dict[str, Any]:
    """`send_share_by_broker_in_faults` and `send_latency_ms_in_faults`: the same metrics over the
    sends born in a second wholly inside a fault window, clipped at the run's end `run_end_ms`
    (null without fault windows)."""
    seconds = fault_seconds(windows, run_end_ms)
    if seconds is None:
        return {"send_share_by_broker_in_faults": None, "send_latency_ms_in_faults": None}
    counts = list(ledger.sends_by_second.items())
    inside = seconds.holds(np.fromiter((key[0] for key, _n in counts), np.int64, len(counts)))
    return {"send_share_by_broker_in_faults": _shares(c for c, keep in zip(counts, inside.tolist(), strict=True)
                                                      if keep),
            "send_latency_ms_in_faults": percentiles_ms(_send_latencies(ledger, seconds), owned=True)}
