"""The bounds rmqsim puts on its inputs, in one place, each with the reason it is where it is.

Two kinds:

- **Hard bounds** keep every value meaningful for the simulator itself: times fit the integer-µs
  clock with room to spare, distribution draws cannot overflow, files and YAML documents cannot
  exhaust memory. They cannot be raised; a value beyond one is an error.
- **Sane maxima** (`Limits`) catch typos and accidents (`rate_per_s: 1e12`, `duration_ms:
  100000h`) while leaving deliberate large studies possible: a scenario raises them in its own
  `limits:` section, up to the hard bound (`limits: {max_rate_per_s: 500000}`; the model is
  rmqsim/scenario/spec.py: Limits). They do not change results, so they are not part of the
  scenario's digest.

Run bounds (`DEFAULT_MAX_EVENTS`, `DEFAULT_MAX_WALL_S`) stop a run that would otherwise grow
without limit; `rmqsim run --max-events/--max-wall-s` and a sweep's `run_max_events` /
`run_timeout_s` set them. The scenario's `limits:` adds three more: resident memory
(`max_rss_mb`; default half the machine's memory; the run's analysis too) and one step running
`max_step_wall_s` without yielding (a livelock), watched from a thread even while one model step
never yields (sim/watchdog.py), and more than `max_events_per_instant` events at one
simulated instant (a livelock), counted exactly by the run loop (sim/env.py: the bound
fires at the event after the N-th of one instant). A run stopped at any of them still gets
a summary, marked `stopped_by`, with the messages not yet consumed counted as `unconsumed`, never
as lost. Before any run, validation estimates the route tables set-up builds (rmqsim/scenario/setup_size.py)
against `max_route_entries`.
"""

from __future__ import annotations

DAY_MS = 86_400_000

# --- files and documents ------------------------------------------------------------------
MAX_FILE_BYTES = 1 << 20  # a scenario or sweep file (the bundled ones are < 4 KiB)
MAX_MANIFEST_BYTES = 1 << 30  # a sweep's own sweep.json (one entry per point)
MAX_YAML_DEPTH = 32  # nesting of lists and mappings (scenarios need about 8)
MAX_YAML_NODES = 100_000  # values in a document, counting every alias expansion
MAX_NUMBER_CHARS = 32  # a number literal (a seed, 2**63 - 1, has 19 digits; Python's int() stops at 4,300)
MAX_SET_CHARS = 10_000  # one `--set KEY=VALUE` item
MAX_PATH_CHARS = 1_024  # a path written inside a file (sweep `base`)
MAX_PROBLEMS = 50  # problems listed per file; the rest are counted ("... and N more")
MAX_NAME_CHARS = 64  # scenario, sweep and node names

# --- time and numbers (hard) ----------------------------------------------------------------
MAX_TIME_MS = 366 * DAY_MS  # any time or duration; 3.2e13 µs, far inside int64
MAX_DIST_VALUE = 1e12  # a distribution parameter (ms or bytes): 31 years, or 1 TB
MAX_LOGNORMAL_SIGMA = 10.0  # e^(10·z) already spans 40 orders of magnitude at z = ±4.6
DRAW_CAP = 1e15  # every draw saturates here (µs: 31 years; bytes: 1 PB) instead of wrapping
MIN_RATE_PER_S = 1e-6  # one message per 11.6 days: a gap longer than any run is fine
HARD_MAX_RATE_PER_S = 1e6  # the clock's resolution: one message per µs
MIN_FAULT_RATE_PER_HOUR = 1e-6
MAX_FAULT_RATE_PER_HOUR = 3.6e6  # one fault per ms
MAX_SLOW_FACTOR = 1e6  # disk_slow factor
HARD_MAX_INSTANCES = 100_000  # `count` of one producer or consumer entry
HARD_MAX_NODES = 100_000  # nodes in one scenario
MAX_SEED = 2**63 - 1  # seeds are stored as int64 (Parquet `seed` column)

# --- runs and sweeps ----------------------------------------------------------------------
DEFAULT_MAX_EVENTS = 1_000_000_000  # ~1,300× the bundled baseline (0.74 M events), ~150 M messages (~11 GB stored)
DEFAULT_MAX_WALL_S = 3_600.0
MAX_SEEDS = 100_000  # seeds of one sweep
MAX_POINTS = 1_000_000  # points of one sweep
MAX_RUNS = 1_000_000  # points × seeds
CONFIRM_RUNS = 10_000  # a sweep with more runs needs `--yes`
FULL_CHECK_POINTS = 2_000  # up to this many points, every point's whole scenario is validated


# --- sane maxima: defaults of a scenario's `limits:` section (rmqsim/scenario/spec.py: Limits) -------
DEFAULT_MAX_SIM_TIME_MS = 7 * DAY_MS  # duration_ms + settle_ms
DEFAULT_MAX_SETTLE_MS = 600_000  # `max_settle_ms`: the longest `settle_ms: auto` goes on (rmqsim/quiescence.py)
DEFAULT_MAX_RATE_PER_S = 100_000.0  # per producer instance
DEFAULT_MAX_INSTANCES = 1_000  # `count` of one producer or consumer entry
DEFAULT_MAX_NODES = 2_000  # every node of the scenario
# set-up: queues in every client's topic route, plus the brokers' own (rmqsim/scenario/setup_size.py); about
# 0.4 KB and 8 µs of set-up each, so 10 M is ~4 GB (the bundled scenarios need < 10,000)
DEFAULT_MAX_ROUTE_ENTRIES = 10_000_000
HARD_MAX_ROUTE_ENTRIES = 10**12
# livelock: the bundled scenarios reach at most ~4,300 events at one instant (txn_check_storm)
DEFAULT_MAX_EVENTS_PER_INSTANT = 1_000_000
DEFAULT_MAX_STEP_WALL_S = 60.0  # one event's wall time; a model step takes microseconds
HARD_MAX_RSS_MB = 1 << 30  # 1 PB: the bound on `limits.max_rss_mb` (null: half the machine, sim/watchdog.py)
