# Cython's declarations for process_queue.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class ProcessQueue:
    cdef public dict msgs
    cdef public object msg_size_bytes
    cdef public object queue_offset_max
    cdef public object dropped
    cdef public object last_pull_us
    cdef public object next_offset
    cdef public object frozen
    cdef public object long_consuming
    cpdef put(self, msgs)
    cpdef remove(self, offset)

cdef class OrderlyProcessQueue(ProcessQueue):
    cdef public dict taking
    cdef public object consuming
    cdef public object locked
    cdef public object last_lock_us
    cdef public object previously_locked
    cdef public object busy_until_us
    cdef public object consume_started_us
