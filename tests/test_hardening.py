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

import rmqsim
from rmqsim.scenario import spec as scenario_mod
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
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], cwd=cwd, capture_output=True, text=True,
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
    summary = rmqsim.run(sc).summary
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
    summary = rmqsim.run(BASELINE, max_wall_s=0.2).summary
    assert summary["stopped_by"] == "max_wall_s"
    assert_consistent_summary(summary)


def test_bounds_not_reached_leave_the_digest_alone():
    sc = scenario_mod.load(BASELINE, ["duration_ms=5s", "settle_ms=2s"])
    plain = rmqsim.run(sc, seed=3).summary
    bounded = rmqsim.run(sc, seed=3, max_events=10**9, max_wall_s=3600).summary
    assert bounded["stopped_by"] is None and bounded["trace_sha256"] == plain["trace_sha256"]


@pytest.mark.parametrize("seed", [str(2**63), "-1", "1e9"])
def test_cli_seed_must_fit_int64(tmp_path, seed):
    result = cli("run", str(BASELINE), "--seed", seed, "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "argument --seed" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- issue 25: numbers as a person means them

@pytest.mark.parametrize("text, fragment", [
    ("duration_ms: 1:30\n", "1:30 is a base-60 (sexagesimal) number in YAML 1.1 and would be read as 90"),
    ("duration_ms: 1:30:00\n", "1:30:00 is a base-60 (sexagesimal) number in YAML 1.1 and would be read as 5400"),
    ("duration_ms: 017\n", "017 is octal in YAML 1.1 (a leading 0) and would be read as 15"),
    ("duration_ms: 0x1F\n", "0x1F is hexadecimal in YAML 1.1 and would be read as 31"),
    ("seed: 0b101\n", "0b101 is binary in YAML 1.1 and would be read as 5"),
    ("producers: [{name: p, count: 010}]\n", "010 is octal in YAML 1.1 (a leading 0) and would be read as 8"),
    ("producers: [{name: p, rate_per_s: 1__0}]\n", "cannot read '1__0' as int: an underscore goes between two digits"),
    ("settle_ms: !!int 0x1F\n", "hexadecimal"),
    ("settle_ms: !!int 12a\n", "cannot read '12a' as int"),  # a traceback in the first version of the check
    ("expect: {lost: {max: 0o17}}\n", None),  # no number in YAML 1.1: a string, refused by the model
])
def test_yaml11_number_forms_are_refused(tmp_path, text, fragment):
    problems = problems_of(tmp_path, text)
    assert fragment is None or (len(problems) == 1 and problems[0].startswith("line 1, column ")
                                and fragment in problems[0]), problems


@pytest.mark.parametrize("item, fragment", [
    ("duration_ms=1:30", "--set duration_ms: cannot read the value (1:30 is a base-60 (sexagesimal) number"),
    ("settle_ms=1:30:00", "would be read as 5400"),
    ("duration_ms=017", "--set duration_ms: cannot read the value (017 is octal"),
    ("seed=0x1F", "--set seed: cannot read the value (0x1F is hexadecimal"),
    ("seed=0x" + "f" * 3_600, "a number literal is at most 32 characters"),
    ("duration_ms=0b1" + "0" * 9_000, "a number literal is at most 32 characters"),
    ("producers[0].count=[1,\n017]", "(line 2, column 1: 017 is octal"),
])
def test_yaml11_number_forms_are_refused_through_set(tmp_path, item, fragment):
    problems = problems_of(tmp_path, BASELINE.read_text(), [item])
    assert any(fragment in p for p in problems) and all(len(p) < 300 for p in problems), problems


@pytest.mark.parametrize("text, fragment", [
    ("duration_ms: '1:30'\n", "cannot read '1:30' as a duration: minutes and seconds, or hours and minutes?"),
    ("settle_ms: '0:30'\n", "minutes and seconds, or hours and minutes?"),
    ("duration_ms: '0x1Fms'\n", "cannot read '0x1Fms' as a duration"),
    ("duration_ms: '５s'\n", "cannot read '５s' as a duration"),
    ("duration_ms: '1__0s'\n", "cannot read '1__0s' as a duration"),
    ("duration_ms: '" + "9" * 5_000 + "s'\n", "cannot read '99999"),
])
def test_duration_strings_are_decimal_with_a_unit(tmp_path, text, fragment):
    problems = problems_of(tmp_path, text)
    assert len(problems) == 1 and fragment in problems[0] and len(problems[0]) < 300, problems


@pytest.mark.parametrize("value, ms", [
    ("'017s'", 17_000), ("'017'", 17), ("1e3", 1_000), ("'1.5e3ms'", 1_500), ("'250μs'", 0.25),
    ("'250µs'", 0.25), ("'1_000ms'", 1_000), ("2E+3", 2_000),
])
def test_duration_strings_read_sensibly(tmp_path, value, ms):
    path = tmp_path / "s.yaml"
    path.write_text(f"duration_ms: {value}\n")
    assert scenario_mod.load(path).duration_ms == ms


@pytest.mark.parametrize("text", [
    "seed: 0x" + "f" * 3_600 + "\n",  # 4,335 decimal digits: str() of it raised while the message was formatted
    "duration_ms: 0b1" + "0" * 14_000 + "\n",
    "seed: 0" + "7" * 6_000 + "\n",
    "seed: !!int " + "9" * 6_000 + "\n",
    "settle_ms: 1." + "5" * 20_000 + "\n",
])
def test_huge_literals_of_every_base_are_clean_errors(tmp_path, text):
    (problem,) = problems_of(tmp_path, text)
    assert problem.endswith("a number literal is at most 32 characters") and len(problem) < 200, problem


def test_huge_integers_from_the_python_api_are_described_not_printed():
    with pytest.raises(ConfigError) as info:
        scenario_mod.from_data({"seed": 16**3_600 - 1, "producers": [{"name": "p", "count": -(2**20_000)}]})
    text = info.value.render()
    assert "seed: Input should be less than or equal to" in text and "(got <an integer of 4,335 digits>)" in text
    assert "(got <an integer of 6,021 digits>)" in text


def _sweep_problems(tmp_path: Path, body: str, base: Path = BASELINE) -> list[str]:
    from analysis.sweeps.spec import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\nbase: {base}\n{body}")
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert_clean_rejection(info.value, str(path))
    return info.value.problems


@pytest.mark.parametrize("body, fragment", [
    ("seeds: [0x" + "f" * 3_600 + "]\n", "at most 32 characters"),
    ("seeds: [1, 017]\n", "017 is octal in YAML 1.1"),
    ("seeds: 0x1F\n", "0x1F is hexadecimal"),
    ("grid:\n  d: {key: duration_ms, values: [0b1" + "0" * 14_000 + "]}\n", "at most 32 characters"),
    ("grid:\n  d: {key: duration_ms, values: [1:30, 2:00]}\n", "1:30 is a base-60"),
    ("set: {duration_ms: 1:30}\n", "1:30 is a base-60"),
    ("grid:\n  d: {key: duration_ms, values: ['1:30', '2:00']}\n",
     "grid.d (duration_ms='1:30'): duration_ms: cannot read '1:30' as a duration: minutes and seconds"),
    ('set: {"producers[0].tags": ["a\\eb"]}\n', "set.producers[0].tags → producers[0].tags[0]: ESC (U+001B)"),
    ("timeline: {point: 1000001}\n", "timeline.point: Input should be less than or equal to 1000000"),
])
def test_sweep_numbers_and_names_as_in_scenarios(tmp_path, body, fragment):
    problems = _sweep_problems(tmp_path, body)
    assert any(fragment in p for p in problems), problems


def test_sweep_value_strings_stay_strings(tmp_path):
    """A sweep value '1e3' (a string) goes to the scenario as the string, not as 1000.0."""
    from analysis.sweeps.spec import load_sweep, override_item

    assert override_item("producers[0].tags", ["1e3", "0x1F", "1:30"]) == \
        "producers[0].tags=['1e3', '0x1F', '1:30']"
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\nbase: {BASELINE}\nset: {{'producers[0].tags': ['1e3', '2E5']}}\n")
    sweep = load_sweep(path)
    assert sweep.scenario_data(sweep.points[0])["producers"][0]["tags"] == ["1e3", "2E5"]


@pytest.mark.slow  # over 5 s on 2 cores: scripts/test.sh --slow (issue 41: the suite in CI)
def test_sweep_size_beyond_the_int_print_limit(tmp_path):
    """9,100 parameters of three values each: 3**9,100 points, a number str() cannot print (a
    missing base: no value is validated, which would take minutes here)."""
    grid = "".join(f"  p{i}: {{key: 'producers[0].rate_per_s', values: [1, 2, 3]}}\n" for i in range(9_100))
    problems = _sweep_problems(tmp_path, "grid:\n" + grid, tmp_path / "missing.yaml")
    assert any(p.startswith("grid: more than 10^4341 points") for p in problems), problems[:3]


# ---------------------------------------------------------------- issue 25: keys cut, names without control characters

@pytest.mark.parametrize("key, where", [
    ("a" * 10_000, "expect['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…]: not a metric"),
    ("latency_ms." + "p" * 10_000, "expect['latency_ms.ppppppppppppppppppppppppppp…]: not a metric"),
    ("send_share_by_broker." + "b" * 10_000, "expect['send_share_by_broker.bbbbbbbbbbbbbbbbb…]: 'bbbbbbbbb"),
    ("lоst", "expect['lоst']: not a metric an expectation can bound (did you mean 'lost'?)"),  # Cyrillic о
])
def test_long_or_odd_expect_keys_are_cut_not_echoed(tmp_path, key, where):
    (problem,) = problems_of(tmp_path, f"expect:\n  ? {key}\n  : 0\n")
    assert problem.startswith(where) and len(problem) < 2_100 and "a" * 100 not in problem, problem[:300]


@pytest.mark.parametrize("escape, name", [
    ("\\0", "NUL (U+0000)"), ("\\a", "BEL (U+0007)"), ("\\e", "ESC (U+001B)"), ("\\r", "CR (U+000D)"),
    ("\\x7f", "DEL (U+007F)"), ("\\x85", "the character U+0085"), ("\\u202e", "the character U+202E"),
    ("\\u200b", "the character U+200B"), ("\\t", "TAB (U+0009)"), ("\\n", "LF (U+000A)"),
])
def test_tags_with_control_characters_are_refused(tmp_path, escape, name):
    text = f'producers: [{{name: p, tags: [ok, "a{escape}b"]}}]\nconsumers: [{{name: c, tags: ["{escape}"]}}]\n'
    problems = problems_of(tmp_path, text)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"producers[0].tags[1]: {name} is not allowed here (printable characters only) "
                                  "(got 'a\\"), problems
    assert problems[1].startswith(f"consumers[0].tags[0]: {name} is not allowed here"), problems


