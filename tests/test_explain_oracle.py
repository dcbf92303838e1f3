"""An independent oracle for `rmqsim explain`'s lost messages (issue 40).

explain takes each message's cause from the very computation that counted it in the summary
(analysis/checkers/message_causes.py), so comparing explain with the summary proves nothing about
either. Here each lost message's cause, its sample order and the fault it belongs to are computed
again from the trace records alone (pandas frames of the run's Parquet trace: no ledger, no
MessageCauses, no explain code), by the rules docs/checkers-and-causes.md states:

- lost: acknowledged (SEND_OK), never consumed successfully by the group;
- cause: a copy destroyed by a rejoining replica's truncation (`failover_truncated`) first; then a
  power loss — `replica_not_synced` if the group has slaves and none held it, else
  `unflushed_at_power_loss`; a process crash's destroyed buffer (`truncated_on_recovery`); a reused
  queue offset (`offset_skipped_after_recovery`); retention (`expired_file_deleted`); else `other`;
- the summary's `lost_sample[cause]`: the first 10 of the cause by sequence number, then producer;
- the fault: the one whose target is the node (or its broker group) of the destroyed copy, or of
  the copy that held the reused offset before; the latest such fault started before it.

Stories, each with two loss causes in one group and two faults: (A) a transient-store-pool crash
of broker-a then a power loss of broker-b (truncated_on_recovery + unflushed_at_power_loss);
(B) power losses of broker-a then broker-b with the consumers reading between them
(unflushed_at_power_loss + offset_skipped_after_recovery).
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

import rmqsim
from analysis.explain.answer import explain_cause, explain_fault, explain_message, read_run
from analysis.explain.judge import investigate
from analysis.explain.reasons import message_verdicts
from tests.conftest import traced_run_dir

OUT = Path("/tmp") / "rmqsim-test-explain-oracle"  # replaced per session by the fixture below
SAMPLE = 10
STORIES = {
    "A": ("transient_store_pool_crash", (
        "faults=[{at_ms: 15s, jitter_ms: 200, kind: process_crash, node: broker-a, duration_ms: 5s}, "
        "{at_ms: 17s, jitter_ms: 500, kind: power_loss, node: broker-b, duration_ms: 5s}]",)),
    "B": ("power_loss_async_flush", (
        "consumers[0].start_ms=17s",
        "faults=[{at_ms: 15s, jitter_ms: 500, kind: power_loss, node: broker-a, duration_ms: 5s}, "
        "{at_ms: 22s, jitter_ms: 500, kind: power_loss, node: broker-b, duration_ms: 5s}]")),
}
CASES = [("A", 1), ("A", 2), ("B", 1), ("B", 2)]


@pytest.fixture(scope="module", autouse=True)
def _out(tmp_path_factory) -> None:
    global OUT
    OUT = tmp_path_factory.mktemp("explain-oracle")


@functools.cache
def run_dir(story: str, seed: int) -> Path:
    scenario, sets = STORIES[story]
    return traced_run_dir(OUT, scenario, seed, sets)


class Oracle:
    """Each lost message's cause and fault from the trace frames alone (module docstring)."""

    def __init__(self, directory: Path, group: str = "billing") -> None:
        r = rmqsim.load(directory)
        self.summary = r.summary
        sent = r.frame("producer.sent")
        consumed = r.frame("consumer.consumed")
        self.destroyed = r.frame("commit_log.destroyed")
        reused = r.frame("consume_queue.offset_reused")
        self.key = dict(zip(sent.msg_id, sent.msg_key, strict=True))
        acked = set(sent[sent.status == "SEND_OK"].msg_id)
        ok = set(consumed[(consumed.group == group) & consumed.ok].msg_id)
        self.lost = sorted(acked - ok)
        user = ~self.destroyed.topic.str.startswith(("%", "rmq_sys", "SCHEDULE_"))
        self.first_reuse = {m: row for m, row in reused[~reused.topic.str.startswith("%")]
                            .sort_values("t_us").groupby("msg_id").first().iterrows()}
        self.copies = self.destroyed[user].groupby("msg_id")
        self.faults = self.summary["faults_applied"]
        self.cause = {m: self._cause(m) for m in self.lost}
        self.fault = {m: self._fault(m) for m in self.lost}

    def _cause(self, msg_id: int) -> str:
        faults = set(self.copies.get_group(msg_id).fault) if msg_id in self.copies.groups else set()
        if "failover_truncated" in faults:
            return "truncated_on_failover"
        if "power_loss" in faults:
            power = self.copies.get_group(msg_id)
            power = power[power.fault == "power_loss"]
            return "replica_not_synced" if (power.replicas > 0).any() and not power.replicated.any() \
                else "unflushed_at_power_loss"
        if faults - {"expired"}:
            return "truncated_on_recovery"
        if msg_id in self.first_reuse:
            return "offset_skipped_after_recovery"
        return "expired_file_deleted" if faults else "other"

    def _fault(self, msg_id: int) -> int | None:
        """The fault on the node whose destroyed copy explains the loss (module docstring)."""
        if msg_id in self.copies.groups:
            row = self.copies.get_group(msg_id).iloc[0]
        elif msg_id in self.first_reuse:
            use = self.first_reuse[msg_id]
            held = self.destroyed[(self.destroyed.node == use.node) & (self.destroyed.topic == use.topic)
                                  & (self.destroyed.queue_id == use.queue_id)
                                  & (self.destroyed.queue_offset == use.queue_offset)
                                  & (self.destroyed.t_us <= use.t_us)]
            if not len(held):
                return None
            row = held.iloc[-1]
        else:
            return None
        on_node = [f for f in self.faults if f["target"] == row.node and f["start_ms"] * 1000 <= row.t_us]
        return max(on_node, key=lambda f: f["start_ms"])["index"] if on_node else None

    def samples(self) -> dict[str, list[str]]:
        """cause → the first SAMPLE lost messages' keys, by sequence number then producer."""
        by_cause: dict[str, list[tuple[int, int]]] = {}
        for m, c in self.cause.items():
            by_cause.setdefault(c, []).append((m & 0xFFFFFFFF, m >> 32))
        return {c: [self.key[p << 32 | s] for s, p in sorted(pairs)[:SAMPLE]] for c, pairs in by_cause.items()}


