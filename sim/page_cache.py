"""Small files in the OS page cache: what a power loss leaves of data written without fsync.

A write goes to the page cache. The kernel's flusher writes a dirty file back once it has been
dirty for `dirty_expire_ms` (Linux `vm.dirty_expire_centisecs`, 30 s), at its wake-ups every
`dirty_writeback_ms` (`vm.dirty_writeback_centisecs`, 5 s), with the content the file has at
that wake-up; `fsync` writes it at once. A file is dirty from its first write after its last
writeback (the inode's `dirtied_when`), so a file rewritten every few seconds still reaches the
disk only every 30–35 s. A writeback takes the disk's transfer time; a power loss during it
leaves the file torn (read back as empty, as a JSON reader would reject it). A power loss
leaves each file as it is on disk: older, torn, or empty if it was never written back.

Creating, renaming and deleting are metadata and are taken as durable at once (ext4 commits its
journal every 5 s: the shortcut errs by at most that). A file replaced by a rename keeps the
disk state of the file renamed onto it (an inode created since the last writeback: empty).

Simplified: ext4's `auto_da_alloc` (writeback started when a file replaced by rename or by
truncate-and-rewrite is closed) is not modelled; writeback is by age only, evaluated lazily
(no events). No RocketMQ here: models/broker/config_file.py writes its JSON files through this.
"""

from __future__ import annotations

from typing import Any

MISSING = None  # read() of a file that does not exist, or is empty after a power loss


class _Inode:
    """One file's page-cache content and disk content (see module docstring)."""

    __slots__ = ("content", "size_bytes", "disk_content", "dirty_since_us", "versions")

    def __init__(self) -> None:
        self.content: Any = MISSING  # what readers see now (page cache)
        self.size_bytes = 0
        self.disk_content: Any = MISSING  # what the disk holds (empty until a writeback)
        self.dirty_since_us = -1  # -1: clean
        self.versions: list[tuple[int, Any, int]] = []  # (written µs, content, bytes) since dirty


class PageCache:
    """The page cache of one host's files, named by path."""

    def __init__(self, dirty_expire_us: int, dirty_writeback_us: int, bandwidth_bytes_per_s: int) -> None:
        self.dirty_expire_us = dirty_expire_us
        self.dirty_writeback_us = dirty_writeback_us
        self.bandwidth_bytes_per_s = bandwidth_bytes_per_s
        self.files: dict[str, _Inode] = {}

    # --- file operations -------------------------------------------------------------------
    def write(self, path: str, content: Any, size_bytes: int, now_us: int) -> None:
        """Create or truncate `path` and write `content` (`size_bytes` long) into the page cache."""
        inode = self.files.get(path)
        if inode is None:
            inode = self.files[path] = _Inode()
        self._settle(inode, now_us)
        inode.content, inode.size_bytes = content, size_bytes
        if inode.dirty_since_us < 0:
            inode.dirty_since_us = now_us
        inode.versions.append((now_us, content, size_bytes))

    def read(self, path: str) -> Any:
        inode = self.files.get(path)
        return MISSING if inode is None else inode.content

    def fsync(self, path: str, now_us: int) -> None:
        inode = self.files.get(path)
        if inode is not None:
            self._settle(inode, now_us)
            inode.disk_content, inode.dirty_since_us, inode.versions = inode.content, -1, []

    def rename(self, src: str, dst: str) -> None:
        """`rename(src, dst)`: dst now names src's inode (its page cache and disk state)."""
        inode = self.files.pop(src, None)
        if inode is not None:
            self.files[dst] = inode

    def delete(self, path: str) -> None:
        self.files.pop(path, None)

    def power_loss(self, now_us: int) -> None:
        """Every file becomes what its disk holds now; the page cache is gone."""
        for inode in self.files.values():  # insertion order: deterministic
            inode.content = self._on_disk(inode, now_us)
            inode.disk_content = inode.content
            inode.dirty_since_us, inode.versions = -1, []

    # --- writeback -------------------------------------------------------------------------
    def _writeback_at_us(self, dirty_since_us: int) -> int:
        """The flusher wake-up that writes back a file dirty since `dirty_since_us`."""
        due = dirty_since_us + self.dirty_expire_us
        period = self.dirty_writeback_us
        return -(-due // period) * period

    def _transfer_us(self, size_bytes: int) -> int:
        return size_bytes * 1_000_000 // self.bandwidth_bytes_per_s

    def _settle(self, inode: _Inode, now_us: int) -> None:
        """Apply every writeback of `inode` that finished by `now_us`."""
        while inode.dirty_since_us >= 0:
            at = self._writeback_at_us(inode.dirty_since_us)
            written = [v for v in inode.versions if v[0] <= at]
            if at + self._transfer_us(written[-1][2]) > now_us:
                return
            inode.disk_content = written[-1][1]
            inode.versions = [v for v in inode.versions if v[0] > at]
            inode.dirty_since_us = inode.versions[0][0] if inode.versions else -1

    def _on_disk(self, inode: _Inode, now_us: int) -> Any:
        self._settle(inode, now_us)
        if inode.dirty_since_us >= 0:
            at = self._writeback_at_us(inode.dirty_since_us)
            if at <= now_us:  # a writeback is under way: the file is torn
                return MISSING
        return inode.disk_content