def test_tags_with_control_characters_through_set(tmp_path):
    problems = problems_of(tmp_path, BASELINE.read_text(), ['producers[0].tags=["a\\eb", "\\u202eevil"]'])
    assert problems == [
        "producers[0].tags[0]: ESC (U+001B) is not allowed here (printable characters only) (got 'a\\x1bb')",
        "producers[0].tags[1]: the character U+202E is not allowed here (printable characters only) (got '\\u202eevil')"]


def test_tags_keep_printable_text():
    sc = scenario_mod.from_data({"producers": [{"name": "p", "tags": ["TagA", "订单", "a b", "ü-ß"]}]})
    assert sc.producers[0].tags == ["TagA", "订单", "a b", "ü-ß"]


@pytest.mark.parametrize("dist, shown", [
    ("\\u200bconstant", "Input tag '\\u200bconstant' found using 'dist'"),
    ("\\econstant", "Input tag '\\x1bconstant' found using 'dist'"),
    ("x" * 5_000, "Input tag 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' found using 'dist'"),
])
def test_pydantic_messages_are_escaped_and_cut(tmp_path, dist, shown):
    """pydantic quotes a discriminator's tag as it is: found by the fuzz kind `confusable`."""
    (problem,) = problems_of(tmp_path, f'network: {{latency_ms: {{dist: "{dist}", value: 1}}}}\n')
    assert problem.startswith(f"network.latency_ms: {shown}") and len(problem) < 300, problem


