"""Downstream of the simulator: checkers over records (checks.py); sweeps and reports later."""

from sim.kernel import compiled as _compiled

_compiled.install()  # this package's per-message modules may be compiled (sim/kernel/compiled.py)
