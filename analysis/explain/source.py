"""Where `rmqsim explain` gets a run's records: its Parquet trace, or a replay of the run.

A run directory holds `summary.json`, `scenario.resolved.json` and `run_meta.json`, and with
`--trace` the records in `trace/` (detail kinds included, sim/trace.py). Without a trace the run
is replayed: rmqsim is deterministic, so the resolved scenario and the seed give the same records
again, detail kinds emitted this time (`run_scenario(..., detail=True)`). Either way the records
stream, chunk by chunk, into the caller's observers (the checkers' ledgers and a collector that
keeps only what the question needs), and their digest is recomputed and compared with the
summary's `trace_sha256`: explain reads the run's own records or refuses.

Every file is read as the hostile input it may have become (sim/readback.py: a regular
file, bounded in size and depth, each field explain reads of its declared type), and the trace
through analysis/checkers/trace_store.py's checks. Refusals (`ExplainError`, the CLI's exit 2), each
naming the file and the reason:
- not a run directory; a `trace` that is not a folder (a symbolic link); a manifest
  (`.rmqsim-manifest.json`) that is not a run's;
- a summary, `run_meta.json` or resolved scenario that cannot be read, is not JSON, nests too
  deep, or has a field of another type ("summary.json: seed: expected an integer ..., got 'abc'");
- a summary of an older rmqsim that lacks a field explain reads ("written by an older rmqsim
  (no sim_time_ms): re-run it");
- a resolved scenario that is not the summary's (its digest differs), or whose duration and
  settle do not hold the simulated time the summary's run ended at;
- a trace file that is not one rmqsim wrote (damaged, foreign, a link, not as the run's manifest
  lists it, records of another digest than the summary's: trace_store's `TraceError`, raised
  before the first record reaches the checkers);
- without a trace: a `run_meta.json` without the simulator digest, wall time and event count of
  the run (missing, or an older rmqsim's), a run made by another simulator (`simulator_sha256`
  differs from this one's — run it again, or check out the version that made it), a run stopped
  at a bound (a wall-time or memory bound does not stop a replay at the same point);
- records whose digest is not the summary's, or that the checkers cannot judge.

A replay is bounded like a run: at most `REPLAY_WALL_FACTOR` times the wall time the run took
(`run_meta.json` `wall_s`) plus `REPLAY_EXTRA_WALL_S`, at most `REPLAY_EVENTS_FACTOR` times its
events plus `REPLAY_EXTRA_EVENTS`, and the scenario's memory bound (`limits.max_rss_mb`, as
`run_scenario` applies it). A replay that reaches one stops and raises `ReplayStopped` (an
ExplainError; the CLI's exit 3, as a run stopped at a bound): a run directory edited into a
longer run than it recorded never replays without end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rmqsim.run_store import TOOL as RUN_TOOL
from rmqsim.runner import producer_infos, run_scenario
from rmqsim.scenario.spec import from_data
from sim.config import ConfigError
from sim.files import UnsafeFile, lstat_kind, read_json, read_manifest
from sim.inputs import short
from sim.readback import (
    RUN_META,
    RUN_META_FOR_REPLAY,
    SUMMARY,
    SUMMARY_FOR_EXPLAIN,
    SUMMARY_IDENTITY,
    Record,
    missing,
)
from sim.sources import simulator_sha256
from sim.trace import DIGEST_CHUNK, digest

MAX_JSON_BYTES = 64 << 20
DAMAGED = "is damaged (not the JSON rmqsim writes)"
REPLAY_WALL_FACTOR, REPLAY_EXTRA_WALL_S = 2, 10.0
REPLAY_EVENTS_FACTOR, REPLAY_EXTRA_EVENTS = 2, 100_000
_END_SLACK_MS = 1  # the summary's sim_time_ms is the end in whole ms (floored)
Observer = Callable[[list[tuple]], None]


class ExplainError(Exception):
    """A question explain cannot answer from this input (reported in one line, exit 2)."""


class ReplayStopped(ExplainError):
    """A replay stopped at its bound (module docstring): the CLI's exit 3, nothing judged."""


@dataclass
class RunFiles:
    directory: Path | None
    summary: dict[str, Any]
    scenario: Any  # rmqsim.scenario.spec.Scenario
    meta: dict[str, Any]
    trace_dir: Path | None  # a trace to read, else the run is replayed
    trace_listed: dict[str, Any] | None = None  # the run manifest's entries of the trace files, by file name

    @property
    def producer_names(self) -> list[str]:
        return [p.name for p in producer_infos(self.scenario)]


