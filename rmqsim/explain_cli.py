"""`rmqsim explain`: the command line of analysis/explain/answer.py (registered by rmqsim/cli.py).

    rmqsim explain RUN_DIR MSG [--json]                  # MSG: display key (p-1-42) or integer id
    rmqsim explain RUN_DIR --cause CAUSE [--limit N] [--json]
    rmqsim explain RUN_DIR --fault K [--json]

Exit codes: 0 answered; 2 bad input (not a run directory, a file of it damaged or of another
type than rmqsim writes, an unknown message, cause or fault index, a run made by another
simulator that has no trace); 3 a replay stopped at its bound (analysis/explain/source.py:
twice the run's own wall time and events, with a margin, and its memory bound) — each with one
line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK, EXIT_BAD_INPUT, EXIT_BOUND = 0, 2, 3


def add_parser(sub: Any) -> None:
    """Register `explain` on the `rmqsim` subcommand parsers."""
    exp = sub.add_parser("explain", help="why did this happen? one message's life as a timeline, the messages of "
                                         "a cause, or what a fault did",
                         epilog="a run without a trace is replayed from scenario.resolved.json and its seed (same "
                                "simulator only), within twice the run's own wall time and events; exit codes: 0 "
                                "answered, 2 bad input, 3 the replay stopped at that bound")
    exp.add_argument("dir", metavar="RUN_DIR", help="a run directory written by `rmqsim run`")
    exp.add_argument("msg", nargs="?", metavar="MSG",
                     help="a message: its display key <producer>-<seq> (as in lost_sample) or its integer id")
    exp.add_argument("--cause", help="list messages lost, duplicated or out of order by this cause")
    exp.add_argument("--limit", type=int, default=10, metavar="N", help="with --cause: at most N messages (10)")
    exp.add_argument("--fault", type=int, metavar="K",
                     help="what fault K did (index in the resolved scenario's faults; random faults follow in "
                          "firing order): its losses, duplicates and order violations, and its recovery time")
    exp.add_argument("--json", action="store_true", help="print the same facts as JSON")
    exp.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    # here, not at the top: every `rmqsim` start registers this parser; the runner, the models and NumPy are for explain
    from analysis.explain.answer import explain_cause, explain_fault, explain_message, render
    from analysis.explain.source import ExplainError, ReplayStopped, read_run

    asked = [x for x in (args.msg, args.cause, args.fault) if x is not None]
    if len(asked) != 1:
        print("rmqsim explain: give exactly one of MSG, --cause CAUSE or --fault K", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        run = read_run(args.dir)
        if args.msg is not None:
            answer = explain_message(run, args.msg)
        elif args.cause is not None:
            answer = explain_cause(run, args.cause, args.limit)
        else:
            answer = explain_fault(run, args.fault)
    except ExplainError as exc:
        print(f"rmqsim explain: {exc}", file=sys.stderr)
        return EXIT_BOUND if isinstance(exc, ReplayStopped) else EXIT_BAD_INPUT
    print(json.dumps(answer, indent=1) if args.json else render(answer))
    return EXIT_OK
