"""The report pages' HTML, rendered from the Jinja2 templates in analysis/reports/templates/: `render`
for both pages, and `page`, the sweep report's (analysis/reports/sweep_report.py gathers what it
shows; the per-run page is analysis/reports/run_report.py's). One self-contained file each; numbers
are for people (analysis/reports/fmt.py).

The environment escapes every value a template prints (autoescape: scenario and sweep names,
parameter keys, run ids, errors and reasons are user input), so nothing here escapes by hand: the
functions below pass plain text, and the markup lives only in the templates. A name a template
uses that its caller did not pass is an error (StrictUndefined), never an empty string.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from analysis.reports import fmt
from analysis.reports import focus as focus_mod
from analysis.sweeps.aggregate import METRICS
from sim.files import lstat_kind

TEMPLATES = Path(__file__).with_name("templates")  # shipped as package data (pyproject.toml)
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                         undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                         keep_trailing_newline=True)
ENV.filters["thousands"] = lambda n: f"{n:,}"  # 12,345 (an int as it is; fmt.count for counts that may be None)
SECTION_TITLES = {"latency": "Latency", "deliveries": "Deliveries per message",
                  "txn": "Transactions: check-backs"}
MAX_ERROR_CHARS = 600  # of a failed run's error on the page
MAX_WHAT_CHARS = 400  # of what failed in a failing run


def render(template: str, **values: Any) -> str:
    """The page of `template` (a file in analysis/reports/templates/) with `values`, escaped."""
    return ENV.get_template(template).render(**values)


def page(manifest: dict[str, Any], view: dict[str, Any], images: list[tuple[str, str, str, str]], out_dir: Path,
         folder: Path) -> str:
    """The sweep report's page: `view` from sweep_report.gather, `images` (section, file stem, title,
    PNG base64) in page order, repro-card links relative to `folder`."""
    t, focus = view["totals"], view["focus"]
    sweep = {"name": manifest["name"], "source": manifest["source"], "base": manifest["base"],
             "digest": manifest["digest"][:16], "params": list(manifest["params"].items()),
             "points": _many(len(manifest["points"]), "point"), "seeds": _many(len(manifest["seeds"]), "seed")}
    totals = {"runs": fmt.count(t["runs"]), "ok": fmt.count(t["ok"]), "sent_ok": fmt.count(t["sent_ok"]),
              "lost": fmt.count(t["lost"]), "duplicates": fmt.count(t["duplicates"]),
              "simulated": fmt.duration_ms(t["sim_time_ms"] or 0), "wall": fmt.duration_ms((t["wall_s"] or 0) * 1000)}
    sections = [(section, title) for section, title in SECTION_TITLES.items() if any(s == section for s, *_ in images)]
    return render("sweep.html.j2", sweep=sweep, totals=totals, focus=_question(view), table=_points_table(view),
                  images=[{"section": s, "stem": stem, "title": title, "png": png} for s, stem, title, png in images],
                  others=[{"name": n, "label": focus_mod.LABELS[n], "overall": _overall_line(view, n)}
                          for n in view["drawn"] if n != focus.name],
                  sections=sections, quiescence=_quiescence(view["quiescence"]), coverage=_coverage(view["coverage"]),
                  failed=[{"run_id": f["run_id"], "error": (f["error"] or "")[:MAX_ERROR_CHARS], "repro": f["repro"] or ""}
                          for f in view["failed"]],
                  failing=_failing(view["failing"], out_dir, folder))


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _question(view: dict[str, Any]) -> dict[str, Any]:
    """The focus, why it was chosen, what is zero or unchecked everywhere (sentences), and the focus
    metric over the whole sweep (none for latency: its figures say it)."""
    focus = view["focus"]
    notes = [line[0].upper() + line[1:] for line in (focus_mod.zero_line(focus), focus_mod.unchecked_line(focus))
             if line]
    return {"label": focus_mod.LABELS[focus.name], "reason": focus.reason, "declared": focus.declared,
            "notes": notes, "overall": "" if focus.name == "latency" else _overall_line(view, focus.name)}


def _overall_line(view: dict[str, Any], name: str) -> str:
    """`Loss: 385 lost of 28,917 acknowledged messages in 12 runs: 1.33 % [1.2 %, 1.47 %] (95 % Wilson).`
    (for a metric zero everywhere, its bound: what the sweep can say)."""
    m, o = METRICS[name], view["overall"][name]
    label = focus_mod.LABELS[name].capitalize()
    if not o["runs"]:
        return f"{label}: not checked in any run ({m.unchecked or 'no run'})."
    causes = ", ".join(f"{c} {n:,}" for c, n in o["causes"].items() if n)
    return (f"{label}: {fmt.count(o['events'])} of {fmt.count(o['exposure'])} {m.of} in {o['runs']:,} runs: "
            f"{fmt.interval(o['mean'], o['lo'], o['hi'])} (95 % {m.method}){'; by cause: ' + causes if causes else ''}.")


def _points_table(view: dict[str, Any]) -> dict[str, list[Any]]:
    """The per-point table's header and rows, as text."""
    params, shown = view["params"], view["drawn"]
    unquiet = view["quiescence"]["unquiet"] > 0
    head = ["point", *params, "runs", "pass (guarantee verdicts)",
            *[f"{METRICS[n].title} [95% {METRICS[n].method}]" for n in shown], "p50", "p99", "p99.9",
            *(["runs ended unquiet"] if unquiet else [])]
    rows = []
    for s in view["stats"]:
        lat = s["latency_ms"]
        rows.append([fmt.count(s["point"]), *[_cell(s["params"][p]) for p in params], fmt.count(s["runs"]),
                     _verdicts(s), *[_rate(s[n]) for n in shown], fmt.duration_ms(lat.get("p50")),
                     fmt.duration_ms(lat.get("p99")), fmt.duration_ms(lat.get("p99.9")),
                     *([fmt.count(s["unquiet"])] if unquiet else [])])
    return {"head": head, "rows": rows}


def _cell(value: Any) -> str:
    if value is None:
        return fmt.NA
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt.number(value)
    return str(value)


def _rate(stat: dict[str, Any]) -> str:
    """`1.2 % [0.8 %, 1.9 %] (12)`: the pooled rate, its interval and the events; n/a if unmeasured."""
    if stat["mean"] is None:
        return fmt.NA
    return f"{fmt.interval(stat['mean'], stat['lo'], stat['hi'])} ({fmt.count(stat['events'])})"


def _verdicts(s: dict[str, Any]) -> str:
    """`4 of 4 valid`, with invalid / unknown / failed counts when there are any."""
    ok_runs = s["runs"] - s["failed"]
    parts = [f"{s['passed']} of {ok_runs} valid"]
    parts += [f"{s[k]} {k}" for k in ("invalid", "unknown") if s.get(k)]
    parts += [f"{s['failed']} failed to run"] if s["failed"] else []
    return ", ".join(parts)


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
