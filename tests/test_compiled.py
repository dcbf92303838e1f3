"""The compiled modules (sim/compiled.py, setup.py): built by setup, rebuilt or refused when a
source changes, declared as their classes are, and a compiled run is the same run as a pure one."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim import compiled
from tests.conftest import ROOT

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import rmqsim
import sim
from sim import compiled
r = rmqsim.run({scenario!r}, seed={seed}, overrides={overrides!r})
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


def test_setup_built_every_compiled_module_from_the_current_sources() -> None:
    """scripts/setup.sh (the README's commands) builds them; a missing or stale build here means
    the figures in bench/ would measure the pure modules."""
    manifest = compiled.read_manifest()
    assert manifest is not None, "no compiled build: run scripts/setup.sh"
    assert sorted(manifest["modules"]) == compiled.compiled_modules()
    assert compiled.stale_modules() == []
    assert len(compiled.compiled_modules()) == 27


@pytest.mark.parametrize(("scenario", "seed", "overrides"), STORIES)
def test_a_compiled_run_is_the_same_run_as_a_pure_one(scenario: str, seed: int, overrides: list[str]) -> None:
    fast = _child(scenario, seed, overrides, pure=False)
    pure = _child(scenario, seed, overrides, pure=True)
    assert len(fast["status"]["compiled"]) >= 20 and fast["status"]["why_pure"] is None, fast["status"]
    assert fast["status"]["pure"] == [] and not fast["status"]["stale"]
    assert pure["status"]["compiled"] == [] and pure["status"]["why_pure"] == "RMQSIM_PURE=1"
    assert sorted(pure["status"]["pure"]) == sorted(fast["status"]["compiled"])
    assert fast["summary"]["trace_sha256"] == pure["summary"]["trace_sha256"]
    assert fast["summary"] == pure["summary"]


def _tree_copy(tmp_path: Path) -> Path:
    """The checkout's tracked files, its binaries, their manifest and its build/ (times kept:
    what is up to date stays so) in tmp_path/tree."""
    tree = tmp_path / "tree"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    built = [p.relative_to(ROOT).as_posix() for package in compiled.PACKAGES
             for p in (ROOT / package).rglob("*") if p.name.endswith(tuple(compiled.importlib.machinery.EXTENSION_SUFFIXES))]
    for name in [*(n.decode() for n in tracked.split(b"\0") if n), *built, f"sim/{compiled.MANIFEST}"]:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "build", tree / "build", ignore=shutil.ignore_patterns(".*"))
    return tree


_STATUS = "import sim, sim.rng, sim.env; from sim import compiled; print(compiled.status())"


def _status_in(tree: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in (compiled.PURE_ENV, compiled.REBUILD_ENV, "PYTHONPATH")}
    return subprocess.run([sys.executable, "-c", _STATUS], cwd=tree, env={**clean, **env}, capture_output=True,
                          text=True, timeout=300)


def test_an_edited_module_is_rebuilt_before_it_is_imported_and_else_runs_pure_saying_so(tmp_path: Path) -> None:
    tree = _tree_copy(tmp_path)
    fresh = _status_in(tree)
    assert "'sim.rng'" in fresh.stdout.split("'pure'")[0] and "rebuilding" not in fresh.stderr, fresh.stderr
    with open(tree / "sim" / "rng.py", "a") as source:
        source.write("\n# edited\n")
    refused = _status_in(tree, **{compiled.REBUILD_ENV: "0"})  # no rebuild: every module pure, and a warning
    assert "runs pure" in refused.stderr and "sim.rng" in refused.stderr and "setup.py build_ext" in refused.stderr
    assert "'compiled': []" in refused.stdout and "'why_pure': 'stale build'" in refused.stdout, refused.stdout
    rebuilt = _status_in(tree)  # rebuilt in place first: only the edited module
    assert "rebuilding" in rebuilt.stderr and "sim.rng" in rebuilt.stderr, rebuilt.stderr
    assert "'sim.rng'" in rebuilt.stdout.split("'pure'")[0] and "'why_pure': None" in rebuilt.stdout
    again = _status_in(tree)
    assert "rebuilding" not in again.stderr and "'why_pure': None" in again.stdout


def test_pure_mode_imports_only_sources_and_only_the_projects() -> None:
    out = subprocess.run([sys.executable, "-c", "import sim, numpy._core._multiarray_umath as m, sim.env as e; "
                          "print(e.__file__); print(m.__file__)"], env={**os.environ, compiled.PURE_ENV: "1"},
                         capture_output=True, text=True, check=True, cwd=ROOT)
    env_file, numpy_file = out.stdout.split()
    assert env_file.endswith("sim/env.py") and not numpy_file.endswith(".py"), out.stdout


def _pxd_classes(text: str) -> dict[str, tuple[str | None, set[str], bool]]:
    """class → (base, declared fields, has an instance dict) of a .pxd."""
    out: dict[str, tuple[str | None, set[str], bool]] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"cdef class (\w+)(?:\((\w+)\))?:", line)
        if head:
            current = head.group(1)
            out[current] = (head.group(2), set(), False)
        elif current and (field := re.match(r"    cdef public \w+ (\w+)$", line)):
            out[current][1].add(field.group(1))
        elif current and line.strip() == "cdef dict __dict__":
            out[current] = (out[current][0], out[current][1], True)
    return out


def _assigned_on_self(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign | ast.AugAssign) else []
        while targets:
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets.extend(target.elts)
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.add(target.attr)
    return names


@pytest.mark.parametrize("module", compiled.compiled_modules())
def test_every_attribute_a_declared_class_assigns_is_declared_in_its_pxd(module: str) -> None:
    """What the compiler would only show as a slow dict entry (an open class) or an AttributeError
    at run time (a slotted one), named here: add the field to the .pxd beside the module."""
    source = compiled.source_path(module)
    declared = _pxd_classes(source.with_suffix(".pxd").read_text())
    inherited: dict[str, set[str]] = {}
    for cls in ast.parse(source.read_text()).body:
        if not isinstance(cls, ast.ClassDef) or cls.name not in declared:
            continue
        base, fields, open_ended = declared[cls.name]
        fields = fields | inherited.get(base or "", set())
        inherited[cls.name] = fields
        assert not cls.decorator_list, f"{source}: {cls.name} is an extension type: no decorator"
        assert not any(isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) for item in cls.body), \
            f"{source}: {cls.name} is an extension type: no class-level annotation"
        defined = {item.name for item in cls.body if isinstance(item, ast.FunctionDef)} | {
            t.id for item in cls.body if isinstance(item, ast.Assign) for t in item.targets if isinstance(t, ast.Name)}
        missing = sorted(_assigned_on_self(cls) - fields - defined)
        if base and base not in declared:
            continue  # a base from another module: its fields are that module's .pxd's
        assert open_ended or not missing, f"{source}: {cls.name} assigns {missing} on self: declare them in " \
                                          f"{source.with_suffix('.pxd').name}"


def test_the_hot_classes_are_extension_types_with_their_attributes_as_fields() -> None:
    """What the committed .pxd buys: `self.x` is a field."""
    if compiled.pure_requested():
        pytest.skip("RMQSIM_PURE is set: this process imported the pure modules")
    from models.broker.commit_log import CommitLog
    from sim.node import Node

    heap_type = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement's type; an extension type is static
    for cls in (CommitLog, Node):
        assert not cls.__flags__ & heap_type, f"{cls.__name__} was not compiled as an extension type"
    assert type(CommitLog.__dict__["wrote_position"]).__name__ == "getset_descriptor"  # a `cdef public` field


