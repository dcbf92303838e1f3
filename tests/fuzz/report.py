"""`python -m tests.fuzz.report FILE`: the table of fuzz outcomes by mutation kind (FILE is what
RMQSIM_FUZZ_REPORT collected: one JSON line per example)."""

from __future__ import annotations

import json
import sys
from collections import Counter


def table(lines: list[str]) -> str:
    counts: Counter = Counter()
    outcomes: dict[str, None] = {}
    for line in lines:
        row = json.loads(line)
        counts[(row["kind"], row["outcome"])] += 1
        outcomes.setdefault(row["outcome"], None)
    kinds = sorted({k for k, _o in counts})
    head = ["kind", *outcomes, "total"]
    rows = [[k, *(str(counts[(k, o)]) for o in outcomes), str(sum(counts[(k, o)] for o in outcomes))] for k in kinds]
    rows.append(["all", *(str(sum(counts[(k, o)] for k in kinds)) for o in outcomes), str(sum(counts.values()))])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([fmt(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(fmt, rows)])


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        print(table(f.read().splitlines()))
