"""Generated mutations of rmqsim's input files, as hypothesis strategies.

A mutation starts from a bundled document (a scenario or a sweep file, parsed) and changes it
in one way, of one `kind`. Where the kind changes a value, the place is a key path drawn from a
walk of the document itself and of its *resolved* form (the validated model dumped with every
default), so every field a model has, including fields added later, is a target without this
file knowing its name. Text-level kinds (deep nesting, alias bombs, tags, huge integers,
duplicate and empty keys, binary bytes) put a raw YAML snippet at such a place, or change the
bytes of the file.

`Mutation.content` is the file's bytes, `Mutation.overrides` the `--set` items to pass along.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import strategies as st

PLACEHOLDER = "RMQSIM_FUZZ_PLACEHOLDER"
Path = tuple  # key path parts: str keys and int indexes


@dataclass
class Mutation:
    kind: str
    content: bytes
    overrides: list[str] = field(default_factory=list)
    note: str = ""  # what was done, for failure messages


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


def dump(tree: Any) -> str:
    return yaml.safe_dump(tree, sort_keys=False, default_flow_style=False, allow_unicode=True, width=10_000)


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


def kinds(tree: Any, pool: list[Any], sweep: bool = False) -> dict[str, st.SearchStrategy[Mutation]]:
    """Every mutation kind for one document (`hostile_base` only for sweep files)."""
    out = {"wrong_type": wrong_type(tree), "unknown_key": unknown_key(tree), "extreme_number": extreme_number(tree),
           "huge_int": huge_int(tree), "delete_key": delete_key(tree), "transplant": transplant(tree, pool),
           "duplicate_key": duplicate_key(tree), "empty_key": empty_key(tree), "binary": binary(tree),
           "deep_nesting": deep_nesting(tree), "alias_bomb": alias_bomb(tree), "unsafe_tag": unsafe_tag(tree),
           "hostile_name": hostile_name(tree), "bad_set": bad_set(tree)}
    if sweep:
        out["hostile_base"] = hostile_base(tree)
        out["bad_set"] = bad_key_paths(tree)
    return out
