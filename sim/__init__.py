"""rmqsim kernel: SimPy plus the substrates a message-queue model needs; no RocketMQ here.

Modules
- env.py      integer-µs clock (`SimEnv`), cheap scheduled callbacks
- rng.py      named random streams from one seed (`Rng.stream`)
- dist.py     latency/size distributions from scenario files, sampled in whole µs
- node.py     crashable, pausable hosts; oneway messages and RPC with timeouts
- network.py  networkx topology of TCP-like FIFO links; partitions, latency, loss
- disk.py     fsync latency and bandwidth; slow-disk and fsync-stall faults
- faults.py   fault kinds, scripted and random, and the injector
- config.py   duration units, error rendering with key paths and "did you mean"
- trace.py    flat record kinds, the in-memory sink, JSONL output, the run digest
- files.py    atomic file output (hidden temporary file, then rename)

Layering: the modules above import only the standard library, SimPy, networkx and pydantic.
`scenario.py`, `runner.py` and `cli.py` are the assembly edge: the only kernel files that import
`models`. `sim.run(path_or_scenario, seed=...)` is the Python API.
"""

from __future__ import annotations

from typing import Any


def run(scenario: Any, seed: int | None = None, **kwargs: Any) -> Any:
    """Run a scenario (a path or a loaded Scenario); returns a RunResult (.summary, .records)."""
    from sim.runner import run_scenario

    return run_scenario(scenario, seed=seed, **kwargs)
