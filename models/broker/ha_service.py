"""store.ha.DefaultHAService / DefaultHAConnection / GroupTransferService: the master's side of
master → slave replication (classic mode, 5.3.3; 4.9.8 HAService where it differs).

A slave's HAClient (ha_client.py) connects to its master and reports its CommitLog max offset.
The master's connection starts transferring at that offset — or, if the slave reports 0, at
the start of the master's last CommitLog file (a new slave gets no older file) — and pushes
frames of whole records (up to `haTransferBatchSize`, 32 KiB, within one file) of *readable*
data (written, or committed with the transient store pool; not necessarily flushed). When it
has nothing to send it waits up to 100 ms (`allWaitForRunning(100)`), woken early only by a
SYNC_MASTER send that waits for replicas, so an ASYNC_MASTER's slave trails by up to ~100 ms
plus the network; idle, it sends a header-only heartbeat every `haSendHeartbeatInterval` (5 s).
A connection that has read nothing for `haHousekeepingInterval` (20 s) is closed; a closed TCP
connection (the slave process died) is dropped at once. `push2SlaveMaxOffset` is the highest
offset any slave acknowledged.

Send acknowledgement (GroupTransferService; only puts that wait, `WAIT=true`):
- 5.x: a send waits for `inSyncReplicas` acknowledgements counting the master itself, i.e. for
  `inSyncReplicas - 1` connections whose acknowledged offset reaches the message's end; ≤ 1
  means no wait at all (a 5.x SYNC_MASTER with defaults acknowledges like an async master).
  Not reached within `slaveTimeout` (3 s) → FLUSH_SLAVE_TIMEOUT; SLAVE_NOT_AVAILABLE is not
  produced.
- 4.x SYNC_MASTER: no connected slave, or the slave more than `haSlaveFallbehindMax` (256 MiB)
  behind → SLAVE_NOT_AVAILABLE at once; else wait until `push2SlaveMaxOffset` reaches the end or
  `slaveTimeout` → FLUSH_SLAVE_TIMEOUT.
Either way the message is stored on the master. ASYNC_MASTER never waits.

The controller mode's replication (AutoSwitchHAService: epochs, SyncStateSet,
`minInSyncReplicas`, `allAckInSyncStateSet`) is auto_switch_ha.py, built on this one. Not
modelled: `enableSlaveActingMaster` (`enableAutoInSyncReplicas`) and DLedger mode: in classic
mode a broker group whose master is down stays without a master until it is restarted. HA flow
control (`haFlowControlEnable`) is off, as by default.

Simplified: frames carry whole records; a slave whose offset falls inside a master record (it
kept records the master lost in a power loss) is sent the rest of the file from the next record
on, with the torn bytes counted (`torn_bytes`), so its acknowledged offsets move on as in Java
while its own dispatch stops there (ha_client.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.broker.commit_log import FLUSH_SLAVE_TIMEOUT, PUT_OK, SLAVE_NOT_AVAILABLE, CommitLog
from models.broker.config import HA_WRITE_POLL_US, MessageStoreConfig
from models.coverage_points import (
    COV_FLUSH_SLAVE_TIMEOUT,
    COV_HA_SLAVE_CATCHING_UP,
    COV_SLAVE_NOT_AVAILABLE,
    COV_SYNC_MASTER_WAITS_FOR_SLAVE,
)
from models.protocol import SUCCESS, CodeResponse, HaClose, HaConnect, HaReport, HaTransfer
from models.records import HA_CONNECTED, HA_DISCONNECTED
from models.version import Version
from sim.env import ms


class HAConnection:
    """DefaultHAConnection: one slave's connection at the master."""

    __slots__ = ("slave", "request_offset", "ack_offset", "next_transfer", "last_write_us", "last_read_us",
                 "open")

    def __init__(self, slave: str, now_us: int) -> None:
        self.slave = slave
        self.request_offset = -1  # slaveRequestOffset: the first report
        self.ack_offset = -1  # slaveAckOffset
        self.next_transfer = -1  # nextTransferFromWhere
        self.last_write_us = now_us
        self.last_read_us = now_us
        self.open = True


