"""store.ha.DefaultHAClient (a slave's side of replication, 5.3.3) and broker.slave.SlaveSynchronize.

HAClient: connect to the master's HA port (a failed connect is retried after 5 s); report the
CommitLog max offset right away, after every frame that grew the log
(`reportSlaveMaxOffsetPlus`), and otherwise every `haSendHeartbeatInterval` (5 s); append each
frame's records at the master's physical offsets and let dispatch build the slave's own
ConsumeQueues. A frame whose offset differs from the slave's max offset (other than 0) closes
the connection (then wait 5 s, reconnect); so does `haHousekeepingInterval` (20 s) without
reading anything, and the master's socket closing (its process died, or a RST after its host
rebooted). The loop runs at least once a second (`selector.select(1000)`).

A slave that kept records its master lost in a power loss is *ahead* of the master. The master
then sends from the slave's offset, which lies inside one of its own records: the slave appends
the torn bytes and what follows, acknowledges the new offsets, but its ReputMessageService
stops at the first invalid record (traced `ha.diverged`), so its ConsumeQueues stop growing;
its recovery after a restart truncates the log there. (Classic mode has no epoch check to
prevent this; controller mode's is in auto_switch_ha.py.)

SlaveSynchronize: copy the master's consumer offsets (its entries replace the slave's for each
group and topic the master has) — 4.x every 10 s (first after 3 s), 5.x at most every 60 s
(checked every 3 s from 10 s on; `lastSyncTimeMs` starts at the broker's start, so the first copy
is at the first check more than 60 s after it: 61 s); in controller mode ReplicasManager's own task,
from 3 s every 3 s, more than 10 s after the last copy, and only while the broker is a slave with a
master (`master` set by replicas_manager.py), then also copying the delay offsets (syncDelayOffset:
the file a promoted slave's schedule service starts from). Topic configs are static in the
simulator; in classic mode delay offsets are not copied (the schedule service runs on masters only).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from models.broker.commit_log import CommitLog
from models.broker.config import HA_CONNECT_RETRY_US, MessageStoreConfig
from models.coverage_points import COV_HA_SLAVE_DIVERGED
from models.protocol import (
    SUCCESS,
    AllConsumerOffsets,
    AllDelayOffsets,
    CodeResponse,
    GetAllConsumerOffset,
    GetAllDelayOffset,
    HaClose,
    HaConnect,
    HaReport,
    HaTransfer,
)
from models.records import BROKER_OFFSET_SYNCED, HA_APPENDED, HA_DISCONNECTED, HA_DIVERGED, SLAVE_SYNCED
from models.version import Version
from sim.env import ms

CONNECT_TIMEOUT_US = 5_000_000  # RemotingHelper.connect(addr): 5000 ms
CLIENT_LOOP_US = 1_000_000  # selector.select(1000)
SYNC_TIMEOUT_US = 3_000_000  # BrokerOuterAPI getAllConsumerOffset timeout
SLAVE_SYNC_4X = (3_000_000, 10_000_000)  # (first, period): BrokerController 4.9.8
SLAVE_SYNC_5X = (10_000_000, 3_000_000, 60_000_000)  # (first, check period, minimum gap): 5.3.3
SLAVE_SYNC_CONTROLLER = (3_000_000, 3_000_000, 10_000_000)  # ReplicasManager.handleSlaveSynchronize (5.3.3)


class HAClient:
    def __init__(self, node: Any, log: CommitLog, reput: Any, cfg: MessageStoreConfig, master: str,
                 on_append: Any) -> None:
        self.node = node
        self.log = log
        self.reput = reput
        self.cfg = cfg
        self.master = master
        self.on_append = on_append  # wake dispatch and (SYNC_FLUSH) the group commit
        self.connected = False
        self.generation = 0  # bumped by every (re)connect and close: stale timers stop
        self.reported = 0  # currentReportedOffset
        self.last_read_us = 0
        self.last_write_us = 0
        node.handle(HaTransfer, self.on_transfer)
        node.handle(HaClose, self.on_close)
        node.on_start(self.connect)
        node.on_crash(self._lose)

    def _lose(self) -> None:
        self.connected = False
        self.generation += 1

    def connect(self) -> None:
        self.generation += 1
        self.node.rpc(self.master, HaConnect(), CONNECT_TIMEOUT_US, self._connected, self.generation)

    def _connected(self, generation: int, response: Any) -> None:
        if generation != self.generation:
            return
        if not isinstance(response, CodeResponse) or response.code != SUCCESS:
            self.node.call_later(HA_CONNECT_RETRY_US, self.connect)
            return
        self.connected = True
        self.node.env.network.watch(self.node, self.master, self._master_closed)
        now = self.node.env._now
        self.last_read_us = now
        self.reported = self.log.wrote_position
        self._report(self.reported)
        self.node.call_later(CLIENT_LOOP_US, self._loop, self.generation)

    def _report(self, offset: int) -> None:
        self.last_write_us = self.node.env._now
        self.node.send(self.master, HaReport(offset))

    def _loop(self, generation: int) -> None:
        if generation != self.generation or not self.connected:
            return
        now = self.node.env._now
        if now - self.last_read_us > ms(self.cfg.ha_housekeeping_interval_ms):
            self.close("housekeeping")
            return
        if now - self.last_write_us > ms(self.cfg.ha_send_heartbeat_interval_ms):
            self._report(self.reported)
        self.node.call_later(CLIENT_LOOP_US, self._loop, generation)

    def close(self, reason: str, tell: bool = True) -> None:
        """closeMasterAndWait: close, wait 5 s, connect again."""
        if not self.connected:
            return
        self.connected = False
        self.generation += 1
        self.node.trace(HA_DISCONNECTED, self.master, reason)
        if tell:
            self.node.send(self.master, HaClose())
        self.node.call_later(HA_CONNECT_RETRY_US, self.connect)

    def _master_closed(self, master: str) -> None:
        if master == self.master:  # (a controller-mode slave may have followed another since)
            self.close("closed", tell=False)

    def on_close(self, src: str, req_id: int, req: HaClose) -> None:
        if src == self.master:
            self.close("closed_by_master", tell=False)

    def on_transfer(self, src: str, req_id: int, frame: HaTransfer) -> None:
        """dispatchReadRequest for one frame."""
        if not self.connected or src != self.master:
            return
        self.last_read_us = self.node.env._now
        log = self.log
        if log.wrote_position != 0 and log.wrote_position != frame.offset:
            self.close("offset_mismatch")
            return
        if not frame.records:
            return
        if frame.torn_bytes and self.reput.stop_at < 0:
            self.node.env.coverage[COV_HA_SLAVE_DIVERGED] += 1
            self.reput.stop_at = frame.offset
            self.node.trace(HA_DIVERGED, frame.offset, frame.torn_bytes)
        log.append_replica(list(frame.records))
        if self.node.env.tracer.detail:  # the range this frame appended (detail kind, sim/trace.py)
            self.node.trace(HA_APPENDED, frame.records[0][0], log.wrote_position)
        self.on_append()
        if log.wrote_position > self.reported:  # reportSlaveMaxOffsetPlus
            self.reported = log.wrote_position
            self._report(self.reported)


class SlaveSynchronize:
    """broker.slave.SlaveSynchronize.syncConsumerOffset on the slave's schedule (module docstring)."""

    def __init__(self, node: Any, offsets: Any, master: str, version: str, controller: bool = False) -> None:
        self.node = node
        self.offsets = offsets  # the slave's ConsumerOffsetManager
        self.master = master  # controller mode: "" while not a slave with a master
        self.v4 = version == Version.V4
        self.controller = controller
        self.schedule: Any = None  # controller mode: the ScheduleMessageService whose file syncAll refreshes
        self.last_sync_us = 0  # BrokerController.lastSyncTimeMs (set again at each process start)
        node.add_service(self.run)

    def run(self) -> Generator[Any, Any, None]:
        node = self.node
        if self.v4:
            first, period = SLAVE_SYNC_4X
            yield node.sleep_us(first)
            while True:
                self.sync()
                yield node.sleep_us(period)
        first, period, gap = SLAVE_SYNC_CONTROLLER if self.controller else SLAVE_SYNC_5X
        self.last_sync_us = node.env._now  # a field initialised when the BrokerController is built
        yield node.sleep_us(first)
        while True:
            if self.master and node.env._now - self.last_sync_us > gap:
                self.last_sync_us = node.env._now
                self.sync()
            yield node.sleep_us(period)

    def sync(self) -> None:
        self.node.rpc(self.master, GetAllConsumerOffset(), SYNC_TIMEOUT_US, self._synced)
        if self.schedule is not None:  # controller mode's syncAll also copies the delay offsets
            self.node.rpc(self.master, GetAllDelayOffset(), SYNC_TIMEOUT_US, self._delay_synced)

    def _delay_synced(self, response: Any) -> None:
        if isinstance(response, AllDelayOffsets) and response.code == SUCCESS:
            self.schedule.synced(response.entries)

    def _synced(self, response: Any) -> None:
        if not isinstance(response, AllConsumerOffsets) or response.code != SUCCESS:
            return
        table = self.offsets.table
        keys = {(group, topic) for group, topic, _q, _o in response.entries}
        for key in [k for k in table if (k[0], k[1]) in keys]:
            del table[key]
            self.offsets.client_commits.pop(key, None)
        for group, topic, queue_id, offset in response.entries:
            table[(group, topic, queue_id)] = offset
        self.offsets.file.persist(table)
        self.node.trace(SLAVE_SYNCED, len(response.entries))
        if self.offsets.detail:
            self.offsets.trace_entries(BROKER_OFFSET_SYNCED, {(g, t, q): o for g, t, q, o in response.entries})
