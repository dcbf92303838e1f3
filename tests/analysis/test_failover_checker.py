"""The failover checker (analysis/checkers/failover_checker.py) on scripted record timelines: time without a
writable master per broker group (classic mode: the configured master down; controller mode: no
node in master role), from the group's first writable instant; two masters at once; the groups
without a master at the end; elections and failovers."""

from __future__ import annotations

from analysis.checkers.failover_checker import MAX_ELECTIONS, FailoverChecker
from models.records import BROKER_ROLE, CONTROLLER_ELECTED
from sim.trace import NODE_CRASHED, NODE_RESTARTED

S = 1_000_000  # µs
GROUPS = {"broker-a": ["broker-a", "broker-a-s1", "broker-a-s2"], "broker-b": ["broker-b", "broker-b-s1"]}


def crashed(t: int, node: str, power_loss: bool = False) -> tuple:
    return (t, node, NODE_CRASHED, power_loss)


def restarted(t: int, node: str) -> tuple:
    return (t, node, NODE_RESTARTED, 1)


def role(t: int, node: str, what: str, epoch: int = 1) -> tuple:
    return (t, node, BROKER_ROLE, node.rsplit("-s", 1)[0] if "-s" in node else node, what, epoch)


def elected(t: int, group: str, master: str, old: str = "", epoch: int = 1, reason: str = "elect") -> tuple:
    return (t, "controller-1", CONTROLLER_ELECTED, group, master, old, epoch, reason)


def startup(t: int = S) -> list[tuple]:
    """Controller mode's start-up: both groups get their configured master elected at `t`."""
    return [elected(t, "broker-a", "broker-a"), role(t, "broker-a", "master"), role(t, "broker-a-s1", "slave"),
            elected(t, "broker-b", "broker-b"), role(t, "broker-b", "master"), role(t, "broker-b-s1", "slave")]


def results(records: list[tuple], controller: bool, end_us: int, chunk: int = 2) -> dict:
    checker = FailoverChecker(GROUPS, controller)
    records = sorted(records, key=lambda r: r[0])  # stable: ties keep their order
    for start in range(0, len(records), chunk):  # fed in chunks, as the Tracer does
        checker.feed(records[start:start + chunk])
    return checker.results(end_us)


def test_controller_mode_master_crash_then_a_new_master_12_s_later() -> None:
    """The master crashes at 10 s, the controller elects a slave at 22 s: 12 s unwritable, one
    failover; the start-up election (nothing before it is writable) is neither."""
    records = [*startup(), crashed(10 * S, "broker-a"),
               elected(22 * S, "broker-a", "broker-a-s1", "broker-a", 2, "master_inactive"),
               role(22 * S, "broker-a-s1", "master", 2)]
    out = results(records, controller=True, end_us=60 * S)
    assert out["failovers"] == 1
    assert out["unwritable_s"] == {"broker-a": 12.0, "broker-b": 0.0}
    assert out["unwritable_at_end"] == []
    assert out["two_masters_s"] == {"broker-a": 0.0, "broker-b": 0.0}
    assert out["elections"][-1] == {"t_ms": 22_000.0, "broker_name": "broker-a", "master": "broker-a-s1",
                                    "old_master": "broker-a", "epoch": 2, "reason": "master_inactive"}
    assert len(out["elections"]) == 3
    # the old master restarts fenced, then rejoins as a slave: still one master, no outage
    later = records + [restarted(30 * S, "broker-a"), role(30 * S, "broker-a", "fenced", 2),
                       role(31 * S, "broker-a", "slave", 2)]
    assert results(later, controller=True, end_us=60 * S)["unwritable_s"]["broker-a"] == 12.0


def test_classic_mode_master_down_from_crash_to_restart() -> None:
    """Classic mode: the configured master crashes at 10 s and serves again at 25 s: 15 s; a
    slave's crash costs nothing; no controller: failovers and two_masters_s null."""
    records = [crashed(10 * S, "broker-a", power_loss=True), crashed(12 * S, "broker-b-s1"),
               restarted(25 * S, "broker-a"), restarted(26 * S, "broker-b-s1"),
               role(11 * S, "broker-a-s1", "master")]  # ignored: no controller mode
    out = results(records, controller=False, end_us=60 * S)
    assert out == {"failovers": None, "unwritable_s": {"broker-a": 15.0, "broker-b": 0.0}, "unwritable_at_end": [],
                   "two_masters_s": None, "elections": []}


def test_two_masters_overlap_while_the_old_one_is_partitioned() -> None:
    """A partitioned old master keeps acting until it learns its new role: two masters from the
    new one's election (20 s) to the old one's demotion (23.5 s); never unwritable."""
    records = [*startup(), elected(20 * S, "broker-a", "broker-a-s1", "broker-a", 2, "master_inactive"),
               role(20 * S, "broker-a-s1", "master", 2), role(23_500_000, "broker-a", "slave", 2)]
    out = results(records, controller=True, end_us=40 * S)
    assert out["two_masters_s"] == {"broker-a": 3.5, "broker-b": 0.0}
    assert out["unwritable_s"] == {"broker-a": 0.0, "broker-b": 0.0} and out["failovers"] == 1
    # still two at the end: counted up to the end
    out = results(records[:-1], controller=True, end_us=40 * S)
    assert out["two_masters_s"]["broker-a"] == 20.0


