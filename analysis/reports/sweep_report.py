"""`rmqsim report DIR`: a sweep's report, shaped by its question — figures (PNG and SVG) and one
self-contained HTML page.

The page opens with the sweep's focus metric (analysis/reports/focus.py: declared by the sweep file's
`report: {focus: ...}` or `--focus`, or inferred from what varies, saying why): a correctness rate
(its heatmap over the first two axes, the rest pooled, and its split by cause against each axis,
rates in % of what they are a fraction of), the latency percentiles, or any numeric column of the
runs table (a max latency, a write outage, a recovery time: analysis/sweeps/columns.py; its
heatmap of the runs' mean and each axis's panel with every run's value beside the mean). Every
rate has first its interval from the spread across its runs (95 % Student t, the run as the
unit: analysis/sweeps/stats.py), and the per-message Wilson / Poisson interval only where the
runs agree with it, labelled so; each figure draws every run's value as a point beside the
pooled one. Axes: each grid parameter, and the zip's parameters together as one axis (one
panel, its values the tuples), never a panel per zipped key "pooled over" the keys that move
with it. Then the lint's warnings over the points (a swept parameter the lint calls inert is
named next to the focus: its rows cannot differ), the per-point table, the other metrics that
are not zero somewhere (each split by cause), latency, deliveries per message, the end state
(runs that ended unquiet, rmqsim/quiescence.py), the rare-state coverage table (runs reaching
each point, and the points no run reached), and the failing runs. A metric that is zero in
every run is named in one line, never drawn; one no run checked likewise.

The data are the runs table read once, one row per run, and pooled in pandas for every figure
and table (analysis/sweeps/aggregate.py): for a local master, or none, read here with Arrow, no
JVM (`load_local`; the per-point latency histograms merged by Arrow's group-by); through Spark in
one job (two above 5,000 runs) in the caller's SparkSession (`rmqsim sweep --report` after a
Spark sweep) or, for a master that needs Spark (analysis/sweeps/sweep.py `uses_spark`), a report
session of its own: no UI, the client JIT compiler, interpreted expressions and a class archive
(analysis/sweeps/spark_classes.py), which start and answer sooner than the defaults for one row
per run. Both give the same rows (tests/analysis/test_sweep_local.py); matplotlib is imported
meanwhile.
The page (analysis/reports/sweep_page.py) embeds the PNGs as data URIs, so it can be mailed or
archived as one file. Also written: `points.json` (the per-point table, every interval included).
Every file is written under a temporary name and renamed,
the HTML page last, and recorded in the report folder's manifest (sim/files.py `OwnedDir`): a
file there that rmqsim did not write is never overwritten; a figure an earlier report drew and
this one does not is removed if the manifest proves it rmqsim's and unchanged; and a report that
fails half-way removes what it wrote.

Before Spark reads anything, `check_tables` proves the tables are the sweep's own: table
folders are folders (not symbolic links), every file in them is a regular file (a FIFO or
device is never opened, so nothing hangs), each `runs` file is one row of this sweep (read with
a size bound), and each per-message file is listed by an ok run's row with its size (a
truncated or unlisted file is refused, naming it; rerunning the sweep redoes such runs). A focus
that names no focus word and no numeric column of those tables is refused then too, with the
nearest valid names (ReportError: the CLI's exit 2).

The page lists the failing runs — verdict invalid or unknown, or failed to run; the first
`MAX_FAILING_ROWS` by run id, and how many there are — each with what failed, its reproduction
command and a link to its repro card (`DIR/repro/<run_id>.md`, analysis/sweeps/repro_card.py) when its
row lists one; the link is relative to the report folder.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.checkers.metrics import DELIVERY_COUNT_CAP
from analysis.reports import fmt
from analysis.reports import focus as focus_mod
from analysis.reports.sweep_page import page
from analysis.sweeps import aggregate
from analysis.sweeps import directory as sweep_dir
from analysis.sweeps import results_store as store
from analysis.sweeps.aggregate import METRICS
from analysis.sweeps.columns import FOCUS_WORDS, FocusError, find, refusal, table_columns
from analysis.sweeps.lint_points import LINT_SHAPE, inert_params
from sim.files import REPORT_TOOL, OwnedDir, UnsafeFile, lstat_kind, matches, regular_file, some
from sim.files import report_dir as claim_report_dir
from sim.readback import shape_problem

__all__ = ["ReportError", "build_report", "check_tables"]
MAX_FAILING_ROWS = 500  # failing runs listed on the page (the count says how many in all)
STEMS = tuple(f"{m}_{kind}" for m in METRICS for kind in ("heatmap", "by_cause")) + (
    "column_heatmap", "column_vs_params", "latency_heatmap", "latency_vs_params", "latency_spectrum",
    "latency_timeline", "delivery_counts", "txn_checks")  # every figure a sweep report may draw
FIGURE_FILES = tuple(f"{stem}.{ext}" for stem in STEMS for ext in ("png", "svg"))


class ReportError(Exception):
    """The report cannot be built from this directory (reported without a traceback)."""


def build_report(out_dir: Path, report_dir: Path | None = None, master: str | None = None,
                 timeline_run: str | None = None, spark: Any = None, focus: str | None = None,
                 own_session: bool = False) -> Path:
    """Write the report (module docstring); `spark`: a session to use, else the tables are read
    without one for a local master (or none), and a session is started for a master that needs Spark
    (with `own_session`, by a command that ends after the report: its JVM may then leave a class
    archive for the next report's, analysis/sweeps/spark_classes.py `finish`; a master it cannot
    start with: analysis.sweeps.sweep.SparkMasterError); `focus`: overrides the sweep file's."""
    if spark is None:  # a malformed --master: SparkMasterError before anything is read or a JVM starts
        from analysis.sweeps.sweep import check_master

        check_master(master)
    if not (out_dir / sweep_dir.MANIFEST).is_file():
        raise ReportError(f"{out_dir} is not a sweep output directory (no {sweep_dir.MANIFEST})")
    try:
        manifest = sweep_dir.check_shape(out_dir, sweep_dir.read_manifest(out_dir))
    except sweep_dir.ForeignDirectory as exc:
        raise ReportError(str(exc)) from None
    schema, n_runs = check_tables(out_dir, manifest["digest"])
    params = manifest["grid"] + manifest["zip"]
    columns = table_columns(schema, params)
    declared = focus or (manifest.get("report") or {}).get("focus")
    _check_focus(declared, columns, "--focus" if focus else f"report.focus (the sweep file's, in {sweep_dir.MANIFEST}):")
    lint = _lint(out_dir, manifest)
    folder = claim_report_dir(out_dir / "report", report_dir)
    owned = OwnedDir(folder, REPORT_TOOL, names=["points.json", "index.html", *FIGURE_FILES])
    importer = threading.Thread(target=_import_figures, name="rmqsim-import-figures")  # joined below
    try:
        # matplotlib's imports (over a second) run while the tables are read (a JVM starts: mostly waiting)
        importer.start()
        data = _load(out_dir, manifest, params, schema, n_runs, timeline_run, spark, master, own_session)
        if timeline_run is not None and data.timeline_run != timeline_run:
            raise ReportError(f"--run {timeline_run}: no completed run with that id (ids look like p0000-s1)")
        how = f"chosen with --focus {focus}" if focus else ""
        view = gather(data, declared, heatmap_axes(manifest["grid"], manifest["zip"]), how, columns, lint)
        images = _draw(view, owned)
        _remove_stale(owned)
        owned.write_text("points.json", json.dumps(view["stats"], indent=1, default=str))
        written = owned.write_text("index.html", page(manifest, view, images, out_dir, folder))
        owned.commit()
    except BaseException:
        owned.abandon()
        raise
    finally:
        _join_import(importer)
    return written


