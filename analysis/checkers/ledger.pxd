# Cython's declarations for ledger.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class Ledger:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict _brokers
    cdef public object born_us
    cdef public object broadcasting
    cdef public dict brokers
    cdef public object copies
    cdef public object count_rt
    cdef public object counts
    cdef public dict destroyed
    cdef public list events
    cdef public list rare_observers
    cdef public object last_us
    cdef public list node_names
    cdef public dict nodes
    cdef public object orderly
    cdef public object pop
    cdef public object producers
    cdef public dict retry_destroyed
    cdef public dict retry_reused
    cdef public dict reused
    cdef public object rt_count
    cdef public object rt_max_us
    cdef public object rt_sum_us
    cdef public object rt_us
    cdef public object send_failed_us
    cdef public object failed_sends
    cdef public object send_failures
    cdef public object send_retried
    cdef public object send_status
    cdef public object send_steered
    cdef public object sends_by_second
    cdef public object shard
    cdef public object state
    cdef public object store_us
    cdef public object subscriptions
    cdef public object top_seq
    cdef public dict units