class HAService:
    def __init__(self, node: Any, log: CommitLog, cfg: MessageStoreConfig, version: str) -> None:
        self.node = node
        self.cov = node.env.coverage  # rare-state counts (models/coverage_points.py)
        self.log = log
        self.cfg = cfg
        self.v4 = version == Version.V4
        self.connections: dict[str, HAConnection] = {}
        self.push2slave_max = 0  # push2SlaveMaxOffset
        self.transfer = GroupTransferService(self)
        node.handle(HaConnect, self.on_connect)
        node.handle(HaReport, self.on_report)
        node.handle(HaClose, self.on_close)
        node.on_crash(self._lose)

    def _lose(self) -> None:
        for conn in self.connections.values():
            conn.open = False
        self.connections.clear()
        self.push2slave_max = 0

    # --- connections --------------------------------------------------------------------------
    def on_connect(self, src: str, req_id: int, req: HaConnect) -> None:
        old = self.connections.pop(src, None)
        if old is not None:
            old.open = False
        conn = self.connections[src] = HAConnection(src, self.node.env._now)
        self.node.env.network.watch(self.node, src, self._slave_closed)
        self.node.reply(src, req_id, self.connect_answer())
        self.node.call_later(HA_WRITE_POLL_US, self._poll, conn)

    def connect_answer(self) -> Any:
        """What a slave's connect is answered with (controller mode: the handshake, auto_switch_ha.py)."""
        return CodeResponse(SUCCESS)

    def _slave_closed(self, slave: str) -> None:
        self._close(slave, "closed")

    def on_close(self, src: str, req_id: int, req: HaClose) -> None:
        self._close(src, "closed_by_slave")

    def _close(self, slave: str, reason: str, tell: bool = False) -> None:
        conn = self.connections.pop(slave, None)
        if conn is not None:
            conn.open = False
            self.node.trace(HA_DISCONNECTED, slave, reason)
            if tell:
                self.node.send(slave, HaClose())

    def on_report(self, src: str, req_id: int, report: HaReport) -> None:
        """ReadSocketService: the slave's acknowledged offset."""
        conn = self.connections.get(src)
        if conn is None:
            return
        conn.last_read_us = self.node.env._now
        if conn.request_offset < 0:
            conn.request_offset = report.offset
            if report.offset < self.log.readable_position():
                self.cov[COV_HA_SLAVE_CATCHING_UP] += 1
            self.node.trace(HA_CONNECTED, src, report.offset)
            self._write(conn)  # the WriteSocketService starts with the first report
        conn.ack_offset = report.offset
        if report.offset > self.push2slave_max:
            self.push2slave_max = report.offset
        self.transfer.notify()

    # --- WriteSocketService ---------------------------------------------------------------------
    def wake_all(self) -> None:
        """WaitNotifyObject.wakeupAll: a SYNC_MASTER send wants its data on the slaves now."""
        for conn in self.connections.values():
            self._write(conn)

    def _poll(self, conn: HAConnection) -> None:
        """The writer's 100 ms wait ran out: housekeeping, heartbeat, transfer."""
        if not conn.open:
            return
        now = self.node.env._now
        if now - conn.last_read_us > ms(self.cfg.ha_housekeeping_interval_ms):
            self._close(conn.slave, "housekeeping", tell=True)
            return
        self._write(conn)
        if conn.request_offset >= 0 and now - conn.last_write_us > ms(self.cfg.ha_send_heartbeat_interval_ms):
            self._send(conn, HaTransfer(conn.next_transfer))
        self.node.call_later(HA_WRITE_POLL_US, self._poll, conn)

    def _write(self, conn: HAConnection) -> None:
        """Send every readable record from `nextTransferFromWhere`, frame by frame."""
        if conn.request_offset < 0:
            return
        log = self.log
        if conn.next_transfer < 0:
            conn.next_transfer = self.transfer_start(conn)
        batch = self.cfg.ha_transfer_batch_size_bytes
        while conn.open:
            records, first = log.records_from(conn.next_transfer, batch)
            records, header = self.frame(conn, records, first)
            if not records:
                return
            torn = 0 if log.at_boundary(conn.next_transfer) else first - conn.next_transfer
            last_phys, last = records[-1][0], records[-1][1]
            end = last_phys + int.from_bytes(last[:4], "little", signed=True)
            self._send(conn, HaTransfer(conn.next_transfer, tuple(records), torn, *header))
            conn.next_transfer = end

    def transfer_start(self, conn: HAConnection) -> int:
        """nextTransferFromWhere at the first report: a slave that reports 0 gets the last file only."""
        if conn.request_offset == 0:
            end = self.log.readable_position()
            return end - end % self.log.file_size
        return conn.request_offset

    def frame(self, conn: HAConnection, records: list, first: int) -> tuple[list, tuple]:
        """The records of the next frame, and its header fields beyond the offset (controller mode
        cuts at epoch starts and adds the epoch: auto_switch_ha.py)."""
        return records, ()

    def _send(self, conn: HAConnection, frame: HaTransfer) -> None:
        conn.last_write_us = self.node.env._now
        self.node.send(conn.slave, frame)

    # --- acknowledgement --------------------------------------------------------------------------
    def slave_ok(self, master_put_where: int) -> bool:
        """4.x HAService.isSlaveOK."""
        return bool(self.connections) and master_put_where - self.push2slave_max < self.cfg.ha_max_gap_not_in_sync_bytes

    def acks(self, next_offset: int) -> int:
        """5.x: acknowledgements for data ending at `next_offset`, the master's own included."""
        return 1 + sum(1 for c in self.connections.values() if c.ack_offset >= next_offset)

    def replicate(self, next_offset: int, callback: Callable[[str], None]) -> None:
        """CommitLog.handleHA / submitReplicaRequest for a SYNC_MASTER send that waits."""
        if self.v4:
            if not self.slave_ok(next_offset):
                self.cov[COV_SLAVE_NOT_AVAILABLE] += 1
                callback(SLAVE_NOT_AVAILABLE)
                return
            need = 0
        else:
            need = self.cfg.in_sync_replicas
        self.transfer.put_request(next_offset, need, callback)
        self.wake_all()


