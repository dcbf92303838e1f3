"""store.ha.autoswitch (5.3.3, controller mode): EpochFileCache, AutoSwitchHAService (the
master's side: SyncStateSet, caught-up times, confirm offset, epoch-bounded transfer) and
AutoSwitchHAClient (the slave's side: the handshake and the truncation to the consistent point).

Epochs: every master epoch a broker served or replicated is an entry (epoch, start offset) of its
epoch file; a new master appends (its epoch, its max offset) — refused, as EpochFileCache.appendEntry
does, unless both are above the last entry's. Transfer frames never cross an epoch's start and
carry the epoch of their data, so a slave appends the same entries as it replicates.

Handshake: a slave connecting to its master gets the master's max offset and epoch entries; it
finds the newest epoch both files hold with the same start, and truncates its CommitLog to the
smaller of the two ends of that epoch (EpochFileCache.findConsistentPoint); no common epoch: the
handshake fails and is tried again. What the cut destroys is recorded with fault
`failover_truncated` (loss cause `truncated_on_failover`): a deposed master's writes that no
member of the new master's SyncStateSet held, and a slave's records the new master never had.

Master (AutoSwitchHAService + AutoSwitchHAConnection):
- SyncStateSet: the master and the slaves the controller accepted. A slave's caught-up time is
  set on each acknowledgement that reaches the master's max offset at its last transfer (now if
  it reaches the current max, else the transfer's time) and when there is nothing left to send. A
  slave joins (AlterSyncStateSet at once) when its acknowledged offset reaches the confirm offset
  and the current epoch's start; it leaves when its connection closes (at once) or, at the 5 s
  check, when it has not caught up for `haMaxTimeSlaveNotCatchup` (15 s). While an alteration is
  in flight the set is the union of the old and the requested one.
- Sends (CommitLog.asyncPutMessage in controller mode; the master is a SYNC_MASTER): refused
  before the write (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH) while the set has fewer than
  `minInSyncReplicas` members; with `allAckInSyncStateSet` a send waits for every member's
  acknowledgement, else for `inSyncReplicas` acknowledgements (≤ 1: none). Timeout: FLUSH_SLAVE_TIMEOUT,
  the message stored.
- Confirm offset: with `allAckInSyncStateSet` and more than one member, the lowest acknowledged
  offset of the connected members (unchanged while a member has no connection); consumers read
  only up to it (the master's dispatch stops there). Otherwise the max offset.

Simplified: the epoch file is on disk and survives every fault; a slave's dispatch is not held
at the master's confirm offset (it matters for slave reads only); a new slave is sent everything
from the master's first file (isSyncFromLastFile false), as a reconnecting one is.
"""

from __future__ import annotations

from typing import Any

from models.broker.commit_log import QUEUE_ID_BITS, CommitLog
from models.broker.config import HA_CONNECT_RETRY_US, MessageStoreConfig
from models.broker.ha_client import HAClient
from models.broker.ha_service import HAConnection, HAService
from models.coverage_points import COV_HA_TRUNCATED_AT_CONSISTENT_POINT, COV_SYNC_STATE_SET_SHRUNK
from models.protocol import SUCCESS, SYSTEM_ERROR, CodeResponse, HaConnect, HaHandshake, HaTransfer
from models.records import HA_TRUNCATED


