"""`rmqsim report DIR`: figures (PNG and SVG) and one self-contained HTML page for a sweep.

The aggregates come from Spark SQL (analysis/aggregate.py) on the sweep's Parquet tables; the
page embeds the PNGs as data URIs, so it can be mailed or archived as one file. Also written:
`points.json` (the per-point table). Every file is written under a temporary name and renamed,
the HTML page last, and recorded in the report folder's manifest (sim/files.py `OwnedDir`): a
file there that rmqsim did not write is never overwritten, and a report that fails half-way
removes what it wrote.

Before Spark reads anything, `check_tables` proves the tables are the sweep's own: table
folders are folders (not symbolic links), every file in them is a regular file (a FIFO or
device is never opened, so nothing hangs), each `runs` file is one row of this sweep (read with
a size bound), and each per-message file is listed by an ok run's row with its size (a
truncated or unlisted file is refused, naming it; rerunning the sweep redoes such runs).

The page lists the failing runs — verdict invalid or unknown, or failed to run; the first
`MAX_FAILING_ROWS` by run id, and how many there are — each with what failed, its reproduction
command and a link to its repro card (`DIR/repro/<run_id>.md`, analysis/repro_card.py) when its
row lists one; the link is relative to the report folder.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.parquet as pq

from analysis import aggregate, figures, fmt, sweep_dir
from analysis import results_store as store
from analysis.checks import DELIVERY_COUNT_CAP
from sim.files import REPORT_TOOL, OwnedDir, UnsafeFile, lstat_kind, regular_file, some
from sim.files import report_dir as claim_report_dir

MAX_FAILING_ROWS = 500  # failing runs listed on the page (the count says how many in all)
STEMS = ("duplicates_vs_params", "duplicates_heatmap", "latency_spectrum", "latency_timeline", "loss_per_point",
         "delivery_counts", "txn_checks")  # every figure a sweep report may draw


class ReportError(Exception):
    """The report cannot be built from this directory (reported without a traceback)."""


def build_report(out_dir: Path, report_dir: Path | None = None, master: str = "local[1]",
                 timeline_run: str | None = None) -> Path:
    from analysis.sweep import spark_session

    if not (out_dir / sweep_dir.MANIFEST).is_file():
        raise ReportError(f"{out_dir} is not a sweep output directory (no {sweep_dir.MANIFEST})")
    try:
        manifest = sweep_dir.check_shape(out_dir, sweep_dir.read_manifest(out_dir))
    except sweep_dir.ForeignDirectory as exc:
        raise ReportError(str(exc)) from None
    check_tables(out_dir, manifest["digest"])
    folder = claim_report_dir(out_dir / "report", report_dir)
    owned = OwnedDir(folder, REPORT_TOOL, names=["points.json", "index.html"] +
                     [f"{stem}.{ext}" for stem in STEMS for ext in ("png", "svg")])
    try:
        spark = spark_session(master, None, app=f"rmqsim-report-{manifest['name']}")
        if store.RUNS not in aggregate.open_views(spark, out_dir):
            raise ReportError(f"{out_dir} has no completed runs yet")
        data = _gather(spark, manifest, timeline_run)
        images = _draw(data, owned)
        owned.write_text("points.json", json.dumps(data["points_json"], indent=1, default=str))
        page = owned.write_text("index.html", _html(manifest, data, images, out_dir, folder))
        owned.commit()
    except BaseException:
        owned.abandon()
        raise
    return page


def check_tables(out_dir: Path, digest: str) -> None:
    """Every table file a regular file, readable, and the sweep's own (module docstring); else
    ReportError naming the files (Spark would hang or fail on them, or mix in what is not this
    sweep's)."""
    unsafe, damaged, foreign, unlisted = [], [], [], []
    listed: dict[str, int] = {}
    unlisting: set[str] = set()  # ok runs of an older rmqsim, whose rows list no files
    entries: dict[str, list[Path]] = {}
    for table in sweep_dir.TABLES:
        folder = out_dir / table
        kind = lstat_kind(folder)
        if kind not in (None, "dir"):
            raise ReportError(f"{folder} is {'a symbolic link' if kind == 'link' else 'not a folder'}; a report "
                              "reads only the folders rmqsim wrote: move it away")
        entries[table] = [] if kind is None else sorted(p for p in folder.iterdir()
                                                        if not p.name.startswith((".", "_")))
        for path in entries[table]:
            if lstat_kind(path) != "file":
                unsafe.append(f"{table}/{path.name}")
    if unsafe:
        raise ReportError(f"{len(unsafe)} entr{'y' if len(unsafe) == 1 else 'ies'} in {out_dir}'s tables "
                          f"{'is' if len(unsafe) == 1 else 'are'} not a regular file ({some(unsafe)}): a FIFO, "
                          "device, folder or symbolic link is never read; move them away")
    for path in entries[store.RUNS]:
        try:
            row = sweep_dir.read_row(path, sweep_dir.ROW_COLUMNS)
        except UnsafeFile:
            row = None
        if row is None:
            damaged.append(f"{store.RUNS}/{path.name}")
        elif row["run_id"] != path.stem or row["sweep_digest"] != digest:
            foreign.append(path.name)
        elif row["status"] == "ok" and sweep_dir.legacy(row):
            unlisting.add(path.stem)
        elif row["status"] == "ok":  # its tables (a failing run's repro card is read by no report)
            listed.update({f["path"]: f["bytes"] for f in row["output_files"]
                           if not f["path"].startswith(sweep_dir.REPRO + "/")})
    for table in sweep_dir.TABLES[1:]:
        for path in entries[table]:
            rel = f"{table}/{path.name}"
            if rel not in listed and path.name.endswith(".parquet") and path.name[:-8] in unlisting:
                if not _readable_parquet(path):  # an older sweep's file: readable is all that can be checked
                    damaged.append(rel)
            elif rel not in listed:
                unlisted.append(rel)
            elif path.lstat().st_size != listed.pop(rel) or not _readable_parquet(path):
                damaged.append(rel)
    damaged += [f"{rel} (missing)" for rel in sorted(listed)]
    if damaged:
        raise ReportError(f"{len(damaged)} file(s) in {out_dir} are not readable Parquet or are not what their run "
                          f"wrote ({some(damaged)}): rerun the sweep command to redo those runs")
    if foreign:
        raise ReportError(f"{len(foreign)} run file(s) in {out_dir / store.RUNS} are not runs of the sweep in "
                          f"{sweep_dir.MANIFEST} (digest {digest[:12]}): {some(foreign)}; refusing to mix them")
    if unlisted:
        raise ReportError(f"{len(unlisted)} file(s) in {out_dir} are listed by no completed run of this sweep "
                          f"({some(unlisted)}): left by an interrupted or failed run, or not rmqsim's; rerun the "
                          "sweep command, or move them away")


def _readable_parquet(path: Path) -> bool:
    try:
        with regular_file(path) as handle:
            pq.read_schema(handle)
    except Exception:  # noqa: BLE001 - pyarrow raises several types for damaged or foreign files
        return False
    return True


def _gather(spark: Any, manifest: dict[str, Any], timeline_run: str | None) -> dict[str, Any]:
    params = manifest["grid"] + manifest["zip"]
    stats = aggregate.point_stats(spark, params)
    pooled = aggregate.pooled_latency(spark)
    run = timeline_run or manifest["timeline_run"]
    tl = aggregate.timeline(spark, run)
    if tl is None and timeline_run is not None:
        raise ReportError(f"--run {timeline_run}: no completed run with that id (ids look like p0000-s1)")
    if tl is None:  # the sweep's chosen run failed: take the first good one
        ok = spark.sql("SELECT min(run_id) AS r FROM runs WHERE status = 'ok'").collect()[0]["r"]
        run, tl = ok, aggregate.timeline(spark, ok) if ok else None
    data = {
        "params": params, "stats": stats, "pooled": pooled, "run": run, "timeline": tl,
        "marginals": {p: aggregate.marginal_stats(spark, p, params) for p in params},
        "heatmap": aggregate.grid_means(spark, params[0], params[1], "duplicate_rate") if len(params) >= 2 else None,
        "counts": aggregate.delivery_counts(spark), "failed": aggregate.failed_runs(spark),
        "failing": failing_runs(spark),
        "totals": aggregate.totals(spark),
        "txn": aggregate.txn_checks(spark, run),
    }
    data["points_json"] = [{**s, "latency_ms": pooled.get(s["point"], {})} for s in stats]
    return data


def failing_runs(spark: Any, limit: int = MAX_FAILING_ROWS) -> dict[str, Any]:
    """The runs whose verdict is invalid or unknown, or that failed to run (run id order, at most
    `limit`), each with what failed, its reproduction command and its repro card's path if its row
    lists one; and how many there are in all."""
    columns = set(spark.table("runs").columns)
    have = [c for c in ("verdict", "verdict_failures", "error", "repro", "output_files") if c in columns]
    where = "status <> 'ok'" + (" OR verdict IN ('invalid', 'unknown')" if "verdict" in columns else "")
    total = spark.sql(f"SELECT count(*) AS n FROM runs WHERE {where}").collect()[0]["n"]
    rows = spark.sql(f"SELECT run_id, status, {', '.join(have)} FROM runs WHERE {where} ORDER BY run_id "
                     f"LIMIT {int(limit)}").collect()
    out = []
    for r in rows:
        row = {c: None for c in ("verdict", "verdict_failures", "error", "repro")} | r.asDict()
        card = f"{sweep_dir.REPRO}/{row['run_id']}.md"
        listed = {f["path"] for f in row.pop("output_files", None) or []}
        row["card"] = card if card in listed else None
        out.append(row)
    return {"total": total, "rows": out}


def _labels(stats: list[dict[str, Any]]) -> dict[int, str]:
    return {s["point"]: s["point_key"] or f"point {s['point']}" for s in stats}


def _draw(data: dict[str, Any], owned: OwnedDir) -> list[tuple[str, str, str]]:
    """Save each figure as PNG and SVG; returns (file stem, title, PNG base64) in page order."""
    labels = _labels(data["stats"])
    made = []
    if data["params"]:
        made.append(("duplicates_vs_params", figures.duplicates_vs_params(data["marginals"])))
    if data["heatmap"]:
        made.append(("duplicates_heatmap",
                     figures.heatmap(data["heatmap"], data["params"][0], data["params"][1], "duplicate_rate")))
    made.append(("latency_spectrum", figures.latency_spectrum(data["pooled"], labels, aggregate.SPECTRUM)))
    if data["timeline"] is not None:
        made.append(("latency_timeline", figures.latency_timeline(data["timeline"], data["run"])))
    made.append(("loss_per_point", figures.loss_per_point(data["stats"], labels)))
    made.append(("delivery_counts", figures.delivery_histogram(data["counts"], DELIVERY_COUNT_CAP)))
    if data.get("txn") is not None:  # transactional producers: check-backs
        made.append(("txn_checks", figures.txn_checks(data["txn"])))
    out = []
    for stem, fig in made:
        title = "; ".join(ax.get_title() for ax in fig.axes if ax.get_title())
        for ext in ("png", "svg"):
            with owned.path(f"{stem}.{ext}") as tmp:
                fig.savefig(tmp, format=ext, dpi=110)
        figures.plt.close(fig)
        png = base64.b64encode((owned.directory / f"{stem}.png").read_bytes()).decode("ascii")
        out.append((stem, title, png))
    return out


def _fmt(value: Any) -> str:
    """A table cell for people (analysis/fmt.py): 12,345 · 0.25 · n/a."""
    if value is None:
        return fmt.NA
    if isinstance(value, int | float) and not isinstance(value, bool):
        return fmt.number(value)
    return html.escape(str(value))


def _ci(stat: dict[str, Any], as_rate: bool = True) -> str:
    """`1.2 % [0.8 %, 1.9 %]` for a rate; `0.5 [0.1, 1.3]` for a count per run; n/a if unmeasured."""
    return fmt.interval(stat["mean"], stat["lo"], stat["hi"], fmt.rate if as_rate else fmt.number)


def _verdicts(s: dict[str, Any]) -> str:
    """`4 of 4 valid`, with invalid / unknown / failed counts when there are any."""
    ok_runs = s["runs"] - s["failed"]
    parts = [f"{s['passed']} of {ok_runs} valid"]
    parts += [f"{s[k]} {k}" for k in ("invalid", "unknown") if s.get(k)]
    parts += [f"{s['failed']} failed to run"] if s["failed"] else []
    return ", ".join(parts)


def _points_table(data: dict[str, Any]) -> str:
    params = data["params"]
    head = ["point", *params, "runs", "pass (guarantee verdicts)", "duplicate rate [95% score]",
            "loss rate [95% Wilson]", "order violations / run", "transaction violations / run",
            "p50", "p99", "p99.9"]
    rows = []
    for s in data["stats"]:
        lat = data["pooled"].get(s["point"], {})
        cells = [s["point"], *[s["params"][p] for p in params], s["runs"], _verdicts(s),
                 _ci(s["duplicate_rate"]), _ci(s["loss_rate"]), _ci(s["order_violations"], as_rate=False),
                 _ci(s["transaction_violations"], as_rate=False), fmt.duration_ms(lat.get("p50")),
                 fmt.duration_ms(lat.get("p99")), fmt.duration_ms(lat.get("p99.9"))]
        rows.append("<tr>" + "".join(f"<td>{c if isinstance(c, str) else _fmt(c)}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _failed_table(failed: list[dict[str, Any]]) -> str:
    if not failed:
        return "<p>No failed runs.</p>"
    rows = "".join(f"<tr><td>{html.escape(f['run_id'])}</td><td><pre>{html.escape((f['error'] or '')[:600])}</pre></td>"
                   f"<td><code>{html.escape(f['repro'] or '')}</code></td></tr>" for f in failed)
    return f"<table><thead><tr><th>run</th><th>error</th><th>reproduce</th></tr></thead><tbody>{rows}</tbody></table>"


STYLE = """body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f0f0f0}
figure{margin:12px 0}img{max-width:100%;border:1px solid #eee}figcaption{font-size:12px;color:#555}
code,pre{font-size:11px;white-space:pre-wrap;text-align:left}"""
SCRIPT = """window.addEventListener('load',function(){var imgs=document.querySelectorAll('img.figure');
var ok=0;imgs.forEach(function(i){if(i.complete&&i.naturalWidth>0)ok++;});
document.body.setAttribute('data-figures-loaded',ok+'/'+imgs.length);});"""


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


def _html(manifest: dict[str, Any], data: dict[str, Any], images: list[tuple[str, str, str]], out_dir: Path,
          folder: Path) -> str:
    t = data["totals"]
    figs = "".join(
        f'<figure id="{stem}"><h2>{html.escape(title)}</h2><img class="figure" alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{png}"><figcaption>{stem}.png · {stem}.svg</figcaption></figure>'
        for stem, title, png in images)
    params = ", ".join(f"{html.escape(n)} = <code>{html.escape(k)}</code>" for n, k in manifest["params"].items())
    heat_note = "" if data["heatmap"] else "<p>(No heatmap: the sweep varies fewer than two parameters.)</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rmqsim sweep report: {html.escape(manifest['name'])}</title>
<style>{STYLE}</style><script>{SCRIPT}</script></head>
<body>
<h1>rmqsim sweep report: {html.escape(manifest['name'])}</h1>
<p>Sweep file <code>{html.escape(manifest['source'])}</code>, base <code>{html.escape(manifest['base'])}</code>,
digest <code>{html.escape(manifest['digest'][:16])}</code>. Parameters: {params or '(none)'}.
{fmt.count(t['runs'])} runs ({fmt.count(t['ok'])} ok), {len(manifest['points'])} points × {len(manifest['seeds'])} seeds;
{fmt.count(t['sent_ok'])} messages acked, {fmt.count(t['lost'])} lost, {fmt.count(t['duplicates'])} duplicate deliveries;
{fmt.duration_ms(t['sim_time_ms'] or 0)} simulated in {fmt.duration_ms((t['wall_s'] or 0) * 1000)} of run wall time.</p>
<h2>Per point (all seeds pooled; latency from merged histograms, warm-up excluded)</h2>
<p>Rates are events over acknowledged deliveries summed over the point's runs, with a 95 % score interval:
Wilson for the loss rate (a proportion), the Poisson score interval for duplicate rates (a message may be
delivered more than once); both stay at or above 0 and are defined when nothing happened. They assume
independent messages; a fault's losses come in bursts, so read them with the number of runs. Counts per run
(violations) have the Poisson score interval of their mean; n/a means not checked (no orderly group, no
transactions), not 0. "pass" counts runs whose guarantee verdict (analysis/verdict.py) is valid.</p>
{_points_table(data)}
{heat_note}
{figs}
<h2>Failed runs</h2>
{_failed_table(data['failed'])}
<h2>Failing runs: verdict invalid or unknown, or failed to run</h2>
{_failing_table(data['failing'], out_dir, folder)}
</body></html>
"""
