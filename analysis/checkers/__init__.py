"""The checkers over a run's records: the ledger (ledger.py) and what it judges — loss and its
causes (metrics.py, message_causes.py), duplicates (duplicates.py), order (order.py), transactions
(txn_checker.py), timer messages (timer_checker.py), failovers (failover_checker.py), consumer
metrics (consumer_metrics.py) — the verdict (verdict.py), the faults as applied (faults_applied.py),
the sweep's row of a run (run_rows.py), and the trace's Parquet files and frames (trace_store.py,
frames.py). They read records, never model objects: of `models` only the record schema
(models/records.py) and the coverage catalogue (models/coverage_points.py).
"""
