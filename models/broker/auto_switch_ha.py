"""store.ha.autoswitch (5.3.3, controller mode): EpochFileCache, AutoSwitchHAService (the
master's side: SyncStateSet, caught-up times, confirm offset, epoch-bounded transfer) and
AutoSwitchHAClient (the slave's side: the handshake and the truncation to the consistent point).

Epochs: every master epoch a broker served or replicated is an entry (epoch, start offset) of its
epoch file; a new master appends (its epoch, its max offset) — refused, as EpochFileCache.appendEntry
does, unless both are above the last entry's; a master confirmed at an epoch its file already holds
(5.3.3 changeToMaster: truncateSuffixByEpoch first) re-appends it at its current end. Transfer frames never cross an epoch's start and
carry the epoch of their data, so a slave appends the same entries as it replicates.

Handshake: a slave connecting to its master gets the master's max offset and epoch entries; it
finds the newest epoch both files hold with the same start, and truncates its CommitLog to the
smaller of the two ends of that epoch (EpochFileCache.findConsistentPoint); no common epoch: the
handshake fails and is tried again. What the cut destroys is recorded with fault
`failover_truncated` (loss cause `truncated_on_failover`): a deposed master's writes that no
member of the new master's SyncStateSet held, and a slave's records the new master never had.

Master (AutoSwitchHAService + AutoSwitchHAConnection):
- SyncStateSet: the master and the slaves the controller accepted. A slave's caught-up time
  (updateConnectionLastCaughtUpTime: it only moves forward) is set on each acknowledgement that
  reaches the master's max offset at the connection's last transfer (now if it equals the current
  max, else the transfer's time; before the connection's first transfer, the epoch 0), and by the
  writer whenever it has nothing left to send (now, whatever the slave acknowledged:
  AutoSwitchHAConnection.transferToSlave's `size == 0` branch, at each 100 ms wait). A slave joins
  (AlterSyncStateSet at once) when its acknowledged offset reaches the confirm offset and the
  current epoch's start; it leaves when its connection closes (at once, removeConnection: also
  when the slave closes its side to follow another master) or, at the 5 s check, when its
  caught-up time is more than `haMaxTimeSlaveNotCatchup` (15 s) old, or it has none
  (`shrink_sync_state_set`, maybeShrinkSyncStateSet, in whole ms). While an alteration is in
  flight the set is the union of the old and the requested one.
- The writer stalls (Java: a socket write that does not complete, `lastWriteOver` false) while
  `HA_SOCKET_BUFFER_BYTES` sent to a slave are not acknowledged: a slave that stops reading (a
  pause, a partition) under traffic is left with something to send, its caught-up time stops,
  and it is shrunk out at the first check more than `haMaxTimeSlaveNotCatchup` later (unless the
  master's housekeeping closed the silent connection first). An idle or merely slow one keeps
  being caught up. The writer resumes on the slave's next acknowledgement.
- Sends (CommitLog.asyncPutMessage in controller mode; the master is a SYNC_MASTER): refused
  before the write (SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH) while the set has fewer than
  `minInSyncReplicas` members; with `allAckInSyncStateSet` a send waits for every member's
  acknowledgement, else for `inSyncReplicas` acknowledgements (≤ 1: none). Timeout: FLUSH_SLAVE_TIMEOUT,
  the message stored.
- Confirm offset: with `allAckInSyncStateSet` and more than one member, the lowest acknowledged
  offset of the connected members (unchanged while a member has no connection); consumers read
  only up to it (the master's dispatch stops there). Otherwise the max offset.

Pure functions (exported by models/broker/__init__.py, used by the classes here):
`find_consistent_point` and `truncate_epochs` (EpochFileCache.findConsistentPoint as
AutoSwitchHAClient.doTruncate prepares it, truncateSuffixByOffset) and `shrink_sync_state_set`
(AutoSwitchHAService.maybeShrinkSyncStateSet).

Simplified: the epoch file is on disk and survives every fault; a slave's dispatch is not held
at the master's confirm offset (it matters for slave reads only); a new slave is sent everything
from the master's first file (isSyncFromLastFile false), as a reconnecting one is. The socket's
room is the slave's acknowledged offset (TCP's own acknowledgements come a little earlier) and a
fixed size: Linux's tcp_wmem maximum, which autotuning reaches under sustained load (the slave's
receive buffer is not added).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from models.broker.commit_log import QUEUE_ID_BITS, CommitLog
from models.broker.config import HA_CONNECT_RETRY_US, MessageStoreConfig
from models.broker.ha_client import HAClient
from models.broker.ha_service import HAConnection, HAService
from models.coverage_points import (
    COV_HA_NO_CONSISTENT_POINT,
    COV_HA_TRUNCATED_AT_CONSISTENT_POINT,
    COV_SYNC_STATE_SET_SHRUNK,
)
from models.protocol import SUCCESS, SYSTEM_ERROR, CodeResponse, HaClose, HaConnect, HaHandshake, HaTransfer
from models.records import HA_TRUNCATED

T = TypeVar("T")  # a broker's identity in a SyncStateSet: its controller id (Java), its node name (the model)
HA_SOCKET_BUFFER_BYTES = 4 * 1024 * 1024  # Linux net.ipv4.tcp_wmem max (NettySystemConfig.socketSndbufSize 0: the OS's)
LONG_MAX_VALUE = (1 << 63) - 1  # Long.MAX_VALUE: an EpochEntry's endOffset until it is set


def _epoch_cache(epochs: Iterable[tuple[int, int]], max_offset: int) -> dict[int, list[int]]:
    """initCacheFromEntries + setLastEpochEntryEndOffset(max offset): epoch → [start, end]. Each
    entry ends where the next in the list starts; the highest epoch's end is the max offset if it
    starts at or below it, else Long.MAX_VALUE. A repeated epoch keeps its last entry (TreeMap.put)."""
    cache: dict[int, list[int]] = {}
    previous: list[int] | None = None
    for epoch, start in epochs:
        entry = [start, LONG_MAX_VALUE]
        cache[epoch] = entry
        if previous is not None:
            previous[1] = start
        previous = entry
    if cache:
        last = cache[max(cache)]
        if last[0] <= max_offset:
            last[1] = max_offset
    return cache


def find_consistent_point(local_epochs: Iterable[tuple[int, int]], local_max_offset: int,
                          master_epochs: Iterable[tuple[int, int]], master_max_offset: int) -> int:
    """EpochFileCache.findConsistentPoint on the caches AutoSwitchHAClient.doTruncate builds: from
    the highest local epoch down, the first the master holds with the same start gives the smaller
    of the two ends; -1 when none does (an empty local file included: doTruncate skips it)."""
    local = _epoch_cache(local_epochs, local_max_offset)
    master = _epoch_cache(master_epochs, master_max_offset)
    for epoch in sorted(local, reverse=True):
        start, end = local[epoch]
        theirs = master.get(epoch)
        if theirs is not None and theirs[0] == start:
            return min(end, theirs[1])
    return -1


def truncate_epochs(epochs: Iterable[tuple[int, int]], offset: int) -> list[tuple[int, int]]:
    """EpochFileCache.truncateSuffixByOffset: the entries (epoch order) that start below `offset`."""
    by_epoch = {epoch: start for epoch, start in epochs}
    return [(epoch, by_epoch[epoch]) for epoch in sorted(by_epoch) if by_epoch[epoch] < offset]


def shrink_sync_state_set(sync_state_set: Iterable[T], master_id: T | None, last_caught_up_ms: Mapping[T, int],
                          now_ms: int, ha_max_time_slave_not_catchup_ms: int) -> set[T]:
    """AutoSwitchHAService.maybeShrinkSyncStateSet: drop each member whose last caught-up time is
    more than `ha_max_time_slave_not_catchup_ms` before `now_ms` (strictly: exactly the limit
    stays), then each member other than the master (`localBrokerId`) without a caught-up time
    (never connected)."""
    members = set(sync_state_set)
    for broker_id, caught_up_ms in last_caught_up_ms.items():
        if broker_id in members and now_ms - caught_up_ms > ha_max_time_slave_not_catchup_ms:
            members.discard(broker_id)
    return {m for m in members if m == master_id or m in last_caught_up_ms}


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

    def renew(self, epoch: int, start: int) -> bool:
        """AutoSwitchHAService.changeToMaster / changeToMasterWhenLastRoleIsMaster (5.3.3): a master
        epoch below the last entry's is refused; one the file already holds (a master confirmed again
        at its own epoch, e.g. after a restart with no election) drops that entry and every later one
        (truncateSuffixByEpoch) and appends (epoch, max offset) again: the epoch's start moves to the
        current end, so a slave holding the old start finds no consistent point in that epoch."""
        if epoch < self.last_epoch():
            return False
        if self.last_epoch() >= epoch:
            self.entries = [(e, s) for e, s in self.entries if e < epoch]
        return self.append(epoch, start)

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """truncateSuffixByOffset: drop the entries starting at or past `offset`."""
        self.entries = truncate_epochs(self.entries, offset)

    def consistent_point(self, local_max: int, master: tuple[tuple[int, int], ...], master_max: int) -> int:
        """findConsistentPoint: -1 when no epoch has the same start in both files."""
        return find_consistent_point(self.entries, local_max, master, master_max)


def queue_ranges_past(log: CommitLog, position: int) -> dict[int, tuple[int, int]]:
    """Queue key → (lowest, highest) queue offset of the records from `position` on (ground truth)."""
    ranges: dict[int, tuple[int, int]] = {}
    for mapped in log.files.files:
        if mapped.file_from_offset + log.file_size <= position:
            continue
        for i in range(mapped.count_ending_by(position), len(mapped)):
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
        self.caught_up_us: dict[str, int] = {}  # connectionCaughtUpTimeTable (µs; compared in whole ms)
        self.last_transfer: dict[str, tuple[int, int]] = {}  # slave → this connection's (lastMasterMaxOffset, µs)
        self.stalled: set[str] = set()  # slaves whose writer waits for room in the socket
        self.confirm = -1
        self.all_ack = cfg.all_ack_in_sync_state_set
        node.on_crash(self._lose_sets)

    def _lose_sets(self) -> None:
        self.active = False
        self.members, self.remote = set(), None
        self.caught_up_us.clear()
        self.last_transfer.clear()
        self.stalled.clear()
        self.confirm = -1

    # --- role ---------------------------------------------------------------------------------
    def change_to_master(self, epoch: int, members: set[str]) -> None:
        self.active = True
        self.epochs.renew(epoch, self.log.wrote_position)
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
        """maybeShrinkSyncStateSet (`shrink_sync_state_set`, on System.currentTimeMillis's whole ms),
        plus the master itself, as ReplicasManager.checkSyncStateSetAndDoReport adds it."""
        caught_up_ms = {slave: us // 1000 for slave, us in self.caught_up_us.items()}
        keep = shrink_sync_state_set(self.members, self.node.name, caught_up_ms, self.node.env._now // 1000,
                                     self.cfg.ha_max_time_slave_not_catchup_ms)
        keep.add(self.node.name)
        return keep

    def _caught_up(self, slave: str, at_us: int) -> None:
        """updateConnectionLastCaughtUpTime: the later of the recorded time and `at_us`."""
        if at_us > self.caught_up_us.get(slave, 0):
            self.caught_up_us[slave] = at_us
        else:
            self.caught_up_us.setdefault(slave, 0)

    # --- connections --------------------------------------------------------------------------
    def on_connect(self, src: str, req_id: int, req: HaConnect) -> None:
        if not self.active:
            self.node.reply(src, req_id, CodeResponse(SYSTEM_ERROR))
            return
        self.last_transfer.pop(src, None)  # a new AutoSwitchHAConnection: lastMasterMaxOffset -1, time 0
        self.stalled.discard(src)
        super().on_connect(src, req_id, req)

    def connect_answer(self) -> HaHandshake:
        """buildHandshakeBuffer: the max offset and every epoch entry."""
        return HaHandshake(SUCCESS, self.log.wrote_position, tuple(self.epochs.entries))

    def _close(self, slave: str, reason: str, tell: bool = False) -> None:
        was_open = slave in self.connections
        self.stalled.discard(slave)
        super()._close(slave, reason, tell)
        if was_open and self.active and slave in self.members:  # removeConnection: shrink at once
            self.propose(self.members - {slave})

    def on_report(self, src: str, req_id: int, report: Any) -> None:
        conn = self.connections.get(src)
        if conn is None or not self.active:
            return
        now, ack = self.node.env._now, report.offset
        last_max, last_us = self.last_transfer.get(src, (-1, 0))
        if ack >= last_max:  # AutoSwitchHAConnection.maybeExpandInSyncStateSet
            self._caught_up(src, now if ack == self.log.wrote_position else last_us)
        super().on_report(src, req_id, report)
        if src not in self.members and (self.remote is None or src not in self.remote) and \
                ack >= self._confirm_offset() and ack >= self.epochs.last_start():
            self.propose(self.sync_state_set() | {src})
        self._update_confirm()
        if src in self.stalled:  # the socket has room again: the writer goes on
            self.stalled.discard(src)
            self._write(conn)

    # --- transfer -----------------------------------------------------------------------------
    def _write(self, conn: HAConnection) -> None:
        """The classic writer (ha_service.py), only while this broker is the master."""
        if self.active:
            super()._write(conn)

    def transfer_start(self, conn: HAConnection) -> int:
        return conn.request_offset  # isSyncFromLastFile false: a slave reporting 0 gets everything

    def frame(self, conn: HAConnection, records: list, first: int) -> tuple[list, tuple]:
        """Frames stop at the next epoch's start and carry their epoch and the confirm offset; with
        nothing left to send, the slave is caught up (whatever it acknowledged); with the socket
        full, nothing is sent and it is not (module docstring)."""
        if not records:
            self._caught_up(conn.slave, self.node.env._now)
            return records, ()
        if conn.next_transfer - conn.ack_offset >= HA_SOCKET_BUFFER_BYTES:
            self.stalled.add(conn.slave)
            return [], ()
        epoch, start, boundary = self.epochs.covering(max(first, conn.next_transfer))
        if boundary >= 0:
            records = [r for r in records if r[0] < boundary]
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
    """The slave's side: follows the master the controller named (none: idle). A controller-mode
    broker has both sides on its node, so a close (HaClose) from a broker that is not its master
    is a slave of its own AutoSwitchHAService closing: the service's (Java: the master's reader
    fails on the closed socket and removeConnection shrinks the SyncStateSet at once)."""

    def __init__(self, node: Any, log: CommitLog, reput: Any, cfg: MessageStoreConfig, on_append: Any,
                 epochs: EpochFile) -> None:
        self.master_side_close = node.handlers.get(HaClose)  # the AutoSwitchHAService's, built before
        super().__init__(node, log, reput, cfg, "", on_append)
        self.epochs = epochs
        self.master = ""
        self.on_truncating: Any = None  # ground truth only: (queue key → (lowest, highest) queue offset cut)
        node.on_crash(self._forget_master)

    def _forget_master(self) -> None:
        self.master = ""  # the restarted broker waits for the controller's word

    def on_close(self, src: str, req_id: int, req: HaClose) -> None:
        if src == self.master:
            super().on_close(src, req_id, req)
        elif self.master_side_close is not None:
            self.master_side_close(src, req_id, req)

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
                self.node.env.coverage[COV_HA_NO_CONSISTENT_POINT] += 1
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
