"""`rmqsim` command line: run, validate, defaults, sweep, report (assembly edge).

Exit codes of `rmqsim run` (Jepsen's verdict vocabulary, analysis/checkers/verdict.py): 0 valid, 1
invalid (a guarantee or an `expect:` failed), 2 bad input or an unusable output location (every
problem printed, nothing run), or output that could not be written during the run (a full disk:
`could not write <path>: no space left on device`; the run's files are removed), 3 unknown (the
run stopped at a bound — `--max-events`, `--max-wall-s`, the scenario's `limits: max_rss_mb`, or a livelock: `limits:
max_events_per_instant`, `max_step_wall_s` — or something could not be judged). Other commands:
0 success, 1 failure, 2 bad input or could not write (a full disk, a directory rmqsim will not
write into, a file it will not read), 130 interrupted.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import itertools
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from sim.limits import CONFIRM_RUNS, DEFAULT_MAX_EVENTS, DEFAULT_MAX_WALL_S, MAX_SEED

# What each command imports before it starts (`_start_up`): only what its path uses. `validate`
# never imports pandas, pyarrow, matplotlib or pyspark (tests/test_cli_startup.py); `run` imports
# the report modules only with --report, Spark never.
COMMAND_IMPORTS = {
    "run": ("rmqsim.runner", "rmqsim.scenario.lint", "rmqsim.run_store", "rmqsim.progress",
            "analysis.reports.summary_text", "analysis.sweeps.repro_card"),
    "validate": ("rmqsim.scenario.spec", "rmqsim.scenario.lint"),
    "lint": ("rmqsim.scenario.spec", "rmqsim.scenario.lint"),
}
ALWAYS_IMPORTS = ("sim.config", "sim.files")  # ConfigError and OutputError: main() catches them

DRY_RUN_POINTS = 20  # points listed by `sweep --dry-run`

EXIT_VALID, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
EXIT_BY_VERDICT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}


def _warn(sc: Any, source: str) -> None:
    """The lint findings (rmqsim/scenario/lint.py): `warning: <file>: <key.path>: <message> [<id>]`,
    then `  fix: <fix>`."""
    from rmqsim.scenario.lint import lint

    for finding in lint(sc):
        for line in finding.lines(source):
            print(line, file=sys.stderr)


def _utc_stamp() -> str:
    """The output directory's time stamp (wall clock: it names a directory, it never enters a run)."""
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")  # noqa: TID251


def _output_dir(args: argparse.Namespace, name: str, seed: int) -> Any:
    """The run's `RunOutput` (rmqsim/run_store.py): `--out` (refused if it holds a run, unless --replace
    proves that run rmqsim's), else a fresh runs/<name>/<time>-seed-<n>."""
    from rmqsim import run_store

    return run_store.open_run_output(args.out, args.replace, Path("runs"), name, seed, _utc_stamp())


def reproduce_line(scenario: str, seed: int, overrides: list[str]) -> str:
    """The command that reruns this run, each word shell-quoted."""
    words = ["rmqsim", "run", scenario, "--seed", str(seed)]
    for item in overrides:
        words += ["--set", item]
    return shlex.join(words)


