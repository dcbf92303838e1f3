# Cython's declarations for consume_service.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from models.consumer.consume_pool cimport ConsumePool
from sim.env cimport Clock
from models.consumer.process_queue cimport ProcessQueue
cdef class ConsumeService(ConsumePool):
    cdef public object _chunk
    cdef public list _cut
    cdef public object _done_bound
    cdef public object _time_block
    cdef public list _times
    cdef public Clock clock
    cdef public object consume_time
    cdef public list cov
    cdef public object consume_timeout_us
    cdef public object consumer
    cdef public object env
    cdef public object failure_probability
    cdef public object group
    cdef public object max_reconsume_times
    cdef public object name
    cdef public object node
    cdef public object offsets
    cdef public object send_back
    cdef public object stream
    cdef public object threads
    cpdef _start(self, ProcessQueue pq, mq, msg)
    cpdef _next(self)
    cpdef _commit_offset(self, ProcessQueue pq, mq, queue_offset)
