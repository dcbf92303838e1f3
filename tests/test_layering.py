"""The layering rule, checked over every import of the project, and the determinism bans.

The rule is stated once, in sim/__init__.py's docstring; this file holds its table (`LAYERS`)
and checks it over every import of every module of sim, models and analysis, top-level and lazy
(inside a function) alike:

- every module belongs to exactly one layer (a new module must be placed in `LAYERS`);
- each import goes down the layers, and breaks none of `RULES` (the kernel imports nothing of
  models, checkers or the assembly edge; models import only the kernel; the checkers — all of
  analysis — import no model but models/records.py, the record schema; only the CLI imports
  sweeps and reports; the assembly edge imports no explain);
- no import cycle among the project's modules.

`violations` and `cycles` take an import map, so the test of the checker itself feeds them a
made-up one (`test_the_checker_catches_a_broken_rule_and_a_cycle`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from tests.conftest import ROOT

PACKAGES = ("sim", "models", "analysis")
RECORDS = "models.records"  # the record schema: the one module of models that analysis may import

# The layers, lowest first: each module of sim, models and analysis is in exactly one. An entry
# ending in "/" takes every module under that folder; any other entry is one file.
LAYERS: dict[str, tuple[str, ...]] = {
    # SimPy and the substrates; no RocketMQ
    "kernel": ("sim/kernel/",),
    # RocketMQ; models/records.py is the record schema the models emit and analysis reads
    "models": ("models/",),
    # the checkers over records, and the helpers they need (analysis/__init__.py: the package's
    # root runs before every analysis module); trace_store and frames: the trace's Parquet files and
    # pandas frames, written and read by the runner below the edge
    "checkers": ("analysis/__init__.py", "analysis/ledger.py", "analysis/ledger_codes.py", "analysis/metrics.py",
                 "analysis/checks.py", "analysis/percentiles.py", "analysis/verdict.py", "analysis/duplicates.py",
                 "analysis/order.py", "analysis/txn_checker.py", "analysis/timer_checker.py",
                 "analysis/failover_checker.py", "analysis/consumer_metrics.py",
                 "analysis/message_causes.py", "analysis/time_column.py", "analysis/faults_applied.py",
                 "analysis/run_rows.py", "analysis/trace_store.py", "analysis/frames.py"),
    # the assembly edge: scenario files, building and running a world, judging it with the checkers
    "edge": ("sim/scenario.py", "sim/scenario_checks.py", "sim/scenario_lint.py", "sim/scenario_warnings.py",
             "sim/setup_size.py", "sim/quiescence.py", "sim/runner.py", "sim/run_store.py", "sim/progress.py",
             "sim/reference.py"),
    # `rmqsim explain` and `sim.load`: a finished run's records judged again (replayed by the runner)
    "explain": ("analysis/explain.py", "analysis/explain_collect.py", "analysis/explain_facts.py",
                "analysis/explain_fault.py", "analysis/explain_judge.py", "analysis/explain_reasons.py",
                "analysis/explain_source.py", "analysis/run_load.py"),
    # `rmqsim sweep`: sweep files, their runs on Spark (and the executors' packed environment), their
    # directory and tables, pooled results; a failing run's repro card (a sweep's runs and `rmqsim run`)
    "sweeps": ("analysis/sweep.py", "analysis/sweep_task.py", "analysis/sweep_spec.py", "analysis/sweep_values.py",
               "analysis/sweep_checks.py", "analysis/sweep_dir.py", "analysis/results_store.py",
               "analysis/spark_classes.py", "analysis/executor_env.py", "analysis/executor_boot.py", "analysis/aggregate.py", "analysis/stats.py",
               "analysis/repro_card.py"),
    # `rmqsim report`, the per-run report, `rmqsim diff`, the printed summary: what a person reads
    "reports": ("analysis/report.py", "analysis/report_html.py", "analysis/run_report.py", "analysis/figures.py",
                "analysis/run_figures.py", "analysis/timeline_data.py", "analysis/timeline_figures.py",
                "analysis/txn_data.py", "analysis/txn_figures.py", "analysis/diff.py", "analysis/summary_text.py",
                "analysis/fmt.py", "analysis/run_data.py", "analysis/focus.py"),
    # the entry points: `rmqsim` and its commands' own modules, and the Python API (`sim.run`, `sim.load`)
    "cli": ("sim/__init__.py", "sim/cli.py", "sim/explain_cli.py", "sim/schema.py"),
}
ORDER = tuple(LAYERS)
ANALYSIS = ("checkers", "explain", "sweeps", "reports")

# (the rule, whether an import from layer `src` of `target`, in layer `dst`, breaks it); the first broken is named
RULES: tuple[tuple[str, Callable[[str, str, str], bool]], ...] = (
    ("the kernel imports nothing of models, checkers or the assembly edge (nor of what is above them)",
     lambda src, dst, target: src == "kernel" and dst != "kernel"),
    ("models import only the kernel",
     lambda src, dst, target: src == "models" and dst not in ("kernel", "models")),
    ("the checkers (and all of analysis) import no models: only models/records.py, the record schema",
     lambda src, dst, target: src in ANALYSIS and dst == "models" and target != RECORDS),
    ("only the CLI imports sweeps and reports (reports read sweeps; sweeps import no reports)",
     lambda src, dst, target: (dst in ("sweeps", "reports") and src not in ("cli", "sweeps", "reports"))
     or (src, dst) == ("sweeps", "reports")),
    ("the assembly edge imports no explain: explain, above it, imports the runner "
     "(RunResult.explain is given its implementation from above)",
     lambda src, dst, target: src == "edge" and dst == "explain"),
    (f"imports go down the layers ({' < '.join(ORDER)})",
     lambda src, dst, target: ORDER.index(dst) > ORDER.index(src)),
)


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # the project module imported
    lazy: bool = False  # inside a function: imported when it is called
    bare_root: bool = False  # `import sim`: a package root by its bare name


def project_modules(root: Path = ROOT) -> dict[str, str]:
    """Dotted module name → its path relative to `root`, for every module of the packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            parts = rel.with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = rel.as_posix()
    return out


