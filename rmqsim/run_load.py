"""`rmqsim.load(RUN_DIR)`: a finished run read back as the `RunResult` `rmqsim.run` returned.

`summary` and `meta` are the run's `summary.json` and `run_meta.json`; `frame(kind)` reads its
Parquet trace when it was written with `--trace` (with the display key `msg_key` beside `msg_id`);
`explain(msg)` answers as `rmqsim explain RUN_DIR MSG --json` does (replaying the run when it has
no trace): this module, above the runner, gives the result analysis/explain/answer.py's `explain_result`.
The world is not rebuilt: `world` holds the resolved scenario and the producers (the message ids'
owners), and no environment. A directory that is not a finished run, or one whose files are not
what rmqsim writes (analysis/explain/source.py `read_run`: each file read through
sim/readback.py, of its declared shape), raises `analysis.explain.source.ExplainError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.explain.answer import explain_result
from analysis.explain.source import read_run
from rmqsim.runner import RunResult, World, producer_infos


def load_run(directory: str | Path) -> Any:
    run = read_run(directory)
    world = World(None, run.scenario, producers=producer_infos(run.scenario))  # no environment: nothing runs
    return RunResult(run.summary, run.meta, world, trace_dir=run.trace_dir, directory=Path(directory),
                     explainer=explain_result)
