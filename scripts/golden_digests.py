"""Golden trace digests: `trace_sha256` of a few short bundled runs, recorded in
tests/data/golden_digests.json and compared by tests/test_golden_digests.py.

    .venv/bin/python scripts/golden_digests.py --write   # run them all, (re)write the file
    .venv/bin/python scripts/golden_digests.py           # run them all, compare; exit 1 on a change

A run's trace digest covers every record it emits (sim/trace.py), so a digest that changes means
the simulator behaves differently: other records, other times, other values, another order —
even when every invariant still holds. Regenerate with --write only when that change is intended,
and state it (and why) in the commit message. Same sources, scenario and seed give the same digest
under any PYTHONHASHSEED, compiled or pure (tests/test_determinism.py, tests/test_compiled.py).

The runs together touch the store and its flush (an ASYNC_FLUSH power loss and recovery), HA
replication (an ASYNC_MASTER lost for good, 4.x slave reads), SYNC_FLUSH group commit under an
fsync stall, rebalancing (a consumer joining a busy group), a consumer crash and rejoin,
transactions (lost endTransaction, check-back) and orderly consumption through a broker crash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from any directory
    sys.path.insert(0, str(ROOT))
GOLDEN = ROOT / "tests" / "data" / "golden_digests.json"
COMMAND = ".venv/bin/python scripts/golden_digests.py --write"

# id, bundled scenario, seed, --set overrides (short variants), what it exercises
RUNS: list[dict[str, Any]] = [
    {"id": "power_loss_async_flush", "scenario": "scenarios/power_loss_async_flush.yaml", "seed": 1,
     "overrides": [], "covers": "ASYNC_FLUSH timed flush, power loss, CommitLog recovery, re-used offsets"},
    {"id": "power_loss_async_master", "scenario": "scenarios/power_loss_async_master.yaml", "seed": 1,
     "overrides": [], "covers": "HA replication (ASYNC_MASTER), 4.x slave reads after the master is lost"},
    {"id": "fsync_stall_sync_flush", "scenario": "scenarios/fsync_stall_sync_flush.yaml", "seed": 1,
     "overrides": ["duration_ms=25s", "settle_ms=10s"], "covers": "SYNC_FLUSH group commit, FLUSH_DISK_TIMEOUT"},
    {"id": "consumer_joins_busy_group", "scenario": "scenarios/consumer_joins_busy_group.yaml", "seed": 1,
     "overrides": ["duration_ms=24s", "settle_ms=20s"],
     "covers": "rebalance hand-overs, two owners at once, rebalance duplicates"},
    {"id": "restart_consumer", "scenario": "scenarios/restart_consumer.yaml", "seed": 1, "overrides": [],
     "covers": "consumer kill -9 and rejoin, offset persistence, consumer_crash duplicates"},
    {"id": "txn_end_lost", "scenario": "scenarios/txn_end_lost.yaml", "seed": 1, "overrides": [],
     "covers": "transactional half/op topics, lost endTransaction, check-back"},
    {"id": "orderly_broker_failure", "scenario": "scenarios/orderly_broker_failure.yaml", "seed": 1,
     "overrides": [], "covers": "orderly consumption, broker locks, broker crash and restart"},
    # 5.x features (issue 40)
    {"id": "controller_master_power_loss", "scenario": "scenarios/controller_master_power_loss.yaml", "seed": 1,
     "overrides": [], "covers": "controller election, SyncStateSet, epochs, failover truncation, route poll"},
    {"id": "pop_consumer_crash", "scenario": "scenarios/pop_consumer_crash.yaml", "seed": 1, "overrides": [],
     "covers": "POP: pop, ack, invisible time, revive, consumer crash"},
    {"id": "pop_slow_consumer_invisible_time", "scenario": "scenarios/pop_slow_consumer_invisible_time.yaml",
     "seed": 1, "overrides": [], "covers": "POP: a listener slower than the invisible time, late acks"},
    {"id": "timer_messages_power_loss", "scenario": "scenarios/timer_messages_power_loss.yaml", "seed": 1,
     "overrides": [], "covers": "5.x timer wheel, checkpoint, power loss and recovery"},
    {"id": "retention_lagging_consumer", "scenario": "scenarios/retention_lagging_consumer.yaml", "seed": 1,
     "overrides": [], "covers": "retention: expired and forced CommitLog deletion under a lagging consumer"},
    {"id": "disk_full", "scenario": "scenarios/disk_full.yaml", "seed": 1, "overrides": [],
     "covers": "disk usage thresholds, writes refused when full"},
    {"id": "lite_pull_consumer_crash", "scenario": "scenarios/lite_pull_consumer_crash.yaml", "seed": 1,
     "overrides": [], "covers": "DefaultLitePullConsumer: pull tasks, poll, auto-commit, crash"},
    {"id": "batch_consume_failures", "scenario": "scenarios/batch_consume_failures.yaml", "seed": 1,
     "overrides": [], "covers": "concurrent batch consumption, ackIndex, send-back of the failed part"},
]


def compute(run: dict[str, Any]) -> dict[str, Any]:
    """Run one entry (records streamed, not kept); its digest and a few summary facts."""
    import rmqsim

    s = rmqsim.run(str(ROOT / run["scenario"]), seed=run["seed"], overrides=list(run["overrides"])).summary
    return {"trace_sha256": s["trace_sha256"], "records": s["records"], "sent_ok": s["sent_ok"],
            "lost": s["lost"], "duplicates": s["duplicates"], "verdict": s["verdict"]}


def scenario_sha256(run: dict[str, Any]) -> str:
    return hashlib.sha256((ROOT / run["scenario"]).read_bytes()).hexdigest()


def simulator_sha256() -> str:
    from analysis.sweeps.sweep import simulator_sha256 as digest

    return digest()


def read_golden(path: Path = GOLDEN) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def run_key(run: dict[str, Any]) -> tuple:
    return run["id"], run["scenario"], run["seed"], tuple(run["overrides"])


def differences(golden: dict[str, Any], now: dict[str, dict[str, Any]]) -> list[str]:
    """One line per recorded run whose digest `now` (id → compute()) differs."""
    lines = []
    for run in golden["runs"]:
        got = now[run["id"]]
        if got["trace_sha256"] != run["trace_sha256"]:
            repro = shlex.join([".venv/bin/rmqsim", "run", run["scenario"], "--seed", str(run["seed"]),
                                *[w for o in run["overrides"] for w in ("--set", o)]])
            facts = ", ".join(f"{k} {run[k]} -> {got[k]}" for k in ("records", "sent_ok", "lost", "duplicates",
                                                                     "verdict") if run.get(k) != got[k])
            edited = "; its scenario file was edited" if run.get("scenario_sha256") != scenario_sha256(run) else ""
            lines.append(f"  {run['id']} ({run['covers']}): trace_sha256 {run['trace_sha256'][:16]}… -> "
                         f"{got['trace_sha256'][:16]}…; {facts or 'same counts'}{edited}; reproduce: {repro}")
    return lines


def failure_message(golden: dict[str, Any], lines: list[str], simulator_now: str | None = None) -> str:
    recorded = golden.get("simulator_sha256", "?")
    sources = ""
    if simulator_now is not None:
        sources = ("\nThe simulator's sources (sim/, models/) are unchanged since the goldens were recorded: "
                   "unless a scenario file was edited, a digest that changes anyway is nondeterminism or an "
                   "environment change, not a model change."
                   if simulator_now == recorded else
                   f"\nSimulator sources: recorded with {recorded[:16]}…, now {simulator_now[:16]}….")
    return ("BEHAVIOUR CHANGED: the trace digest of these golden runs differs from "
            f"{GOLDEN.relative_to(ROOT)}:\n" + "\n".join(lines) + sources +
            "\nIf the change is intended, regenerate the goldens with\n    " + COMMAND +
            "\nand state the behaviour change (and why) in the commit message. If it is not, a change made "
            "the simulator behave differently: find it before regenerating.")


def write(path: Path = GOLDEN) -> dict[str, Any]:
    data = {
        "about": "trace_sha256 of short bundled runs (scripts/golden_digests.py); a change means the "
                 "simulator behaves differently. Regenerate only for an intended change, stated in the commit.",
        "regenerate": COMMAND,
        "simulator_sha256": simulator_sha256(),
        "runs": [{**run, "scenario_sha256": scenario_sha256(run), **compute(run)} for run in RUNS],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help=f"run every golden run and rewrite {GOLDEN.relative_to(ROOT)}")
    args = p.parse_args(argv)
    if args.write:
        data = write()
        for run in data["runs"]:
            print(f"{run['id']:28s} {run['trace_sha256']}")
        print(f"wrote {GOLDEN.relative_to(ROOT)}")
        return 0
    golden = read_golden()
    if [run_key(r) for r in golden["runs"]] != [run_key(r) for r in RUNS]:
        print(f"{GOLDEN.relative_to(ROOT)} lists other runs than scripts/golden_digests.py: run {COMMAND}")
        return 1
    now = {run["id"]: compute(run) for run in golden["runs"]}
    lines = differences(golden, now)
    if lines:
        print(failure_message(golden, lines, simulator_sha256()))
        return 1
    print(f"all {len(now)} golden digests match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
