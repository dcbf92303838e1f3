"""The import rule and the determinism bans, checked by parsing the source."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

KERNEL = ["env", "rng", "dist", "node", "network", "disk", "faults", "config", "trace", "files", "limits", "compiled",
          "inputs", "keypath"]
ASSEMBLY = {"scenario", "scenario_checks", "runner", "cli", "__init__", "schema", "scenario_warnings", "run_store",
            "progress", "reference", "field_docs"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


def _py(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_kernel_knows_nothing_of_rocketmq() -> None:
    for name in KERNEL:
        for module in _imports(ROOT / "sim" / f"{name}.py"):
            assert not module.startswith(("models", "analysis")), f"sim/{name}.py imports {module}"


def test_models_do_not_import_assembly_or_analysis() -> None:
    for path in _py("models"):
        for module in _imports(path):
            assert not module.startswith("analysis"), f"{path} imports {module}"
            assert module not in {f"sim.{a}" for a in ASSEMBLY}, f"{path} imports {module}"


def test_analysis_reads_only_record_schemas_from_models() -> None:
    for path in _py("analysis"):
        for module in _imports(path):
            if module.startswith("models"):
                assert module == "models.records", f"{path} imports {module}"


BANNED_CALLS = {("random", "random"), ("random", "seed"), ("random", "randint"), ("random", "choice"),
                ("random", "shuffle"), ("random", "uniform"), ("time", "time"), ("time", "monotonic"),
                ("time", "perf_counter"), ("uuid", "uuid4")}


def test_no_wall_clock_global_random_hash_or_id_in_simulation_code() -> None:
    for folder in ("sim", "models"):
        for path in _py(folder):
            if path.name in ("runner.py", "cli.py"):  # wall time of a run goes to run_meta only
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
    for folder in ("sim", "models"):
        for path in _py(folder):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.For, ast.comprehension)):
                    it = node.iter
                    is_set = isinstance(it, (ast.Set, ast.SetComp)) or (
                        isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("set", "frozenset"))
                    assert not is_set, f"{path}:{getattr(node, 'lineno', '?')} iterates a set"
