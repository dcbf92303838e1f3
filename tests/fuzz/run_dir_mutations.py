"""Damaged copies of a good run directory, and what rmqsim's read-back commands do with them.

The run-directory fuzzer (tests/fuzz/test_fuzz_run_dirs.py) copies one good run (`rmqsim run
--trace`) and damages one of the files it holds:

- a JSON file (`JSON_FILES`): a value at a key path replaced by a raw JSON token of another
  type (`TOKENS`: numbers out of range, NaN, a 5,000-digit integer, text, lists, objects, null,
  booleans, nesting past the reader's depth bound), a key deleted, or the file cut at a byte
  (`edit_json`); or the whole file replaced (`WHOLE_FILE`: 100,000 `[`, bytes that are not
  UTF-8, an empty file, a link to /etc/passwd or /dev/zero, a FIFO, a folder);
- a trace file (`TRACE_DAMAGES`): cut, garbage bytes (a Parquet frame around them), its data
  pages overwritten (frame and footer intact), an 8 GiB sparse file, another kind's file under
  its name, a file of a kind rmqsim does not write, a link, a FIFO, a folder named `x.parquet`.

`outcomes(run, good, scratch, report=...)` then runs, in this process, `rmqsim explain RUN
p-1-5`, `rmqsim explain RUN --fault 0`, `rmqsim diff RUN GOOD`, `rmqsim report RUN --out ...`
and `rmqsim.load(RUN)` with `repr`, `.summary`, `.frame("producer.sent")` and `.explain("p-1-5")`,
each an `Outcome` (exit code or exception class, output, wall time), never raising: an
unexpected exception is an outcome with its traceback. A FIFO or a link to /dev/zero would hang
or flood a reader that followed it, so those directories go through `main` (`python -m
tests.fuzz.run_dir_mutations ...`) in a subprocess with a timeout: one JSON line per outcome, a
`start` line before each command (the last one names a command that hung).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.mutations import get, walk

MANIFEST = ".rmqsim-manifest.json"
JSON_FILES = ("summary.json", "run_meta.json", "scenario.resolved.json", MANIFEST)
WHOLE_FILE = ("deep", "not_utf8", "empty", "link_passwd", "link_dev_zero", "fifo", "directory")
TRACE_DAMAGES = ("truncated", "garbage", "pages_overwritten", "sparse_8gib", "swapped_kind", "unknown_kind",
                 "link_passwd", "link_dev_zero", "fifo", "directory")
HAZARDOUS = ("link_dev_zero", "fifo")  # a reader that followed them would block or read forever: subprocess
TRACE_KIND = "producer.sent"  # the kind every command reads (explain, report, `.frame`)
OTHER_KIND = "consumer.consumed"  # swapped in under TRACE_KIND's name
MESSAGE = "p-1-5"
SPARSE_BYTES = 8 << 30
DEPTH_PAST_BOUND = 70  # the reader's bound is 64 (sim/readback.py MAX_JSON_DEPTH)
PLACEHOLDER = "RMQSIM-FUZZ-PLACEHOLDER"
TOKENS = (  # raw JSON text put at a key path (some of it JSON only as Python's parser reads it)
    "0", "-1", "1.5", "-0.0", "1e400", "NaN", "-Infinity", "9223372036854775808", "1" + "0" * 30, "1" + "0" * 5000,
    '"abc"', '""', '"p-1-5"', '"\\u0000\\ud800"', '"' + "f" * 64 + '"', "[]", "[1, [2]]", "{}", '{"a": null}',
    "null", "true", "false", "[" * DEPTH_PAST_BOUND + "]" * DEPTH_PAST_BOUND,
    '{"a": ' * DEPTH_PAST_BOUND + "1" + "}" * DEPTH_PAST_BOUND,
)
MAX_LIST_INDEX = 2  # key paths into the first elements of a list only (per-second lists are long)


@dataclass
class Outcome:
    command: str
    code: int | None  # the CLI's exit code; None for the Python API
    error: str  # the Python API's exception class ("" if it answered); "Traceback" for an unexpected one
    output: str  # stdout and stderr (the CLI), the exception's text (the API)
    elapsed_s: float


# ------------------------------------------------------------------ damaging a copy

def fresh_copy(good: Path, folder: Path) -> Path:
    run = folder / "run"
    shutil.copytree(good, run, symlinks=True)
    return run


def key_paths(doc: Any) -> list[tuple]:
    """Every key path of a JSON document (the root included), into the first elements of lists."""
    return [path for path, _value in walk(doc)
            if not any(isinstance(part, int) and part > MAX_LIST_INDEX for part in path)]


def edit_json(path: Path, edit: tuple) -> str:
    """Apply `edit` to the JSON file `path`: ("token", key_path, raw_json), ("delete", key_path)
    or ("truncate", byte); returns a note for failure messages."""
    how = edit[0]
    if how == "truncate":
        raw = path.read_bytes()
        path.write_bytes(raw[:edit[1]])
        return f"{path.name} cut at byte {edit[1]} of {len(raw)}"
    doc = json.loads(path.read_text(encoding="utf-8"))
    key_path = edit[1]
    if how == "delete":
        parent = get(doc, key_path[:-1])
        del parent[key_path[-1]]
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        return f"{path.name}: {_dotted(key_path)} deleted"
    token = edit[2]
    if key_path:
        get(doc, key_path[:-1])[key_path[-1]] = PLACEHOLDER
        text = json.dumps(doc, indent=1).replace(json.dumps(PLACEHOLDER), token)
    else:
        text = token
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return f"{path.name}: {_dotted(key_path)} = {token[:60]}"


def json_type(value: Any) -> str:
    """The JSON type of a parsed value: null, boolean, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def token_type(token: str) -> str:
    """The JSON type of one of `TOKENS` (a number past Python's digit limit is still a number)."""
    try:
        return json_type(json.loads(token))
    except ValueError:
        return "number"


