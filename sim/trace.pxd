# Cython's declarations for trace.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class Tracer:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object _digest
    cdef public list _main
    cdef public object _sha
    cdef public object _streaming
    cdef public list chunk
    cdef public object count
    cdef public object detail
    cdef public object env
    cdef public object keep
    cdef public list observers
    cdef public list records
