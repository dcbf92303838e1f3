"""Reading what users hand rmqsim: bounded regular UTF-8 files, and YAML with limits.

`read_text(path)` opens the file once, without blocking (a FIFO or a device must not hang the
reader), insists on a regular file of at most `limit` bytes, and decodes it as UTF-8.

`load_yaml(text)` is `yaml.safe_load` with limits (sim/limits.py): nesting depth, the number of
values counting every alias expansion (a "billion laughs" document stops at the limit instead of
exhausting memory further down), duplicate keys are an error (YAML's last-wins would silently
drop a section), and only plain data is built: null, booleans, numbers, strings, lists,
mappings and merge keys. `!!set` (unordered: iterating it would depend on PYTHONHASHSEED),
`!!binary`, `!!timestamp`, `!!omap`/`!!pairs` and every unknown tag are refused, and dates are
read as strings. A value a standard tag cannot hold (`!!float abc`, an integer literal beyond
Python's 4,300-digit limit) is reported with its line instead of raising from the constructor.

Numbers are read as a person means them: a number literal is at most `MAX_NUMBER_CHARS`
characters (a longer one is refused before it is converted: `0x` and 3,600 `f`s is an integer
Python cannot even print), YAML 1.1's other integer forms — base 60 (`1:30` is 90, `1:30:00`
5,400), octal (`017` is 15, `0o17` with `!!int`), hexadecimal (`0x1F`) and binary (`0b101`) —
are refused with what the literal would have meant (quote it to mean text), for durations and
counts alike, in keys as in values, with or without an explicit `!!int`/`!!float`. An
underscore goes between two digits (`1_000`; YAML 1.1 would read `1_` as 1 and `1__0` as 10).
A float written with an exponent but no point (`1e3`, `2E-6`), which YAML 1.1 reads as a
string, is read as the number (as YAML 1.2 does); `.nan` and `.inf` are floats, and the models
refuse them where a finite number is needed.

The limits are rmqsim's own and fire first on any PyYAML: the document is parsed with libyaml
when PyYAML has it (fast), and a document libyaml refuses is parsed again with PyYAML's Python
parser, which has no limits of its own (libyaml 0.2.5 in PyYAML 6.0.4 stops at 1,000 levels with
"exceeded maximum nesting depth", before the composer could count 33), so the reason reported
is the same with or without libyaml, whatever its version; so is the place of a control
character (libyaml counts it in bytes, PyYAML's reader in characters).

`dump_flow(value)` writes a value as one line of YAML that `load_yaml` reads back as the same
value (sweep points become `--set` items this way: the string '1e3' must stay a string).

Every failure is an `InputProblem` whose text is a short reason, never the file's content
beyond the offending value's first characters.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from sim.files import read_at_most
from sim.limits import MAX_FILE_BYTES, MAX_NUMBER_CHARS, MAX_YAML_DEPTH, MAX_YAML_NODES

_TAG = "tag:yaml.org,2002:"
_PLAIN_TAGS = {f"{_TAG}{t}" for t in ("null", "bool", "int", "float", "str", "seq", "map")}


class InputProblem(Exception):
    """Why a file or document was not read: `reason` (short, safe to print) and `where` in the
    text ('line 3, column 1'), or '(file)' for the file as a whole."""

    def __init__(self, reason: str, where: str = "(file)") -> None:
        self.reason, self.where = reason, where
        super().__init__(f"{where}: {reason}")


def short(value: Any, limit: int = 40) -> str:
    """`repr(value)` cut to `limit` characters, for messages; never raises (an integer beyond
    Python's 4,300-digit `str()` limit, handed over by the Python API, is described instead)."""
    try:
        text = repr(value)
    except ValueError:
        text = (f"<an integer of {int(value.bit_length() * math.log10(2)) + 1:,} digits>"
                if isinstance(value, int) else f"<a {type(value).__name__} too large to show>")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def read_text(path: str | Path, limit: int = MAX_FILE_BYTES) -> str:
    """The whole file as text; InputProblem unless it is a regular UTF-8 file of ≤ `limit` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except ValueError:
        raise InputProblem("the path contains a NUL byte") from None
    except OSError as exc:
        raise InputProblem(f"cannot read it: {exc.strerror or exc}") from None
    try:
        data = _read_regular(fd, limit)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputProblem(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _read_regular(fd: int, limit: int) -> bytes:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise InputProblem("not a regular file")
    try:
        data = read_at_most(fd, limit)
    except OSError as exc:
        raise InputProblem(f"cannot read it: {exc.strerror or exc}") from None
    if data is None:
        raise InputProblem(f"larger than {limit:,} bytes")
    return data


# libyaml scans and parses (fast); the composer is PyYAML's Python one, so its limits apply.
try:
    from yaml.cyaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml
    _CParser = None

# a float with an exponent and no point: YAML 1.1's float pattern misses it (a string there)
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")


class _Limited(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """A YAML loader with a depth and expansion budget, duplicate-key errors, plain tags only and
    decimal numbers only, on PyYAML's Python scanner and parser (the reference: no limits of its own)."""

    yaml_constructors = {tag: fn for tag, fn in yaml.SafeLoader.yaml_constructors.items()
                         if tag in _PLAIN_TAGS}
    yaml_multi_constructors: dict = {}
    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag != f"{_TAG}timestamp"]
                               + ([(f"{_TAG}float", _EXPONENT_FLOAT)] if first in "-+.0123456789" else [])
                               for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    get_single_node = yaml.composer.Composer.get_single_node
    check_node = yaml.composer.Composer.check_node
    get_node = yaml.composer.Composer.get_node

    def __init__(self, text: str) -> None:
        self._init_parser(text)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.depth = 0
        self.values = 0  # values composed so far, aliases counted at their expanded size

    def _init_parser(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)  # Parser reads tokens from the scanner's methods
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            return self._alias(parent, index, event)
        self.depth += 1
        self._count(1, event)
        if self.depth > MAX_YAML_DEPTH:
            raise _problem(f"nested more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        node.expanded = _expanded_size(node)
        return node

    def _alias(self, parent: Any, index: Any, event: AliasEvent) -> Any:
        target = self.anchors.get(event.anchor)
        if target is not None and not hasattr(target, "expanded"):
            raise _problem("an alias refers to a collection that contains it", event.start_mark)
        node = super().compose_node(parent, index)
        self._count(node.expanded, event)
        return node

    def _count(self, values: int, event: Any) -> None:
        self.values += values
        if self.values > MAX_YAML_NODES:
            raise _problem(f"more than {MAX_YAML_NODES:,} values once aliases are expanded", event.start_mark)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, ScalarNode) and node.tag in _NUMBER_TAGS:
            _check_number(node)
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, AttributeError, OverflowError, LookupError):
            what = short(node.value) if isinstance(node, ScalarNode) else "this value"
            raise ConstructorError(None, None, f"cannot read {what} as {node.tag.removeprefix(_TAG)}",
                                   node.start_mark) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):  # else SafeConstructor reports the wrong kind of node
            _refuse_duplicates(self, node)
        return super().construct_mapping(node, deep)

    def construct_undefined(self, node: Any) -> Any:
        tag = node.tag.replace(_TAG, "!!")
        raise ConstructorError(None, None, f"the tag {tag} is not allowed here (plain values, "
                               "lists and mappings only)", node.start_mark)


