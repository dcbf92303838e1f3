"""`rmqsim coverage`: which rare-state points one run reached (registered by rmqsim/cli.py).

    rmqsim coverage RUN_DIR [--json]

Reads RUN_DIR/summary.json as every reader of a run does (sim/files.py `read_json`: a regular file,
never a link, bounded in size and depth, its `coverage` of the declared shape) and prints its
counts against the catalogue (models/coverage_points.py; docs/coverage.md describes each point):

    runs/latest: 3 of 61 rare-state points reached
    reached (times taken, in catalogue order):
           12  flush_slave_timeout          a SYNC_MASTER send's replica wait ran out: answered FLUSH_SLAVE_TIMEOUT
      ...
    not reached (58):
      power_loss_unflushed_tail, crash_write_buffer_lost, ...

A point the run counted that this rmqsim's catalogue does not have (a run of another version) is
listed apart, as is a catalogue point the run did not count. `--json` prints the same as one
object: `reached` (point → times), `not_reached`, `not_in_catalogue`, `not_counted`.

Exit codes: 0 printed; 2 bad input (not a run directory, or its summary.json missing, not a
regular file, damaged, of another shape, or without `coverage`), with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MAX_SUMMARY_BYTES = 64 << 20  # as the other readers of summary.json (analysis/explain/source.py)
WIDTH = 100  # columns of the wrapped list of unreached points


class CoverageError(Exception):
    """Why RUN_DIR's coverage cannot be read (one line)."""


def add_parser(sub: Any) -> None:
    """Register `coverage` on the `rmqsim` subcommand parsers."""
    cov = sub.add_parser("coverage", help="which rare-state points a run reached, how often, and which it did not "
                                          "(docs/coverage.md)",
                         epilog="exit codes: 0 printed, 2 not a run directory or its summary.json unreadable")
    cov.add_argument("dir", metavar="RUN_DIR", help="a run directory written by `rmqsim run`")
    cov.add_argument("--json", action="store_true", help="print the same as one JSON object")
    cov.set_defaults(func=cmd_coverage)


