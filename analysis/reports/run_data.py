"""One finished run's data for its report, read from its directory (summary.json, the Parquet trace).

`load_run(RUN_DIR)` reads `summary.json`, `scenario.resolved.json` and the columns the figures
need from `trace/<kind>.parquet` into NumPy arrays (no per-record Python objects), and derives:
publish latency (a send call's outcome time minus its first attempt, `producer.sent`),
end-to-end latency (first successful consumption per group minus first send attempt), per-second
counts, per-broker send share, duplicate consumptions by cause, the backlog per group, and the
fault windows (analysis/checkers/run_rows.py). Messages sent before `warmup_ms` are left out of the
latency spectra, as in the summary. A metric another part of the simulator records only in
some builds (`summary_metric`) is None when this run does not have it.

It reads only what `rmqsim run` wrote, and refuses anything else with a `RunDataError` naming
the file (the CLI's exit 2), never a traceback: every file must be a regular file (a symbolic
link, FIFO or device is refused, and `trace/` must be a folder, not a link), the JSON files are
read up to `MAX_JSON_BYTES`, the summary must have every field the report reads with the right
type (`summary_problems`), and each trace file must pass analysis/checkers/trace_store.py's checks
(`read_kind`, as explain and `RunResult.frame` read it: Parquet with the kind's columns and
types, a bounded size and frame), its times inside the run. A run with a manifest
(rmqsim/run_store.py) must be complete, its JSON files must have the recorded SHA-256 and its trace
files the recorded sizes, and a trace file it does not list is refused; a run written without
one (older runs, `rmqsim.run(..., trace_dir=...)`) is read with the other checks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.checkers.duplicates import CAUSES as DUPLICATE_CAUSES
from analysis.checkers.run_rows import fault_windows
from analysis.checkers.trace_store import (
    TraceError,
    kind_path,
    kind_schema,  # noqa: F401  (analysis/reports/timeline_data.py reads rd.kind_schema)
    read_kind,
)
from models.records import (
    BROKER_LOCK_GRANTED,
    BROKER_LOCK_REFUSED,
    BROKER_STORED,
    CONSUMER_CONSUMED,
    CONSUMER_REBALANCED,
    PRODUCER_SEND_FAILED,
    PRODUCER_SENT,
    TXN_CHECK_ANSWERED,
    TXN_CHECKED,
    TXN_DISCARDED,
    TXN_ENDED,
    TXN_LOCAL_DONE,
)
from sim.files import UnsafeFile, lstat_kind, read_bounded, read_manifest
from sim.limits import MAX_TIME_MS
from sim.readback import DocumentError, parse_json
from sim.trace import FAULT_HEALED, FAULT_INJECTED

MAX_JSON_BYTES = 64 << 20  # summary.json, scenario.resolved.json (a few KiB to a few MiB)
RUN_TOOL = "rmqsim run"  # rmqsim/run_store.py TOOL (analysis does not import the CLI's store)
SPECTRUM = (("p50", 0.50), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999),
            ("p99.99", 0.9999))


class RunDataError(Exception):
    """The directory is not a finished run with a trace (reported without a traceback)."""


@dataclass
class RunData:
    directory: Path
    summary: dict[str, Any]
    scenario: dict[str, Any]
    columns: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # kind → column → values
    windows: list[dict[str, Any]] = field(default_factory=list)
    tables: dict[tuple[str, tuple[str, ...]], Any] = field(default_factory=dict, repr=False)  # `table`'s reads

    @property
    def warmup_ms(self) -> float:
        return float(self.summary.get("warmup_ms", 0.0))

    @property
    def end_s(self) -> float:
        return self.summary["sim_time_ms"] / 1000

    def kind(self, name: str) -> dict[str, np.ndarray]:
        return self.columns.get(name, {})

    def table(self, kind: str, cols: tuple[str, ...]) -> Any:
        """The columns `cols` of `trace/<kind>.parquet` as a pyarrow Table, read on demand with
        the checks `load_run` makes (None: this run's trace has no such file, e.g. a detail kind
        of an older run); read once per kind and column set."""
        key = (kind, cols)
        if key not in self.tables:
            self.tables[key] = _read_kind(self.directory, kind, cols, None, (self.summary["sim_time_ms"] + 1) * 1000)
        return self.tables[key]


def load_run(directory: Path) -> RunData:
    directory = Path(directory)
    if lstat_kind(directory / "summary.json") is None:
        raise RunDataError(f"{directory} is not a run directory (no summary.json)")
    manifest = _run_manifest(directory)
    trace_kind = lstat_kind(directory / "trace")
    if trace_kind is None:
        raise RunDataError(f"{directory} has no trace: rerun with --trace (or --report, which writes one)")
    if trace_kind != "dir":
        raise RunDataError(f"{directory / 'trace'} is {'a symbolic link' if trace_kind == 'link' else 'not a folder'}; "
                           "a report reads only the trace folder rmqsim wrote")
    if manifest is not None:
        _check_listed_trace(directory, manifest)
    summary = _read_json(directory, "summary.json", manifest)
    problems = summary_problems(summary)
    if problems:
        raise RunDataError(f"{directory / 'summary.json'} is not a summary rmqsim wrote: it lacks or garbles "
                           f"{', '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}")
    resolved = None
    if lstat_kind(directory / "scenario.resolved.json") is not None or \
            (manifest is not None and "scenario.resolved.json" in manifest["files"]):
        resolved = _read_json(directory, "scenario.resolved.json", manifest)
        if not _scenario_ok(resolved):
            raise RunDataError(f"{directory / 'scenario.resolved.json'} is not a resolved scenario rmqsim wrote "
                               "(consumers without group or topic)")
    data = RunData(directory, summary, resolved or {})
    end_us = (summary["sim_time_ms"] + 1) * 1000
    wanted = {PRODUCER_SENT: ("t_us", "node", "msg_id", "broker", "status", "born_us"),
              CONSUMER_CONSUMED: ("t_us", "node", "group", "msg_id", "ok"),
              BROKER_STORED: ("t_us", "node", "msg_id", "topic", "reconsume_times"),
              CONSUMER_REBALANCED: ("t_us", "node", "group"),
              # transactions (analysis/reports/txn_data.py); a run without them has none of these files
              PRODUCER_SEND_FAILED: ("msg_id", "born_us"), TXN_CHECKED: ("t_us", "msg_id"),
              TXN_ENDED: ("t_us", "msg_id", "action", "from_check", "code"), TXN_DISCARDED: ("t_us", "msg_id"),
              TXN_LOCAL_DONE: ("t_us", "msg_id", "state"), TXN_CHECK_ANSWERED: ("t_us", "state"),
              BROKER_LOCK_GRANTED: ("t_us", "node", "how"), BROKER_LOCK_REFUSED: ("t_us", "node")}
    for kind, cols in wanted.items():
        table = _read_kind(directory, kind, cols, manifest, end_us)
        if table is not None:
            data.columns[kind] = {c: table.column(c).to_numpy(zero_copy_only=False) for c in cols}
    faults = []
    for kind in (FAULT_INJECTED, FAULT_HEALED):
        table = _read_kind(directory, kind, ("seq", "t_us", "node", "fault", "target", "detail"), manifest, end_us)
        if table is not None:
            faults += [(r["seq"], (r["t_us"], r["node"], kind, r["fault"], r["target"], r["detail"]))
                       for r in table.to_pylist()]
    data.windows = fault_windows([rec for _seq, rec in sorted(faults)], summary["sim_time_ms"])
    return data


def _run_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        manifest = read_manifest(directory)
    except UnsafeFile as exc:
        raise RunDataError(f"{exc}; not reading {directory}") from None
    if manifest is not None and manifest["tool"] != RUN_TOOL:
        raise RunDataError(f"{directory}'s manifest is not a run's ({manifest['tool']!r}); not reading it as a run")
    if manifest is not None and not manifest["complete"]:
        raise RunDataError(f"{directory} holds a run that did not finish writing its files (interrupted?): rerun it")
    return manifest


def _check_listed_trace(directory: Path, manifest: dict[str, Any]) -> None:
    """Each trace file the manifest lists is there with its size; no other trace file is."""
    listed = {rel: e for rel, e in manifest["files"].items() if rel.startswith("trace/")}
    for rel, entry in sorted(listed.items()):
        kind = lstat_kind(directory / rel)
        if kind != "file" or (directory / rel).lstat().st_size != entry["size"]:
            why = {None: "missing", "link": "a symbolic link", "file": "damaged (its size differs from what rmqsim "
                   "wrote)"}.get(kind, "not a regular file")
            raise RunDataError(f"{directory / rel} is {why}: rerun the run to rewrite its trace")
    for path in sorted((directory / "trace").iterdir()):
        rel = f"trace/{path.name}"
        if path.name.endswith(".parquet") and not path.name.startswith(".") and rel not in listed:
            raise RunDataError(f"{path} is not a trace file rmqsim wrote for this run (its manifest does not list "
                               "it); move it away")


def _read_json(directory: Path, name: str, manifest: dict[str, Any] | None) -> Any:
    path = directory / name
    try:
        raw = read_bounded(path, MAX_JSON_BYTES)
    except UnsafeFile as exc:
        raise RunDataError(f"{path}: {exc}; a report reads only the regular files rmqsim wrote") from None
    if manifest is not None:
        entry = manifest["files"].get(name)
        if entry is None:
            raise RunDataError(f"{path} is not a file rmqsim wrote for this run (its manifest does not list it)")
        if len(raw) != entry["size"] or hashlib.sha256(raw).hexdigest() != entry["sha256"]:
            raise RunDataError(f"{path} differs from what rmqsim wrote (damaged or edited since): rerun the run")
    try:
        return parse_json(raw)
    except DocumentError as exc:  # not JSON, not UTF-8, nested past the depth bound
        raise RunDataError(f"{path} is damaged (not the JSON rmqsim writes): {exc}") from None


def _read_kind(directory: Path, kind: str, cols: tuple[str, ...], manifest: dict[str, Any] | None,
               end_us: int) -> Any:
    """The columns `cols` of `trace/<kind>.parquet` (a pyarrow Table), None if the run has no such
    file; RunDataError if trace_store's checks refuse it (`read_kind`: not a regular file, not
    Parquet, a column missing or of another type) or it holds times outside the run."""
    path = kind_path(directory / "trace", kind)
    if lstat_kind(path) is None:
        return None
    try:
        table = read_kind(path, kind, cols)
    except TraceError as exc:
        raise RunDataError(str(exc)) from None
    if "t_us" in cols and table.num_rows:
        t = table.column("t_us").to_numpy(zero_copy_only=False)
        if t.min() < 0 or t.max() > end_us:
            raise RunDataError(f"{path} holds times outside the run (0 to {end_us / 1e6:g} s): not this run's trace")
    return table


_INT, _NUM, _STR = "int", "number", "text"
_MISSING = object()


def _fits(value: Any, kind: Any) -> bool:
    """`value` fits `kind`: "int", "number", "text", `object` (anything), ("opt", kind) (or null),
    {"*": kind} (a map with text keys), [kind] (a list)."""
    if value is _MISSING:
        return False
    if kind is object:
        return True
    if isinstance(kind, tuple):
        return value is None or _fits(value, kind[1])
    if isinstance(kind, dict):
        return isinstance(value, dict) and all(isinstance(k, str) and _fits(v, kind["*"]) for k, v in value.items())
    if isinstance(kind, list):
        return isinstance(value, list) and all(_fits(v, kind[0]) for v in value)
    if kind == _STR:
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) if kind == _INT else value == value  # a number, not NaN


def _opt(kind: Any) -> tuple[str, Any]:
    return ("opt", kind)


_SUMMARY = {  # what the report reads (analysis/reports/run_report.py, run_figures.py, txn_figures.py), and its type
    "verdict": _STR, "scenario": _STR, "seed": _INT, "scenario_sha256": _STR, "trace_sha256": _STR,
    "records": _INT, "sim_time_ms": _NUM, "sent_ok": _INT, "send_failed": _INT, "consumed": _INT, "lost": _INT,
    "pending_retry": _INT, "dlq": _INT, "duplicates": _INT, "order_violations": _opt(_INT),
    "latency_ms": {"*": _opt(_NUM)}, "failures": [_STR], "groups": {"*": {"*": _opt(object)}},
}
_SUMMARY_OPTIONAL = {
    "warmup_ms": _NUM, "send_latency_ms": _opt({"*": _opt(_NUM)}), "duplicate_causes": {"*": _INT},
    "lost_by_cause": {"*": _INT}, "txn": _opt({"*": _opt(object)}), "availability": _opt({"*": _opt(object)}),
}
# the parts of the summary's `availability` section the availability figure reads
# (analysis/reports/availability_data.py): times are checked to lie within the simulator's bounds
_AVAILABILITY = {"sends": _INT, "acked": _INT, "acked_ratio": _opt(_NUM), "write_outage_s": _opt({"*": _opt(object)}),
                 "read_outage_s": _opt({"*": _opt(object)}), "recovery_s": _opt({"*": _opt(object)}),
                 "not_recovered": [_STR]}
_AVAILABILITY_FAULT = {"index": _INT, "kind": _STR, "target": _STR, "start_ms": _NUM,
                       "topics": {"*": {"*": _opt(object)}}, "groups": {"*": {"*": _opt(object)}}}
_AVAILABILITY_TOPIC = {"from_ms": _opt(_NUM), "until_ms": _opt(_NUM), "write_outage_s": _opt(_NUM)}
_AVAILABILITY_GROUP = {"recovered_ms": _opt(_NUM), "recovery_s": _opt(_NUM)}
MAX_LAG_POINTS = 100_000  # of a group's lag_by_second (the checkers cut it to 600)
_TXN = {"transactions": _INT, "committed_lost": _INT, "rolled_back_visible": _INT, "pending": _INT,
        "discarded": _INT, "checks": _INT, "resolution_ms_p50": _opt(_NUM), "resolution_ms_p99": _opt(_NUM)}
VERDICTS = ("valid", "invalid", "unknown")


def summary_problems(summary: Any) -> list[str]:
    """The summary fields the report reads that are missing or of the wrong type (none: readable)."""
    if not isinstance(summary, dict):
        return [f"everything (a JSON {type(summary).__name__}, not an object)"]
    problems = [k for k, kind in _SUMMARY.items() if not _fits(summary.get(k, _MISSING), kind)]
    problems += [k for k, kind in _SUMMARY_OPTIONAL.items() if k in summary and not _fits(summary[k], kind)]
    if "verdict" not in problems and summary["verdict"] not in VERDICTS:
        problems.append("verdict (valid, invalid or unknown)")
    if "sim_time_ms" not in problems and not 0 <= summary["sim_time_ms"] <= 2 * MAX_TIME_MS:
        problems.append("sim_time_ms (within the simulator's bounds)")
    if "warmup_ms" in summary and "warmup_ms" not in problems and not 0 <= summary["warmup_ms"] <= 2 * MAX_TIME_MS:
        problems.append("warmup_ms (within the simulator's bounds)")
    txn = summary.get("txn")
    if isinstance(txn, dict):
        problems += [f"txn.{k}" for k, kind in _TXN.items() if not _fits(txn.get(k, _MISSING), kind)]
    for name, group in (summary.get("groups") or {}).items() if "groups" not in problems else ():
        pairs = group.get("duplicates_by_second", {})
        if not _fits(pairs, {"*": [[_INT]]}) or any(len(p) != 2 for v in pairs.values() for p in v):
            problems.append(f"groups.{name[:40]}.duplicates_by_second")
        lag = group.get("lag_by_second", [])
        if not _fits(lag, [_INT]) or len(lag) > MAX_LAG_POINTS:
            problems.append(f"groups.{name[:40]}.lag_by_second")
    if isinstance(summary.get("availability"), dict):
        problems += _availability_problems(summary["availability"])
    return problems


def _availability_problems(section: dict[str, Any]) -> list[str]:
    """The `availability` fields the report reads (its headline in the table, each fault's entries in
    the figure), of the wrong type: absent is allowed."""
    problems = [f"availability.{k}" for k, kind in _AVAILABILITY.items() if k in section and not _fits(section[k], kind)]
    problems += [f"availability.{k}.max" for k in ("write_outage_s", "read_outage_s", "recovery_s")
                 if isinstance(section.get(k), dict) and not _fits(section[k].get("max"), _opt(_NUM))]
    faults = section.get("faults", [])
    if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
        return [*problems, "availability.faults (a list of objects)"]
    for i, f in enumerate(faults):
        bad = [k for k, kind in _AVAILABILITY_FAULT.items() if not _fits(f.get(k, _MISSING), kind)]
        if not bad:
            parts = [(f"topics.{t[:40]}", entry, _AVAILABILITY_TOPIC) for t, entry in f["topics"].items()]
            parts += [(f"groups.{g[:40]}", entry, _AVAILABILITY_GROUP) for g, entry in f["groups"].items()]
            bad = [f"{where}.{k}" for where, entry, shape in parts for k, kind in shape.items()
                   if not _fits(entry.get(k), kind)]
            times = [f["start_ms"]] + [entry.get(k) for _w, entry, _s in parts
                                       for k in ("from_ms", "until_ms", "recovered_ms")]
            if not bad and not all(t is None or 0 <= t <= 2 * MAX_TIME_MS for t in times):
                bad = ["times (within the simulator's bounds)"]
        problems += [f"availability.faults[{i}].{k}" for k in bad]
    return problems


def _scenario_ok(scenario: Any) -> bool:
    """The resolved scenario's parts the report reads: consumers with a group and a topic."""
    if not isinstance(scenario, dict):
        return False
    consumers = scenario.get("consumers", [])
    return isinstance(consumers, list) and all(
        isinstance(c, dict) and isinstance(c.get("group"), str) and isinstance(c.get("topic"), str) for c in consumers)


