"""common.constant.PermName: a topic's or a broker's permission bits (QueueData.perm, brokerPermission)."""

from __future__ import annotations

PERM_INHERIT = 0x1  # PermName.PERM_INHERIT
PERM_WRITE = 0x1 << 1  # PermName.PERM_WRITE
PERM_READ = 0x1 << 2  # PermName.PERM_READ


def is_writeable(perm: int) -> bool:
    """PermName.isWriteable."""
    return (perm & PERM_WRITE) == PERM_WRITE

