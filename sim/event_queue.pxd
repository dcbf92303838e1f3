# Cython's declarations for event_queue.py (compiled by setup.py; the .py runs as it is when pure):
# none beyond its `@cython` decorators; this file marks it compiled (sim/compiled.py).
