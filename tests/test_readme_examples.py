"""The README's examples are real runs (issue 39, item 8): every fenced block of README.md that
shows `$ rmqsim ...` with its output is run for real, on the input files the README itself
writes (its `cat > FILE <<'YAML'` blocks, read from README.md, never copied here), and its output
must equal the block line by line — so a count, a digest or a coverage figure there cannot drift.

Only what legitimately varies from one machine or moment to the next is normalised, on both
sides alike (`VARYING`): the wall-time figures of `wrote ... (0.217 s wall, 355.29× real time)`,
the time stamp in a run directory's name, a sweep's runs/min and its wall time; a README line
`...` stands for any lines (zero or more). A sweep's progress line is redrawn in place on a
terminal, so of consecutive progress lines only the last is what a reader sees.

The commands other than `sweep` run in-process (`rmqsim.cli.main`, stdout and stderr captured
together, in README order, in one scratch directory shared by the module: `explain` reads the
run that `run` wrote). `sweep` starts Spark, so it runs in a child process of its own, with its
own stderr (where the JVM prints its start-up lines) apart from rmqsim's messages.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT, scratch_env

README = ROOT / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
HEREDOC = re.compile(r"^cat > (\S+) <<'(\w+)'\n(.*?)^\2$", re.S | re.M)
PROMPT = "$ "
ANY_LINES = "..."
PROGRESS = re.compile(r"^runs [\d,]+/[\d,]+ · ")
SPAWNED = frozenset({"sweep"})  # starts a JVM: a child process, not in-process
SWEEP_TIMEOUT_S = 900
# what differs from machine to machine or moment to moment, and nothing else
VARYING = (
    (re.compile(r"\(\d+(?:\.\d+)? s wall, [\d,]+(?:\.\d+)?× real time\)"), "(<wall> s wall, <speed>× real time)"),
    (re.compile(r"\b\d{8}T\d{6}Z(?=-seed-)"), "<run time>"),
    (re.compile(r" · [\d,]+(?:\.\d+)? runs/min · "), " · <rate> runs/min · "),
    (re.compile(r"^(done: [\d,]+ run\(s\) in )\d+(?:\.\d+)? s "), r"\1<wall> s "),
)


@dataclass(frozen=True)
class Example:
    command: str  # as typed, without the prompt
    expected: tuple[str, ...]  # the README's output lines

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def subcommand(self) -> str:
        return self.argv[1]


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def input_files(text: str) -> dict[str, str]:
    """The files the README's shell blocks write with `cat > NAME <<'TAG'`, by name."""
    files: dict[str, str] = {}
    for block in FENCE.findall(text):
        for name, _tag, body in HEREDOC.findall(block):
            files[name] = body
    return files


def examples(text: str) -> list[Example]:
    """Every `$ rmqsim ...` of the README's fenced blocks, with the output lines shown under it."""
    found: list[Example] = []
    for block in FENCE.findall(text):
        lines = block.rstrip("\n").split("\n")
        if not any(line.startswith(PROMPT + "rmqsim ") for line in lines):
            continue
        assert lines[0].startswith(PROMPT), f"a transcript block must open with its command: {lines[0]!r}"
        command = ""
        output: list[str] = []
        for line in [*lines, PROMPT]:
            if line.startswith(PROMPT):
                if command:
                    found.append(Example(command, tuple(output)))
                command, output = line[len(PROMPT):], []
            else:
                output.append(line)
    return found


def normalised(lines: list[str] | tuple[str, ...]) -> list[str]:
    out = []
    for line in lines:
        for pattern, replacement in VARYING:
            line = pattern.sub(replacement, line)
        out.append(line.rstrip())
    return out


