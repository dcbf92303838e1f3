"""sim/inputs.py: numbers read as a person means them, limits that speak the same with or without
libyaml, messages that never print what they cannot (issue 25, items 8 and 9)."""

from __future__ import annotations

import math

import pytest
import yaml

from sim import inputs
from sim.inputs import InputProblem, dump_flow, load_yaml, short
from sim.limits import MAX_NUMBER_CHARS, MAX_YAML_DEPTH


def problem(text: str) -> InputProblem:
    with pytest.raises(InputProblem) as info:
        load_yaml(text)
    return info.value


# ---------------------------------------------------------------- YAML 1.1's other integer forms

@pytest.mark.parametrize("literal, meant, fragment", [
    ("1:30", "90", "base-60 (sexagesimal)"),
    ("1:30:00", "5400", "base-60 (sexagesimal)"),
    ("-1:30", "-90", "base-60 (sexagesimal)"),
    ("1:30.5", "90.5", "base-60 (sexagesimal)"),
    ("190:20:30.15", "685230.15", "base-60 (sexagesimal)"),
    ("017", "15", "octal in YAML 1.1 (a leading 0)"),
    ("00", "0", "octal"),
    ("0_1", "1", "octal"),
    ("0x1F", "31", "hexadecimal"),
    ("-0x1F", "-31", "hexadecimal"),
    ("0x_1F", "31", "hexadecimal"),
    ("0b101", "5", "binary"),
    ("!!int 0x1F", "31", "hexadecimal"),
    ("!!int 0o17", "15", "octal"),
    ("!!int 1:30", "90", "base-60"),
    ("!!float 1:30", "90.0", "base-60"),
])
def test_non_decimal_numbers_are_refused_with_what_they_would_mean(literal, meant, fragment):
    exc = problem(f"duration_ms: {literal}\n")
    assert exc.where == "line 1, column 14"
    assert fragment in exc.reason and f"would be read as {meant}:" in exc.reason, exc.reason
    assert "quote it to mean text" in exc.reason


def test_the_advice_fits_the_literal():
    assert "write 17 if that is the number meant" in problem("a: 017").reason
    assert "write -17 if that is the number meant" in problem("a: -017").reason
    assert "'1:3\\t' is a base-60" in problem('a: !!int "1:3\\t"').reason  # shown escaped
    assert "give a duration its unit ('90s', '90min')" in problem("a: 1:30").reason
    assert "write the number in decimal" in problem("a: 0x1F").reason


@pytest.mark.parametrize("text", ["a: {0x1F: 1}", "- [1, 2, 017]", "? 1:30\n: x\n"])
def test_keys_and_list_items_are_numbers_too(text):
    assert "in YAML 1.1" in problem(text).reason


@pytest.mark.parametrize("text, value", [
    ("a: '1:30'", "1:30"), ('a: "017"', "017"), ("a: '0x1F'", "0x1F"),  # quoted: text
    ("a: 0o17", "0o17"), ("a: 09", "09"), ("a: 0:30", "0:30"), ("a: 1:60", "1:60"),  # not numbers in YAML 1.1
    ("a: _1", "_1"), ("a: 1e3e3", "1e3e3"), ("a: 0X1F", "0X1F"),
])
def test_what_is_no_number_stays_text(text, value):
    assert load_yaml(text) == {"a": value}


@pytest.mark.parametrize("text, value", [
    ("a: 0", 0), ("a: -0", 0), ("a: +5", 5), ("a: 1_000", 1000), ("a: 1_000.5", 1000.5), ("a: 0.5", 0.5),
    ("a: .5", 0.5), ("a: 0017.5", 17.5), ("a: 1.5e+3", 1500.0), ("a: 9223372036854775807", 2**63 - 1),
    # an exponent without a point: a string in YAML 1.1, the number in YAML 1.2 and here
    ("a: 1e3", 1000.0), ("a: 1E-6", 1e-6), ("a: -2e+3", -2000.0), ("a: .5e1", 5.0), ("a: 1.5e3", 1500.0),
    ("a: 1_000e3", 1e6), ("a: !!int 1_000", 1000), ("a: !!float 017", 17.0),
])
def test_decimal_numbers_read_as_written(text, value):
    got = load_yaml(text)["a"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, value", [("a: .nan", math.nan), ("a: .NaN", math.nan), ("a: .inf", math.inf),
                                         ("a: -.inf", -math.inf), ("a: 1e400", math.inf), ("a: -1e400", -math.inf)])
def test_non_finite_floats_are_floats(text, value):
    """The loader reads them; every model refuses them where a finite number is needed."""
    got = load_yaml(text)["a"]
    assert isinstance(got, float) and (math.isnan(got) if math.isnan(value) else got == value)