def read_run(directory: str | PathLike[str]) -> RunFiles:
    """A finished run's files (module docstring); ExplainError if `directory` is not one."""
    if not isinstance(directory, str | PathLike):
        raise ExplainError(f"a run directory is a path, not {type(directory).__name__}")
    path = Path(directory)
    if lstat_kind(path / "summary.json") is None or lstat_kind(path / "sweep.json") is not None:
        raise ExplainError(f"{path} is not a run directory (no summary.json): pass the directory `rmqsim run` wrote")
    summary = _summary(path / "summary.json")
    meta = _json(path / "run_meta.json", RUN_META) if lstat_kind(path / "run_meta.json") is not None else {}
    scenario = _scenario(path / "scenario.resolved.json", summary)
    return RunFiles(path, summary, scenario, meta, _trace_dir(path / "trace"), _trace_listing(path))


def _json(path: Path, shape: Record | None = None) -> Any:
    return read_json(path, MAX_JSON_BYTES, ExplainError, DAMAGED, shape)


def _summary(path: Path) -> dict[str, Any]:
    """summary.json, of its declared shape, with every field explain reads."""
    summary = _json(path, SUMMARY)
    if missing(summary, SUMMARY_IDENTITY):
        raise ExplainError(f"{path} is not an rmqsim run summary (no trace_sha256)")
    lacking = missing(summary, SUMMARY_FOR_EXPLAIN)
    if lacking:
        raise ExplainError(f"{path}: written by an older rmqsim (no {', '.join(lacking)}): re-run it")
    return summary


def _scenario(path: Path, summary: dict[str, Any]) -> Any:
    """The resolved scenario: valid, the summary's by digest, and ending where its run ended."""
    try:
        scenario = from_data(_json(path), str(path))
    except ConfigError as exc:
        more = f" and {len(exc.problems) - 1} more" if len(exc.problems) > 1 else ""
        raise ExplainError(f"{path} is not a valid scenario: {exc.problems[0]}{more}") from None
    if scenario.digest() != summary["scenario_sha256"]:
        raise ExplainError(f"{path} is not the scenario of summary.json (its digest differs)")
    shortest_ms = 0 if summary.get("stopped_by") else scenario.duration_ms
    longest_ms = scenario.duration_ms + scenario.settle_max_ms
    if not shortest_ms - _END_SLACK_MS <= summary["sim_time_ms"] <= longest_ms + _END_SLACK_MS:
        raise ExplainError(f"{path} runs {_ms(scenario.duration_ms)} and settles for at most "
                           f"{_ms(scenario.settle_max_ms)}, but summary.json's run ended at "
                           f"{_ms(summary['sim_time_ms'])}: they are not the files of one run")
    return scenario


def _ms(value: float) -> str:
    return f"{value:,.3f}".rstrip("0").rstrip(".") + " ms"


def _trace_dir(trace: Path) -> Path | None:
    """The trace folder to read, None if the run has none (it is replayed)."""
    kind = lstat_kind(trace)
    if kind is None:
        return None
    if kind != "dir":
        raise ExplainError(f"{trace} is {'a symbolic link' if kind == 'link' else 'not a folder'}; explain reads "
                           "only the trace folder rmqsim wrote: move it away")
    from analysis.checkers.trace_store import TraceError, trace_files

    try:
        return trace if trace_files(trace) else None
    except TraceError as exc:
        raise ExplainError(str(exc)) from None


def _trace_listing(path: Path) -> dict[str, Any] | None:
    """The run manifest's entries of its trace files (analysis/checkers/trace_store.py `read_trace`'s
    `listed`); None for a run without a complete manifest: an older rmqsim's, `rmqsim.run(trace_dir=...)`'s,
    or one still writing (its repro card explains it before the trace files are recorded), whose
    trace is then checked by its digest alone. ExplainError for a manifest that is not a run's."""
    try:
        manifest = read_manifest(path)
    except UnsafeFile as exc:
        raise ExplainError(f"{exc}; not reading {path}") from None
    if manifest is None:
        return None
    if manifest["tool"] != RUN_TOOL:
        raise ExplainError(f"{path}'s manifest is not a run's ({short(manifest['tool'])}); not reading it as a run")
    if not manifest["complete"]:
        return None
    return {rel.removeprefix("trace/"): entry for rel, entry in manifest["files"].items() if rel.startswith("trace/")}


