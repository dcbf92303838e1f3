"""rmqsim, the product: scenario files, the runner, the CLI and the Python API (the top floor).

- scenario/         scenario files: spec.py (the scenario tree and its loading), validate.py (checks
                    across sections: errors), lint.py and useless_parts.py (valid but misleading
                    settings: warnings), reference.py (`rmqsim defaults`), schema.py (`rmqsim schema`),
                    setup_size.py (what a set-up would build)
- runner.py         builds a run from a scenario, runs it, settles it (quiescence.py), judges it
                    with analysis/checkers; run_store.py (run directories), progress.py (the progress line)
- cli.py            `rmqsim` (explain_cli.py: `rmqsim explain`); run_load.py (`rmqsim.load`)

`rmqsim.run(path_or_scenario, seed=..., max_events=..., max_wall_s=...)` is the Python API, and
`rmqsim.load(RUN_DIR)` reads a finished run back as the same `RunResult`. The floors of the
project and the rule between them are in sim/__init__.py.
"""

from __future__ import annotations

from typing import Any

import sim  # noqa: F401  the compiled build is checked before any compiled module loads (sim/compiled.py)


def run(scenario: Any, seed: int | None = None, *, overrides: list[str] | None = None, details: bool = False,
        keep_records: bool = False, trace_dir: Any = None, max_events: int | None = None,
        max_wall_s: float | None = None, observers: tuple = (), progress: Any = None, detail: bool = False) -> Any:
    """Run a scenario and return its RunResult (`repr`: one line; `.summary`: the summary.json
    dict; `.frame(kind)`: one record kind as a pandas DataFrame).

    scenario: a path to a scenario file, or a loaded `rmqsim.scenario.spec.Scenario`.
    seed: the run's seed (default: the scenario's `seed`).
    overrides: `--set` items for a path, e.g. `["producers[0].rate_per_s=300", "duration_ms=20s"]`.
    details: also collect the checkers' per-message facts (`.details`: latency samples, delivery counts).
    keep_records: keep every record in memory (`.records`; `.frame(kind)` reads them).
    trace_dir: stream the trace there as Parquet, one file per kind (`.frame(kind)` reads it).
    max_events, max_wall_s: stop the run at that bound (verdict unknown; defaults as `rmqsim run`).
    observers: extra callables fed each chunk of records as it is emitted.
    progress: a callable given a progress dict between slices (`rmqsim.progress.ProgressLine(sys.stderr)`).
    detail: also emit the detail records `rmqsim explain` reads (sim/trace.py; always on with `trace_dir`),
    which leave the digest and the summary as they are.
    """
    from analysis.explain.answer import explain_result
    from rmqsim.runner import run_scenario

    return run_scenario(scenario, seed=seed, overrides=overrides, details=details, keep_records=keep_records,
                        observers=observers, trace_dir=trace_dir, max_events=max_events, max_wall_s=max_wall_s,
                        progress=progress, detail=detail, explainer=explain_result)


def load(run_dir: Any) -> Any:
    """A finished run's directory (`rmqsim run`'s output) as the `RunResult` `run` returned:
    `.summary`, `.meta`, `.frame(kind)` when it was written with `--trace` (a `msg_id` column has
    the display key `msg_key` beside it), `.explain(msg)` (the life of one message, by display key
    `p-1-42` or integer id, as `rmqsim explain --json` prints it; a run without a trace is replayed).
    Raises `analysis.explain.source.ExplainError` (one line naming the file and the reason) for
    a directory that is not a finished run, or whose files rmqsim would not have written: damaged
    or not JSON, nested too deep, a field of another type ("summary.json: seed: expected an
    integer ..."), a summary of an older rmqsim that lacks a field it reads, a resolved scenario
    that is not the summary's; never a TypeError, KeyError or RecursionError. `.explain` raises
    the same class (its subclass `ReplayStopped` when a replay reaches its bound), `.frame` an
    `analysis.checkers.trace_store.TraceError` for a trace file rmqsim did not write."""
    from rmqsim.run_load import load_run

    return load_run(run_dir)
