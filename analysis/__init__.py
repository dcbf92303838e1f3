"""Downstream of the simulator, by floor (the rule: sim/__init__.py):

- checkers/  the ledger and checkers over records, the verdict, the trace's Parquet files; below the runner
- explain/   `rmqsim explain` and `rmqsim.load`'s `.explain`: a finished run's records judged again
- sweeps/    `rmqsim sweep`: sweep files, their runs on Spark, their directory and tables, pooled results
- reports/   `rmqsim report`, the per-run report, `rmqsim diff`, the printed summary: what a person reads
"""

import sim  # noqa: F401  the compiled build is checked before any compiled module loads (sim/compiled.py)