def _dotted(key_path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in key_path).lstrip(".") or "(top level)"


def replace_whole(path: Path, how: str) -> None:
    """Put something else in place of the file `path` (`WHOLE_FILE`)."""
    _remove(path)
    if how == "deep":
        path.write_text("[" * 100_000)
    elif how == "not_utf8":
        path.write_bytes(b'{"seed": "\xff\xfe\xc3\x28"}')
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "link_passwd":
        path.symlink_to("/etc/passwd")
    elif how == "link_dev_zero":
        path.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "directory":
        path.mkdir()
        (path / "x.json").write_text("{}")
    else:
        raise ValueError(how)


def damage_trace(run: Path, how: str) -> Path:
    """Damage the trace of `run` (`TRACE_DAMAGES`); returns the file that was damaged or added."""
    trace = run / "trace"
    target = trace / f"{TRACE_KIND}.parquet"
    if how == "truncated":
        raw = target.read_bytes()
        target.write_bytes(raw[:len(raw) // 2])
    elif how == "garbage":
        size = target.stat().st_size
        footer = (100).to_bytes(4, "little")  # a footer length that fits: pyarrow parses garbage as one
        target.write_bytes((b"PAR1" + bytes(range(256)) * (size // 256 + 1))[:size - 8] + footer + b"PAR1")
    elif how == "pages_overwritten":  # the frame and footer intact: pyarrow decodes pages of garbage
        raw = bytearray(target.read_bytes())
        raw[64:len(raw) // 2] = bytes(range(256)) * ((len(raw) // 2 - 64) // 256) + bytes((len(raw) // 2 - 64) % 256)
        target.write_bytes(bytes(raw))
    elif how == "sparse_8gib":
        os.truncate(target, SPARSE_BYTES)
    elif how == "swapped_kind":
        target.unlink()
        (trace / f"{OTHER_KIND}.parquet").rename(target)
    elif how == "unknown_kind":
        target = trace / "broker.nonexistent_kind.parquet"
        shutil.copyfile(trace / f"{TRACE_KIND}.parquet", target)
    elif how == "directory":
        target = trace / "x.parquet"
        target.mkdir()
    else:
        replace_whole(target, how)
    return target


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# ------------------------------------------------------------------ running the commands

def outcomes(run: Path, good: Path, scratch: Path, *, report: bool = True) -> list[Outcome]:
    """Every read-back command on `run` (module docstring); `report`: also `rmqsim report`."""
    commands = [["explain", str(run), MESSAGE], ["explain", str(run), "--fault", "0"], ["diff", str(run), str(good)]]
    if report:
        commands.append(["report", str(run), "--out", str(scratch / "report")])
    found = []
    for argv in commands:
        _started(" ".join(argv[:1] + argv[2:]))
        found.append(cli_outcome(argv))
    _started("load")
    found.append(load_outcome(run))
    return found


def cli_outcome(argv: list[str]) -> Outcome:
    """`rmqsim ARGV` in this process: its exit code and output (a traceback as a real process prints it)."""
    from rmqsim import cli

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:  # noqa: BLE001 - what an uncaught exception would print, exit 1
            err.write(traceback.format_exc())
            code = 1
    return Outcome(" ".join(argv[:1] + argv[2:]), code, "", out.getvalue() + err.getvalue(),
                   time.monotonic() - started)


def load_outcome(run: Path) -> Outcome:
    """`rmqsim.load(RUN)`, then `repr`, `.summary`, `.frame(...)` and `.explain(...)` each on its own:
    the first documented error (its class), or "Traceback" and the traceback for any other."""
    import rmqsim
    from analysis.checkers.frames import FrameError
    from analysis.checkers.trace_store import TraceError
    from analysis.explain.source import ExplainError

    documented = (ExplainError, TraceError, FrameError)
    started = time.monotonic()
    steps = [lambda result: repr(result), lambda result: result.summary,
             lambda result: result.frame(TRACE_KIND), lambda result: result.explain(MESSAGE)]
    errors = []
    try:
        result = rmqsim.load(run)
    except documented as exc:
        return Outcome("load", None, type(exc).__name__, str(exc), time.monotonic() - started)
    except BaseException:  # noqa: BLE001 - an undocumented exception is the finding
        return Outcome("load", None, "Traceback", traceback.format_exc(), time.monotonic() - started)
    for step in steps:
        try:
            step(result)
        except documented as exc:
            errors.append((type(exc).__name__, str(exc)))
        except BaseException:  # noqa: BLE001
            errors.append(("Traceback", traceback.format_exc()))
    worst = next((e for e in errors if e[0] == "Traceback"), errors[0] if errors else ("", ""))
    return Outcome("load", None, worst[0], "\n".join(text for _cls, text in errors), time.monotonic() - started)


def _started(command: str) -> None:
    """In the subprocess driver, a line naming the command about to run (a hang is then named)."""
    if os.environ.get("RMQSIM_FUZZ_DRIVER"):
        print(json.dumps({"start": command}), file=sys.__stdout__, flush=True)


def main(argv: list[str]) -> int:
    """`python -m tests.fuzz.run_dir_mutations GOOD SCRATCH CASE...`, each CASE `run:RUN_DIR` (every
    command), `run-no-report:RUN_DIR` (all but the report) or `sweep:SWEEP_DIR:RUN_ID` (`rmqsim
    diff GOOD SWEEP_DIR:RUN_ID`): a `{"case": i}` line as each case starts, one JSON line per
    outcome, and `{"done": true}` after the last."""
    good, scratch = Path(argv[0]), Path(argv[1])
    os.environ["RMQSIM_FUZZ_DRIVER"] = "1"
    for i, case in enumerate(argv[2:]):
        print(json.dumps({"case": i}), flush=True)
        what, _, where = case.partition(":")
        if what == "sweep":
            _started(f"diff {where}")
            found = [cli_outcome(["diff", str(good), where])]
        else:
            found = outcomes(Path(where), good, scratch / str(i), report=what == "run")
        for outcome in found:
            print(json.dumps({"case": i, **asdict(outcome)}), flush=True)
    print(json.dumps({"done": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
