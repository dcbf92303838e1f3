"""`rmqsim sweep`: sweep files (spec.py, values.py, checks.py), their runs on Spark (sweep.py,
task.py, the executors' environment executor_env.py, spark_classes.py), their directory and
tables (directory.py, results_store.py), pooled results (aggregate.py, stats.py) and a failing
run's repro card (repro_card.py). Sweeps import no reports.
"""
