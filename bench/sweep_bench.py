"""Benchmark: a sweep on Spark local[1] vs local[2], and Spark's per-run overhead vs a plain loop.

    .venv/bin/python bench/sweep_bench.py [--sweep scenarios/sweeps/02_baseline_200.yaml]
                                          [--masters local[1] local[2]] [--loop-runs 20]

Each master runs the whole sweep into a fresh directory, in a fresh driver process (a Spark
context's master cannot change within a process). The plain loop runs the first `--loop-runs`
runs of the same sweep with `analysis.sweeps.task.execute` in one process — the same simulation,
checks and Parquet writes, without Spark — and gives the per-run cost without Spark. Spark's
per-run overhead is (local[1] wall / runs) − (plain-loop wall / loop runs). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def spark_wall_s(sweep: str, master: str, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rmqsim.cli", "sweep", sweep, "--master", master, "--out", str(out)],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def loop_wall_s(sweep_path: str, out: Path, runs: int) -> float:
    from analysis.sweeps.spec import load_sweep
    from analysis.sweeps.sweep import tasks
    from analysis.sweeps.task import execute

    chosen = tasks(load_sweep(sweep_path), out)[:runs]
    start = time.perf_counter()
    for task in chosen:
        assert execute(task)["status"] == "ok"
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default="scenarios/sweeps/02_baseline_200.yaml")
    ap.add_argument("--masters", nargs="+", default=["local[1]", "local[2]"])
    ap.add_argument("--loop-runs", type=int, default=20)
    args = ap.parse_args()
    from analysis.sweeps.spec import load_sweep

    total = len(load_sweep(args.sweep).runs)
    report: dict = {"sweep": args.sweep, "runs": total}
    with tempfile.TemporaryDirectory(prefix="rmqsim-sweep-bench-") as tmp:
        loop = loop_wall_s(args.sweep, Path(tmp) / "loop", args.loop_runs)
        report["plain_loop"] = {"runs": args.loop_runs, "wall_s": round(loop, 1),
                                "per_run_s": round(loop / args.loop_runs, 3)}
        for master in args.masters:
            wall = spark_wall_s(args.sweep, master, Path(tmp) / master.replace("[", "_").replace("]", ""))
            report[master] = {"wall_s": round(wall, 1), "per_run_s": round(wall / total, 3),
                              "overhead_per_run_s": round(wall / total - loop / args.loop_runs, 3)}
    if "local[1]" in report and "local[2]" in report:
        report["speedup_local2_vs_local1"] = round(report["local[1]"]["wall_s"] / report["local[2]"]["wall_s"], 2)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
