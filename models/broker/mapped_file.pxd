# Cython's declarations for mapped_file.py (compiled by setup.py; the .py runs as it is when pure).
# Each class below is an extension type: every attribute it assigns on `self` is a field here,
# typed ones raise TypeError on another type (compiled only); `cpdef` = `@cython.ccall` there.
# No @dataclass or class-level annotation on them. The rules and why: sim/compiled.py.

cdef class MappedFile:
    cdef public object file_from_offset
    cdef public object rel
    cdef public object data
    cdef public dict props

cdef class MappedFileQueue:
    cdef public object file_size
    cdef public list files