_Limited.add_constructor(None, _Limited.construct_undefined)

if _CParser is not None:
    class _CLimited(_CParser, _Limited):
        """`_Limited` with libyaml's scanner and parser (used first: fast)."""

        __init__ = _Limited.__init__

        def _init_parser(self, text: str) -> None:
            _CParser.__init__(self, text)

        get_single_node = yaml.composer.Composer.get_single_node
        check_node = yaml.composer.Composer.check_node
        get_node = yaml.composer.Composer.get_node

    _CLimited.add_constructor(None, _Limited.construct_undefined)
else:
    _CLimited = None  # type: ignore[misc]  # no libyaml: None, tested where it is used

_NUMBER_TAGS = (f"{_TAG}int", f"{_TAG}float")
_MISPLACED_UNDERSCORE = re.compile(r"(?<![0-9])_|_(?![0-9])")


def _check_number(node: ScalarNode) -> None:
    """Refuse a number literal longer than MAX_NUMBER_CHARS, YAML 1.1's non-decimal forms and an
    underscore that is not between two digits (module docstring). A literal the constructor
    cannot read at all (`!!int 12a`) is left to it: construct_object reports it."""
    text, tag = node.value, node.tag.removeprefix(_TAG)
    if len(text) > MAX_NUMBER_CHARS:
        raise ConstructorError(None, None, f"cannot read {short(text)} as {tag}: a number literal is at most "
                               f"{MAX_NUMBER_CHARS} characters", node.start_mark)
    body = text.lstrip("+-").replace("_", "").lower()
    form = _non_decimal_form(body, tag, "-" if text.startswith("-") else "")
    if form is not None:
        try:
            meant = yaml.SafeLoader.yaml_constructors[node.tag](yaml.SafeLoader(""), node)
        except (ValueError, TypeError, ArithmeticError, LookupError):
            return
        advice, example = form
        shown = text if text.isprintable() else short(text)  # `!!int "1:3\t"` is 63
        raise ConstructorError(None, None, f"{shown} is {advice} and would be read as {meant}: {example}, "
                               "or quote it to mean text", node.start_mark)
    if "_" in text and _MISPLACED_UNDERSCORE.search(text.lstrip("+-")):
        raise ConstructorError(None, None, f"cannot read {short(text)} as {tag}: an underscore goes between "
                               "two digits (1_000), or quote it to mean text", node.start_mark)


