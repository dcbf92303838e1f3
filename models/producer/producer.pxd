# Cython's declarations for producer.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from models.client_instance cimport MQClientInstance
from sim.env cimport Clock
from sim.node cimport Node
from models.topic_publish_info cimport TopicPublishInfo
from models.thread_local_index cimport ThreadLocalIndex
cdef class Producer:
    cdef public object _chunk
    cdef public object _on_response_bound
    cdef public dict _waiting_route
    cdef public object cfg
    cdef public MQClientInstance client
    cdef public object client_version
    cdef public Clock clock
    cdef public list cov
    cdef public object detail
    cdef public object fault
    cdef public object fault_on
    cdef public object group
    cdef public object max_message_size_bytes
    cdef public object max_per_request_us
    cdef public object name
    cdef public Node node
    cdef public object oneway
    cdef public dict publish
    cdef public object remoting_reachable
    cdef public object retry_codes
    cdef public object selector
    cdef public object send
    cdef public object stream
    cdef public object timeout_us
    cdef public object times_total
    cdef public object topics
    cdef public object v5
    cpdef _send_sync(self, msg, TopicPublishInfo info=*, prev=*, times=*, last=*, steered=*)
