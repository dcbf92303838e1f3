# Cython's declarations for fault_strategy.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class LatencyFaultToleranceImpl:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object _shuffle_ints
    cdef public object client_version
    cdef public object cov
    cdef public object detect_interval_ms
    cdef public object detect_timeout_ms
    cdef public dict fault_item_table
    cdef public object start_detector_enable
    cdef public object which_item_worst_index

cdef class MQFaultStrategy:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object client_version
    cdef public object cov
    cdef public object isolation_latency_ms
    cdef public object latency_fault_tolerance
    cdef public object latency_max_ms
    cdef public object not_available_duration_ms
    cdef public object send_latency_fault_enable
