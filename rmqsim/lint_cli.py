"""`rmqsim lint`: the configuration lint of scenario files (registered by rmqsim/cli.py).

    rmqsim lint FILE... [--set KEY.PATH=VALUE]...

Each file is loaded as `rmqsim validate` loads it (the `--set` overrides applied to every file)
and checked by rmqsim/scenario/lint.py (docs/lint.md). Its findings are printed on stdout, in the
lines `rmqsim validate` and `rmqsim run` print on stderr:

    warning: <file>: <key.path>: <message> [<id>]
      fix: <fix>

then one line for the file: `<file>: no warnings`, or `<file>: N warning(s) [<id>, ...]`.

Exit codes: 0 no file has a warning; 1 a file has one (a CI step fails on it, as with other
linters); 2 a file is not a valid scenario (its problems on stderr as `rmqsim validate` prints
them; the other files are still linted).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

EXIT_CLEAN, EXIT_WARNINGS, EXIT_BAD_INPUT = 0, 1, 2


def add_parser(sub: Any) -> None:
    """Register `lint` on the `rmqsim` subcommand parsers."""
    lint = sub.add_parser("lint", help="print the configuration traps of scenario files (docs/lint.md)",
                          epilog="exit codes: 0 no warnings, 1 warnings, 2 a file is not a valid scenario")
    lint.add_argument("scenario", nargs="+", metavar="FILE", help="scenario file(s)")
    lint.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                      help="override a scenario value (YAML syntax) in every file, repeatable")
    lint.set_defaults(func=cmd_lint)


def cmd_lint(args: argparse.Namespace) -> int:
    # here, not at the top: every `rmqsim` start registers this parser; pydantic and the models are for lint
    from rmqsim.scenario import spec as scenario_mod
    from rmqsim.scenario.lint import lint
    from sim.config import ConfigError

    code = EXIT_CLEAN
    for source in args.scenario:
        try:
            sc = scenario_mod.load(source, list(args.set))
        except ConfigError as exc:
            print(exc.render(), file=sys.stderr)
            code = EXIT_BAD_INPUT
            continue
        findings = lint(sc)
        for finding in findings:
            print("\n".join(finding.lines(source)))
        print(f"{source}: {_tally(findings)}")
        if findings and code == EXIT_CLEAN:
            code = EXIT_WARNINGS
    return code


def _tally(findings: list[Any]) -> str:
    """`no warnings`, or `3 warnings [fault-in-warmup, sync-master-no-isr]` (the checks, in registry
    order); a finding that stands for the ones past the cap counts as those (`Lint.more`)."""
    if not findings:
        return "no warnings"
    total = sum(f.more or 1 for f in findings)
    return f"{total} warning{'s' if total != 1 else ''} [{', '.join(dict.fromkeys(f.id for f in findings))}]"


# The prose of docs/lint.md above its table of checks (scripts/gen_docs.py writes the page). Its
# examples run as written, from the repository's top directory; tests/test_lint_coverage_commands.py
# runs them and compares what they print (a `...` line stands for any lines).
DOC_INTRO = """\
A scenario can be valid, run, and answer a question other than the one its author asked. The \
registered checks below find such traps in a scenario file. `rmqsim lint FILE...` prints each \
finding, then one line for each file:

```
$ rmqsim lint scenarios/pop_slow_consumer_invisible_time.yaml
warning: scenarios/pop_slow_consumer_invisible_time.yaml: consumers[0].pop.invisible_duration_ms: 'c' needs \
about 9.6 s for the 16 messages of a receive (consume_time_ms mean 600 ms) but hides them for 10 s: a slower \
batch's last messages are revived before their ack and consumed twice (invisible_time_expired) \
[pop-invisible-time-short]
  fix: raise pop.invisible_duration_ms above the batch's processing time, or lower pop.max_message_num (or give \
the consumer more threads)
scenarios/pop_slow_consumer_invisible_time.yaml: 1 warning [pop-invisible-time-short]
$ rmqsim lint scenarios/baseline.yaml
scenarios/baseline.yaml: no warnings
```

`rmqsim lint` exits 0 when no file has a warning, 1 when one has (a CI step fails on it, as with \
other linters), and 2 when a file is not a valid scenario (its problems on stderr, as `rmqsim \
validate` prints them; the other files are still linted). `--set KEY.PATH=VALUE` overrides a value \
in every file, as for `validate`. `rmqsim validate` and `rmqsim run` print the same findings on \
stderr and go on: their exit code is unchanged by them.

