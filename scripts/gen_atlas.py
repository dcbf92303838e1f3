"""The known-behaviours atlas (issue 42): scenarios/atlas/NN_*.yaml → docs/atlas/results.json → docs/atlas.md.

    .venv/bin/python scripts/gen_atlas.py sweep [--seeds 5] [--only 01,10] [--jobs 2]   # scripts/atlas.sh
    .venv/bin/python scripts/gen_docs.py                                                  # writes docs/atlas.md

Each atlas scenario opens with a header of YAML comments, one `# key: value` line per key, in
this order (continuation lines start with `#   `): `atlas` (its number NN, as in the file name),
`issues`, `reported`, `versions`, `mechanism`, `expect` (sign and bound in words) and `explain`
(an `rmqsim explain RUN ...` command, RUN standing for the directory of the seed-1 run).

`sweep` runs every entry (or those named by `--only`) on seeds 1..N with `rmqsim run`, seed 1
with `--trace` and the entry's explain command on it, and writes docs/atlas/results.json: per
entry the SHA-256 of its scenario file, each seed's verdict and `expectations` (metric, bound,
actual value) from its summary.json, and the explain command's real output. Entries not rerun
keep their results. `atlas_page()` (called by scripts/gen_docs.py, which checks the page is
current) builds docs/atlas.md from the headers and that file alone, without simulating.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ATLAS_DIR = "scenarios/atlas"
RESULTS = "docs/atlas/results.json"
HEADER_KEYS = ("atlas", "issues", "reported", "versions", "mechanism", "expect", "explain")
FILE_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.yaml$")
EXPLAIN_LINES_SHOWN = 24
REPO_ISSUE = re.compile(r"(?:(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+))?#(?P<num>\d+)")


class AtlasError(Exception):
    """A malformed atlas file or results file: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Entry:
    """One atlas scenario: its file (relative to the repository) and its header fields."""

    path: str
    number: str
    header: dict[str, str]

    @property
    def explain_args(self) -> list[str]:
        """The explain command's arguments after `rmqsim explain RUN`."""
        words = self.header["explain"].split()
        return words[3:]


def parse_header(path: Path, rel: str) -> dict[str, str]:
    """The header fields of one atlas file, in HEADER_KEYS order; AtlasError naming the file and
    the first field that is missing, out of order or empty."""
    fields: dict[str, str] = {}
    last: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("#   ") and last is not None:
            fields[last] += " " + line[4:].strip()
            continue
        match = re.match(r"^# ([a-z]+): ?(.*)$", line)
        if match is None:
            raise AtlasError(f"{rel}: header line is neither '# key: value' nor a '#   ' continuation: {line!r}")
        last = match.group(1)
        fields[last] = match.group(2).strip()
    keys = list(fields)
    if keys != list(HEADER_KEYS):
        raise AtlasError(f"{rel}: header keys are {keys}, expected exactly {list(HEADER_KEYS)} in that order")
    empty = [k for k, v in fields.items() if not v]
    if empty:
        raise AtlasError(f"{rel}: header field {empty[0]} is empty")
    if not fields["explain"].startswith("rmqsim explain RUN"):
        raise AtlasError(f"{rel}: explain: must start with 'rmqsim explain RUN' (RUN: the seed-1 run directory)")
    return fields


