"""Where `rmqsim explain` gets a run's records: its Parquet trace, or a replay of the run.

A run directory holds `summary.json`, `scenario.resolved.json` and `run_meta.json`, and with
`--trace` the records in `trace/` (detail kinds included, sim/kernel/trace.py). Without a trace the run
is replayed: rmqsim is deterministic, so the resolved scenario and the seed give the same records
again, detail kinds emitted this time (`run_scenario(..., detail=True)`). Either way the records
stream, chunk by chunk, into the caller's observers (the checkers' ledgers and a collector that
keeps only what the question needs), and their digest is recomputed and compared with the
summary's `trace_sha256`: explain reads the run's own records or refuses.

Refusals (`ExplainError`, the CLI's exit 2): not a run directory; a summary or scenario that
cannot be read; a replay on another simulator (`run_meta.json`'s `simulator_sha256` differs from
this one's — run it again, or check out the version that made it); a run stopped at a bound
without a trace (a wall-time or memory bound does not stop a replay at the same point); records
whose digest is not the summary's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.kernel.config import ConfigError
from sim.kernel.files import lstat_kind, read_json
from sim.kernel.sources import simulator_sha256
from sim.kernel.trace import DIGEST_CHUNK, digest
from sim.runner import producer_infos, run_scenario
from sim.scenario import from_data

MAX_JSON_BYTES = 64 << 20
Observer = Callable[[list[tuple]], None]


class ExplainError(Exception):
    """A question explain cannot answer from this input (reported in one line, exit 2)."""


@dataclass
class RunFiles:
    directory: Path | None
    summary: dict[str, Any]
    scenario: Any  # sim.scenario.Scenario
    meta: dict[str, Any]
    trace_dir: Path | None  # a trace to read, else the run is replayed

    @property
    def producer_names(self) -> list[str]:
        return [p.name for p in producer_infos(self.scenario)]


def read_run(directory: str | Path) -> RunFiles:
    """A finished run's files (module docstring); ExplainError if `directory` is not one."""
    path = Path(directory)
    if lstat_kind(path / "summary.json") is None or lstat_kind(path / "sweep.json") is not None:
        raise ExplainError(f"{path} is not a run directory (no summary.json): pass the directory `rmqsim run` wrote")
    summary = _json(path / "summary.json")
    data = _json(path / "scenario.resolved.json")
    meta = _json(path / "run_meta.json") if lstat_kind(path / "run_meta.json") is not None else {}
    try:
        scenario = from_data(data, str(path / "scenario.resolved.json"))
    except ConfigError as exc:
        raise ExplainError(f"{path}/scenario.resolved.json is not a valid scenario ({exc.render()})") from None
    if not isinstance(summary, dict) or "trace_sha256" not in summary or "seed" not in summary:
        raise ExplainError(f"{path}/summary.json is not an rmqsim run summary")
    if scenario.digest() != summary.get("scenario_sha256"):
        raise ExplainError(f"{path}/scenario.resolved.json is not the scenario of summary.json (its digest differs)")
    trace = path / "trace"
    has_trace = lstat_kind(trace) == "dir" and any(trace.glob("*.parquet"))
    return RunFiles(path, summary, scenario, meta, trace if has_trace else None)


def _json(path: Path) -> Any:
    return read_json(path, MAX_JSON_BYTES, ExplainError, "is not JSON")


def stream(run: RunFiles, observers: list[Observer]) -> str:
    """Feed every record of the run to `observers`, chunk by chunk in emission order; returns
    where they came from ("trace" or "replay"). ExplainError if they are not the run's."""
    if run.trace_dir is not None:
        from analysis.trace_store import read_trace

        found = digest(_chunked(read_trace(run.trace_dir), observers))
        source = "trace"
    else:
        found = _replay(run, observers)
        source = "replay"
    if found != run.summary["trace_sha256"]:
        raise ExplainError(f"the {source} of this run has trace digest {found[:12]}…, not the summary's "
                           f"{run.summary['trace_sha256'][:12]}…: its records are not this run's")
    return source


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
    recorded = run.meta.get("simulator_sha256")
    if recorded is not None and recorded != simulator_sha256():
        raise ExplainError(f"this run was made by another simulator ({recorded[:12]}…; this one is "
                           f"{simulator_sha256()[:12]}…, `rmqsim --version`), so a replay would not give its records: "
                           "run the scenario again with this version, or write the trace with `rmqsim run --trace`")
    stopped = run.summary.get("stopped_by")
    if stopped:
        raise ExplainError(f"this run stopped at a bound ({stopped}) and has no trace: a replay would not stop at "
                           "the same point; run it again with `--trace`")
    result = run_scenario(run.scenario, seed=run.summary["seed"], observers=tuple(observers), detail=True)
    return result.summary["trace_sha256"]
