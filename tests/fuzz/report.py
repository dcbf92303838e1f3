"""`python -m tests.fuzz.report FILE`: tables of fuzz outcomes by mutation kind, one per surface
(FILE is what RMQSIM_FUZZ_REPORT collected: one JSON line per example). Surfaces: scenario and
sweep files loaded in-process, the same through the CLI, and runs of accepted scenarios."""

from __future__ import annotations

import json
import sys
from collections import Counter

from tests.fuzz.conftest import SWEEPS

SWEEP_FILES = {p.name for p in SWEEPS}


def surface(row: dict[str, str]) -> str:
    target = row["target"]
    cli = target.startswith("cli:")
    name = target.removeprefix("cli:").split(" ")[0]
    if row["kind"].startswith("run:"):
        return "runs of short scenarios with drawn fault schedules"
    if name in SWEEP_FILES:
        return "rmqsim sweep --dry-run (subprocess)" if cli else "sweep files, load_sweep (in-process)"
    return "rmqsim validate (subprocess)" if cli else "scenario files, scenario.load (in-process)"


def table(rows: list[dict[str, str]]) -> str:
    counts: Counter = Counter((r["kind"].removeprefix("run:"), r["outcome"]) for r in rows)
    outcomes = list(dict.fromkeys(r["outcome"] for r in rows))
    kinds = sorted({k for k, _o in counts})
    head = ["kind", *outcomes, "total"]
    body = [[k, *(str(counts[(k, o)]) for o in outcomes), str(sum(counts[(k, o)] for o in outcomes))] for k in kinds]
    body.append(["all", *(str(sum(counts[(k, o)] for k in kinds)) for o in outcomes), str(len(rows))])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


def main(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    by_surface: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_surface.setdefault(surface(row), []).append(row)
    return "\n\n".join(f"{name}\n{table(group)}" for name, group in sorted(by_surface.items()))


if __name__ == "__main__":
    print(main(sys.argv[1]))
