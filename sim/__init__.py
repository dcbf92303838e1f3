"""rmqsim kernel: SimPy plus the substrates a message-queue model needs; no RocketMQ here.

Modules
- env.py      integer-µs clock (`SimEnv`), cheap scheduled callbacks
- rng.py      named random streams from one seed (`Rng.stream`)
- dist.py     latency/size distributions from scenario files, sampled in whole µs
- node.py     crashable, pausable hosts; oneway messages and RPC with timeouts
- network.py  networkx topology of TCP-like FIFO links; partitions, latency, loss
- disk.py     fsync latency and bandwidth; slow-disk and fsync-stall faults
- faults.py   fault kinds, scripted and random, and the injector
- config.py   value types with bounds, duration units, error rendering with key paths and "did you mean"
- limits.py   every bound on inputs, runs and sweeps, with its reason (hard bounds; sane maxima)
- inputs.py   reading users' files: regular, bounded, UTF-8; YAML with depth/alias/tag limits
- keypath.py  the key-path grammar and `--set KEY.PATH=VALUE` overrides
- trace.py    typed record kinds, the streaming Tracer (chunks to the digest and observers), the digest
- files.py    atomic file output (hidden temporary file, then rename); output directories checked

Layering: the modules above import only the standard library, SimPy, networkx, pydantic, PyYAML
and NumPy. `scenario.py` (the tree and loading), `scenario_checks.py` (cross-section checks),
`runner.py` and `cli.py` are the assembly edge; of them only `scenario.py`, `runner.py` and
`cli.py` import `models`. `sim.run(path_or_scenario, seed=..., max_events=..., max_wall_s=...)`
is the Python API.
"""

from __future__ import annotations

from typing import Any


def run(scenario: Any, seed: int | None = None, **kwargs: Any) -> Any:
    """Run a scenario (a path or a loaded Scenario); returns a RunResult (.summary, .records)."""
    from sim.runner import run_scenario

    return run_scenario(scenario, seed=seed, **kwargs)