MODULES = project_modules()


def _resolve(name: str, modules: dict[str, str]) -> str | None:
    """The project module `name` is or lies in (its longest importable prefix); None outside the project."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def imports_of(module: str, modules: dict[str, str] = MODULES, root: Path = ROOT) -> list[Import]:
    """Every import of a project module by `module`, with its line, laziness and kind."""
    path = modules[module]
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target is not None:
                    found.append(Import(node.lineno, target, lazy, alias.name in PACKAGES))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importing module's package
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}", modules) if f"{base}.{alias.name}" in modules \
                    else _resolve(base, modules)
                if target is not None:
                    found.append(Import(node.lineno, target, lazy))
        for child in ast.iter_child_nodes(node):
            visit(child, lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse((root / path).read_text()), False)
    return [i for i in found if i.target != module]


def import_map(modules: dict[str, str] = MODULES) -> dict[str, list[Import]]:
    return {module: imports_of(module, modules) for module in modules}


def layers_of(path: str) -> list[str]:
    """Every layer whose table entry takes `path` (a module is in exactly one)."""
    return [layer for layer, entries in LAYERS.items()
            if any(path.startswith(e) if e.endswith("/") else path == e for e in entries)]


def layer_of(path: str) -> str | None:
    """The layer of `path`; None if it is in none or in several (test_every_module_is_in_exactly_one_layer)."""
    found = layers_of(path)
    return found[0] if len(found) == 1 else None


def broken_rule(src: str, dst: str, target: str) -> str | None:
    return next((rule for rule, breaks in RULES if breaks(src, dst, target)), None)


def violations(imports: dict[str, list[Import]], modules: dict[str, str] = MODULES) -> list[str]:
    """One line per import that breaks the rule: file and line, the import, the rule it breaks.
    A package's __init__ may import a package root by its bare name (`import sim`: the compiled
    build's check, sim/kernel/compiled.py): that runs only the root's module level, which
    Python runs anyway before any module beneath it and which `test_package_roots_...` keeps
    to the kernel."""
    out = []
    for module, found in imports.items():
        path = modules[module]
        src = layer_of(path)
        for imp in found:
            if imp.bare_root and path.endswith("__init__.py") and not imp.lazy:
                continue
            dst = layer_of(modules[imp.target])
            if src is None or dst is None:
                continue  # placed by test_every_module_is_in_exactly_one_layer first
            rule = broken_rule(src, dst, imp.target)
            if rule is not None:
                how = "lazily" if imp.lazy else "at module level"
                out.append(f"{path}:{imp.line} imports {imp.target} ({how}; {src} → {dst}): breaks "
                           f"'{rule}' (sim/__init__.py)")
    return out


def cycles(imports: dict[str, list[Import]], modules: dict[str, str] = MODULES) -> list[str]:
    """One line per import cycle among project modules (lazy imports included), each import
    with its file and line."""
    graph = nx.DiGraph()
    for module, found in imports.items():
        for imp in found:
            graph.add_edge(module, imp.target, at=f"{modules[module]}:{imp.line}" + (" lazy" if imp.lazy else ""))
    out = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            steps = nx.find_cycle(graph.subgraph(component))
            out.append("import cycle: " + " → ".join(f"{a} ({graph.edges[a, b]['at']})" for a, b in steps)
                       + f" → {steps[0][0]}; break it: move the shared name down to the lower module, "
                         "or pass a callable from above")
    return sorted(out)


# --- the rule, over the project ------------------------------------------------------------------
def test_every_module_is_in_exactly_one_layer() -> None:
    problems = []
    for module, path in MODULES.items():
        found = layers_of(path)
        if not found:
            problems.append(f"{path} ({module}) is in no layer: add it to LAYERS in tests/test_layering.py, in "
                            f"the layer of the rule it follows (sim/__init__.py: {', '.join(ORDER)})")
        elif len(found) > 1:
            problems.append(f"{path} is in layers {' and '.join(found)}: keep it in one "
                            "(LAYERS, tests/test_layering.py)")
    paths = set(MODULES.values())
    for layer, entries in LAYERS.items():
        for entry in entries:
            if not (entry in paths or entry.endswith("/") and any(p.startswith(entry) for p in paths)):
                problems.append(f"LAYERS[{layer!r}] names {entry}, which is no module: remove it "
                                "(tests/test_layering.py)")
    assert not problems, "\n".join(problems)


def test_every_import_follows_the_layering_rule() -> None:
    found = violations(import_map())
    assert not found, "\n".join(found)


def test_no_import_cycle() -> None:
    found = cycles(import_map())
    assert not found, "\n".join(found)


def test_package_roots_import_only_the_kernel_at_module_level() -> None:
    """A package's root (sim/__init__.py, models/__init__.py, analysis/__init__.py) runs before every
    module of its package, and a package's __init__ may import a root by its bare name: so a root's
    module-level imports are the kernel's (or a root's, for the compiled build's check)."""
    problems = []
    for root in PACKAGES:
        for imp in imports_of(root):
            if not imp.lazy and not imp.bare_root and layers_of(MODULES[imp.target]) != ["kernel"]:
                problems.append(f"{MODULES[root]}:{imp.line} imports {imp.target} at module level: a package's root "
                                "runs before each of its modules, so at module level it imports only the kernel")
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_broken_rule_and_a_cycle() -> None:
    """The checker over a made-up import map: each rule broken once, a cycle, and what is allowed."""
    made_up = {
        "sim.kernel.env": [Import(3, "models.broker.broker")],  # the kernel imports a model
        "models.message": [Import(4, "analysis.ledger", lazy=True)],  # a model imports a checker
        "analysis.ledger": [Import(5, "models.broker.config"),  # a checker imports a model
                            Import(6, "models.records"),  # the record schema: allowed
                            Import(7, "analysis.checks", lazy=True)],  # with checks → ledger: a cycle
        "analysis.checks": [Import(8, "analysis.ledger")],
        "sim.runner": [Import(9, "analysis.explain", lazy=True),  # the edge imports explain
                       Import(10, "analysis.report")],  # only the CLI imports reports
        "analysis.aggregate": [Import(11, "analysis.fmt")],  # a sweep module imports a report module
        "analysis.explain": [Import(12, "sim.scenario")],  # explain imports the edge: allowed
        "models": [Import(13, "sim", bare_root=True)],  # a package's __init__ runs the compiled build's check
        "sim.cli": [Import(14, "analysis.sweep", lazy=True), Import(15, "models.admin")],  # the CLI: anything
        "analysis.verdict": [Import(16, "sim.scenario_checks", lazy=True)],  # a checker imports the edge
    }
    found = violations(made_up)
    expected = [
        ("sim/kernel/env.py:3 imports models.broker.broker", RULES[0][0]),
        ("models/message.py:4 imports analysis.ledger (lazily", RULES[1][0]),
        ("analysis/ledger.py:5 imports models.broker.config", RULES[2][0]),
        ("sim/runner.py:9 imports analysis.explain (lazily; edge → explain)", RULES[4][0]),
        ("sim/runner.py:10 imports analysis.report (at module level; edge → reports)", RULES[3][0]),
        ("analysis/aggregate.py:11 imports analysis.fmt", RULES[3][0]),
        ("analysis/verdict.py:16 imports sim.scenario_checks (lazily; checkers → edge)", RULES[5][0]),
    ]
    assert len(found) == len(expected), "\n".join(found)
    for (start, rule), line in zip(expected, found, strict=True):
        assert line.startswith(start) and f"'{rule}'" in line, line
    (cycle,) = cycles(made_up)
    assert cycle.startswith("import cycle: ")
    assert "analysis/ledger.py:7 lazy" in cycle and "analysis/checks.py:8" in cycle
    assert violations({"analysis.checks": [Import(8, "analysis.ledger")]}) == []


