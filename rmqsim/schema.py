"""`rmqsim schema`: JSON Schemas of scenario and sweep files, generated from their pydantic models.

One JSON document, `{"scenario": <JSON Schema>, "sweep": <JSON Schema>}` (draft 2020-12), so an
editor can validate and complete both kinds of file (e.g. the YAML language server's
`# yaml-language-server: $schema=...` with `rmqsim schema | jq .scenario > scenario.schema.json`).

The models read some values more leniently than their Python types say: durations, sizes and
distributions take unit strings (`'10s'`, `'2ms'`, `'64KiB'`), a distribution may be a bare
number, an `expect:` bound may be a bare number. pydantic would describe only the type after
conversion, so `_Lenient` widens exactly those places, recognised by their validator function
(sim/config.py's `Units`, and the functions below), to also accept what the files may hold: a
duration or size field is `anyOf: [<its number>, <string pattern>]`, the pattern built from the
same unit table the loader reads (sim/config.py: `unit_pattern`), exponents and 'µs'/'μs'
included. A distribution's parameters are shared by time and size distributions, so there the
schema takes either kind of unit string. What a pattern cannot say is left to the loader: that an
integer field's value is a whole number of its unit ('1500us' for whole ms), and bounds that need
the scenario's other sections (cross-section checks, rmqsim/scenario/validate.py): `rmqsim validate`
checks them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from sim.config import DURATION, SIZE, Units, unit_pattern

DURATION_PATTERN = unit_pattern(DURATION)
SIZE_PATTERN = unit_pattern(SIZE)
DURATION_STRING = {"type": "string", "pattern": DURATION_PATTERN,
                   "description": "a duration with its unit: '500ms', '10s', '2min', '250us' "
                                  "(the field's unit without one)"}
SIZE_STRING = {"type": "string", "pattern": SIZE_PATTERN,
               "description": "a size with its unit: '512B', '64KiB', '1MB' (the field's unit without one)"}
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _lenient_functions() -> dict[Any, str]:
    """Validator functions whose input is wider than their output: function → what it accepts."""
    from rmqsim.scenario import spec as scenario
    from sim import config, dist

    return {dist._ms: "duration or size", dist._coerce: "distribution", config.sizes_in_dist: "size distribution",
            scenario._exact: "number", scenario._settle: "duration"}


def _accepts(function: Any) -> str | None:
    if isinstance(function, Units):
        return function.dimension.name
    return _lenient_functions().get(function)


class _Lenient(GenerateJsonSchema):
    def function_before_schema(self, schema: Any) -> Any:
        inner = super().function_before_schema(schema)
        accepts = _accepts(schema.get("function", {}).get("function"))
        if accepts == "duration":
            return {"anyOf": [inner, DURATION_STRING]}
        if accepts == "size":
            return {"anyOf": [inner, SIZE_STRING]}
        if accepts == "duration or size":
            return {"anyOf": [inner, DURATION_STRING, SIZE_STRING]}
        if accepts == "distribution":  # a bare number or duration: a constant
            return {"anyOf": [inner, {"type": "number", "minimum": 0}, DURATION_STRING]}
        if accepts == "size distribution":  # a bare number or size (not a duration): a constant
            members = [SIZE_STRING if m == DURATION_STRING else m for m in inner.get("anyOf", [inner])]
            return {**inner, "anyOf": members} if "anyOf" in inner else {"anyOf": [inner, SIZE_STRING]}
        if accepts == "number":
            return {"anyOf": [{"type": "number"}, inner]}
        return inner


_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
_MAPS = ("properties", "$defs", "patternProperties")  # name → schema: a field may be called `le`
_DATA = ("default", "const", "enum", "examples")  # values, not schemas


def _standard_bounds(node: Any) -> Any:
    """pydantic writes the bounds of a field whose validator widens its input as `gt`/`le` keys
    beside the `anyOf` (no JSON Schema keyword): move them onto its number branches, as
    `exclusiveMinimum`/`maximum`, so that editors check them too."""
    if isinstance(node, list):
        return [_standard_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: value if key in _DATA else {k: _standard_bounds(v) for k, v in value.items()} if key in _MAPS
            else _standard_bounds(value) for key, value in node.items()}
    bounds = {_BOUNDS[key]: node.pop(key) for key in list(node) if key in _BOUNDS}
    return _with_bounds(node, bounds) if bounds else node


def _with_bounds(node: dict[str, Any], bounds: dict[str, Any]) -> dict[str, Any]:
    if node.get("type") in ("integer", "number"):
        return {**bounds, **node}
    if "anyOf" in node:
        return {**node, "anyOf": [_with_bounds(member, bounds) for member in node["anyOf"]]}
    return node


def _schema(model: type, title: str) -> dict[str, Any]:
    out = {"$schema": SCHEMA_DIALECT, **_standard_bounds(model.model_json_schema(schema_generator=_Lenient))}
    out["title"] = title
    return out


def schema_document() -> dict[str, Any]:
    """`{"scenario": ..., "sweep": ...}`: the JSON Schemas of both kinds of file."""
    from analysis.sweeps.spec import SweepSpec
    from rmqsim.scenario.spec import Scenario

    return {"scenario": _schema(Scenario, "rmqsim scenario"), "sweep": _schema(SweepSpec, "rmqsim sweep file")}


def dump_schema() -> str:
    return json.dumps(schema_document(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
