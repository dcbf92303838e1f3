"""Generated mutations of rmqsim's input files, as hypothesis strategies.

A mutation starts from a bundled document (a scenario or a sweep file, parsed) and changes it
in one way, of one `kind`. Where the kind changes a value, the place is a key path drawn from a
walk of the document itself and of its *resolved* form (the validated model dumped with every
default), so every field a model has, including fields added later, is a target without this
file knowing its name. Text-level kinds (deep nesting, alias bombs, tags, huge integers,
duplicate and empty keys, binary bytes) put a raw YAML snippet at such a place, or change the
bytes of the file.

The first 14 kinds (`BASE_KINDS`) came with the fuzz suite; the 16 of `NEW_KINDS` with issue
25's campaign: Unicode look-alikes (`confusable`), BOM and CR/CRLF line ends (`bom_crlf`),
merge keys (`merge_key`), NaN and infinities at every numeric field (`nan_inf`), broken
`transaction:` sections, impossible HA roles (`ha_roles`), hostile `--set` and sweep key paths
(`hostile_set_path`), YAML 1.1's base-60, octal, hexadecimal and binary literals
(`yaml11_number`), huge literals of every base (`huge_literal`), control and format characters
in names and tags (`control_char`), very long keys (`long_key`: `expect:`, sweep sections),
duration strings (`duration_string`: '1:30', '017s', '250μs'), valid fault schedules
(`fault_schedule`, scenarios only; the run test's source), several documents and directives
(`multi_document`), `expect:` sections (`expect_section`) and block-style and `--set` nesting
past libyaml's own limit (`deep_block`). Kinds that change a scenario's structure reach a
sweep through its `set:` section (`set: {"producers[0].transaction": ...}`).

`Mutation.content` is the file's bytes, `Mutation.overrides` the `--set` items to pass along,
`Mutation.must_fail` says that the file must be refused (rmqsim never reads such a literal,
name or document as anything).
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import strategies as st

from sim.inputs import dump_flow
from sim.keypath import render

PLACEHOLDER = "RMQSIM_FUZZ_PLACEHOLDER"
Path = tuple  # key path parts: str keys and int indexes


@dataclass
class Mutation:
    kind: str
    content: bytes
    overrides: list[str] = field(default_factory=list)
    note: str = ""  # what was done, for failure messages
    must_fail: bool = False  # the file (with its overrides) must be refused


def walk(tree: Any, prefix: Path = ()) -> list[tuple[Path, Any]]:
    """Every (path, value) in a tree of dicts and lists, the root included, in document order."""
    out = [(prefix, tree)]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += walk(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out += walk(value, (*prefix, i))
    return out


def get(tree: Any, path: Path) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def put(tree: Any, path: Path, value: Any) -> Any:
    """A copy of `tree` with `value` at `path` (the root itself when `path` is empty)."""
    if not path:
        return value
    tree = copy.deepcopy(tree)
    get(tree, path[:-1])[path[-1]] = value
    return tree


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter: the same text, 6 times faster


def dump(tree: Any) -> str:
    return yaml.dump(tree, Dumper=_DUMPER, sort_keys=False, default_flow_style=False, allow_unicode=True, width=10_000)


def with_snippet(tree: Any, path: Path, snippet: str) -> bytes:
    """The tree as YAML with the raw YAML `snippet` (one line, flow style) at `path`."""
    text = dump(put(tree, path, PLACEHOLDER))
    return text.replace(PLACEHOLDER, snippet, 1).encode()


# --- values ---------------------------------------------------------------------------------
OTHER_TYPES = [0, 1, -1, 2.5, "x", "", True, False, None, [], {}, [1, "a", None], {"a": 1}, [[1]],
               {"dist": "uniform"}, "10s", "ASYNC_FLUSH", [{"name": 1}]]
EXTREME_NUMBERS = [0, -1, -0.0, 1e-300, 5e-324, 1e-20, 1e-6, 1e12, 1e20, 1e300, 1.7976931348623157e308,
                   -1e308, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**100, 0.0001,
                   float("inf"), float("-inf"), float("nan"), "1e400", "1_", "1__0s", "_1", "-5s", "1e3ms",
                   "10 parsecs", "∞", "NaN", "0x10", "1,000", " 5 ", "5min5s", "1d", "9999999999999999d"]
HOSTILE_NAMES = ["..", ".", "../../../escaped_run", "/etc/passwd", ".hidden", "a/b", "a\\b", "x" * 300, "a\0b",
                 "", " ", "-rf", "~", "名前", "a\nb", "a b", "CON", "a->b", "a.b", "%RETRY%x", "SCHEDULE_TOPIC_XXXX",
                 "$(touch /tmp/rmqsim_pwned)", "'; DROP TABLE runs; --", "a`b", "*", "null"]
HOSTILE_BASES = ["/etc/shadow", "/etc/passwd", "/proc/self/mem", "/proc/meminfo", "/proc/self/environ",
                 "/dev/zero", "/dev/urandom", "/dev/stdin", "", "\0", "a\0b.yaml", "x" * 5000, "/" + "a/" * 600,
                 "/", ".", "..", "../", "/tmp", "/nonexistent/x.yaml", "~/x.yaml", "FIFO", "BINARY", "HUGE",
                 "LOOP", "DIRECTORY", "EMPTY"]
UNSAFE_TAGS = ["!!python/object/apply:os.system ['touch /tmp/rmqsim_pwned']", "!!python/name:os.system",
               "!!float abc", "!!timestamp x", "!!timestamp 2001-12-14", "!!binary AAAA", "!!set {a, b}",
               "!!int 12a", "!!int 0x1F", "!!str 5", "!foo bar", "!!omap [{a: 1}]", "!!pairs [{a: 1}]",
               "!!bool maybe", "!!null x", "!!map [1, 2]", "!!seq {a: 1}", "!<tag:yaml.org,2002:float> x",
               "!!merge x"]
NAME_KEYS = {"name", "group", "topic", "node", "src", "dst", "zone", "nodes", "groups", "brokers", "tags", "key"}


def _typo(key: str) -> st.SearchStrategy[str]:
    variants = {key + "s", key[:-1], key.upper(), key + "_", "_" + key}
    if len(key) > 2:
        variants |= {key[1:], key[0] + key[2:], key[:2] + key[1] + key[3:]}
    return st.sampled_from(sorted(v for v in variants if v and v != key))


def _paths(tree: Any, want: type | tuple | None = None) -> list[Path]:
    return [p for p, v in walk(tree) if want is None or isinstance(v, want)]


# --- strategies per kind -------------------------------------------------------------------
@st.composite
def wrong_type(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree)))
    value = draw(st.sampled_from(OTHER_TYPES))
    return Mutation("wrong_type", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}")


@st.composite
def unknown_key(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree, dict)))
    mapping = get(tree, path)
    keys = [k for k in mapping if isinstance(k, str)]
    key = draw(_typo(draw(st.sampled_from(keys))) if keys and draw(st.booleans()) else
               st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12))
    value = draw(st.sampled_from(OTHER_TYPES))
    return Mutation("unknown_key", dump(put(tree, path, {**mapping, key: value})).encode(), note=f"{path}.{key!r}")


@st.composite
def extreme_number(draw: Any, tree: Any) -> Mutation:
    numeric = _paths(tree, (int, float, str))
    path = draw(st.sampled_from(numeric or _paths(tree)))
    value = draw(st.sampled_from(EXTREME_NUMBERS) | st.floats(allow_nan=False) | st.integers(-(2**70), 2**70))
    return Mutation("extreme_number", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}")


@st.composite
def huge_int(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree, (int, float)) or _paths(tree)))
    digits = draw(st.sampled_from([400, 4299, 4300, 4301, 6000, 50_000]))
    sign = draw(st.sampled_from(["", "-", "!!int ", "!!float "]))
    return Mutation("huge_int", with_snippet(tree, path, sign + "9" * digits), note=f"{path}: {digits} digits")


@st.composite
def delete_key(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from([p for p in _paths(tree) if p]))
    parent = copy.deepcopy(get(tree, path[:-1]))
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent = [] if draw(st.booleans()) else parent[:path[-1]] + parent[path[-1] + 1:]
    return Mutation("delete_key", dump(put(tree, path[:-1], parent)).encode(), note=f"del {path}")


@st.composite
def transplant(draw: Any, tree: Any, pool: list[Any]) -> Mutation:
    """A subtree of any bundled document, put at a place of this one (cross-section mixes)."""
    donor = draw(st.sampled_from(pool))
    subtree = get(donor, draw(st.sampled_from(_paths(donor))))
    path = draw(st.sampled_from(_paths(tree)))
    target = get(tree, path)
    if isinstance(target, list) and draw(st.booleans()):
        subtree = [*target, subtree]  # append an element (e.g. a fault to a scenario without faults)
    return Mutation("transplant", dump(put(tree, path, subtree)).encode(), note=f"{path} ← subtree")


@st.composite
def duplicate_key(draw: Any, tree: Any) -> Mutation:
    text = dump(tree)
    keys = [k for k in tree if isinstance(k, str)] if isinstance(tree, dict) else []
    key = draw(st.sampled_from(keys or ["name"]))
    value = draw(st.sampled_from(["[]", "{}", "1", "x", "null"]))
    if draw(st.booleans()):
        return Mutation("duplicate_key", f"{text}{key}: {value}\n".encode(), note=f"{key} twice")
    path = draw(st.sampled_from(_paths(tree)))
    return Mutation("duplicate_key", with_snippet(tree, path, "{a: 1, a: 2}"), note=f"{path}: {{a, a}}")


@st.composite
def empty_key(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree)))
    snippet = draw(st.sampled_from(['{"": 1}', "{? : 1}", "{null: 1}", "{~: x}", '{"": {"": ""}}', "{1: a}",
                                    "{[a]: 1}", "{? [a, b] : c}"]))
    return Mutation("empty_key", with_snippet(tree, path, snippet), note=f"{path}: {snippet}")


@st.composite
def binary(draw: Any, tree: Any) -> Mutation:
    data = dump(tree).encode()
    junk = draw(st.sampled_from([b"\xff\xfe", b"\x00", b"\x80", b"\xc3\x28", b"\xed\xa0\x80", b"\x1b[2J",
                                 b"\x07", b"\xef\xbb\xbf", b"\r", b"\t", b"\x0c"]) | st.binary(min_size=1, max_size=64))
    if draw(st.integers(0, 9)) == 0:
        return Mutation("binary", draw(st.binary(max_size=512)), note="random bytes")
    at = draw(st.integers(0, len(data)))
    return Mutation("binary", data[:at] + junk + data[at:], note=f"{junk!r} at {at}")


@st.composite
def deep_nesting(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree)))
    depth = draw(st.sampled_from([20, 31, 32, 33, 100, 1_000, 5_000, 20_000]))
    left, right = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("[{a: ", "}]")]))
    return Mutation("deep_nesting", with_snippet(tree, path, left * depth + "1" + right * depth),
                    note=f"{path}: depth {depth}")


@st.composite
def alias_bomb(draw: Any, tree: Any) -> Mutation:
    """Billion laughs in one flow list (anchors defined before use), or partition groups built
    from aliases (the amplification the issue found: names checked one by one)."""
    path = draw(st.sampled_from(_paths(tree)))
    width, levels = draw(st.sampled_from([(9, 9), (10, 6), (4, 12), (2, 30), (100, 3)]))
    if draw(st.booleans()):
        parts = [f"&l0 [{', '.join(['lol'] * width)}]"]
        parts += [f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
        return Mutation("alias_bomb", with_snippet(tree, path, "[" + ", ".join(parts) + "]"),
                        note=f"{path}: {width}^{levels}")
    names = ", ".join(["broker-a"] * width)
    groups = f"[&g [{names}], " + ", ".join(["*g"] * (width * 10)) + "]"
    fault = f"[{{at_ms: 1, kind: partition, groups: {groups}}}]"
    target = ("faults",) if isinstance(tree, dict) and "faults" in tree else path
    return Mutation("alias_bomb", with_snippet(tree, target, fault), note=f"{target}: aliased groups")


@st.composite
def unsafe_tag(draw: Any, tree: Any) -> Mutation:
    path = draw(st.sampled_from(_paths(tree)))
    tag = draw(st.sampled_from(UNSAFE_TAGS))
    return Mutation("unsafe_tag", with_snippet(tree, path, tag), note=f"{path}: {tag}")


@st.composite
def hostile_name(draw: Any, tree: Any) -> Mutation:
    named = [p for p in _paths(tree) if p and p[-1] in NAME_KEYS or (len(p) > 1 and p[-2] in NAME_KEYS)]
    path = draw(st.sampled_from(named or [("name",)]))
    value = draw(st.sampled_from(HOSTILE_NAMES))
    return Mutation("hostile_name", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}")


_SET_KEYS = st.sampled_from(["producers[a].x", "producers[0].rate_per_s", "name", "]]", "..", "", "a..b",
                             "[0]", "producers[0", "producers[99].x", "cluster.brokers[0].store.flush_disk_type",
                             "duration_ms", "seed", "x" * 200, "a b", "producers[-1].x", "producers[00].x",
                             "faults[0].node", "limits.max_rate_per_s", "名前", "a\nb", "producers.0.x"])
_SET_VALUES = st.sampled_from(["1", "[unclosed", "{a: ", "!!python/object/apply:os.system [x]", "1e400", "",
                               "&a [*a]", "'", "true", "[" * 100, "- a\n- b", "\0", "!!float x", "9" * 5000,
                               "a: 1\na: 2", "*undefined", "%TAG", "@x", "`x`"])


@st.composite
def bad_set(draw: Any, tree: Any) -> Mutation:
    items = draw(st.lists(st.one_of(
        st.builds(lambda k, v: f"{k}={v}", _SET_KEYS, _SET_VALUES),
        _SET_KEYS, st.text(max_size=30)), min_size=1, max_size=3))
    return Mutation("bad_set", dump(tree).encode(), overrides=items, note=f"--set {items!r}")


@st.composite
def bad_key_paths(draw: Any, tree: Any) -> Mutation:
    """A sweep's key paths (`set:` keys, a parameter's `key`) that do not follow the grammar."""
    key, value = draw(_SET_KEYS), draw(st.sampled_from(OTHER_TYPES))
    grid = tree.get("grid") if isinstance(tree, dict) else None
    if isinstance(grid, dict) and grid and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(grid)))
        changed = put(tree, ("grid", name), {**grid[name], "key": key})
    else:
        changed = put(tree, ("set",), {**(tree.get("set") or {}), key: value})
    return Mutation("bad_set", dump(changed).encode(), note=f"key path {key!r}")


@st.composite
def hostile_base(draw: Any, tree: Any) -> Mutation:
    value = draw(st.sampled_from(HOSTILE_BASES))
    return Mutation("hostile_base", dump(put(tree, ("base",), value)).encode(), note=f"base = {value!r}")


# --- issue 25's kinds ------------------------------------------------------------------------
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
SCENARIO_KEY_PATHS = ["duration_ms", "seed", "producers[0].rate_per_s", "producers[0].tags", "consumers[0].count",
                      "cluster.brokers[0].store.flush_disk_type", "consumers[0].client.pull_batch_size",
                      "faults[0].at_ms", "expect.lost", "limits.max_nodes", "network.latency_ms",
                      "producers[0].transaction.commit_probability", "cluster.brokers[0].replicas"]


def _numbers(tree: Any) -> list[Path]:
    return [p for p, v in walk(tree) if isinstance(v, int | float) and not isinstance(v, bool)]


def _key_path(path: Path) -> str | None:
    """The `--set` key path of a document path, if it has one (keys that are identifiers)."""
    ok = path and isinstance(path[0], str) and all(isinstance(p, int) or _IDENT.fullmatch(p) for p in path)
    return render(list(path)) if ok else None


def _flow(value: Any) -> str:
    """One line of flow YAML that reads back as `value` (escapes for what is not ASCII)."""
    return dump_flow(value)


def _with_set(tree: Any, items: dict[str, Any]) -> Any:
    """A sweep document with `items` added to its `set:` section."""
    return put(tree, ("set",), {**(tree.get("set") or {}), **items})


def _placed(draw: Any, kind: str, tree: Any, sweep: bool, literal: str, note: str, must_fail: bool,
            numeric_first: bool = True) -> Mutation:
    """`literal` (raw YAML) at a numeric place of the document, as a key, or (scenarios) in a `--set`."""
    numbers = _numbers(tree) if numeric_first else []
    path = draw(st.sampled_from(numbers or _paths(tree)))
    where = draw(st.integers(0, 5))
    if where == 0 and _paths(tree, dict):
        at = draw(st.sampled_from(_paths(tree, dict)))
        return Mutation(kind, with_snippet(tree, at, f"{{{literal}: 1}}"), note=f"{at}: key {note}", must_fail=must_fail)
    key = _key_path(path)
    if where == 1 and not sweep and key:
        return Mutation(kind, dump(tree).encode(), overrides=[f"{key}={literal}"], note=f"--set {key}={note}",
                        must_fail=must_fail)
    if where == 2 and sweep:
        seeds = draw(st.sampled_from([f"[{literal}]", f"[1, {literal}]", literal]))
        return Mutation(kind, with_snippet(tree, ("seeds",), seeds), note=f"seeds: {note}", must_fail=must_fail)
    return Mutation(kind, with_snippet(tree, path, literal), note=f"{path}: {note}", must_fail=must_fail)


CONFUSABLES = {"a": "а", "c": "с", "e": "е", "i": "і", "o": "о", "p": "р", "s": "ѕ", "x": "х", "y": "у", "l": "ⅼ",
               "A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "K": "К", "M": "М", "O": "О", "P": "Р", "S": "Ѕ",
               "T": "Т", "X": "Х", "0": "０", "1": "１", "5": "５", "-": "‐", "_": "＿", " ": "\u00a0", "µ": "μ"}
INVISIBLE = ["\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad"]
_DIGITS = str.maketrans("0123456789.-", "０１２３４５６７８９．－")  # fullwidth


def _confuse(draw: Any, text: str) -> str:
    spots = [i for i, c in enumerate(text) if c in CONFUSABLES]
    if spots and draw(st.booleans()):
        i = draw(st.sampled_from(spots))
        return text[:i] + CONFUSABLES[text[i]] + text[i + 1:]
    i = draw(st.integers(0, len(text)))
    return text[:i] + draw(st.sampled_from(INVISIBLE)) + text[i:]


@st.composite
def confusable(draw: Any, tree: Any) -> Mutation:
    """A key or a value with one character swapped for a look-alike (Cyrillic 'а', fullwidth '１',
    Greek 'μ', NBSP) or an invisible one added. A changed key is never a key rmqsim knows."""
    keyed = [p for p in _paths(tree) if p and isinstance(p[-1], str)]
    texts, numbers = _paths(tree, str), _numbers(tree)
    choice = draw(st.integers(0, 2))
    if choice == 0 and keyed:
        path = draw(st.sampled_from(keyed))
        parent, key = get(tree, path[:-1]), path[-1]
        new = _confuse(draw, key)
        renamed = {(new if k == key else k): v for k, v in parent.items()}
        return Mutation("confusable", dump(put(tree, path[:-1], renamed)).encode(), note=f"key {path} → {new!r}",
                        must_fail=new not in parent)
    if choice == 1 and numbers:  # fullwidth digits: ints and durations refuse them, a distribution's
        path = draw(st.sampled_from(numbers))  # parameter reads them with float() (sim/dist.py: _ms)
        text = repr(get(tree, path)).translate(_DIGITS)
        return Mutation("confusable", dump(put(tree, path, text)).encode(), note=f"{path} = {text!r}")
    path = draw(st.sampled_from(texts or _paths(tree)))
    value = _confuse(draw, get(tree, path) if texts else "x")
    return Mutation("confusable", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}")


@st.composite
def bom_crlf(draw: Any, tree: Any) -> Mutation:
    """Byte-order marks, CRLF / CR / LS line ends, tabs and trailing blanks."""
    text = dump(tree)
    form = draw(st.sampled_from(["bom", "crlf", "cr", "bom+crlf", "mixed", "ls", "bom inside", "trailing blanks",
                                 "tab indent", "utf-16", "nel"]))
    lines = text.split("\n")
    if form == "mixed":
        text = "".join(line + ("\r\n" if i % 2 else "\n") for i, line in enumerate(lines))
    elif form == "bom inside":
        at = draw(st.integers(0, len(lines) - 1))
        text = "\n".join(lines[:at] + ["\ufeff" + lines[at]] + lines[at + 1:])
    elif form == "trailing blanks":
        text = "\n".join(line + draw(st.sampled_from([" ", "\t", " \t "])) for line in lines)
    elif form == "tab indent":
        text = "\n".join(re.sub(r"^( +)", lambda m: "\t" * (len(m.group(1)) // 2), line) for line in lines)
    else:
        ends = {"crlf": "\r\n", "cr": "\r", "bom+crlf": "\r\n", "ls": "\u2028", "nel": "\x85"}
        text = text.replace("\n", ends.get(form, "\n"))
        text = ("\ufeff" if form.startswith("bom") else "") + text
    data = text.encode("utf-16") if form == "utf-16" else text.encode()
    return Mutation("bom_crlf", data, note=form)


@st.composite
def merge_key(draw: Any, tree: Any) -> Mutation:
    """`<<` merge keys: the same mapping through a merge, a merge overridden, merges of lists,
    scalars and undefined aliases, two merge keys in one mapping."""
    path = draw(st.sampled_from(_paths(tree, dict)))
    mapping = get(tree, path)
    flow = _flow(mapping)
    keys = [k for k in mapping if isinstance(k, str) and _IDENT.fullmatch(k)]
    variant = draw(st.integers(0, 6))
    if variant == 0:
        snippet = f"{{<<: {flow}}}"
    elif variant == 1 and keys:
        snippet = f"{{<<: {flow}, {draw(st.sampled_from(keys))}: {_flow(draw(st.sampled_from(OTHER_TYPES)))}}}"
    elif variant == 2:
        snippet = f"{{<<: [{flow}, {{zz_merged: 1}}]}}"
    elif variant == 3:
        snippet = f"{{<<: {draw(st.sampled_from(['5', '[1, 2]', 'null', 'x', '[[a]]', '{}', '[]']))}}}"
    elif variant == 4:
        snippet = f"{{<<: &m {flow}, <<: *m}}"
    elif variant == 5:
        snippet = "{<<: *undefined_anchor}"
    else:
        snippet = f"[&m {flow}, {{<<: *m}}]"
    return Mutation("merge_key", with_snippet(tree, path, snippet), note=f"{path}: variant {variant}")


NON_FINITE = [".nan", ".NaN", ".NAN", ".inf", ".Inf", "-.inf", "+.inf", "!!float nan", "!!float -inf", "1e400",
              "-1e400", "!!float 1e999", "-.INF"]


@st.composite
def nan_inf(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """NaN or an infinity at a numeric field (in the file, a key, a sweep's seeds, or `--set`):
    no model takes one."""
    literal = draw(st.sampled_from(NON_FINITE))
    mutation = _placed(draw, "nan_inf", tree, sweep, literal, literal, must_fail=False)
    if "key" in mutation.note or not _numbers(tree):
        return mutation
    mutation.must_fail = True
    return mutation


TXN_FIELD_VALUES = [0, 1, 0.5, -1, 2, 1.5, 1e-300, float("nan"), float("inf"), "x", None, True, [], {}, "10s",
                    {"dist": "constant", "value": 5}, {"dist": "uniform", "low": 5, "high": 1}, 2**31, "UNKNOW",
                    "COMMIT_MESSAGE", "commit", {"dist": "exponential", "mean": -1}]
TXN_CONFLICTS = [{}, {}, {"send_mode": "ASYNC"}, {"batch_size": 2}, {"delay_level": 3}, {"selector": "hash", "keys": 4},
                 {"send_mode": "ORDERLY", "keys": 2}, {"count": 3}, {"send_mode": "ONEWAY"}]


@st.composite
def broken_transaction(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A `transaction:` section with wrong or extreme fields, of the wrong type, or beside send
    options a transactional producer cannot have."""
    from models.producer.transaction_config import TransactionSpec

    if draw(st.integers(0, 4)) == 0:
        section = draw(st.sampled_from([None, [], "yes", True, 0, [{}], {"": 1}, {"commit_probability": 0.5, "x": 1}]))
    else:
        chosen = draw(st.lists(st.sampled_from(sorted(TransactionSpec.model_fields)), max_size=4, unique=True))
        section = {name: draw(st.sampled_from(TXN_FIELD_VALUES)) for name in chosen}
    extra = draw(st.sampled_from(TXN_CONFLICTS))
    if sweep:
        items = {"producers[0].transaction": section, **{f"producers[0].{k}": v for k, v in extra.items()}}
        return Mutation("broken_transaction", dump(_with_set(tree, items)).encode(), note=f"set {items!r}")
    producers = tree.get("producers") if isinstance(tree, dict) else None
    if isinstance(producers, list) and producers and isinstance(producers[0], dict):
        i = draw(st.integers(0, len(producers) - 1))
        entry = {**producers[i], "transaction": section, **extra} if isinstance(producers[i], dict) else producers[i]
        changed = put(tree, ("producers", i), entry)
    else:
        changed = put(tree, ("producers",), [{"name": "txn", "group": "txn_group", "transaction": section, **extra}])
    return Mutation("broken_transaction", dump(changed).encode(), note=f"transaction {section!r} {extra!r}")


ROLES = ["ASYNC_MASTER", "SYNC_MASTER", "SLAVE", "SLAVE", "slave", "MASTER", "", None, 5]


@st.composite
def ha_roles(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """Broker groups with no master, two masters, 65 replicas, roles of the wrong spelling, a
    SLAVE without replicas, and faults aimed at slaves that do not exist."""
    n = draw(st.sampled_from([0, 1, 2, 3, 65]))
    if n == 65:
        replicas: Any = [{"role": "ASYNC_MASTER"}] + [{"role": "SLAVE"}] * 64
    else:
        replicas = [{"role": draw(st.sampled_from(ROLES))} for _ in range(n)]
        if replicas and draw(st.booleans()):
            replicas[-1]["zone"] = draw(st.sampled_from(["zone-a", "zone-x", "", 5, None]))
    replicas = draw(st.sampled_from([replicas, replicas, None, "SLAVE", {"role": "SLAVE"}]))
    store_role = draw(st.sampled_from([None, "SLAVE", "SYNC_MASTER", "ASYNC_MASTER"]))
    if sweep:
        items = {"cluster.brokers[0].replicas": replicas}
        if store_role:
            items["cluster.brokers[0].store.broker_role"] = store_role
        return Mutation("ha_roles", dump(_with_set(tree, items)).encode(), note=f"set {items!r}")
    cluster = tree.get("cluster") if isinstance(tree, dict) and isinstance(tree.get("cluster"), dict) else {}
    brokers = cluster.get("brokers") if isinstance(cluster.get("brokers"), list) else [{"name": "broker-a"}]
    i = draw(st.integers(0, len(brokers) - 1))
    broker = dict(brokers[i]) if isinstance(brokers[i], dict) else {"name": "broker-a"}
    broker["replicas"] = replicas
    if store_role:
        broker["store"] = {**(broker.get("store") or {}), "broker_role": store_role}
    changed = put(tree, ("cluster",), {**cluster, "brokers": [*brokers[:i], broker, *brokers[i + 1:]]})
    if draw(st.booleans()):
        slave = f"{broker.get('name', 'broker-a')}-s{draw(st.integers(1, 3))}"
        kind = draw(st.sampled_from(["process_crash", "power_loss", "disk_slow", "fsync_stall"]))
        fault = {"at_ms": 1, "kind": kind, "node": slave, "duration_ms": 5, **({"factor": 2} if kind == "disk_slow" else {})}
        changed["faults"] = [*(changed.get("faults") or []), fault] if isinstance(changed.get("faults"), list) else [fault]
    return Mutation("ha_roles", dump(changed).encode(), note=f"brokers[{i}] replicas {replicas!r} role {store_role}")


_PATH_CHANGES = [
    lambda p: p + ".x", lambda p: p + "[0]", lambda p: p + "[999999]", lambda p: p + "[1000000]", lambda p: p + "[-1]",
    lambda p: p + "[01]", lambda p: p.replace(".", "..", 1), lambda p: "." + p, lambda p: p + ".", lambda p: " " + p,
    lambda p: p.replace(".", " . "), lambda p: p.replace("a", "а", 1), lambda p: p + "." + "x" * 65,
    lambda p: ".".join(["a"] * 33), lambda p: "a" + ".a" * 5_000, lambda p: p + ".__class__",
    lambda p: p + ".model_config", lambda p: "__dict__", lambda p: p + "[0]" * 40, lambda p: p + "\u200b",
    lambda p: p + "\n", lambda p: p.upper(), lambda p: p.split(".")[0], lambda p: "", lambda p: p + "=",
    lambda p: p + "[0].x" * 16, lambda p: p.replace("[0]", "[ 0 ]"), lambda p: p,
]
_SET_PATH_VALUES = ["1", "x", "[]", "{}", "null", "0x1F", "1:30", ".nan", "'a'", "[1, [2]]", "10s", "true", "-1"]


@st.composite
def hostile_set_path(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A key path (`--set`, a sweep's `set:` key or parameter `key`) made from a real one: one
    level too deep, an index out of range, a look-alike letter, 33 parts, 10,000 characters,
    Python's attribute names, blanks and line breaks."""
    own = [k for p, _v in walk(tree) if p and (k := _key_path(p)) is not None] if not sweep else []
    path = draw(st.sampled_from(own or SCENARIO_KEY_PATHS))
    hostile = draw(st.sampled_from(_PATH_CHANGES))(path)
    value = draw(st.sampled_from(_SET_PATH_VALUES))
    if not sweep:
        return Mutation("hostile_set_path", dump(tree).encode(), overrides=[f"{hostile}={value}"],
                        note=f"--set {hostile[:80]!r}={value}")
    grid = tree.get("grid") if isinstance(tree.get("grid"), dict) else {}
    if grid and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(grid)))
        changed = put(tree, ("grid", name), {**grid[name], "key": hostile}) if isinstance(grid[name], dict) else tree
    else:
        changed = _with_set(tree, {hostile: yaml.safe_load(value)})
    return Mutation("hostile_set_path", dump(changed).encode(), note=f"key path {hostile[:80]!r}")


YAML11_LITERALS = ["1:30", "1:30:00", "-1:30", "190:20:30.15", "1:30.5", "017", "00", "0_1", "-017", "+017", "0x1F",
                   "0x_1F", "-0x1F", "0b101", "0b_1", "0b1_", "!!int 0x1F", "!!int 0o17", "!!int 017", "!!int 1:30",
                   "!!float 1:30", "1__0", "1_", "1_.5", "1_e3", "!!int 0b11", "12:30:00", "0777", "0x7FFFFFFF"]


@st.composite
def yaml11_number(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """YAML 1.1's base-60, octal, hexadecimal and binary literals, misplaced underscores, plain
    or tagged, as values, keys, seeds or `--set` values: refused wherever they stand."""
    literal = draw(st.sampled_from(YAML11_LITERALS))
    return _placed(draw, "yaml11_number", tree, sweep, literal, literal, must_fail=True)


HUGE_FORMS = {
    "decimal": lambda n: "9" * n, "negative": lambda n: "-" + "9" * n, "hex": lambda n: "0x" + "f" * n,
    "binary": lambda n: "0b1" + "0" * n, "octal": lambda n: "0" + "7" * n, "base60": lambda n: "1" + ":59" * (n // 3 + 1),
    "float": lambda n: "1." + "5" * n, "exponent": lambda n: "1e" + "9" * n, "underscored": lambda n: "1" + "_000" * (n // 4 + 1),
    "tiny": lambda n: "0." + "0" * n + "1",
}


@st.composite
def huge_literal(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A number literal of 33 to 10,000 characters in every base (`seed: 0x` + 3,600 `f`s is an
    integer Python cannot print): refused by its length, before it is converted."""
    form = draw(st.sampled_from(sorted(HUGE_FORMS)))
    n = draw(st.sampled_from([33, 400, 3_600, 4_300, 10_000]))
    tag = draw(st.sampled_from(["", "", "!!int ", "!!float "]))
    literal = tag + HUGE_FORMS[form](n)
    return _placed(draw, "huge_literal", tree, sweep, literal, f"{tag}{form} × {n}", must_fail=True)


CONTROL = ["\0", "\x07", "\x08", "\x1b", "\x1b[2J", "\r", "\n", "\t", "\x7f", "\x85", "\x9b", "\u2028", "\u202e",
           "\u200b", "\ufeff", "\u00a0", "\x0c", "\x00\x1b]0;pwned\x07"]


@st.composite
def control_char(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A control or format character (NUL, BEL, ESC, CR, DEL, C1, LS, RLO, ZWSP, NBSP) inside a
    name or a tag, written as a YAML escape or through `--set`: refused with the key path."""
    named = [p for p, v in walk(tree) if isinstance(v, str) and p and
             (p[-1] in NAME_KEYS or (len(p) > 1 and p[-2] in NAME_KEYS))]
    char = draw(st.sampled_from(CONTROL))
    if named:
        path = draw(st.sampled_from(named))
        text = get(tree, path)
        at = draw(st.integers(0, len(text)))
        value = text[:at] + char + text[at:]
        key = _key_path(path)
        if not sweep and key and draw(st.integers(0, 3)) == 0:
            return Mutation("control_char", dump(tree).encode(), overrides=[f"{key}={_flow(value)}"],
                            note=f"--set {key}={value!r}", must_fail=True)
        return Mutation("control_char", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}", must_fail=True)
    if sweep:
        return Mutation("control_char", dump(put(tree, ("name",), "s" + char)).encode(), note=f"name {char!r}",
                        must_fail=True)
    tags = ["a", f"b{char}c"]
    return Mutation("control_char", dump(put(tree, ("producers",), [{"name": "p", "tags": tags}])).encode(),
                    note=f"tags {tags!r}", must_fail=True)


@st.composite
def long_key(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A 65- to 10,000-character key (an explicit `? ` key beyond libyaml's 1,024-character simple
    key) in `expect:`, at the top level, in any mapping, in a sweep's `set:`, `grid:` or `zip:`,
    or a `--set` path: refused, and never echoed whole."""
    n = draw(st.sampled_from([65, 200, 1_025, 10_000]))
    stem = draw(st.sampled_from(["a", "lost", "latency_ms.p", "send_share_by_broker.b", "x.", "а", "duration_ms", "_"]))
    key = (stem * (n // len(stem) + 1))[:n]
    where = draw(st.sampled_from(["sections", "top", "any"]))
    if where == "any":
        path = draw(st.sampled_from(_paths(tree, dict)))
        changed = put(tree, path, {**get(tree, path), key: 1})
    elif where == "top":
        changed = {**tree, key: 1}
    elif sweep:
        section = draw(st.sampled_from(["set", "grid", "zip"]))
        value = 1 if section == "set" else {"key": "duration_ms", "values": [1000]}
        changed = put(tree, (section,), {**(tree.get(section) or {}), key: value})
    elif draw(st.booleans()):
        return Mutation("long_key", dump(tree).encode(), overrides=[f"expect.{key}=0"], note=f"--set expect.{stem}×{n}",
                        must_fail=True)
    else:
        value = draw(st.sampled_from([0, {"max": 1}, "x"]))
        changed = put(tree, ("expect",), {**(tree.get("expect") or {}), key: value})
    return Mutation("long_key", dump(changed).encode(), note=f"{where}: {stem!r} × {n}", must_fail=True)


DURATIONS_REFUSED = ["1:30", "1:30:00", "0:30", "1:60", "0x1Fms", "５s", "1__0s", "1_s", "10 parsecs", "5min5s",
                     "1h30m", "1e400s", "1 0s", "s", "", "ms10", "1.5.2s", "0b101ms", "--1s", "1,5s", "٣s", "1 000ms"]
DURATIONS_OTHER = ["017", "017s", "1e3", "1e3s", "1.5e-3min", "1_000ms", " 5 s ", "250μs", "250µs", "250us", "1d",
                   "5 S", "+5s", "-0s", "0.0005ms", "10S", "9999999999999999d"]


@st.composite
def duration_string(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """A quoted duration string at a field whose name ends in `_ms`: '1:30' (minutes:seconds or
    hours:minutes?), hexadecimal or fullwidth digits are refused; '017s' is 17 s, '250μs' 0.25 ms."""
    timed = [p for p in _paths(tree) if p and isinstance(p[-1], str) and p[-1].endswith("_ms")]
    refused = draw(st.booleans())
    value = draw(st.sampled_from(DURATIONS_REFUSED if refused else DURATIONS_OTHER))
    if not timed:
        changed = _with_set(tree, {"duration_ms": value}) if sweep else {**tree, "duration_ms": value}
        return Mutation("duration_string", dump(changed).encode(), note=f"duration_ms = {value!r}", must_fail=refused)
    path = draw(st.sampled_from(timed))
    key = _key_path(path)
    if not sweep and key and draw(st.integers(0, 3)) == 0:
        return Mutation("duration_string", dump(tree).encode(), overrides=[f"{key}={_flow(value)}"],
                        note=f"--set {key}={value!r}", must_fail=refused)
    return Mutation("duration_string", dump(put(tree, path, value)).encode(), note=f"{path} = {value!r}",
                    must_fail=refused)


FAULT_KINDS = ["process_crash", "power_loss", "restart", "partition", "heal", "link_latency", "packet_loss",
               "disk_slow", "fsync_stall", "pause", "shutdown"]
RANDOM_KINDS = ["process_crash", "power_loss", "partition", "link_latency", "packet_loss", "disk_slow", "fsync_stall",
                "pause"]


def node_names(scenario: Any) -> dict[str, list[str]]:
    """A loaded scenario's node names by kind: 'namesrv', 'broker' (masters), 'slave', 'client'."""
    from rmqsim.scenario.validate import SLAVE, broker_group_nodes, instance_names

    out: dict[str, list[str]] = {"namesrv": [n.name for n in scenario.cluster.nameservers], "broker": [], "slave": [],
                                 "client": []}
    for b in scenario.cluster.brokers:
        for name, role, _zone, _id in broker_group_nodes(b.name, b.zone, b.store.broker_role, b.replicas):
            out["slave" if role == SLAVE else "broker"].append(name)
    for entry in [*scenario.producers, *scenario.consumers]:
        out["client"] += instance_names(entry.name, entry.count)
    return out


@st.composite
def fault_plan(draw: Any, names: dict[str, list[str]], first_ms: int = 300, last_ms: int = 2_500) -> dict[str, list]:
    """A fault plan drawn from one integer (`plan_from`): hypothesis sees a single choice, so
    a long run of examples never makes its engine search a deep tree of node choices."""
    return plan_from(random.Random(draw(st.integers(0, 2**64 - 1))), names, first_ms, last_ms)


def plan_from(rng: random.Random, names: dict[str, list[str]], first_ms: int, last_ms: int) -> dict[str, list]:
    """`faults:` (1 to 3 scripted faults between `first_ms` and `last_ms`, each valid for the
    nodes named) and sometimes `random_faults:` (a high rate, so that they fire within seconds)."""
    disks = names["broker"] + names["slave"]
    every = disks + names["client"] + names["namesrv"]
    faults = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice([k for k in FAULT_KINDS if k != "shutdown" or names["client"]])
        fault: dict[str, Any] = {"at_ms": rng.randint(first_ms, last_ms), "kind": kind}
        if kind in ("process_crash", "power_loss", "restart", "pause"):
            fault["node"] = rng.choice(every)
        elif kind in ("disk_slow", "fsync_stall"):
            fault["node"] = rng.choice(disks)
        elif kind == "shutdown":
            fault["node"] = rng.choice(names["client"])
        elif kind == "partition":
            shuffled = rng.sample(every, len(every))
            cut = rng.randint(1, len(shuffled) - 1)
            fault["groups"] = [shuffled[:cut], shuffled[cut:]]
            fault["one_way"] = rng.random() < 0.5
        elif kind in ("link_latency", "packet_loss"):
            fault["src"], fault["dst"] = rng.sample(every, 2)
            fault["both_ways"] = rng.random() < 0.5
            if kind == "link_latency":
                fault["extra_latency_ms"] = rng.choice([1, 20, {"dist": "exponential", "mean": 5}])
            else:
                fault["probability"] = rng.choice([0.05, 0.3, 0.9])
        if kind == "disk_slow":
            fault["factor"] = rng.choice([2, 10, 100])
        if kind in ("fsync_stall", "pause") or (kind in ("process_crash", "power_loss", "partition", "link_latency",
                                                         "packet_loss", "disk_slow") and rng.random() < 0.5):
            fault["duration_ms"] = rng.choice([100, 300, 800, 1_500])
        if rng.random() < 0.25:
            fault["jitter_ms"] = rng.choice([10, 200])
        faults.append(fault)
    plan: dict[str, list] = {"faults": sorted(faults, key=lambda f: f["at_ms"])}
    if rng.random() < 0.25:
        kind = rng.choice(RANDOM_KINDS)
        pool = disks if kind in ("disk_slow", "fsync_stall") else every
        size = min(len(pool), rng.randint(2 if kind == "partition" else 1, 3))
        spec: dict[str, Any] = {"kind": kind, "nodes": rng.sample(pool, size), "rate_per_hour": 7_200,
                                "min_up_ms": 500, "down_ms": 200}
        spec.update({"disk_slow": {"factor": 5}, "link_latency": {"extra_latency_ms": 3},
                     "packet_loss": {"probability": 0.2}}.get(kind, {}))
        plan["random_faults"] = [spec]
    return plan


@st.composite
def fault_schedule(draw: Any, tree: Any, names: dict[str, list[str]]) -> Mutation:
    """A valid fault schedule for the document's own nodes, early in the run (accepted unless
    the document says otherwise): the source of the fault-reaching runs."""
    plan = draw(fault_plan(names))
    return Mutation("fault_schedule", dump({**tree, **plan}).encode(), note=f"{plan!r}"[:300])


@st.composite
def multi_document(draw: Any, tree: Any) -> Mutation:
    """Several documents, explicit starts and ends, directives, empty documents, a root scalar."""
    text = dump(tree)
    variant = draw(st.sampled_from(["two", "trailing start", "start", "end", "yaml 1.1", "yaml 1.2", "yaml 2.0",
                                    "tag directive", "root tag", "empty", "comment only", "root scalar",
                                    "twice directive", "start end start"]))
    out = {"two": f"{text}---\n{text}", "trailing start": f"{text}---\n", "start": f"---\n{text}",
           "end": f"{text}...\n", "yaml 1.1": f"%YAML 1.1\n---\n{text}", "yaml 1.2": f"%YAML 1.2\n---\n{text}",
           "yaml 2.0": f"%YAML 2.0\n---\n{text}", "tag directive": f"%TAG !e! tag:example.com,2000:\n---\n{text}",
           "root tag": f"--- !!map\n{text}", "empty": "", "comment only": "# nothing here\n",
           "root scalar": "--- |\n  name: x\n", "twice directive": f"%YAML 1.1\n%YAML 1.1\n---\n{text}",
           "start end start": f"---\n{text}...\n---\n{text}"}[variant]
    return Mutation("multi_document", out.encode(), note=variant, must_fail=variant in ("two", "start end start"))


@st.composite
def expect_section(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """`expect:` with real and misspelt metrics, per-broker metrics of brokers that do or do not
    exist, and bounds that are inverted, non-finite, empty or of the wrong type."""
    from analysis.checkers.verdict import EXPECTABLE_BROKER_METRICS, EXPECTABLE_METRICS

    brokers = [v for p, v in walk(tree) if len(p) >= 2 and p[-1] == "name" and "brokers" in p] or ["broker-a"]
    key_choices = st.one_of(st.sampled_from(EXPECTABLE_METRICS),
                            st.sampled_from(EXPECTABLE_METRICS).flatmap(_typo),
                            st.builds(lambda m, b: f"{m}.{b}", st.sampled_from(EXPECTABLE_BROKER_METRICS),
                                      st.sampled_from([*brokers, "broker-zz", ""])),
                            st.sampled_from(["", "lost.", ".lost", "latency_ms.p99.x", "LOST", 5, None]))
    bounds = st.sampled_from([0, 1, -1, 0.5, {"min": 1}, {"max": 0}, {"min": 2, "max": 1}, {"min": float("nan")}, {},
                              "x", [], None, True, {"mIn": 1}, {"min": "1"}, {"max": 1e300}, float("inf"),
                              {"min": 0, "max": 0, "x": 1}])
    section = draw(st.dictionaries(key_choices, bounds, min_size=1, max_size=4))
    if sweep:
        items = {f"expect.{k}": v for k, v in section.items() if isinstance(k, str)} or {"expect": section}
        return Mutation("expect_section", dump(_with_set(tree, items)).encode(), note=f"set {items!r}"[:300])
    return Mutation("expect_section", dump(put(tree, ("expect",), section)).encode(), note=f"expect {section!r}"[:300])


@st.composite
def deep_block(draw: Any, tree: Any, sweep: bool = False) -> Mutation:
    """Nesting in block style (libyaml stops at 1,000 levels with its own message; rmqsim's
    limit of 32 speaks first), and in `--set` values and sweep `set:` values."""
    depth = draw(st.sampled_from([31, 33, 100, 999, 1_001, 1_100]))
    form = draw(st.sampled_from(["sequences", "mappings", "mixed", "value"]))
    text = dump(tree)
    if form == "value":
        value = "[" * depth + "1" + "]" * depth
        if sweep:
            return Mutation("deep_block", with_snippet(tree, ("set",), f"{{duration_ms: {value}}}"),
                            note=f"set value depth {depth}", must_fail=depth >= 33)
        return Mutation("deep_block", text.encode(), overrides=[f"name={value}"], note=f"--set depth {depth}",
                        must_fail=depth >= 33)
    if form == "sequences":
        block = "zz_deep:\n  " + "- " * depth + "1\n"
    elif form == "mappings":
        block = "zz_deep:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(depth)) + " " * (depth + 1) + "1\n"
    else:
        half = depth // 2
        block = "zz_deep:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(half)) + " " * (half + 1) + \
            "[" * (depth - half) + "1" + "]" * (depth - half) + "\n"
    return Mutation("deep_block", (text + block).encode(), note=f"{form} depth {depth}", must_fail=depth >= 33)


BASE_KINDS = ("wrong_type", "unknown_key", "extreme_number", "huge_int", "delete_key", "transplant", "duplicate_key",
              "empty_key", "binary", "deep_nesting", "alias_bomb", "unsafe_tag", "hostile_name", "bad_set")
NEW_KINDS = ("confusable", "bom_crlf", "merge_key", "nan_inf", "broken_transaction", "ha_roles", "hostile_set_path",
             "yaml11_number", "huge_literal", "control_char", "long_key", "duration_string", "fault_schedule",
             "multi_document", "expect_section", "deep_block")


def kinds(tree: Any, pool: list[Any], sweep: bool = False,
          names: dict[str, list[str]] | None = None) -> dict[str, st.SearchStrategy[Mutation]]:
    """Every mutation kind for one document (`hostile_base` only for sweep files; `fault_schedule`
    only for scenarios, given their node `names`)."""
    out = {"wrong_type": wrong_type(tree), "unknown_key": unknown_key(tree), "extreme_number": extreme_number(tree),
           "huge_int": huge_int(tree), "delete_key": delete_key(tree), "transplant": transplant(tree, pool),
           "duplicate_key": duplicate_key(tree), "empty_key": empty_key(tree), "binary": binary(tree),
           "deep_nesting": deep_nesting(tree), "alias_bomb": alias_bomb(tree), "unsafe_tag": unsafe_tag(tree),
           "hostile_name": hostile_name(tree), "bad_set": bad_set(tree),
           "confusable": confusable(tree), "bom_crlf": bom_crlf(tree), "merge_key": merge_key(tree),
           "nan_inf": nan_inf(tree, sweep), "broken_transaction": broken_transaction(tree, sweep),
           "ha_roles": ha_roles(tree, sweep), "hostile_set_path": hostile_set_path(tree, sweep),
           "yaml11_number": yaml11_number(tree, sweep), "huge_literal": huge_literal(tree, sweep),
           "control_char": control_char(tree, sweep), "long_key": long_key(tree, sweep),
           "duration_string": duration_string(tree, sweep), "multi_document": multi_document(tree),
           "expect_section": expect_section(tree, sweep), "deep_block": deep_block(tree, sweep)}
    if names is not None:
        out["fault_schedule"] = fault_schedule(tree, names)
    if sweep:
        out["hostile_base"] = hostile_base(tree)
        out["bad_set"] = bad_key_paths(tree)
    return out
