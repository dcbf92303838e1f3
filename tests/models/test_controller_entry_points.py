"""The Java-checked entry points of controller mode and POP (issue 40, item 5), each a pure function the
model itself uses, with vectors read off the 5.3.3 Java code:

- models.controller.elect_master — DefaultElectPolicy.elect (tryElect, the comparator with its `(int)`
  cast, TreeSet/HashSet order) as ReplicasInfoManager.electMaster calls it;
- models.broker.find_consistent_point / truncate_epochs — EpochFileCache.findConsistentPoint (on the
  caches AutoSwitchHAClient.doTruncate builds: initCacheFromEntries + setLastEpochEntryEndOffset) and
  truncateSuffixByOffset;
- models.broker.shrink_sync_state_set — AutoSwitchHAService.maybeShrinkSyncStateSet;
- models.broker.pop_init_offset — PopMessageProcessor.getInitOffset;

and, through the classes that use them, ReplicasInfoManager.alterSyncStateSet's
CONTROLLER_INVALID_REPLICAS (D7). The multi-broker election vectors whose answer depends on the
red-black tree were checked against the real JDK TreeSet with the 5.3.3 comparator (20 000 random
cases, ids 1–15, no difference); each is one where a plain sort and an unbalanced tree both answer
otherwise.
"""

from __future__ import annotations

import pytest

from models.broker import find_consistent_point, pop_init_offset, shrink_sync_state_set, truncate_epochs
from models.broker.auto_switch_ha import LONG_MAX_VALUE, EpochFile
from models.controller import elect_master
from models.controller.elect_policy import JavaTreeSet, java_int, java_long_hash_set_order
from models.controller.replicas_info import ReplicasInfoManager
from models.protocol import CONTROLLER_BROKER_NOT_ALIVE, CONTROLLER_INVALID_REPLICAS, SUCCESS

G31, G32 = 2**31, 2**32
INT_MAX = 2**31 - 1


def live(epoch: int = 1, max_offset: int = 0, priority: int = INT_MAX, alive: bool = True) -> dict:
    return {"alive": alive, "epoch": epoch, "max_offset": max_offset, "priority": priority}


def elect(sync, brokers, old=None, prefer=None, all_replicas=None, unclean=False):
    return elect_master(sync, all_replicas, old, prefer, brokers, unclean)


# --- DefaultElectPolicy.elect --------------------------------------------------------------------
@pytest.mark.parametrize(("brokers", "want"), [
    ({1: live(1, 100), 2: live(2, 50), 3: live(1, 200)}, 2),  # the higher epoch first
    ({1: live(1, 100), 2: live(1, 200), 3: live(1, 150)}, 2),  # then the higher max offset
    ({1: live(1, 100, 5), 2: live(1, 100, 1), 3: live(1, 100, 3)}, 2),  # then the lower priority
    ({1: live(1, 100, 0), 2: live(1, 100, 0), 3: live(1, 100, 0)}, 1),  # equals: the first inserted
    ({1: live(1, 100, alive=False), 2: live(1, 10), 3: live(1, 5)}, 2),  # not alive: not a candidate
    ({2: live(1, 10), 3: live(1, 50)}, 3),  # 1 has no heartbeat entry: not valid
])
def test_elect_master_orders_by_epoch_offset_priority(brokers: dict, want: int) -> None:
    assert elect({1, 2, 3}, brokers) == want


@pytest.mark.parametrize(("offset_1", "offset_2", "want"), [
    # 2 is inserted after 1 (HashSet order), so the tree asks compare(2, 1) = (int) (max1 - max2)
    (0, 5, 2),
    (0, G31 - 1, 2),
    (0, G31, 2),  # (int) -2^31 is still negative: right
    (0, G31 + 1, 1),  # (int) -(2^31 + 1) = 2^31 - 1 > 0: the smaller offset wins
    (0, G32 - 1, 1),
    (0, G32, 1),  # a gap of 2^32 ties: 2 is not added, 1 stays
    (0, G32 + 5, 2),  # (int) -(2^32 + 5) = -5: right again
    (G31 - 1, 0, 1),
    (G31, 0, 2),  # (int) 2^31 = -2^31: the smaller offset wins
    (3 * G31, G31, 1),  # a gap of 2^32 the other way: (int) 2^32 = 0, a tie: 1 stays
])
def test_elect_master_int_cast_of_the_offset_difference(offset_1: int, offset_2: int, want: int) -> None:
    assert elect({1, 2}, {1: live(1, offset_1), 2: live(1, offset_2)}) == want


