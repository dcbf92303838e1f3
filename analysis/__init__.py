"""Downstream of the simulator: checkers over records (checks.py); sweeps and reports later."""

import sim  # noqa: E402,F401  the compiled build is checked before any compiled module loads (sim/kernel/compiled.py)
