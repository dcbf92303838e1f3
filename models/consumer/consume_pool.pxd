# Cython's declarations for consume_pool.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class ConsumePool:
    cdef public object _await_timer
    cdef public object _tokens
    cdef public object busy
    cdef public object queue
    cdef public dict running
    cdef public object stopped
    cdef public object stopping
