"""controller.elect.impl.DefaultElectPolicy.elect (5.3.3), as a pure function the controller uses
(replicas_info.py), with the Java collections whose behaviour decides the result.

`elect_master` tries the SyncStateSet, then (only with `enableElectUncleanMaster`, as
ReplicasInfoManager.electMaster passes `allReplicaBrokers` only then) every registered broker.
Each try (tryElect):
1. keeps the brokers the validPredicate accepts — DefaultBrokerHeartbeatManager.isBrokerActive:
   an entry in the controller's heartbeat table whose timeout has not run out (`alive`); a broker
   without an entry is not valid;
2. the old master among them, and no preferred broker (or the old master preferred): the old
   master;
3. a preferred broker (`preferBrokerId`, an admin's designated election): it if valid, else none
   (the unclean pool is tried next);
4. otherwise the first of a `TreeSet<BrokerLiveInfo>` ordered by the comparator: epoch
   descending (`o2.epoch - o1.epoch`, int arithmetic), then max offset descending as
   `(int) (o2.maxOffset - o1.maxOffset)` — the low 32 bits of the difference, so a gap in
   [2^31, 2^32) sorts the other way and a gap of 2^32 ties —, then electionPriority ascending
   (`o1.priority - o2.priority`, int). Equal elements are not added: the first inserted stays.
   Insertion follows the iteration order of the filtered set (Collectors.toSet: a
   java.util.HashSet<Long>), and the comparator not being transitive (the int cast), the
   TreeSet's red-black insertion is reproduced step by step: `first()` is the leftmost node.

Simplified: ids that fall in the same HashSet bucket (ids a multiple of the table size apart, the
table being 16 slots up to 12 candidates) are taken in ascending order; Java takes them in the
order of the set they were copied from. Controller ids start at 1 and a group has few replicas,
so no realistic group meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
HASH_MAP_DEFAULT_CAPACITY = 16  # java.util.HashMap DEFAULT_INITIAL_CAPACITY (load factor 0.75)


def java_int(value: int) -> int:
    """`(int) value`: the low 32 bits, two's complement."""
    value &= _MASK32
    return value - (1 << 32) if value >= 1 << 31 else value


def java_long_hash_set_order(ids: Iterable[int]) -> list[int]:
    """Iteration order of a java.util.HashSet<Long> built by adding `ids` (module docstring)."""
    ids = list(ids)
    capacity = HASH_MAP_DEFAULT_CAPACITY
    while len(ids) > capacity * 3 // 4:  # HashMap.resize when ++size > threshold
        capacity *= 2

    def bucket(value: int) -> int:
        u = value & _MASK64
        h = (u ^ (u >> 32)) & _MASK32  # Long.hashCode
        return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash spread, then the table index

    return sorted(ids, key=lambda v: (bucket(v), v))


def compare_live_info(o1: tuple[int, Mapping[str, Any]], o2: tuple[int, Mapping[str, Any]]) -> int:
    """DefaultElectPolicy's comparator on (broker id, live info) pairs, Java's int arithmetic."""
    a, b = o1[1], o2[1]
    if a["epoch"] == b["epoch"]:
        if a["max_offset"] == b["max_offset"]:
            return java_int(a["priority"] - b["priority"])
        return java_int(b["max_offset"] - a["max_offset"])
    return java_int(b["epoch"] - a["epoch"])


class _Node:
    __slots__ = ("key", "left", "right", "parent", "black")

    def __init__(self, key: Any, parent: _Node | None) -> None:
        self.key = key
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.parent = parent
        self.black = True


