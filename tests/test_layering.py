"""The floors, the determinism bans, and names imported from where they are defined.

The floors (sim < models < analysis.checkers < rmqsim.scenario < the runner < analysis.explain <
analysis.sweeps < analysis.reports < the commands; sim/__init__.py states them) are import-linter's
contracts in pyproject.toml, run by scripts/test.sh (`lint-imports`) and here, with a test that the
contract catches an import planted against it in a copy of the tree.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("sim", "models", "analysis", "rmqsim")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_floors_contract_names_folders_and_holds() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (floors,) = [c for c in config["contracts"] if c["id"] == "floors"]
    assert len(floors["layers"]) <= 10 and floors["layers"][-1] == "sim" and floors["layers"][-2] == "models"
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_contract_catches_an_import_that_runs_back_up(tmp_path: Path) -> None:
    """A copy of the tree with one lazy import of the CLI planted in the kernel, and one of a broker
    model planted in a checker: both contracts break, naming the planted lines."""
    for name in (*PACKAGES, "pyproject.toml"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
        else:
            shutil.copy(source, tmp_path / name)
    rng = tmp_path / "sim" / "rng.py"
    rng.write_text(rng.read_text() + "\n\ndef _planted() -> None:\n    import rmqsim.cli  # noqa\n")
    ledger = tmp_path / "analysis" / "checkers" / "verdict.py"
    ledger.write_text(ledger.read_text() + "\n\ndef _planted() -> None:\n    import models.broker.broker  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "sim.rng -> rmqsim.cli" in result.stdout, result.stdout
    assert "analysis.checkers.verdict -> models.broker.broker" in result.stdout, result.stdout


# --- names imported from the module that defines them ---------------------------------------------
def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _defined(tree: ast.Module) -> set[str]:
    """Names a module binds itself (functions, classes, assignments), not those it imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.If | ast.Try):
            names.update(_defined(ast.Module(body=[*node.body, *getattr(node, "orelse", [])], type_ignores=[])))
    return names


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """No forwarding addresses: `from a import x` where `a` only re-exports `x` (imported from `b`)
    must name `b`. A package's submodule imported by name is fine."""
    modules = _modules()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    defined = {name: _defined(tree) for name, tree in trees.items()}
    problems = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in modules:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in modules or alias.name in defined[node.module]:
                        continue
                    problems.append(f"{modules[name].relative_to(ROOT)}:{node.lineno} imports {alias.name} "
                                    f"from {node.module}, which does not define it")
    assert not problems, "\n".join(problems)


# --- determinism ---------------------------------------------------------------------------------
def _py(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


BANNED_CALLS = {("random", "random"), ("random", "seed"), ("random", "randint"), ("random", "choice"),
                ("random", "shuffle"), ("random", "uniform"), ("time", "time"), ("time", "monotonic"),
                ("time", "perf_counter"), ("uuid", "uuid4")}
WALL_TIME_OF_A_RUN = {"rmqsim/runner.py", "rmqsim/cli.py"}  # the wall time of a run goes to run_meta only
SIMULATION = ("sim", "models", "rmqsim")


def test_no_wall_clock_global_random_hash_or_id_in_simulation_code() -> None:
    for folder in SIMULATION:
        for path in _py(folder):
            if path.relative_to(ROOT).as_posix() in WALL_TIME_OF_A_RUN:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                        assert (f.value.id, f.attr) not in BANNED_CALLS, f"{path}:{node.lineno}"
                    if isinstance(f, ast.Name):
                        assert f.id not in ("hash", "id"), f"{path}:{node.lineno} calls {f.id}()"


def test_no_iteration_over_sets_in_simulation_code() -> None:
    """Set order depends on PYTHONHASHSEED; iterate dicts or sorted() instead."""
    for folder in SIMULATION:
        for path in _py(folder):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.For | ast.comprehension):
                    it = node.iter
                    is_set = isinstance(it, ast.Set | ast.SetComp) or (
                        isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("set", "frozenset"))
                    assert not is_set, f"{path}:{getattr(node, 'lineno', '?')} iterates a set"
