"""Downstream of the simulator: checkers over records (checks.py, metrics.py); above them explain, sweeps, reports.

The layering rule (sim/__init__.py): the checkers import no models but models/records.py, the record schema.
"""

import sim  # noqa: E402,F401  the compiled build is checked before any compiled module loads (sim/kernel/compiled.py)
