"""`rmqsim lint FILE...` (rmqsim/lint_cli.py) and `rmqsim coverage RUN_DIR` (rmqsim/coverage_cli.py):
their output and exit codes, a hostile run directory refused in one line (exit 2), and the examples
of docs/lint.md and docs/coverage.md run as written, printing what the pages show."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from models.coverage_points import POINTS
from rmqsim import coverage_cli, lint_cli
from rmqsim.scenario import spec as scenario
from rmqsim.scenario.lint import LINT_CHECKS, MAX_PER_CHECK, lint
from tests.conftest import ROOT

# `rmqsim` as users type it: cli.main, with the two commands registered if cli.py does not yet register them
DRIVER = """
import argparse, sys
from rmqsim import cli, coverage_cli, lint_cli
build = cli.parser
def parser():
    p = build()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for name, module in (("lint", lint_cli), ("coverage", coverage_cli)):
        if name not in sub.choices:
            module.add_parser(sub)
    return p
cli.parser = parser
sys.exit(cli.main(sys.argv[1:]))
"""
HEX = "ab" * 32
WARMUP_FAULTS = "producers: [{}]\nfaults:\n" + "".join(
    f"  - {{at_ms: {100 + i}, kind: pause, node: broker-a, duration_ms: 1}}\n" for i in range(30))


def rmqsim(*words: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", DRIVER, *words], capture_output=True, text=True, cwd=str(cwd),
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- rmqsim lint ------------------------------------------------------------------------------------

def lint_args(*files: Path, sets: tuple[str, ...] = ()) -> argparse.Namespace:
    return argparse.Namespace(scenario=[str(f) for f in files], set=list(sets))


def test_lint_prints_the_findings_and_exits_1(tmp_path, capsys) -> None:
    path = write(tmp_path / "sync.yaml", "cluster:\n  brokers:\n    - {name: broker-a, replicas: [{role: SYNC_MASTER}, "
                                         "{role: SLAVE}], broker: {slave_read_enable: true}}\n")
    assert lint_cli.cmd_lint(lint_args(path)) == lint_cli.EXIT_WARNINGS
    out, err = capsys.readouterr()
    expected = [line for f in lint(scenario.load(path)) for line in f.lines(str(path))]
    assert expected and out.splitlines() == [*expected, f"{path}: 1 warning [sync-master-no-isr]"]
    assert err == ""


def test_lint_of_a_clean_file_exits_0(tmp_path, capsys) -> None:
    path = write(tmp_path / "ok.yaml", "producers: [{}]\nconsumers: [{}]\n")
    assert lint_cli.cmd_lint(lint_args(path)) == lint_cli.EXIT_CLEAN
    assert capsys.readouterr().out == f"{path}: no warnings\n"


def test_lint_counts_the_findings_past_the_cap(tmp_path, capsys) -> None:
    path = write(tmp_path / "many.yaml", WARMUP_FAULTS)
    assert lint_cli.cmd_lint(lint_args(path)) == lint_cli.EXIT_WARNINGS
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("warning: ") and line.endswith("[fault-in-warmup]") for line in lines) == \
        MAX_PER_CHECK + 1
    assert lines[-1] == f"{path}: 30 warnings [fault-in-warmup]"


def test_lint_applies_set_to_every_file_and_lints_past_an_invalid_one(tmp_path, capsys) -> None:
    clean = write(tmp_path / "a.yaml", "producers: [{}]\nconsumers: [{}]\n")
    broken = write(tmp_path / "b.yaml", "producers: [{topic: nowhere}]\n")
    assert lint_cli.cmd_lint(lint_args(clean, broken, clean)) == lint_cli.EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"{clean}: no warnings"] * 2
    assert err.startswith(f"1 problem(s) in {broken}:") and "producers[0].topic" in err
    # --set reaches every file: a warm-up as long as the run warns in both
    assert lint_cli.cmd_lint(lint_args(clean, clean, sets=("warmup_ms=60s",))) == lint_cli.EXIT_WARNINGS
    assert capsys.readouterr().out.count("[warmup-covers-run]") == 4  # two findings, two tallies


def test_lint_from_the_command_line(tmp_path) -> None:
    path = write(tmp_path / "isr.yaml", "cluster:\n  brokers:\n    - {name: broker-a, store: {in_sync_replicas: 2}, "
                                        "replicas: [{role: SYNC_MASTER}, {role: SLAVE}, {role: SLAVE}]}\n")
    assert rmqsim("lint", str(path), cwd=tmp_path).returncode == 0
    done = rmqsim("lint", str(path), "--set", "cluster.brokers[0].store.in_sync_replicas=4", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert "cluster.brokers[0].store.in_sync_replicas: 4 is above the 3 replicas" in done.stderr
    done = rmqsim("lint", str(tmp_path / "missing.yaml"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "missing.yaml" in done.stderr


# --- rmqsim coverage --------------------------------------------------------------------------------

def run_dir(tmp_path: Path, summary: object, name: str = "run") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return directory


def counts(**reached: int) -> dict[str, int]:
    return {p.name: reached.get(p.name, 0) for p in POINTS}


def coverage(directory: Path, capsys, as_json: bool = False) -> tuple[int, str, str]:
    code = coverage_cli.cmd_coverage(argparse.Namespace(dir=str(directory), json=as_json))
    out, err = capsys.readouterr()
    return code, out, err


def test_coverage_lists_reached_points_with_counts_and_the_rest(tmp_path, capsys) -> None:
    first, later = POINTS[0].name, POINTS[-1].name
    directory = run_dir(tmp_path, {"trace_sha256": HEX, "coverage": counts(**{later: 3, first: 12_345})})
    code, out, err = coverage(directory, capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{directory}: 2 of {len(POINTS)} rare-state points reached"
    assert lines[1] == "reached (times taken, in catalogue order):"
    assert re.fullmatch(rf"  12,345  {first} +{re.escape(POINTS[0].branch)}", lines[2]), lines[2]
    assert re.fullmatch(rf" +3  {later} +{re.escape(POINTS[-1].branch)}", lines[3]), lines[3]
    assert lines[4] == f"not reached ({len(POINTS) - 2}):"
    listed = " ".join(lines[5:]).replace(",", " ").split()
    assert listed == [p.name for p in POINTS[1:-1]]


def test_coverage_json_and_a_run_of_another_catalogue(tmp_path, capsys) -> None:
    points = counts(**{POINTS[1].name: 2})
    del points[POINTS[0].name]  # an older run: a point it did not count
    points["a_point_of_tomorrow"] = 7  # a newer run: a point this catalogue lacks
    directory = run_dir(tmp_path, {"trace_sha256": HEX, "coverage": points})
    code, out, _err = coverage(directory, capsys, as_json=True)
    report = json.loads(out)
    assert code == 0 and report["reached"] == {POINTS[1].name: 2, "a_point_of_tomorrow": 7}
    assert report["not_in_catalogue"] == ["a_point_of_tomorrow"] and report["not_counted"] == [POINTS[0].name]
    assert report["not_reached"] == [p.name for p in POINTS[2:]]
    code, out, _err = coverage(directory, capsys)
    assert f"2 of {len(POINTS)} rare-state points reached" in out and "(not in this catalogue)" in out
    assert "not in this rmqsim's catalogue" in out and "not counted by the run" in out


def _fifo(directory: Path) -> None:
    os.mkfifo(directory / "summary.json")


HOSTILE = {
    "not JSON": lambda d: (d / "summary.json").write_text("{not json"),
    "a symbolic link": lambda d: (d / "summary.json").symlink_to(d.parent / "elsewhere.json"),
    "a FIFO": _fifo,
    "a folder": lambda d: (d / "summary.json").mkdir(),
    "a list": lambda d: (d / "summary.json").write_text("[1, 2]"),
    "too deep": lambda d: (d / "summary.json").write_text("[" * 100_000 + "]" * 100_000),
    "a negative count": lambda d: (d / "summary.json").write_text(json.dumps({"trace_sha256": HEX,
                                                                              "coverage": {"x": -1}})),
    "coverage not a map": lambda d: (d / "summary.json").write_text(json.dumps({"trace_sha256": HEX,
                                                                                "coverage": [1]})),
    "no trace digest": lambda d: (d / "summary.json").write_text(json.dumps({"coverage": {}})),
    "no coverage": lambda d: (d / "summary.json").write_text(json.dumps({"trace_sha256": HEX})),
    "not UTF-8": lambda d: (d / "summary.json").write_bytes(b'{"trace_sha256": "\xff"}'),
    "missing": lambda d: None,
    "a sweep": lambda d: (d / "sweep.json").write_text("{}"),
}


@pytest.mark.parametrize("how", list(HOSTILE))
def test_a_hostile_run_directory_is_one_line_and_exit_2(tmp_path, capsys, how) -> None:
    (tmp_path / "elsewhere.json").write_text(json.dumps({"trace_sha256": HEX, "coverage": counts()}))
    directory = tmp_path / "run"
    directory.mkdir()
    HOSTILE[how](directory)
    code, out, err = coverage(directory, capsys)
    assert code == coverage_cli.EXIT_BAD_INPUT and out == ""
    assert err.count("\n") == 1 and err.startswith("rmqsim coverage: ") and str(directory) in err, err
    assert WHY.get(how, "") in err, err


WHY = {"a symbolic link": "a symbolic link", "a FIFO": "not a regular file", "too deep": "damaged",
       "no trace digest": "no trace_sha256", "no coverage": "no coverage", "missing": "not a run directory",
       "a sweep": "is a sweep directory", "a negative count": "coverage.x: expected a whole number"}


def test_a_summary_past_the_bound_is_refused_unread(tmp_path, capsys, monkeypatch) -> None:
    directory = run_dir(tmp_path, {"trace_sha256": HEX, "coverage": counts()})
    monkeypatch.setattr(coverage_cli, "MAX_SUMMARY_BYTES", 100)
    code, _out, err = coverage(directory, capsys)
    assert code == 2 and "larger than 100 bytes" in err


def test_a_directory_name_with_a_newline_stays_on_one_line(tmp_path, capsys) -> None:
    code, _out, err = coverage(tmp_path / "a\nb", capsys)
    assert code == 2 and err.count("\n") == 1 and "a\\nb" in err


def test_coverage_from_the_command_line(tmp_path) -> None:
    directory = run_dir(tmp_path, {"trace_sha256": HEX, "coverage": counts(**{POINTS[2].name: 1})})
    done = rmqsim("coverage", str(directory), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith(f"{directory}: 1 of {len(POINTS)} rare-state points")
    (directory / "summary.json").write_text("{")
    done = rmqsim("coverage", str(directory), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr


# --- the docs pages' examples -----------------------------------------------------------------------

FENCE = re.compile(r"^```\n(.*?)^```", re.S | re.M)


def examples(page: Path) -> list[tuple[str, list[str]]]:
    """(command, the lines shown after it) for each `$ rmqsim ...` line of the page's code blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in FENCE.findall(page.read_text(encoding="utf-8")):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def shown_in(shown: list[str], printed: list[str]) -> bool:
    """Whether the lines a page shows are what the command printed: in order, a `...` line standing
    for any lines (none included), the others consecutive."""
    at, free = 0, True
    for line in shown:
        if line.strip() == "...":
            free = True
            continue
        if free:
            while at < len(printed) and printed[at].rstrip() != line.rstrip():
                at += 1
        if at >= len(printed) or printed[at].rstrip() != line.rstrip():
            return False
        at, free = at + 1, False
    return free or at == len(printed)


