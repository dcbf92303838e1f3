"""Units on every duration and size field (sim/config.py: `Units`), found by walking the scenario's
pydantic models, so a field added later is covered without a new test.

For each such field: a unit string ('5s', '4KiB') reaches the model as the same number the plain
value gives (an int for a Java-mirroring int); a value that is not a whole number of an integer
field's unit is refused with the field's key path, in a file and with `--set`; the unit a field's
name carries is the unit its type reads numbers in; the JSON Schema's patterns accept what the
parser reads.
"""

from __future__ import annotations

import re
import typing
from fractions import Fraction
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, BeforeValidator, TypeAdapter, ValidationError

from rmqsim import schema
from rmqsim.scenario.reference import every_model
from rmqsim.scenario.spec import Scenario, from_data
from sim import config
from sim.config import DURATION, SIZE, ConfigError, Units, render_path

# the unit a field's name carries; independent of sim/config.py's tables on purpose
NAME_UNITS = [(re.compile(r"_ms$|mills|millis"), "ms"), (re.compile(r"_s$"), "s"), (re.compile(r"_min$"), "min"),
              (re.compile(r"_bytes$"), "B"), (re.compile(r"_mib$|_mb$"), "MiB")]
IN_MS = {"us": Fraction(1, 1000), "ms": Fraction(1), "s": Fraction(1000), "min": Fraction(60_000)}
IN_BYTES = {"B": Fraction(1), "KiB": Fraction(1024), "MiB": Fraction(1024**2)}
OTHER_UNIT = {"ms": "s", "s": "ms", "min": "s", "B": "KiB", "MiB": "KiB"}  # a unit to write each in
RATE = re.compile(r"_per_s$|_per_hour$")  # rates are neither durations nor sizes


def _before_validators(tp: Any, metadata: list[Any] = ()) -> list[Any]:
    found = [m.func for m in metadata if isinstance(m, BeforeValidator)]
    if typing.get_origin(tp) is Annotated:
        args = typing.get_args(tp)
        return found + _before_validators(args[0], list(args[1:]))
    return found + [f for arg in typing.get_args(tp) for f in _before_validators(arg)]


def _name_unit(name: str) -> str | None:
    return next((unit for pattern, unit in NAME_UNITS if pattern.search(name)), None)


def _fields() -> list[tuple[type, str]]:
    return [(model, name) for model in every_model(Scenario) for name in model.model_fields]


def _units_of(model: type, name: str) -> Units | None:
    info = model.model_fields[name]
    return next((f for f in _before_validators(info.annotation, info.metadata) if isinstance(f, Units)), None)


UNIT_FIELDS = [(m, n) for m, n in _fields() if _units_of(m, n) is not None]
WHOLE_FIELDS = [(m, n) for m, n in UNIT_FIELDS if _units_of(m, n).whole]


def _ids(item: tuple[type, str]) -> str:
    return f"{item[0].__name__}.{item[1]}"


def _adapter(model: type, name: str) -> TypeAdapter:
    info = model.model_fields[name]
    return TypeAdapter(Annotated[info.annotation, info])


def _sample(model: type, name: str) -> int | float:
    """A valid value of the field: its default when that is positive, else a small one."""
    adapter, default = _adapter(model, name), model.model_fields[name].default
    for value in (default, 1, 2, 1000):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            try:
                return adapter.validate_python(value)
            except ValidationError:
                continue
    raise AssertionError(f"no sample value for {model.__name__}.{name}")


def _decimal(amount: Fraction) -> str:
    for digits in range(20):
        scaled = amount * 10**digits
        if scaled.denominator == 1:
            text = f"{scaled.numerator:0{digits + 1}d}"
            return text[:-digits] + "." + text[-digits:] if digits else text
    raise AssertionError(f"{amount} has no short decimal")


def _written_in_other_unit(value: int | float, unit: str) -> str:
    table = IN_BYTES if unit in IN_BYTES else IN_MS
    other = OTHER_UNIT[unit]
    return _decimal(Fraction(str(value)) * table[unit] / table[other]) + other


def _paths() -> dict[tuple[type, str], tuple]:
    """(model, field) → its key path in a scenario, through list elements that need no fields."""
    out: dict[tuple[type, str], tuple] = {}

    def walk(model: type, path: tuple) -> None:
        for name, info in model.model_fields.items():
            out.setdefault((model, name), path + (name,))
            tp = info.annotation
            for arg in [tp, *typing.get_args(tp)]:
                element = typing.get_args(arg)[0] if typing.get_origin(arg) is list else None
                if isinstance(arg, type) and issubclass(arg, BaseModel) and (model, name, arg) not in seen:
                    seen.add((model, name, arg))
                    walk(arg, path + (name,))
                elif isinstance(element, type) and issubclass(element, BaseModel) and _buildable(element):
                    seen.add((model, name, element))
                    walk(element, path + (name, 0))

    seen: set = set()
    walk(Scenario, ())
    return out


def _buildable(model: type) -> bool:
    try:
        model()
    except ValidationError:
        return False
    return True


PATHS = _paths()


