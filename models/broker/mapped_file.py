"""store.MappedFileQueue / DefaultMappedFile: the CommitLog's records as compact per-file tables.

A `MappedFile` stands for one CommitLog file (`mappedFileSizeCommitLog`, 1 GiB by default) and
holds the metadata of the records written into it, not their bytes: the offset of each record
from the file's start (`file_from_offset`) in an `array('I')` `rel` (a file is smaller than 2^31
bytes: the scenario bounds `mapped_file_size_commit_log_bytes` at Java's int; searched with bisect
to look a message up by its CommitLog offset, as `lookMessageByOffset` does; `offset(i)` is the
physical offset) and the rest as one fixed-width `RECORD` per message in a `bytearray` (size,
store timestamp, queue id and offset, message id, topic and tags as indexes into the broker's
intern tables, reconsume times, sysflag). That is 37 bytes a message (with the ConsumeQueue's
unit, 49 in a queue whose messages share one tags code, 53 in another, 57 in a delay-level queue:
consume_queue.py), so a broker can hold a 10^8-message backlog. The rare properties a plain message does not have
(retry, delay, transaction) live in a per-file dict keyed by the record's index in the file.

Roll-over, truncation on recovery and expiry deletion are slices of these tables: a record never
spans two files (the rest of a file that cannot hold the next record is a blank record), so a
file's records all lie in `[file_from_offset, file_from_offset + file_size)`.
"""

# compiled with Cython: the C declarations of this module's classes are in mapped_file.pxd beside it

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import Any

# size, store_us, queue_id, queue_offset (< 2^32 a queue), msg_id, topic index, tags index,
# reconsume times, sysflag
RECORD = struct.Struct("<iqHIqHHHB")
RECORD_BYTES = RECORD.size  # 33 (+ 4 for the offset in the file = 37 bytes a message)
# RECORD's functions bound once, for the per-message paths: reading a method off a Struct makes a
# bound-method object per call
pack_record, unpack_record = RECORD.pack, RECORD.unpack_from
# positions of the fields in an unpacked RECORD
(F_SIZE, F_STORE_US, F_QUEUE_ID, F_QUEUE_OFFSET, F_MSG_ID, F_TOPIC, F_TAGS, F_RECONSUME,
 F_SYSFLAG) = range(9)


class MappedFile:
    """One CommitLog file's records (see module docstring)."""

    __slots__ = ("file_from_offset", "rel", "data", "props")

    def __init__(self, file_from_offset: int) -> None:
        self.file_from_offset = file_from_offset
        self.rel = array("I")  # each record's offset from file_from_offset
        self.data = bytearray()
        self.props: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.rel)

    def offset(self, index: int) -> int:
        """The physical (CommitLog) offset of record `index`."""
        return self.file_from_offset + self.rel[index]

    def record(self, index: int) -> tuple:
        """The fixed-width fields of record `index` (F_* positions)."""
        return RECORD.unpack_from(self.data, index * RECORD_BYTES)

    def index_of(self, phys_offset: int) -> int:
        """Index of the record starting at `phys_offset`, or -1."""
        rel, position = self.rel, phys_offset - self.file_from_offset
        i = bisect_left(rel, position)
        return i if i < len(rel) and rel[i] == position else -1

    def first_at(self, phys_offset: int) -> int:
        """Index of the first record starting at or after `phys_offset` (`len(self)` if none)."""
        position = phys_offset - self.file_from_offset
        return bisect_left(self.rel, position) if position > 0 else 0

    def end(self) -> int:
        """Physical offset just past the last record (the file start if empty)."""
        if not self.rel:
            return self.file_from_offset
        return self.file_from_offset + self.rel[-1] + RECORD.unpack_from(self.data, (len(self.rel) - 1) * RECORD_BYTES)[F_SIZE]

    def truncate(self, keep: int) -> int:
        """Keep the first `keep` records; returns how many were dropped."""
        dropped = len(self.rel) - keep
        if dropped > 0:
            del self.rel[keep:]
            del self.data[keep * RECORD_BYTES:]
            for index in [i for i in self.props if i >= keep]:
                del self.props[index]
        return max(0, dropped)

    def count_ending_by(self, position: int) -> int:
        """How many leading records end at or before physical offset `position`."""
        # records are contiguous except for a blank tail, so the record starting before `position`
        # either ends by it or straddles it
        position -= self.file_from_offset
        if position <= 0:
            return 0
        n = bisect_right(self.rel, position - 1)
        if n and self.rel[n - 1] + self.record(n - 1)[F_SIZE] > position:
            n -= 1
        return n


class MappedFileQueue:
    """store.MappedFileQueue: the CommitLog's files in offset order, each `file_size` bytes."""

    # no instance dict, which every method call on it would search when compiled (sim/compiled.py)
    __slots__ = ("file_size", "files")

    def __init__(self, file_size: int) -> None:
        self.file_size = file_size
        self.files: list[MappedFile] = []

    def last(self, wrote_position: int) -> MappedFile:
        """The file that the next record starting at `wrote_position` goes into (created on demand)."""
        start = wrote_position - wrote_position % self.file_size
        files = self.files
        if not files or files[-1].file_from_offset != start:
            files.append(MappedFile(start))
        return files[-1]

    def find(self, phys_offset: int) -> tuple[MappedFile | None, int]:
        """(file, record index) of the record starting at `phys_offset`, or (None, -1)."""
        files = self.files
        if not files:
            return None, -1
        idx = (phys_offset - files[0].file_from_offset) // self.file_size
        if not 0 <= idx < len(files):
            return None, -1
        mapped = files[idx]
        if mapped.file_from_offset != phys_offset - phys_offset % self.file_size:
            return None, -1  # a gap (files are contiguous unless deleted from the front)
        index = mapped.index_of(phys_offset)
        return (mapped, index) if index >= 0 else (None, -1)

    def truncate_to(self, position: int) -> int:
        """Drop every record that does not end at or before `position`; returns how many."""
        lost = 0
        files = self.files
        while files and files[-1].file_from_offset >= position:
            lost += len(files.pop())
        if files:
            last = files[-1]
            lost += last.truncate(last.count_ending_by(position))
        return lost

    def end(self) -> int:
        """Physical offset just past the last record."""
        for mapped in reversed(self.files):
            if mapped.rel:
                return mapped.end()
        return 0

    def __len__(self) -> int:
        return sum(len(f) for f in self.files)