def test_a_discriminator_tag_built_from_aliases_is_cut(tmp_path):
    """Found by the long fuzz profile (alias_bomb): a `dist:` that is a list of 800 names came
    back whole, 10,222 characters in one problem."""
    names = "[&g [" + ", ".join(["broker-a"] * 9) + "], " + ", ".join(["*g"] * 90) + "]"
    (problem,) = problems_of(tmp_path, f"network: {{latency_ms: {{dist: {names}, value: 1}}}}\n")
    assert problem.startswith("network.latency_ms: Input tag '[['broker-a', 'broker-a', 'broker-a…' found using")
    assert len(problem) < 300, problem


@pytest.mark.parametrize("item, fragment", [
    ("a" + ".a" * 32 + "=1", "more than 32 names and indexes (no scenario is that deep)"),
    ("producers[0].client" + ".x" * 31 + "=1", "--set 'producers[0].client.x.x.x"),
    ("producers[5]" + ".abcdefghij" * 20 + "=1",
     "--set producers[5].abcdefghij.abcdefghij.abcdefghij.abcdefghij.abcdefghij.abcdefghij.abcdefghij.abcdefghi…: "
     "no element producers[5] in this scenario"),
])
def test_key_paths_are_bounded_and_cut(tmp_path, item, fragment):
    (problem,) = problems_of(tmp_path, BASELINE.read_text(), [item])
    assert fragment in problem and len(problem) < 300, problem


