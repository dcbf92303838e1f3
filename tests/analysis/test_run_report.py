"""The per-run report: `rmqsim run --report` and `rmqsim report RUN_DIR` write every figure (PNG and
SVG) and a page that renders in headless Chromium with each title and caption; a metric the run
did not record is said to be missing, never drawn empty; fault labels never overlap. The cluster
timeline (queue ownership, offsets, failed sends) of a crash story renders, and an outage is a gap
in every line drawn through time, never a line through it."""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from analysis.reports import run_figures, timeline_figures, txn_figures
from analysis.reports.run_report import FIGURES
from tests.analysis.test_report import _assert_figures_visible, _chromium
from tests.conftest import ROOT, cli_in_process

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


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A traced run of SCENARIO, then its report by `rmqsim report RUN_DIR --out` into a folder of its
    own (`again`, beside the run): the report of a finished run directory, the page the tests render.
    `rmqsim run --report` writes crash_story's and reported_txn's."""
    folder = tmp_path_factory.mktemp("run_report")
    (folder / "s.yaml").write_text(SCENARIO)
    done = cli_in_process("run", str(folder / "s.yaml"), "--trace", "--out", str(folder / "out"))
    assert done.returncode in (0, 1), done.stderr  # valid or not: reported either way
    assert not (folder / "out" / "report").exists()  # drawn only by `rmqsim report` below
    again = cli_in_process("report", str(folder / "out"), "--out", str(folder / "again"))
    assert again.returncode == 0, again.stderr
    assert f"report: {folder / 'again' / 'index.html'}" in again.stdout
    return folder / "out"


def report_of(run: Path) -> Path:
    """The folder holding `run`'s report: `rmqsim run --report`'s, else `reported`'s own folder."""
    return run / "report" if (run / "report").is_dir() else run.parent / "again"


@pytest.fixture(scope="module")
def reported_txn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A transactional run (scenarios/txn_producers_down.yaml): the transaction panel is drawn."""
    folder = tmp_path_factory.mktemp("run_report_txn")
    done = cli_in_process("run", str(ROOT / "scenarios" / "txn_producers_down.yaml"), "--report",
                          "--out", str(folder / "out"))
    assert done.returncode in (0, 1), done.stderr  # the report is written whatever the verdict
    assert f"report: {folder / 'out' / 'report' / 'index.html'}" in done.stdout
    return folder / "out"


def _expected(run: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(stem, title) of the figures this run can draw, and the titles it cannot."""
    import json

    summary = json.loads((run / "summary.json").read_text())
    drawn = [(stem, title) for stem, title, _f, _why in FIGURES
             if not (stem == "losses_by_cause" and "lost_by_cause" not in summary)
             and not (any(f[0] == stem for f in txn_figures.FIGURES) and summary.get("txn") is None)
             and not (stem == "lock_events" and summary.get("order_violations") is None)
             and not (stem == "send_failures" and not summary["send_failed"])
             and not (stem == "pop" and not _pop(run))]
    missing = [title for stem, title, _f, _why in FIGURES if (stem, title) not in drawn]
    return drawn, missing


def _pop(run: Path) -> bool:
    """The run has a POP consumer group (a consumer entry with `pop:`): the POP panel is drawn."""
    import json

    consumers = json.loads((run / "scenario.resolved.json").read_text()).get("consumers", [])
    return any(isinstance(c.get("pop"), dict) for c in consumers)


def _assert_renders(run: Path, captions: tuple[str, ...], tmp_path: Path) -> str:
    """Headless Chromium loads every figure of the run's report, with each title and `captions`;
    each figure the run cannot draw is listed with its reason. Returns the page's DOM."""
    drawn, missing = _expected(run)
    report = report_of(run)
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


def test_report_of_a_finished_run_directory(reported: Path) -> None:
    """`rmqsim report RUN_DIR --out DIR` of a traced run (fixture `reported`: exit 0) draws every
    figure the run can draw, in DIR."""
    drawn, _missing = _expected(reported)
    assert report_of(reported) == reported.parent / "again"
    assert sorted(p.name for p in report_of(reported).glob("*.svg")) == sorted(f"{s}.svg" for s, _t in drawn)


def test_report_of_a_run_without_trace_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("{}")
    done = cli_in_process("report", str(tmp_path / "run"))  # an exception let through fails here
    assert done.returncode == 2 and "has no trace: rerun with --trace" in done.stderr
    assert "Traceback" not in done.stderr


