"""client.consumer.rebalance: the six AllocateMessageQueueStrategy implementations and `allocate`,
their one entry point (for the models and for checks against the Java classes).

    allocate(strategy, consumer_group, current_cid, mq_all, cid_all, **options) -> list[MessageQueue]

| strategy              | Java class (4.9.8 = 5.3.3)            | options                                  |
|-----------------------|---------------------------------------|------------------------------------------|
| "AVG"                 | AllocateMessageQueueAveragely         |                                          |
| "AVG_BY_CIRCLE"       | AllocateMessageQueueAveragelyByCircle |                                          |
| "CONFIG"              | AllocateMessageQueueByConfig          | message_queue_list                       |
| "MACHINE_ROOM"        | AllocateMessageQueueByMachineRoom     | consumeridcs                             |
| "CONSISTENT_HASH"     | AllocateMessageQueueConsistentHash    | virtual_node_cnt (10)                    |
| "MACHINE_ROOM_NEARBY" | AllocateMachineRoomNearby             | inner ("AVG"), broker_room, consumer_room|

Every option name is accepted by every strategy and ignored where it does not apply, so NEARBY
passes its inner strategy's options through; an unknown option name is a TypeError.

The strategies never sort or copy-sort their inputs: the caller sorts (RebalanceImpl sorts
`mqAll` by MessageQueue order and `cidAll` as strings), and the output is in the Java classes'
output-list order. AVG, AVG_BY_CIRCLE and CONSISTENT_HASH give each queue to exactly one member
when all members see the same view of distinct client ids (a client id listed twice breaks it:
AVG and AVG_BY_CIRCLE use its first position, and the hash ring gives it more replicas). `ValueError` is raised exactly where Java throws IllegalArgumentException:
an empty (or None) `current_cid`, `mq_all` or `cid_all` (AbstractAllocateMessageQueueStrategy.
check, which every strategy but CONFIG calls first), `virtual_node_cnt < 0` (the constructor, so
before the check), and a machine room resolver answering None or "" for a queue or a member
(NEARBY). A caller that is not in `cid_all` gets an empty list (Java logs "[BUG]" and returns).

Where Java would fail on a null instead, this module decides:
- CONFIG without `message_queue_list` returns [] (Java returns null, which RebalanceImpl skips);
- MACHINE_ROOM without `consumeridcs` allocates nothing (Java: NullPointerException as soon as a
  broker name has the `<room>@<name>` form);
- MACHINE_ROOM_NEARBY without `broker_room` or `consumer_room` is a TypeError (Java's constructor
  throws NullPointerException); inner CONFIG without a list adds nothing (Java: addAll(null) NPE);
- an unknown strategy name, or NEARBY as its own inner strategy, is a ValueError (Java has no
  names; nesting NEARBY with the same resolver would allocate exactly as without nesting).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from typing import Any

from models.message import MessageQueue

Strategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
OPTIONS = ("message_queue_list", "consumeridcs", "virtual_node_cnt", "inner", "broker_room", "consumer_room")
DEFAULT_VIRTUAL_NODE_CNT = 10  # AllocateMessageQueueConsistentHash() → this(10)
NEARBY = "MACHINE_ROOM_NEARBY"


def allocate(strategy: str, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
             cid_all: Sequence[str], **options: Any) -> list[MessageQueue]:
    """The queues `strategy` gives `current_cid` (AllocateMessageQueueStrategy.allocate)."""
    return _strategy(strategy, **options)(consumer_group, current_cid, mq_all, cid_all)


def _strategy(strategy: str, **options: Any) -> Strategy:
    """The strategy object, after its constructor's checks (which come before `check`)."""
    unknown = [name for name in options if name not in OPTIONS]
    if unknown:
        raise TypeError(f"unknown allocation option(s) {', '.join(unknown)} (options: {', '.join(OPTIONS)})")
    if strategy == "AVG":
        return averagely
    if strategy == "AVG_BY_CIRCLE":
        return averagely_by_circle
    if strategy == "CONFIG":
        return by_config(options.get("message_queue_list"))
    if strategy == "MACHINE_ROOM":
        return by_machine_room(options.get("consumeridcs"))
    if strategy == "CONSISTENT_HASH":
        return consistent_hash(options.get("virtual_node_cnt", DEFAULT_VIRTUAL_NODE_CNT))
    if strategy == NEARBY:
        inner = options.get("inner", "AVG")
        if inner == NEARBY:
            raise ValueError(f"{NEARBY} cannot be its own inner strategy")
        return machine_room_nearby(_strategy(inner, **options), options.get("broker_room"),
                                   options.get("consumer_room"))
    raise ValueError(f"unknown allocation strategy {strategy!r} "
                     f"(AVG, AVG_BY_CIRCLE, CONFIG, MACHINE_ROOM, CONSISTENT_HASH, {NEARBY})")


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """AbstractAllocateMessageQueueStrategy.check: raise on empty input, False if not a member."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


def averagely(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
              cid_all: Sequence[str]) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely ("AVG"): contiguous blocks, first n % c get one extra."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    n, c = len(mq_all), len(cid_all)
    idx = cid_all.index(current_cid)
    mod = n % c
    if n <= c:
        size = 1
    elif mod > 0 and idx < mod:
        size = n // c + 1
    else:
        size = n // c
    start = idx * size if mod > 0 and idx < mod else idx * size + mod
    count = min(size, n - start)
    return list(mq_all[start:start + count]) if count > 0 else []


def averagely_by_circle(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                        cid_all: Sequence[str]) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE"): queue i → consumer i mod c."""
    if not _check(current_cid, mq_all, cid_all):
        return []
    idx = cid_all.index(current_cid)
    return list(mq_all[idx::len(cid_all)])


