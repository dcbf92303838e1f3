"""DefaultLitePullConsumer (models/consumer/lite_pull_consumer.py) on scenarios/lite_pull_consumer_crash.yaml:
the committed offset moves only at polls ≥ autoCommitIntervalMillis apart (a timeline), a killed
consumer's queues are re-delivered from the last persisted commit — duplicates bounded by the
auto-commit and persist intervals, of the causes consumer_crash and rebalance — over three seeds,
and more of them than a push group has under the same fault."""

from __future__ import annotations

import functools

import pytest

import models.records  # noqa: F401  (declares the record kinds field_index reads)
import rmqsim
from sim.trace import field_index
from tests.conftest import ROOT

SCENARIO = ROOT / "scenarios" / "lite_pull_consumer_crash.yaml"
SEEDS = (1, 2, 3)
S = 1_000_000
SHARE_PER_S = 100  # c-1's half of the producer's 200 msg/s
WINDOW_S = 5 + 5 + 1  # autoCommitIntervalMillis + persistConsumerOffsetInterval + a poll's gap


@functools.cache
def run(seed: int, push: bool = False, detail: bool = False) -> rmqsim.RunResult:
    return rmqsim.run(SCENARIO, seed=seed, overrides=["consumers[0].lite_pull=null"] if push else [],
                   keep_records=detail, detail=detail)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_killed_lite_pull_consumer_redelivers_at_most_its_uncommitted_window(seed: int) -> None:
    s = run(seed).summary
    assert s["verdict"] == "valid" and s["lost"] == 0
    causes = {k: v for k, v in s["duplicates_by_cause"].items() if v}
    assert set(causes) <= {"consumer_crash", "rebalance"}, causes
    # each ownership change (the crash, then c-1's return at the end of the faults) re-delivers at
    # most the uncommitted window of the queues that move
    assert causes.get("consumer_crash", 0) <= SHARE_PER_S * WINDOW_S
    assert causes.get("rebalance", 0) <= SHARE_PER_S * WINDOW_S
    assert s["duplicates"] > run(seed, push=True).summary["duplicates"]  # push commits after each message


def test_the_committed_offset_moves_only_at_auto_commits() -> None:
    """Timeline: the offsets c-1 commits for a queue (seen by the broker with each pull) change at
    most once per autoCommitIntervalMillis (5 s)."""
    r = run(1, detail=True)
    q, off, client = (field_index("broker.offset_committed", f) for f in ("queue_id", "offset", "client"))
    changes: dict[int, list[tuple[int, int]]] = {}
    for x in r.records:
        if x[2] == "broker.offset_committed" and x[client] == "c-1" and x[0] < 24 * S and x[4] == "orders":
            seen = changes.setdefault(x[q], [])
            if not seen or seen[-1][1] != x[off]:
                seen.append((x[0], x[off]))
    assert changes
    for seen in changes.values():
        times = [t for t, _o in seen]
        assert len(times) >= 2
        assert all(b - a >= 5 * S - 100_000 for a, b in zip(times, times[1:], strict=False)), times


def test_the_header_states_question_and_expectation() -> None:
    header = [line for line in SCENARIO.read_text().splitlines() if line.startswith("#")]
    assert header[0].startswith("# Question:") and "Expectation:" in " ".join(header)