def cmd_run(args: argparse.Namespace) -> int:
    from analysis.reports.summary_text import summary_text
    from rmqsim.runner import run_scenario
    from rmqsim.scenario import spec as scenario_mod
    from sim.files import OutputError, write_error

    sc = scenario_mod.load(args.scenario, args.set)
    _warn(sc, args.scenario)
    seed = sc.seed if args.seed is None else args.seed
    output = _output_dir(args, sc.name, seed)  # before simulating
    out = output.directory
    print(f"seed: {seed}")
    print(f"scenario: {sc.name}  resolved sha256: {sc.digest()}")
    print(f"reproduce: {reproduce_line(args.scenario, seed, args.set or [])}")
    from rmqsim.progress import ProgressLine

    progress = ProgressLine(sys.stderr)  # quiet unless stderr is a terminal
    try:  # a run that cannot write its files (a full disk) or is interrupted leaves nothing behind
        try:
            result = run_scenario(sc, seed=seed, trace_dir=output.trace_dir() if args.trace or args.report else None,
                                  max_wall_s=args.max_wall_s, max_events=args.max_events,
                                  progress=progress if progress.enabled else None,
                                  release_store=True)  # the brokers' stores are not read after the run here
        finally:
            progress.close()
        print(summary_text(result.summary))
        print(f"trace sha256: {result.summary['trace_sha256']}")
        output.write_text("scenario.resolved.json", json.dumps(sc.model_dump(mode="json"), indent=1))
        output.write_text("run_meta.json", json.dumps(result.meta, indent=1))
        output.write_text("summary.json", json.dumps(result.summary, indent=1, sort_keys=True))
        from analysis.sweeps.repro_card import write_run_card  # invalid or unknown: RUN_DIR/repro.md

        card = write_run_card(output, result.summary, result.meta, reproduce_line(args.scenario, seed, args.set or []))
        output.finish()
    except BaseException as exc:
        output.abandon()
        if isinstance(exc, OutputError | OSError) and not isinstance(exc, BrokenPipeError):  # not stdout's reader
            error = exc if isinstance(exc, OutputError) else write_error(out, exc)
            raise OutputError(f"{error}; this run's files were removed, nothing of it is kept in {out}") from None
        raise
    print(f"wrote {out}/summary.json ({result.meta['wall_s']} s wall, {result.meta['sim_to_wall']}× real time)")
    if card is not None:
        print(f"repro card: {card}")
    if args.report:
        from analysis.reports.run_report import build_run_report

        print(f"report: {build_run_report(out)}")
    _warn_unquiet(result.summary, sc, args.scenario)
    stopped_by = result.summary["stopped_by"]
    if stopped_by:
        bound = {"max_events": f"--max-events {args.max_events}", "max_wall_s": f"--max-wall-s {args.max_wall_s}",
                 "max_rss_mb": "limits.max_rss_mb", "livelock": "the livelock bound"}.get(stopped_by, stopped_by)
        print(f"stopped at bound: unknown ({bound} reached at simulated {result.summary['stopped_at_ms'] / 1000:g} s; "
              "the counts above cover only that part of the run)", file=sys.stderr)
        print(f"  {result.summary['stopped_detail']}; {result.summary['unconsumed']} acknowledged message(s) not yet "
              "consumed (unconsumed, not lost)", file=sys.stderr)
    return EXIT_BY_VERDICT[result.summary["verdict"]]


def _warn_unquiet(summary: dict[str, Any], sc: Any, source: str) -> None:
    """A fixed `settle_ms` that ended while the cluster was still changing (rmqsim/quiescence.py)."""
    from rmqsim.quiescence import warning_lines

    q = summary.get("quiescence") or {}
    if q.get("settle") == "fixed":
        for i, line in enumerate(warning_lines(q, sc.settle_max_ms)):
            print(f"warning: {source}: settle_ms: {line}" if i == 0 else line, file=sys.stderr)


