"""DefaultLitePullConsumer (models/consumer/lite_pull_consumer.py) on scenarios/lite_pull_consumer_crash.yaml:
the broker learns the group's offsets only from the clients' 5 s persists (a lite pull leaves the
pull's commit-offset flag off), a killed consumer's queues are re-delivered from the last persisted
commit — duplicates bounded by the auto-commit and persist intervals, of the causes consumer_crash
and rebalance, both seen — over three seeds, and more of them than a push group has under the same
fault. The auto-commit cadence itself (and after a restart): tests/test_lite_pull_audit.py."""

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
    assert set(causes) == {"consumer_crash", "rebalance"}, causes  # both mechanisms happened
    # each ownership change (the crash, then c-1's return at the end of the faults) re-delivers at
    # most the uncommitted window of the queues that move
    assert causes.get("consumer_crash", 0) <= SHARE_PER_S * WINDOW_S
    assert causes.get("rebalance", 0) <= SHARE_PER_S * WINDOW_S
    assert s["duplicates"] > run(seed, push=True).summary["duplicates"]  # push commits after each message


def test_the_broker_learns_lite_pull_offsets_only_from_the_persists() -> None:
    """Timeline: every offset the broker records for the lite pull clients came with an
    UPDATE_CONSUMER_OFFSET (the client instance's persist every 5 s, first about 10 s in, or a
    dropped queue's persist), never with a pull; c-1 persisted at least every 5 s until it died."""
    r = run(1, detail=True)
    via, client = (field_index("broker.offset_committed", f) for f in ("via", "client"))
    seen = [x for x in r.records if x[2] == "broker.offset_committed" and x[4] == "orders"]
    assert seen and {x[via] for x in seen} == {"update"}
    crashed = next(x[0] for x in r.records if x[2] == "node.crashed" and x[1] == "c-1")
    times = sorted({x[0] // S for x in seen if x[client] == "c-1" and x[0] < crashed})
    assert times[0] <= 11 and all(b - a == 5 for a, b in zip(times, times[1:], strict=False)), times
    assert times[-1] >= crashed // S - 5


def test_the_header_states_question_and_expectation() -> None:
    header = [line for line in SCENARIO.read_text().splitlines() if line.startswith("#")]
    assert header[0].startswith("# Question:") and "Expectation:" in " ".join(header)