def terminal_view(lines: list[str]) -> list[str]:
    """Of consecutive progress lines, the last: a terminal redraws the line in place."""
    return [line for i, line in enumerate(lines)
            if not (PROGRESS.match(line) and i + 1 < len(lines) and PROGRESS.match(lines[i + 1]))]


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line, where an expected `...` line matches any run of lines (zero or more)."""

    @cache
    def at(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i] == ANY_LINES:
            return at(i + 1, j) or (j < len(actual) and at(i, j + 1))
        return j < len(actual) and expected[i] == actual[j] and at(i + 1, j + 1)

    return at(0, 0)


def assert_shown(example: Example, output: str) -> None:
    expected, actual = normalised(example.expected), normalised(terminal_view(output.rstrip("\n").split("\n")))
    if not matches(expected, actual):
        diff = "\n".join(difflib.unified_diff(expected, actual, "README.md", "real output", lineterm=""))
        pytest.fail(f"README's output of `{example.command}` differs from a real run "
                    f"(update README.md's block):\n{diff}", pytrace=False)


def write_inputs(folder: Path) -> None:
    for name, body in input_files(readme_text()).items():
        (folder / name).write_text(body, encoding="utf-8")


EXAMPLES = examples(readme_text())
IN_PROCESS = [e for e in EXAMPLES if e.subcommand not in SPAWNED]
SWEEPS = [e for e in EXAMPLES if e.subcommand in SPAWNED]


def run_in_process(example: Example) -> tuple[int, str]:
    from rmqsim import cli

    shown = io.StringIO()  # stdout and stderr as a terminal interleaves them
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        code = cli.main(example.argv[1:])
    return code, shown.getvalue()


@pytest.fixture(scope="module")
def transcript(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, str]]:
    """Every in-process example run once, in README order, in one directory: exit code and output
    (the list follows IN_PROCESS)."""
    work = tmp_path_factory.mktemp("readme")
    write_inputs(work)
    with contextlib.chdir(work):
        return [run_in_process(e) for e in IN_PROCESS]


def test_the_readme_shows_the_first_scenario():
    """The parser finds what the README's first-scenario section shows (a renamed block is caught here,
    not skipped silently)."""
    assert {"consumer_crash.yaml", "sweep.yaml"} <= set(input_files(readme_text()))
    commands = [e.command for e in EXAMPLES]
    assert "rmqsim run consumer_crash.yaml --seed 1" in commands
    assert {"validate", "run", "explain", "sweep"} <= {e.subcommand for e in EXAMPLES}
    assert any("--fault" in e.argv for e in EXAMPLES) and any("--cause" in e.argv for e in EXAMPLES)
    assert all(e.expected for e in EXAMPLES), "a `$ rmqsim` line with no output shown"


@pytest.mark.parametrize("index", range(len(IN_PROCESS)), ids=[e.command for e in IN_PROCESS])
def test_example_output_is_a_real_run(index: int, transcript: list[tuple[int, str]]):
    example, (code, output) = IN_PROCESS[index], transcript[index]
    assert code == 0, f"`{example.command}` exited {code}:\n{output}"
    assert_shown(example, output)


# (line prefix, the digit (group 1) the bite test changes): a count, the coverage, both digests
PLANTED = (("  messages sent", r"sent +(\d)"), ("coverage:", r" of (\d)"),
           ("scenario:", r"resolved sha256: [0-9a-f]*?(\d)"), ("trace sha256:", r"sha256: [0-9a-f]*?(\d)"))


def test_a_changed_count_or_digest_is_caught(transcript: list[tuple[int, str]]):
    """The comparison bites, on the real run's own output (whatever the README says): it matches
    itself, and stops matching when one digit of a count, of the coverage or of the trace digest
    changes; only the wall time and the run directory's time stamp may differ; `...` stands for any
    lines, never for a changed one."""
    run = next(i for i, e in enumerate(IN_PROCESS) if e.subcommand == "run")
    real = terminal_view(transcript[run][1].rstrip("\n").split("\n"))
    actual = normalised(real)
    assert matches(normalised(real), actual)
    for prefix, digit in PLANTED:
        i = next(k for k, line in enumerate(real) if line.startswith(prefix))
        at = re.search(digit, real[i])
        assert at, f"{digit!r} not in {real[i]!r}"
        changed = real[i][:at.start(1)] + str((int(at.group(1)) + 1) % 10) + real[i][at.end(1):]
        assert not matches(normalised([*real[:i], changed, *real[i + 1:]]), actual), changed
    wrote = real[-1]
    assert wrote.startswith("wrote runs/")
    elsewhen = re.sub(r"\d{8}T\d{6}Z", "20000101T000000Z", re.sub(r"\([\d.]+ s wall, [\d.,]+×", "(9.999 s wall, 1.5×", wrote))
    assert elsewhen != wrote and matches(normalised([*real[:-1], elsewhen]), actual)
    assert matches([actual[0], ANY_LINES, actual[-1]], actual)
    assert not matches([actual[0], ANY_LINES, "something else"], actual)


@pytest.mark.slow  # a JVM and six runs (30-100 s): scripts/test.sh --slow, not in CI
@pytest.mark.parametrize("example", SWEEPS, ids=[e.command for e in SWEEPS])
def test_sweep_example_is_a_real_sweep(example: Example, tmp_path: Path):
    """The sweep on local Spark in a child process (its own process group, killed on a timeout):
    rmqsim's messages on stdout and stderr together in order (the child points sys.stderr at
    stdout), the JVM's own start-up lines on the child's real stderr, not compared."""
    write_inputs(tmp_path)
    child = ("import sys\nsys.stderr = sys.stdout\nimport rmqsim.cli\n"
             f"sys.exit(rmqsim.cli.main({example.argv[1:]!r}))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1", **scratch_env(tmp_path / "tmp"))
    proc = subprocess.Popen([sys.executable, "-c", child], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        output, jvm = proc.communicate(timeout=SWEEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, f"`{example.command}` exited {proc.returncode}:\n{output}\n{jvm[-3000:]}"
    assert_shown(example, output)