def _scenario_with(path: tuple, value: Any) -> dict:
    data: dict = {}
    node: Any = data
    for part, nxt in zip(path, path[1:], strict=False):
        if isinstance(part, int):
            continue
        node = node.setdefault(part, [{}] if isinstance(nxt, int) else {})
        node = node[0] if isinstance(nxt, int) else node
    node[path[-1]] = value
    return data


def _get(sc: BaseModel, path: tuple) -> Any:
    for part in path:
        sc = sc[part] if isinstance(part, int) else getattr(sc, part)
    return sc


def test_every_duration_or_size_field_takes_units_in_the_unit_of_its_name() -> None:
    """A field named for a unit reads unit strings (a `Units` type, or a distribution of
    durations or sizes), and numbers in the unit its name says."""
    wrong = []
    for model, name in _fields():
        unit = _name_unit(name)
        if unit is None or RATE.search(name):
            continue
        units = _units_of(model, name)
        info = model.model_fields[name]
        accepts = {schema._accepts(f) for f in _before_validators(info.annotation, info.metadata)}
        if units is not None and units.unit != unit:
            wrong.append(f"{model.__name__}.{name}: reads numbers in {units.unit}, its name says {unit}")
        elif units is None and not accepts & {"duration", "size", "distribution", "size distribution"}:
            wrong.append(f"{model.__name__}.{name}: takes no units (use a type of sim/config.py: IntMs, IntBytes, ...)")
    assert not wrong, "\n".join(wrong)
    assert len(WHOLE_FIELDS) >= 40 and len(UNIT_FIELDS) > len(WHOLE_FIELDS)


@pytest.mark.parametrize("field", UNIT_FIELDS, ids=_ids)
def test_a_unit_string_converts_exactly(field: tuple[type, str]) -> None:
    model, name = field
    units, value = _units_of(model, name), _sample(model, name)
    text = _written_in_other_unit(value, units.unit)
    got = _adapter(model, name).validate_python(text)
    assert got == value and type(got) is type(value), (text, got, value)
    spaced = _written_in_other_unit(value, units.unit).replace(OTHER_UNIT[units.unit], " " + OTHER_UNIT[units.unit])
    assert _adapter(model, name).validate_python(spaced) == value
    assert _adapter(model, name).validate_python(f"{value}{units.unit}") == value  # its own unit


@pytest.mark.parametrize("field", WHOLE_FIELDS, ids=_ids)
def test_a_value_that_is_not_whole_is_refused_with_its_key_path(field: tuple[type, str]) -> None:
    model, name = field
    path, value, unit = PATHS[field], int(_sample(model, name)), _units_of(model, name).unit
    for text in (f"{value}.5{unit}", f"{value}.5"):
        with pytest.raises(ConfigError) as err:
            from_data(_scenario_with(path, text))
        assert [p for p in err.value.problems if p.startswith(f"{render_path(path)}: ")
                and "is not a whole number of" in p], err.value.problems


@pytest.mark.parametrize("field", WHOLE_FIELDS, ids=_ids)
def test_a_set_override_with_a_unit(field: tuple[type, str]) -> None:
    model, name = field
    path, value, unit = PATHS[field], _sample(model, name), _units_of(model, name).unit
    data = _scenario_with(path, None)
    _get_dict(data, path[:-1]).pop(path[-1])  # its sections and list elements only: --set gives the value
    sc = from_data(data, overrides=[f"{render_path(path)}={_written_in_other_unit(value, unit)}"])
    assert _get(sc, path) == value


def _get_dict(data: dict, path: tuple) -> dict:
    for part in path:
        data = data[part]
    return data


def test_every_integer_field_is_reachable_by_a_key_path() -> None:
    assert [f"{m.__name__}.{n}" for m, n in WHOLE_FIELDS if (m, n) not in PATHS] == []


def test_the_messages_read_well() -> None:
    data = {"consumers": [{"client": {"persist_consumer_offset_interval_ms": "0.5ms",
                                      "heartbeat_broker_interval_ms": "1500us", "consume_timeout_min": "90s"}}],
            "cluster": {"brokers": [{"store": {"flush_interval_commit_log_ms": "64KiB",
                                               "max_message_size_bytes": "5s"}}]},
            "producers": [{"message_bytes": "2ms", "key_bytes": {"dist": "uniform", "low": 1, "high": "2 sec"}}]}
    with pytest.raises(ConfigError) as err:
        from_data(data)
    assert sorted(err.value.problems) == sorted([
        "consumers[0].client.persist_consumer_offset_interval_ms: 0.5 ms is not a whole number of ms "
        "(this setting counts whole ms) (got '0.5ms')",
        "consumers[0].client.heartbeat_broker_interval_ms: 1.5 ms is not a whole number of ms "
        "(this setting counts whole ms) (got '1500us')",
        "consumers[0].client.consume_timeout_min: 1.5 min is not a whole number of minutes "
        "(this setting counts whole minutes) (got '90s')",
        "cluster.brokers[0].store.flush_interval_commit_log_ms: 'KiB' is a unit of size, but this setting is a "
        "duration in ms (a number, or with a unit: us, ms, s, min, h, d) (got '64KiB')",
        "cluster.brokers[0].store.max_message_size_bytes: 's' is a unit of duration, but this setting is a size "
        "in bytes (a number, or with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) (got '5s')",
        "producers[0].message_bytes: 'ms' is a unit of duration, but this setting is a size in bytes "
        "(a number, or with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) (got '2ms')",
        "producers[0].key_bytes: 'high': unknown unit 'sec' in '2 sec' (use one of B, KB, MB, GB, TB, KiB, MiB, "
        "GiB, TiB)",
    ])


