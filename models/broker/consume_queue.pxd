# Cython's declarations for consume_queue.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Clock
from models.broker.commit_log cimport CommitLog
from models.broker.mapped_file cimport MappedFile
cdef class ConsumeQueue:
    cdef public object topic
    cdef public object queue_id
    cdef public object key
    cdef public object ident
    cdef public object units
    cdef public object min_offset
    cdef public object max_offset
    cdef public object hint_phys
    cdef public object hint_file
    cdef public object hint_index
    cdef public bint narrow
    cdef public object code
    cdef public object width
    cdef public object pack_full
    cdef public object unpack_full

cdef class ReputMessageService:
    cdef public object _cursor
    cdef public object _dispatch_bound
    cdef public Clock clock
    cdef public list cov
    cdef public object delivery_us
    cdef public object detail
    cdef public object grid_origin_us
    cdef public list listeners
    cdef public CommitLog log
    cdef public object node
    cdef public object pending
    cdef public dict queues
    cdef public object replica
    cdef public object reput_from
    cdef public object schedule_listener
    cdef public object stop_at
    cdef public object sync_flush
    cdef public object confirm_cap
    cpdef wake(self)
    cpdef confirm_position(self)
    cpdef dispatch(self, limit=*)
    cpdef _dispatch_file(self, MappedFile mapped, i, limit, touched)