def _seed(text: str) -> int:
    """A seed: a whole number from 0 to 2^63 - 1 (stored as int64 in sweep results)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"not a seed (0 to 2^63 - 1): {text[:40]!r}")
    return value


def _inside(root: Path, *parts: str) -> Path:
    """root/parts, from validated plain names; refused if it still resolves outside `root`
    (a symbolic link placed there): an output directory derived from a name stays in its root."""
    from sim.files import OutputError

    out = root.joinpath(*parts)
    if not out.resolve().is_relative_to(root.resolve()):
        raise OutputError(f"{out} resolves outside {root}/ (a symbolic link?); pass --out to write there")
    return out


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
        return value
    return parse


def cmd_validate(args: argparse.Namespace) -> int:
    from rmqsim.scenario import spec as scenario_mod

    sc = scenario_mod.load(args.scenario, args.set)
    _warn(sc, args.scenario)
    print(f"{args.scenario}: ok (scenario {sc.name!r}, resolved sha256 {sc.digest()})")
    return 0


def cmd_defaults(args: argparse.Namespace) -> int:
    from rmqsim.scenario.spec import dump_defaults

    sys.stdout.write(dump_defaults())
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from rmqsim.schema import dump_schema

    sys.stdout.write(dump_schema())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from analysis.sweeps.directory import ForeignDirectory
    from analysis.sweeps.spec import load_sweep
    from analysis.sweeps.sweep import SparkMasterError, SweepAborted, check_master, check_reachable, run_sweep

    sweep = load_sweep(args.sweep, progress=sys.stderr)  # every problem reported before Spark starts
    try:
        check_master(args.master)
        if args.master and not args.dry_run:  # an unreachable master before the lint's warnings and any work
            check_reachable(args.master)
    except SparkMasterError as exc:
        print(f"rmqsim sweep: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else _inside(Path("sweeps"), sweep.name)
    print(f"sweep {sweep.name}: {sweep.n_points:,} points × {len(sweep.seeds):,} seeds = {sweep.n_runs:,} runs → {out}")
    _warn_sweep(sweep, args.sweep)
    if args.dry_run:
        for point in itertools.islice(sweep.iter_points(), DRY_RUN_POINTS):
            print(f"  point {point.index}: {point.key or '(base)'}")
        if sweep.n_points > DRY_RUN_POINTS:
            print(f"  ... and {sweep.n_points - DRY_RUN_POINTS:,} more points")
        return 0
    if sweep.n_runs > CONFIRM_RUNS and not args.yes:
        print(f"rmqsim sweep: {sweep.n_runs:,} runs is more than {CONFIRM_RUNS:,}; pass --yes to run them "
              "(or --dry-run to list the points)", file=sys.stderr)
        return 2
    try:
        outcome = run_sweep(sweep, out, master=args.master, parallelism=args.parallelism,
                            verify_determinism=args.verify_determinism, replace=args.replace)
    except ForeignDirectory as exc:
        print(f"rmqsim sweep: {exc}", file=sys.stderr)
        return 2
    except SparkMasterError as exc:
        kept = f"\ncomplete runs are kept in {out}; rerun the same command to resume" if out.is_dir() else ""
        print(f"rmqsim sweep: {exc}{kept}", file=sys.stderr)
        return 2
    except SweepAborted as exc:
        print(f"rmqsim sweep: the Spark job failed: {exc}\ncomplete runs are kept in {out}; "
              "rerun the same command to resume", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted: complete runs are kept in {out}; rerun the same command to resume",
              file=sys.stderr)
        return 130
    print(f"done: {outcome.ran} run(s) in {outcome.wall_s:.1f} s ({outcome.skipped} already complete), "
          f"{len(outcome.failed)} failed; {outcome.compiled_runs} on compiled modules")
    for run_id in outcome.failed:
        print(f"  failed: {run_id} (error and reproduction command in {out}/runs/{run_id}.parquet)")
    if outcome.retried:
        print(f"retried after losing an executor or a worker process: {_retried_text(outcome.retried)} "
              "(the runs table's `attempt` column)")
    if args.report and _sweep_report(out, args, outcome.spark) != 0:
        return 2
    if outcome.mismatches:
        print(f"determinism check FAILED for {', '.join(outcome.mismatches)}", file=sys.stderr)
        return 1
    if outcome.verified:
        print(f"determinism: {len(outcome.verified)} run(s) rerun in the driver, same digests")
    return 1 if outcome.failed else 0


def _warn_sweep(sweep: Any, source: str) -> None:
    """The lint's warnings over the sweep's points (analysis/sweeps/lint_points.py), each once with
    the points it applies to and the swept parameters it calls inert, on stderr; the sweep goes on."""
    from analysis.sweeps.lint_points import lines

    for entry in sweep.lint:
        for line in lines(entry, source):
            print(line, file=sys.stderr)


def _retried_text(retried: dict[str, int], shown: int = 20) -> str:
    """`p0001-s2 (attempt 1), ...`: Spark's attempt numbers count from 0; at most `shown` runs named."""
    named = ", ".join(f"{run_id} (attempt {attempt})" for run_id, attempt in itertools.islice(retried.items(), shown))
    return named + (f" and {len(retried) - shown:,} more" if len(retried) > shown else "")


def _sweep_report(out: Path, args: argparse.Namespace, spark: Any) -> int:
    """`sweep --report`: the report, in the sweep's own SparkSession (none started if no run ran)."""
    from analysis.reports.sweep_report import ReportError, build_report
    from analysis.sweeps.sweep import SparkMasterError

    try:
        page = build_report(out, master=args.master or "local[1]", spark=spark)
    except (ReportError, SparkMasterError) as exc:
        print(f"rmqsim sweep --report: {exc}", file=sys.stderr)
        return 2
    print(f"report: {page}")
    return 0


