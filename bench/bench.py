"""Benchmark: simulated messages per wall second, against a bare-SimPy baseline in the same run.

    .venv/bin/python bench/bench.py [--scenario scenarios/baseline.yaml] [--repeat 3]

The bare-SimPy baseline is the least a simulator of this shape can do: a producer process with
Poisson arrivals, one network hop (a timeout) into a Store, and three consumer processes that
take each message and hold it for a consume time — about 3 events per message. rmqsim's figure
includes everything a real run does (routing, broker store and dispatch, pulls, long polling,
offsets, traces, the digest and the checkers). Machines here are noisy, so the ratio of the two,
measured back to back in one process, is the number to compare across changes. Best of
`--repeat` runs is reported, and the median beside it as a measure of the noise. The report says
how many per-message modules ran compiled (sim/compiled.py); `RMQSIM_PURE=1` measures them pure.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bare_simpy(messages: int, rate_per_s: float = 2000.0) -> float:
    """Messages per wall second through a minimal SimPy producer → store → consumers pipeline."""
    env = simpy.Environment()
    store = simpy.Store(env)
    rng = random.Random(1)
    done = [0]

    def deliver(msg):
        yield env.timeout(250)
        yield store.put(msg)

    def producer():
        for i in range(messages):
            yield env.timeout(int(rng.expovariate(rate_per_s / 1e6)) + 1)
            env.process(deliver(i))

    def consumer():
        while True:
            yield store.get()
            yield env.timeout(int(rng.expovariate(1 / 2000)) + 1)
            done[0] += 1

    env.process(producer())
    for _ in range(3):
        env.process(consumer())
    start = time.perf_counter()
    env.run()
    return done[0] / (time.perf_counter() - start)


def rmqsim_run(path: str) -> tuple[float, float, dict]:
    import rmqsim

    start = time.perf_counter()
    result = rmqsim.run(path)
    wall = time.perf_counter() - start
    s = result.summary
    return s["consumed"] / wall, s["sim_time_ms"] / 1000 / wall, s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="scenarios/baseline.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    bares, sims, ratios, sim_walls = [], [], [], []
    summary: dict = {}
    for _ in range(args.repeat):
        bare = bare_simpy(100_000)
        per_s, sim_wall, summary = rmqsim_run(args.scenario)
        bares.append(bare)
        sims.append(per_s)
        ratios.append(per_s / bare)
        sim_walls.append(sim_wall)
    from sim import compiled

    report = {
        "scenario": args.scenario,
        "messages": summary.get("consumed"),
        "rmqsim_messages_per_wall_s": round(max(sims)),
        "bare_simpy_messages_per_wall_s": round(max(bares)),
        "ratio_to_bare_simpy": round(max(ratios), 3),
        "sim_time_per_wall_time": round(sim_walls[sims.index(max(sims))], 2),
        # the spread shows how noisy the machine was while measuring
        "median_rmqsim_messages_per_wall_s": round(statistics.median(sims)),
        "median_ratio_to_bare_simpy": round(statistics.median(ratios), 3),
        "repeats": args.repeat,
        # the per-message modules this measured compiled (sim/compiled.py; RMQSIM_PURE=1: none)
        "compiled_modules": len(compiled.status()["compiled"]),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
