"""Entry point for spark-submit: `spark-submit [options] scripts/rmqsim_submit.py sweep S.yaml ...`.

spark-submit runs a Python file, not a console script; this one puts the project root on
sys.path (the driver needs no installation of rmqsim) and runs `rmqsim` with the arguments.
The Spark master and other options come from spark-submit.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