def _load(out_dir: Path, manifest: dict[str, Any], params: list[str], schema: Any, n_runs: int,
          timeline_run: str | None, spark: Any, master: str | None, own_session: bool) -> aggregate.SweepData:
    """The runs table: through `spark` if given, or a session of the report's own for a master that
    needs Spark (analysis/sweeps/sweep.py `uses_spark`); else read here with Arrow, no JVM."""
    from analysis.sweeps.sweep import spark_session, uses_spark

    wanted = timeline_run or manifest["timeline_run"]
    if spark is None and not uses_spark(master):
        return aggregate.load_local(out_dir, params, schema, wanted, zipped=manifest["zip"])
    if spark is None:
        spark = spark_session(master, None, app=f"rmqsim-report-{manifest['name']}", purpose="report",
                              keep_classes=own_session)
    return aggregate.load(spark, out_dir, params, schema, wanted, n_runs, zipped=manifest["zip"])


def _join_import(importer: threading.Thread) -> None:
    """Wait for the background import of matplotlib, if it started, however the report ends (an
    error after it started: a Spark master that fails, `--run` naming no run), so that no thread of
    the report is still running extension-module code when the interpreter finalizes: a thread
    that must take the GIL back then is ended by pthread_exit, and where that unwinds through a
    C++ destructor the process aborts (SIGABRT, as Arrow's workers did: analysis/sweeps/directory.py read_row, now given a buffer of Arrow's own: arrow_copy). On
    success the drawing waits for the import anyway."""
    if importer.ident is not None:
        importer.join()


