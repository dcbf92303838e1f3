# Cython's declarations for java.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class JavaRandom:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object _seed

cdef class PythonInts:
    cdef public object rng
