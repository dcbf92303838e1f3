"""The kernel: SimPy plus the substrates a message-queue model needs; no RocketMQ here.

The project's floors, lowest first; a module imports only its own floor and the floors below it,
checked over every import (top-level or in a function) by import-linter's contracts in
pyproject.toml (`lint-imports`, run by scripts/test.sh):
1. `sim/` (this package), the kernel: imports nothing of the project above it;
2. `models/`, RocketMQ: its classes, its record kinds (models/records.py) and coverage points
   (models/coverage_points.py), and the typed settings each model reads (models/*/config.py);
3. `analysis/checkers/`: the ledger and the checkers over records, the verdict, the trace's
   Parquet files; they read no model but its record schema and coverage catalogue;
4. `rmqsim/scenario/` and `rmqsim/runner.py` (with quiescence, run_store, progress): scenario files,
   building, running and judging a world;
5. `analysis/explain/`, then `analysis/sweeps/`, then `analysis/reports/`: a finished run's records
   judged again, sweeps on Spark, what a person reads (reports read sweeps; sweeps import no reports);
6. the product's commands and Python API: `rmqsim/cli.py`, `rmqsim/explain_cli.py`,
   `rmqsim/run_load.py`, `rmqsim/__init__.py` (`rmqsim.run`, `rmqsim.load`).

Modules
- env.py         integer-µs clock (`SimEnv`), cheap scheduled callbacks
- event_queue.py the event heap's push and pop (heapq's; entries compared on C integers when compiled)
- rng.py         named random streams from one seed (`Rng.stream`)
- dist.py        latency/size distributions from scenario files, sampled in whole µs
- node.py        crashable, pausable hosts; oneway messages and RPC with timeouts
- network.py     TCP-like FIFO links between nodes (plain dicts); partitions, latency, loss
- disk.py        fsync latency and bandwidth; slow-disk and fsync-stall faults
- page_cache.py  the OS page cache of a broker's files
- faults.py      fault kinds, scripted and random, and the injector
- config.py      value types with bounds, duration units, error rendering with key paths and "did you mean"
- limits.py      every bound on inputs, runs and sweeps, with its reason (hard bounds; sane maxima)
- inputs.py      reading users' files: regular, bounded, UTF-8; YAML with depth/alias/tag limits
- keypath.py     the key-path grammar and `--set KEY.PATH=VALUE` overrides
- trace.py       typed record kinds, the streaming Tracer (chunks to the digest and observers), the digest
- coverage.py    the rare-state "sometimes" mechanism: a per-run counter over a catalogue the models declare
- compiled.py    the per-message modules compiled with Cython, used only for their own sources
- files.py       atomic file output (hidden temporary file, then rename); output directories checked
- readback.py    reading back the JSON rmqsim wrote: bounded depth, a declared shape per file
- sources.py     the digest of the simulator's sources (`rmqsim --version`; each run's run_meta.json)
- watchdog.py    the run bounds that fire even when a step never yields: wall time, memory, livelock

This module's top level runs before every module of the project (`models`, `analysis` and
`rmqsim` import `sim` first): it checks the compiled build before any compiled module loads.
"""

from __future__ import annotations

import os

# NumPy's OpenBLAS starts a worker thread per core, and its workers spin while waiting for work:
# about 1 % of a run's instructions, and a core taken from the other runs of a sweep. rmqsim's
# NumPy work is small vector operations in one thread, so one BLAS thread, unless the user set it
# (it takes effect only before NumPy's first import, which this package precedes).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# pydantic looks for plugins (the `pydantic` entry-point group) when it builds the first model's
# validator, by reading the metadata of every installed distribution: about 20 ms of each start.
# rmqsim's models (its scenario and settings) have no use for a plugin; set the variable to ""
# to let pydantic look for them again.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _plugins_disabled() -> None:
    """With plugins disabled, pydantic's loader (pydantic/plugin/_loader.py, imported by
    plugin/_schema_validator.py when it builds the first validator) would still import
    importlib.metadata, with email and zipfile, only to return no plugins: about 5 % of `rmqsim
    validate`'s instructions. A stand-in that answers what that loader answers then, no plugins,
    takes its place: only when the variable disables them all (pydantic's own test: "__all__", "1",
    "true") and pydantic has not loaded its loader yet. tests/test_cli_startup.py checks the seam
    against the installed pydantic."""
    import sys

    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if "pydantic.plugin._loader" not in sys.modules:
        import types

        stand_in = types.ModuleType("pydantic.plugin._loader", "rmqsim's stand-in: pydantic plugins are disabled")
        stand_in.get_plugins = lambda: ()  # type: ignore[attr-defined]
        sys.modules["pydantic.plugin._loader"] = stand_in


_plugins_disabled()

from sim import compiled  # noqa: E402

compiled.check_build()  # before any compiled module is imported (sim/compiled.py)