@pytest.mark.parametrize(("text", "ms"), [
    ("5s", 5_000), ("500ms", 500), ("1m", 60_000), ("2min", 120_000), ("1h", 3_600_000), ("1d", 86_400_000),
    ("1500000us", 1_500), ("2000µs", 2), ("2000μs", 2), ("1.5s", 1_500), ("1.5e3ms", 1_500), ("1_000ms", 1_000),
    (" 7 s ", 7_000), ("0.001s", 1), ("5", 5), (5, 5), (5.0, 5), ("1.1s", 1_100), ("0.3s", 300),
])
def test_an_int_ms_field_converts_each_unit_exactly(text: Any, ms: int) -> None:
    got = TypeAdapter(config.PositiveIntMs).validate_python(text)
    assert got == ms and type(got) is int


@pytest.mark.parametrize(("text", "size"), [
    ("64KiB", 65_536), ("1MB", 1_000_000), ("1kB", 1_000), ("1KB", 1_000), ("1.5MiB", 1_572_864), ("2GiB", 2**31),
    ("512B", 512), ("512", 512), (512, 512), ("0.5KiB", 512), ("1e3B", 1_000),
])
def test_an_int_bytes_field_converts_each_unit_exactly(text: Any, size: int) -> None:
    got = TypeAdapter(config.IntBytes).validate_python(text)
    assert got == size and type(got) is int


def test_numbers_without_a_unit_reach_the_model_unchanged() -> None:
    """The digest of a scenario written in plain numbers is what the same values with units give."""
    plain = {"duration_ms": 20_000, "consumers": [{"client": {"persist_consumer_offset_interval_ms": 5_000,
                                                              "consume_timeout_min": 15}}],
             "cluster": {"brokers": [{"store": {"max_message_size_bytes": 1_048_576,
                                                "flush_interval_commit_log_ms": 500}}]},
             "producers": [{"message_bytes": 4096}], "limits": {"max_step_wall_s": 30}}
    units = {"duration_ms": "20s", "consumers": [{"client": {"persist_consumer_offset_interval_ms": "5s",
                                                             "consume_timeout_min": "15min"}}],
             "cluster": {"brokers": [{"store": {"max_message_size_bytes": "1MiB",
                                                "flush_interval_commit_log_ms": "0.5s"}}]},
             "producers": [{"message_bytes": "4KiB"}], "limits": {"max_step_wall_s": "30s"}}
    a, b = from_data(plain), from_data(units)
    assert a.digest() == b.digest() and a.model_dump() == b.model_dump()
    assert type(a.consumers[0].client.persist_consumer_offset_interval_ms) is int


@pytest.mark.parametrize(("value", "reason"), [
    (True, "got a boolean"), ("1e99999999999999999999s", "less than or equal to"),
    ("1e-99999999999999999999ms", "is not a whole number of ms"), ("0e999999999999999999999s", "greater than 0"),
    ("5 parsecs", "unknown unit 'parsecs'"), ("5S", "unknown unit 'S'"), ("1:30", "minutes and seconds"),
    ("0x1F", "cannot read '0x1F' as a duration"),
])
def test_odd_input_is_refused_quickly_with_a_reason(value: Any, reason: str) -> None:
    with pytest.raises(ValidationError) as err:
        TypeAdapter(config.PositiveIntMs).validate_python(value)
    assert reason in str(err.value)


def test_size_distributions_take_size_units() -> None:
    first = {"message_bytes": "4KiB", "key_bytes": {"dist": "uniform", "low": "1KB", "high": "2KB"}}
    second = {"name": "p2", "message_bytes": {"dist": "empirical", "values": ["1KiB", 2048]}}
    sc = from_data({"producers": [first, second]})
    key_bytes = sc.producers[0].key_bytes
    assert sc.producers[0].message_bytes.value == 4096 and (key_bytes.low, key_bytes.high) == (1000, 2000)
    assert sc.producers[1].message_bytes.values == [1024, 2048]


@pytest.mark.parametrize("text", ["5s", "1.5e3s", "-5ms", "250μs", "250µs", "1_000ms", " 7 s ", "5", "2m", "5sec",
                                  "5S", "1:30", "0x1F", "64KiB", "1__0s", "1.s", ".5s", "5 kb", "1MB", "1e3B"])
def test_the_schema_patterns_accept_what_the_parser_reads(text: str) -> None:
    for dimension, unit in ((DURATION, "ms"), (SIZE, "B")):
        try:
            Units(dimension, unit, whole=False)(text)
            parsed = True
        except ValueError:
            parsed = False
        assert bool(re.search(config.unit_pattern(dimension), text)) is parsed, (dimension.name, text)