class JavaTreeSet:
    """java.util.TreeSet with a comparator: TreeMap.put and fixAfterInsertion (red-black), so that
    a comparator that is not transitive gives Java's answer."""

    def __init__(self, compare: Callable[[Any, Any], int]) -> None:
        self.compare = compare
        self.root: _Node | None = None

    def add(self, key: Any) -> bool:
        """False when an equal element (compare 0) is already there: the set keeps it."""
        t = self.root
        if t is None:
            self.root = _Node(key, None)
            return True
        while True:
            c = self.compare(key, t.key)
            if c == 0:
                return False
            nxt = t.left if c < 0 else t.right
            if nxt is None:
                node = _Node(key, t)
                if c < 0:
                    t.left = node
                else:
                    t.right = node
                self._fix_after_insertion(node)
                return True
            t = nxt

    def first(self) -> Any:
        node = self.root
        if node is None:
            return None
        while node.left is not None:
            node = node.left
        return node.key

    def in_order(self) -> list[Any]:
        out: list[Any] = []
        stack: list[_Node] = []
        node = self.root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            out.append(node.key)
            node = node.right
        return out

    def _rotate(self, p: _Node, left: bool) -> None:
        """rotateLeft (left) / rotateRight."""
        child = p.right if left else p.left
        if child is None:
            return
        inner = child.left if left else child.right
        if left:
            p.right = inner
        else:
            p.left = inner
        if inner is not None:
            inner.parent = p
        child.parent = p.parent
        if p.parent is None:
            self.root = child
        elif p.parent.left is p:
            p.parent.left = child
        else:
            p.parent.right = child
        if left:
            child.left = p
        else:
            child.right = p
        p.parent = child

    def _fix_after_insertion(self, x: _Node) -> None:
        """TreeMap.fixAfterInsertion (a red parent is never the root, so a grandparent exists)."""
        x.black = False
        while x is not self.root and x.parent is not None and not x.parent.black:
            parent = x.parent
            grand = parent.parent
            if grand is None:
                break
            on_left = parent is grand.left
            uncle = grand.right if on_left else grand.left
            if uncle is not None and not uncle.black:  # colorOf(y) == RED
                parent.black, uncle.black, grand.black = True, True, False
                x = grand
                continue
            if x is (parent.right if on_left else parent.left):  # x = parentOf(x); rotate x up
                x, parent = parent, x
                self._rotate(x, on_left)
            parent.black = True
            grand.black = False
            self._rotate(grand, not on_left)
        if self.root is not None:
            self.root.black = True


def _valid(brokers: Mapping[int, Mapping[str, Any]], broker_id: int) -> bool:
    info = brokers.get(broker_id)
    return info is not None and bool(info["alive"])


def _try_elect(pool: Iterable[int], old_master: int | None, prefer: int | None,
               brokers: Mapping[int, Mapping[str, Any]]) -> int | None:
    """DefaultElectPolicy.tryElect."""
    valid = java_long_hash_set_order({i for i in pool if _valid(brokers, i)})
    if not valid:
        return None
    if old_master is not None and old_master in valid and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in valid else None
    tree = JavaTreeSet(compare_live_info)
    for broker_id in valid:
        tree.add((broker_id, brokers[broker_id]))
    return tree.first()[0]


def elect_master(sync_state_brokers: Iterable[int] | None, all_replica_brokers: Iterable[int] | None,
                 old_master: int | None, broker_id: int | None, brokers: Mapping[int, Mapping[str, Any]],
                 enable_elect_unclean_master: bool) -> int | None:
    """DefaultElectPolicy.elect: the new master's id, or None (module docstring).

    `brokers`: id → {"alive", "epoch", "max_offset", "priority"} (the controller's heartbeat
    table); `broker_id`: preferBrokerId (None: an ordinary election); `all_replica_brokers` is
    consulted only when `enable_elect_unclean_master` is true."""
    pool_all = all_replica_brokers if enable_elect_unclean_master else None
    if sync_state_brokers is not None:
        new = _try_elect(sync_state_brokers, old_master, broker_id, brokers)
        if new is not None:
            return new
    if pool_all is not None:
        return _try_elect(pool_all, old_master, broker_id, brokers)
    return None
