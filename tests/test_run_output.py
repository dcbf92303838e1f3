"""A run that explains itself: warnings for silently useless scenarios, unit strings in
distributions, the warm-up, fresh output directories, the reproduce line, --version, a closed pipe."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rmqsim.scenario import spec as scenario
from rmqsim.scenario.useless_parts import scenario_warnings
from sim.config import ConfigError
from tests.conftest import ROOT

SHORT = ["--set", "duration_ms=6s", "--set", "settle_ms=2s", "--set", "producers[0].rate_per_s=200"]
BASELINE = str(ROOT / "scenarios" / "baseline.yaml")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], capture_output=True, text=True, cwd=str(cwd),
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


# --- warnings -----------------------------------------------------------------------------------

def _warnings(text: str) -> list[str]:
    import yaml

    return scenario_warnings(scenario.from_data(yaml.safe_load(text)))


def test_every_bundled_scenario_is_free_of_warnings() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        assert scenario_warnings(scenario.load(path)) == [], path.name


@pytest.mark.parametrize(("text", "starts"), [
    ("duration_ms: 10s\nproducers: [{start_ms: 12s}]\nconsumers: [{}]\n", "producers[0].start_ms: 'producer' starts"),
    ("duration_ms: 10s\nsettle_ms: 5s\nproducers: [{}]\nconsumers: [{start_ms: 15s}]\n",
     "consumers[0].start_ms: 'consumer' starts at 15 s"),
    ("duration_ms: 10s\nproducers: [{}]\nconsumers: [{}]\nfaults: [{at_ms: 10s, kind: process_crash, node: broker-a}]\n",
     "faults[0].at_ms: process_crash at 10 s is not before the end"),
    ("duration_ms: 10s\nproducers: [{}]\nconsumers: [{}]\nfaults: [{at_ms: 6s, kind: restart, node: broker-a}]\n",
     "faults[0]: restart of 'broker-a' at 6 s, which is up"),
    ("duration_ms: 4s\nproducers: [{}]\nconsumers: [{}]\n", "warmup_ms: the warm-up (5 s)"),
])
def test_silently_useless_parts_are_warned(text: str, starts: str) -> None:
    found = _warnings(text)
    assert len(found) == 1 and found[0].startswith(starts), found


def test_restart_after_a_crash_is_not_warned() -> None:
    text = ("duration_ms: 20s\nproducers: [{}]\nconsumers: [{}]\nfaults:\n"
            "  - {at_ms: 9s, kind: restart, node: broker-a}\n"  # out of file order: sorted by time
            "  - {at_ms: 6s, kind: power_loss, node: broker-a}\n"
            "  - {at_ms: 12s, kind: process_crash, node: broker-a, duration_ms: 1s}\n"
            "  - {at_ms: 14s, kind: restart, node: broker-a}\n")  # back up at 13 s on its own
    assert [w.split(":")[0] for w in _warnings(text)] == ["faults[3]"]


def test_warnings_are_printed_and_the_exit_code_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("duration_ms: 3s\nsettle_ms: 1s\nproducers: [{start_ms: 4s}]\nconsumers: [{}]\n")
    done = cli("validate", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"warning: {path}: producers[0].start_ms" in done.stderr and "Traceback" not in done.stderr


# --- units in distributions ---------------------------------------------------------------------

def test_distributions_take_duration_units() -> None:
    sc = scenario.from_data({"consumers": [{"consume_time_ms": "2ms"}],
                             "network": {"latency_ms": {"dist": "lognormal", "p50": "250us", "p99": "1.5ms"}},
                             "faults": [{"at_ms": 1, "kind": "link_latency", "src": "broker-a", "dst": "namesrv",
                                         "extra_latency_ms": {"dist": "empirical", "values": ["1s", 3]}}]})
    assert sc.consumers[0].consume_time_ms.value == 2.0
    assert (sc.network.latency_ms.p50, sc.network.latency_ms.p99) == (0.25, 1.5)
    assert sc.faults[0].extra_latency_ms.values == [1000.0, 3.0]


@pytest.mark.parametrize(("data", "problem"), [
    ({"consumers": [{"consume_time_ms": "2 kb"}]},
     "consumers[0].consume_time_ms: unknown unit 'kb' in '2 kb' (use one of us, ms, s, min, h, d)"),
    ({"network": {"latency_ms": {"dist": "exponential", "mean": "3 sec"}}},
     "network.latency_ms.mean: unknown unit 'sec'"),
    ({"producers": [{"message_bytes": "1ms"}]},
     "producers[0].message_bytes: 'ms' is a unit of duration, but this setting is a size in bytes"),
])
def test_a_wrong_unit_is_one_clear_error(data: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        scenario.from_data(data)
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith(problem), err.value.problems


# --- warm-up ------------------------------------------------------------------------------------

def test_the_default_warm_up_keeps_client_start_up_out_of_latency() -> None:
    """Default clients start at 1 s; until the first rebalance (about 1.5 s later) messages wait.
    With `warmup_ms: 0` that transient is the p99; with the default it is not. Counts are the same."""
    import rmqsim

    base = {"duration_ms": "10s", "settle_ms": "3s", "producers": [{"rate_per_s": 200}], "consumers": [{}]}
    raw = rmqsim.run(scenario.from_data({**base, "warmup_ms": 0})).summary
    warm = rmqsim.run(scenario.from_data(base)).summary
    assert raw["latency_ms"]["p99"] > 200 and warm["latency_ms"]["p99"] < 50
    assert warm["warmup_ms"] == 5000 and raw["trace_sha256"] == warm["trace_sha256"]  # analysis only
    assert (warm["sent_ok"], warm["consumed"], warm["lost"]) == (raw["sent_ok"], raw["consumed"], raw["lost"])


SLOW_IN_WARMUP = {"duration_ms": "12s", "settle_ms": "3s",
                  "cluster": {"brokers": [{"name": "broker-a"},
                                          {"name": "broker-b", "store": {"flush_disk_type": "SYNC_FLUSH"}}]},
                  "producers": [{"rate_per_s": 200}], "consumers": [{}],
                  "faults": [{"at_ms": "2s", "kind": "disk_slow", "node": "broker-b", "factor": 50,
                              "duration_ms": "3s"}]}


@pytest.mark.parametrize("seed", [1, 2])
def test_send_latency_leaves_out_the_warm_up(seed: int, tmp_path: Path) -> None:
    """Broker-b is slow from 2 s to 5 s. With a 1 s warm-up the slow sends are in `send_latency_ms`
    (and in `send_latency_ms_in_faults`); with a 6 s warm-up they are not — the summary's send
    latency is exactly that of the sends born after the warm-up, and the report's send-latency
    figures (spectrum, p99 per broker over time) hold no send born before it. Counts and the digest
    are the same."""
    import rmqsim
    from analysis.checkers.checks import percentiles_ms
    from analysis.reports import run_data as rd
    from analysis.reports import run_figures

    short = rmqsim.run(scenario.from_data({**SLOW_IN_WARMUP, "warmup_ms": "1s"}), seed=seed).summary
    run = rmqsim.run(scenario.from_data({**SLOW_IN_WARMUP, "warmup_ms": "6s"}), seed=seed, keep_records=True,
                  trace_dir=tmp_path / "trace")
    long = run.summary
    assert long["trace_sha256"] == short["trace_sha256"] and long["sends"] == short["sends"]
    assert (long["lost"], long["duplicates"]) == (short["lost"], short["duplicates"])
    sent = [r for r in run.records if r[2] == "producer.sent" and r[8] != "ONEWAY"]

    def rts_after(warmup_us: int) -> list[int]:
        return [r[0] - r[10] for r in sent if r[10] >= warmup_us]

    assert long["send_latency_ms"] == percentiles_ms(rts_after(6_000_000))
    assert short["send_latency_ms"] == percentiles_ms(rts_after(1_000_000))
    assert long["send_latency_ms"]["max"] * 5 < short["send_latency_ms"]["max"]  # the slow sends are out
    assert short["send_latency_ms_in_faults"]["p99"] > 5 * long["send_latency_ms"]["p99"]
    assert set(long["send_latency_ms_in_faults"].values()) == {None}  # the whole fault was in the warm-up
    (tmp_path / "summary.json").write_text(json.dumps(long))
    data = rd.load_run(tmp_path)
    assert len(rd.publish_latency_ms(data)) == len(rts_after(6_000_000)) < len(sent)
    fig, _caption = run_figures.latency_over_time(data)
    first_s = min(min(x for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True) if y == y)  # NaN: a gap
                  for line in fig.axes[0].get_lines())
    assert 6 <= first_s < 7  # a line point is the middle of a second of send time
    run_figures.plt.close(fig)


# --- output directories, reproduce line, version, closed pipe -----------------------------------

def test_runs_without_out_get_fresh_directories_and_latest_links(tmp_path: Path) -> None:
    first = cli("run", BASELINE, *SHORT, cwd=tmp_path)
    second = cli("run", BASELINE, *SHORT, "--trace", cwd=tmp_path)
    assert first.returncode == second.returncode == 0, second.stderr
    dirs = sorted(p for p in (tmp_path / "runs" / "baseline").iterdir() if not p.is_symlink())
    assert len(dirs) == 2 and all(p.name.endswith(("-seed-1", "-seed-1-2")) for p in dirs)
    newest = (tmp_path / "runs" / "baseline" / "latest").resolve()
    assert newest == (tmp_path / "runs" / "latest").resolve() and (newest / "trace").is_dir()
    older = [p for p in dirs if p.resolve() != newest][0]
    assert (older / "summary.json").is_file() and not (older / "trace").exists()  # never mixed


def test_out_holding_a_run_is_refused_or_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("run", BASELINE, *SHORT, "--trace", "--out", str(out), cwd=tmp_path).returncode == 0
    (out / "notes.txt").write_text("mine")
    again = cli("run", BASELINE, *SHORT, "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2 and "already holds a run (summary.json" in again.stderr
    assert "Traceback" not in again.stderr and again.stdout == ""
    replaced = cli("run", BASELINE, *SHORT, "--seed", "2", "--out", str(out), "--replace", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert not (out / "trace").exists() and (out / "notes.txt").read_text() == "mine"  # only run files go
    assert json.loads((out / "summary.json").read_text())["seed"] == 2


def test_reproduce_line_is_shell_quoted(tmp_path: Path) -> None:
    done = cli("run", BASELINE, *SHORT, "--set", "expect={lost: 0, duplicates: {max: 10}}", "--out", "o", cwd=tmp_path)
    line = next(x for x in done.stdout.splitlines() if x.startswith("reproduce: "))[len("reproduce: "):]
    words = shlex.split(line)
    assert words[:5] == ["rmqsim", "run", BASELINE, "--seed", "1"]
    assert words[-1] == "expect={lost: 0, duplicates: {max: 10}}" and words.count("--set") == 4


def test_version_prints_the_simulator_digest(tmp_path: Path) -> None:
    from analysis.sweeps.sweep import simulator_sha256

    done = cli("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith(f"simulator {simulator_sha256()}")
    assert done.stdout.startswith("rmqsim ")


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # a fixed 2 s settle ends unquiet (a warning on stderr); `auto` settles, so stderr stays empty
    proc = subprocess.Popen([sys.executable, "-m", "rmqsim.cli", "run", BASELINE, *SHORT, "--set", "settle_ms=auto",
                             "--out", "o"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path),
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    proc.stdout.close()  # `| head` that has read enough
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and err == ""


@pytest.mark.parametrize("trace", [False, True])
def test_only_a_traced_run_loads_the_parquet_library(trace: bool, tmp_path: Path) -> None:
    """pyarrow holds ~50 MB resident once imported: a run without `--trace` must not pay it
    (the 10-minute baseline's peak RSS budget is 300 MB)."""
    args = ["run", BASELINE, *SHORT, "--out", "o", *(["--trace"] if trace else [])]
    code = ("import sys, rmqsim.cli\n"
            f"code = rmqsim.cli.main({args!r})\n"
            "print(code, 'pyarrow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.stdout.splitlines()[-1] == f"0 {trace}", done.stderr
