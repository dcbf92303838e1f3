# Cython's declarations for thread_local_index.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class ThreadLocalIndex:
    cdef public object client_version
    cdef public object _value
    cdef public object _ints