def entries(root: Path) -> list[Entry]:
    """Every scenarios/atlas/NN_*.yaml, in number order; AtlasError on a misnamed or malformed file."""
    folder = root / ATLAS_DIR
    found: list[Entry] = []
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        rel = f"{ATLAS_DIR}/{path.name}"
        name = FILE_NAME.match(path.name)
        if name is None:
            raise AtlasError(f"{rel}: an atlas file is named NN_short_name.yaml (two digits, lower-case name)")
        header = parse_header(path, rel)
        if header["atlas"] != name.group(1):
            raise AtlasError(f"{rel}: header atlas: {header['atlas']} differs from the file's number {name.group(1)}")
        found.append(Entry(rel, name.group(1), header))
    numbers = [e.number for e in found]
    duplicated = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicated:
        raise AtlasError(f"{ATLAS_DIR}: atlas number {duplicated[0]} is used by more than one file")
    return found


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_results(root: Path) -> dict[str, Any]:
    path = root / RESULTS
    if not path.is_file():
        return {"seeds": 0, "entries": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AtlasError(f"{RESULTS}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise AtlasError(f"{RESULTS}: expected an object with an 'entries' object")
    return data


# ---------------------------------------------------------------------------------------------
# the sweep


def _rmqsim(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmqsim.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=3600)


def run_seed(root: Path, entry: Entry, seed: int, work: Path) -> dict[str, Any]:
    """Run one entry on one seed (seed 1 with --trace) and return its verdict and expectations."""
    out = work / f"{entry.number}-seed-{seed}"
    args = ["run", entry.path, "--seed", str(seed), "--out", str(out)] + (["--trace"] if seed == 1 else [])
    proc = _rmqsim(args, root)
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        raise AtlasError(f"{entry.path} seed {seed}: rmqsim run failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-400:]}")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    return {"seed": seed, "verdict": summary["verdict"], "failures": summary.get("failures", []),
            "expectations": [{"metric": e["metric"], "expect": e["expect"], "actual": e["actual"]}
                             for e in summary.get("expectations", [])]}


def explain_output(root: Path, entry: Entry, work: Path) -> str:
    """The entry's explain command, run on its seed-1 run (written with --trace by run_seed)."""
    proc = _rmqsim(["explain", str(work / f"{entry.number}-seed-1"), *entry.explain_args], root)
    if proc.returncode != 0:
        raise AtlasError(f"{entry.path}: its explain command failed (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return proc.stdout.rstrip("\n")


def sweep(root: Path, seeds: int, only: set[str] | None, jobs: int) -> dict[str, Any]:
    """Run the chosen entries on seeds 1..`seeds`, merge into the results file and write it."""
    chosen = [e for e in entries(root) if only is None or e.number in only]
    results = load_results(root)
    if only is None:
        results["entries"] = {}
    results["seeds"] = seeds
    with tempfile.TemporaryDirectory(prefix="rmqsim-atlas-") as tmp:
        work = Path(tmp)
        tasks = [(e, s) for e in chosen for s in range(1, seeds + 1)]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            runs = list(pool.map(lambda t: run_seed(root, t[0], t[1], work), tasks))
        for entry in chosen:
            mine = [r for (e, _), r in zip(tasks, runs, strict=True) if e is entry]
            results["entries"][entry.number] = {
                "file": entry.path, "scenario_sha256": file_sha256(root / entry.path), "runs": mine,
                "explain": {"command": entry.header["explain"], "output": explain_output(root, entry, work)}}
            print(f"{entry.path}: " + ", ".join(f"seed {r['seed']} {r['verdict']}" for r in mine))
    known = {e.number for e in entries(root)}
    results["entries"] = {k: v for k, v in sorted(results["entries"].items()) if k in known}
    path = root / RESULTS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return results


# ---------------------------------------------------------------------------------------------
# the page


def cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def issue_links(text: str) -> str:
    """`#354, alibaba/rocketmq#399` → Markdown links to the GitHub threads (apache/rocketmq by default)."""
    def link(match: re.Match[str]) -> str:
        repo = match.group("repo") or "apache/rocketmq"
        return f"[{match.group(0)}](https://github.com/{repo}/issues/{match.group('num')})"
    return REPO_ISSUE.sub(link, text)


def _number(value: float) -> str:
    """An integer as written; a fraction to 3 significant digits; a large value to a whole number."""
    if float(value).is_integer() or abs(value) >= 100:
        return f"{round(value):,}"
    return f"{value:.3g}"


def _bound(spec: dict[str, Any]) -> str:
    low, high = spec.get("min"), spec.get("max")
    if low is not None and low == high:
        return f"= {_number(low)}"
    return " and ".join(([f"≥ {_number(low)}"] if low is not None else []) +
                        ([f"≤ {_number(high)}"] if high is not None else []))


def measured(result: dict[str, Any] | None, entry: Entry, root: Path) -> str:
    """`valid 5/5; metric lo–hi (bound); ...` over the seeds, or why there is nothing to show."""
    if result is None:
        return "not measured yet (run scripts/atlas.sh)"
    if result.get("scenario_sha256") != file_sha256(root / entry.path):
        return "stale: the scenario changed since the last sweep (run scripts/atlas.sh)"
    runs = result["runs"]
    valid = sum(1 for r in runs if r["verdict"] == "valid")
    parts = [f"valid {valid}/{len(runs)}"]
    metrics: dict[str, list[Any]] = {}
    bounds: dict[str, dict[str, Any]] = {}
    for run in runs:
        for e in run["expectations"]:
            metrics.setdefault(e["metric"], []).append(e["actual"])
            bounds[e["metric"]] = e["expect"]
    for metric, values in metrics.items():
        known = [v for v in values if v is not None]
        span = "n/a" if not known else (_number(min(known)) if min(known) == max(known)
                                        else f"{_number(min(known))}–{_number(max(known))}")
        parts.append(f"`{metric}` {span} ({_bound(bounds[metric])})")
    return "; ".join(parts)


def atlas_page(root: Path) -> str:
    """docs/atlas.md from the atlas headers and docs/atlas/results.json (no simulation)."""
    found = entries(root)
    results = load_results(root)["entries"]
    seeds = load_results(root).get("seeds", 0)
    out = ["<!-- GENERATED by scripts/gen_docs.py from scenarios/atlas/*.yaml headers and docs/atlas/results.json "
           "(scripts/atlas.sh): do not edit; rerun them. -->\n\n",
           "# Known-behaviours atlas\n\n",
           "[README](../README.md) · [running](running.md) · [explain and the trace](explain-and-trace.md) · "
           "[checkers and causes](checkers-and-causes.md)\n\n",
           "Losses, duplicates, check storms and stalls that RocketMQ users reported in the issue tracker, "
           "each reproduced — or shown fixed — by a scenario in `scenarios/atlas/` whose `expect:` states the "
           "sign and bound of the behaviour (not a pinned number). The header of each file says what users "
           "reported, the versions it applies to (the model follows 4.9.8 and 5.3.3), the mechanism, and where "
           "the report was a misreading of the code. **measured** is the range of each expected metric over "
           f"seeds 1–{seeds} (`scripts/atlas.sh` runs them and writes `docs/atlas/results.json`; "
           "`tests/test_atlas.py` runs every entry on seed 1).\n\n",
           "| # | issue(s) | what users saw | versions | mechanism | measured | reproduce |\n",
           "|---|---|---|---|---|---|---|\n"]
    for entry in found:
        h = entry.header
        out.append(f"| [{entry.number}](#{entry.number}) | {cell(issue_links(h['issues']))} | {cell(h['reported'])} | "
                   f"{cell(h['versions'])} | {cell(h['mechanism'])} | "
                   f"{cell(measured(results.get(entry.number), entry, root))} | "
                   f"`rmqsim run {entry.path} --seed 1` |\n")
    for entry in found:
        out.append(_paragraph(entry, results.get(entry.number)))
    return "".join(out)


def _paragraph(entry: Entry, result: dict[str, Any] | None) -> str:
    h = entry.header
    name = Path(entry.path).stem
    text = [f"\n<a id=\"{entry.number}\"></a>\n## {entry.number} {name[3:].replace('_', ' ')}\n\n",
            f"{issue_links(h['issues'])}. {h['reported']} **Versions:** {h['versions']}. "
            f"**Mechanism:** {h['mechanism']} **Expect:** {h['expect']}\n\n"]
    if result is None:
        return "".join(text) + "(no explain output yet: run scripts/atlas.sh)\n"
    lines = result["explain"]["output"].splitlines()
    shown = lines[:EXPLAIN_LINES_SHOWN] + ([f"... ({len(lines) - EXPLAIN_LINES_SHOWN} more lines)"]
                                          if len(lines) > EXPLAIN_LINES_SHOWN else [])
    command = h["explain"].replace("rmqsim explain RUN", "rmqsim explain RUN_DIR")
    text += ["```\n", f"$ rmqsim run {entry.path} --seed 1 --trace --out RUN_DIR\n", f"$ {command}\n",
             *(line + "\n" for line in shown), "```\n"]
    return "".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("sweep", help="run the atlas on seeds 1..N and write docs/atlas/results.json")
    run.add_argument("--seeds", type=int, default=5)
    run.add_argument("--only", help="comma-separated atlas numbers to rerun (others keep their results)")
    run.add_argument("--jobs", type=int, default=2)
    sub.add_parser("check", help="parse every atlas header (exit 2 naming the file on a problem)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(f"{len(entries(ROOT))} atlas entries, headers complete")
            return 0
        only = set(args.only.split(",")) if args.only else None
        results = sweep(ROOT, args.seeds, only, args.jobs)
    except AtlasError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bad = [f"{k} seed {r['seed']}: {r['failures']}" for k, v in results["entries"].items() for r in v["runs"]
           if r["verdict"] != "valid"]
    for line in bad:
        print(f"not valid: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