class GroupTransferService:
    """store.ha.GroupTransferService: replica waits, completed on acknowledgement or timeout."""

    def __init__(self, ha: HAService) -> None:
        self.ha = ha
        self.node = ha.node
        self.cov = ha.cov
        self.requests: list[list] = []  # [next_offset, deadline_us, need_acks (0: 4.x rule), callback]
        self.watcher_armed = False
        self.node.on_crash(self._reset)

    def _reset(self) -> None:
        self.requests = []
        self.watcher_armed = False

    def put_request(self, next_offset: int, need: int, callback: Callable[[str], None]) -> None:
        deadline = self.node.env._now + ms(self.ha.cfg.slave_timeout_ms)
        request = [next_offset, deadline, need, callback]
        if self._done(request):
            callback(PUT_OK)
            return
        self.cov[COV_SYNC_MASTER_WAITS_FOR_SLAVE] += 1
        self.requests.append(request)
        if not self.watcher_armed:
            self.watcher_armed = True
            self.node.call_later(deadline - self.node.env._now, self._watch)

    def _done(self, request: list) -> bool:
        if request[2] == 0:  # 4.x: push2SlaveMaxOffset >= nextOffset
            return self.ha.push2slave_max >= request[0]
        if request[2] < 0:  # controller mode, allAckInSyncStateSet (auto_switch_ha.py)
            return self.ha.all_acked(request[0])  # type: ignore[attr-defined]  # an AutoSwitchHAService there
        return self.ha.acks(request[0]) >= request[2]

    def notify(self) -> None:
        """notifyTransferSome: an acknowledgement arrived."""
        if not self.requests:
            return
        keep = []
        for request in self.requests:
            if self._done(request):
                request[3](PUT_OK)
            else:
                keep.append(request)
        self.requests = keep

    def _watch(self) -> None:
        now = self.node.env._now
        keep = []
        for request in self.requests:
            if request[1] <= now:
                self.cov[COV_FLUSH_SLAVE_TIMEOUT] += 1
                request[3](FLUSH_SLAVE_TIMEOUT)
            else:
                keep.append(request)
        self.requests = keep
        self.watcher_armed = bool(keep)
        if keep:
            self.node.call_later(min(r[1] for r in keep) - now, self._watch)
