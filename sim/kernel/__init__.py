"""The kernel: SimPy plus the substrates a message-queue model needs; no RocketMQ here.

It imports nothing of models, checkers or the assembly edge: the layering rule is in sim/__init__.py.

Modules
- env.py      integer-µs clock (`SimEnv`), cheap scheduled callbacks
- event_queue.py the event heap's push and pop (heapq's; entries compared on C integers when compiled)
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
- coverage.py rare-state "sometimes" points: their registry and the per-run counter (`env.coverage`)
- compiled.py the per-message modules compiled with Cython, used only for their own sources
- files.py    atomic file output (hidden temporary file, then rename); output directories checked
- sources.py  the digest of the simulator's sources (`rmqsim --version`; each run's run_meta.json)
- watchdog.py the run bounds that fire even when a step never yields: wall time, memory, livelock
"""
