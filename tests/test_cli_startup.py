"""Start-up (issue 41): a command imports what its path uses, and the digests every process needs
(the simulator's sources, the compiled build's check) come from a cache keyed by the files'
stamps, recomputed whenever a file changed and whenever the cache cannot be trusted."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import compiled, sources
from tests.conftest import ROOT

HEAVY = ("pandas", "pyarrow", "matplotlib", "pyspark")
# what validating a scenario does not need either: the run's kernel (SimPy, sim/env.py), NumPy (the
# samplers, the checkers), and the broker's store and processors (only its settings, config.py)
NOT_AT_VALIDATE = (*HEAVY, "numpy", "simpy")
NOT_AT_VALIDATE_MODULES = ("sim.env", "models.broker.auto_switch_ha", "models.broker.pop_message_processor",
                           "models.broker.timer_store", "models.broker.clean_service", "models.broker.commit_log",
                           "models.broker.consume_queue", "models.broker.mapped_file",
                           "sim.readback",  # where a file rmqsim wrote is read back
                           "importlib.metadata")  # pydantic's plugin loader's: sim/__init__.py's stand-in
_IMPORTED = """
import json, sys
sys.path.insert(0, {root!r})
from rmqsim.cli import main
code = main({argv!r})
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


def _modules_imported_by(argv: list[str]) -> tuple[int, set[str]]:
    """The exit code and the modules a fresh process imported for `rmqsim ARGV`."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED.format(root=str(ROOT), argv=argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"])


def _imported_by(argv: list[str]) -> tuple[int, set[str]]:
    """The exit code and the top-level packages a fresh process imported for `rmqsim ARGV`."""
    code, modules = _modules_imported_by(argv)
    return code, {name.split(".")[0] for name in modules}


# baseline has no `expect:`; batch_consume_failures has one (its keys are checked against the verdict's
# metrics: analysis/checkers/verdict.py, which imports the duplicate and order checkers for their CAUSES)
@pytest.mark.parametrize("scenario", ["baseline", "batch_consume_failures"])
def test_validate_imports_no_dataframe_plotting_spark_numpy_or_simpy_package(scenario: str) -> None:
    code, modules = _modules_imported_by(["validate", str(ROOT / "scenarios" / f"{scenario}.yaml")])
    packages = {name.split(".")[0] for name in modules}
    assert code == 0
    assert packages.isdisjoint(NOT_AT_VALIDATE), sorted(packages & set(NOT_AT_VALIDATE))
    assert modules.isdisjoint(NOT_AT_VALIDATE_MODULES), sorted(modules & set(NOT_AT_VALIDATE_MODULES))
    assert {"pydantic", "rmqsim"} <= packages and "models.broker.config" in modules  # it did validate
    if scenario == "baseline":  # no `expect:`: no checker; its faults' specs read, no record emitted
        assert "sim.trace" not in modules


_PLUGINS = """
import json, os, sys
sys.path.insert(0, {root!r})
import sim
loader = sys.modules.get("pydantic.plugin._loader")
calls = []
if loader is not None and not hasattr(loader, "__file__"):  # the stand-in: count pydantic's calls
    answer = loader.get_plugins
    loader.get_plugins = lambda: calls.append(1) or answer()
import pydantic
class A(pydantic.BaseModel):
    x: int
class B(pydantic.BaseModel):
    y: A
loader = sys.modules["pydantic.plugin._loader"]
print(json.dumps({{"file": getattr(loader, "__file__", None), "calls": len(calls), "b": B(y={{"x": 1}}).y.x,
                  "metadata": "importlib.metadata" in sys.modules}}))
"""


def _plugin_loader(variable: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if variable is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = variable
    done = subprocess.run([sys.executable, "-c", _PLUGINS.format(root=str(ROOT))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variable", [None, "__all__", "1", "true"])
def test_with_plugins_disabled_pydantic_asks_the_stand_in_loader(variable: str | None) -> None:
    """Unset (sim/__init__.py disables plugins) or disabling them all: pydantic builds each model's
    validator asking sim's stand-in for plugins (the seam: pydantic/plugin/_schema_validator.py), and
    importlib.metadata is never imported."""
    got = _plugin_loader(variable)
    assert got["file"] is None and got["calls"] == 2 and got["b"] == 1 and not got["metadata"], got


@pytest.mark.parametrize("variable", ["", "logfire"])
def test_plugins_asked_for_are_looked_up_by_pydantic_itself(variable: str) -> None:
    """"" (look for plugins again) or some names disabled: pydantic's own loader, untouched."""
    got = _plugin_loader(variable)
    assert got["file"].endswith("pydantic/plugin/_loader.py") and got["calls"] == 0 and got["metadata"], got


