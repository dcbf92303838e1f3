"""The Python API as a notebook uses it: a short repr, `result.frame(kind)` with typed columns,
explicit keyword arguments, the progress line; and docs/example.ipynb executed end to end."""

from __future__ import annotations

import inspect
import io
import sys

import pytest

import rmqsim
from analysis.checkers.frames import FrameError
from rmqsim.progress import ProgressLine, format_line
from tests.conftest import ROOT

SHORT = ["duration_ms=6s", "settle_ms=2s", "producers[0].rate_per_s=100"]
BASELINE = str(ROOT / "scenarios" / "baseline.yaml")


@pytest.fixture(scope="module")
def kept():
    return rmqsim.run(BASELINE, overrides=SHORT, keep_records=True)


def test_repr_is_one_short_line(kept) -> None:
    text = repr(kept)
    assert "\n" not in text and len(text) < 200
    assert text.startswith("<RunResult baseline seed=1 verdict=valid sent_ok=") and "p99=" in text


def test_frame_has_typed_columns_from_records_or_trace(kept, tmp_path) -> None:
    frame = kept.frame("producer.sent")
    assert list(frame.columns[:3]) == ["t_us", "node", "msg_id"]
    assert str(frame.dtypes["t_us"]) == "Int64" and str(frame.dtypes["broker"]) == "string"
    assert len(frame) == kept.summary["sent_attempts"] - kept.summary["send_failed"]
    traced = rmqsim.run(BASELINE, overrides=SHORT, trace_dir=tmp_path / "trace")
    assert traced.frame("producer.sent").equals(frame)
    assert str(kept.frame("consumer.consumed").dtypes["ok"]) == "boolean"


def test_frame_says_what_is_missing() -> None:
    bare = rmqsim.run(BASELINE, overrides=SHORT)
    with pytest.raises(FrameError, match="keep_records=True or trace_dir"):
        bare.frame("producer.sent")
    with pytest.raises(FrameError, match="unknown record kind 'producer.snet'"):
        bare.frame("producer.snet")


def test_frame_without_pandas_names_the_extra(kept, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    with pytest.raises(FrameError, match=r"needs pandas: pip install -e '\.\[notebook\]'"):
        kept.frame("producer.sent")


def test_run_takes_documented_keywords_not_kwargs() -> None:
    params = inspect.signature(rmqsim.run).parameters
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    for name in ("overrides", "details", "keep_records", "trace_dir", "max_events", "max_wall_s", "progress"):
        assert name in params and f"{name}" in rmqsim.run.__doc__, name


def test_progress_line_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    rmqsim.run(BASELINE, overrides=SHORT, progress=ProgressLine(quiet))
    assert quiet.getvalue() == ""
    seen: list[dict] = []
    rmqsim.run(BASELINE, overrides=SHORT, progress=seen.append)
    assert seen and seen[-1]["sim_us"] == seen[-1]["end_us"]
    assert [p["sim_us"] for p in seen] == sorted(p["sim_us"] for p in seen)
    assert all(p["sent_ok"] >= 0 and p["send_failed"] >= 0 for p in seen)  # counts as records are flushed
    line = format_line({"sim_us": 12_000_000, "end_us": 80_000_000, "events": 3_100_000, "wall_s": 10.0,
                        "sent_ok": 24_000, "send_failed": 3, "send_rt_count": 24_001, "send_rt_sum_us": 60_002_500,
                        "send_rt_max_us": 41_250}, since=(4_001, 10_002_500))
    assert line == ("sim 12.0/80.0 s (15%) · 24,000 sent, send TPS 2,000, Max RT 41.2 ms, Average RT 2.50 ms, "
                    "send failed 3 · 310,000 events/s · ETA 0:56")
    assert "Max RT -, Average RT -," in format_line({"sim_us": 1, "end_us": 2, "events": 0, "wall_s": 0.1})
    forced = io.StringIO()
    shown = ProgressLine(forced, force=True)
    shown(seen[-1])
    shown.close()
    assert forced.getvalue().startswith("\rsim ") and forced.getvalue().endswith("\n")


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal, as stderr in a shell does."""

    def isatty(self) -> bool:
        return True


def test_progress_line_max_and_average_rt_match_the_send_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a (fake) terminal every line's Max RT and Average RT are those of the send records the
    checkers had counted when it was drawn: the maximum since the start, the mean since the
    previous line (RocketMQ's benchmark Producer fields)."""
    monkeypatch.setattr("rmqsim.progress.INTERVAL_S", 0.0)  # a line at every slice
    terminal = FakeTerminal()
    line = ProgressLine(terminal)
    assert line.enabled
    seen: list[dict] = []
    result = rmqsim.run(BASELINE, overrides=[*SHORT, "duration_ms=12s", "producers[0].rate_per_s=400"], keep_records=True,
                     progress=lambda p: (seen.append(dict(p)), line(p)))
    line.close()
    rts = [r[0] - r[10] for r in result.records if r[2] == "producer.sent" and r[8] != "ONEWAY"]
    lines = terminal.getvalue().rstrip("\n").split("\r")[1:]
    assert len(lines) == len(seen) >= 5
    previous = 0
    for p, text in zip(seen, lines, strict=True):
        counted = rts[:p["send_rt_count"]]  # the records flushed to the checkers so far, in order
        assert p["send_rt_sum_us"] == sum(counted)
        assert p["send_rt_max_us"] == max(counted, default=0)
        max_text = f"{max(counted) / 1000:,.1f} ms" if counted else "-"
        window = rts[previous:p["send_rt_count"]]
        avg_text = f"{sum(window) / len(window) / 1000:,.2f} ms" if window else "-"
        assert f"Max RT {max_text}, Average RT {avg_text}," in text, text
        previous = p["send_rt_count"]
    assert len({p["send_rt_count"] for p in seen if p["send_rt_count"]}) >= 2  # several windows checked
    assert max(rts) > 2 * (sum(rts) / len(rts))  # the two figures differ: a test that can fail


@pytest.mark.slow  # over 7 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
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
