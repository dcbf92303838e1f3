"""A repro card for every run whose verdict is `invalid` or `unknown`: one Markdown page a person
can act on — what failed, the one command that replays the run with its trace, and the story of
the first message of each failing cause.

    rmqsim run ...          RUN_DIR/repro.md   (listed in the run's manifest, rmqsim/run_store.py)
    rmqsim sweep ...        DIR/repro/<run_id>.md, beside the run's row, listed in its `output_files`
                            (a run that failed to run, or stopped at a bound, gets one too)

A card holds: the scenario, the seed, the resolved-scenario digest, the simulator digest (`sim/`,
`models/`; equal digests, scenario and seed give the same trace) and the version; the replay
command — the run's reproduction command (`rmqsim run`'s `reproduce:` line, a sweep row's
`repro`) with `--trace` added, plus `--max-events` for a run stopped at that bound; each failed
guarantee or expectation (the summary's `failures`); and for each failing cause (a loss cause of
a broken at-least-once guarantee, an order-violation cause of broken per-key order, the causes a
failed `expect:` on `lost*`, `duplicates*` or `order_violations*` names, a transaction cause) its
count and first message from the summary's samples (`lost_sample`, `duplicate_sample`,
`order_violation_sample`), with `rmqsim explain`'s account of that message.

The explanation comes from analysis/explain/answer.py through one hook, `explainer(run_dir)`: it is
called only for a run directory that holds a trace (explain then reads the trace; without one it
would replay the whole run once per message), imports the engine inside the function and falls
back — the engine missing, or refusing — to listing the message ids with the command that
explains them. A sweep's card lists the ids only (its run has no directory and no trace: replay
it with the card's command first).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

CARD = "repro.md"  # in a run directory
FAILING = ("invalid", "unknown")
MAX_EXPLAINED = 6  # causes whose first message is explained (each reads the whole trace once)
MAX_EXPLAIN_LINES = 60

# (summary key of counts by cause, summary key of samples by cause, what it is)
_KINDS = {"lost": ("lost_by_cause", "lost_sample", "lost"),
          "duplicate": ("duplicates_by_cause", "duplicate_sample", "duplicate delivery"),
          "order": ("order_violations_by_cause", "order_violation_sample", "order violation")}


class Explainer:
    """`message(key)`: the text `rmqsim explain RUN_DIR KEY` prints; `first(cause)`: the key of the
    first message of a cause without a sample in the summary (a transaction cause), or None."""

    def __init__(self, message: Callable[[str], str], first: Callable[[str], str | None]) -> None:
        self.message, self.first = message, first


def explainer(run_dir: Path) -> Explainer | None:
    """THE HOOK to analysis/explain/answer.py: an Explainer for a run directory with a trace, or None
    (no trace, or no explain engine in this build: the card then lists message ids)."""
    if not (Path(run_dir) / "trace").is_dir():
        return None
    try:
        from analysis.explain.answer import explain_cause, explain_message, render
        from analysis.explain.source import read_run
    except ImportError:
        return None
    run = read_run(run_dir)

    def message(key: str) -> str:
        return render(explain_message(run, key))

    def first(cause: str) -> str | None:
        found = explain_cause(run, cause, 1)["messages"]
        return found[0]["key"] if found else None
    return Explainer(message, first)


def needs_card(summary: dict[str, Any] | None, status: str = "ok") -> bool:
    """An invalid or unknown run, or (in a sweep) a run that failed to run."""
    return status != "ok" or (summary is not None and summary.get("verdict") in FAILING)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("rmqsim")
    except PackageNotFoundError:
        return "unknown (a source tree that was not installed)"


def replay_command(command: str, summary: dict[str, Any] | None) -> str:
    """The reproduction command with `--trace` (and the event bound a run stopped at)."""
    out = command if " --trace " in f"{command} " else f"{command} --trace"
    bound = (summary or {}).get("max_events")
    if bound is None and (summary or {}).get("stopped_by") == "max_events":
        detail = str(summary.get("stopped_detail") or "")  # rmqsim/runner.py, sim/watchdog.py word it so
        found = re.search(r"max_events \(([0-9,]+)\)", detail) or re.search(r"([0-9][0-9,]*) events processed", detail)
        bound = int(found.group(1).replace(",", "")) if found else None
    if summary and summary.get("stopped_by") == "max_events" and bound:
        out += f" --max-events {int(bound)}"
    return out


def failing_causes(summary: dict[str, Any]) -> list[tuple[str, str, int, list[str]]]:
    """(kind: lost / duplicate / order / txn, cause, count, sample keys, earliest first) of each cause
    behind a failed guarantee, expectation or transaction check, in the order they failed (a
    transaction's causes are those of committed messages lost; a rolled-back message that became
    visible is named among the failures, with no cause)."""
    wanted: list[tuple[str, str | None]] = []  # (kind, cause or None: every cause of the kind that happened)
    for g in summary.get("guarantees") or []:
        if g.get("ok") is False:
            wanted.append(("lost", None) if g.get("guarantee") == "at_least_once" else ("order", None))
    for e in summary.get("expectations") or []:
        if e.get("ok") is False:
            wanted += _expectation_causes(str(e.get("metric", "")))
    if summary.get("txn_violations"):
        wanted.append(("txn", None))
    out: list[tuple[str, str, int, list[str]]] = []
    for kind, cause in wanted:
        for found in _causes_of(summary, kind, cause):
            if not any(found[:2] == have[:2] for have in out):
                out.append(found)
    return out


def _expectation_causes(metric: str) -> list[tuple[str, str | None]]:
    head, _, cause = metric.partition(".")
    if head in ("lost", "lost_by_cause"):
        return [("lost", cause or None)]
    if head in ("duplicates", "duplicated_messages", "duplicate_causes"):
        return [("duplicate", None)]
    if head == "duplicates_by_cause":
        return [("duplicate", cause or None)]
    if head in ("order_violations", "order_violations_by_cause"):
        return [("order", cause or None)]
    if head in ("txn_violations", "txn") and (cause in ("", "committed_lost", "rolled_back_visible")):
        return [("txn", None)]
    return []


def _causes_of(summary: dict[str, Any], kind: str, cause: str | None) -> list[tuple[str, str, int, list[str]]]:
    if kind == "txn":
        txn = summary.get("txn") or {}
        counts = dict(txn.get("committed_lost_causes") or {})
        return [("txn", c, int(n), []) for c, n in counts.items() if n and (cause is None or c == cause)]
    counts_key, sample_key, _what = _KINDS[kind]
    counts = summary.get(counts_key) or {}
    samples = summary.get(sample_key) or {}
    if isinstance(samples, list):  # an older summary: one list, causes not told apart
        samples = {"(any cause)": samples}
    if not counts and samples:
        counts = {c: len(keys) for c, keys in samples.items()}
    out = []
    for c, n in counts.items():
        if n and (cause is None or c == cause):
            out.append((kind, c, int(n), [str(k) for k in samples.get(c) or samples.get("(any cause)") or []]))
    return out


def card_text(summary: dict[str, Any] | None, command: str, *, simulator: str | None, where: str,
              explain: Explainer | None = None, error: str | None = None, params: dict[str, Any] | None = None,
              seed: int | None = None) -> str:
    """The card's Markdown (module docstring). `where`: the run directory, or the sweep's run id;
    `error`: why a sweep run failed to run (no summary then)."""
    s = summary or {}
    verdict = s.get("verdict") or ("unknown (the run failed)" if error else "unknown")
    name = s.get("scenario", "?")
    seed = s.get("seed", seed)
    lines = [f"# Repro card: {name}, seed {seed} — verdict {verdict}", "",
             "| | |", "|---|---|",
             f"| run | `{where}` |",
             f"| scenario | `{name}` |",
             f"| seed | {seed} |",
             f"| scenario digest (resolved, SHA-256) | `{s.get('scenario_sha256', 'n/a')}` |",
             f"| simulator digest (`sim/`, `models/`) | `{simulator or 'n/a'}` |",
             f"| version | rmqsim {version()} |",
             f"| trace digest | `{s.get('trace_sha256', 'n/a')}` |"]
    lines += [f"| parameter `{k}` | `{v}` |" for k, v in (params or {}).items()]
    lines += ["", "## Replay", "", "```sh", replay_command(command, summary), "```", "",
              "The same simulator digest, scenario and seed give the same trace digest "
              "(`rmqsim --version` prints this build's digest). The replay writes the trace, then "
              "`rmqsim explain RUN_DIR MSG` tells a message's story, `rmqsim report RUN_DIR` draws the run."]
    if s.get("stopped_by") and s.get("stopped_by") != "max_events":
        lines += ["", f"The run stopped at its `{s['stopped_by']}` bound, which depends on the machine: a replay "
                      "may stop elsewhere, or not at all."]
    lines += ["", "## What failed", ""]
    failures = list(s.get("failures") or [])
    if error:
        failures.insert(0, f"the run failed: {error.strip().splitlines()[0][:400]}")
    lines += [f"- {f}" for f in failures] or ["- (the summary names no failure)"]
    causes = failing_causes(s) if s else []
    lines += ["", "## First message of each failing cause", ""]
    if not causes:
        lines.append("No message-level cause: " + (
            "nothing was judged (the run stopped at a bound)." if s.get("stopped_by") else
            "the run failed before it could be judged." if error else
            "what failed is no count of messages (a latency, rate or metric expectation)." if failures else
            "none failed."))
    for i, (kind, cause, count, keys) in enumerate(causes):
        what = _KINDS[kind][2] if kind in _KINDS else "transaction"
        first = keys[0] if keys else None
        text = None
        if explain is not None and i < MAX_EXPLAINED:
            first, text = _explained(explain, kind, cause, first)
        head = f"### {what}: `{cause}` ({count:,})"
        lines += [head, ""]
        if first is None:
            lines += [f"No sample of this cause in the summary: `rmqsim explain RUN_DIR --cause {cause}` lists "
                      "its messages.", ""]
            continue
        more = ", ".join(f"`{k}`" for k in keys[1:6])
        lines.append(f"First message `{first}`" + (f"; then {more}" if more else "") + ".")
        if text:
            body = text.splitlines()
            if len(body) > MAX_EXPLAIN_LINES:
                body = body[:MAX_EXPLAIN_LINES] + [f"... ({len(text.splitlines()) - MAX_EXPLAIN_LINES} more lines: "
                                                   f"rmqsim explain RUN_DIR {first})"]
            lines += ["", f"`rmqsim explain {where} {first}`:", "", "```text", *body, "```", ""]
        else:
            lines += ["", f"Explain it: `rmqsim explain RUN_DIR {first}` (RUN_DIR: "
                          + ("the replay's directory" if explain is None else where) + ").", ""]
    return "\n".join(lines).rstrip() + "\n"


def _explained(explain: Explainer, kind: str, cause: str, first: str | None) -> tuple[str | None, str | None]:
    """(first message key, its explanation) — (key, None) if the engine refuses or fails."""
    try:
        if first is None:
            first = explain.first(cause)
        return first, explain.message(first) if first is not None else None
    except Exception:  # noqa: BLE001 - an engine under construction: the card keeps the ids
        return first, None


# ------------------------------------------------------------------------------ writers

def write_run_card(output: Any, summary: dict[str, Any], meta: dict[str, Any], command: str) -> Path | None:
    """`rmqsim run`: RUN_DIR/repro.md for an invalid or unknown run, through its `RunOutput` (so the
    run's manifest lists it); None for a valid run. Explains the first messages when the run wrote
    its trace (`explainer`)."""
    if not needs_card(summary):
        return None
    directory = Path(output.directory)
    try:
        explain = explainer(directory)
    except Exception:  # noqa: BLE001 - explain refused this run (ExplainError): the card lists ids
        explain = None
    text = card_text(summary, command, simulator=meta.get("simulator_sha256"), where=str(directory),
                     explain=explain)
    return output.write_text(CARD, text)


def sweep_card(out_dir: Path, task: dict[str, Any], row: dict[str, Any], summary: dict[str, Any] | None) -> list[Path]:
    """The sweep executor: DIR/repro/<run_id>.md for a failing run (an invalid or unknown verdict, a
    run stopped at a bound or failed to run), written atomically; returns it to be listed in the
    row's `output_files` (none for a valid run, whose leftover card of an earlier attempt is removed)."""
    from analysis.sweeps.directory import CARD_HEADING, REPRO
    from sim.files import atomic_path
    from sim.sources import simulator_sha256

    final = Path(out_dir) / REPRO / f"{task['run_id']}.md"
    if not needs_card(summary, row.get("status", "ok")):
        if final.is_file() and not final.is_symlink():
            final.unlink()
        return []
    if summary is not None and row.get("stopped_by") and "max_events" not in summary:
        summary = {**summary, "max_events": task.get("max_events")}
    text = card_text(summary, task["repro"], simulator=simulator_sha256(), where=task["run_id"],
                     error=row.get("error") if summary is None or row.get("status") != "ok" else None,
                     params=task.get("params"), seed=task.get("seed"))
    assert text.encode().startswith(CARD_HEADING)  # how --replace recognises a card no row lists yet
    final.parent.mkdir(exist_ok=True)
    with atomic_path(final) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return [final]
