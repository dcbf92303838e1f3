# Cython's declarations for topic_publish_info.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class TopicPublishInfo:
    cdef public object client_version
    cdef public list message_queue_list
    cdef public list queue_datas
    cdef public object send_which_queue_index