_LAZY = """
import json, sys
sys.path.insert(0, {root!r})
import models.broker.config
light = sorted(m for m in sys.modules if m.startswith("models.broker."))
from models.broker import TimerMessageIllegal, find_consistent_point, pop_init_offset, shrink_sync_state_set
from models.broker import timer_slot_ms, truncate_epochs
import models.broker as broker
homes = [f.__module__ for f in (TimerMessageIllegal, find_consistent_point, pop_init_offset,
                               shrink_sync_state_set, timer_slot_ms, truncate_epochs)]
try:
    broker.no_such_entry_point
    missing = None
except AttributeError as e:
    missing = str(e)
print(json.dumps({{"light": light, "homes": homes, "missing": missing, "dir": "truncate_epochs" in dir(broker)}}))
"""


def test_the_broker_packages_entry_points_are_lazy_and_still_importable() -> None:
    """models.broker.config alone loads no processor; the issue-40 entry points still import from
    models.broker (their modules loaded then), and an unknown name is an AttributeError."""
    done = subprocess.run([sys.executable, "-c", _LAZY.format(root=str(ROOT))], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["light"] == ["models.broker.config"], got["light"]
    assert got["homes"] == ["models.broker.timer_store", "models.broker.auto_switch_ha",
                            "models.broker.pop_message_processor", "models.broker.auto_switch_ha",
                            "models.broker.timer_store", "models.broker.auto_switch_ha"]
    assert got["missing"] == "module 'models.broker' has no attribute 'no_such_entry_point'" and got["dir"]


@pytest.mark.parametrize("value_ms", [0, 1, 0.0004, 0.0005, 0.0015, 2.5, 1e-3, 123.4567, 10**12])
def test_the_light_ms_is_the_kernels(value_ms: float) -> None:
    """sim/units.py's ms (validation's modules) converts as sim/env.py's (the run's): same µs."""
    from sim import env, units

    assert units.ms(value_ms) == env.ms(value_ms) and type(units.ms(value_ms)) is int


def test_run_without_trace_or_report_imports_no_dataframe_plotting_or_spark_package(tmp_path: Path) -> None:
    code, packages = _imported_by(["run", str(ROOT / "scenarios" / "baseline.yaml"), "--set", "duration_ms=100ms",
                                   "--set", "settle_ms=100ms", "--out", str(tmp_path / "run")])
    assert code in (0, 1, 3) and (tmp_path / "run" / "summary.json").is_file()
    assert packages.isdisjoint(HEAVY), sorted(packages & set(HEAVY))


def test_version_prints_the_sources_digest_without_the_sweeps_imports() -> None:
    code = ("import sys; sys.argv = ['rmqsim', '--version']; from rmqsim.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    line, packages = done.stdout.splitlines()[0], done.stdout.splitlines()[-1]
    assert line.endswith(f"simulator {sources.hash_sources()}")
    assert not any(name in packages for name in HEAVY), packages


def test_a_callers_collector_is_left_as_it_was() -> None:
    """main([...]) from a test or a script pauses the collector for the imports only, and freezes
    nothing: the caller's garbage stays collectable."""
    from rmqsim import cli

    frozen = gc.get_freeze_count()
    assert cli.main(["validate", str(ROOT / "scenarios" / "baseline.yaml")]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen


# --- the digests by stamps ---------------------------------------------------------------------------

PAST_NS = 1_600_000_000 * 10**9  # 2020: older than the racy window


def _tree(tmp_path: Path) -> Path:
    """A small tree with the simulator's packages: sim/ (with a compiled module) and models/."""
    root = tmp_path / "tree"
    files = {"sim/__init__.py": "", "sim/env.py": "X = 1\n", "sim/env.pxd": "cdef class A:\n    pass\n",
             "models/__init__.py": "", "models/broker/store.py": "Y = 'abc'\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _age(root)
    return root


def _age(root: Path) -> None:
    for path in root.rglob("*.p*"):
        os.utime(path, ns=(PAST_NS, PAST_NS))


def _cache(root: Path) -> Path:
    return compiled._cache_path(root)


def test_the_sources_digest_is_cached_by_stamps_and_recomputed_after_an_edit(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    first = sources.sources_sha256(root=root)
    assert first == sources.hash_sources(root=root)
    assert _cache(root).is_file() and str(_cache(root)).startswith(str(root / "sim" / "__pycache__"))
    # an edit of the same size, a second later: only the stamp's mtime_ns tells it
    store = root / "models" / "broker" / "store.py"
    store.write_text("Y = 'abd'\n")
    os.utime(store, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    edited = sources.sources_sha256(root=root)
    assert edited != first and edited == sources.hash_sources(root=root)
    # a file added, then removed
    (root / "sim" / "new.py").write_text("Z = 2\n")
    _age(root)
    added = sources.sources_sha256(root=root)
    assert added not in (first, edited) and added == sources.hash_sources(root=root)
    (root / "sim" / "new.py").unlink()
    assert sources.sources_sha256(root=root) == edited


def test_a_cached_digest_is_what_is_read_back(tmp_path: Path) -> None:
    """The cache is what answers while the stamps hold (it is not recomputed each time)."""
    root = _tree(tmp_path)
    sources.sources_sha256(root=root)
    data = json.loads(_cache(root).read_text())
    (entry,) = [e for key, e in data["entries"].items() if key.startswith("sources ")]
    entry["digests"]["sha256"] = "f" * 64
    _cache(root).write_text(json.dumps(data))
    assert sources.sources_sha256(root=root) == "f" * 64


@pytest.mark.parametrize("damage", ["not json {", "[]", '{"format": 1}', "null", "\x00\xff", "binary"])
def test_a_corrupt_cache_is_recomputed_and_rewritten(tmp_path: Path, damage: str) -> None:
    root = _tree(tmp_path)
    truth = sources.hash_sources(root=root)
    _cache(root).parent.mkdir(parents=True, exist_ok=True)
    if damage == "binary":
        _cache(root).write_bytes(os.urandom(64))
    else:
        _cache(root).write_text(damage)
    assert sources.sources_sha256(root=root) == truth
    assert json.loads(_cache(root).read_text())["root"] == str(root)  # rewritten whole
    assert sources.sources_sha256(root=root) == truth


def _poisoned(root: Path, change: dict) -> None:
    """The tree's own cache, every digest replaced by a wrong one, and `change` applied."""
    sources.sources_sha256(root=root)
    data = json.loads(_cache(root).read_text())
    for entry in data["entries"].values():
        entry["digests"] = {k: "0" * 64 for k in entry["digests"]}
    _cache(root).write_text(json.dumps({**data, **change}))


@pytest.mark.parametrize("change", [{"root": "/elsewhere/tree"}, {"cache_tag": "cpython-39"}, {"format": 99}],
                         ids=["another tree", "another interpreter", "another format"])
def test_a_foreign_cache_is_not_trusted(tmp_path: Path, change: dict) -> None:
    root = _tree(tmp_path)
    _poisoned(root, change)
    assert sources.sources_sha256(root=root) == sources.hash_sources(root=root)


def test_a_cache_entry_of_another_shape_is_not_trusted(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    sources.sources_sha256(root=root)
    data = json.loads(_cache(root).read_text())
    for entry in data["entries"].values():
        entry["digests"] = {k: "not a digest" for k in entry["digests"]}
    _cache(root).write_text(json.dumps(data))
    assert sources.sources_sha256(root=root) == sources.hash_sources(root=root)


def test_a_file_modified_just_now_is_not_cached(tmp_path: Path) -> None:
    """A later edit in the same clock tick would keep the stamp: such a digest is not stored."""
    root = _tree(tmp_path)
    (root / "sim" / "env.py").write_text("X = 2\n")  # mtime: now
    assert sources.sources_sha256(root=root) == sources.hash_sources(root=root)
    assert not _cache(root).exists()
    _age(root)
    sources.sources_sha256(root=root)
    assert _cache(root).is_file()


def test_an_unwritable_place_computes_without_a_cache(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    blocked = compiled.StampedDigests(root, tmp_path / "a-file" / "cache.json")
    (tmp_path / "a-file").write_text("")  # its parent is a file: nothing can be written there
    files = sources.source_files(root=root)
    calls = []
    for _ in range(2):
        assert blocked.get("k", files, lambda: calls.append(1) or {"sha256": "a" * 64}) == {"sha256": "a" * 64}
    assert len(calls) == 2


def test_the_build_check_reads_module_digests_by_stamps(tmp_path: Path) -> None:
    """stale_modules()'s digests are module_digests' (the build's own), and follow an edit."""
    root = _tree(tmp_path)
    assert compiled.current_digests("3.x", root) == compiled.module_digests("3.x", root)
    assert compiled.current_digests("3.y", root) == compiled.module_digests("3.y", root)  # Cython's version: a key
    before = compiled.current_digests("3.x", root)
    (root / "sim" / "env.pxd").write_text("cdef class B:\n    pass\n")  # same size: the stamp's mtime
    os.utime(root / "sim" / "env.pxd", ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    after = compiled.current_digests("3.x", root)
    assert after != before and after == compiled.module_digests("3.x", root)


def test_the_file_lists_keep_the_digests_order(tmp_path: Path) -> None:
    """tree_files (os.walk) lists what sorted(rglob) listed, in its order (path parts compared in
    turn, not the path as a string): the digests stay the same."""
    for name in ("sim/a/b.py", "sim/a-x.py", "sim/a.py", "sim/a/a/c.py", "sim/B.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    listed = compiled.tree_files(tmp_path, ("sim",), ".py")
    assert listed == sorted((tmp_path / "sim").rglob("*.py"))
    assert listed.index(tmp_path / "sim/a/b.py") < listed.index(tmp_path / "sim/a-x.py")
    for package in ("sim", "models"):
        assert compiled.tree_files(ROOT, (package,), ".py") == sorted((ROOT / package).rglob("*.py"))
    assert compiled.compiled_modules() == sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts) for package in compiled.PACKAGES
        for p in (ROOT / package).rglob("*.pxd") if p.with_suffix(".py").is_file())
