"""client.consumer.rebalance: the five AllocateMessageQueueStrategy implementations (pure).

Every function takes `(group, current_cid, mq_all, cid_all)` with inputs already sorted by the
caller (RebalanceImpl sorts `mqAll` by MessageQueue order and `cidAll` as strings) and returns
the queues for `current_cid`, in output-list order, exactly as the Java classes do.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Sequence

from models.message import MessageQueue

Strategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


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
    """ConsistentHashRouter.MD5Hash: digest bytes 0..3 as a big-endian unsigned 32-bit value."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def consistent_hash(virtual_node_cnt: int = 10) -> Strategy:
    """AllocateMessageQueueConsistentHash ("CONSISTENT_HASH") with the default MD5 hash."""
    if virtual_node_cnt < 0:
        raise ValueError("virtualNodeCnt must be >= 0")

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(virtual_node_cnt):
                ring[md5_hash(f"{cid}-{i}")] = cid  # a later equal hash overwrites
        keys = sorted(ring)
        out = []
        for mq in mq_all:
            pos = bisect_left(keys, md5_hash(str(mq)))
            if keys and ring[keys[pos % len(keys)]] == current_cid:
                out.append(mq)
        return out

    return allocate


def by_config(queues: Sequence[MessageQueue]) -> Strategy:
    """AllocateMessageQueueByConfig ("CONFIG"): the configured list for every caller, no check."""

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(queues)

    return allocate


def by_machine_room(consumeridcs: Sequence[str]) -> Strategy:
    """AllocateMessageQueueByMachineRoom ("MACHINE_ROOM"): brokers named `<room>@<name>`."""
    rooms = set(consumeridcs)

    def allocate(group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        idx = cid_all.index(current_cid)
        eligible = [mq for mq in mq_all
                    if len(parts := mq.broker_name.split("@")) == 2 and parts[0] in rooms]
        c = len(cid_all)
        q, r = divmod(len(eligible), c)
        out = eligible[q * idx:q * idx + q]
        if r > idx:
            out.append(eligible[idx + q * c])
        return out

    return allocate


def make_strategy(name: str, virtual_node_cnt: int = 10, config_queues: Sequence[MessageQueue] = (),
                  consumeridcs: Sequence[str] = ()) -> Strategy:
    if name == "AVG":
        return averagely
    if name == "AVG_BY_CIRCLE":
        return averagely_by_circle
    if name == "CONSISTENT_HASH":
        return consistent_hash(virtual_node_cnt)
    if name == "CONFIG":
        return by_config(config_queues)
    if name == "MACHINE_ROOM":
        return by_machine_room(consumeridcs)
    raise ValueError(f"unknown allocation strategy {name!r}")
