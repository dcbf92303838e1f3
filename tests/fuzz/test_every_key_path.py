"""Every key path of every bundled scenario gets every wrong type, deterministically.

The fuzz tests draw their targets at random; this one walks them all. The key paths are those
of each fuzz seed's *resolved* form (every default spelled out), with list indexes folded
(`producers[*].rate_per_s`), so a field added to a model later is covered without a change
here; and a walk of the model classes themselves checks that no field is missing from the seeds
(a new list of a new kind of element needs an example in tests/fuzz/exemplar.yaml). At each
path: a boolean, a mapping, a list, a string and a huge number. Each mutated file must load or
fail cleanly (property 1); and a boolean may be accepted only where the model reads a boolean
(`count: true` is not 1).
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Union

import pytest
from pydantic import BaseModel

from rmqsim.scenario import spec as scenario_mod
from sim.config import ConfigError
from sim.dist import Dist
from tests.fuzz import mutations
from tests.fuzz.conftest import SCENARIOS, record
from tests.fuzz.properties import assert_clean_rejection

WRONG = [True, {"x": 1}, [1, 2], "not-a-value", 10**30]


def _schema_paths() -> dict[tuple, tuple[Any, tuple]]:
    """Folded key path → (a resolved document holding it, its concrete path there)."""
    out: dict[tuple, tuple[Any, tuple]] = {}
    for path in SCENARIOS:
        doc = scenario_mod.load(path).model_dump(mode="json", by_alias=True)
        for concrete, _value in mutations.walk(doc):
            folded = tuple("*" if isinstance(p, int) else p for p in concrete)
            out.setdefault(folded, (doc, concrete))
    return out


PATHS = _schema_paths()


def model_paths(model: type[BaseModel], prefix: tuple = ()) -> set[tuple]:
    """Every field path of a model tree, lists folded to '*'; a union of models (a distribution)
    is a leaf (its members' fields are checked by test_every_distribution_kind_is_a_seed)."""
    out = set()
    for name, info in model.model_fields.items():
        path = (*prefix, info.alias or name)
        out |= {path} | _annotation_paths(info.annotation, path)
    return out


def _annotation_paths(annotation: Any, path: tuple) -> set[tuple]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _annotation_paths(typing.get_args(annotation)[0], path)
    if origin in (list, tuple):
        return _annotation_paths(typing.get_args(annotation)[0], (*path, "*"))
    if origin in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _annotation_paths(members[0], path) if len(members) == 1 else set()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_paths(annotation, path)
    return set()


def test_every_model_field_is_reached():
    missing = model_paths(scenario_mod.Scenario) - set(PATHS)
    assert not missing, f"no fuzz seed has these fields; add them to tests/fuzz/exemplar.yaml: {sorted(missing)}"
    assert len(PATHS) > 150


def test_every_distribution_kind_is_a_seed():
    kinds = {value["dist"] for doc, _p in PATHS.values() for _q, value in mutations.walk(doc)
             if isinstance(value, dict) and "dist" in value}
    members = typing.get_args(typing.get_args(Dist)[0])
    assert kinds == {typing.get_args(m.model_fields["dist"].annotation)[0] for m in members}


@pytest.mark.parametrize("folded", sorted(PATHS, key=str), ids=lambda p: ".".join(map(str, p)) or "(root)")
def test_wrong_types_at_every_key_path(tmp_path, folded):
    """The boolean goes through a file (YAML and all); the other values straight to the models
    (`from_data`, the same checks without writing and parsing 16 KB four more times: the fuzz
    suite's time budget)."""
    doc, concrete = PATHS[folded]
    path = tmp_path / "s.yaml"
    for value in WRONG:
        changed = mutations.put(doc, concrete, value)
        try:
            if value is True:
                path.write_text(mutations.dump(changed))
                loaded = scenario_mod.load(path)
            else:
                loaded = scenario_mod.from_data(changed, str(path))
        except ConfigError as exc:
            assert_clean_rejection(exc, str(path))
            record("every key path", "wrong_type_each_path", "clean error")
            continue
        record("every key path", "wrong_type_each_path", "accepted")
        if value is True:
            resolved = loaded.model_dump(mode="json", by_alias=True)
            assert mutations.get(resolved, concrete) is True, f"{folded}: `true` was read as something else"
