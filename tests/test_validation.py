"""Scenario validation through the CLI: every malformed file exits 2 naming the file and key path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import cli_in_process

# (id, file text, key path expected in stderr, reason fragment expected in stderr)
CASES = [
    ("unknown_key_did_you_mean", "duraton_ms: 10s\n", "duraton_ms", "did you mean 'duration_ms'"),
    ("unknown_nested_key_did_you_mean",
     "cluster:\n  brokers:\n    - {name: broker-a, store: {flush_disk_tyep: SYNC_FLUSH}}\n",
     "cluster.brokers[0].store.flush_disk_tyep", "did you mean 'flush_disk_type'"),
    ("wrong_type", "seed: abc\n", "seed", "valid integer"),
    ("wrong_type_nested", "producers:\n  - {name: p, count: many}\n", "producers[0].count", "integer"),
    ("bad_unit", "duration_ms: 10 parsecs\n", "duration_ms", "parsecs"),
    ("negative_rate", "producers:\n  - {name: p, rate_per_s: -5}\n", "producers[0].rate_per_s",
     "greater than or equal to 0.000001"),
    ("zero_duration", "duration_ms: 0\n", "duration_ms", "greater than or equal to 0.001"),
    ("infinite_value", "producers:\n  - {name: p, message_bytes: {dist: constant, value: .inf}}\n",
     "producers[0].message_bytes.value", "finite number"),
    ("fault_target_missing", "faults:\n  - {at_ms: 100, kind: process_crash, node: ghost}\n",
     "faults[0].node", "'ghost' is not a node"),
    ("partition_target_missing",
     "faults:\n  - {at_ms: 100, kind: partition, groups: [[broker-a], [nobody]]}\n",
     "faults[0].groups[1]", "'nobody' is not a node"),
    ("random_fault_target_missing",
     "random_faults:\n  - {kind: process_crash, nodes: [zed], rate_per_hour: 1, down_ms: 1000}\n",
     "random_faults[0].nodes", "'zed' is not a node"),
    ("undeclared_topic", "producers:\n  - {name: p, topic: nope}\n", "producers[0].topic",
     "not declared in cluster.topics"),
    ("undeclared_topic_consumer", "consumers:\n  - {name: c, topic: nope}\n", "consumers[0].topic",
     "not declared"),
    ("yaml_syntax_error", "name: x\nproducers: [1,\nseed: 2\n", "line 4, column 1", "YAML syntax error"),
    ("top_level_not_mapping", "- name: x\n- seed: 1\n", "(top level)", "expected a mapping"),
    ("top_level_scalar", "just a string\n", "(top level)", "expected a mapping"),
    ("pause_without_duration", "faults:\n  - {at_ms: 100, kind: pause, node: broker-a}\n", "faults[0]",
     "needs duration_ms"),
    ("packet_loss_without_probability",
     "faults:\n  - {at_ms: 100, kind: packet_loss, src: broker-a, dst: namesrv}\n", "faults[0]",
     "needs probability"),
    ("bad_distribution_lognormal_median_only",
     "producers:\n  - {name: p, message_bytes: {dist: lognormal, median: 3}}\n", "producers[0].message_bytes",
     "median+sigma or p50+p99"),
    ("bad_distribution_unknown_kind", "network:\n  latency_ms: {dist: gaussian, mean: 1}\n",
     "network.latency_ms", "gaussian"),
    ("duplicate_node_names", "cluster:\n  brokers:\n    - {name: broker-a}\n    - {name: broker-a}\n",
     "cluster.brokers", "already used"),
    ("duplicate_node_across_sections", "producers:\n  - {name: broker-a}\n", "producers[0]", "already used"),
    ("slave_role", "cluster:\n  brokers:\n    - {name: broker-a, store: {broker_role: SLAVE}}\n",
     "cluster.brokers[0].store.broker_role", "SLAVE"),
    ("group_members_subscribe_differently",
     "consumers:\n  - {name: c, group: g, tags: [a]}\n  - {name: d, group: g, tags: [b]}\n",
     "consumers[1].group", "subscribe alike"),
    ("topic_on_unknown_broker", "cluster:\n  topics:\n    - {name: t, brokers: [broker-z]}\n",
     "cluster.topics[0].brokers", "'broker-z' is not a broker"),
    ("group_members_consume_differently",
     "consumers:\n  - {name: c, group: g}\n  - {name: d, group: g, consume_mode: ORDERLY}\n",
     "consumers[1].consume_mode", "consume alike"),
    ("orderly_broadcasting", "consumers:\n  - {name: c, consume_mode: ORDERLY, client: {message_model: BROADCASTING}}\n",
     "consumers[0]", "not modelled"),
    ("shutdown_on_a_broker", "faults:\n  - {at_ms: 100, kind: shutdown, node: broker-a}\n",
     "faults[0].node", "needs a producer or consumer node"),
    ("shutdown_with_duration", "consumers:\n  - {name: c}\nfaults:\n  - {at_ms: 100, kind: shutdown, node: c-1, duration_ms: 5s}\n",
     "faults[0]", "shutdown is not healed"),
    ("negative_fault_time", "faults:\n  - {at_ms: -5, kind: heal}\n", "faults[0].at_ms", "greater than or equal"),
    # issue 25: numbers as a person means them, names without control characters, keys cut
    ("yaml11_sexagesimal", "duration_ms: 1:30\n", "line 1, column 14",
     "1:30 is a base-60 (sexagesimal) number in YAML 1.1 and would be read as 90"),
    ("yaml11_octal_count", "producers:\n  - {name: p, count: 010}\n", "line 2, column 22",
     "010 is octal in YAML 1.1 (a leading 0) and would be read as 8"),
    ("huge_hex_seed", "seed: 0x" + "f" * 3_600 + "\n", "line 1, column 7", "a number literal is at most 32 characters"),
    ("duration_string_sexagesimal", "settle_ms: '1:30'\n", "settle_ms", "minutes and seconds, or hours and minutes?"),
    ("tag_control_character", 'producers:\n  - {name: p, tags: ["a\\eb"]}\n', "producers[0].tags[0]",
     "ESC (U+001B) is not allowed here"),
    ("long_expect_key", "expect:\n  ? " + "a" * 10_000 + "\n  : 0\n", "expect['aaaa", "not a metric"),
]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`rmqsim ARGS` in this process (tests/conftest.py cli_in_process; the repository is the cwd)."""
    return cli_in_process(*args)


