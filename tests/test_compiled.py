"""The compiled per-message modules (sim/kernel/compiled.py): used after setup, never for an edited
source, and a compiled run is the same run as a pure one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.kernel import compiled
from tests.conftest import ROOT

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import sim
from sim.kernel import compiled
r = sim.run({scenario!r}, seed={seed}, overrides={overrides!r})
summary = {{k: v for k, v in r.summary.items() if "wall" not in k}}
print(json.dumps({{"summary": summary, "status": compiled.status()}}, sort_keys=True, default=str))
"""

# a crash with recovery, a power loss of an ASYNC_FLUSH master, orderly consumption through a
# broker failure, transactional check-back: the mechanisms the compiled modules carry
STORIES = [
    ("process_crash_broker.yaml", 1, ["duration_ms=30s"]),
    ("power_loss_async_master.yaml", 2, []),
    ("orderly_broker_failure.yaml", 1, []),
    ("txn_producers_down.yaml", 1, []),
]


def _child(scenario: str, seed: int, overrides: list[str], pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    if pure:
        env[compiled.PURE_ENV] = "1"
    code = _CHILD.format(root=str(ROOT), scenario=str(ROOT / "scenarios" / scenario), seed=seed, overrides=overrides)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=str(ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_setup_built_every_hot_module_from_the_current_sources() -> None:
    """scripts/setup.sh (the README's commands) builds them; a missing or stale build here means
    the figures in bench/ would measure the pure modules."""
    manifest = compiled.read_manifest()
    assert manifest is not None, "no compiled build: run scripts/setup.sh (or scripts/build_compiled.py)"
    assert sorted(manifest["modules"]) == sorted(compiled.HOT_MODULES)
    stale = compiled.stale_modules(manifest)
    assert not stale, f"compiled from older sources: {stale}; run scripts/build_compiled.py"


@pytest.mark.parametrize(("scenario", "seed", "overrides"), STORIES)
def test_a_compiled_run_is_the_same_run_as_a_pure_one(scenario: str, seed: int, overrides: list[str]) -> None:
    fast = _child(scenario, seed, overrides, pure=False)
    pure = _child(scenario, seed, overrides, pure=True)
    assert fast["status"]["compiled"], "the compiled modules were not used"
    assert not fast["status"]["stale"]
    assert pure["status"] == {"compiled": [], "stale": []}
    assert fast["summary"]["trace_sha256"] == pure["summary"]["trace_sha256"]
    assert fast["summary"] == pure["summary"]


def _fake_build(tmp_path: Path, source: bytes, compiled_from: bytes) -> compiled._Finder:
    root, build = tmp_path / "tree", tmp_path / "build"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_bytes(source)
    (build / "pkg").mkdir(parents=True)
    binary = "pkg/mod" + compiled.importlib.machinery.EXTENSION_SUFFIXES[0]
    (build / binary).write_bytes(b"not loaded by find_spec")
    modules = {"pkg.mod": {"file": binary, "source_sha256": compiled.hashlib.sha256(compiled_from).hexdigest()}}
    return compiled._Finder(root, build, modules)


def test_a_build_of_the_current_source_is_found(tmp_path: Path) -> None:
    finder = _fake_build(tmp_path, b"x = 1\n", b"x = 1\n")
    spec = finder.find_spec("pkg.mod")
    assert spec is not None and spec.origin == str(tmp_path / "build" / "pkg" / ("mod" + compiled.importlib.machinery.EXTENSION_SUFFIXES[0]))
    assert finder.find_spec("pkg.mod") is not None  # imported again: counted once
    assert finder.loaded == ["pkg.mod"] and finder.stale == []
    assert finder.find_spec("pkg.other") is None  # not in the build: the usual import


def test_an_edited_source_is_imported_pure_not_from_its_stale_build(tmp_path: Path) -> None:
    finder = _fake_build(tmp_path, b"x = 2\n", b"x = 1\n")
    assert finder.find_spec("pkg.mod") is None
    assert finder.stale == ["pkg.mod"] and finder.loaded == []


def test_a_binary_compiled_against_an_edited_module_is_not_used_either(tmp_path: Path) -> None:
    """pkg.user cimports pkg.mod's extension types: with pkg.mod edited (imported pure), the binary
    of pkg.user would fail its import-time check of those types, so it is imported pure too."""
    finder = _fake_build(tmp_path, b"x = 2\n", b"x = 1\n")
    (tmp_path / "tree" / "pkg" / "user.py").write_bytes(b"y = 1\n")
    user = "pkg/user" + compiled.importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / "build" / user).write_bytes(b"not loaded by find_spec")
    finder.modules["pkg.user"] = {"file": user, "source_sha256": compiled.hashlib.sha256(b"y = 1\n").hexdigest(),
                                  "cimports": ["pkg.mod"]}
    assert finder.find_spec("pkg.user") is None
    assert finder.stale == ["pkg.user"]
    assert compiled.stale_modules({"modules": finder.modules}, tmp_path / "build", tmp_path / "tree") == [
        "pkg.mod", "pkg.user"]
    (tmp_path / "tree" / "pkg" / "mod.py").write_bytes(b"x = 1\n")  # the edit undone: both current again
    assert finder.find_spec("pkg.user") is not None and finder.find_spec("pkg.mod") is not None


def test_a_build_for_another_interpreter_is_not_used(tmp_path: Path) -> None:
    (tmp_path / compiled.MANIFEST).write_text(json.dumps({"cache_tag": "cpython-27", "modules": {}}))
    assert compiled.read_manifest(tmp_path) is None
    assert compiled.read_manifest(tmp_path / "absent") is None


def test_the_hot_classes_are_extension_types_with_their_attributes_as_fields() -> None:
    """What the build's generated .pxd (scripts/extension_types.py) buys: `self.x` is a field."""
    if compiled.pure_requested():
        pytest.skip("RMQSIM_PURE is set: this process imported the pure modules")
    from models.broker.commit_log import CommitLog
    from sim.kernel.node import Node

    heap_type = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement's type; an extension type is static
    for cls in (CommitLog, Node):
        assert not cls.__flags__ & heap_type, f"{cls.__name__} was not compiled as an extension type"
    assert type(CommitLog.__dict__["wrote_position"]).__name__ == "getset_descriptor"  # a `cdef public` field


def _extension_types():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import extension_types
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return extension_types


PLAIN = '''
from other.module import Base, Unknown
class Plain:
    kind = "x"
    def __init__(self):
        self.a, (self.b, other) = 1, (2, 3)
        self.kind = "y"  # a class attribute: stays in the instance dict
    def later(self):
        self.c: int = 0
        self.a += 1
class Derived(Plain):
    def __init__(self):
        self.a, self.d = 1, 2
class Slotted:
    __slots__ = ("e",)
class Opened(Slotted):
    def __init__(self):
        self.f = 1
class FromElsewhere(Base):
    def __init__(self):
        self.g = self.base_field = 1
class NotExtensible(Unknown):
    pass
class Annotated:
    node: int
@decorated
class Decorated:
    pass
'''


def test_the_generated_pxd_declares_fields_bases_and_openness_as_python_has_them() -> None:
    et = _extension_types()
    others = {("other.module", "Base"): et.Declared(("base_field",), True)}
    pxd = et.augmenting_pxd(PLAIN, others)
    assert pxd is not None
    assert pxd.split("\n", 1)[1] == (
        "from other.module cimport Base\n"
        "cdef class Plain:\n    cdef dict __dict__\n    cdef object __weakref__\n"
        "    cdef public object a\n    cdef public object b\n    cdef public object c\n\n"
        "cdef class Derived(Plain):\n    cdef public object d\n\n"
        "cdef class Slotted:\n    cdef public object e\n\n"  # closed, as its __slots__ make it
        "cdef class Opened(Slotted):\n    cdef dict __dict__\n    cdef object __weakref__\n"
        "    cdef public object f\n\n"
        "cdef class FromElsewhere(Base):\n    cdef public object g\n")
    assert et.augmenting_pxd("class Only(Base):\n    pass\n") is None
    typed = ("import cython\nfrom other.module import Base, Unknown\n"
             "@cython.locals(b=Base, u=Unknown, n=cython.int)\ndef f(b, u, n):\n    return b.base_field\n")
    assert et.augmenting_pxd(typed, others).split("\n", 1)[1] == "from other.module cimport Base\n"
    assert et.augmenting_pxd(typed) is None  # Base is no compiled module's extension type
    assert et.declared_types("m", PLAIN) == {("m", "Plain"): et.Declared(("a", "b", "c"), True),
                                             ("m", "Derived"): et.Declared(("a", "b", "c", "d"), True),
                                             ("m", "Slotted"): et.Declared(("e",), False),
                                             ("m", "Opened"): et.Declared(("e", "f"), True)}


TYPED = '''
from typing import TYPE_CHECKING
from other.module import Base
if TYPE_CHECKING:
    from other.module import Clock
class Local:
    __slots__ = ("x",)
class User(Base):
    def __init__(self, clock, base):
        self.clock: Clock = clock
        self.local: Local = Local()
        self.base: Base = base
        self.later: Later = None
        self.n: int = 0
        self.table: dict[str, int] = {}
        self.items: list = []
        self.maybe: dict[str, int] | None = None
class Later:
    pass
class Columns(dict):
    pass
'''


def test_an_annotated_field_of_an_extension_type_is_declared_with_its_type() -> None:
    """`self.clock: Clock = …` makes `self.clock.now_us` two field loads when compiled, `dict[…]`
    and `list[…]` exact dict and list fields; a type the build cannot resolve (declared further
    down, not an extension type, a union) leaves an object field."""
    et = _extension_types()
    others = {("other.module", "Base"): et.Declared(("base_field",), False),
              ("other.module", "Clock"): et.Declared(("now_us",), False)}
    assert et.augmenting_pxd(TYPED, others).split("\n", 1)[1] == (
        "from other.module cimport Base\nfrom other.module cimport Clock\n"
        "cdef class Local:\n    cdef public object x\n\n"
        "cdef class User(Base):\n    cdef dict __dict__\n    cdef object __weakref__\n"
        "    cdef public Base base\n    cdef public Clock clock\n    cdef public list items\n"
        "    cdef public object later\n    cdef public Local local\n    cdef public object maybe\n"
        "    cdef public object n\n    cdef public dict table\n\n"
        "cdef class Later:\n    cdef dict __dict__\n    cdef object __weakref__\n")  # not Columns: a dict


CCALLS = '''
import cython
from other.module import Base
class Service:
    __slots__ = ("n",)
    @cython.ccall
    @cython.locals(b=Base, t=Base)
    def handle(self, b, k, n=0):
        t = b
        return t.base_field + k + n
    def plain(self):
        return self.handle(None, 1)
class Special(Service):
    __slots__ = ()
    @cython.ccall
    @cython.locals(b=Base)
    def handle(self, b, k, n=0):
        return 0
'''


def test_a_ccall_method_is_declared_cpdef_with_its_parameter_types() -> None:
    """`@cython.ccall` (a no-op when pure): `self.handle(…)` from compiled code is a C call; a
    parameter typed by `cython.locals` keeps its type, a default becomes `=*`."""
    et = _extension_types()
    others = {("other.module", "Base"): et.Declared(("base_field",), False)}
    assert et.augmenting_pxd(CCALLS, others).split("\n", 1)[1] == (
        "from other.module cimport Base\n"
        "cdef class Service:\n    cdef public object n\n    cpdef handle(self, Base b, k, n=*)\n\n"
        "cdef class Special(Service):\n    cpdef handle(self, Base b, k, n=*)\n")


def test_a_ccall_method_the_pxd_cannot_declare_fails_the_build() -> None:
    et = _extension_types()
    others = {("other.module", "Base"): et.Declared(("base_field",), False)}
    overriding = CCALLS.replace("    @cython.ccall\n    @cython.locals(b=Base)\n    def handle(self, b, k, n=0):\n",
                                "    def handle(self, b, k, n=0):\n")
    with pytest.raises(ValueError, match="Special.handle overrides a cpdef method of Service"):
        et.augmenting_pxd(overriding, others)
    with pytest.raises(ValueError, match="plain positional parameters only"):
        et.augmenting_pxd(CCALLS.replace("def handle(self, b, k, n=0):\n        t = b",
                                         "def handle(self, b, k, *more):\n        t = b"), others)
    with pytest.raises(ValueError, match="parameter b has a cython.locals type"):
        et.augmenting_pxd(CCALLS, {})  # Base is no compiled module's extension type


def test_bases_in_other_modules_are_resolved_across_a_chain() -> None:
    et = _extension_types()
    sources = {"a": "class A:\n    __slots__ = ('x',)\n",
               "b": "from a import A\nclass B(A):\n    __slots__ = ('y',)\n",
               "c": "from b import B\nclass C(B):\n    __slots__ = ('z',)\n"}
    found = et.all_declared_types(sources)
    assert found[("c", "C")] == et.Declared(("x", "y", "z"), False)
    assert set(found) == {("a", "A"), ("b", "B"), ("c", "C")}
