"""What a person reads: the report pages' HTML (html.py, rendered from templates/ with autoescaping),
the sweep report (sweep_report.py, figures.py, focus.py), the per-run report (run_report.py,
run_data.py, run_figures.py, timeline_*.py, txn_*.py), `rmqsim diff` (diff.py) and the printed
summary (summary_text.py, fmt.py).
"""