def summary_metric(data: RunData, key: str) -> Any:
    """A summary value another feature adds (e.g. `lost_by_cause`), or None when not recorded."""
    return data.summary.get(key)


def percentiles(values_ms: np.ndarray) -> dict[str, float | None]:
    """Nearest-rank percentiles of `SPECTRUM` (None without samples)."""
    ordered = np.sort(values_ms)
    n = len(ordered)
    return {name: (float(ordered[max(0, int(np.ceil(q * n)) - 1)]) if n else None) for name, q in SPECTRUM}


def measured_sends(data: RunData) -> dict[str, np.ndarray]:
    """The `producer.sent` columns of the sends born at or after the warm-up (those the send
    latency statistics measure; ONEWAY sends have no outcome time and are left out too)."""
    sent = data.kind(PRODUCER_SENT)
    if not sent:
        return {}
    keep = (sent["born_us"] >= data.warmup_ms * 1000) & (sent["status"] != "ONEWAY")
    return {name: values[keep] for name, values in sent.items()}


def publish_latency_ms(data: RunData) -> np.ndarray:
    """Send call: outcome time minus first attempt, per message sent at or after the warm-up."""
    sent = measured_sends(data)
    return (sent["t_us"] - sent["born_us"]) / 1000 if sent else np.zeros(0)


