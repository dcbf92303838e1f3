"""The Python API as a notebook uses it: a short repr, `result.frame(kind)` with typed columns,
explicit keyword arguments, the progress line; and docs/example.ipynb executed end to end."""

from __future__ import annotations

import inspect
import io

import pytest

import sim
from analysis.frames import FrameError
from sim.progress import ProgressLine, format_line
from tests.conftest import ROOT

SHORT = ["duration_ms=6s", "settle_ms=2s", "producers[0].rate_per_s=100"]
BASELINE = str(ROOT / "scenarios" / "baseline.yaml")


@pytest.fixture(scope="module")
def kept():
    return sim.run(BASELINE, overrides=SHORT, keep_records=True)


def test_repr_is_one_short_line(kept) -> None:
    text = repr(kept)
    assert "\n" not in text and len(text) < 200
    assert text.startswith("<RunResult baseline seed=1 verdict=valid sent_ok=") and "p99=" in text


def test_frame_has_typed_columns_from_records_or_trace(kept, tmp_path) -> None:
    frame = kept.frame("producer.sent")
    assert list(frame.columns[:3]) == ["t_us", "node", "msg_id"]
    assert str(frame.dtypes["t_us"]) == "Int64" and str(frame.dtypes["broker"]) == "string"
    assert len(frame) == kept.summary["sent_attempts"] - kept.summary["send_failed"]
    traced = sim.run(BASELINE, overrides=SHORT, trace_dir=tmp_path / "trace")
    assert traced.frame("producer.sent").equals(frame)
    assert str(kept.frame("consumer.consumed").dtypes["ok"]) == "boolean"


def test_frame_says_what_is_missing() -> None:
    bare = sim.run(BASELINE, overrides=SHORT)
    with pytest.raises(FrameError, match="keep_records=True or trace_dir"):
        bare.frame("producer.sent")
    with pytest.raises(FrameError, match="unknown record kind 'producer.snet'"):
        bare.frame("producer.snet")


def test_run_takes_documented_keywords_not_kwargs() -> None:
    params = inspect.signature(sim.run).parameters
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    for name in ("overrides", "details", "keep_records", "trace_dir", "max_events", "max_wall_s", "progress"):
        assert name in params and f"{name}" in sim.run.__doc__, name


def test_progress_line_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    sim.run(BASELINE, overrides=SHORT, progress=ProgressLine(quiet))
    assert quiet.getvalue() == ""
    seen: list[dict] = []
    sim.run(BASELINE, overrides=SHORT, progress=seen.append)
    assert seen and seen[-1]["sim_us"] == seen[-1]["end_us"]
    assert [p["sim_us"] for p in seen] == sorted(p["sim_us"] for p in seen)
    assert all(p["sent_ok"] >= 0 and p["send_failed"] >= 0 for p in seen)  # counts as records are flushed
    line = format_line({"sim_us": 12_000_000, "end_us": 80_000_000, "events": 3_100_000, "wall_s": 10.0,
                        "sent_ok": 24_000, "send_failed": 3})
    assert line == ("sim 12.0/80.0 s (15%) · 24,000 sent, send TPS 2,000, send failed 3 · 310,000 events/s · "
                    "ETA 0:56")
    forced = io.StringIO()
    shown = ProgressLine(forced, force=True)
    shown(seen[-1])
    shown.close()
    assert forced.getvalue().startswith("\rsim ") and forced.getvalue().endswith("\n")


def test_example_notebook_runs_end_to_end() -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "docs" / "example.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "docs")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    texts = " ".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    assert "<RunResult baseline seed=1 verdict=valid" in texts
    assert any("image/png" in o.get("data", {}) for o in outputs), "the sweep's plot was drawn"
