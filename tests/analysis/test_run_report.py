"""The per-run report: `rmqsim run --report` and `rmqsim report RUN_DIR` write every figure (PNG and
SVG) and a page that renders in headless Chromium with each title and caption; a metric the run
did not record is said to be missing, never drawn empty; fault labels never overlap."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import run_figures, txn_figures
from analysis.run_report import FIGURES
from tests.analysis.test_report import _assert_figures_visible, _chromium
from tests.conftest import ROOT

SCENARIO = """
name: report_run
duration_ms: 14s
settle_ms: 4s
cluster:
  brokers: [{name: broker-a}, {name: broker-b}]
  topics: [{name: orders, queues: 4}]
producers: [{name: p, count: 2, topic: orders, rate_per_s: 150}]
consumers: [{name: c, count: 2, group: billing, topic: orders}]
faults:
  - {at_ms: 6s, kind: disk_slow, node: broker-b, factor: 40, duration_ms: 4s}
  - {at_ms: 6500ms, kind: pause, node: c-1, duration_ms: 2s}
  - {at_ms: 7s, kind: process_crash, node: c-2}
  - {at_ms: 9s, kind: restart, node: c-2}
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, cwd=str(cwd),
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run_report")
    (folder / "s.yaml").write_text(SCENARIO)
    done = cli("run", "s.yaml", "--report", "--out", "out", cwd=folder)
    assert done.returncode in (0, 1), done.stderr  # the report is written whatever the verdict
    assert f"report: {folder / 'out' / 'report' / 'index.html'}" in done.stdout or "report: out/report/index.html" in done.stdout
    return folder / "out"


@pytest.fixture(scope="module")
def reported_txn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A transactional run (scenarios/txn_producers_down.yaml): the transaction panel is drawn."""
    folder = tmp_path_factory.mktemp("run_report_txn")
    done = cli("run", str(ROOT / "scenarios" / "txn_producers_down.yaml"), "--report", "--out", "out", cwd=folder)
    assert done.returncode in (0, 1), done.stderr
    return folder / "out"


def _expected(run: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(stem, title) of the figures this run can draw, and the titles it cannot."""
    import json

    summary = json.loads((run / "summary.json").read_text())
    drawn = [(stem, title) for stem, title, _f, _why in FIGURES
             if not (stem == "losses_by_cause" and "lost_by_cause" not in summary)
             and not (any(f[0] == stem for f in txn_figures.FIGURES) and summary.get("txn") is None)
             and not (stem == "lock_events" and summary.get("order_violations") is None)]
    missing = [title for stem, title, _f, _why in FIGURES if (stem, title) not in drawn]
    return drawn, missing


def _assert_renders(run: Path, captions: tuple[str, ...], tmp_path: Path) -> str:
    """Headless Chromium loads every figure of the run's report, with each title and `captions`;
    each figure the run cannot draw is listed with its reason. Returns the page's DOM."""
    drawn, missing = _expected(run)
    report = run / "report"
    for stem, _title in drawn:
        assert (report / f"{stem}.png").stat().st_size > 5_000, stem
        assert (report / f"{stem}.svg").read_text().lstrip().startswith(("<?xml", "<svg")), stem
    browser = _chromium()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-dev-shm-usage"]
    env = {**os.environ, "HOME": str(tmp_path)}
    page = (report / "index.html").as_uri()
    dom = subprocess.run([browser, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120,
                         env=env).stdout
    assert f'data-figures-loaded="{len(drawn)}/{len(drawn)}"' in dom
    for stem, title in drawn:
        assert f"<h2>{title}</h2>" in dom, title
        caption = re.search(rf'<figure id="{stem}">.*?<figcaption>(.*?)<span', dom, re.S)
        assert caption and "?" in caption.group(1), stem  # every figure says what question it answers
    for caption in captions:
        assert html.escape(caption, quote=False) in dom, caption
    why_of = {title: why for _stem, title, _f, why in FIGURES}
    for title in missing:  # a metric this run has not recorded: said why, not drawn
        assert f"<b>{title}</b>: {html.escape(why_of[title])}" in dom, title
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *flags, "--window-size=1400,5600", f"--screenshot={shot}", page],
                   capture_output=True, timeout=120, env=env, check=True)
    _assert_figures_visible(shot)
    return dom


