"""The sweep report's HTML page (analysis/report.py gathers what it shows): one self-contained
file, sections in the order a reader asks — the focus, the points, the other metrics, latency,
deliveries, the end state, coverage, and what failed. Numbers are for people (analysis/fmt.py).
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from analysis import fmt
from analysis import focus as focus_mod
from analysis.aggregate import METRICS
from sim.kernel.files import lstat_kind

STYLE = """body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f0f0f0}
figure{margin:12px 0}img{max-width:100%;border:1px solid #eee}figcaption{font-size:12px;color:#555}
code,pre{font-size:11px;white-space:pre-wrap;text-align:left}
.question{background:#f6f8fa;border-left:4px solid #d95f02;padding:8px 14px;margin:14px 0}
.question p{margin:4px 0}td.name{text-align:left}"""
SCRIPT = """window.addEventListener('load',function(){var imgs=document.querySelectorAll('img.figure');
var ok=0;imgs.forEach(function(i){if(i.complete&&i.naturalWidth>0)ok++;});
document.body.setAttribute('data-figures-loaded',ok+'/'+imgs.length);});"""
SECTION_TITLES = {"latency": "Latency", "deliveries": "Deliveries per message",
                  "txn": "Transactions: check-backs"}


def page(manifest: dict[str, Any], view: dict[str, Any], images: list[tuple[str, str, str, str]], out_dir: Path,
         folder: Path) -> str:
    t = view["totals"]
    params = ", ".join(f"{html.escape(n)} = <code>{html.escape(k)}</code>" for n, k in manifest["params"].items())
    body = [f"""<h1>rmqsim sweep report: {html.escape(manifest['name'])}</h1>
<p>Sweep file <code>{html.escape(manifest['source'])}</code>, base <code>{html.escape(manifest['base'])}</code>,
digest <code>{html.escape(manifest['digest'][:16])}</code>. Parameters: {params or '(none)'}.
{fmt.count(t['runs'])} runs ({fmt.count(t['ok'])} ok), {_many(len(manifest['points']), 'point')} × {_many(len(manifest['seeds']), 'seed')};
{fmt.count(t['sent_ok'])} messages acked, {fmt.count(t['lost'])} lost, {fmt.count(t['duplicates'])} duplicate deliveries;
{fmt.duration_ms(t['sim_time_ms'] or 0)} simulated in {fmt.duration_ms((t['wall_s'] or 0) * 1000)} of run wall time.</p>""",
            _question(view), _focus_line(view), _figures(images, "focus")]
    body.append(f"<h2>Per point (all seeds pooled; latency from merged histograms, warm-up excluded)</h2>\n"
                f"{_rates_note(view)}\n{_points_table(view)}")
    for name in view["drawn"]:
        if name != view["focus"].name:
            body.append(f'<h2 id="{name}">Also not zero: {html.escape(focus_mod.LABELS[name])}</h2>'
                        f"<p>{_overall_line(view, name)}</p>{_figures(images, name)}")
    for section, title in SECTION_TITLES.items():
        if any(s == section for s, *_ in images):
            body.append(f'<h2 id="{section}">{title}</h2>{_figures(images, section)}')
    body.append(f'<h2 id="end-state">End state: did the cluster settle?</h2>{_quiescence(view["quiescence"])}')
    body.append(f'<h2 id="coverage">Coverage: rare states reached</h2>{_coverage(view["coverage"])}')
    body.append(f"<h2>Failed runs</h2>{_failed_table(view['failed'])}")
    body.append("<h2>Failing runs: verdict invalid or unknown, or failed to run</h2>"
                f"{_failing_table(view['failing'], out_dir, folder)}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rmqsim sweep report: {html.escape(manifest['name'])}</title>
<style>{STYLE}</style><script>{SCRIPT}</script></head>
<body>
{chr(10).join(part for part in body if part)}
</body></html>
"""


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _question(view: dict[str, Any]) -> str:
    """The focus, why it was chosen, and what is zero or unchecked everywhere."""
    focus = view["focus"]
    how = html.escape(focus.reason)
    hint = "" if focus.declared else (" Name the question in the sweep file to choose another: "
                                      "<code>report: {focus: loss | duplicates | latency | order | transactions}</code>.")
    lines = [f'<p><b>Focus: {html.escape(focus_mod.LABELS[focus.name])}</b> — {how}.{hint}</p>']
    for line in (focus_mod.zero_line(focus), focus_mod.unchecked_line(focus)):
        if line:
            lines.append(f"<p>{html.escape(line[0].upper() + line[1:])}.</p>")
    return f'<div class="question" id="focus">{"".join(lines)}</div>'


def _focus_line(view: dict[str, Any]) -> str:
    """The focus metric over the whole sweep, with its interval and causes (for a metric zero
    everywhere, its bound: what the sweep can say)."""
    name = view["focus"].name
    return "" if name == "latency" else f"<p>{_overall_line(view, name)}</p>"


def _overall_line(view: dict[str, Any], name: str) -> str:
    """`Loss: 385 lost of 28,917 acknowledged messages in 12 runs: 1.33 % [1.2 %, 1.47 %] (95 % Wilson).`"""
    m, o = METRICS[name], view["overall"][name]
    if not o["runs"]:
        return f"{html.escape(focus_mod.LABELS[name]).capitalize()}: not checked in any run ({m.unchecked or 'no run'})."
    causes = ", ".join(f"{c} {n:,}" for c, n in o["causes"].items() if n)
    return (f"{html.escape(focus_mod.LABELS[name]).capitalize()}: {fmt.count(o['events'])} of "
            f"{fmt.count(o['exposure'])} {m.of} in {o['runs']:,} runs: {fmt.interval(o['mean'], o['lo'], o['hi'])} "
            f"(95 % {m.method}){'; by cause: ' + causes if causes else ''}.")


def _figures(images: list[tuple[str, str, str, str]], section: str) -> str:
    return "".join(
        f'<figure id="{stem}"><h3>{html.escape(title)}</h3><img class="figure" alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{png}"><figcaption>{stem}.png · {stem}.svg</figcaption></figure>'
        for s, stem, title, png in images if s == section)


def _rates_note(view: dict[str, Any]) -> str:
    return ("<p>Rates are events over what they are a fraction of (acknowledged messages × consuming groups; "
            "transactional messages for transactions), summed over the point's runs, with a 95 % score interval: "
            "Wilson for a proportion (loss, order and transaction violations), the Poisson score interval for "
            "duplicates (a message may be delivered more than once); both stay at or above 0 and are defined when "
            "nothing happened. They assume independent messages; a fault's losses come in bursts, so read them with "
            "the number of runs. Only metrics that are not zero in some run have a column. \"pass\" counts runs "
            "whose guarantee verdict (analysis/verdict.py) is valid.</p>")


def _points_table(view: dict[str, Any]) -> str:
    params, shown = view["params"], view["drawn"]
    unquiet = view["quiescence"]["unquiet"] > 0
    head = ["point", *params, "runs", "pass (guarantee verdicts)",
            *[f"{METRICS[n].title} [95% {METRICS[n].method}]" for n in shown], "p50", "p99", "p99.9",
            *(["runs ended unquiet"] if unquiet else [])]
    rows = []
    for s in view["stats"]:
        lat = s["latency_ms"]
        cells = [fmt.count(s["point"]), *[_cell(s["params"][p]) for p in params], fmt.count(s["runs"]), _verdicts(s),
                 *[_rate(s[n]) for n in shown], fmt.duration_ms(lat.get("p50")), fmt.duration_ms(lat.get("p99")),
                 fmt.duration_ms(lat.get("p99.9")), *([fmt.count(s["unquiet"])] if unquiet else [])]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _cell(value: Any) -> str:
    if value is None:
        return fmt.NA
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt.number(value)
    return html.escape(str(value))


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


def _quiescence(q: dict[str, Any]) -> str:
    """Runs that ended quiet and unquiet (sim/quiescence.py), and what kept moving."""
    if not q["runs"]:
        return "<p>No completed run.</p>"
    if q["unjudged"] == q["runs"]:
        return "<p>Not recorded by these runs (an older rmqsim): whether the cluster was still changing at the end is unknown.</p>"
    parts = [f"{q['quiet']:,} of {q['runs']:,} runs ended quiet"]
    if q["unquiet"]:
        moving = ", ".join(f"{kind} in {n:,} run{'s' if n != 1 else ''}" for kind, n in q["moving_runs"].items())
        ids = ", ".join(q["unquiet_ids"][:20]) + (" …" if len(q["unquiet_ids"]) > 20 else "")
        parts.append(f"<b>{q['unquiet']:,} ended unquiet</b> (still moving in the last window: {html.escape(moving or 'n/a')}; "
                     f"{html.escape(ids)}): their counts depend on when the run ended; "
                     "<code>settle_ms: auto</code> runs until the cluster is quiet")
    if q["unjudged"]:
        parts.append(f"{q['unjudged']:,} not judged")
    return f"<p>{'; '.join(parts)}.</p>"


def _coverage(cov: dict[str, Any] | None) -> str:
    """Runs reaching each rare-state point (sim/kernel/coverage.py), and the points no run reached."""
    if cov is None:
        return "<p>Not recorded by these runs (an older rmqsim).</p>"
    described = _coverage_descriptions()
    order = [n for n in described if n in cov["points"]] + [n for n in cov["points"] if n not in described]
    reached = [n for n in order if cov["points"][n]["runs"]]
    never = [n for n in order if not cov["points"][n]["runs"]]
    rows = "".join(f'<tr><td class="name"><code>{html.escape(n)}</code></td>'
                   f'<td class="name">{html.escape(described.get(n, ""))}</td>'
                   f"<td>{cov['points'][n]['runs']:,} of {cov['runs']:,}</td><td>{cov['points'][n]['times']:,}</td></tr>"
                   for n in reached)
    table = ("<table><thead><tr><th>point</th><th>branch</th><th>runs reaching it</th><th>times reached "
             f"(all runs)</th></tr></thead><tbody>{rows}</tbody></table>") if reached else ""
    lines = [f"<p>{len(reached):,} of {len(order):,} points reached by at least one of {cov['runs']:,} runs.</p>", table]
    if never:
        lines.append(f'<p id="coverage-unreached">No run reached: {", ".join(f"<code>{html.escape(n)}</code>" for n in never)}. '
                     "What these runs say is silent on those branches.</p>")
    return "".join(lines)


def _coverage_descriptions() -> dict[str, str]:
    """Point name → the branch it marks, in the registry's order (empty if there is none)."""
    try:
        from sim.kernel.coverage import POINTS
    except ImportError:
        return {}
    return {p.name: getattr(p, "branch", "") for p in POINTS}


def _failed_table(failed: list[dict[str, Any]]) -> str:
    if not failed:
        return "<p>No failed runs.</p>"
    rows = "".join(f"<tr><td>{html.escape(f['run_id'])}</td><td><pre>{html.escape((f['error'] or '')[:600])}</pre></td>"
                   f"<td><code>{html.escape(f['repro'] or '')}</code></td></tr>" for f in failed)
    return f"<table><thead><tr><th>run</th><th>error</th><th>reproduce</th></tr></thead><tbody>{rows}</tbody></table>"


def _failing_table(failing: dict[str, Any], out_dir: Path, folder: Path) -> str:
    """Each failing run with what failed, a link to its repro card (relative to the report, so the
    pair of folders can move together) and its reproduction command."""
    if not failing["rows"]:
        return "<p>No failing runs: every run ran and was judged valid.</p>"
    rows = []
    for f in failing["rows"]:
        what = f["verdict_failures"] if f["status"] == "ok" else (f["error"] or "").strip().splitlines()[:1]
        what = what if isinstance(what, str) else (what[0] if what else "")
        verdict = f["verdict"] if f["status"] == "ok" else (
            "unknown: stopped at a bound" if (f["error"] or "").startswith("StoppedAtBound") else "failed to run")
        card = "-"
        if f["card"] and lstat_kind(out_dir / f["card"]) == "file":
            href = quote(os.path.relpath((out_dir / f["card"]).resolve(), folder.resolve()))
            card = f'<a class="repro-card" href="{html.escape(href)}">{html.escape(f["card"])}</a>'
        rows.append(f'<tr id="failing-{html.escape(f["run_id"])}"><td>{html.escape(f["run_id"])}</td>'
                    f"<td>{html.escape(verdict or '')}</td><td>{html.escape((what or '')[:400])}</td><td>{card}</td>"
                    f"<td><code>{html.escape(f['repro'] or '')}</code></td></tr>")
    more = failing["total"] - len(failing["rows"])
    note = f"<p>… and {more:,} more (the first {len(failing['rows']):,} by run id are listed).</p>" if more > 0 else ""
    return ("<table><thead><tr><th>run</th><th>verdict</th><th>what failed</th><th>repro card</th><th>reproduce</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{note}")