def assert_rejected(res: subprocess.CompletedProcess, path: Path, *fragments: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stdout + res.stderr
    assert str(path) in res.stderr
    for fragment in fragments:
        assert fragment in res.stderr, (fragment, res.stderr)


@pytest.mark.parametrize("text,key_path,reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_rejects(tmp_path, text, key_path, reason):
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    res = run_cli("validate", str(path))
    assert_rejected(res, path, key_path, reason)
    # problems are printed one per line as "<file>: <key path>: <reason>"
    assert any(line.strip().startswith(f"{path}: {key_path}") for line in res.stderr.splitlines()), res.stderr


def test_at_least_twelve_kinds_of_malformed_files():
    assert len({c[0] for c in CASES}) >= 12


def test_empty_file_is_valid(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    res = run_cli("validate", str(path))
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


def test_missing_file(tmp_path):
    path = tmp_path / "does-not-exist.yaml"
    res = run_cli("validate", str(path))
    assert_rejected(res, path, "cannot read")


MULTI = """\
name: x
duraton_ms: 10s
settle_ms: 10 parsecs
cluster:
  brokers:
    - {name: broker-a, store: {broker_role: SLAVE}}
    - {name: broker-a}
producers:
  - {name: p, topic: nope, rate_per_s: -5, message_bytes: {dist: lognormal, median: 3}}
consumers:
  - {name: c, group: g, tags: [a]}
  - {name: d, group: g, tags: [b]}
faults:
  - {at_ms: 100, kind: pause, node: broker-a}
  - {at_ms: 100, kind: process_crash, node: ghost}
"""


def test_several_problems_reported_at_once(tmp_path):
    path = tmp_path / "multi.yaml"
    path.write_text(MULTI, encoding="utf-8")
    res = run_cli("validate", str(path))
    expected = [
        ("duraton_ms", "did you mean 'duration_ms'"),
        ("settle_ms", "parsecs"),
        ("cluster.brokers[0].store.broker_role", "SLAVE"),
        ("cluster.brokers", "already used"),
        ("producers[0].topic", "not declared"),
        ("producers[0].rate_per_s", "greater than or equal to"),
        ("producers[0].message_bytes", "median+sigma"),
        ("consumers[1].group", "subscribe alike"),
        ("faults[0]", "needs duration_ms"),
        ("faults[1].node", "'ghost'"),
    ]
    assert_rejected(res, path)
    lines = res.stderr.splitlines()
    for key_path, reason in expected:
        assert any(f"{path}: {key_path}" in line and reason in line for line in lines), (key_path, res.stderr)
    assert f"problem(s) in {path}" in lines[0]
    assert int(lines[0].split()[0]) >= len(expected)


def test_run_on_bad_file_exits_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("duration_ms: 0\nproducers:\n  - {topic: nope}\n", encoding="utf-8")
    out = tmp_path / "out"
    res = run_cli("run", str(path), "--out", str(out))
    assert_rejected(res, path, "duration_ms", "producers[0].topic")
    assert not out.exists()  # nothing run, nothing written


def test_bad_override_reported(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("name: ok\n", encoding="utf-8")
    res = run_cli("validate", str(path), "--set", "duration_ms=-3s")
    assert_rejected(res, path, "duration_ms")


def test_yaml11_override_reported(tmp_path):
    """Issue 25: `--set duration_ms=1:30` was 90 ms, `--set seed=0x` + 3,600 `f`s a traceback."""
    path = tmp_path / "ok.yaml"
    path.write_text("name: ok\n", encoding="utf-8")
    res = run_cli("validate", str(path), "--set", "duration_ms=1:30", "--set", "seed=0x" + "f" * 3_600)
    assert_rejected(res, path, "--set duration_ms: cannot read the value (1:30 is a base-60",
                    "--set seed: cannot read the value (cannot read '0xfff", "at most 32 characters")
    assert len(res.stderr) < 1_000


def test_invalid_count_reports_only_the_count(tmp_path):
    """With `count` itself wrong the instance names are unknown: a fault naming `c-1` is not
    flagged as a second, spurious problem, while a name that cannot be an instance still is."""
    path = tmp_path / "count.yaml"
    path.write_text("consumers:\n  - {name: c, count: three}\n"
                    "faults:\n  - {at_ms: 100, kind: process_crash, node: c-1}\n"
                    "  - {at_ms: 200, kind: process_crash, node: cx}\n", encoding="utf-8")
    res = run_cli("validate", str(path))
    assert_rejected(res, path, "consumers[0].count", "faults[1].node")
    assert "faults[0]" not in res.stderr
    assert res.stderr.splitlines()[0].startswith("2 problem(s)")


@pytest.mark.parametrize("text, expected", [
    # a count pydantic accepts (lax: 2.0 is 2) names its instances as the run will
    ("consumers:\n  - {name: c, count: 2.0, topic: nope}\n"
     "faults:\n  - {at_ms: 100, kind: process_crash, node: c-7}\n",
     ["consumers[0].topic", "faults[0].node: 'c-7'"]),
    # an invalid count still lets the entry's other checks run
    ("consumers:\n  - {name: c, count: 0, topic: nope}\n", ["consumers[0].count", "consumers[0].topic"]),
])
def test_count_is_read_as_the_model_reads_it(tmp_path, text, expected):
    path = tmp_path / "count.yaml"
    path.write_text(text, encoding="utf-8")
    res = run_cli("validate", str(path))
    assert_rejected(res, path, *expected)
    assert res.stderr.splitlines()[0].startswith(f"{len(expected)} problem(s)")