def test_start_up_is_not_an_outage() -> None:
    """No master before the first election: not counted, in either group, however late it comes."""
    records = [elected(3 * S, "broker-a", "broker-a"), role(3 * S, "broker-a", "master"),
               elected(9 * S, "broker-b", "broker-b"), role(9 * S, "broker-b", "master")]
    out = results(records, controller=True, end_us=30 * S)
    assert out["unwritable_s"] == {"broker-a": 0.0, "broker-b": 0.0}
    assert out["failovers"] == 0 and out["unwritable_at_end"] == []


def test_unwritable_at_the_end_and_a_group_never_writable() -> None:
    """A run ending during an outage counts it up to the end and names the group; a group that never
    had a master counts 0 s and is named too. Re-electing the same master after a masterless gap is
    no failover."""
    records = [elected(S, "broker-a", "broker-a"), role(S, "broker-a", "master"),
               crashed(40 * S, "broker-a"), elected(41 * S, "broker-a", "", "broker-a", 2, "no_alive_replica")]
    out = results(records, controller=True, end_us=50 * S)
    assert out["unwritable_s"] == {"broker-a": 10.0, "broker-b": 0.0}
    assert out["unwritable_at_end"] == ["broker-a", "broker-b"]
    assert out["failovers"] == 0
    back = records + [restarted(45 * S, "broker-a"), elected(46 * S, "broker-a", "broker-a", "", 3, "elect"),
                      role(46 * S, "broker-a", "master", 3)]
    out = results(back, controller=True, end_us=50 * S)
    assert (out["unwritable_s"]["broker-a"], out["unwritable_at_end"], out["failovers"]) == (6.0, ["broker-b"], 0)
    classic = results([crashed(40 * S, "broker-b")], controller=False, end_us=50 * S)
    assert classic["unwritable_s"] == {"broker-a": 0.0, "broker-b": 10.0} and classic["unwritable_at_end"] == ["broker-b"]


def test_failovers_count_elections_that_move_the_mastership() -> None:
    """A failover: an election naming another master than the previous one (the record's
    old_master, or the last master named when old_master is empty)."""
    records = [*startup(), elected(10 * S, "broker-a", "broker-a-s1", "broker-a", 2),
               elected(20 * S, "broker-a", "", "broker-a-s1", 3),
               elected(30 * S, "broker-a", "broker-a-s2", "", 4),  # after a gap, another node: a failover
               elected(40 * S, "broker-a", "broker-a-s2", "broker-a-s2", 4)]  # the same master again: not one
    assert results(records, controller=True, end_us=50 * S)["failovers"] == 2


def test_elections_are_capped_results_are_repeatable_and_chunking_does_not_matter() -> None:
    many = [elected(i * S, "broker-a", f"broker-a{'-s1' if i % 2 else ''}") for i in range(1, MAX_ELECTIONS + 20)]
    out = results(many, controller=True, end_us=500 * S)
    assert len(out["elections"]) == MAX_ELECTIONS and out["failovers"] == MAX_ELECTIONS + 18
    records = [*startup(), crashed(10 * S, "broker-a"), role(22 * S, "broker-a-s1", "master", 2)]
    checker = FailoverChecker(GROUPS, True)
    checker.feed(sorted(records, key=lambda r: r[0]))
    assert checker.results(30 * S) == checker.results(30 * S) == results(records, True, 30 * S, chunk=1)
    assert checker.results(30 * S)["unwritable_s"]["broker-a"] == 12.0


def test_a_node_outside_the_groups_counts_for_the_group_its_role_names() -> None:
    records = [*startup(), crashed(10 * S, "broker-a"), (12 * S, "broker-a-s9", BROKER_ROLE, "broker-a", "master", 2),
               (13 * S, "stranger", BROKER_ROLE, "broker-z", "master", 1)]  # no such group: ignored
    out = results(records, controller=True, end_us=20 * S)
    assert out["unwritable_s"] == {"broker-a": 2.0, "broker-b": 0.0} and "broker-z" not in out["unwritable_s"]


def test_explain_names_the_truncation_and_the_election_before_it() -> None:
    """`rmqsim explain`'s reason for a `truncated_on_failover` loss (analysis/explain/reasons.py):
    where the copy was stored, the election that gave its group another master, the truncation."""
    from types import SimpleNamespace

    from analysis.explain.reasons import RULES, lost_verdict
    from models.records import BROKER_STORED, COMMIT_LOG_DESTROYED

    msg = 7
    cut = (31 * S, "broker-a", COMMIT_LOG_DESTROYED, msg, "orders", 2, 40, "failover_truncated", 2, False)
    rare = [elected(S, "broker-a", "broker-a"),
            elected(22 * S, "broker-a", "broker-a-s1", "broker-a", 2, "master_inactive"), cut]
    f = SimpleNamespace(rare_by_msg={(COMMIT_LOG_DESTROYED, msg): [cut]}, collector=SimpleNamespace(rare=rare),
                        run_broker=lambda node: node.rsplit("-s", 1)[0])
    stored = (9 * S, "broker-a", BROKER_STORED, msg, "orders", 2, 40, 4096, 150, 0)
    v = lost_verdict(f, "billing", msg, "truncated_on_failover", [stored])
    assert (v.verdict, v.cause, v.event_us, v.node) == ("lost", "truncated_on_failover", 22 * S, "broker-a")
    assert v.reason == ("stored at 9.000 s as broker-a orders q2 @40 on broker-a; broker-a rejoined as a slave after "
                        "the controller elected broker-a-s1 master of broker-a at 22.000 s (epoch 2, master_inactive) "
                        "and at 31.000 s truncated its CommitLog to the consistent point of its epochs, destroying it: "
                        "the new master never had it")
    assert "truncated_on_failover" in RULES
