"""The packaging build's compiled part: every module with a `.pxd` beside it, compiled with Cython.

`pip install .` / `pip wheel .` put the binaries in the wheel beside the sources; the editable
install (scripts/setup.sh, `uv sync`) and `python setup.py build_ext --inplace` put them beside the
sources in the checkout. Either way `sim/compiled_build.json` records what each was compiled from,
which `import sim` checks (sim/compiled.py: which modules, their `.pxd`, the rules).
`RMQSIM_PURE_BUILD=1` builds without them (a pure install; rmqsim then says it runs pure).
The rest of the package metadata is in pyproject.toml.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_rmqsim_compiled", ROOT / "sim" / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compiled)


class CythonBuildExt(build_ext):
    """build_ext over `cythonize`, recording each binary's digest (sim/compiled.py)."""

    def finalize_options(self) -> None:
        from Cython.Build import cythonize

        os.chdir(ROOT)  # relative source paths: a compiled frame in a traceback names the file as in the tree
        # only the modules whose source or declarations are newer than their C file are translated again
        self.distribution.ext_modules = cythonize(
            self.distribution.ext_modules or [], build_dir="build/cython", compiler_directives=compiled.DIRECTIVES,
            quiet=True, nthreads=os.cpu_count() or 1)
        super().finalize_options()
        self.parallel = self.parallel or os.cpu_count() or 1

    def run(self) -> None:
        import Cython

        before = compiled.module_digests(Cython.__version__, ROOT)
        super().run()
        if compiled.module_digests(Cython.__version__, ROOT) != before:
            raise RuntimeError("sources changed during the build: run it again")
        files = {ext.name: Path(self.get_ext_filename(ext.name)).name for ext in self.extensions}
        manifest = {"cython": Cython.__version__, "cache_tag": sys.implementation.cache_tag,
                    "modules": {name: {"digest": before[name], "file": files[name]} for name in sorted(files)}}
        target = self._manifest_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        partial.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        partial.replace(target)

    def _manifest_path(self) -> Path:
        return (ROOT if self.inplace else Path(self.build_lib)) / "sim" / compiled.MANIFEST

    def get_outputs(self) -> list[str]:
        return [*super().get_outputs(), str(self._manifest_path())]


COMPILE_ARGS = ["-Werror=incompatible-pointer-types"]
# gcc -O1, after the interpreter's -O3, for the modules a message barely enters (together under 0.3 %
# of a baseline run's instructions, callgrind per object) and for the checkers' ledger, the largest
# C file (2.6 MB, 16 of the build's 115 gcc CPU seconds at -O3): the build takes about 20 % less
# time. Measured with bench/instructions.py (callgrind, warm digest cache): the twelve small ones
# at -O1 leave instructions per message unchanged (99,794 against 99,817 all at -O3); the ledger at
# -O1 adds about 0.75 % (its chunked feed); every module at -O1 would add 4.6 %.
COLD_MODULES = frozenset({
    "analysis.checkers.ledger", "models.broker.mapped_file", "models.broker.offsets", "models.client_instance",
    "models.consumer.consume_pool", "models.consumer.offset_store", "models.java", "models.producer.fault_strategy",
    "models.producer.selector", "models.thread_local_index", "models.topic_publish_info", "sim.rng", "sim.trace"})


def extensions() -> list[Extension]:
    if os.environ.get("RMQSIM_PURE_BUILD", "") not in ("", "0"):
        return []
    # a C function pointer of the wrong type is an error, not a warning (sim/compiled.py: Broker._build_store)
    return [Extension(name, [compiled.source_path(name, Path()).as_posix()],
                      extra_compile_args=[*COMPILE_ARGS, *(["-O1"] if name in COLD_MODULES else [])])
            for name in compiled.compiled_modules(ROOT)]


setup(ext_modules=extensions(), cmdclass={"build_ext": CythonBuildExt})