@pytest.mark.parametrize(("offsets", "want"), [
    # JDK answers; a plain sort and an unbalanced binary tree give 3/5, 3/4, 2/4, 4/4
    ([4294967297, 4294967297, 6442450946, 3221225472, 6442450944], 1),
    ([1073741825, 3, 3221225475, 3221225472], 1),
    ([1073741825, 3221225474, 0, 2147483649], 1),
    ([1073741827, 3221225473, 2147483651, 3221225474, 1], 5),
])
def test_elect_master_follows_the_red_black_tree_when_the_cast_breaks_transitivity(offsets: list, want: int) -> None:
    brokers = {i + 1: live(1, off, 0) for i, off in enumerate(offsets)}
    assert elect(set(brokers), brokers) == want


@pytest.mark.parametrize(("one", "two", "want"), [
    # compare(2, 1): o2.epoch - o1.epoch = epoch1 - epoch2, in int (-1: a heartbeat without an epoch)
    (live(-1, 0, 0), live(INT_MAX, 0, 0), 2),  # -1 - INT_MAX = -2^31: still negative
    (live(-2, 0, 0), live(INT_MAX, 0, 0), 1),  # -2 - INT_MAX wraps to INT_MAX: the lower epoch wins
    # o1.priority - o2.priority = priority2 - priority1, in int
    (live(1, 0, INT_MAX), live(1, 0, -1), 2),
    (live(1, 0, INT_MAX), live(1, 0, -2), 1),  # wraps: the higher priority value wins
])
def test_elect_master_epoch_and_priority_differences_are_int(one: dict, two: dict, want: int) -> None:
    assert elect({1, 2}, {1: one, 2: two}) == want


def test_elect_master_keeps_a_valid_old_master_and_honours_a_preferred_broker() -> None:
    brokers = {1: live(1, 10), 2: live(5, 999), 3: live(1, 10)}
    assert elect({1, 2, 3}, brokers, old=1) == 1  # alive in the set: kept, whoever is ahead
    brokers[1]["alive"] = False
    assert elect({1, 2, 3}, brokers, old=1) == 2  # gone: the best of the others
    # preferBrokerId: chosen if valid, even over a valid old master; else nobody from this pool
    brokers[1]["alive"] = True
    assert elect({1, 2, 3}, brokers, old=1, prefer=3) == 3
    assert elect({1, 2, 3}, brokers, old=1, prefer=1) == 1
    assert elect({1, 2}, brokers, old=1, prefer=3) is None
    assert elect({1, 2}, brokers, old=1, prefer=3, all_replicas={1, 2, 3}, unclean=True) == 3
    # the old master outside the SyncStateSet is not kept by a clean election
    assert elect({2, 3}, brokers, old=1) == 2


def test_elect_master_unclean_pool_only_when_enabled_and_only_after_the_set() -> None:
    brokers = {1: live(1, 0, alive=False), 2: live(1, 0, alive=False), 3: live(9, 9999)}
    assert elect({1, 2}, brokers, all_replicas={1, 2, 3}) is None  # passed but not enabled: ignored
    assert elect({1, 2}, brokers, all_replicas={1, 2, 3}, unclean=True) == 3
    brokers[2]["alive"] = True
    assert elect({1, 2}, brokers, all_replicas={1, 2, 3}, unclean=True) == 2  # a member alive: the set first
    # an empty SyncStateSet (never elected): nobody, or the unclean pool
    assert elect(set(), brokers) is None and elect(None, brokers) is None
    assert elect(set(), brokers, all_replicas={1, 2, 3}, unclean=True) == 3
    # the old master alive outside the set is the unclean pool's old master
    brokers[2]["alive"] = False
    assert elect({2}, brokers, old=1, all_replicas={1, 2, 3}, unclean=True) == 3
    brokers[1]["alive"] = True
    assert elect({2}, brokers, old=1, all_replicas={1, 2, 3}, unclean=True) == 1


