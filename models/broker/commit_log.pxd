# Cython's declarations for commit_log.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Clock
from models.broker.mapped_file cimport MappedFile
cdef class CommitLog:
    cdef public object _current
    cdef public dict _tags_index
    cdef public object cfg
    cdef public Clock clock
    cdef public object committed_position
    cdef public list cov
    cdef public object file_size
    cdef public object files
    cdef public object flushed_position
    cdef public object flush_error_from
    cdef public object group_commit
    cdef public object master
    cdef public object node
    cdef public object on_flushed
    cdef public object on_readable
    cdef public object pool
    cdef public object put_hook
    cdef public dict queue_offsets
    cdef public object replica_has
    cdef public object replicas
    cdef public dict reused_below
    cdef public object slow_append
    cdef public list tags
    cdef public list tags_codes
    cdef public dict topic_index
    cdef public list topics
    cdef public object wrote_position
    cpdef append(self, msg_id, topic, queue_id, size, tags, reconsume_times, sysflag, props)
    cpdef readable_position(self)