def first_consumptions(data: RunData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, msg_id, t_us) of each message's first successful consumption per group."""
    c = data.kind(CONSUMER_CONSUMED)
    if not c:
        return np.zeros(0, object), np.zeros(0, np.int64), np.zeros(0, np.int64)
    ok = c["ok"].astype(bool)
    group, msg, t = c["group"][ok], c["msg_id"][ok], c["t_us"][ok]
    order = np.lexsort((t, msg, group))
    group, msg, t = group[order], msg[order], t[order]
    first = np.r_[True, (group[1:] != group[:-1]) | (msg[1:] != msg[:-1])] if len(msg) else np.zeros(0, bool)
    return group[first], msg[first], t[first]


def end_to_end_latency_ms(data: RunData) -> np.ndarray:
    """First successful consumption minus first send attempt, messages sent at or after the warm-up."""
    sent = data.kind(PRODUCER_SENT)
    _group, msg, t = first_consumptions(data)
    if not sent or not len(msg):
        return np.zeros(0)
    order = np.argsort(sent["msg_id"], kind="stable")
    ids, born = sent["msg_id"][order], sent["born_us"][order]
    pos = np.clip(np.searchsorted(ids, msg), 0, len(ids) - 1)
    known = ids[pos] == msg
    born_of = born[pos[known]]
    keep = born_of >= data.warmup_ms * 1000
    return (t[known][keep] - born_of[keep]) / 1000


