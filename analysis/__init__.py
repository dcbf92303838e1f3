"""Downstream of the simulator: checkers over records (checks.py); sweeps and reports later."""