class EpochFile:
    """EpochFileCache: (epoch, start offset) entries in epoch order."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def last_start(self) -> int:
        return self.entries[-1][1] if self.entries else -1

    def append(self, epoch: int, start: int) -> bool:
        if self.entries and (epoch <= self.entries[-1][0] or start <= self.entries[-1][1]):
            return False
        self.entries.append((epoch, start))
        return True

    def covering(self, offset: int) -> tuple[int, int, int]:
        """(epoch, start, next epoch's start or -1) of the entry holding `offset`."""
        for i in range(len(self.entries) - 1, -1, -1):
            epoch, start = self.entries[i]
            if start <= offset or i == 0:
                nxt = self.entries[i + 1][1] if i + 1 < len(self.entries) else -1
                return epoch, start, nxt
        return 0, 0, -1

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """truncateSuffixByOffset: drop the entries starting at or past `offset`."""
        self.entries = [e for e in self.entries if e[1] < offset]

    def consistent_point(self, local_max: int, master: tuple[tuple[int, int], ...], master_max: int) -> int:
        """findConsistentPoint: -1 when no epoch has the same start in both files."""
        theirs = {epoch: i for i, (epoch, _s) in enumerate(master)}
        for i in range(len(self.entries) - 1, -1, -1):
            epoch, start = self.entries[i]
            j = theirs.get(epoch)
            if j is None or master[j][1] != start:
                continue
            local_end = self.entries[i + 1][1] if i + 1 < len(self.entries) else local_max
            master_end = master[j + 1][1] if j + 1 < len(master) else master_max
            return min(local_end, master_end)
        return -1


def queue_ranges_past(log: CommitLog, position: int) -> dict[int, tuple[int, int]]:
    """Queue key → (lowest, highest) queue offset of the records from `position` on (ground truth)."""
    ranges: dict[int, tuple[int, int]] = {}
    for mapped in log.files.files:
        if mapped.file_from_offset + log.file_size <= position:
            continue
        for i in range(mapped.count_ending_by(position), len(mapped.phys)):
            _size, _t, queue_id, queue_offset, _m, topic, _tags, _rec, _flag = mapped.record(i)
            key = topic << QUEUE_ID_BITS | queue_id
            low, high = ranges.get(key, (queue_offset, queue_offset))
            ranges[key] = (min(low, queue_offset), max(high, queue_offset))
    return ranges


class AutoSwitchHAService(HAService):
    """The master's side (module docstring); idle (refusing connections) while the broker is not master."""

    def __init__(self, node: Any, log: CommitLog, cfg: MessageStoreConfig, version: str, epochs: EpochFile,
                 reput: Any, on_set_changed: Any) -> None:
        super().__init__(node, log, cfg, version)
        self.epochs = epochs
        self.reput = reput
        self.on_set_changed = on_set_changed  # (new member addresses) → AlterSyncStateSet
        self.active = False
        self.members: set[str] = set()  # the SyncStateSet as node names, the master's own included
        self.remote: set[str] | None = None  # the set an AlterSyncStateSet in flight asks for
        self.caught_up_us: dict[str, int] = {}
        self.last_transfer: dict[str, tuple[int, int]] = {}  # slave → (master max offset, time)
        self.confirm = -1
        self.all_ack = cfg.all_ack_in_sync_state_set
        node.on_crash(self._lose_sets)

    def _lose_sets(self) -> None:
        self.active = False
        self.members, self.remote = set(), None
        self.caught_up_us.clear()
        self.last_transfer.clear()
        self.confirm = -1

    # --- role ---------------------------------------------------------------------------------
    def change_to_master(self, epoch: int, members: set[str]) -> None:
        self.active = True
        self.epochs.append(epoch, self.log.wrote_position)
        self.set_members(members)

    def change_to_slave(self) -> None:
        self.active = False
        for slave in list(self.connections):
            self._close(slave, "role_changed", tell=True)
        self.members, self.remote = set(), None
        self.reput.confirm_cap = -1

    def set_members(self, members: set[str]) -> None:
        """setSyncStateSet: the controller accepted this set."""
        self.members, self.remote = set(members), None
        self._update_confirm()
        self.transfer.notify()

    def sync_state_set(self) -> set[str]:
        return self.members | self.remote if self.remote is not None else self.members

    def in_sync_nums(self) -> int:
        return max(len(self.members), len(self.remote)) if self.remote is not None else len(self.members)

    def propose(self, members: set[str]) -> None:
        """markSynchronizingSyncStateSet + the listener's AlterSyncStateSet."""
        if members == self.members or (self.remote is not None and members == self.remote):
            return
        if not members >= self.members:
            self.node.env.coverage[COV_SYNC_STATE_SET_SHRUNK] += 1
        self.remote = set(members)
        self.on_set_changed(members)

    def maybe_shrink(self) -> set[str]:
        """maybeShrinkSyncStateSet: members caught up within haMaxTimeSlaveNotCatchup."""
        now, limit = self.node.env._now, self.cfg.ha_max_time_slave_not_catchup_ms * 1000
        keep = {self.node.name}
        for slave in self.members:
            caught = self.caught_up_us.get(slave)
            if slave != self.node.name and caught is not None and now - caught <= limit:
                keep.add(slave)
        return keep

    # --- connections --------------------------------------------------------------------------
    def on_connect(self, src: str, req_id: int, req: HaConnect) -> None:
        if not self.active:
            self.node.reply(src, req_id, CodeResponse(SYSTEM_ERROR))
            return
        super().on_connect(src, req_id, req)

    def connect_answer(self) -> HaHandshake:
        """buildHandshakeBuffer: the max offset and every epoch entry."""
        return HaHandshake(SUCCESS, self.log.wrote_position, tuple(self.epochs.entries))

    def _close(self, slave: str, reason: str, tell: bool = False) -> None:
        was_open = slave in self.connections
        super()._close(slave, reason, tell)
        if was_open and self.active and slave in self.members:  # removeConnection: shrink at once
            self.propose(self.members - {slave})

    def on_report(self, src: str, req_id: int, report: Any) -> None:
        conn = self.connections.get(src)
        if conn is None or not self.active:
            return
        now, ack = self.node.env._now, report.offset
        last_max, last_us = self.last_transfer.get(src, (0, now))
        if ack >= last_max:
            self.caught_up_us[src] = now if ack >= self.log.wrote_position else last_us
        super().on_report(src, req_id, report)
        if src not in self.members and (self.remote is None or src not in self.remote) and \
                ack >= self._confirm_offset() and ack >= self.epochs.last_start():
            self.propose(self.sync_state_set() | {src})
        self._update_confirm()

    # --- transfer -----------------------------------------------------------------------------
    def _write(self, conn: HAConnection) -> None:
        """The classic writer (ha_service.py), only while this broker is the master."""
        if self.active:
            super()._write(conn)

    def transfer_start(self, conn: HAConnection) -> int:
        return conn.request_offset  # isSyncFromLastFile false: a slave reporting 0 gets everything

    def frame(self, conn: HAConnection, records: list, first: int) -> tuple[list, tuple]:
        """Frames stop at the next epoch's start and carry their epoch and the confirm offset; with
        nothing left to send, the slave is caught up."""
        epoch, start, boundary = self.epochs.covering(max(first, conn.next_transfer))
        if boundary >= 0:
            records = [r for r in records if r[0] < boundary]
        if not records:
            if conn.ack_offset >= self.log.readable_position():
                self.caught_up_us[conn.slave] = self.node.env._now
            return records, ()
        self.last_transfer[conn.slave] = (self.log.wrote_position, self.node.env._now)
        return records, (epoch, start, self._confirm_offset())

    # --- acknowledgement ----------------------------------------------------------------------
    def replicate(self, next_offset: int, callback: Any) -> None:
        """handleHA in controller mode: every member (allAckInSyncStateSet), else inSyncReplicas."""
        need = -1 if self.all_ack else self.cfg.in_sync_replicas
        self.transfer.put_request(next_offset, need, callback)
        self.wake_all()

    def all_acked(self, next_offset: int) -> bool:
        """GroupTransferService, ALL_ACK_IN_SYNC_STATE_SET: every member holds it (a set of one: at once)."""
        for member in self.sync_state_set():
            if member == self.node.name:
                continue
            conn = self.connections.get(member)
            if conn is None or conn.ack_offset < next_offset:
                return False
        return True

    def _confirm_offset(self) -> int:
        return self.log.wrote_position if self.confirm < 0 else self.confirm

    def _update_confirm(self) -> None:
        """computeConfirmOffset; the master's dispatch follows it (module docstring)."""
        if not self.all_ack or len(self.members) <= 1:
            self.confirm = -1
        else:
            acks = []
            for member in self.members:
                if member == self.node.name:
                    continue
                conn = self.connections.get(member)
                if conn is None:
                    return  # a member without a connection: the confirm offset stays
                if conn.ack_offset > 0:
                    acks.append(conn.ack_offset)
            self.confirm = min([self.log.wrote_position, *acks])
        cap = self.confirm
        if cap != self.reput.confirm_cap:
            raised = cap < 0 or cap > self.reput.confirm_cap
            self.reput.confirm_cap = cap
            if raised:
                self.reput.wake()


class AutoSwitchHAClient(HAClient):
    """The slave's side: follows the master the controller named (none: idle)."""

    def __init__(self, node: Any, log: CommitLog, reput: Any, cfg: MessageStoreConfig, on_append: Any,
                 epochs: EpochFile) -> None:
        super().__init__(node, log, reput, cfg, "", on_append)
        self.epochs = epochs
        self.master = ""
        self.on_truncating: Any = None  # ground truth only: (queue key → (lowest, highest) queue offset cut)
        node.on_crash(self._forget_master)

    def _forget_master(self) -> None:
        self.master = ""  # the restarted broker waits for the controller's word

    def connect(self) -> None:
        if self.master and not self.connected:
            super().connect()

    def follow(self, master: str) -> None:
        """changeToSlave: drop the old connection, connect to `master` now."""
        self.stop()
        self.master = master
        self.connect()

    def stop(self) -> None:
        if self.connected:
            self.close("role_changed")
        self.connected = False
        self.generation += 1
        self.master = ""

    def _connected(self, generation: int, response: Any) -> None:
        if generation != self.generation:
            return
        if isinstance(response, HaHandshake) and response.code == SUCCESS:
            point = self._truncate(response)
            if point < 0:  # no common epoch: the handshake is tried again
                self.node.call_later(HA_CONNECT_RETRY_US, self.connect)
                return
            response = CodeResponse(SUCCESS)
        super()._connected(generation, response)

    def _truncate(self, handshake: HaHandshake) -> int:
        """doTruncate: cut the CommitLog (and the ConsumeQueues, the epoch file) at the consistent point."""
        if not self.epochs.entries:
            point = 0
        else:
            point = self.epochs.consistent_point(self.log.wrote_position, handshake.epochs, handshake.max_offset)
        if point < 0:
            return point
        if self.on_truncating is not None and point < self.log.wrote_position:
            self.on_truncating(queue_ranges_past(self.log, point))
        lost = self.log.truncate_at_consistent_point(point)
        if lost:
            self.node.env.coverage[COV_HA_TRUNCATED_AT_CONSISTENT_POINT] += 1
            self.reput.truncated()
        self.epochs.truncate_suffix_by_offset(point)
        self.node.trace(HA_TRUNCATED, point, lost, self.epochs.last_epoch())
        return point

    def on_transfer(self, src: str, req_id: int, frame: HaTransfer) -> None:
        if self.connected and src == self.master and frame.records and frame.epoch > self.epochs.last_epoch():
            self.epochs.append(frame.epoch, frame.epoch_start)
        super().on_transfer(src, req_id, frame)