def _import_figures() -> None:
    try:
        import analysis.reports.figures  # noqa: F401
    except Exception:  # noqa: BLE001 - the main thread's own import says what is wrong
        pass


def _check_focus(declared: str | None, columns: dict[str, Any], where: str) -> None:
    """A focus that is no focus word and no numeric column of this sweep's table: ReportError naming
    the nearest valid names (before Spark starts)."""
    if declared is not None and declared not in FOCUS_WORDS and find(declared, columns) is None:
        raise ReportError(f"{where} {declared[:80]}: not a focus: {refusal(declared, columns, named=False)}")


def _lint(out_dir: Path, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The lint's warnings the sweep recorded over its points (`sweep.json` `lint`: analysis/sweeps/
    lint_points.py), checked for shape (the manifest is input); an older sweep's manifest has none."""
    entries = manifest.get("lint")
    if entries is None:
        return []
    problem = shape_problem(entries, LINT_SHAPE)
    if problem is not None:
        raise ReportError(f"{out_dir / sweep_dir.MANIFEST}: lint{problem}: not what rmqsim writes; rerun the sweep "
                          "command to rewrite it")
    return entries


Axis = str | tuple[str, ...]  # a grid parameter, or the zip's parameters together


def heatmap_axes(grid: list[str], zipped: list[str]) -> tuple[Axis, Axis] | None:
    """The two axes a heatmap spans: two grid parameters, or the grid's first and the zip's
    parameters together (they move together: one axis of tuples, not a diagonal of two)."""
    if len(grid) >= 2:
        return grid[0], grid[1]
    if grid and zipped:
        return grid[0], zipped[0] if len(zipped) == 1 else tuple(zipped)
    return None