def stream(run: RunFiles, observers: list[Observer]) -> str:
    """Feed every record of the run to `observers`, chunk by chunk in emission order; returns
    where they came from ("trace" or "replay"). ExplainError if they are not the run's."""
    if run.trace_dir is not None:
        found, failed = _from_trace(run, observers)
        source = "trace"
    else:
        found, failed = _replay(run, observers), None
        source = "replay"
    if found != run.summary["trace_sha256"]:
        raise ExplainError(f"the {source} of this run has trace digest {found[:12]}…, not the summary's "
                           f"{run.summary['trace_sha256'][:12]}…: its records are not this run's")
    if failed is not None:  # the digest holds, so the culprit is a detail record (outside the digest)
        raise ExplainError(f"the trace's records could not be judged ({type(failed).__name__}: "
                           f"{(str(failed).splitlines() or [''])[0][:120]}); its detail records, outside the digest, "
                           "are not the ones rmqsim writes: rerun the run with --trace")
    return source


def _from_trace(run: RunFiles, observers: list[Observer]) -> tuple[str, BaseException | None]:
    """The trace's digest, its records fed to the observers; the first error an observer raised
    (the rest of the records are still read, for the digest), else None. The trace's files are
    checked against the run's manifest and its digest against the summary's before the first
    record is given (trace_store `read_trace`): foreign values never reach the checkers."""
    from analysis.checkers.trace_store import TraceError, read_trace

    guard = _Guarded(observers)
    # the manifest's per-file SHA-256 already proves the files; the digest pre-pass (a second read
    # of the whole trace) only for a run whose manifest does not list them
    records = read_trace(run.trace_dir, listed=run.trace_listed,
                         sha256=run.summary["trace_sha256"] if run.trace_listed is None else None)
    try:
        return digest(_chunked(records, [guard])), guard.failed
    except TraceError as exc:
        raise ExplainError(str(exc)) from None


class _Guarded:
    """Observers fed until one of them raises: records read from a file may be anything its
    schema allows, and their digest, checked after the last one, says whether they are the run's."""

    def __init__(self, observers: list[Observer]) -> None:
        self.observers, self.failed = observers, None

    def __call__(self, chunk: list[tuple]) -> None:
        if self.failed is not None:
            return
        try:
            for observe in self.observers:
                observe(chunk)
        except Exception as exc:  # noqa: BLE001 - judged by the digest in `stream`
            self.failed = exc


def _chunked(records: Iterable[tuple], observers: list[Observer]) -> Iterator[tuple]:
    """The records, passed on one by one, and fed to the observers in chunks of DIGEST_CHUNK."""
    chunk: list[tuple] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == DIGEST_CHUNK:
            for observe in observers:
                observe(chunk)
            chunk = []
        yield record
    if chunk:
        for observe in observers:
            observe(chunk)


def _replay(run: RunFiles, observers: list[Observer]) -> str:
    """The digest of a replay of the run, its records fed to the observers (module docstring)."""
    where = f"{run.directory}/run_meta.json" if run.directory is not None else "this run's meta"
    lacking = missing(run.meta, RUN_META_FOR_REPLAY)
    if lacking:
        raise ExplainError(f"{where} has no {', '.join(lacking)} (missing, or written by an older rmqsim): a replay "
                           "needs the simulator and the bounds the run recorded; re-run it, with `--trace`")
    recorded = run.meta["simulator_sha256"]
    if recorded != simulator_sha256():
        raise ExplainError(f"this run was made by another simulator ({recorded[:12]}…; this one is "
                           f"{simulator_sha256()[:12]}…, `rmqsim --version`), so a replay would not give its records: "
                           "run the scenario again with this version, or write the trace with `rmqsim run --trace`")
    stopped = run.summary.get("stopped_by")
    if stopped:
        raise ExplainError(f"this run stopped at a bound ({stopped}) and has no trace: a replay would not stop at "
                           "the same point; run it again with `--trace`")
    max_wall_s, max_events = replay_bounds(run.meta)
    result = run_scenario(run.scenario, seed=run.summary["seed"], observers=tuple(observers), detail=True,
                          max_events=max_events, max_wall_s=max_wall_s)
    if result.summary.get("stopped_by"):
        raise ReplayStopped(f"the replay of this run stopped at a bound ({result.summary['stopped_by']}: "
                            f"{result.summary.get('stopped_detail')}), so nothing was judged: the run took "
                            f"{run.meta['wall_s']:g} s and {run.meta['events']:,} events, and its replay may take "
                            f"{REPLAY_WALL_FACTOR}× that plus {REPLAY_EXTRA_WALL_S:g} s and {REPLAY_EXTRA_EVENTS:,} "
                            "events; run it again with `--trace` to explain it from its records")
    return result.summary["trace_sha256"]


def replay_bounds(meta: dict[str, Any]) -> tuple[float, int]:
    """(max_wall_s, max_events) of a replay of the run `meta` describes (module docstring)."""
    return (REPLAY_WALL_FACTOR * meta["wall_s"] + REPLAY_EXTRA_WALL_S,
            REPLAY_EVENTS_FACTOR * meta["events"] + REPLAY_EXTRA_EVENTS)
