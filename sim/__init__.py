"""rmqsim: the assembly edge (scenario files, the runner), the CLI and the Python API; the kernel is `sim.kernel`.

- scenario.py       the scenario tree and its loading; scenario_checks.py (cross-section checks),
                    scenario_lint.py / scenario_warnings.py (configuration traps), setup_size.py
- runner.py         builds a run from a scenario, runs it, settles it (quiescence.py), judges it
- cli.py            `rmqsim` (explain_cli.py: `rmqsim explain`); schema.py, reference.py, run_store.py, progress.py

`sim.run(path_or_scenario, seed=..., max_events=..., max_wall_s=...)` is the Python API, and
`sim.load(RUN_DIR)` reads a finished run back as the same `RunResult`.

The layering rule, over every import of sim, models and analysis (top-level or in a function):
a module imports only its own layer and the layers below it, and no import cycle exists. The
layers, lowest first:
1. the kernel, sim/kernel/: imports nothing of models, checkers or the assembly edge;
2. the models, models/: import only the kernel; models/records.py is the record schema they emit;
3. the checkers, analysis/: ledger, checks, metrics, verdict, duplicates, order, txn_checker,
   timer_checker, failover_checker, consumer_metrics and the helpers they need (message_causes,
   time_column, faults_applied, run_rows, ...; trace_store and frames: the trace's files and frames):
   import no models;
   models/records.py, the record schema, is the one module of models the checkers (and all of
   analysis above them) may import;
4. the assembly edge, the other modules of sim/ (scenario*, runner, quiescence, ...): imports
   the checkers, never explain: `RunResult.explain` is given its implementation from above
   (`explainer`);
5. explain, analysis/explain*.py and run_load.py (`rmqsim explain`, `sim.load`): imports the runner;
6. sweeps (analysis/sweep*, results_store, aggregate, ...) and 7. reports (report*, *figures,
   diff, ...): only the CLI imports them (reports read sweeps; sweeps import no reports);
8. the CLI: cli.py and its commands' own modules (explain_cli.py, schema.py), and `run` and
   `load` here.
This module's top level imports only the kernel: it runs before every module of sim, and
`models` and `analysis` import `sim` first (the compiled build's check). tests/test_layering.py
holds the table of modules and checks the rule.
"""

from __future__ import annotations

import os
from typing import Any

# NumPy's OpenBLAS starts a worker thread per core, and its workers spin while waiting for work:
# about 1 % of a run's instructions, and a core taken from the other runs of a sweep. rmqsim's
# NumPy work is small vector operations in one thread, so one BLAS thread, unless the user set it
# (it takes effect only before NumPy's first import, which this package precedes).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sim.kernel import compiled  # noqa: E402

compiled.check_build()  # before any compiled module is imported (sim/kernel/compiled.py)


def run(scenario: Any, seed: int | None = None, *, overrides: list[str] | None = None, details: bool = False,
        keep_records: bool = False, trace_dir: Any = None, max_events: int | None = None,
        max_wall_s: float | None = None, observers: tuple = (), progress: Any = None, detail: bool = False) -> Any:
    """Run a scenario and return its RunResult (`repr`: one line; `.summary`: the summary.json
    dict; `.frame(kind)`: one record kind as a pandas DataFrame).

    scenario: a path to a scenario file, or a loaded `sim.scenario.Scenario`.
    seed: the run's seed (default: the scenario's `seed`).
    overrides: `--set` items for a path, e.g. `["producers[0].rate_per_s=300", "duration_ms=20s"]`.
    details: also collect the checkers' per-message facts (`.details`: latency samples, delivery counts).
    keep_records: keep every record in memory (`.records`; `.frame(kind)` reads them).
    trace_dir: stream the trace there as Parquet, one file per kind (`.frame(kind)` reads it).
    max_events, max_wall_s: stop the run at that bound (verdict unknown; defaults as `rmqsim run`).
    observers: extra callables fed each chunk of records as it is emitted.
    progress: a callable given a progress dict between slices (`sim.progress.ProgressLine(sys.stderr)`).
    detail: also emit the detail records `rmqsim explain` reads (sim/kernel/trace.py; always on with `trace_dir`),
    which leave the digest and the summary as they are.
    """
    from analysis.explain import explain_result
    from sim.runner import run_scenario

    return run_scenario(scenario, seed=seed, overrides=overrides, details=details, keep_records=keep_records,
                        observers=observers, trace_dir=trace_dir, max_events=max_events, max_wall_s=max_wall_s,
                        progress=progress, detail=detail, explainer=explain_result)


def load(run_dir: Any) -> Any:
    """A finished run's directory (`rmqsim run`'s output) as the `RunResult` `run` returned:
    `.summary`, `.meta`, `.frame(kind)` when it was written with `--trace` (a `msg_id` column has
    the display key `msg_key` beside it), `.explain(msg)` (the life of one message, by display key
    `p-1-42` or integer id, as `rmqsim explain --json` prints it; a run without a trace is replayed).
    Raises `analysis.explain_source.ExplainError` (one line naming the file and the reason) for
    a directory that is not a finished run, or whose files rmqsim would not have written: damaged
    or not JSON, nested too deep, a field of another type ("summary.json: seed: expected an
    integer ..."), a summary of an older rmqsim that lacks a field it reads, a resolved scenario
    that is not the summary's; never a TypeError, KeyError or RecursionError. `.explain` raises
    the same class (its subclass `ReplayStopped` when a replay reaches its bound), `.frame` an
    `analysis.trace_store.TraceError` for a trace file rmqsim did not write."""
    from analysis.run_load import load_run

    return load_run(run_dir)