@functools.cache
def oracle(story: str, seed: int) -> Oracle:
    return Oracle(run_dir(story, seed))


@pytest.mark.parametrize(("story", "seed"), CASES)
def test_the_story_has_two_loss_causes_in_one_group_and_two_faults(story: str, seed: int) -> None:
    o = oracle(story, seed)
    assert len(o.faults) >= 2
    assert len(set(o.cause.values())) >= 2, Counter(o.cause.values())
    assert len({o.fault[m] for m in o.lost}) >= 2  # the losses of both faults
    assert o.summary["lost"] == len(o.lost)
    assert {c: n for c, n in o.summary["lost_by_cause"].items() if n} == dict(Counter(o.cause.values()))


@pytest.mark.parametrize(("story", "seed"), CASES)
def test_the_summary_samples_are_the_first_by_sequence_then_producer(story: str, seed: int) -> None:
    o = oracle(story, seed)
    assert o.summary["lost_sample"] == o.samples()


@pytest.mark.parametrize(("story", "seed"), CASES)
def test_explain_gives_each_sampled_loss_the_oracles_cause(story: str, seed: int) -> None:
    o = oracle(story, seed)
    run = read_run(run_dir(story, seed))
    f = investigate(run)
    for cause, keys in o.samples().items():
        for key in keys:
            msg_id = next(m for m, k in o.key.items() if k == key)
            (v,) = [v for v in message_verdicts(f, msg_id) if v.verdict == "lost"]
            assert v.cause == o.cause[msg_id] == cause, key
        listed = explain_cause(run, cause, limit=SAMPLE)
        assert listed["total"] == sum(1 for c in o.cause.values() if c == cause)
        assert [m["key"] for m in listed["messages"]] == keys  # its order: the samples'
        assert {m["cause"] for m in listed["messages"]} == {cause}
    key = o.samples()[sorted(o.samples())[0]][0]  # one message's whole answer, as the CLI gives it
    msg_id = next(m for m, k in o.key.items() if k == key)
    (v,) = [v for v in explain_message(run, key)["verdicts"] if v["verdict"] == "lost"]
    assert v["cause"] == o.cause[msg_id]


@pytest.mark.parametrize(("story", "seed"), CASES)
def test_explain_fault_attributes_each_loss_to_the_oracles_fault(story: str, seed: int) -> None:
    o = oracle(story, seed)
    run = read_run(run_dir(story, seed))
    expected = Counter((o.fault[m], o.cause[m]) for m in o.lost)
    for w in o.faults:
        a = explain_fault(run, w["index"])
        mine = {c: n for c, n in a["effects"]["lost"]["by_cause"].items()}
        assert mine == {c: n for (fault, c), n in expected.items() if fault == w["index"]}, w
        assert a["effects"]["lost"]["total"] == sum(n for (fault, _c), n in expected.items() if fault == w["index"])
        assert sum(x["lost"]["total"] for x in a["attribution"].values()) == o.summary["lost"]