def test_java_collections_order() -> None:
    # HashSet<Long>: bucket order (17 lands in bucket 1, before 2); 13 entries: a 32-slot table
    assert java_long_hash_set_order([2, 17]) == [17, 2]
    assert java_long_hash_set_order(range(3, 40, 3)) == [33, 3, 36, 6, 39, 9, 12, 15, 18, 21, 24, 27, 30]
    assert java_long_hash_set_order([5, 1, 3]) == [1, 3, 5]
    # TreeSet with a transitive comparator: a sorted red-black tree, equals dropped
    tree = JavaTreeSet(lambda a, b: (a > b) - (a < b))
    added = [tree.add(k) for k in (5, 3, 8, 1, 4, 7, 9, 2, 6, 3)]
    assert added == [True] * 9 + [False]
    assert tree.in_order() == list(range(1, 10)) and tree.first() == 1
    assert java_int(G31) == -G31 and java_int(G32) == 0 and java_int(-G31 - 1) == INT_MAX


def test_replicas_info_elects_through_elect_master_with_the_cast() -> None:
    """The controller's own election (ReplicasInfoManager) follows the cast: of two members 2^31 + 1
    apart, the one with the smaller max offset wins."""
    m = ReplicasInfoManager(False)
    for i, addr in ((1, "b1"), (2, "b2"), (3, "b3")):
        m.register("g", i, addr)
    everyone = {"b1": (1, 0, 0), "b2": (1, 0, 0), "b3": (1, 0, 0)}.get
    assert m.elect("g", 1, everyone)[0] == SUCCESS
    assert m.alter("g", 1, 1, (1, 2, 3), 1, everyone) == SUCCESS
    code, group, _old = m.elect("g", -1, {"b2": (1, 0, 0), "b3": (1, G31 + 1, 0)}.get)
    assert (code, group.master_id) == (SUCCESS, 2)


def test_alter_sync_state_set_unregistered_member_is_invalid_replicas() -> None:
    """D7: a member the controller never registered → CONTROLLER_INVALID_REPLICAS; one registered but
    not alive → CONTROLLER_BROKER_NOT_ALIVE; the first offender in HashSet order decides."""
    m = ReplicasInfoManager(False)
    for i, addr in ((1, "b1"), (2, "b2"), (3, "b3")):
        m.register("g", i, addr)
    alive = {"b1": (1, 0, 0), "b2": (1, 0, 0), "b3": (1, 0, 0)}
    assert m.elect("g", 1, alive.get)[0] == SUCCESS
    assert m.alter("g", 1, 1, (1, 9), 1, alive.get) == CONTROLLER_INVALID_REPLICAS
    no_b2 = {k: v for k, v in alive.items() if k != "b2"}.get
    assert m.alter("g", 1, 1, (1, 2), 1, no_b2) == CONTROLLER_BROKER_NOT_ALIVE
    assert m.alter("g", 1, 1, (1, 2, 5), 1, no_b2) == CONTROLLER_BROKER_NOT_ALIVE  # 2 comes before 5
    assert m.alter("g", 1, 1, (1, 2, 17), 1, no_b2) == CONTROLLER_INVALID_REPLICAS  # 17 comes before 2
    assert m.sets["g"].members == (1,) and m.sets["g"].ss_epoch == 1


# --- EpochFileCache --------------------------------------------------------------------------------
@pytest.mark.parametrize(("local", "local_max", "master", "master_max", "want"), [
    ([(1, 0), (2, 100)], 300, [(1, 0), (2, 100)], 250, 250),  # same history: the smaller end
    ([(1, 0), (2, 100)], 250, [(1, 0), (2, 100)], 300, 250),
    ([(1, 0)], 300, [(1, 0), (2, 100)], 500, 100),  # the deposed master: cut at the new epoch's start
    ([(1, 0)], 60, [(1, 0), (2, 100)], 500, 60),  # a slave behind keeps all it has
    ([(1, 0), (2, 150)], 400, [(1, 0), (2, 100)], 500, 100),  # epoch 2 with another start: back to epoch 1
    ([(3, 0)], 400, [(1, 0), (2, 100)], 500, -1),  # no common epoch
    ([], 0, [(1, 0)], 500, -1),  # an empty local file finds none (doTruncate skips it first)
    ([(1, 0)], 10, [], 0, -1),
    ([(1, 0), (2, 500)], 400, [(1, 0), (2, 500)], 800, 800),  # start past the max: end stays Long.MAX_VALUE
    ([(1, 0), (2, 500)], 400, [(1, 0), (2, 500)], 450, LONG_MAX_VALUE),
    ([(1, 0), (2, 100)], 100, [(1, 0), (2, 100)], 100, 100),  # exact: start == max offset
    ([(1, 0), (1, 50), (2, 100)], 300, [(1, 50), (2, 90)], 300, 90),  # repeated epoch: the last entry
])
def test_find_consistent_point(local: list, local_max: int, master: list, master_max: int, want: int) -> None:
    assert find_consistent_point(local, local_max, master, master_max) == want
    if local:  # the slave's EpochFile uses it
        e = EpochFile()
        e.entries = list(local)
        assert e.consistent_point(local_max, tuple(master), master_max) == want


