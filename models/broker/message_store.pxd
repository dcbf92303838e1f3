# Cython's declarations for message_store.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from models.broker.commit_log cimport CommitLog
from models.broker.consume_queue cimport ReputMessageService
from models.broker.consume_queue cimport ConsumeQueue
from models.broker.mapped_file cimport MappedFile
cdef class MessageStore:
    cdef public object _cold_limits
    cdef public object _hot_limits
    cdef public dict _overhead
    cdef public object cfg
    cdef public CommitLog commit_log
    cdef public object correct_offsets
    cdef public object memory_window_bytes
    cdef public ReputMessageService reput
    cdef public object scan_bytes
    cdef public object scan_units
    cpdef get_message(self, ConsumeQueue cq, offset, max_msg_nums, tag_codes)
