"""The producer's fault-tolerant broker selection, exact to the Java code of two releases.

Mirrors, per `client_version` (models/version.py):

| here                        | "4.x" = rocketmq-all-4.9.8               | "5.x" = rocketmq-all-5.3.3                  |
| --------------------------- | ---------------------------------------- | ------------------------------------------- |
| `FaultItem`                 | LatencyFaultToleranceImpl.FaultItem      | same, plus `checkStamp`, `reachableFlag`    |
| `LatencyFaultToleranceImpl` | client.latency.LatencyFaultToleranceImpl | same, plus the reachability detector        |
| `MQFaultStrategy`           | client.latency.MQFaultStrategy           | rewritten in 5.1.4: other tables and passes |

It selects through the route's TopicPublishInfo (models/topic_publish_info.py) and its
ThreadLocalIndex (models/thread_local_index.py), with Java's arithmetic and random sources
(models/java.py).

Pure Python, no SimPy: the clock is explicit (`now_ms` stands for every
`System.currentTimeMillis()` of the Java code, so one call sees one instant) and so are the
counters (`TopicPublishInfo.send_which_queue`, `MQFaultStrategy.which_item_worst`: the value
Java keeps in the thread local, before the `& 0x7FFFFFFF` of the returned value; None while unset).

Randomness: where Java draws from an unseeded `java.util.Random` (the start of an unset index,
5.x `reset()`, 5.x `Collections.shuffle`), this module draws from the `rng` it is given: a
`random.Random` (the simulator passes the producer's named stream) or a bit-exact `JavaRandom`
(models/java.py). Without an `rng`, each object uses its own `random.Random(0)`, so a run is
deterministic either way.

Simplified: a ThreadLocalIndex holds the value of one thread (the simulator's producer sends from
one thread); the fault-item table iterates in insertion order where Java iterates a
ConcurrentHashMap in hash order. That order decides only (a) which of several items
with equal (available, currentLatency, startTimestamp) 4.x `pickOneAtLeast` returns, (b) the
list 5.x `pickOneAtLeast` shuffles, and (c) the order of the detector's calls. Logging is left
out; the 5.x detector thread is the caller's (`detect_by_one_round` is one run of it).
"""

# compiled with Cython: the C declarations of this module's classes are in fault_strategy.pxd beside it

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from models.coverage_points import (
    COV_DETECTOR_RESTORED_BROKER,
    COV_FAULT_BROKER_ISOLATED,
    COV_PICK_ONE_AT_LEAST_CHOSEN,
    COV_REACHABLE_PASS_CHOSEN,
)
from models.java import RandomSource, int_source, java_abs_int, java_int, java_long, java_rem, java_shuffle
from models.message import MessageQueue
from models.thread_local_index import ThreadLocalIndex
from models.topic_publish_info import TopicPublishInfo
from models.version import V4, V5, check_version
from sim.coverage import new_counter

# MQFaultStrategy.latencyMax / notAvailableDuration (ms), per version (5.x tables since 5.1.4).
LATENCY_MAX_MS = {V4: (50, 100, 550, 1000, 2000, 3000, 15000), V5: (50, 100, 550, 1800, 3000, 5000, 15000)}
NOT_AVAILABLE_DURATION_MS = {V4: (0, 0, 30000, 60000, 120000, 180000, 600000),
                             V5: (0, 0, 2000, 5000, 6000, 10000, 30000)}
# MQFaultStrategy.updateFaultItem: the latency looked up when `isolation` is true (hard-coded).
ISOLATION_LATENCY_MS = {V4: 30000, V5: 10000}

DETECT_TIMEOUT_MS = 200  # ClientConfig.detectTimeout (5.3.3)
DETECT_INTERVAL_MS = 2000  # ClientConfig.detectInterval (5.3.3)
# LatencyFaultToleranceImpl.startDetector: scheduleAtFixedRate(…, 3, 3, SECONDS); each run calls
# detectByOneRound only while startDetectorEnable is true.
DETECTOR_INITIAL_DELAY_MS = 3000
DETECTOR_PERIOD_MS = 3000