def test_issue_25_cases_through_the_cli(tmp_path):
    """No traceback for a huge hexadecimal seed, in a scenario, a `--set`, or a sweep's seeds."""
    (tmp_path / "s.yaml").write_text("seed: 0x" + "f" * 3_600 + "\n")
    assert_exit_2(cli("validate", "s.yaml", cwd=tmp_path), "a number literal is at most 32 characters")
    assert_exit_2(cli("validate", str(BASELINE), "--set", "seed=0x" + "f" * 3_600, cwd=tmp_path),
                  "--set seed: cannot read the value")
    (tmp_path / "w.yaml").write_text(f"name: w\nbase: {BASELINE}\nseeds: [0x{'f' * 3_600}]\n")
    assert_exit_2(cli("sweep", "w.yaml", "--dry-run", cwd=tmp_path), "a number literal is at most 32 characters")


# --- issue 37, item 11: nothing of the report's left running at interpreter exit -----------------

def test_a_report_that_fails_after_spark_starts_leaves_no_import_running(tmp_path, monkeypatch):
    """The sweep report imports matplotlib on a thread while the JVM starts. A report that fails
    after that (here: the session cannot start) must not return with the import still running,
    or the interpreter would finalize under it: the thread is joined however the report ends."""
    import threading

    from analysis.reports import sweep_report as report
    from analysis.sweeps import sweep
    from tests.analysis.test_sweep_hardening import _sweep_with_rows

    _sweep, out = _sweep_with_rows(tmp_path)
    importing = threading.Event()

    def slow_import() -> None:  # matplotlib's imports take seconds in a fresh clone or on a loaded machine
        importing.set()
        time.sleep(1.0)

    def no_session(*args: object, **kwargs: object) -> None:
        assert importing.wait(5)
        raise report.ReportError("no Spark here")

    monkeypatch.setattr(report, "_import_figures", slow_import)
    monkeypatch.setattr(sweep, "spark_session", no_session)
    monkeypatch.setenv(sweep.ENGINE_ENV, "spark")  # a local sweep's report reads with Arrow: no session to fail
    with pytest.raises(report.ReportError, match="no Spark here"):
        report.build_report(out, master="local[1]")
    assert not [t for t in threading.enumerate() if t.name == "rmqsim-import-figures"]
    assert not (out / "report" / "index.html").exists()
