# Cython's declarations for network.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Owner
from sim.env cimport Clock
from sim.node cimport Node
cdef class Link(Owner):
    cdef public object src
    cdef public object dst
    cdef public object dst_node
    cdef public dict handlers
    cdef public object response
    cdef public object dist
    cdef public object stream
    cdef public list latencies_us
    cdef public object _next_block
    cdef public object last_delivery_us
    cdef public object reset_reason
    cdef public object cut
    cdef public object _extra
    cdef public object _loss_probability
    cdef public object impaired
    cdef public object stale
    cdef public object renew
    cdef public object blocked
    cdef public list held
    cdef public object held_since_us
    cdef public object unacked_since_us

cdef class Network:
    cdef public object _eid
    cdef public object _emit
    cdef public object _queue
    cdef public dict _watchers
    cdef public Clock clock
    cdef public object default_latency
    cdef public object env
    cdef public dict link_latency
    cdef public dict links
    cdef public dict nodes
    cdef public dict zone_latency
