# Cython's declarations for node.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Owner
from sim.env cimport Clock
cdef class ConnectFailed:
    cdef dict __dict__
    cdef object __weakref__

cdef class Node(Owner):
    cdef public object _chunk
    cdef public list _crash_hooks
    cdef public dict _deadlines
    cdef public object _eid
    cdef public object _emit
    cdef public object _flush
    cdef public object _next_req_id
    cdef public dict _pending
    cdef public list _power_hooks
    cdef public object _queue
    cdef public object _request
    cdef public list _services
    cdef public list _start_hooks
    cdef public object booting
    cdef public Clock clock
    cdef public object disk
    cdef public object env
    cdef public dict handlers
    cdef public object host_up
    cdef public object name
    cdef public dict out_links
    cdef public object reply
    cdef public object serving
    cdef public object startup_us
    cdef public object stopped
    cdef public object up
    cdef public object zone
