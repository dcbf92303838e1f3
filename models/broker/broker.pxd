# Cython's declarations for broker.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

from sim.env cimport Clock
from models.broker.commit_log cimport CommitLog
from models.broker.long_polling cimport PullRequestHoldService
from sim.node cimport Node
from models.broker.offsets cimport ConsumerOffsetManager
from models.broker.consume_queue cimport ReputMessageService
from models.broker.message_store cimport MessageStore
from models.broker.consume_queue cimport ConsumeQueue
cdef class Broker:
    cdef public object _chunk
    cdef public object _compose
    cdef public object broker_id
    cdef public object broker_name
    cdef public object cfg
    cdef public object clean
    cdef public Clock clock
    cdef public CommitLog commit_log
    cdef public object commit_service
    cdef public object consumers
    cdef public list cov
    cdef public object disk_full
    cdef public object flush_service
    cdef public object group_commit
    cdef public object ha
    cdef public object ha_client
    cdef public PullRequestHoldService hold
    cdef public object locks
    cdef public object long_polling_enable
    cdef public object max_message_size_bytes
    cdef public object name
    cdef public object namesrvs
    cdef public Node node
    cdef public ConsumerOffsetManager offsets
    cdef public object pop
    cdef public object producers
    cdef public ReputMessageService reput
    cdef public object reset_offset
    cdef public object role
    cdef public object schedule
    cdef public object send_executor
    cdef public object short_polling_us
    cdef public object slave
    cdef public object slave_processors
    cdef public MessageStore store
    cdef public object store_cfg
    cdef public object timer
    cdef public object topics
    cdef public object transaction
    cdef public object version
    cdef public object waits
    cdef public object replicas
    cdef public object isolated
    cdef public object replica_waits
    cdef public object slave_sync
    cpdef put_message(self, msg_id, topic, queue_id, size, body_bytes, tags, reconsume_times, props)
    cpdef execute_pull(self, src, req_id, req, allow_suspend=*, cq=*)
