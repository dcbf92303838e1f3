"""`allocate` against the Java classes: tests/models/data/allocate_vectors.json holds inputs and the
results the real AllocateMessageQueueStrategy classes (4.9.8 and 5.3.3, which agree) gave for them:
uneven splits, more consumers than queues, several brokers and rooms, callers outside the group,
unsorted and duplicate inputs, hash-ring collisions, empty and null inputs. Its "format" key
describes the layout."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from models.consumer.allocate import allocate
from models.message import MessageQueue

DATA = json.loads((Path(__file__).parent / "data" / "allocate_vectors.json").read_text(encoding="utf-8"))
CASES = DATA["cases"]
IAE = "IllegalArgumentException"


def _mq_all(runs: list | None) -> list[MessageQueue] | None:
    if runs is None:
        return None
    return [MessageQueue(topic, broker, q) for topic, broker, ids in runs for q in ids]


def _options(raw: dict[str, Any]) -> dict[str, Any]:
    options = dict(raw)
    if "broker_rooms" in options:
        brokers, consumers = options.pop("broker_rooms"), options.pop("consumer_rooms")
        options["broker_room"] = lambda mq: brokers.get(mq.broker_name)
        options["consumer_room"] = consumers.get
    if options.get("message_queue_list") is not None:
        options["message_queue_list"] = [MessageQueue(*mq) for mq in options["message_queue_list"]]
    return options


def _expected(result: Any, mq_all: list[MessageQueue] | None) -> Any:
    if result == IAE:
        return IAE
    return [mq_all[x] if isinstance(x, int) else MessageQueue(*x) for x in result]


def _run(case: dict, cid: str | None) -> Any:
    try:
        return allocate(case["strategy"], case["group"], cid, _mq_all(case["mq_all"]), case["cid_all"],
                        **_options(case["options"]))
    except ValueError:
        return IAE


def test_the_vectors_cover_every_strategy_and_outcome():
    strategies = Counter(case["strategy"] for case in CASES)
    assert set(strategies) == {"AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "CONSISTENT_HASH",
                               "MACHINE_ROOM_NEARBY"}
    assert min(strategies.values()) >= 20
    calls = [result for case in CASES for _cid, result in case["calls"]]
    assert len(calls) >= 1_000 and 100 <= calls.count(IAE) < len(calls) // 2
    inners = {case["options"]["inner"] for case in CASES if case["strategy"] == "MACHINE_ROOM_NEARBY"}
    assert inners == {"AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "CONSISTENT_HASH"}


def test_allocate_gives_what_java_gives():
    wrong = []
    for index, case in enumerate(CASES):
        mq_all = _mq_all(case["mq_all"])
        for cid, result in case["calls"]:
            got, want = _run(case, cid), _expected(result, mq_all)
            if got != want:
                wrong.append(f"cases[{index}] {case['strategy']} caller {cid!r}: got {got}, Java {want}")
    assert not wrong, f"{len(wrong)} mismatches:\n" + "\n".join(wrong[:10])