def md5_hash(key: str) -> int:
    """ConsistentHashRouter.MD5Hash: digest bytes 0..3 as a big-endian unsigned 32-bit value
    (5.x hashes the UTF-8 bytes; 4.x the platform charset, the same for ASCII keys)."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def hash_ring(cid_all: Sequence[str], virtual_node_cnt: int) -> dict[int, str]:
    """ConsistentHashRouter's ring, hash → client id. addNode names a node's replicas from the
    number it already has on the ring (getExistingReplicas), so a client id listed twice gets
    `<cid>-10 … <cid>-19` the second time; an equal hash overwrites the earlier replica."""
    ring: dict[int, str] = {}
    replicas: dict[str, int] = {}
    for cid in cid_all:
        first = replicas.get(cid, 0)
        for i in range(first, first + virtual_node_cnt):
            h = md5_hash(f"{cid}-{i}")
            previous = ring.get(h)
            if previous is not None:
                replicas[previous] -= 1
            ring[h] = cid
            replicas[cid] = replicas.get(cid, 0) + 1
    return ring


def consistent_hash(virtual_node_cnt: int = DEFAULT_VIRTUAL_NODE_CNT) -> Strategy:
    """AllocateMessageQueueConsistentHash ("CONSISTENT_HASH") with the default MD5 hash: a queue
    goes to the first ring entry at or after hash(str(mq)), wrapping to the smallest."""
    if virtual_node_cnt < 0:
        raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        ring = hash_ring(cid_all, virtual_node_cnt)
        keys = sorted(ring)
        out = []
        for mq in mq_all:
            pos = bisect_left(keys, md5_hash(str(mq)))
            if keys and ring[keys[pos % len(keys)]] == current_cid:
                out.append(mq)
        return out

    return allocate


def by_config(queues: Sequence[MessageQueue] | None) -> Strategy:
    """AllocateMessageQueueByConfig ("CONFIG"): the configured list for every caller, no check."""
    configured = list(queues or ())

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(configured)

    return allocate


def java_split(text: str, sep: str) -> list[str]:
    """String.split(sep) for a one-character, non-regex `sep`: trailing empty parts removed."""
    parts = text.split(sep)
    if len(parts) == 1:
        return parts  # no match: the whole string, even if empty
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def by_machine_room(consumeridcs: Collection[str] | None) -> Strategy:
    """AllocateMessageQueueByMachineRoom ("MACHINE_ROOM"): only queues of brokers named
    `<room>@<name>` (split on '@' into exactly two parts, Java's split) with the room in
    `consumeridcs`; `m // c` each in blocks, the remainder one each to the first `m % c`."""
    rooms = dict.fromkeys(consumeridcs or ())

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        idx = cid_all.index(current_cid)
        eligible = [mq for mq in mq_all
                    if len(parts := java_split(mq.broker_name, "@")) == 2 and parts[0] in rooms]
        c = len(cid_all)
        q, r = divmod(len(eligible), c)
        out = eligible[q * idx:q * idx + q]
        if r > idx:
            out.append(eligible[idx + q * c])
        return out

    return allocate


def java_order(text: str) -> bytes:
    """Sort key of String.compareTo (UTF-16 code units), as TreeMap<String, …> orders keys."""
    return text.encode("utf-16-be", "surrogatepass")


def _by_room(items: Sequence[Any], resolve: Callable[[Any], str | None], what: str) -> dict[str, list[Any]]:
    """Items grouped by the room `resolve` gives, in input order; no room → ValueError (Java's IAE)."""
    groups: dict[str, list[Any]] = {}
    for item in items:
        room = resolve(item)
        if not room:
            raise ValueError(f"Machine room is null for {what} {item}")
        groups.setdefault(room, []).append(item)
    return groups


def machine_room_nearby(inner: Strategy, broker_room: Callable[[MessageQueue], str | None] | None,
                        consumer_room: Callable[[str], str | None] | None) -> Strategy:
    """AllocateMachineRoomNearby ("MACHINE_ROOM_NEARBY", getName "MACHINE_ROOM_NEARBY-<inner>"):
    queues and members grouped by room; the caller gets `inner` over its own room's queues and
    members, then, for each room with queues but no members, in room-name order, `inner` over that
    room's queues and all members. Every queue is owned exactly once when all members see the same
    view (sorted or not) of distinct client ids, the resolvers answer alike for all, and `inner`
    covers each queue once (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH); a room's queues go only to its
    own members if it has any. Inner MACHINE_ROOM covers only its eligible queues; inner CONFIG
    gives its list to every member once per room it allocates."""
    if broker_room is None or consumer_room is None:
        raise TypeError("MACHINE_ROOM_NEARBY needs broker_room and consumer_room (machineRoomResolver is null)")

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        mr2mq = _by_room(mq_all, broker_room, "mq")
        mr2c = _by_room(cid_all, consumer_room, "consumer id")
        current_room = consumer_room(current_cid)
        out = []
        if current_room and (own := mr2mq.pop(current_room, None)):
            out += inner(group, current_cid, own, mr2c[current_room])
        for room in sorted(mr2mq, key=java_order):
            if room not in mr2c:  # no member there: all members share its queues
                out += inner(group, current_cid, mr2mq[room], cid_all)
        return out

    return allocate
