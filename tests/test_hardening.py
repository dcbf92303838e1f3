"""Regression tests for issue 8's reproducers on scenarios and `rmqsim run` (sweeps:
tests/analysis/test_sweep_hardening.py). Each case is one thing the issue found: a traceback, a
value accepted then wrong at run time, a missing bound, a file written or read where it should
not be. In-process where the loader is the subject; through the CLI where the exit code, the
absence of a traceback or the files written are.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sim
from sim import scenario as scenario_mod
from sim.config import ConfigError
from sim.dist import Lognormal, Uniform
from sim.limits import DRAW_CAP, MAX_PROBLEMS
from tests.conftest import ROOT
from tests.fuzz.properties import assert_clean_rejection, assert_consistent_summary, assert_no_foreign_content

BASELINE = ROOT / "scenarios" / "baseline.yaml"


def problems_of(tmp_path: Path, content: str | bytes, overrides: list[str] | None = None) -> list[str]:
    """The problems `scenario.load` reports for `content` (asserting property 1 on the way)."""
    path = tmp_path / "s.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as info:
        scenario_mod.load(path, overrides)
    assert_clean_rejection(info.value, str(path))
    return info.value.problems


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def assert_exit_2(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


# ---------------------------------------------------------------- wrong-typed sections reaching cross-checks

@pytest.mark.parametrize("text, key_path", [
    ("consumers: 5\n", "consumers"),
    ("faults: 5\n", "faults"),
    ("cluster: {brokers: true}\n", "cluster.brokers"),
    ("consumers: [{name: c, group: [g]}]\n", "consumers[0].group"),
    ("faults: [{at_ms: 1, kind: process_crash, node: [x]}]\n", "faults[0].node"),
    ("cluster: {topics: [{brokers: 3}]}\n", "cluster.topics[0].brokers"),
    ("random_faults: [{kind: pause, nodes: 5, rate_per_hour: 1, down_ms: 1}]\n", "random_faults[0].nodes"),
    ("producers: [{name: p, topic: {t: 1}}]\n", "producers[0].topic"),
    ("network: {links: [{src: [a], dst: broker-a, latency_ms: 1}]}\n", "network.links[0].src"),
])
def test_wrong_types_are_reported_not_crashed_on(tmp_path, text, key_path):
    problems = problems_of(tmp_path, text)
    assert any(p.startswith(f"{key_path}:") for p in problems), problems


# ---------------------------------------------------------------- unreadable documents

@pytest.mark.parametrize("content, fragment", [
    (b"name: x\xff\xfe\n", "not UTF-8"),
    (bytes(range(256)), "not UTF-8"),
    (b"name: x\x00\n", "control characters"),
    (b"a: " + b"[" * 1000 + b"]" * 1000 + b"\n", "nested more than"),
    (b"seed: " + b"9" * 5000 + b"\n", "as int"),
    (b"settle_ms: !!float abc\n", "cannot read 'abc' as float"),
    (b"name: !!timestamp x\n", "!!timestamp is not allowed"),
    (b"name: !!python/object/apply:os.system ['true']\n", "is not allowed"),
    (b"producers: [{name: p}]\nseed: 2\nproducers: []\n", "duplicate key 'producers' (first at line 1)"),
])
def test_unreadable_documents_are_clean_errors(tmp_path, content, fragment):
    problems = problems_of(tmp_path, content)
    assert any(fragment in p for p in problems), problems


def test_traceback_free_through_the_cli(tmp_path):
    (tmp_path / "deep.yaml").write_bytes(b"a: " + b"[" * 1000 + b"]" * 1000 + b"\n")
    assert_exit_2(cli("validate", "deep.yaml", cwd=tmp_path), "nested more than")


@pytest.mark.parametrize("item, fragment", [
    ("producers[a].x=1", "cannot read the key path"),
    ("name=[unclosed", "not valid YAML"),
    ("no_equals_sign", "expected KEY.PATH=VALUE"),
    ("]]=1", "cannot read the key path"),
    ("producers[7].rate_per_s=1", "no element producers[7]"),
])
def test_bad_set_strings_are_clean_errors(tmp_path, item, fragment):
    problems = problems_of(tmp_path, BASELINE.read_text(), [item])
    assert any(p.startswith("--set ") and fragment in p for p in problems), problems


# ---------------------------------------------------------------- amplification

def test_aliased_partition_groups_do_not_amplify(tmp_path):
    """The issue's 3.6 KB file gave 8 million error lines: partition groups built from aliases
    of a list of unknown names, each name checked (and reported) one by one. Now each unknown
    name is reported once per fault, past a dozen only counted, and the alias expansion of a
    document is bounded."""
    def groups(n: int) -> str:
        names = ", ".join(f"ghost{i}" for i in range(n))
        return "[&g [" + names + "], " + ", ".join(["*g"] * n) + "]"

    started = time.monotonic()
    problems = problems_of(tmp_path, f"faults:\n  - {{at_ms: 1, kind: partition, groups: {groups(300)}}}\n")
    assert len(problems) == 13 and problems[-1] == "faults[0]: 288 more names are not nodes here", problems[-2:]
    problems = problems_of(tmp_path, f"faults:\n  - {{at_ms: 1, kind: partition, groups: {groups(500)}}}\n")
    assert any("values once aliases are expanded" in p for p in problems), problems[:3]
    assert time.monotonic() - started < 10
    result = cli("validate", str(tmp_path / "s.yaml"), cwd=tmp_path)
    assert_exit_2(result)
    assert len(result.stderr) < 5_000


def test_problem_list_is_capped(tmp_path):
    text = "producers:\n" + "".join(f"  - {{name: p{i}, topic: nowhere{i}}}\n" for i in range(200))
    problems = problems_of(tmp_path, text)
    assert len(problems) == 200
    rendered = ConfigError("x", problems).render().splitlines()
    assert len(rendered) == 1 + MAX_PROBLEMS + 1 and rendered[-1] == f"  ... and {200 - MAX_PROBLEMS} more problem(s)"


# ---------------------------------------------------------------- accepted, then wrong at run time

@pytest.mark.parametrize("text, key_path", [
    ("producers: [{name: p, rate_per_s: 1e-20}]\n", "producers[0].rate_per_s"),
    ("network: {latency_ms: {dist: uniform, low: 1e300, high: 1e300}}\n", "network.latency_ms.low"),
    ("duration_ms: 1e308\n", "duration_ms"),
    ("consumers: [{name: c, consume_time_ms: {dist: exponential, mean: 1e308}}]\n", "consumers[0].consume_time_ms.mean"),
    ("network: {latency_ms: {dist: lognormal, p50: 1e-300, p99: 1}}\n", "network.latency_ms"),
    ("duration_ms: 1e-300\n", "duration_ms"),
    ("cluster: {brokers: [{store: {message_delay_level: bogus}}]}\n", "cluster.brokers[0].store.message_delay_level"),
    ("cluster: {brokers: [{store: {message_delay_level: ''}}]}\n", "cluster.brokers[0].store.message_delay_level"),
    ("network: {links: [{src: nowhere, dst: broker-a, latency_ms: 1}]}\n", "network.links[0].src"),
    ("random_faults: [{kind: pause, nodes: [broker-a], rate_per_hour: 1e-300, down_ms: 1}]\n",
     "random_faults[0].rate_per_hour"),
    ("producers: [{name: p, count: true}]\n", "producers[0].count"),
    ("settle_ms: '1_'\n", "settle_ms"),
    ("seed: 9223372036854775808\n", "seed"),
    ("producers: [{name: p, rate_per_s: 1e12}]\n", "producers[0].rate_per_s"),
    ("faults: [{at_ms: 1, kind: disk_slow, node: namesrv, factor: 2, duration_ms: 5}]\n", "faults[0].node"),
    # found by the long fuzz profile: a median beside p50+p99 made the lognormal read sigma None
    ("network: {latency_ms: {dist: lognormal, median: 1, p50: 1, p99: 3}}\n", "network.latency_ms"),
    # found by walking every key path: a random fault without its required `nodes`
    ("random_faults: [{kind: pause, rate_per_hour: 1, down_ms: 1}]\n", "random_faults[0].nodes"),
])
def test_values_that_broke_runs_are_rejected(tmp_path, text, key_path):
    problems = problems_of(tmp_path, text)
    assert any(p.startswith(f"{key_path}:") for p in problems), problems


def test_sane_maxima_can_be_raised_deliberately(tmp_path):
    text = "producers: [{name: p, rate_per_s: 200000}]\n"
    (problem,) = problems_of(tmp_path, text)
    assert "limits.max_rate_per_s" in problem and "limits: {max_rate_per_s: ...}" in problem
    path = tmp_path / "raised.yaml"
    path.write_text(text + "limits: {max_rate_per_s: 300000}\n")
    raised = scenario_mod.load(path)
    assert raised.producers[0].rate_per_s == 200_000
    assert raised.digest() == scenario_mod.from_data({"producers": [{"name": "p", "rate_per_s": 200000}],
                                                      "limits": {"max_rate_per_s": 250000}}).digest()


def test_draws_saturate_instead_of_wrapping():
    """A float draw beyond int64 used to wrap negative in NumPy's cast (negative latencies)."""
    wide = Lognormal(dist="lognormal", median=1e12, sigma=10)
    stream = random.Random(1)
    block = wide.block_sampler(stream, 1000)()
    assert all(0 <= v <= DRAW_CAP for v in block) and max(block) == int(DRAW_CAP)
    assert 0 <= wide.sample_us(stream) <= DRAW_CAP
    flat = Uniform(dist="uniform", low=1e12, high=1e12)
    assert set(flat.block_sampler(stream, 1000)()) == {int(DRAW_CAP)}