def test_run_report_renders_in_headless_chromium(reported: Path, tmp_path: Path) -> None:
    drawn, missing = _expected(reported)
    assert len(drawn) >= 6 and "Check-backs per second" in missing  # no transactions: the panel is listed
    dom = _assert_renders(reported, (
        "How slow are sends and deliveries, up to the 1-in-10,000 message?",
        "Which broker do producers favour, and do they move away from a slow or failed one?",
        "Does each group keep up, and how long does it take to drain after a fault or rebalance?",
        "When did duplicates happen, and what caused them?"), tmp_path)
    import json

    verdict = json.loads((reported / "summary.json").read_text())["verdict"]
    assert "disk_slow broker-b" in dom and f"verdict {verdict}" in dom
    assert "<th>send latency (RT) p99</th>" in dom and "transactions:" not in dom


def test_run_report_transaction_panel_renders(reported_txn: Path, tmp_path: Path) -> None:
    drawn, _missing = _expected(reported_txn)
    assert {stem for stem, _f, _d, _w in txn_figures.FIGURES} <= {stem for stem, _t in drawn}
    dom = _assert_renders(reported_txn, (
        "Did each transactional message become visible if and only if its local transaction committed?",
        "How many transactions hang undecided over time, and how many is the broker already checking back?",
        "When did the broker check back on undecided transactions, was there a storm, and what did producers answer?",
        "How and when were transactions resolved: committed or rolled back by the producer, by a check-back, "
        "or discarded — and how many stayed unknown?",
        "How many check-backs did a transaction need before it was resolved?",
        "How long does a transaction stay undecided, from its half message to commit, rollback or discard?"),
        tmp_path)
    import json

    txn = json.loads((reported_txn / "summary.json").read_text())["txn"]
    assert f"<th>transactions: discarded</th><td>{txn['discarded']:,}</td>" in dom and txn["discarded"] > 0


def test_report_of_a_finished_run_directory(reported: Path, tmp_path: Path) -> None:
    done = cli("report", str(reported), "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    drawn, _missing = _expected(reported)
    assert sorted(p.name for p in (tmp_path / "again").glob("*.svg")) == sorted(f"{s}.svg" for s, _t in drawn)


def test_report_of_a_run_without_trace_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("{}")
    done = cli("report", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and "has no trace: rerun with --trace" in done.stderr
    assert "Traceback" not in done.stderr


def test_fault_labels_do_not_overlap() -> None:
    """Windows starting close together get their labels in separate rows."""
    from analysis.figures import plt
    from analysis.run_data import RunData

    windows = [{"kind": k, "target": f"broker-{i}", "start_ms": 5_000 + 300 * i, "end_ms": 9_000 + 100 * i}
               for i, k in enumerate(("disk_slow", "pause", "process_crash", "partition", "link_latency"))]
    data = RunData(Path("."), {"sim_time_ms": 30_000, "warmup_ms": 2_000}, {}, windows=windows)
    fig, ax = plt.subplots(figsize=(11, 4))
    run_figures.fault_bands(ax, data)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert len(boxes) == 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    plt.close(fig)


def test_lock_events_figure_of_an_orderly_run(tmp_path: Path) -> None:
    """An orderly run draws the broker lock events: grants per broker, and after broker-a's
    restart its locks granted anew; a run without orderly groups has none (said missing above)."""
    from analysis import run_data

    done = cli("run", str(ROOT / "scenarios" / "orderly_broker_failure.yaml"), "--trace", "--out", "out",
               "--set", "duration_ms=45s", "--set", "settle_ms=20s", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    run_dir = next(p.parent for p in (tmp_path / "out").rglob("summary.json"))
    data = run_data.load_run(run_dir)
    events = run_data.lock_events(data)
    assert {"broker-a: granted (new)", "broker-b: granted (new)", "broker-b: renewed"} <= set(events)
    assert events["broker-a: granted (new)"][:3].sum() > 0  # the start-up locks
    drawn = run_figures.lock_events(data)
    assert drawn is not None and "60 s expiry" in drawn[1]