def gather(data: aggregate.SweepData, declared: str | None, axes: tuple[Axis, Axis] | None,
           how: str = "", columns: dict[str, Any] | None = None,
           lint: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything the page shows, from the runs (analysis/sweeps/aggregate.py), focus first;
    `columns`: the table's numeric columns (a column focus), `lint`: the sweep's lint warnings."""
    stats = aggregate.point_stats(data)
    try:
        focus = focus_mod.choose(data, stats, declared, how, columns)
    except FocusError as exc:
        raise ReportError(f"focus: {exc}") from None
    column = focus.column.column if focus.column is not None else None
    if column is not None:
        stats = aggregate.point_stats(data, (column,))
    overall = {name: aggregate.pooled(data, data.ok, m) for name, m in METRICS.items()}
    causes = {name: [c for c in m.causes if overall[name]["causes"][c] > 0] for name, m in METRICS.items()}
    drawn = [n for n in [focus.name, *focus.varying] if n in METRICS and overall[n]["events"]]
    marginal_of = [*drawn, *(["loss"] if focus.kind == "latency" else [])]  # latency rides on any marginal
    axis_list = aggregate.axes(data)
    view = {"params": data.params, "stats": stats, "focus": focus, "overall": overall, "causes": causes,
            "drawn": drawn, "axes": axes, "axis_list": [aggregate.axis_name(a) for a in axis_list],
            "marginals": {n: {aggregate.axis_name(a): aggregate.marginals(data, a, METRICS[n]) for a in axis_list}
                          for n in marginal_of},
            "cells": None, "timeline": data.timeline, "run": data.timeline_run,
            "totals": aggregate.totals(data), "counts": aggregate.delivery_counts(data),
            "coverage": aggregate.coverage(data), "quiescence": aggregate.quiescence(data),
            "failing": _with_cards(aggregate.failing_runs(data, MAX_FAILING_ROWS)),
            "failed": aggregate.failed_runs(data), "txn": aggregate.txn_checks(data),
            "lint": lint or [], "inert": {p: e for p, e in inert_params(lint or []).items() if p in data.params},
            "column": None}
    if column is not None:
        view["column"] = {"overall": aggregate.column_stats(data, data.ok, column),
                          "marginals": {aggregate.axis_name(a): aggregate.marginals(data, a, None, column)
                                        for a in axis_list},
                          "cells": None if axes is None else aggregate.cells(data, axes[0], axes[1], None, column)}
    if axes is not None and (focus.kind == "latency" or focus.name in drawn):
        view["cells"] = aggregate.cells(data, axes[0], axes[1], METRICS.get(focus.name))
    return view


def _with_cards(failing: dict[str, Any]) -> dict[str, Any]:
    """Each failing run's repro card path, if its row lists one."""
    for row in failing["rows"]:
        card = f"{sweep_dir.REPRO}/{row['run_id']}.md"
        listed = {f["path"] for f in row.pop("output_files", None) or []}
        row["card"] = card if card in listed else None
    return failing


def _figures(view: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(page section, file stem, Figure) of every figure the page shows, focus first."""
    from analysis.reports import figures  # matplotlib: imported when there is something to draw

    focus, axes = view["focus"], view["axes"]
    made: list[tuple[str, str, Any]] = []
    if focus.kind == "column":
        made += _column_figures(view, figures)
    for name in view["drawn"]:
        section, metric = ("focus" if name == focus.name else name), METRICS[name]
        if name == focus.name and view["cells"] is not None:
            made.append((section, f"{name}_heatmap", figures.heatmap(
                [{**c, "value": None if c["mean"] is None else 100 * c["mean"]} for c in view["cells"]],
                *_axis_names(axes), metric.title, f"% of {metric.of}", _rate_cell, _pooled_axes(view, axes),
                note=_RATE_CELL_NOTE)))
        cause_fig = figures.by_cause_vs_params(view["marginals"][name], metric, view["causes"][name]) \
            if view["axis_list"] else figures.by_cause(view["overall"][name], metric, view["causes"][name],
                                                       view["overall"][name]["runs"])
        made.append((section, f"{name}_by_cause", cause_fig))
    latency = "focus" if focus.kind == "latency" else "latency"
    if focus.kind == "latency" and view["cells"] is not None:
        made.append((latency, "latency_heatmap", figures.heatmap(
            [{**c, "value": c["latency_ms"].get("p99")} for c in view["cells"]], *_axis_names(axes), "Latency p99",
            "p99 (ms)", lambda c: fmt.duration_ms(c["latency_ms"].get("p99")), _pooled_axes(view, axes))))
    if focus.kind == "latency" and view["axis_list"]:
        made.append((latency, "latency_vs_params", figures.latency_vs_params(view["marginals"]["loss"])))
    labels = {s["point"]: s["point_key"] or f"point {s['point']}" for s in view["stats"]}
    if any(s["latency_ms"].get("p50") is not None for s in view["stats"]):  # else nothing was consumed
        made.append((latency, "latency_spectrum", figures.latency_spectrum(
            {s["point"]: s["latency_ms"] for s in view["stats"]}, labels, aggregate.SPECTRUM)))
    if view["timeline"] is not None and view["timeline"].get("tl_second"):
        made.append((latency, "latency_timeline", figures.latency_timeline(view["timeline"], view["run"])))
    if any(d != 1 and n for d, n in view["counts"]):  # only 1s: every message once, nothing to see
        made.append(("deliveries", "delivery_counts", figures.delivery_histogram(view["counts"], DELIVERY_COUNT_CAP)))
    if view["txn"] is not None:  # transactional producers: check-backs
        made.append(("txn", "txn_checks", figures.txn_checks(view["txn"])))
    return made


def _column_figures(view: dict[str, Any], figures: Any) -> list[tuple[str, str, Any]]:
    """A column focus: the heatmap of the runs' mean over the first two axes, and each axis's panel
    with every run's value beside the mean (one panel over the runs without parameters)."""
    column, data, axes = view["focus"].column, view["column"], view["axes"]
    made = []
    if data["cells"] is not None:
        made.append(("focus", "column_heatmap", figures.heatmap(
            [{**c, "value": c["mean"]} for c in data["cells"]], *_axis_names(axes), column.label, column.axis,
            lambda c: _column_cell(column, c), _pooled_axes(view, axes),
            note="runs' mean [95 % t interval over the runs]")))
    panels = data["marginals"] if view["axis_list"] else {"(all runs)": [{**data["overall"], "value": "all runs",
                                                                          "label": "all runs", "pooled_over": []}]}
    made.append(("focus", "column_vs_params", figures.column_vs_params(panels, column, lambda v: focus_mod.show(column, v))))
    return made


_RATE_CELL_NOTE = "95 % t interval over the runs (* per-message: one run, or no event in any run)"


def _axis_names(axes: tuple[Axis, Axis] | None) -> tuple[str, str]:
    assert axes is not None
    return aggregate.axis_name(axes[0]), aggregate.axis_name(axes[1])


def _pooled_axes(view: dict[str, Any], axes: tuple[Axis, Axis] | None) -> list[str]:
    shown = set(_axis_names(axes))
    return [a for a in view["axis_list"] if a not in shown]


def _rate_cell(cell: dict[str, Any]) -> str:
    """A heatmap cell of a rate: the pooled rate and its run-level interval; where there is none (one
    run, or no event in any run), the per-message one, starred."""
    if cell["mean"] is None:
        return "-"
    if cell.get("run_lo") is not None and cell.get("run_hi", 0) > 0:
        return f"{fmt.rate(cell['mean'])}\n[{fmt.rate(cell['run_lo'])}, {fmt.rate(cell['run_hi'])}]"
    return f"{fmt.rate(cell['mean'])}\n[{fmt.rate(cell['lo'])}, {fmt.rate(cell['hi'])}]*"


def _column_cell(column: Any, cell: dict[str, Any]) -> str:
    if cell["mean"] is None:
        return "-"
    if cell["lo"] is None:
        return focus_mod.show(column, cell["mean"])
    return (f"{focus_mod.show(column, cell['mean'])}\n[{focus_mod.show(column, cell['lo'])}, "
            f"{focus_mod.show(column, cell['hi'])}]")


def _draw(view: dict[str, Any], owned: OwnedDir) -> list[tuple[str, str, str, str]]:
    """Save each figure as PNG and SVG; returns (section, file stem, title, PNG base64) in page order."""
    import matplotlib.pyplot as plt

    out = []
    for section, stem, fig in _figures(view):
        title = "; ".join(ax.get_title().replace("\n", " — ") for ax in fig.axes if ax.get_title())
        for ext in ("png", "svg"):
            with owned.path(f"{stem}.{ext}") as tmp:
                fig.savefig(tmp, format=ext, dpi=110)
        plt.close(fig)
        png = base64.b64encode((owned.directory / f"{stem}.png").read_bytes()).decode("ascii")
        out.append((section, stem, title, png))
    return out


def _remove_stale(owned: OwnedDir) -> None:
    """Figures an earlier report drew that this one does not (a metric now zero everywhere): removed
    when the manifest proves them rmqsim's and unchanged, so the folder shows what the page does."""
    for rel, entry in list(owned.files.items()):
        if rel.endswith((".png", ".svg")) and rel not in owned.written and matches(owned.directory / rel, entry):
            (owned.directory / rel).unlink()
            del owned.files[rel]


def check_tables(out_dir: Path, digest: str) -> tuple[Any, int]:
    """Every table file a regular file, readable, and the sweep's own (module docstring); else
    ReportError naming the files (Spark would hang or fail on them, or mix in what is not this
    sweep's). Returns the `runs` files' Arrow schema (unified: a row of an older rmqsim may lack
    a column) and how many there are."""
    unsafe, damaged, foreign, unlisted = [], [], [], []
    schemas: list[Any] = []  # the distinct schemas of the runs files
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
            row = sweep_dir.read_row(path, sweep_dir.ROW_COLUMNS, schemas)
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
    if not entries[store.RUNS]:
        raise ReportError(f"{out_dir} has no completed runs yet")
    try:
        return pa.unify_schemas(schemas), len(entries[store.RUNS])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ReportError(f"the runs files in {out_dir / store.RUNS} disagree on a column's type ({exc}); "
                          "rerun the sweep with --replace") from None


def _readable_parquet(path: Path) -> bool:
    try:
        with regular_file(path) as handle:
            pq.read_schema(handle)
    except Exception:  # noqa: BLE001 - pyarrow raises several types for damaged or foreign files
        return False
    return True