def test_slowest_accepted_rate_runs_without_overflow():
    """rate_per_s at its minimum: the gap between messages is longer than the run (no message),
    not 1 µs after an overflow (the issue's 200,000 messages in 0.1 s)."""
    sc = scenario_mod.load(BASELINE, ["producers[0].rate_per_s=0.000001", "duration_ms=2s", "settle_ms=1s"])
    summary = sim.run(sc).summary
    assert summary["sent_attempts"] <= 2 and summary["stopped_by"] is None
    assert_consistent_summary(summary)


# ---------------------------------------------------------------- names are names, paths are paths

def test_scenario_name_cannot_escape_runs(tmp_path):
    (tmp_path / "s.yaml").write_text("name: ../../../escaped_run\nduration_ms: 1s\nsettle_ms: 0\n")
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    result = cli("run", str(tmp_path / "s.yaml"), cwd=work)
    assert_exit_2(result, "name:")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "c", "s.yaml"]


def test_out_is_checked_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    started = time.monotonic()
    result = cli("run", str(BASELINE), "--out", str(blocker / "sub"), cwd=tmp_path)
    assert_exit_2(result, "cannot write in")
    assert time.monotonic() - started < 20, "the 80 s baseline was simulated before --out was checked"
    assert "seed:" not in result.stdout  # nothing started
    assert blocker.read_text() == "not a directory"