def _is_run_dir(path: Path) -> bool:
    """A run's directory (its summary, or a run manifest, and no sweep.json), whatever those files are:
    the run report then refuses what it would not read, rather than the sweep report guessing."""
    from sim.files import MANIFEST

    def there(name: str) -> bool:
        return (path / name).exists() or (path / name).is_symlink()

    return (there("summary.json") or there(MANIFEST)) and not there("sweep.json")


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.reports.sweep_report import ReportError, build_report

    if _is_run_dir(Path(args.dir)):  # one run's directory: no Spark needed
        from analysis.reports.run_data import RunDataError
        from analysis.reports.run_report import build_run_report

        try:
            out = build_run_report(Path(args.dir), Path(args.out) if args.out else None)
        except RunDataError as exc:
            print(f"rmqsim report: {exc}", file=sys.stderr)
            return 2
        print(f"report: {out}")
        return 0
    from analysis.sweeps import spark_classes
    from analysis.sweeps.sweep import SparkMasterError

    try:
        out = build_report(Path(args.dir), Path(args.out) if args.out else None, master=args.master,
                           timeline_run=args.run, focus=args.focus, own_session=True)
    except SparkMasterError as exc:  # Spark did not start: no class archive to finish
        print(f"rmqsim report: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"rmqsim report: {exc}", file=sys.stderr)
        code = 2
    else:
        print(f"report: {out}", flush=True)
        code = 0
    if spark_classes.pending():  # the first report on this machine: its JVM keeps Spark's classes for the next
        print("keeping Spark's parsed classes for the next report's start-up (once) ...", file=sys.stderr)
        spark_classes.finish()
    return code


def cmd_diff(args: argparse.Namespace) -> int:
    from analysis.reports.diff import DiffError, diff_text, read_side

    try:
        sides = [read_side(args.a), read_side(args.b)]
    except DiffError as exc:
        print(f"rmqsim diff: {exc}", file=sys.stderr)
        return 2
    print(diff_text(*sides))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmqsim", description="Deterministic simulator of Apache RocketMQ",
                                epilog="exit codes of `run`: 0 valid, 1 invalid, 2 bad input or could not write, "
                                       "3 unknown (the verdict; `run --help`)")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="print the version and the digest of the simulator's sources (sim/, models/)")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario and print its summary and verdict",
                         epilog="exit codes: 0 valid (every guarantee and expectation held), 1 invalid "
                                "(an acknowledged message lost, or an `expect:` failed), 2 bad input, or output that "
                                "could not be written (a full disk: `could not write ...`, nothing of the run kept), "
                                "3 unknown (the run stopped at a bound: --max-events, --max-wall-s, limits.max_rss_mb, "
                                "or a livelock; or something could not be judged)")
    run.add_argument("scenario")
    run.add_argument("--seed", type=_seed)
    run.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override a scenario value (YAML syntax), repeatable")
    run.add_argument("--out", help="output directory (default: a fresh runs/<scenario>/<UTC time>-seed-<n>, "
                                   "linked as runs/<scenario>/latest and runs/latest); refused if it holds a run")
    run.add_argument("--replace", action="store_true",
                     help="with --out: delete the earlier run there (summary, trace, report), only if its manifest "
                          "proves every file in those places is one rmqsim wrote; otherwise refuse and name them")
    run.add_argument("--trace", action="store_true",
                     help="also write the trace: OUT/trace/<kind>.parquet, one file per record kind")
    run.add_argument("--report", action="store_true",
                     help="also write OUT/report/index.html with PNG and SVG figures (implies --trace)")
    run.add_argument("--max-events", type=_positive(int), default=DEFAULT_MAX_EVENTS, metavar="N",
                     help=f"stop after about N events, verdict unknown (exit 3; default {DEFAULT_MAX_EVENTS:,})")
    run.add_argument("--max-wall-s", type=_positive(float), default=DEFAULT_MAX_WALL_S, metavar="S",
                     help=f"stop after S seconds of wall time, verdict unknown (exit 3; default {DEFAULT_MAX_WALL_S:g})")
    run.set_defaults(func=cmd_run)
    val = sub.add_parser("validate", help="check a scenario file without running it")
    val.add_argument("scenario")
    val.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE")
    val.set_defaults(func=cmd_validate)
    dfl = sub.add_parser("defaults", help="print every scenario field with its default")
    dfl.set_defaults(func=cmd_defaults)
    sch = sub.add_parser("schema", help="print the JSON Schemas of scenario and sweep files, as one JSON document "
                                        "with the keys `scenario` and `sweep`")
    sch.set_defaults(func=cmd_schema)
    swp = sub.add_parser("sweep", help="run a parameter grid × seeds on Spark, results in Parquet")
    swp.add_argument("sweep", help="sweep file (scenarios/sweeps/*.yaml)")
    swp.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
    swp.add_argument("--out", help="output directory (default sweeps/<name>); a rerun resumes")
    swp.add_argument("--parallelism", type=int, help="runs at once (local[N]; spark.cores.max on a cluster)")
    swp.add_argument("--verify-determinism", type=int, default=0, metavar="K",
                     help="rerun K random runs in the driver and compare trace digests")
    swp.add_argument("--dry-run", action="store_true", help="validate and list the points only")
    swp.add_argument("--replace", action="store_true",
                     help="if --out holds another sweep, or runs of another simulator version, delete it and start "
                          "afresh (only if every file in it is provably rmqsim's; otherwise refuse and name them)")
    swp.add_argument("--yes", action="store_true", help=f"run a sweep of more than {CONFIRM_RUNS:,} runs")
    swp.add_argument("--report", action="store_true",
                     help="then write OUT/report/index.html, as `rmqsim report OUT` does, in the sweep's SparkSession")
    swp.set_defaults(func=cmd_sweep)
    rep = sub.add_parser("report", help="figures and an HTML page from a sweep's results, or from one run's directory")
    rep.add_argument("dir", help="a sweep output directory, or a run directory written with --trace")
    rep.add_argument("--out", help="report directory (default DIR/report)")
    rep.add_argument("--master", default="local[1]", help="Spark master for the SQL (default local[1])")
    rep.add_argument("--run", help="run id for the latency-over-time figure (default: the sweep's timeline run)")
    rep.add_argument("--focus", metavar="METRIC",
                     help="the metric the report opens with: loss, duplicates, latency, order, transactions, or a "
                          "numeric column of the runs table by its summary key path (latency_ms.max, "
                          "availability.write_outage_s.max, duplicates_by_cause.rebalance, ...); default: the sweep "
                          "file's `report: {focus: ...}`, else inferred from what varies (exit 2 for a name that is "
                          "neither, with the nearest)")
    rep.set_defaults(func=cmd_report)
    dif = sub.add_parser("diff", help="the summary metrics that differ between two runs, with causes, and the "
                                      "scenario keys that differ",
                         epilog="a run is a run directory or a sweep point SWEEP_DIR:run_id (sweeps/quick:p0001-s2); "
                                "exit 0, or 2 if an input is not a run")
    dif.add_argument("a", help="run directory or SWEEP_DIR:run_id")
    dif.add_argument("b", help="run directory or SWEEP_DIR:run_id")
    dif.set_defaults(func=cmd_diff)
    from rmqsim.explain_cli import add_parser as add_explain

    add_explain(sub)  # rmqsim explain (rmqsim/explain_cli.py)
    from rmqsim import coverage_cli, lint_cli  # rmqsim lint, rmqsim coverage (rmqsim/lint_cli.py, coverage_cli.py)
    lint_cli.add_parser(sub)
    coverage_cli.add_parser(sub)
    return p


