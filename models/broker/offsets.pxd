# Cython's declarations for offsets.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class ConsumerOffsetManager:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict before_crash
    cdef public object cfg
    cdef public dict client_commits
    cdef public list cov
    cdef public object detail
    cdef public object file
    cdef public object node
    cdef public object peers
    cdef public dict reset
    cdef public object slave
    cdef public dict table