@pytest.mark.parametrize("page", ["lint.md", pytest.param("coverage.md", marks=pytest.mark.slow)])  # 12 s: --slow
def test_the_page_examples_run_as_written(tmp_path, page) -> None:
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    found = examples(ROOT / "docs" / page)
    assert found and all(command.startswith("rmqsim ") for command, _lines in found)
    for command, shown in found:
        done = subprocess.run([sys.executable, "-c", DRIVER, *shlex.split(command)[1:]], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=str(tmp_path), timeout=600,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "100"})
        assert "Traceback" not in done.stdout, done.stdout
        assert shown_in(shown, done.stdout.splitlines()), f"$ {command}\n{done.stdout}"


def test_the_matcher_bites() -> None:
    printed = ["a", "b", "c", "d"]
    assert shown_in(["a", "...", "d"], printed) and shown_in(["...", "b", "c", "..."], printed)
    assert not shown_in(["a", "c", "..."], printed)  # not consecutive
    assert not shown_in(["a", "b"], printed)  # lines left over, no `...` for them
    assert not shown_in(["...", "e"], printed)


def test_every_lint_check_is_on_the_page() -> None:
    page = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    assert all(f"| `{c.id}` |" in page for c in LINT_CHECKS)
    assert "rmqsim lint" in page and "rmqsim coverage RUN_DIR" in (ROOT / "docs" / "coverage.md").read_text()