Each finding is `warning: <file>: <key.path>: <message> [<id>]`, then `  fix: <fix>`. At most 10 \
findings of one check are printed; the rest are counted in one more line (and in the file's count). \
The ids are stable. The checks read only the validated scenario (and which keys the file set \
itself); scripted faults are followed through time, random faults count where they can fire at \
all, and where RocketMQ's behaviour depends on the line, `version` decides (4.x = 4.9.8, 5.x = \
5.3.3). The first checks are the parts of a scenario that silently do nothing \
(rmqsim/scenario/useless_parts.py), the rest are RocketMQ configuration traps.

## Settings under which no send can succeed: errors, not warnings

The lint warns where writes fail only sometimes (`min-isr-every-replica`: one replica out of the \
SyncStateSet refuses every send). A setting under which no send can ever succeed is refused by \
validation instead — exit 2 from `validate`, `run`, `lint` and `sweep`, each problem named by its \
key path — although RocketMQ's broker (BrokerStartup) starts with every one of them:

- 5.x: `store.in_sync_replicas` or `store.min_in_sync_replicas` above the broker group's replica \
count (its master and slaves). A send waits for `in_sync_replicas` acknowledgements, the master's \
own included, on a SYNC_MASTER and on any master the controllers elect (always a SYNC_MASTER) \
unless `all_ack_in_sync_state_set` makes it wait for every SyncStateSet member instead: above the \
count, every send waits `slave_timeout_ms` and answers FLUSH_SLAVE_TIMEOUT. In controller mode a \
send is refused before it is stored while the SyncStateSet has fewer than `min_in_sync_replicas` \
members (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH): above the count, always. Where 5.3.3 ignores \
the count (`in_sync_replicas` on an ASYNC_MASTER, `min_in_sync_replicas` outside controller mode) \
it is refused all the same: no group of that size can meet it, and RocketMQ's broker container \
refuses it at start-up ("invalid replicas number"). That container also refuses \
`min_in_sync_replicas` above `in_sync_replicas`; the broker runs it, and sends succeed while \
enough replicas are in sync, so it is a warning here (`min-isr-above-isr`). \
`enableAutoInSyncReplicas` is read only with `enableSlaveActingMaster` (not modelled): 5.3.3's \
controller mode never lowers a count with it.
- 4.x: a SYNC_MASTER without a slave: every send is answered SLAVE_NOT_AVAILABLE (stored, never \
SEND_OK). 4.9.8 has no `inSyncReplicas`; a 4.x scenario that sets it gets the `v5-only-setting` \
warning.
- A producer whose topic no broker hosts (`cluster.topics[].brokers: []`: no route); whose \
smallest message is above its `client.max_message_size_bytes` or above every hosting broker's \
`store.max_message_size_bytes` (MESSAGE_ILLEGAL); a transactional producer whose every hosting \
broker has `broker.reject_transaction_message: true` (NO_PERMISSION); and under 5.x a producer of \
timer messages (`deliver_time_ms`) whose every hosting broker has `store.timer_wheel_enable: false` \
(5.3.3 answers SYSTEM_ERROR, "accurate timer message is not enabled").

A topic with no write queue or a broker without write permission cannot be written either: \
`queues` is at least 1, and a scenario has no permission setting. For example, \
`in_sync_replicas: 5, min_in_sync_replicas: 7` on a controller-mode group of three replicas:

```
$ rmqsim validate scenarios/controller_master_power_loss.yaml --set 'cluster.brokers[0].store.in_sync_replicas=5' \
--set 'cluster.brokers[0].store.min_in_sync_replicas=7'
2 problem(s) in scenarios/controller_master_power_loss.yaml:
  scenarios/controller_master_power_loss.yaml: cluster.brokers[0].store.in_sync_replicas: 5 is above the 3 \
replicas (its master and 2 slaves) of broker group 'broker-a': were min_in_sync_replicas met, every send to it \
would still wait slave_timeout_ms (3 s) for 5 acknowledgements that 3 replicas cannot give, then answer \
FLUSH_SLAVE_TIMEOUT; RocketMQ's broker starts with it, its broker container refuses it at start-up ('invalid \
replicas number'): set it to at most 3, or add slaves (replicas)
  scenarios/controller_master_power_loss.yaml: cluster.brokers[0].store.min_in_sync_replicas: 7 is above the 3 \
replicas (its master and 2 slaves) of broker group 'broker-a': its SyncStateSet never has 7 members, so every \
send to it is refused before it is stored (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH): no send to 'broker-a' \
can succeed; RocketMQ's broker starts with it, its broker container refuses it at start-up ('invalid replicas \
number'): set it to at most 3, or add slaves (replicas)
```

## The checks

"""
