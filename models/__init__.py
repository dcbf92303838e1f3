"""RocketMQ models. Defaults are those of rocketmq-all-5.3.3 unless a docstring says otherwise.

Each module names the Java class it mirrors. Out of scope for now: ACL, DLedger/controller mode,
timer wheel, SQL92 filters, orderly BROADCASTING consumption, pop consumption.
"""

from sim.kernel import compiled as _compiled

_compiled.install()  # this package's per-message modules may be compiled (sim/kernel/compiled.py)