def test_fault_labels_do_not_overlap() -> None:
    """Windows starting close together get their labels in separate rows."""
    from analysis.reports.figures import plt
    from analysis.reports.run_data import RunData

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
    from analysis.reports import run_data

    done = cli_in_process("run", str(ROOT / "scenarios" / "orderly_broker_failure.yaml"), "--trace",
                          "--out", str(tmp_path / "out"), "--set", "duration_ms=45s", "--set", "settle_ms=20s")
    assert done.returncode in (0, 1), done.stderr
    run_dir = next(p.parent for p in (tmp_path / "out").rglob("summary.json"))
    data = run_data.load_run(run_dir)
    events = run_data.lock_events(data)
    assert {"broker-a: granted (new)", "broker-b: granted (new)", "broker-b: renewed"} <= set(events)
    assert events["broker-a: granted (new)"][:3].sum() > 0  # the start-up locks
    drawn = run_figures.lock_events(data)
    assert drawn is not None and "60 s expiry" in drawn[1]


# ---------------------------------------------------------------- the cluster timeline (issue 26)

# broker-a's process down from 6 s (back serving at 12 s, after its 2 s start-up); c-2 crashes at 8 s
# and restarts at 11 s. Orderly sends (a hash selector, no retry elsewhere) fail while broker-a is
# down; the expectation on duplicates makes the run invalid (a repro card, tests/analysis/test_repro_card.py).
CRASH_STORY = """
name: crash_story
duration_ms: 16s
settle_ms: 6s
warmup_ms: 2s
cluster:
  brokers: [{name: broker-a}, {name: broker-b}]
  topics: [{name: orders, queues: 4}]
producers: [{name: p, count: 2, topic: orders, rate_per_s: 150, start_ms: 2s, send_mode: ORDERLY, keys: 16}]
consumers: [{name: c, count: 3, group: billing, topic: orders}]
faults:
  - {at_ms: 6s, kind: process_crash, node: broker-a, duration_ms: 4s}
  - {at_ms: 8s, kind: process_crash, node: c-2}
  - {at_ms: 11s, kind: restart, node: c-2}
expect:
  duplicates: {max: 0}
"""
BROKER_A_DOWN = (6.0, 12.0)


@pytest.fixture(scope="module")
def crash_story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crash_story")
    (folder / "s.yaml").write_text(CRASH_STORY)
    done = cli_in_process("run", str(folder / "s.yaml"), "--report", "--out", str(folder / "out"))
    assert done.returncode == 1, done.stdout + done.stderr  # invalid: duplicates above the expectation
    assert f"report: {folder / 'out' / 'report' / 'index.html'}" in done.stdout  # written whatever the verdict
    return folder / "out"


def test_cluster_timeline_of_a_crash_story_renders(crash_story: Path, tmp_path: Path) -> None:
    """queue_ownership, offsets and send_failures (PNG and SVG) with their captions, in Chromium."""
    drawn, missing = _expected(crash_story)
    stems = {stem for stem, _title in drawn}
    assert {"queue_ownership", "offsets", "send_failures", "publish_latency_over_time"} <= stems, missing
    dom = _assert_renders(crash_story, (
        "Which consumer held which queue when, when did rebalances move them, and when were brokers down or "
        "dropped from the name server?",
        "Did each queue's owner keep up with what was stored, and how far behind was the broker's committed offset",
        "When did sends fail, why, and what did the sends that succeeded cost meanwhile?",
        "sends failed, in red"), tmp_path)
    assert "(queue_ownership.png · queue_ownership.svg)" in dom and "(offsets.png · offsets.svg)" in dom


def test_an_outage_is_a_gap_in_the_publish_latency(crash_story: Path) -> None:
    """broker-a's p99 is NaN (a break in the line) for every second it was down, drawn on both sides;
    the failed sends are drawn too (red bars adding up to the summary's send_failed)."""
    import json

    from analysis.reports import run_data, timeline_data

    data = run_data.load_run(crash_story)
    assert timeline_data.outages(data)["broker-a"] == [BROKER_A_DOWN]
    fig, caption = run_figures.latency_over_time(data)
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "p99, sends to broker-a")
    x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata(), float)
    start, end = BROKER_A_DOWN
    assert np.isnan(y[(x > start) & (x < end)]).all()
    assert np.isfinite(y[(x > 2) & (x < start)]).all() and np.isfinite(y[(x > end) & (x < 16)]).any()
    failed = json.loads((crash_story / "summary.json").read_text())["send_failed"]
    assert failed > 0 and f"{failed:,} sends failed" in caption
    assert _stairs_total(fig.axes[1]) == failed
    run_figures.plt.close(fig)
    fig, _caption = timeline_figures.send_failures(data)
    assert _stairs_total(fig.axes[1]) == failed  # stacked by reason
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "p99, sends to broker-a")
    assert np.isnan(np.asarray(line.get_ydata(), float)[(x > start) & (x < end)]).all()
    run_figures.plt.close(fig)


