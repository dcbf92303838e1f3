"""Disk: write and fsync latency, bandwidth, and the slow-disk and fsync-stall faults.

Only durable I/O costs time here: page-cache writes (a broker appending into its mmap) are
memory copies and are free. `fsync_duration_us(n)` returns how long forcing `n` dirty bytes takes
from now: the fsync latency draw plus `n / bandwidth`, multiplied by the `disk_slow` factor,
starting when the device is free (one flush at a time) and not before an `fsync_stall` ends.
An `fsync_error` fault makes every fsync that completes before `fsync_error_until_us` fail with
EIO (`fsync_failing()`): Linux (4.13+, errseq_t) reports the error once to the caller and marks
the pages it could not write clean, so they stay in the page cache, readable, but never reach the
disk, and a later fsync that succeeds does not write them either ("fsyncgate"). What the caller
does with the error is its own (models/broker/commit_log.py: the CommitLog swallows it).
Small files written without fsync (a broker's JSON config files) live in `files`, a page cache
with the kernel's age-based writeback (sim/page_cache.py, `dirty_expire_ms`/`dirty_writeback_ms`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sim.config import Int, IntBytes, PositiveIntMs
from sim.dist import Constant, Dist
from sim.page_cache import PageCache
from sim.units import ms  # not sim.env: validating a scenario loads no SimPy

MAX_BANDWIDTH_BYTES_PER_S = 10**12  # 1 TB/s, beyond any device


class DiskConfig(BaseModel):
    """Device parameters (ms for latencies, like the rest of the scenario)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    write_latency_ms: Dist = Field(Constant(value=0.02), description=(
        "ms of a page-cache write (a distribution; simulator)"))
    fsync_latency_ms: Dist = Field(Constant(value=2.0), description="ms of an fsync (a distribution; simulator)")
    bandwidth_bytes_per_s: Int = Field(default=500 * 1024 * 1024, gt=0, le=MAX_BANDWIDTH_BYTES_PER_S, description=(
        "disk bandwidth, bytes per second (simulator)"))
    dirty_expire_ms: PositiveIntMs = Field(30_000, description=(
        "Linux vm.dirty_expire_centisecs (page cache writeback age)"))
    dirty_writeback_ms: PositiveIntMs = Field(5_000, description=(
        "Linux vm.dirty_writeback_centisecs (flusher wake-ups)"))
    size_bytes: IntBytes | None = Field(None, gt=0, le=1 << 60, description=(
        "the store's disk partition size, bytes; its CommitLog and ConsumeQueue data fill it (null: never "
        "full; models/broker/clean_service.py)"))


class Disk:
    def __init__(self, env: Any, cfg: DiskConfig, stream: Any) -> None:
        self.env = env
        self.cfg = cfg
        self.stream = stream
        self.slow_factor = 1.0
        self.stall_until_us = 0
        self.fsync_error_until_us = 0  # fsyncs completing before this fail (EIO): the `fsync_error` fault
        self.busy_until_us = 0
        self.files = PageCache(ms(cfg.dirty_expire_ms), ms(cfg.dirty_writeback_ms), cfg.bandwidth_bytes_per_s)

    def _transfer_us(self, nbytes: int) -> int:
        return nbytes * 1_000_000 // self.cfg.bandwidth_bytes_per_s

    def _occupy(self, base_us: int) -> int:
        now = self.env._now
        start = max(now, self.busy_until_us, self.stall_until_us)
        end = start + int(base_us * self.slow_factor)
        self.busy_until_us = end
        return end - now

    def fsync_duration_us(self, nbytes: int) -> int:
        base = self.cfg.fsync_latency_ms.sample_us(self.stream) + self._transfer_us(nbytes)
        return self._occupy(base)

    def write_duration_us(self, nbytes: int) -> int:
        """A small synchronous file write (config files), including its fsync."""
        base = self.cfg.write_latency_ms.sample_us(self.stream) + self._transfer_us(nbytes)
        return self._occupy(base)

    def fsync_failing(self) -> bool:
        """An fsync completing now fails with EIO (the `fsync_error` fault is on)."""
        return self.env._now < self.fsync_error_until_us

    def heal(self) -> None:
        self.slow_factor = 1.0
        self.stall_until_us = 0
        self.fsync_error_until_us = 0