@pytest.mark.parametrize(("epochs", "offset", "want"), [
    ([(1, 0), (2, 100), (3, 200)], 200, [(1, 0), (2, 100)]),  # start >= offset goes
    ([(1, 0), (2, 100), (3, 200)], 201, [(1, 0), (2, 100), (3, 200)]),
    ([(1, 0), (2, 100), (3, 200)], 1, [(1, 0)]),
    ([(1, 0), (2, 100), (3, 200)], 0, []),
    ([], 100, []),
    ([(2, 100), (1, 0)], 150, [(1, 0), (2, 100)]),  # a TreeMap: epoch order
])
def test_truncate_epochs(epochs: list, offset: int, want: list) -> None:
    assert truncate_epochs(epochs, offset) == want
    e = EpochFile()
    e.entries = list(epochs)
    e.truncate_suffix_by_offset(offset)
    assert e.entries == want


# --- maybeShrinkSyncStateSet --------------------------------------------------------------------------
@pytest.mark.parametrize(("members", "master", "caught", "now", "want"), [
    ({1, 2, 3}, 1, {2: 1000, 3: 1000}, 16_000, {1, 2, 3}),  # exactly the limit behind: stays (>)
    ({1, 2, 3}, 1, {2: 1000, 3: 1000}, 16_001, {1}),
    ({1, 2, 3}, 1, {2: 1000, 3: 5000}, 16_001, {1, 3}),
    ({1, 2, 3}, 1, {2: 10_000}, 16_001, {1, 2}),  # 3 has no entry (never connected): out
    ({1}, 1, {}, 99_999, {1}),  # the master needs no entry
    (set(), 1, {2: 0}, 99_999, set()),  # an empty set stays empty
    ({1, 2}, 1, {1: 0, 2: 20_000}, 20_000, {2}),  # the master's own stale entry is not exempt (Java)
    ({1, 2}, None, {2: 20_000}, 20_000, {2}),  # no localBrokerId: the master without an entry goes too
    ({1, 2}, 1, {2: 20_000, 7: 0}, 20_000, {1, 2}),  # entries of non-members do not matter
])
def test_shrink_sync_state_set(members: set, master, caught: dict, now: int, want: set) -> None:
    assert shrink_sync_state_set(members, master, caught, now, 15_000) == want


# --- getInitOffset ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("topic", "mode", "low", "high", "check", "in_mem", "want"), [
    ("orders", "MIN", 5, 100, True, True, 5),
    ("orders", "MIN", 0, 100, False, False, 0),
    ("%RETRY%billing_orders", "MAX", 7, 100, True, True, 7),  # a retry topic reads from its min offset
    ("%RETRY%billing", "MAX", 3, 100, True, False, 3),
    ("orders", "MAX", 0, 100, True, True, 0),  # the head is in memory: from 0
    ("orders", "MAX", 0, 100, True, False, 99),  # not in memory: the last one
    ("orders", "MAX", 3, 100, True, True, 99),  # min offset > 0: the last one
    ("orders", "MAX", 0, 100, False, True, 99),  # the check is off
    ("orders", "MAX", 0, 0, True, False, 0),  # empty queue: not -1
    ("orders", "MAX", 0, 1, False, False, 0),
    ("%DLQ%billing", "MAX", 0, 10, True, False, 9),
    ("RETRY%x", "MAX", 4, 10, True, False, 9),  # not the %RETRY% prefix
])
def test_pop_init_offset(topic: str, mode: str, low: int, high: int, check: bool, in_mem: bool, want: int) -> None:
    assert pop_init_offset(topic, mode, low, high, check, in_mem) == want
