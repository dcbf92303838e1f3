"""Entry point for spark-submit: `spark-submit [options] scripts/rmqsim_submit.py sweep S.yaml ...`.

spark-submit runs a Python file, not a console script; this one puts the project root on
sys.path (the driver needs no installation of rmqsim) and runs `rmqsim` with the arguments.
The Spark master and other options come from spark-submit, and so, on a cluster, does the
executors' environment: the packed one analysis/sweeps/executor_env.py makes (it prints the three files `--files` ships),

    spark-submit --files "$(.venv/bin/python -m analysis.sweeps.executor_env)" \\
      --conf spark.pyspark.python=./rmqsim-python scripts/rmqsim_submit.py sweep S.yaml --out /shared/dir

(docs/sweeps-and-clusters.md).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmqsim.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
