# Cython's declarations for env.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class Owner:
    cdef public object epoch
    cdef public object paused_until
    cdef public object on_drop

cdef class Clock:
    cdef public object now_us

cdef class _Always(Owner):
    pass

cdef class Call(Owner):
    pass

cdef class OwnedCall(Owner):
    cdef public object host
    cdef public object host_epoch
    cdef public object fn
    cdef public object args
