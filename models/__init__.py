"""RocketMQ models. Defaults are those of rocketmq-all-5.3.3 unless a docstring says otherwise.

Each module names the Java class it mirrors. Out of scope for now: ACL, DLedger mode,
SQL92 filters, orderly BROADCASTING consumption, pop consumption.

The layering rule (sim/__init__.py): models import only the kernel; analysis reads records.py, the record schema.
"""

import sim  # noqa: E402,F401  the compiled build is checked before any compiled module loads (sim/kernel/compiled.py)