# --- LatencyFaultToleranceImpl -----------------------------------------------------------------

@dataclass(slots=True, eq=False)
class FaultItem:
    """LatencyFaultToleranceImpl.FaultItem (times in ms). `check_stamp` and `reachable_flag`
    exist only in 5.x; 4.x items keep None there."""

    name: str
    current_latency: int = 0
    start_timestamp: int = 0  # the broker is available again from this instant on
    check_stamp: int | None = None  # 5.x: the detector's next visit
    reachable_flag: bool | None = None  # 5.x


class LatencyFaultToleranceImpl:
    """client.latency.LatencyFaultToleranceImpl: the per-broker fault items.

    4.x: an update overwrites `startTimestamp = now + duration`; available iff
    `now - startTimestamp >= 0` (long arithmetic); `pickOneAtLeast` sorts a copy (available first,
    then currentLatency, then startTimestamp, stable) and returns `list[whichItemWorst % half]`
    (`half = size / 2`; one item: that item, no increment).
    5.x: an update only extends (`duration > 0` and `now + duration > startTimestamp`) and sets
    `reachableFlag`; available iff `now >= startTimestamp` (5.3.3 no longer reads reachableFlag
    here); `pickOneAtLeast` shuffles a copy and returns the first reachable item (the shuffle
    draws from `shuffle_rng`; Java uses Collections' own Random, so it matches Java only in
    distribution unless both are seeded alike); `whichItemWorst` exists but is unused."""

    def __init__(self, client_version: str = V5, *, which_item_worst: int | None = None,
                 rng: RandomSource | None = None, shuffle_rng: RandomSource | None = None,
                 detect_timeout_ms: int = DETECT_TIMEOUT_MS, detect_interval_ms: int = DETECT_INTERVAL_MS,
                 start_detector_enable: bool = False, coverage: list[int] | None = None) -> None:
        self.client_version = check_version(client_version)
        # the run's rare-state counts (models/coverage_points.py; a standalone strategy counts into its own)
        self.cov = coverage if coverage is not None else new_counter()
        self.fault_item_table: dict[str, FaultItem] = {}  # ConcurrentHashMap; here insertion order
        self.which_item_worst_index = ThreadLocalIndex(client_version, which_item_worst, rng)
        self._shuffle_ints = int_source(rng if shuffle_rng is None else shuffle_rng)
        self.detect_timeout_ms = detect_timeout_ms  # detectTimeout: the probe's timeout (the caller's)
        self.detect_interval_ms = detect_interval_ms  # detectInterval
        self.start_detector_enable = start_detector_enable  # startDetectorEnable

    @property
    def which_item_worst(self) -> int | None:
        return self.which_item_worst_index.value

    @which_item_worst.setter
    def which_item_worst(self, value: int | None) -> None:
        self.which_item_worst_index.value = value

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int, now_ms: int,
                          reachable: bool = True) -> None:
        """updateFaultItem(name, currentLatency, notAvailableDuration[, reachable]); 4.x ignores `reachable`."""
        item = self.fault_item_table.get(name)
        if item is None:
            item = FaultItem(name)
            if self.client_version == V5:
                item.check_stamp, item.reachable_flag = 0, False
            self.fault_item_table[name] = item
        item.current_latency = java_long(current_latency)
        until = java_long(now_ms + not_available_duration)
        if self.client_version == V4:
            item.start_timestamp = until
        else:
            if not_available_duration > 0 and until > item.start_timestamp:  # FaultItem.updateNotAvailableDuration
                item.start_timestamp = until
            item.reachable_flag = bool(reachable)

    def item_is_available(self, item: FaultItem, now_ms: int) -> bool:
        """FaultItem.isAvailable()."""
        if self.client_version == V4:
            return java_long(now_ms - item.start_timestamp) >= 0
        return now_ms >= item.start_timestamp

    def is_available(self, name: str, now_ms: int) -> bool:
        item = self.fault_item_table.get(name)
        return True if item is None else self.item_is_available(item, now_ms)

    def is_reachable(self, name: str) -> bool:
        """5.x isReachable; 4.x has no reachability, so every broker is reachable."""
        item = self.fault_item_table.get(name)
        return True if item is None or self.client_version == V4 else bool(item.reachable_flag)

    def remove(self, name: str) -> None:
        self.fault_item_table.pop(name, None)

    def pick_one_at_least(self, now_ms: int) -> str | None:
        items = list(self.fault_item_table.values())
        if not items:
            return None
        if self.client_version == V5:
            java_shuffle(items, self._shuffle_ints)
            return next((item.name for item in items if item.reachable_flag), None)
        # FaultItem.compareTo; Collections.sort is stable, like list.sort
        items.sort(key=lambda it: (not self.item_is_available(it, now_ms), it.current_latency, it.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[java_rem(self.which_item_worst_index.increment_and_get(), half)].name

    # --- 5.x reachability detector (detectByOneRound) ---

    def detect_by_one_round(self, now_ms: int, resolve_master_addr: Callable[[str], str | None],
                            probe: Callable[[str], bool] | None) -> None:
        """detectByOneRound at one instant: every item whose `checkStamp` has come gets
        `checkStamp = now + detectInterval`; a broker without a master address loses its item;
        otherwise `probe(addr)` (Java: a getMaxOffset RPC with detectTimeout) and on success the
        item becomes reachable. `probe` None = Java's null ServiceDetector (no probe).

        A caller whose probe takes simulated time runs the round itself with `detect_begin` and
        `detect_end` per item, reading the clock before each item as the Java thread does."""
        self._require_v5("detectByOneRound")
        for name in list(self.fault_item_table):
            item = self.fault_item_table.get(name)
            if item is None:  # removed by a callback earlier in this round
                continue
            addr = self.detect_begin(item, now_ms, resolve_master_addr)
            if addr is not None and probe is not None:
                self.detect_end(item, probe(addr))

    def detect_begin(self, item: FaultItem, now_ms: int,
                     resolve_master_addr: Callable[[str], str | None]) -> str | None:
        """The first half of one item's visit: returns the address to probe, or None (not due, or no
        master address, in which case the item has been removed)."""
        self._require_v5("detectByOneRound")
        if java_long(now_ms - item.check_stamp) < 0:  # type: ignore[operator]  # a 5.x item has its stamp
            return None
        item.check_stamp = java_long(now_ms + self.detect_interval_ms)
        addr = resolve_master_addr(item.name)
        if addr is None:
            self.fault_item_table.pop(item.name, None)
        return addr

    def detect_end(self, item: FaultItem, service_ok: bool) -> None:
        """The second half: a successful probe makes the item reachable (never the reverse). Applies to
        the item object, as Java does: an item removed meanwhile is not brought back."""
        if service_ok and not item.reachable_flag:
            self.cov[COV_DETECTOR_RESTORED_BROKER] += 1
            item.reachable_flag = True

    def _require_v5(self, what: str) -> None:
        if self.client_version != V5:
            raise TypeError(f"{what} does not exist in 4.9.8")


# --- MQFaultStrategy ---------------------------------------------------------------------------

class MQFaultStrategy:
    """client.latency.MQFaultStrategy with its LatencyFaultToleranceImpl (`latency_fault_tolerance`).

    `send_latency_fault_enable` (DefaultMQProducer.sendLatencyFaultEnable, default false): off,
    `update_fault_item` does nothing and selection ignores the fault items. The 5.x options are
    ClientConfig's `startDetectorEnable` (false), `detectTimeout` (200 ms), `detectInterval`
    (2000 ms); starting the detector every `DETECTOR_PERIOD_MS` is the caller's job.

    `rng` draws the start of an unset `which_item_worst`; `shuffle_rng` (default: `rng`) the 5.x
    `pickOneAtLeast` shuffle. `which_item_worst` is the stored value of the Java thread-local
    whichItemWorst (5.x keeps the field but never uses it)."""

    def __init__(self, client_version: str = V5, send_latency_fault_enable: bool = False, *,
                 start_detector_enable: bool = False, detect_timeout_ms: int = DETECT_TIMEOUT_MS,
                 detect_interval_ms: int = DETECT_INTERVAL_MS, which_item_worst: int | None = None,
                 rng: RandomSource | None = None, shuffle_rng: RandomSource | None = None,
                 coverage: list[int] | None = None) -> None:
        self.client_version = check_version(client_version)
        # the run's rare-state counts (models/coverage_points.py; a standalone strategy counts into its own)
        self.cov = coverage if coverage is not None else new_counter()
        if start_detector_enable and client_version == V4:
            raise ValueError("start_detector_enable is a 5.x option (4.9.8 has no detector)")
        self.send_latency_fault_enable = send_latency_fault_enable  # sendLatencyFaultEnable
        self.latency_max_ms: tuple[int, ...] = LATENCY_MAX_MS[client_version]  # latencyMax
        self.not_available_duration_ms: tuple[int, ...] = NOT_AVAILABLE_DURATION_MS[client_version]
        self.isolation_latency_ms = ISOLATION_LATENCY_MS[client_version]
        self.latency_fault_tolerance = LatencyFaultToleranceImpl(
            client_version, which_item_worst=which_item_worst, rng=rng, shuffle_rng=shuffle_rng,
            detect_timeout_ms=detect_timeout_ms, detect_interval_ms=detect_interval_ms,
            start_detector_enable=start_detector_enable, coverage=self.cov)

    # 5.x ClientConfig options, kept on the LatencyFaultToleranceImpl as in Java
    @property
    def start_detector_enable(self) -> bool:
        return self.latency_fault_tolerance.start_detector_enable

    @property
    def detect_timeout_ms(self) -> int:
        return self.latency_fault_tolerance.detect_timeout_ms

    @property
    def detect_interval_ms(self) -> int:
        return self.latency_fault_tolerance.detect_interval_ms

    @property
    def which_item_worst(self) -> int | None:
        return self.latency_fault_tolerance.which_item_worst

    @which_item_worst.setter
    def which_item_worst(self, value: int | None) -> None:
        self.latency_fault_tolerance.which_item_worst = value

    @property
    def fault_item_table(self) -> Mapping[str, FaultItem]:
        """The fault items by broker name, read-only, in insertion order (for reports)."""
        return MappingProxyType(self.latency_fault_tolerance.fault_item_table)

    def fault_item(self, broker_name: str) -> FaultItem | None:
        return self.latency_fault_tolerance.fault_item_table.get(broker_name)

    def compute_not_available_duration(self, current_latency_ms: int) -> int:
        """The duration of the last `latencyMax[i] <= latency`, scanning down; else 0 (negative latencies too)."""
        latency = java_long(current_latency_ms)
        for i in range(len(self.latency_max_ms) - 1, -1, -1):
            if latency >= self.latency_max_ms[i]:
                return self.not_available_duration_ms[i]
        return 0

    def update_fault_item(self, broker_name: str, current_latency_ms: int, isolation: bool, now_ms: int,
                          reachable: bool = True) -> None:
        """updateFaultItem: isolation looks up `isolation_latency_ms` (4.x 30000 -> 600 s, 5.x 10000 -> 10 s)
        instead of the latency, which is still stored. 4.x has no `reachable`."""
        if self.send_latency_fault_enable:
            latency_ms = self.isolation_latency_ms if isolation else current_latency_ms
            duration = self.compute_not_available_duration(latency_ms)
            if duration > 0:  # the broker is held unavailable for a while
                self.cov[COV_FAULT_BROKER_ISOLATED] += 1
            self.latency_fault_tolerance.update_fault_item(broker_name, current_latency_ms, duration, now_ms, reachable)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        return self.latency_fault_tolerance.is_available(broker_name, now_ms)

    def is_reachable(self, broker_name: str) -> bool:
        return self.latency_fault_tolerance.is_reachable(broker_name)

    def pick_one_at_least(self, now_ms: int) -> str | None:
        return self.latency_fault_tolerance.pick_one_at_least(now_ms)

    def remove(self, broker_name: str) -> None:
        self.latency_fault_tolerance.remove(broker_name)

    def detect_by_one_round(self, now_ms: int, resolve_master_addr: Callable[[str], str | None],
                            probe: Callable[[str], bool] | None) -> None:
        self.latency_fault_tolerance.detect_by_one_round(now_ms, resolve_master_addr, probe)

    def select_one_message_queue(self, tpi: TopicPublishInfo, last_broker_name: str | None, now_ms: int,
                                 reset_index: bool = False) -> MessageQueue:
        """selectOneMessageQueue of the version (4.9.8 has no `resetIndex`: ignored there)."""
        tpi.adopt_version(self.client_version)
        if self.client_version == V4:
            return self._select_v4(tpi, last_broker_name, now_ms)
        return self._select_v5(tpi, last_broker_name, now_ms, reset_index)

    def _select_v4(self, tpi: TopicPublishInfo, last_broker_name: str | None, now_ms: int) -> MessageQueue:
        """4.9.8: one increment, then `size` probes from it with a local `index++` (int wrap,
        `Math.abs`, a negative position -> 0) for an available broker, the last broker *not*
        avoided; then pickOneAtLeast: a writable QueueData with writeQueueNums > 0 gives one plain
        selection (its topic) and a new queue `(topic, broker, increment % writeQueueNums)`, else
        the item is removed; then one plain selection. Off: selectOneMessageQueue(lastBrokerName)."""
        if not self.send_latency_fault_enable:
            return tpi.select_one_message_queue(last_broker_name)
        lft = self.latency_fault_tolerance
        mqs = tpi.message_queue_list
        size = len(mqs)
        index = tpi.send_which_queue_index.increment_and_get()
        for _ in range(size):
            pos = java_rem(java_abs_int(index), size)
            index = java_int(index + 1)
            mq = mqs[max(pos, 0)]
            if lft.is_available(mq.broker_name, now_ms):
                return mq
        not_best_broker = lft.pick_one_at_least(now_ms)
        write_queue_nums = tpi.get_queue_id_by_broker(not_best_broker)
        if write_queue_nums > 0:  # so not_best_broker is not None
            try:
                mq = tpi.select_one_message_queue()
            except ZeroDivisionError:  # empty list: Java catches the ArithmeticException, falls through
                pass
            else:
                queue_id = java_rem(tpi.send_which_queue_index.increment_and_get(), write_queue_nums)
                self.cov[COV_PICK_ONE_AT_LEAST_CHOSEN] += 1
                return MessageQueue(mq.topic, not_best_broker, queue_id)  # type: ignore[arg-type]  # not None: above
        elif not_best_broker is not None:
            lft.remove(not_best_broker)
        # (not_best_broker None: Java's remove(null) throws NullPointerException, caught: same path)
        return tpi.select_one_message_queue()

    def _select_v5(self, tpi: TopicPublishInfo, last_broker_name: str | None, now_ms: int,
                   reset_index: bool) -> MessageQueue:
        """5.3.3: on, `resetIndex` re-randomises the index, then a pass over `size` increments for
        a broker available and not the last one, a second for reachable and not the last one, then
        one plain selection; off, a pass for not the last broker, then one plain selection."""
        lft = self.latency_fault_tolerance

        def broker_filter(mq: MessageQueue) -> bool:  # MQFaultStrategy.BrokerFilter
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                tpi.reset_index()
            mq = tpi.select_one_message_queue_filtered(lambda q: lft.is_available(q.broker_name, now_ms), broker_filter)
            if mq is not None:
                return mq
            mq = tpi.select_one_message_queue_filtered(lambda q: lft.is_reachable(q.broker_name), broker_filter)
            if mq is not None:
                self.cov[COV_REACHABLE_PASS_CHOSEN] += 1
                return mq
            return tpi.select_one_message_queue()
        mq = tpi.select_one_message_queue_filtered(broker_filter)
        return mq if mq is not None else tpi.select_one_message_queue()