def test_scenario_file_must_be_a_regular_file(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        scenario_mod.load(fifo)
    assert info.value.problems == ["(file): not a regular file"]


def test_foreign_file_content_is_not_echoed(tmp_path):
    secret = tmp_path / "secrets.env"
    secret.write_text("DB_PASSWORD_SECRET: hunter2hunter2\nAPI_TOKEN_VALUE: abcdef0123456789\n")
    with pytest.raises(ConfigError) as info:
        scenario_mod.load(secret)
    assert_no_foreign_content(info.value.render(), secret.read_text())
    assert "is this a scenario file?" in info.value.render()


# ---------------------------------------------------------------- bounds on runs

def test_run_stops_at_max_events_with_a_summary(tmp_path):
    result = cli("run", str(BASELINE), "--max-events", "20000", "--out", "out", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "stopped at bound: unknown" in result.stderr and "Traceback" not in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped_by"] == "max_events" and 0 < summary["stopped_at_ms"] < 80_000
    assert_consistent_summary(summary)


def test_run_stops_at_max_wall_s():
    summary = sim.run(BASELINE, max_wall_s=0.2).summary
    assert summary["stopped_by"] == "max_wall_s"
    assert_consistent_summary(summary)


def test_bounds_not_reached_leave_the_digest_alone():
    sc = scenario_mod.load(BASELINE, ["duration_ms=5s", "settle_ms=2s"])
    plain = sim.run(sc, seed=3).summary
    bounded = sim.run(sc, seed=3, max_events=10**9, max_wall_s=3600).summary
    assert bounded["stopped_by"] is None and bounded["trace_sha256"] == plain["trace_sha256"]


@pytest.mark.parametrize("seed", [str(2**63), "-1", "1e9"])
def test_cli_seed_must_fit_int64(tmp_path, seed):
    result = cli("run", str(BASELINE), "--seed", seed, "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "argument --seed" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
