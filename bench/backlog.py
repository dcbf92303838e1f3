"""Backlog benchmark: memory per stored message, and reads from a deep backlog.

    .venv/bin/python bench/backlog.py                      # slope between 2 M and 10 M stored messages
    .venv/bin/python bench/backlog.py --messages 100000000 --consume 2000000   # the 10^8 run

Producers only (the consumer group starts only after the backlog is stored), one broker, one
topic of 16 queues, 1 KiB messages at `--rate-per-s` in total. The run advances in slices of
simulated time; at each checkpoint (every 1 M stored messages) it reports the stored count, the
process's resident memory (VmRSS) and the wall time. The slope is (RSS at the last checkpoint −
RSS at the first checkpoint ≥ 2 M) / (messages stored in between): the bytes each stored message
costs the broker (CommitLog tables, ConsumeQueue units) and the checkers' ledger, everything
else being constant. With `--consume N`, a consumer group then starts from the head of the
queues (CONSUME_FROM_FIRST_OFFSET) and the run continues until it has consumed N messages,
reading the backlog from "disk" (the 8-message / 64 KiB on-disk pull limits apply beyond 40 % of
RAM from the CommitLog end).

With `--cli`, the same scenario is also run through `rmqsim run` (a child process each, the whole
pipeline: simulation, the end-of-run analysis, summary.json) at 2 M and at `--messages`, and the
report gives the children's peak resident memory (ru_maxrss) and the peak slope beside the steady
one: (peak at `--messages` − peak at 2 M) / (the difference in messages). `rmqsim run` frees the
brokers' store tables before its analysis (runner.run_scenario's `release_store`), so its peak is
the end of the simulation's steady state (store and ledger), not that plus the analysis.

    .venv/bin/python bench/backlog.py --messages 6000000 --cli   # issue 41's 2 M -> 6 M peak slope
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmqsim import runner  # noqa: E402
from rmqsim.scenario.spec import from_data  # noqa: E402

SLICE_US = 200_000
CHECKPOINT = 1_000_000


def scenario(messages: int, rate_per_s: int, producers: int) -> dict:
    produce_s = messages / rate_per_s
    return {
        "name": "backlog",
        "duration_ms": int(produce_s * 1000) + 5_000,
        "settle_ms": 0,
        "cluster": {"brokers": [{"name": "broker-a", "store": {"physical_memory_bytes": 16 * 1024 ** 3}}],
                    "topics": [{"name": "backlog", "queues": 16}]},
        "producers": [{"name": "p", "count": producers, "topic": "backlog", "rate_per_s": rate_per_s / producers,
                       "arrival": "constant", "start_ms": 2_000, "stop_ms": int(produce_s * 1000) + 2_000}],
        "consumers": [{"name": "c", "group": "late", "topic": "backlog", "start_ms": 30_000_000_000,  # later than the run: the group starts only when `consume` says
                       "client": {"consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}}],
    }


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def stored(world: runner.World) -> int:
    return world.models["broker-a"].commit_log.record_count


def produce(world: runner.World, messages: int, log: list[dict], started: float) -> None:
    env = world.env
    next_mark = CHECKPOINT
    while True:
        env.run(until=env.now + SLICE_US)
        count = stored(world)
        if count >= next_mark or count >= messages:
            log.append({"stored": count, "rss_bytes": rss_bytes(), "wall_s": round(time.perf_counter() - started, 1),
                        "sim_s": env.now / 1e6})
            print(json.dumps(log[-1]), flush=True)
            next_mark += CHECKPOINT
        if count >= messages:
            return


def consume(world: runner.World, target: int, started: float) -> dict:
    """Start the late group, run until it consumed `target` messages (from the ledger's view of
    the tracer's records: counted by the consumer's own ProcessQueue offsets)."""
    env = world.env
    consumer = world.nodes["c"]
    consumer.restart()
    model = world.models["c"]
    begin = time.perf_counter()
    consumed = 0
    while consumed < target:
        env.run(until=env.now + SLICE_US)
        consumed = sum(model.offset_store.offsets.values())
    wall = time.perf_counter() - begin
    return {"consumed": consumed, "consume_wall_s": round(wall, 1), "consumed_per_wall_s": round(consumed / wall),
            "rss_bytes": rss_bytes(), "total_wall_s": round(time.perf_counter() - started, 1)}


def cli_peak_bytes(messages: int, rate_per_s: int, producers: int) -> int:
    """Peak resident memory (bytes) of one `rmqsim run` of the backlog scenario in a child process."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "backlog.json"
        spec.write_text(json.dumps(scenario(messages, rate_per_s, producers)))
        child = subprocess.Popen([sys.executable, "-m", "rmqsim.cli", "run", str(spec), "--seed", "1",
                                  "--out", str(Path(tmp) / "out")], cwd=root, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        _pid, status, usage = os.wait4(child.pid, 0)
        if not (Path(tmp) / "out" / "summary.json").exists():  # a verdict other than pass exits non-zero
            raise SystemExit(f"rmqsim run of {messages} messages wrote no summary (status {status})")
        return usage.ru_maxrss * 1024


def cli_report(messages: int, rate_per_s: int, producers: int) -> dict:
    low = 2_000_000
    peaks = {n: cli_peak_bytes(n, rate_per_s, producers) for n in (low, messages)}
    for n, peak in peaks.items():
        print(json.dumps({"cli_messages": n, "cli_peak_rss_bytes": peak}), flush=True)
    return {"cli_peak_rss_bytes": {str(n): v for n, v in peaks.items()},
            "cli_peak_bytes_per_stored_message": round((peaks[messages] - peaks[low]) / (messages - low), 1)
            if messages > low else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000_000)
    ap.add_argument("--rate-per-s", type=int, default=200_000, help="all producers together")
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consume", type=int, default=0, help="then consume this many from the head")
    ap.add_argument("--cli", action="store_true", help="also the peak through `rmqsim run` at 2 M and --messages")
    ap.add_argument("--cli-only", action="store_true", help="only the peak through `rmqsim run`")
    args = ap.parse_args()
    if args.cli_only:
        print(json.dumps(cli_report(args.messages, args.rate_per_s, args.producers), indent=1))
        return 0
    started = time.perf_counter()
    sc = from_data(scenario(args.messages, args.rate_per_s, args.producers))
    world = runner.build(sc, seed=1)
    ledger = runner.make_ledger(world)
    world.env.tracer.keep = False
    world.env.tracer.observers.append(ledger.feed)
    runner.start(world)
    log: list[dict] = []
    produce(world, args.messages, log, started)
    report: dict = {"messages": args.messages, "checkpoints": log,
                    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    first = next((c for c in log if c["stored"] >= 2_000_000), None)
    if first is not None and log[-1]["stored"] > first["stored"]:
        report["bytes_per_stored_message"] = round(
            (log[-1]["rss_bytes"] - first["rss_bytes"]) / (log[-1]["stored"] - first["stored"]), 1)
        report["slope_between"] = [first["stored"], log[-1]["stored"]]
    if args.consume:
        report["consume"] = consume(world, args.consume, started)
        report["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.cli:
        del world, ledger
        report |= cli_report(args.messages, args.rate_per_s, args.producers)
    print(json.dumps({k: v for k, v in report.items() if k != "checkpoints"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
