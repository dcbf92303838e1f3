# Cython's declarations for offset_store.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class OffsetStore:
    cdef public object broadcasting
    cdef public object group
    cdef public dict local_file
    cdef public object node
    cdef public dict offsets
