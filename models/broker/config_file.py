"""common.ConfigManager persist/load with MixAll.string2File: a broker's JSON config files.

`consumerOffset.json` (ConsumerOffsetManager) and `delayOffset.json` (ScheduleMessageService)
are written without fsync, keeping the previous content as `.bak`:

- 5.3.3 (`MixAll.string2File`): read the current file, rewrite `.bak` with it in place, then
  rewrite the file in place (truncate and write);
- 4.9.8: write `<file>.tmp`, rewrite `.bak` with the current content, delete the file, rename
  `.tmp` to it.

(Moving the file to `.bak` and fsyncing the new file and its directory, #9706, is newer than
5.3.3 and not modelled.) The files live in the host's page cache (sim/page_cache.py), so a
process crash keeps the last persist, and a power loss leaves each file as the kernel last wrote
it back: 5.3.3's file rewritten in place is up to ~35 s older; 4.9.8's freshly renamed file was
never written back, reads empty, and `load` falls back to `.bak`, whose content is older still.

`load` (ConfigManager.load): the file's content if it is there and not empty, else `.bak`'s;
with neither, an empty table (loadBak then still reports success).
"""

from __future__ import annotations

from typing import Any

from models.coverage_points import COV_CONFIG_FILE_LOADED_FROM_BAK
from models.version import Version

ENTRY_JSON_BYTES = 48  # approximate JSON size of one table entry


class ConfigFile:
    def __init__(self, node: Any, path: str, version: str) -> None:
        self.node = node
        self.cov = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.path = path
        self.bak = path + ".bak"
        self.rename_style = version == Version.V4

    def persist(self, table: dict) -> None:
        files, now = self.node.disk.files, self.node.env._now
        size = ENTRY_JSON_BYTES * len(table) + 2
        content = dict(table)
        previous = files.read(self.path)
        if self.rename_style:
            files.write(self.path + ".tmp", content, size, now)
            if previous is not None:
                files.write(self.bak, previous, size, now)
            files.delete(self.path)
            files.rename(self.path + ".tmp", self.path)
            return
        if previous is not None:
            files.write(self.bak, previous, size, now)
        files.write(self.path, content, size, now)

    def load(self) -> tuple[dict, str]:
        """(table, which file it came from: 'file', 'bak' or 'none')."""
        files = self.node.disk.files
        content = files.read(self.path)
        if content is not None:
            return dict(content), "file"
        content = files.read(self.bak)
        if content is not None:
            self.cov[COV_CONFIG_FILE_LOADED_FROM_BAK] += 1
            return dict(content), "bak"
        return {}, "none"
