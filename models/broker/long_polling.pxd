# Cython's declarations for long_polling.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Clock
from models.broker.consume_queue cimport ConsumeQueue
cdef class PullRequestHoldService:
    cdef public Clock clock
    cdef public list cov
    cdef public object execute
    cdef public dict held
    cdef public object node
    cdef public object queue_of
    cdef public object scan_interval_us
    cpdef suspend(self, src, req_id, request, timeout_us, ConsumeQueue cq=*)