def _non_decimal_form(body: str, tag: str, sign: str) -> tuple[str, str] | None:
    """(what YAML 1.1 reads `body` as, what to write instead) for a literal that is not decimal;
    `body` is the literal without its sign and underscores, lower-cased."""
    if ":" in body:
        return ("a base-60 (sexagesimal) number in YAML 1.1",
                "give a duration its unit ('90s', '90min') and write any other number in decimal")
    if tag != "int" or not body.startswith("0") or body == "0":
        return None
    if body.startswith("0x"):
        return "hexadecimal in YAML 1.1", "write the number in decimal"
    if body.startswith("0b"):
        return "binary in YAML 1.1", "write the number in decimal"
    if body.startswith("0o"):  # `!!int 0o17`: Python's int(…, 8) takes the prefix
        return "octal", "write the number in decimal"
    return "octal in YAML 1.1 (a leading 0)", f"write {sign}{body.lstrip('0') or '0'} if that is the number meant"


class _Dumper(yaml.SafeDumper):
    """SafeDumper that also quotes the strings `load_yaml` reads as numbers (`'1e3'`)."""


_Dumper.add_implicit_resolver(f"{_TAG}float", _EXPONENT_FLOAT, list("-+.0123456789"))


def dump_flow(value: Any) -> str:
    """`value` as one line of flow-style YAML that `load_yaml` reads back as the same value."""
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, width=float("inf"), allow_unicode=False)
    return text.removesuffix("\n").removesuffix("\n...")


def _expanded_size(node: Any) -> int:
    if isinstance(node, ScalarNode):
        return 1
    if isinstance(node, SequenceNode):
        return 1 + sum(child.expanded for child in node.value)
    return 1 + sum(k.expanded + v.expanded for k, v in node.value)


def _refuse_duplicates(loader: _Limited, node: MappingNode) -> None:
    """Explicit keys only: keys brought in by a merge (`<<: *base`) may be overridden."""
    seen: dict[Any, Any] = {}
    for key_node, _value in node.value:
        if key_node.tag == f"{_TAG}merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable: SafeConstructor reports it
            continue
        if first is not None:
            raise _problem(f"duplicate key {short(key)} (first at line {first.line + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark


class _Budget(yaml.MarkedYAMLError):
    """A rule of this loader was broken (reported without the 'syntax error' prefix)."""


def _problem(reason: str, mark: Any) -> _Budget:
    return _Budget(problem=reason, problem_mark=mark)


def load_yaml(text: str) -> Any:
    """One YAML document as plain Python data; InputProblem('line L, column C: reason').

    libyaml first when PyYAML has it; a document it refuses is read again by the Python parser,
    so that a limit of this loader, not libyaml's own, gives the reason (module docstring)."""
    if len(text) > MAX_FILE_BYTES:
        raise InputProblem(f"larger than {MAX_FILE_BYTES:,} characters")
    if _CLimited is None:
        return _load(_Limited, text)
    try:
        return _load(_CLimited, text)
    except _Unparsable:
        return _load(_Limited, text)


class _Unparsable(InputProblem):
    """libyaml refused the document's syntax (load_yaml then asks the Python parser why)."""


def _load(loader_class: type, text: str) -> Any:
    loader = None
    try:
        loader = loader_class(text)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        syntax = not isinstance(exc, ConstructorError | _Budget)
        raise (_Unparsable if syntax and loader_class is _CLimited else InputProblem)(_reason(exc), where) from None
    except yaml.reader.ReaderError as exc:
        if loader_class is _CLimited:  # libyaml counts bytes, not characters: ask PyYAML's reader
            raise _Unparsable("unreadable character") from None
        # the reason in rmqsim's words: libyaml and PyYAML's reader word it differently
        reason = "not valid text (undecodable characters)" if 0xD800 <= exc.character <= 0xDFFF else \
            f"control characters are not allowed (#x{exc.character:04x})"
        raise InputProblem(reason, f"character {exc.position + 1}") from None
    except yaml.YAMLError as exc:
        if loader_class is _CLimited:
            raise _Unparsable("not valid YAML") from None
        raise InputProblem(f"not valid YAML: {str(exc).splitlines()[0][:100]}") from None
    except RecursionError:
        raise InputProblem(f"nested more than {MAX_YAML_DEPTH} levels deep") from None
    except UnicodeError:  # a str that cannot be UTF-8 (lone surrogates from undecodable argv bytes)
        if loader_class is _CLimited:  # libyaml takes UTF-8 only: PyYAML's reader says where
            raise _Unparsable("undecodable") from None
        raise InputProblem("not valid text (undecodable characters)") from None
    finally:
        if loader is not None:
            loader.dispose()


def _reason(exc: yaml.MarkedYAMLError) -> str:
    problem = (exc.problem or "not valid YAML").strip()
    if exc.context and exc.context not in problem:
        problem = f"{problem} ({exc.context.strip()})"
    return f"YAML syntax error: {problem}" if not isinstance(exc, ConstructorError | _Budget) else problem

