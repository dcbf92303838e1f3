# Cython's declarations for workload.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Clock
from sim.node cimport Node
from models.producer.producer cimport Producer
cdef class Workload:
    cdef public object _arrive_bound
    cdef public list _bodies
    cdef public object _body_block
    cdef public object _deliver
    cdef public object _gap_block
    cdef public list _gaps
    cdef public object _key_len
    cdef public object _off_us
    cdef public object _on_us
    cdef public object _shard_block
    cdef public list _shards
    cdef public object _tag_block
    cdef public list _tags
    cdef public object batch_size
    cdef public object burst
    cdef public Clock clock
    cdef public object delay_level
    cdef public object header_bytes
    cdef public object id_base
    cdef public Node node
    cdef public object on_off
    cdef public object on_until_us
    cdef public object pending
    cdef public Producer producer
    cdef public object seq
    cdef public object single
    cdef public object start_us
    cdef public object stop_us
    cdef public object stream
    cdef public object tags
    cdef public object topic
