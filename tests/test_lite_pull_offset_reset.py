"""A lite pull group re-reading after a server-side offset reset: duplicates of cause `offset_reset`
(analysis/checkers/duplicates.py), not `other`.

The story (seeds 1-3, 5.x): two lite pull consumers of `billing` read `orders` (one broker, 4 queues,
200 msg/s from 3 s); at 25 s an operator resets the group to the time 10 s (`reset_offset` action,
resetOffsetByTime: a server-side reset in 5.x). Each queue's next pull answers PULL_OFFSET_MOVED; a
lite pull consumer only moves its pull offset (DefaultLitePullConsumerImpl: no drop, no new queue
ownership — unlike a push consumer, which drops the queue and takes it again), so everything stored
from 10 s on is read a second time within the same ownership. Every one of those duplicates is an
`offset_reset`, and `rmqsim explain` names the offset correction."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

import rmqsim
from analysis.checkers.duplicates import Timeline, _moved_back
from analysis.explain.answer import explain_cause, read_run
from models.records import CONSUMER_OFFSET_MOVED, CONSUMER_QUEUE_STARTED
from rmqsim import cli
from rmqsim.scenario.spec import from_data

SEEDS = (1, 2, 3)
S = 1_000_000
RATE_PER_S, RESET_AT_S, RESET_TO_S = 200, 25, 10
LITE_NODES = ("c-1", "c-2")


def _data(lite: bool = True) -> dict[str, Any]:
    consumer: dict[str, Any] = {"name": "c", "count": 2, "group": "billing", "topic": "orders",
                                "consume_time_ms": {"dist": "exponential", "mean": 1}}
    if lite:
        consumer["lite_pull"] = {"auto_commit_interval_ms": 5_000}
    return {"name": "lite_pull_offset_reset", "duration_ms": 40_000, "settle_ms": "auto",
            "cluster": {"brokers": [{"name": "broker-a"}], "topics": [{"name": "orders", "queues": 4}]},
            "producers": [{"name": "p", "topic": "orders", "rate_per_s": RATE_PER_S, "start_ms": 3_000}],
            "consumers": [consumer],
            "actions": [{"at_ms": RESET_AT_S * 1000, "kind": "reset_offset", "group": "billing",
                         "to_time_ms": RESET_TO_S * 1000}]}


@functools.cache
def _run(seed: int, lite: bool = True) -> Any:
    return rmqsim.run(from_data(_data(lite)), seed=seed, keep_records=lite)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_lite_pull_group_reread_after_a_server_side_reset_is_offset_reset(seed: int) -> None:
    r = _run(seed)
    s = r.summary
    assert s["verdict"] == "valid" and s["lost"] == 0
    causes = {k: v for k, v in s["duplicates_by_cause"].items() if v}
    assert causes == {"offset_reset": s["duplicates"]}, causes
    # what was stored between the reset time and the reset, once more (a second either side)
    window_s = RESET_AT_S - RESET_TO_S
    assert RATE_PER_S * (window_s - 1) <= s["duplicates"] <= RATE_PER_S * (window_s + 1)
    # the mechanism: the lite consumers' pulls were moved back, and no queue changed hands for it
    moved = [x for x in r.records if x[2] == CONSUMER_OFFSET_MOVED and x[1] in LITE_NODES]
    assert moved and all(x[0] >= RESET_AT_S * S for x in moved)
    assert not [x for x in r.records if x[2] == CONSUMER_QUEUE_STARTED and x[0] >= RESET_AT_S * S]


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_a_push_group_under_the_same_reset_has_the_same_cause(seed: int) -> None:
    """The push consumer drops the queue and takes it again (a new ownership): offset_reset already."""
    s = _run(seed, lite=False).summary
    assert {k: v for k, v in s["duplicates_by_cause"].items() if v} == {"offset_reset": s["duplicates"]}
    assert s["duplicates"] > 0


def test_explain_names_the_offset_correction(tmp_path: Path) -> None:
    scenario = tmp_path / "lite_pull_offset_reset.yaml"
    scenario.write_text(yaml.safe_dump(_data()))
    out = tmp_path / "run"
    assert cli.main(["run", str(scenario), "--seed", "1", "--out", str(out), "--trace"]) in (0, 1)
    listed = explain_cause(read_run(out), "offset_reset", limit=1)
    assert listed["total"] == rmqsim.load(out).summary["duplicates"] > 0
    (answer,) = listed["messages"]
    assert "the queue's offset was corrected (OFFSET_MOVED) at 25." in answer["reason"], answer


# --- the rule alone: which offset moves explain a re-read of the same copy --------------------------
def _timeline(*moves: tuple[int, str, int, int]) -> Timeline:
    return Timeline([(t, node, CONSUMER_OFFSET_MOVED, "billing", "broker-a", 0, moved_from, moved_to)
                     for t, node, moved_from, moved_to in moves])


@pytest.mark.parametrize("move, explains", [
    ((30 * S, "c-1", 120, 50), True),  # the re-reader's own pull, moved back over offset 100 after t0
    ((30 * S, "c-1", 120, 100), True),  # ... to exactly the message's offset
    ((30 * S, "c-1", 100, 50), False),  # offset 100 not fetched yet when it moved: no re-read from it
    ((30 * S, "c-1", 120, 101), False),  # moved back, but not over offset 100
    ((30 * S, "c-2", 120, 50), False),  # another consumer's pull
    # before its ownership began (t0 = 10 s) and before the first consumption: the move that dropped its
    # queue, whose cached copy a listener call in flight still consumed (reset_offset_by_time, 5.x)
    ((5 * S, "c-1", 120, 50), True),
    ((5 * S, "c-2", 120, 50), False),  # ... but another consumer's
    ((45 * S, "c-1", 120, 50), False),  # after the re-read
])
def test_a_move_explains_a_reread_of_the_same_copy_only_if_it_went_back_over_it(
        move: tuple[int, str, int, int], explains: bool) -> None:
    # offset 100 first consumed at 35 s by c-1 (its ownership since 10 s), read again at 40 s
    got = _moved_back(_timeline(move), "billing", "c-1", "broker-a", 0, 100, 35 * S, 10 * S, 40 * S)
    assert got == (move[0] if explains else None)


def test_a_move_between_the_first_consumption_and_the_new_ownership_explains_it_whoever_moved() -> None:
    got = _moved_back(_timeline((20 * S, "c-2", 120, 150)), "billing", "c-1", "broker-a", 0, 100, 15 * S, 25 * S,
                      40 * S)
    assert got == 20 * S
