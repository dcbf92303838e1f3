"""Key paths (`cluster.brokers[1].store.flush_disk_type`) and `--set KEY.PATH=VALUE` overrides.

One grammar for the command line's `--set` and a sweep file's `set:`, `grid:` and `zip:` keys:

    path  = key ( "." key | "[" index "]" )*
    key   = a letter or "_", then letters, digits, "_"      (at most 64 characters)
    index = 0 | 1 … 999999                                  (no sign, no leading zeros)

A path has at most `MAX_YAML_DEPTH` parts (no document is deeper, so a longer path names
nothing). `parse(text)` returns the parts (`['cluster', 'brokers', 1, 'store',
'flush_disk_type']`) or raises `KeyPathError` with a short reason. `apply_override(data, item)`
sets one value in a scenario tree: the value is read as YAML with sim/inputs.py's rules (so
`duration_ms=1:30`, `seed=0x1F` and a 5,000-digit number are refused there as in a file),
missing mappings on the way are created, list elements must exist. It returns the problems
instead of raising, so a caller can report them with the others. Messages show a path cut to
`SHOWN_CHARS` characters (`shown`).
"""

from __future__ import annotations

import re
from typing import Any

from sim.inputs import InputProblem, load_yaml, short
from sim.limits import MAX_SET_CHARS, MAX_YAML_DEPTH

SHOWN_CHARS = 100  # a key path in a message

_TOKEN = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]{0,63})|\[(0|[1-9][0-9]{0,5})\]")


class KeyPathError(ValueError):
    """A key path that does not follow the grammar above."""


def parse(text: str) -> list[str | int]:
    if not isinstance(text, str) or not text:
        raise KeyPathError("an empty key path")
    parts: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or (pos == 0 and match.group(1) is None) or text[pos] == "."[:pos == 0] \
                or (pos > 0 and text[pos] not in ".["):
            raise KeyPathError(f"cannot read the key path at {short(text[pos:pos + 20])} (expected "
                               "names joined by '.' and list indexes like [0], e.g. producers[0].rate_per_s)")
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        if len(parts) > MAX_YAML_DEPTH:
            raise KeyPathError(f"more than {MAX_YAML_DEPTH} names and indexes (no scenario is that deep)")
        pos = match.end()
    return parts


def render(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def shown(parts: list[str | int]) -> str:
    """`render(parts)` for a message: cut to SHOWN_CHARS characters."""
    text = render(parts)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def split_item(item: str) -> tuple[list[str | int], Any]:
    """`KEY.PATH=VALUE` → (parts, value read as YAML); KeyPathError with the reason."""
    if len(item) > MAX_SET_CHARS:
        raise KeyPathError(f"longer than {MAX_SET_CHARS:,} characters")
    if "=" not in item:
        raise KeyPathError("expected KEY.PATH=VALUE")
    path, raw = item.split("=", 1)
    parts = parse(path.strip())
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except InputProblem as exc:
        if exc.reason.startswith(("YAML syntax error", "not valid YAML")):
            raise KeyPathError(f"the value is not valid YAML ({exc.where}: {exc.reason})") from None
        where = f"{exc.where}: " if "\n" in raw.strip() else ""  # a one-line value: its position says nothing
        raise KeyPathError(f"cannot read the value ({where}{exc.reason})") from None
    return parts, value


def apply_override(data: dict, item: str) -> list[str]:
    """Set one `KEY.PATH=VALUE` in `data` (in place); the problems, if any."""
    label = _label(item.split("=", 1)[0])
    try:
        parts, value = split_item(item)
    except KeyPathError as exc:
        return [f"--set {label}: {exc}"]
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        node = _child(node, part, parts[i + 1])
        if node is None:
            return [f"--set {shown(parts)}: no element {shown(parts[:i + 1])} in this scenario"]
    last = parts[-1]
    if isinstance(last, int) and not (isinstance(node, list) and last < len(node)):
        return [f"--set {shown(parts)}: no element {shown(parts)} in this scenario"]
    if isinstance(last, str) and not isinstance(node, dict):
        return [f"--set {shown(parts)}: {shown(parts[:-1]) or 'the scenario'} is not a mapping"]
    node[last] = value
    return []


def _label(text: str) -> str:
    """The user's key path as typed, unless it could garble the output (then quoted and cut)."""
    return text if len(text) <= 80 and text.isprintable() and text.isascii() else short(text, 80)


def _child(node: Any, part: str | int, next_part: str | int) -> Any:
    """The container at `node[part]`, creating a missing mapping; None if there is none."""
    if isinstance(part, int):
        return node[part] if isinstance(node, list) and part < len(node) else None
    if not isinstance(node, dict):
        return None
    if part not in node and isinstance(next_part, str):
        node[part] = {}
    child = node.get(part)
    return child if isinstance(child, dict | list) else None
