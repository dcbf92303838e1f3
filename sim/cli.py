"""`rmqsim` command line: run, validate, defaults, sweep, report (assembly edge).

Exit codes of `rmqsim run` (Jepsen's verdict vocabulary, analysis/verdict.py): 0 valid, 1
invalid (a guarantee or an `expect:` failed), 2 bad input (every problem printed, nothing run),
3 unknown (e.g. the run stopped at one of its bounds). Other commands: 0 success, 1 failure,
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sim.config import ConfigError
from sim.files import atomic_write_text

EXIT_VALID, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
EXIT_BY_VERDICT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}


def _summary_table(summary: dict[str, Any]) -> str:
    lat = summary["latency_ms"]
    rows = [
        ("sent attempts", summary["sent_attempts"]), ("sent_ok (SEND_OK)", summary["sent_ok"]),
        ("sent, other status", summary["sent_not_ok"]), ("send failed", summary["send_failed"]),
        ("stored", summary["stored"]), ("consumed (ok)", summary["consumed"]),
        ("lost", summary["lost"]), ("pending retry (in %RETRY% / back-off)", summary["pending_retry"]),
        ("in DLQ", summary["dlq"]), ("duplicates", summary["duplicates"]),
        ("duplicated messages", summary["duplicated_messages"]),
        ("  cause producer_retry", summary["duplicate_causes"]["producer_retry"]),
        ("  cause redelivery", summary["duplicate_causes"]["redelivery"]),
        ("order violations", "n/a (no orderly group)" if summary["order_violations"] is None
         else summary["order_violations"]),
    ]
    rows += [(f"latency {k} ms", "-" if v is None else f"{v:.3f}") for k, v in lat.items()]
    width = max(len(r[0]) for r in rows)
    lines = [f"  {name:<{width}}  {value}" for name, value in rows]
    for group, g in summary["groups"].items():
        lines.append(f"  group {group}: lost={g['lost']} duplicates={g['duplicates']} "
                     f"consumed={g['consumed_ok_distinct']} p99={g['latency_ms']['p99']} ms")
    lines.append(f"verdict: {summary['verdict']}")
    lines += [f"  {failure}" for failure in summary["failures"]]
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from sim import scenario as scenario_mod
    from sim.runner import run_scenario

    sc = scenario_mod.load(args.scenario, args.set)
    seed = sc.seed if args.seed is None else args.seed
    print(f"seed: {seed}")
    print(f"scenario: {sc.name}  resolved sha256: {sc.digest()}")
    print(f"reproduce: rmqsim run {args.scenario} --seed {seed}" + "".join(f" --set {s}" for s in args.set or []))
    out = Path(args.out) if args.out else Path("runs") / sc.name / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    result = run_scenario(sc, seed=seed, trace_dir=out / "trace" if args.trace else None,
                          max_events=args.max_events, max_wall_s=args.max_wall_s)
    print(_summary_table(result.summary))
    print(f"trace sha256: {result.summary['trace_sha256']}")
    atomic_write_text(out / "scenario.resolved.json", json.dumps(sc.model_dump(mode="json"), indent=1))
    atomic_write_text(out / "run_meta.json", json.dumps(result.meta, indent=1))
    atomic_write_text(out / "summary.json", json.dumps(result.summary, indent=1, sort_keys=True))
    print(f"wrote {out}/summary.json ({result.meta['wall_s']} s wall, {result.meta['sim_to_wall']}× real time)")
    return EXIT_BY_VERDICT[result.summary["verdict"]]


def cmd_validate(args: argparse.Namespace) -> int:
    from sim import scenario as scenario_mod

    sc = scenario_mod.load(args.scenario, args.set)
    print(f"{args.scenario}: ok (scenario {sc.name!r}, resolved sha256 {sc.digest()})")
    return 0


def cmd_defaults(args: argparse.Namespace) -> int:
    from sim.scenario import dump_defaults

    sys.stdout.write(dump_defaults())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from analysis.results_store import ForeignDirectory
    from analysis.sweep import run_sweep
    from analysis.sweep_spec import load_sweep

    sweep = load_sweep(args.sweep)  # every problem reported before Spark starts
    out = Path(args.out) if args.out else Path("sweeps") / sweep.name
    print(f"sweep {sweep.name}: {len(sweep.points)} points × {len(sweep.seeds)} seeds = "
          f"{len(sweep.runs)} runs → {out}  (digest {sweep.digest()[:12]})")
    if args.dry_run:
        for point in sweep.points:
            print(f"  point {point.index}: {point.key or '(base)'}")
        return 0
    try:
        outcome = run_sweep(sweep, out, master=args.master, parallelism=args.parallelism,
                            verify_determinism=args.verify_determinism, replace=args.replace)
    except ForeignDirectory as exc:
        print(f"rmqsim sweep: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: complete runs are kept in {out}; rerun the same command to resume",
              file=sys.stderr)
        return 130
    print(f"done: {outcome.ran} run(s) in {outcome.wall_s:.1f} s ({outcome.skipped} already complete), "
          f"{len(outcome.failed)} failed")
    for run_id in outcome.failed:
        print(f"  failed: {run_id} (error and reproduction command in {out}/runs/{run_id}.parquet)")
    if outcome.mismatches:
        print(f"determinism check FAILED for {', '.join(outcome.mismatches)}", file=sys.stderr)
        return 1
    if outcome.verified:
        print(f"determinism: {len(outcome.verified)} run(s) rerun in the driver, same digests")
    return 1 if outcome.failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.report import ReportError, build_report

    try:
        out = build_report(Path(args.dir), Path(args.out) if args.out else None, master=args.master,
                           timeline_run=args.run)
    except ReportError as exc:
        print(f"rmqsim report: {exc}", file=sys.stderr)
        return 2
    print(f"report: {out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmqsim", description="Deterministic simulator of Apache RocketMQ",
                                epilog="exit codes of `run`: 0 valid, 1 invalid, 2 bad input, 3 unknown "
                                       "(the verdict; `run --help`)")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario and print its summary and verdict",
                         epilog="exit codes: 0 valid (every guarantee and expectation held), 1 invalid "
                                "(an acknowledged message lost, or an `expect:` failed), 2 bad input, "
                                "3 unknown (the run stopped at a bound, or something could not be judged)")
    run.add_argument("scenario")
    run.add_argument("--seed", type=int)
    run.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override a scenario value (YAML syntax), repeatable")
    run.add_argument("--out", help="output directory (default runs/<scenario>/seed-<n>)")
    run.add_argument("--trace", action="store_true",
                     help="also write the trace: OUT/trace/<kind>.parquet, one file per record kind")
    run.add_argument("--max-events", type=int, default=None, metavar="N",
                     help="stop after N events (verdict unknown; default: 2e9, beyond any study)")
    run.add_argument("--max-wall-s", type=float, default=None, metavar="S",
                     help="stop after S seconds of wall time (verdict unknown; default: none)")
    run.set_defaults(func=cmd_run)
    val = sub.add_parser("validate", help="check a scenario file without running it")
    val.add_argument("scenario")
    val.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    val.set_defaults(func=cmd_validate)
    dfl = sub.add_parser("defaults", help="print every scenario field with its default")
    dfl.set_defaults(func=cmd_defaults)
    swp = sub.add_parser("sweep", help="run a parameter grid × seeds on Spark, results in Parquet")
    swp.add_argument("sweep", help="sweep file (scenarios/sweeps/*.yaml)")
    swp.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
    swp.add_argument("--out", help="output directory (default sweeps/<name>); a rerun resumes")
    swp.add_argument("--parallelism", type=int, help="runs at once (local[N]; spark.cores.max on a cluster)")
    swp.add_argument("--verify-determinism", type=int, default=0, metavar="K",
                     help="rerun K random runs in the driver and compare trace digests")
    swp.add_argument("--dry-run", action="store_true", help="validate and list the points only")
    swp.add_argument("--replace", action="store_true",
                     help="if --out holds another sweep, or runs of another simulator version, delete it and start afresh")
    swp.set_defaults(func=cmd_sweep)
    rep = sub.add_parser("report", help="figures and an HTML page from a sweep's results")
    rep.add_argument("dir", help="a sweep output directory")
    rep.add_argument("--out", help="report directory (default DIR/report)")
    rep.add_argument("--master", default="local[1]", help="Spark master for the SQL (default local[1])")
    rep.add_argument("--run", help="run id for the latency-over-time figure (default: the sweep's timeline run)")
    rep.set_defaults(func=cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