@pytest.mark.parametrize("literal", ["1__0", "1_", "1_.5", "1._5", "1.5_", "1_e3", "-1_"])
def test_an_underscore_goes_between_two_digits(literal):
    assert "an underscore goes between two digits" in problem(f"a: {literal}").reason


@pytest.mark.parametrize("text, fragment", [
    ("a: !!int 1e3", "cannot read '1e3' as int"), ("a: !!int 12a", "cannot read '12a' as int"),
    ("a: !!int .nan", "cannot read '.nan' as int"), ("a: !!int 0x", "cannot read '0x' as int"),
    ("a: !!float 0x1F", "cannot read '0x1F' as float"), ("a: !!int", "cannot read '' as int"),
])
def test_tagged_literals_the_constructor_cannot_read_are_clean_errors(text, fragment):
    """A ValueError from PyYAML's constructor used to escape while the form was being named."""
    assert fragment in problem(text).reason


# ---------------------------------------------------------------- huge literals

@pytest.mark.parametrize("literal", [
    "0x" + "f" * 3_600,  # 4,335 decimal digits: int() reads it, str() refuses to print it
    "0b1" + "0" * 14_000, "0" + "7" * 5_000, "9" * 5_000, "-" + "9" * 50_000, "1" + ":59" * 2_000,
    "1." + "5" * 10_000, "1e" + "9" * 5_000, "1" + "_000" * 2_000, "!!int " + "9" * 5_000, "!!float " + "9" * 400,
    "9" * (MAX_NUMBER_CHARS + 1),
])
def test_huge_literals_of_every_base_are_refused_before_conversion(literal):
    exc = problem(f"seed: {literal}\n")
    assert f"a number literal is at most {MAX_NUMBER_CHARS} characters" in exc.reason
    assert len(str(exc)) < 200


def test_the_longest_literal_allowed_is_read():
    assert load_yaml("a: " + "9" * MAX_NUMBER_CHARS) == {"a": int("9" * MAX_NUMBER_CHARS)}


def test_short_never_raises_on_huge_integers():
    huge = 16**4_000 - 1  # 4,817 digits
    assert short(huge) == "<an integer of 4,817 digits>"
    assert short([huge]) == "<a list too large to show>"
    assert short("x" * 100) == "'" + "x" * 38 + "…"


# ---------------------------------------------------------------- libyaml and the Python parser agree

@pytest.mark.parametrize("text, fragment", [
    ("a: " + "[" * 1_100 + "]" * 1_100, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ("a:\n  " + "- " * 1_100 + "1\n", f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ("a: [1,\n", "YAML syntax error"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("a: 0x1F\n", "hexadecimal"),
    # libyaml counts bytes: the position of a control character after 'é' was 2 characters off
    ("a: éé\x1b\n", "control characters are not allowed (#x001b)"),
    ("é: \ud800\n", "not valid text (undecodable characters)"),  # a lone surrogate (undecodable argv bytes)
])
def test_the_reason_is_the_same_with_or_without_libyaml(monkeypatch, text, fragment):
    with_libyaml = problem(text)
    monkeypatch.setattr(inputs, "_CLimited", None)
    without = problem(text)
    assert fragment in with_libyaml.reason and str(with_libyaml) == str(without)


def test_a_document_libyaml_accepts_reads_the_same_without_it(monkeypatch):
    text = "a: [1, 2.5, x, {b: null}]\nc: &x {d: 1e3}\ne: *x\nf: {<<: *x, g: 1_000}\n"
    first = load_yaml(text)
    monkeypatch.setattr(inputs, "_CLimited", None)
    assert load_yaml(text) == first == {"a": [1, 2.5, "x", {"b": None}], "c": {"d": 1000.0}, "e": {"d": 1000.0},
                                        "f": {"d": 1000.0, "g": 1000}}


# ---------------------------------------------------------------- writing values back

@pytest.mark.parametrize("value", ["1e3", 1e3, "1:30", "017", "0x1F", 5, -0.0, 1e-5, 2**63 - 1, math.inf, "a\x1bb",
                                   "é", True, None, "", [1, "1e3", {"a": "0b1"}], {"k": [1.5e300, "2E-6"]}])
def test_dump_flow_reads_back_as_the_same_value(value):
    text = dump_flow(value)
    assert "\n" not in text and load_yaml(text) == value
    assert type(load_yaml(text)) is type(value)


def test_safe_dump_alone_would_not_round_trip():
    """Why dump_flow exists: PyYAML (YAML 1.1) writes the string '1e3' plain, which reads as 1000.0."""
    assert yaml.safe_dump("1e3").startswith("1e3") and load_yaml(yaml.safe_dump("1e3")) == 1000.0

