"""`rmqsim report RUN_DIR` (and `rmqsim run ... --report`): one run's report, without Spark.

Writes `RUN_DIR/report/`: each figure of analysis/reports/run_figures.py, the availability figure of
analysis/reports/availability_figures.py, the POP panel of analysis/reports/pop_figures.py, the cluster
timeline of analysis/reports/timeline_figures.py and the transaction panel of
analysis/reports/txn_figures.py as PNG and SVG, and `index.html`, one self-contained page (PNGs embedded
as data URIs; rendered from analysis/reports/templates/run.html.j2, every value escaped there) with the
run's identity and verdict, a summary table formatted for people (with the summary's availability
headline when it has the section), each figure under its title with its one-line
caption, and for each figure the run could not draw the reason (a metric this run did not
record is said to be "not recorded in this run", never drawn empty). Files are written under
temporary names and renamed, the page last, and recorded in the report folder's own manifest
(sim/files.py `OwnedDir`): a file there that rmqsim did not write is never overwritten (the
report refuses and names it), and a report that fails half-way (a full disk) removes what it
wrote. The run's files are read only as analysis/reports/run_data.py allows.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import matplotlib.pyplot as plt

from analysis.reports import availability_figures, fmt, pop_figures, run_figures, timeline_figures, txn_figures
from analysis.reports.html import render
from analysis.reports.run_data import RunData, RunDataError, load_run
from analysis.sweeps.repro_card import CARD
from sim.files import REPORT_TOOL, OwnedDir, lstat_kind
from sim.files import report_dir as claim_report_dir

__all__ = ["FIGURES", "RunDataError", "build_run_report"]


def _after(stem: str, figures: tuple, inserted: tuple) -> tuple:
    """`figures` with `inserted` right after the figure `stem`."""
    at = next(i for i, f in enumerate(figures) if f[0] == stem) + 1
    return figures[:at] + inserted + figures[at:]


# (stem, title, function, why not drawn), in page order: the availability figure after the rates, the POP
# panel after the duplicates
FIGURES = (_after("duplicates_over_time", _after("rates_over_time", run_figures.FIGURES, availability_figures.FIGURES),
                  pop_figures.FIGURES)
           + timeline_figures.FIGURES + txn_figures.FIGURES)


def report_names() -> list[str]:
    """Every file a run report may write."""
    return ["index.html"] + [f"{stem}.{ext}" for stem, *_ in FIGURES for ext in ("png", "svg")]


def build_run_report(run_dir: Path, report_dir: Path | None = None) -> Path:
    data = load_run(run_dir)
    folder = claim_report_dir(run_dir / "report", report_dir)
    owned = OwnedDir(folder, REPORT_TOOL, names=report_names())
    try:
        drawn, missing = [], []
        for stem, title, draw, why in FIGURES:
            made = draw(data)
            if made is None:
                missing.append((title, why))
                continue
            fig, caption = made
            for ext in ("png", "svg"):
                with owned.path(f"{stem}.{ext}") as tmp:
                    fig.savefig(tmp, format=ext, dpi=110)
            plt.close(fig)
            png = base64.b64encode((folder / f"{stem}.png").read_bytes()).decode("ascii")
            drawn.append((stem, title, caption, png))
        page = owned.write_text("index.html", _html(data, drawn, missing, folder))
        owned.commit()
    except BaseException:
        owned.abandon()
        raise
    return page


def _rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    lat = s.get("latency_ms", {})
    rows = [("verdict", s["verdict"]), ("sent_ok (SEND_OK)", fmt.count(s["sent_ok"])),
            ("send failed", fmt.count(s["send_failed"])), ("consumed (ok)", fmt.count(s["consumed"])),
            ("lost", fmt.count(s["lost"])), ("pending retry", fmt.count(s["pending_retry"])),
            ("in DLQ", fmt.count(s["dlq"])), ("duplicates", fmt.count(s["duplicates"])),
            ("order violations", "n/a (no orderly group)" if s.get("order_violations") is None
             else fmt.count(s["order_violations"])),
            ("warm-up", fmt.duration_ms(s.get("warmup_ms", 0)))]
    rows += [(f"end-to-end latency {k}", fmt.duration_ms(v)) for k, v in lat.items()]
    rows += [(f"send latency (RT) {k}", fmt.duration_ms(v)) for k, v in (s.get("send_latency_ms") or {}).items()]
    rows += [(f"duplicates: {k}", fmt.count(v)) for k, v in s.get("duplicate_causes", {}).items()]
    return rows + _availability_rows(s.get("availability")) + _txn_rows(s.get("txn"))


def _availability_rows(av: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The availability section's headline (analysis/checkers/availability.py); none without it."""
    if not isinstance(av, dict):
        return []

    def longest(key: str) -> str:
        value = (av.get(key) or {}).get("max")
        return fmt.NA if value is None else fmt.duration_ms(value * 1000)
    rows = []
    if "sends" in av and "acked" in av:
        rows.append(("sends acknowledged (SEND_OK of sends with an outcome)",
                     f"{fmt.count(av['acked'])} of {fmt.count(av['sends'])} ({fmt.rate(av.get('acked_ratio'))})"))
    rows += [("write outage, longest (as producers saw it)", longest("write_outage_s")),
             ("read outage, longest", longest("read_outage_s")), ("recovery, longest", longest("recovery_s"))]
    if av.get("not_recovered"):
        rows.append(("never recovered", ", ".join(av["not_recovered"])))
    return rows


def _txn_rows(txn: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The transaction checker's headline figures (analysis/checkers/txn_checker.py); none without transactions."""
    if not txn:
        return []
    rows = [("transactions (half messages stored)", fmt.count(txn["transactions"]))]
    rows += [(f"transactions: {k.replace('_', ' ')}", fmt.count(txn[k]))
             for k in ("committed_lost", "rolled_back_visible", "pending", "discarded", "checks")]
    return rows + [(f"transactions: half → resolution {k}", fmt.duration_ms(txn[f"resolution_ms_{k}"]))
                   for k in ("p50", "p99")]


def _card_link(data: RunData, folder: Path) -> dict[str, str] | None:
    """The link to the run's repro card (an invalid or unknown run's `repro.md`), relative to the report."""
    card = data.directory / CARD
    if lstat_kind(card) != "file":
        return None
    return {"href": quote(os.path.relpath(card.resolve(), folder.resolve())), "name": CARD}


def _html(data: RunData, drawn: list[tuple[str, str, str, str]], missing: list[tuple[str, str]],
          folder: Path) -> str:
    """The page (analysis/reports/templates/run.html.j2), every value passed as plain text."""
    s = data.summary
    return render("run.html.j2", name=str(s["scenario"]), seed=s["seed"], directory=str(data.directory),
                  scenario_digest=s["scenario_sha256"][:16], trace_digest=s["trace_sha256"][:16],
                  simulated=fmt.duration_ms(s["sim_time_ms"]), records=fmt.count(s["records"]),
                  verdict=s["verdict"], rows=_rows(s), failures=s.get("failures", []), card=_card_link(data, folder),
                  windows=[{"kind": w["kind"], "target": str(w["target"]), "start": fmt.duration_ms(w["start_ms"]),
                            "end": fmt.duration_ms(w["end_ms"])} for w in data.windows],
                  drawn=[{"stem": stem, "title": title, "caption": caption, "png": png}
                         for stem, title, caption, png in drawn],
                  missing=missing)
