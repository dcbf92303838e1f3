"""A sweep parameter's values: their type as a column of the runs table (`param_type`), and each
value as the `--set` item that applies it (`override_item`). Read by the sweep file's model
(analysis/sweeps/spec.py) and by its checks (analysis/sweeps/checks.py), which sit below it.
"""

from __future__ import annotations

from typing import Any

from sim.inputs import dump_flow

Scalar = int | float | str | bool


def override_item(key: str, value: Any) -> str:
    """`key=value` with the value in YAML flow style, read back by `apply_override` as the same
    value (1e-05 stays a float, 'ASYNC_FLUSH' and '1e3' strings, lists and mappings stay whole:
    sim/inputs.py: dump_flow)."""
    return f"{key}={dump_flow(value)}"


def param_type(values: list[Scalar]) -> tuple[str, str]:
    """The runs-table type of a parameter's values, and a problem if they mix types."""
    kinds = {("bool" if isinstance(v, bool) else type(v).__name__) for v in values}
    if kinds <= {"int"}:
        return "int", ""
    if kinds <= {"int", "float"}:
        return "float", ""
    if len(kinds) == 1:
        return kinds.pop(), ""
    return "str", f"values mix types ({', '.join(sorted(kinds))}); a parameter's values share one type"