def test_imports_are_read_with_their_kind() -> None:
    """The reader of imports: `from pkg import module`, a dotted `import ... as`, lazy ones, a bare root."""
    runner = {i.target: i for i in imports_of("sim.runner")}
    assert not runner["sim.kernel.compiled"].lazy  # from sim.kernel import compiled, trace
    assert runner["analysis.trace_store"].lazy  # pyarrow: only for a traced run
    assert "models.records" in {i.target for i in imports_of("analysis.explain_fault")}  # import models.records as rec
    assert ("sim", True) in {(i.target, i.bare_root) for i in imports_of("models")}  # import sim


# --- determinism ---------------------------------------------------------------------------------
def _py(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


BANNED_CALLS = {("random", "random"), ("random", "seed"), ("random", "randint"), ("random", "choice"),
                ("random", "shuffle"), ("random", "uniform"), ("time", "time"), ("time", "monotonic"),
                ("time", "perf_counter"), ("uuid", "uuid4")}
WALL_TIME_OF_A_RUN = {"sim/runner.py", "sim/cli.py"}  # the wall time of a run goes to run_meta only


def test_no_wall_clock_global_random_hash_or_id_in_simulation_code() -> None:
    for folder in ("sim", "models"):
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
    for folder in ("sim", "models"):
        for path in _py(folder):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.For | ast.comprehension):
                    it = node.iter
                    is_set = isinstance(it, ast.Set | ast.SetComp) or (
                        isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("set", "frozenset"))
                    assert not is_set, f"{path}:{getattr(node, 'lineno', '?')} iterates a set"
