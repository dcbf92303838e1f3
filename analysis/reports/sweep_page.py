"""The sweep report's HTML page: what analysis/reports/sweep_report.py `gather`s, as plain text for
the template analysis/reports/templates/sweep.html.j2 (rendered by analysis/reports/html.py `render`,
which escapes every value: no markup or escaping here). Numbers are for people
(analysis/reports/fmt.py), each rate with its run-level interval first (95 % Student t over the
runs) and the per-message one only where the runs agree with it; a column focus in its unit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from analysis.reports import fmt
from analysis.reports import focus as focus_mod
from analysis.reports.html import render
from analysis.sweeps.aggregate import METRICS
from sim.files import lstat_kind

SECTION_TITLES = {"latency": "Latency", "deliveries": "Deliveries per message", "txn": "Transactions: check-backs"}
MAX_ERROR_CHARS = 600  # of a failed run's error on the page
MAX_WHAT_CHARS = 400  # of what failed in a failing run
RUN_METHOD = "95 % Student t over the runs"


def page(manifest: dict[str, Any], view: dict[str, Any], images: list[tuple[str, str, str, str]], out_dir: Path,
         folder: Path) -> str:
    """The page: `view` from sweep_report.gather, `images` (section, file stem, title, PNG base64) in
    page order, repro-card links relative to `folder`."""
    t, focus = view["totals"], view["focus"]
    sweep = {"name": manifest["name"], "source": manifest["source"], "base": manifest["base"],
             "digest": manifest["digest"][:16], "params": list(manifest["params"].items()),
             "points": _many(len(manifest["points"]), "point"), "seeds": _many(len(manifest["seeds"]), "seed")}
    totals = {"runs": fmt.count(t["runs"]), "ok": fmt.count(t["ok"]), "sent_ok": fmt.count(t["sent_ok"]),
              "lost": fmt.count(t["lost"]), "duplicates": fmt.count(t["duplicates"]),
              "simulated": fmt.duration_ms(t["sim_time_ms"] or 0), "wall": fmt.duration_ms((t["wall_s"] or 0) * 1000),
              "compiled": _compiled(t)}
    sections = [(section, title) for section, title in SECTION_TITLES.items() if any(s == section for s, *_ in images)]
    return render("sweep.html.j2", sweep=sweep, totals=totals, focus=_question(view), table=points_table(view),
                  images=[{"section": s, "stem": stem, "title": title, "png": png} for s, stem, title, png in images],
                  others=[{"name": n, "label": focus_mod.LABELS[n], "overall": overall_line(view, n)}
                          for n in view["drawn"] if n != focus.name],
                  lint=[_lint_entry(e) for e in view["lint"]],
                  sections=sections, quiescence=_quiescence(view["quiescence"]), coverage=_coverage(view["coverage"]),
                  failed=[{"run_id": f["run_id"], "error": (f["error"] or "")[:MAX_ERROR_CHARS], "repro": f["repro"] or ""}
                          for f in view["failed"]],
                  failing=_failing(view["failing"], out_dir, folder))


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _compiled(t: dict[str, Any]) -> str:
    """`12 of 12 runs ran on the compiled modules` (the runs table's `compiled`), or why not known."""
    if not t.get("compiled_known"):
        return "whether runs ran on the compiled modules is not recorded (an older rmqsim)"
    return f"{t['compiled']:,} of {t['compiled_known']:,} runs ran on the compiled per-message modules"


def _question(view: dict[str, Any]) -> dict[str, Any]:
    """The focus, why it was chosen, what is zero or unchecked everywhere, the swept parameters the
    lint calls inert (sentences), and the focus over the whole sweep (none for latency: its
    figures say it)."""
    focus = view["focus"]
    notes = [line[0].upper() + line[1:] for line in (focus_mod.zero_line(focus), focus_mod.unchecked_line(focus))
             if line]
    overall = {"rate": lambda: overall_line(view, focus.name), "latency": lambda: "",
               "column": lambda: column_line(view)}[focus.kind]()
    return {"label": focus.label, "name": focus.name, "reason": focus.reason, "declared": focus.declared,
            "notes": notes, "overall": overall, "inert": inert_notes(view)}


def inert_notes(view: dict[str, Any]) -> list[str]:
    """One sentence per swept parameter the lint calls inert at some point."""
    out = []
    for name, entries in view["inert"].items():
        found = "; ".join(f"[{e['id']}] at {e['where']}: {e['message']}" for e in entries)
        out.append(f"Swept parameter {name} is one the lint calls inert ({found}): points that differ only in "
                   f"{name} cannot differ but by their seeds, so identical rows or panels are the expected answer, "
                   "not a finding")
    return out


def overall_line(view: dict[str, Any], name: str) -> str:
    """`Loss: 385 lost of 28,917 acknowledged messages in 12 runs: 1.33 % [0.9 %, 1.8 %] (95 % Student t
    over the runs); the per-message 95 % Wilson interval [1.2 %, 1.47 %] holds: the runs agree with
    it.` For a metric zero in every run (or one run), the per-message bound: what the sweep can say."""
    m, o = METRICS[name], view["overall"][name]
    label = focus_mod.LABELS[name].capitalize()
    if not o["runs"]:
        return f"{label}: not checked in any run ({m.unchecked or 'no run'})."
    causes = ", ".join(f"{c} {n:,}" for c, n in o["causes"].items() if n)
    head = f"{label}: {fmt.count(o['events'])} of {fmt.count(o['exposure'])} {m.of} in {o['runs']:,} runs: "
    if o["run_lo"] is None or not o["run_hi"]:
        why = "one run" if o["runs"] == 1 else "no event in any run, so the runs cannot bound it"
        body = f"{fmt.interval(o['mean'], o['lo'], o['hi'])} (95 % {m.method}, per message: {why})"
    else:
        body = f"{_run_text(o)}; {_message_text(o, m.method)}"
    return head + body + (f"; by cause: {causes}" if causes else "") + "."


def _run_text(o: dict[str, Any], method: bool = True) -> str:
    """The pooled rate with its interval over the runs (`method`: named), or why there is none."""
    if o["mean"] is None:
        return fmt.NA
    if o["run_lo"] is not None and (o["run_hi"] or 0) > 0:
        return fmt.interval(o["mean"], o["run_lo"], o["run_hi"]) + (f" ({RUN_METHOD})" if method else "")
    return f"{fmt.rate(o['mean'])} ({'one run' if o['runs'] == 1 else 'no event in any run'})"


def _message_text(o: dict[str, Any], method: str) -> str:
    interval = f"[{fmt.rate(o['lo'])}, {fmt.rate(o['hi'])}]"
    if o["agree"] is False:
        return (f"the per-message 95 % {method} interval {interval} does not hold: the runs' counts spread "
                f"{fmt.number(o['overdispersion'])}× more than independent messages would (bursts)")
    return f"the per-message 95 % {method} interval {interval} holds: the runs agree with it"


def column_line(view: dict[str, Any]) -> str:
    """A column focus over the whole sweep: its range over the runs, and the runs without a value."""
    column, o = view["focus"].column, view["column"]["overall"]
    if not o["n"]:
        return f"{column.label.capitalize()}: no run has a value ({o['nulls']:,} runs)."
    show = lambda v: focus_mod.show(column, v)  # noqa: E731 - a local shorthand
    text = (f"{column.label.capitalize()} (column {column.column}): from {show(o['min'])} to {show(o['max'])} over "
            f"{o['n']:,} runs; each point's runs' mean with its {RUN_METHOD} is in the table below")
    nulls = o["nulls"]
    return text + (f"; {_many(nulls, 'run')} {'has' if nulls == 1 else 'have'} no value" if nulls else "") + "."


def points_table(view: dict[str, Any]) -> dict[str, list[Any]]:
    """The per-point table's header and rows, as text: each rate with its run-level interval, then
    the per-message one where the runs agree; a column focus's mean, interval and range."""
    params, shown, focus = view["params"], view["drawn"], view["focus"]
    unquiet = view["quiescence"]["unquiet"] > 0
    head = ["point", *params, "runs", "pass (guarantee verdicts)"]
    if focus.kind == "column":
        head.append(f"{focus.column.label}: runs' mean [95 % t], min – max")
    for n in shown:
        head += [f"{METRICS[n].title} [95 % t over runs] (events)",
                 f"{METRICS[n].title}: per-message [95 % {METRICS[n].method}], where the runs agree"]
    head += ["p50", "p99", "p99.9", *(["runs ended unquiet"] if unquiet else [])]
    rows = []
    for s in view["stats"]:
        lat = s["latency_ms"]
        row = [fmt.count(s["point"]), *[_cell(s["params"][p]) for p in params], fmt.count(s["runs"]), _verdicts(s)]
        if focus.kind == "column":
            row.append(_column_cell(focus.column, s["columns"][focus.column.column]))
        for n in shown:
            row += [_rate(s[n]), _per_message(s[n])]
        row += [fmt.duration_ms(lat.get("p50")), fmt.duration_ms(lat.get("p99")), fmt.duration_ms(lat.get("p99.9")),
                *([fmt.count(s["unquiet"])] if unquiet else [])]
        rows.append(row)
    return {"head": head, "rows": rows}


def _cell(value: Any) -> str:
    if value is None:
        return fmt.NA
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt.number(value)
    return str(value)


def _rate(stat: dict[str, Any]) -> str:
    """`1.2 % [0.8 %, 1.9 %] (12)`: the pooled rate, its interval over the runs and the events."""
    if stat["mean"] is None:
        return fmt.NA
    return f"{_run_text(stat, method=False)} ({fmt.count(stat['events'])})"


def _per_message(stat: dict[str, Any]) -> str:
    if stat["mean"] is None:
        return fmt.NA
    if stat["agree"] is False:
        return f"runs disagree ({fmt.number(stat['overdispersion'])}× the spread of independent messages)"
    text = fmt.interval(stat["mean"], stat["lo"], stat["hi"])
    return text + (" (one run)" if stat["agree"] is None else "")


def _column_cell(column: Any, stat: dict[str, Any]) -> str:
    show = lambda v: focus_mod.show(column, v)  # noqa: E731 - a local shorthand
    if stat["mean"] is None:
        return fmt.NA + (f" ({stat['nulls']} without a value)" if stat["nulls"] else "")
    text = show(stat["mean"]) if stat["lo"] is None else f"{show(stat['mean'])} [{show(stat['lo'])}, {show(stat['hi'])}]"
    text += f", {show(stat['min'])} – {show(stat['max'])}"
    return text + (f" ({stat['nulls']} without a value)" if stat["nulls"] else "")


def _verdicts(s: dict[str, Any]) -> str:
    """`4 of 4 valid`, with invalid / unknown / failed counts when there are any."""
    ok_runs = s["runs"] - s["failed"]
    parts = [f"{s['passed']} of {ok_runs} valid"]
    parts += [f"{s[k]} {k}" for k in ("invalid", "unknown") if s.get(k)]
    parts += [f"{s['failed']} failed to run"] if s["failed"] else []
    return ", ".join(parts)


def _lint_entry(entry: dict[str, Any]) -> dict[str, Any]:
    params = ", ".join(entry["params"])
    about = (f"swept parameter {params}: the lint calls it inert" if entry.get("inert") else
             f"swept parameter {params}") if params else ""
    return {"id": entry["id"], "path": entry["path"], "message": entry["message"], "where": entry["where"],
            "fix": entry.get("fix") or "", "about": about}


def _quiescence(q: dict[str, Any]) -> dict[str, Any]:
    """Runs that ended quiet and unquiet (rmqsim/quiescence.py), and what kept moving."""
    moving = ", ".join(f"{kind} in {n:,} run{'s' if n != 1 else ''}" for kind, n in q["moving_runs"].items())
    ids = ", ".join(q["unquiet_ids"][:20]) + (" …" if len(q["unquiet_ids"]) > 20 else "")
    return {"runs": q["runs"], "quiet": q["quiet"], "unquiet": q["unquiet"], "unjudged": q["unjudged"],
            "moving": moving or "n/a", "ids": ids}


def _coverage(cov: dict[str, Any] | None) -> dict[str, Any] | None:
    """Runs reaching each rare-state point (models/coverage_points.py), and the points no run reached."""
    if cov is None:
        return None
    described = _coverage_descriptions()
    order = [n for n in described if n in cov["points"]] + [n for n in cov["points"] if n not in described]
    return {"runs": cov["runs"], "points": len(order),
            "reached": [{"name": n, "branch": described.get(n, ""), **cov["points"][n]}
                        for n in order if cov["points"][n]["runs"]],
            "never": [n for n in order if not cov["points"][n]["runs"]]}


def _coverage_descriptions() -> dict[str, str]:
    """Point name → the branch it marks, in the registry's order (empty if there is none)."""
    try:
        from models.coverage_points import POINTS
    except ImportError:
        return {}
    return {p.name: getattr(p, "branch", "") for p in POINTS}


def _failing(failing: dict[str, Any], out_dir: Path, folder: Path) -> dict[str, Any]:
    """Each failing run with what failed, a link to its repro card (relative to the report, so the
    pair of folders can move together) and its reproduction command."""
    rows = []
    for f in failing["rows"]:
        what = f["verdict_failures"] if f["status"] == "ok" else (f["error"] or "").strip().splitlines()[:1]
        what = what if isinstance(what, str) else (what[0] if what else "")
        verdict = f["verdict"] if f["status"] == "ok" else (
            "unknown: stopped at a bound" if (f["error"] or "").startswith("StoppedAtBound") else "failed to run")
        card = None
        if f["card"] and lstat_kind(out_dir / f["card"]) == "file":
            card = {"href": quote(os.path.relpath((out_dir / f["card"]).resolve(), folder.resolve())),
                    "name": f["card"]}
        rows.append({"run_id": f["run_id"], "verdict": verdict or "", "what": (what or "")[:MAX_WHAT_CHARS],
                     "card": card, "repro": f["repro"] or ""})
    return {"rows": rows, "more": failing["total"] - len(failing["rows"])}
