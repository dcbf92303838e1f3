# Cython's declarations for client_instance.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class MQClientInstance:
    cdef public object _heartbeat_running
    cdef public object _transmit
    cdef public dict _watched
    cdef public object api_timeout_us
    cdef public dict broker_addr_table
    cdef public object channel_event_listener
    cdef public object client_id
    cdef public dict consumers
    cdef public object heartbeat_interval_us
    cdef public object namesrv_chosen
    cdef public object namesrv_index
    cdef public object namesrvs
    cdef public object node
    cdef public dict open_channels
    cdef public object persist_interval_us
    cdef public object poll_interval_us
    cdef public dict producers
    cdef public dict publish_addr
    cdef public object stream
    cdef public dict subscribe_addr
    cdef public dict topic_route_table
