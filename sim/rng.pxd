# Cython's declarations for rng.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class Rng:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict _names
    cdef public object seed
