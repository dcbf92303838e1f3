# Cython's declarations for push_consumer.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from models.client_instance cimport MQClientInstance
from sim.env cimport Clock
from sim.node cimport Node
from models.consumer.offset_store cimport OffsetStore
from models.consumer.process_queue cimport ProcessQueue
cdef class PushConsumer:
    cdef public object batch_failure
    cdef public object _flow_limits
    cdef public object _on_pull_bound
    cdef public object _pull_batch_size
    cdef public object _pull_interval_us
    cdef public object _routes_pending
    cdef public object _slave_reads
    cdef public object broadcasting
    cdef public object cfg
    cdef public MQClientInstance client
    cdef public object client_id
    cdef public Clock clock
    cdef public object consume
    cdef public list cov
    cdef public object consume_timestamp_us
    cdef public object group
    cdef public Node node
    cdef public OffsetStore offset_store
    cdef public dict process_queues
    cdef public object pull_api
    cdef public object rebalancer
    cdef public dict subscribe_info
    cdef public dict subscriptions
    cdef public object tag_codes
    cdef public object v4
    cpdef pull(self, mq, ProcessQueue pq)
    cpdef _flow_controlled(self, pq)