def cmd_coverage(args: argparse.Namespace) -> int:
    try:
        counts = read_coverage(Path(args.dir))
    except CoverageError as exc:
        print(f"rmqsim coverage: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = sort_points(counts)
    print(json.dumps(report, indent=1) if args.json else render(_one_line(args.dir), report))
    return EXIT_OK


def read_coverage(directory: Path) -> dict[str, int]:
    """The `coverage` counts of the run in `directory`; CoverageError if it is no run of rmqsim's."""
    from sim.files import lstat_kind, read_json
    from sim.readback import COUNT, HEX64, SUMMARY_IDENTITY, MapOf, Record, missing

    if lstat_kind(directory / "sweep.json") is not None:
        raise CoverageError(f"{directory} is a sweep directory: give one run's directory (SWEEP/runs/... is not one; "
                            "`rmqsim report` shows which points no run of the sweep reached)")
    if lstat_kind(directory / "summary.json") is None:
        raise CoverageError(f"{directory} is not a run directory (no summary.json): pass the directory `rmqsim run` "
                            "wrote")
    path = directory / "summary.json"
    shape = Record({"trace_sha256": HEX64, "coverage": MapOf(COUNT)})
    summary = read_json(path, MAX_SUMMARY_BYTES, CoverageError, "is damaged (not the JSON rmqsim writes)", shape)
    if missing(summary, SUMMARY_IDENTITY):
        raise CoverageError(f"{path} is not an rmqsim run summary (no trace_sha256)")
    if "coverage" not in summary:
        raise CoverageError(f"{path}: written by an older rmqsim (no coverage): re-run it")
    return summary["coverage"]


def sort_points(counts: dict[str, int]) -> dict[str, Any]:
    """The counts against the catalogue: `reached` (point → times, catalogue order, then the run's
    points the catalogue lacks), `not_reached`, `not_in_catalogue` (counted by the run, unknown
    here), `not_counted` (in the catalogue, not in the run's summary)."""
    from models.coverage_points import POINTS

    known = [p.name for p in POINTS]
    catalogue = set(known)
    foreign = [name for name in counts if name not in catalogue]
    order = [name for name in known if name in counts] + foreign
    return {"reached": {name: counts[name] for name in order if counts[name]},
            "not_reached": [name for name in order if not counts[name]],
            "not_in_catalogue": foreign,
            "not_counted": [name for name in known if name not in counts]}


def render(directory: str, report: dict[str, Any]) -> str:
    """The text `rmqsim coverage` prints (module docstring)."""
    from models.coverage_points import POINTS

    branch = {p.name: p.branch for p in POINTS}
    reached, unreached = report["reached"], report["not_reached"]
    total = len(reached) + len(unreached)
    lines = [f"{directory}: {len(reached)} of {total} rare-state points reached"]
    if reached:
        lines.append("reached (times taken, in catalogue order):")
        count_w = max(len(f"{n:,}") for n in reached.values())
        name_w = max(len(_one_line(name)) for name in reached)
        lines += [f"  {n:>{count_w},}  {_one_line(name):<{name_w}}  {branch.get(name, '(not in this catalogue)')}"
                  .rstrip() for name, n in reached.items()]
    lines += _listed(f"not reached ({len(unreached)}):", unreached)
    lines += _listed("counted by the run, not in this rmqsim's catalogue (a run of another version):",
                     report["not_in_catalogue"])
    lines += _listed("in the catalogue, not counted by the run (an older rmqsim):", report["not_counted"])
    return "\n".join(lines)


def _listed(head: str, names: list[str]) -> list[str]:
    if not names:
        return []
    return [head, *textwrap.wrap(", ".join(map(_one_line, names)), WIDTH, initial_indent="  ",
                                 subsequent_indent="  ", break_on_hyphens=False)]


def _one_line(text: str) -> str:
    """`text` with its non-printable characters escaped: a hostile name or path stays on its line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# The prose of docs/coverage.md above its table of points (scripts/gen_docs.py writes the page).
# Its examples run as written, from the repository's top directory; tests/test_lint_coverage_commands.py
# runs them and compares what they print (a `...` line stands for any lines).
DOC_INTRO = """\
A run of 1,000 seeds that reports "0 lost" says little unless the states that could lose a \
message were reached. Each point below names one branch of the models that decides loss, \
duplicates, order or latency (FoundationDB's `TEST()`, Antithesis's sometimes-assertions). Every \
run counts how often each was taken: the summary's `coverage` maps every name, in this order, to \
its count (0: never reached); `rmqsim run` prints how many were reached and which; `rmqsim coverage \
RUN_DIR` lists them against this catalogue, with the times each was taken and what it means, and \
the points the run did not reach; a sweep shows which points no run reached. The counts are not \
part of the trace digest. Names are stable (sweeps and reports key on them); each point is reached \
by at least one bundled scenario or test (tests/test_coverage_points.py). To add one, see the \
docstring of models/coverage_points.py.

```
$ rmqsim run scenarios/power_loss_sync_master.yaml --out runs/psm
...
coverage: 8 of 61 rare-state points reached: sync_master_waits_for_slave 35,270,
  pull_held_woken_by_arrival 33,066, send_budget_exhausted 2,087, send_retried_other_broker 1,444,
  flush_slave_timeout 439, pull_hold_expired_empty 23, broker_offset_rolled_back 5,
...
$ rmqsim coverage runs/psm
runs/psm: 8 of 61 rare-state points reached
reached (times taken, in catalogue order):
       5  broker_offset_rolled_back    a restarted broker loaded a committed offset below the one it had served
  35,270  sync_master_waits_for_slave  a SYNC_MASTER send waited for its slave's acknowledgement
     439  flush_slave_timeout          a SYNC_MASTER send's replica wait ran out: answered FLUSH_SLAVE_TIMEOUT
       1  ha_slave_catching_up         a slave connected behind the master's readable end and was sent the gap
  33,066  pull_held_woken_by_arrival   a held pull was answered because a message arrived in its queue
      23  pull_hold_expired_empty      a held pull's suspend time ran out with nothing new: answered not found
   1,444  send_retried_other_broker    a send's retry (SYNC or ASYNC) went to another broker than the failed \
attempt
   2,087  send_budget_exhausted        a SYNC send ran out of sendMsgTimeout before its next attempt
not reached (53):
  power_loss_unflushed_tail, crash_write_buffer_lost, recovery_truncates_invalid_tail,
...
```

`rmqsim coverage RUN_DIR --json` prints the same as one object: `reached` (point → times taken), \
`not_reached`, and, for a run of another rmqsim, `not_in_catalogue` (points the run counted that \
this catalogue lacks) and `not_counted` (points of this catalogue the run did not count). It reads \
RUN_DIR/summary.json as every reader of a run does (a regular file, never a link, bounded in size \
and depth, of the declared shape) and exits 0, or 2 with one line on stderr when RUN_DIR is not a \
run directory or its summary.json is missing, damaged or of another shape.

## The points

"""