def per_second(t_us: np.ndarray, end_s: float) -> np.ndarray:
    """Counts per whole simulated second, 0 .. end_s."""
    return np.bincount((t_us // 1_000_000).astype(np.int64), minlength=int(np.ceil(end_s)) + 1)


def send_share_by_broker(data: RunData) -> dict[str, np.ndarray]:
    """broker → share of each second's completed sends (SEND_OK) that went to it."""
    sent = data.kind(PRODUCER_SENT)
    if not sent:
        return {}
    ok = sent["status"] == "SEND_OK"
    counts = {str(b): per_second(sent["t_us"][ok & (sent["broker"] == b)], data.end_s)
              for b in sorted(set(sent["broker"][ok].tolist()))}
    total = sum(counts.values()) if counts else np.zeros(0)
    busy = total[total > 0]
    enough = max(1.0, 0.05 * float(np.median(busy))) if len(busy) else 1.0  # a second's last few sends: no share
    return {b: np.where(total >= enough, n / np.maximum(total, 1), np.nan) for b, n in counts.items()}


def duplicates_by_cause(data: RunData) -> dict[str, np.ndarray] | None:
    """Duplicate deliveries per second by mechanism, summed over groups (None: nothing consumed; an
    empty dict: no duplicates): the summary's per-group
    `duplicates_by_second` (analysis/checkers/duplicates.py's ten causes). A run summarised before that key
    existed falls back to the two-way split read off the trace (`_two_way_duplicates`)."""
    groups = data.summary.get("groups") or {}
    if not groups or any("duplicates_by_second" not in g for g in groups.values()):
        return _two_way_duplicates(data)
    if not data.kind(CONSUMER_CONSUMED):
        return None
    length = int(np.ceil(data.end_s)) + 1
    out: dict[str, np.ndarray] = {}
    for g in groups.values():
        for cause, pairs in g["duplicates_by_second"].items():
            series = out.setdefault(cause, np.zeros(length, np.int64))
            for second, n in pairs:
                series[min(second, length - 1)] += n
    return {c: out[c] for c in DUPLICATE_CAUSES if c in out}


def _two_way_duplicates(data: RunData) -> dict[str, np.ndarray] | None:
    """Successful consumptions beyond a group's first, per second, by analysis/checkers/metrics.py's older
    rule: `producer_retry` when the brokers stored the message more than once, else `redelivery`."""
    c, stored = data.kind(CONSUMER_CONSUMED), data.kind(BROKER_STORED)
    if not c:
        return None
    ok = c["ok"].astype(bool)
    group, msg, t = c["group"][ok], c["msg_id"][ok], c["t_us"][ok]
    order = np.lexsort((t, msg, group))
    group, msg, t = group[order], msg[order], t[order]
    repeat = np.r_[False, (group[1:] == group[:-1]) & (msg[1:] == msg[:-1])] if len(msg) else np.zeros(0, bool)
    originals = stored["msg_id"][stored["reconsume_times"] == 0] if stored else np.zeros(0, np.int64)
    ids, copies = np.unique(originals, return_counts=True)
    twice = np.isin(msg, ids[copies > 1])
    return {"producer_retry": per_second(t[repeat & twice], data.end_s),
            "redelivery": per_second(t[repeat & ~twice], data.end_s)}


def backlog_by_group(data: RunData) -> dict[str, np.ndarray]:
    """group → messages of its topic stored but not yet consumed successfully, at each second's end."""
    stored = data.kind(BROKER_STORED)
    groups = {c["group"]: c["topic"] for c in data.scenario.get("consumers", [])}
    if not stored or not groups:
        return {}
    first_group, _msg, first_t = first_consumptions(data)
    out = {}
    for group, topic in groups.items():
        mine = (stored["topic"] == topic) & (stored["reconsume_times"] == 0)
        ids, first_stored = np.unique(stored["msg_id"][mine], return_index=True)
        arrived = np.cumsum(per_second(stored["t_us"][mine][first_stored], data.end_s))
        done = np.cumsum(per_second(first_t[first_group == group], data.end_s))
        n = min(len(arrived), len(done))
        out[group] = np.maximum(arrived[:n] - done[:n], 0)
    return out


def rebalances(data: RunData) -> list[tuple[float, str]]:
    """(simulated s, group) of every rebalance that changed a consumer's queues."""
    r = data.kind(CONSUMER_REBALANCED)
    return [(t / 1e6, str(g)) for t, g in zip(r.get("t_us", []), r.get("group", []), strict=True)]


def lock_events(data: RunData) -> dict[str, np.ndarray]:
    """Per-second counts of the orderly lock events, keyed "<broker>: <event>" (event: granted
    new, renewed, taken over after expiry, refused); empty when the run recorded none."""
    out: dict[str, np.ndarray] = {}
    granted, refused = data.kind(BROKER_LOCK_GRANTED), data.kind(BROKER_LOCK_REFUSED)
    labels = {"new": "granted (new)", "renewed": "renewed", "expired": "taken over (expired)"}
    for broker in sorted(set(granted.get("node", np.zeros(0)).tolist()) | set(refused.get("node", np.zeros(0)).tolist())):
        if granted:
            for how, label in labels.items():
                mine = (granted["node"] == broker) & (granted["how"] == how)
                if mine.any():
                    out[f"{broker}: {label}"] = per_second(granted["t_us"][mine], data.end_s)
        if refused:
            mine = refused["node"] == broker
            if mine.any():
                out[f"{broker}: refused"] = per_second(refused["t_us"][mine], data.end_s)
    return out