def version_line() -> str:
    """`rmqsim <version> simulator <sha256 of sim/ and models/>`: two runs with the same line, scenario
    and seed have the same trace digest (the digest of the sources on disk, as a sweep records it:
    sim/sources.py, without the sweep's imports)."""
    from importlib.metadata import PackageNotFoundError, version

    from sim.sources import sources_sha256

    try:
        number = version("rmqsim")
    except PackageNotFoundError:  # run from a source tree that was not installed
        number = "unknown"
    return f"rmqsim {number} simulator {sources_sha256()}"


class _Version(argparse.Action):
    def __call__(self, p: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None) -> None:
        print(version_line())
        p.exit(0)


EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away


def _start_up(command: str, program: bool) -> None:
    """Import what `command` needs with the cyclic garbage collector off: imports allocate some
    hundred thousand long-lived objects, and collections passing over them while they are made cost
    about 5 % of a short run's start. As the program itself (`program`: argv from the command line),
    those objects are then frozen (`gc.freeze`: later collections skip them; they live as long as
    the process anyway); a caller's process (a test calling `main([...])`) keeps its collector as it
    was, only paused during the imports."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in (*ALWAYS_IMPORTS, *COMMAND_IMPORTS.get(command, ())):
            importlib.import_module(name)
    finally:
        if program:
            gc.freeze()
        if enabled:
            gc.enable()


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        _start_up(args.command, program=argv is None)
        from sim.config import ConfigError
        from sim.files import OutputError

        try:
            code = args.func(args)
        except ConfigError as exc:
            print(exc.render(), file=sys.stderr)
            code = 2
        except OutputError as exc:
            print(f"rmqsim {args.command}: {exc}", file=sys.stderr)
            code = 2
        sys.stdout.flush()  # here, not at exit: a closed pipe is then caught below
        return code
    except BrokenPipeError:
        return _pipe_closed()


def _pipe_closed() -> int:
    """The reader of stdout went away (`| head`): end quietly, without a traceback, and without
    Python's own complaint when it flushes stdout at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test's capture)
        pass
    return EXIT_PIPE_CLOSED


if __name__ == "__main__":
    sys.exit(main())
