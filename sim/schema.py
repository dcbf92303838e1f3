"""`rmqsim schema`: JSON Schemas of scenario and sweep files, generated from their pydantic models.

One JSON document, `{"scenario": <JSON Schema>, "sweep": <JSON Schema>}` (draft 2020-12), so an
editor can validate and complete both kinds of file (e.g. the YAML language server's
`# yaml-language-server: $schema=...` with `rmqsim schema | jq .scenario > scenario.schema.json`).

The models read some values more leniently than their Python types say: durations and time
distributions take unit strings (`'10s'`, `'2ms'`), a distribution may be a bare number, an
`expect:` bound may be a bare number. pydantic would describe only the type after conversion, so
`_Lenient` widens exactly those places, recognised by their validator function, to also accept
what the files may hold. Bounds that need the scenario's other sections (cross-section checks,
sim/scenario_checks.py) are beyond a schema: `rmqsim validate` checks them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

DURATION_PATTERN = r"^\s*-?[0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?\s*(?:us|µs|ms|s|m|min|h|d)?\s*$"
DURATION_STRING = {"type": "string", "pattern": DURATION_PATTERN,
                   "description": "a duration with its unit: '500ms', '10s', '2min', '250us' (ms without one)"}
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _lenient_functions() -> dict[Any, str]:
    """Validator functions whose input is wider than their output: function → what it accepts."""
    from sim import config, dist, scenario

    return {config.parse_duration_ms: "duration", dist._ms: "duration", dist._coerce: "distribution",
            scenario._exact: "number"}


class _Lenient(GenerateJsonSchema):
    def function_before_schema(self, schema: Any) -> Any:
        inner = super().function_before_schema(schema)
        accepts = _lenient_functions().get(schema.get("function", {}).get("function"))
        if accepts == "duration":
            return {"anyOf": [inner, DURATION_STRING]}
        if accepts == "distribution":  # a bare number or duration: a constant
            return {"anyOf": [inner, {"type": "number", "minimum": 0}, DURATION_STRING]}
        if accepts == "number":
            return {"anyOf": [{"type": "number"}, inner]}
        return inner


def _schema(model: type, title: str) -> dict[str, Any]:
    out = {"$schema": SCHEMA_DIALECT, **model.model_json_schema(schema_generator=_Lenient)}
    out["title"] = title
    return out


def schema_document() -> dict[str, Any]:
    """`{"scenario": ..., "sweep": ...}`: the JSON Schemas of both kinds of file."""
    from analysis.sweep_spec import SweepSpec
    from sim.scenario import Scenario

    return {"scenario": _schema(Scenario, "rmqsim scenario"), "sweep": _schema(SweepSpec, "rmqsim sweep file")}


def dump_schema() -> str:
    return json.dumps(schema_document(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