def _stairs_total(ax: object) -> float:
    """What the step bars of an axes add up to (each above its baseline: stacked steps)."""
    from matplotlib.patches import StepPatch

    total = 0.0
    for patch in ax.patches:
        if isinstance(patch, StepPatch):
            values, _edges, baseline = patch.get_data()
            total += float(np.sum(np.asarray(values) - (0 if baseline is None else np.asarray(baseline))))
    return total


def test_offsets_and_ownership_break_at_the_outage(crash_story: Path) -> None:
    """Each broker-a queue's max offset, committed and consumed offsets are NaN in every bin that
    overlaps broker-a's outage and drawn before and after it; c-2's queues end at its crash."""
    from analysis.reports import run_data, timeline_data

    data = run_data.load_run(crash_story)
    own = timeline_data.ownership(data)
    assert own is not None and own.consumers == ["c-1", "c-2", "c-3"] and len(own.queues) == 8
    c2 = [(q, h) for q in own.queues for h in own.held[q] if h[0] == "c-2"]
    assert c2 and all(h[2] == 8.0 or h[1] >= 11.0 for _q, h in c2)  # held until its crash, or after its restart
    off = timeline_data.queue_offsets(data, own)
    assert off is not None and off.committed is not None and off.bin_s == 1
    start, end = BROKER_A_DOWN
    down = (off.x > start) & (off.x - off.bin_s < end)
    for q in off.queues:
        series = [off.max_offset[q], off.committed[q], *off.consumed.get(q, {}).values()]
        if q.broker == "broker-a":
            assert all(np.isnan(s[down]).all() for s in series), q
            assert np.isfinite(off.max_offset[q][(off.x > 3) & (off.x <= start)]).all(), q
            assert np.isfinite(off.max_offset[q][off.x > end + 2]).all(), q
        else:
            assert np.isfinite(off.max_offset[q][off.x > 3]).all(), q
    fig, caption = timeline_figures.offsets(data)
    panel = next(ax for ax in fig.axes if ax.get_title() == "broker-a orders q0")
    drawn = next(ln for ln in panel.get_lines() if ln.get_label() == "max offset (stored)")
    assert np.isnan(np.asarray(drawn.get_ydata(), float)[down]).all()
    assert "a gap is an outage of the queue's broker" in caption
    timeline_figures.plt.close(fig)


def test_timeline_aggregates_many_queues(crash_story: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond a row (panel) per queue: queues held per consumer, stacked; a heatmap of each queue's
    backlog with the outage left blank (masked)."""
    from analysis.reports import run_data

    monkeypatch.setattr(timeline_figures, "MAX_QUEUE_ROWS", 4)
    monkeypatch.setattr(timeline_figures, "MAX_QUEUE_PANELS", 4)
    data = run_data.load_run(crash_story)
    fig, caption = timeline_figures.queue_ownership(data)
    assert "aggregated to the queues each consumer held" in caption
    assert any("stacked" in ax.get_title() for ax in fig.axes)
    timeline_figures.plt.close(fig)
    fig, caption = timeline_figures.offsets(data)
    assert "8 queues (too many for a panel each)" in caption
    image = fig.axes[0].get_images()[0].get_array()
    start, end = BROKER_A_DOWN
    columns = [i for i in range(image.shape[1]) if start + 1 <= i + 1 <= end]  # 1 s bins ending at i + 1
    assert np.ma.getmaskarray(image)[:4][:, columns].all()  # broker-a's four queues, rows 0-3
    timeline_figures.plt.close(fig)


def test_a_figure_without_its_data_is_not_drawn_or_says_what_is_missing(crash_story: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No offset commits in the trace (an older run): the offsets figure draws what it has and its
    caption says the committed offset is not drawn; no queue starts: no ownership figure at all."""
    from analysis.reports import run_data
    from models.records import BROKER_OFFSET_COMMITTED, CONSUMER_QUEUE_STARTED

    data = run_data.load_run(crash_story)
    read = data.table
    monkeypatch.setattr(data, "table", lambda kind, cols: None if kind == BROKER_OFFSET_COMMITTED else read(kind, cols))
    fig, caption = timeline_figures.offsets(data)
    assert "the broker's committed offset is not in this trace" in caption
    assert not any(ln.get_label() == "broker's committed offset" for ax in fig.axes for ln in ax.get_lines())
    timeline_figures.plt.close(fig)
    data = run_data.load_run(crash_story)  # figures share derived data per RunData: a fresh one
    read = data.table
    monkeypatch.setattr(data, "table", lambda kind, cols: None if kind == CONSUMER_QUEUE_STARTED else read(kind, cols))
    assert timeline_figures.queue_ownership(data) is None
