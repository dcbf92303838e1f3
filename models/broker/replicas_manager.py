"""broker.controller.ReplicasManager (5.3.3): a controller-mode broker's side of elections.

Start (every process start): the broker is fenced — it takes no writes (a send is refused as a
slave's is) and does not register with the NameServers — while startBasicService runs, a state
machine whose finished steps are not repeated:
1. schedulingSyncControllerMetadata: GetMetaData (the controllers in turn) until one names the
   leader, at most 3 tries 1 s apart; on success updateControllerMetadata is scheduled (first
   3 s later, then every `syncControllerMetadataPeriod`, 10 s, at a fixed rate) — the only
   thing that ever changes the leader's address: a request that fails on a stale leader
   (CONTROLLER_NOT_LEADER, a timeout) leaves it as it is until that task runs;
2. register, at most 5 tries, each failure followed by a random sleep of 0–999 ms (`random.
   nextInt(1000)`, against concurrent registrations; the broker's own stream); the answer names
   the master if it is alive: then the broker becomes its slave, or master again;
3. one heartbeat, and if no master is known, brokerElect (the first election of a group makes
   the asker master); no master after it: the step is tried again.
A failed step waits RETRY_INTERVAL_SECOND (5 s) and startBasicService runs again from it. Then
it runs: GetReplicaInfo from the leader (schedulingSyncBrokerMetadata: 3 s, then every
`syncBrokerMetadataPeriod`, 5 s, fixed rate; a higher master epoch changes the role, a higher
epoch without a master makes the broker ask for an election) and NOTIFY_BROKER_ROLE_CHANGED from
the controller. Heartbeats to every controller (BrokerController.scheduleSendHeartbeat: from the
process start, 1 s then every `brokerHeartbeatInterval`, skipped while fenced). A role change is
applied only for a master epoch above the broker's.

changeToMaster: the SyncStateSet, the slave sync stopped, AutoSwitchHAService.changeToMaster (an
epoch entry at the max offset; dispatch caught up; the queue offsets rebuilt), brokerId 0, role
SYNC_MASTER, the schedule, transaction check and timer services started (the timer reads from
the checkpoint last copied from the old master: timer_store.py), DataVersion's stateVersion =
the epoch, a SyncStateSet check at once (checkSyncStateSetAndDoReport: the slaves not yet
connected to the new master leave the set) and every `checkSyncStateSetPeriod` (5 s, first 3 s),
registerBrokerAll. A master named again with a higher epoch (changeToMasterWhenLastRoleIsMaster)
only appends the epoch entry and takes the set.
changeToSlave: role SLAVE, those services stopped, brokerId = the controller id, the slave sync
and the HA client pointed at the new master (which truncates at the handshake), registerBrokerAll;
handleSlaveSynchronize's task (3 s, then every 3 s) copies the master's timer checkpoint
(SlaveSynchronize.syncTimerCheckPoint). The same master with a higher epoch
(changeToSlaveWhenMasterNotChange) changes nothing but the epoch: the HA connection, and the
slave sync's task, go on as they were (the HA client reconnects by itself if its connection
had closed).
A master that cannot reach the controllers keeps its role and its writes until it sees a higher
epoch (there is no lease in 5.3.3).

Simplified: the brokers of a group start one after another in list order, 1 s apart (an operator's
rolling start), so the first listed wins the group's first election; the slave's HA client takes
the master's address from the controller's answer, not from a NameServer registration result;
GetMetaData asks the controllers in the configured order (Java: those its 3 s reachability scan
found, in a hash map's order); register is one request (the getNextBrokerId / applyBrokerId
metadata-file steps of a first registration are not modelled: controller ids are fixed); the
other half of handleSlaveSynchronize's task (syncAll more than 10 s after the last) is
SlaveSynchronize's own loop (ha_client.py), on the same period but from the process start.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from models.broker.commit_log import QUEUE_ID_BITS
from models.broker.config import MASTER_ID, BrokerRole
from models.broker.timer_store import GetTimerCheckPoint, TimerCheckPointAnswer, no_timer_checkpoint
from models.coverage_points import COV_IN_SYNC_REPLICAS_NOT_ENOUGH
from models.protocol import (
    CONTROLLER_MASTER_STILL_EXIST,
    SUCCESS,
    SYSTEM_ERROR,
    AlterSyncStateSet,
    BrokerHeartbeatToController,
    ControllerMetadata,
    ElectMaster,
    GetControllerMetadata,
    GetReplicaInfo,
    NotifyBrokerRoleChanged,
    RegisterBrokerToController,
    ReplicaInfo,
    SendResponse,
)
from models.records import BROKER_ROLE, BROKER_SEND_REJECTED, OFFSET_REUSED
from sim.env import ms

RPC_TIMEOUT_US = 3_000_000  # BrokerOuterAPI controller requests: 3 s
RETRY_US = 5_000_000  # ReplicasManager.RETRY_INTERVAL_SECOND
STAGGER_US = 1_000_000  # simulator: a group's brokers start 1 s apart, in list order
FIRST_SYNC_US = 3_000_000  # schedulingSyncBrokerMetadata / updateControllerMetadata / checkSyncStateSet initial delay
METADATA_TRIES = 3  # schedulingSyncControllerMetadata: tryTimes < 3
METADATA_RETRY_US = 1_000_000  # ... TimeUnit.SECONDS.sleep(1) after a failed try
REGISTER_TRIES = 5  # startBasicService: retryTimes < 5
REGISTER_JITTER_MS = 1_000  # ... Thread.sleep(random.nextInt(1000)) after a failed register
HEARTBEAT_FIRST_US = 1_000_000  # BrokerController.scheduleSendHeartbeat initial delay
SLAVE_SYNC_PERIOD_US = 3_000_000  # handleSlaveSynchronize: scheduleAtFixedRate(..., 3000, 3000, ms)
TIMER_CHECKPOINT_TIMEOUT_US = 3_000_000  # BrokerOuterAPI.getTimerCheckPoint: invokeSync(..., 3000)
QUEUE_MASK = (1 << QUEUE_ID_BITS) - 1

# startBasicService's states (ReplicasManager.State)
INITIAL, METADATA_SYNCED, REGISTERED, RUNNING = "INITIAL", "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE", \
    "REGISTER_TO_CONTROLLER_DONE", "RUNNING"


class ReplicasManager:
    def __init__(self, broker: Any, controllers: list[str], peers: dict[str, int]) -> None:
        self.broker = broker
        self.node = broker.node
        self.cfg = broker.cfg
        self.controllers = list(controllers)
        self.peers = dict(peers)  # node name → controller id (the group's brokers)
        self.names = {i: n for n, i in peers.items()}
        self.controller_id = peers[broker.name]
        self.leader = ""  # controllerLeaderAddress
        self.master_epoch = 0
        self.master_addr = ""
        self.ss_epoch = 0
        self.state = INITIAL
        self.running = False
        self.started_once = False
        self.slave_sync_task = 0  # handleSlaveSynchronize's scheduled future: bumped to cancel it
        self.check_task = 0  # checkSyncStateSetTaskFuture: bumped to cancel it
        self.random = self.node.env.rng.stream(f"{self.node.name}.replicas_manager")  # ReplicasManager.random
        self.truth_peers: tuple = ()  # the group's other brokers, for ground truth only (rmqsim/runner.py)
        self.node.on_start(self._start)
        self.node.handle(NotifyBrokerRoleChanged, self.on_notify)
        broker.ha_client.on_truncating = self.reused_by_master
        if broker.timer is not None:
            broker.timer.master_at_start = False  # the role comes from the controller
        else:
            no_timer_checkpoint(self.node)

    # --- start --------------------------------------------------------------------------------
    def _start(self) -> None:
        self.master_epoch, self.master_addr, self.ss_epoch, self.leader = 0, "", 0, ""
        self.state, self.running = INITIAL, False
        self._fence()
        delay = 0 if self.started_once else STAGGER_US * (self.controller_id - 1)
        self.started_once = True
        self.node.env.process(self._basic_service(delay))  # this incarnation's: it dies with it
        self.node.env.process(self._heartbeat_loop())

    def _basic_service(self, delay_us: int) -> Generator[Any, Any, None]:
        """start: startBasicService, again 5 s after each failure, from the step that failed."""
        node = self.node
        yield node.sleep_us(delay_us)
        while True:
            yield from self._start_basic_service()
            if self.state == RUNNING:
                break
            yield node.sleep_us(RETRY_US)
        self.running = True
        self.broker.isolated = False
        self.broker.register_all()
        node.env.process(self._sync_metadata_loop())

    def _start_basic_service(self) -> Generator[Any, Any, None]:
        """startBasicService: the state machine of the module docstring (one pass)."""
        if self.state == INITIAL:
            if not (yield from self._sync_controller_metadata_first()):
                return
            self.state = METADATA_SYNCED
        if self.state == METADATA_SYNCED:
            for _try in range(REGISTER_TRIES):
                if (yield from self._register()):
                    self.state = REGISTERED
                    break
                yield self.node.sleep_us(self.random.randrange(REGISTER_JITTER_MS) * 1000)
            else:
                return  # "Register to broker failed 5 times"
        self.heartbeat()  # the scheduled heartbeats skip a fenced broker
        if self.master_addr or (yield from self._elect()):
            self.state = RUNNING

    def _sync_controller_metadata_first(self) -> Generator[Any, Any, bool]:
        """schedulingSyncControllerMetadata: 3 tries 1 s apart; the first success schedules
        updateControllerMetadata for the rest of this process's life."""
        for _try in range(METADATA_TRIES):
            if (yield from self._find_leader()):
                self.node.env.process(self._controller_metadata_loop())
                return True
            yield self.node.sleep_us(METADATA_RETRY_US)
        return False

    def _find_leader(self) -> Generator[Any, Any, bool]:
        """updateControllerMetadata: ask the controllers in turn which one leads (none answering
        with a leader: the address stays as it was)."""
        for controller in self.controllers:
            answer = yield self.node.rpc_event(controller, GetControllerMetadata(), RPC_TIMEOUT_US)
            if isinstance(answer, ControllerMetadata) and answer.leader:
                self.leader = answer.leader
                return True
        return False

    def _register(self) -> Generator[Any, Any, bool]:
        """register → registerBrokerToController: the answer's master (if any) sets the role."""
        info = yield self.node.rpc_event(self.leader, RegisterBrokerToController(
            self.broker.broker_name, self.controller_id, self.node.name), RPC_TIMEOUT_US)
        if not isinstance(info, ReplicaInfo) or info.code != SUCCESS:
            return False
        if info.master_addr:
            self.apply(info)
        return True

    def _elect(self) -> Generator[Any, Any, bool]:
        """brokerElect: CONTROLLER_MASTER_STILL_EXIST counts as success; True when the answer
        names a master (the role is then applied)."""
        info = yield self.node.rpc_event(self.leader, ElectMaster(self.broker.broker_name, self.controller_id),
                                         RPC_TIMEOUT_US)
        if isinstance(info, ReplicaInfo) and info.code in (SUCCESS, CONTROLLER_MASTER_STILL_EXIST) \
                and info.master_addr:
            self.apply(info)
            return True
        return False

    # --- running ------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """sendHeartbeatToController: oneway, to every controller."""
        broker = self.broker
        hb = BrokerHeartbeatToController(broker.broker_name, self.controller_id, self.node.name,
                                         broker.ha.epochs.last_epoch(), broker.commit_log.wrote_position,
                                         ms(self.cfg.controller_heart_beat_timeout_ms),
                                         self.cfg.broker_election_priority)
        for controller in self.controllers:
            self.node.send(controller, hb)

    def _until(self, planned_us: int) -> Any:
        """scheduleAtFixedRate's wait for a run planned at `planned_us` (each run is planned one
        period after the last one's plan; a run that overran its period is followed at once)."""
        return self.node.sleep_us(max(0, planned_us - self.node.env._now))

    def _heartbeat_loop(self) -> Generator[Any, Any, None]:
        """BrokerController.scheduleSendHeartbeat: from the process start, skipped while fenced."""
        planned, period = self.node.env._now + HEARTBEAT_FIRST_US, ms(self.cfg.broker_heartbeat_interval_ms)
        while True:
            yield self._until(planned)
            planned += period
            if not self.broker.isolated:
                self.heartbeat()

    def _controller_metadata_loop(self) -> Generator[Any, Any, None]:
        """updateControllerMetadata's schedule (3 s, then every syncControllerMetadataPeriod)."""
        planned, period = self.node.env._now + FIRST_SYNC_US, ms(self.cfg.sync_controller_metadata_period_ms)
        while True:
            yield self._until(planned)
            planned += period
            yield from self._find_leader()

    def _sync_metadata_loop(self) -> Generator[Any, Any, None]:
        """schedulingSyncBrokerMetadata: GetReplicaInfo from the leader's address as last known."""
        node = self.node
        planned, period = node.env._now + FIRST_SYNC_US, ms(self.cfg.sync_broker_metadata_period_ms)
        while True:
            yield self._until(planned)
            planned += period
            info = yield node.rpc_event(self.leader, GetReplicaInfo(self.broker.broker_name), RPC_TIMEOUT_US)
            if isinstance(info, ReplicaInfo) and info.code == SUCCESS:
                if info.master_epoch > self.master_epoch and not info.master_addr:
                    yield from self._elect()
                else:
                    self.apply(info)

    def on_notify(self, src: str, req_id: int, req: NotifyBrokerRoleChanged) -> None:
        self.apply(req.info)

    # --- the slave's sync (handleSlaveSynchronize) ----------------------------------------------
    def _slave_synchronize(self, task: int, master: str) -> Generator[Any, Any, None]:
        """handleSlaveSynchronize(SLAVE)'s task: every 3 s (first after 3 s) the master's timer
        checkpoint (SlaveSynchronize.syncTimerCheckPoint), while the timer does not dequeue."""
        node, timer = self.node, self.broker.timer
        planned = node.env._now + SLAVE_SYNC_PERIOD_US
        while True:
            yield self._until(planned)
            planned += SLAVE_SYNC_PERIOD_US
            if task != self.slave_sync_task:
                return  # cancelled
            if timer is None or timer.should_running_dequeue:
                continue
            answer = yield node.rpc_event(master, GetTimerCheckPoint(), TIMER_CHECKPOINT_TIMEOUT_US)
            if task == self.slave_sync_task and isinstance(answer, TimerCheckPointAnswer) and answer.code == SUCCESS:
                timer.synced(answer.last_read_us, answer.master_timer_queue_offset)

    # --- role changes -------------------------------------------------------------------------
    def apply(self, info: ReplicaInfo) -> None:
        """changeBrokerRole: act on a higher master epoch; same epoch on the master: the set."""
        if info.master_epoch > self.master_epoch and info.master_addr:
            self.master_epoch = info.master_epoch
            if info.master_addr == self.node.name:
                self.change_to_master(info)
            else:
                self.change_to_slave(info.master_addr)
        elif info.master_epoch == self.master_epoch and self.master_addr == self.node.name:
            self._accept_set(info)

    def _accept_set(self, info: ReplicaInfo) -> None:
        if info.sync_state_set_epoch > self.ss_epoch:
            self.ss_epoch = info.sync_state_set_epoch
            self.broker.ha.set_members({self.names[i] for i in info.members if i in self.names})

    def _fence(self) -> None:
        """setFenced(true) at start: no writes, no NameServer registration, no special services."""
        broker = self.broker
        broker.isolated = True
        self._become_slave_side("")
        self.node.trace(BROKER_ROLE, broker.broker_name, "fenced", 0)

    def change_to_master(self, info: ReplicaInfo) -> None:
        broker, ha = self.broker, self.broker.ha
        members = {self.names[i] for i in info.members if i in self.names}
        if self.master_addr == self.node.name and not broker.slave:  # changeToMasterWhenLastRoleIsMaster
            self.ss_epoch = info.sync_state_set_epoch
            ha.epochs.renew(info.master_epoch, broker.commit_log.wrote_position)
            ha.set_members(members)
            self.check_sync_state_set()
            self.node.trace(BROKER_ROLE, broker.broker_name, "master", self.master_epoch)
            broker.register_all()
            return
        self.master_addr = self.node.name
        self.ss_epoch = info.sync_state_set_epoch
        self.slave_sync_task += 1  # handleSlaveSynchronize(SYNC_MASTER): the slave's task cancelled
        broker.slave_sync.master = ""
        broker.ha_client.stop()
        broker.reput.dispatch(broker.commit_log.wrote_position)  # changeToMaster waits until dispatch caught up
        broker.reput.replica = False
        broker.commit_log.rebuild_queue_offsets({k: cq.max_offset for k, cq in broker.reput.queues.items()})
        self._mark_reused_offsets()
        ha.change_to_master(info.master_epoch, members)
        broker.broker_id = MASTER_ID
        broker.role = BrokerRole.SYNC_MASTER
        broker.slave = False
        broker.commit_log.master = True
        broker.offsets.slave = False
        broker.store.correct_offsets = True
        broker.replica_waits = broker._waits_for_replicas()
        broker.waits = broker._waits_for_store()
        broker._compose = broker._suggest_compose if broker.cfg.slave_read_enable else None
        broker.register_master_handlers()
        self._carry_timer_truth()
        self._special_services(True)
        self.check_task += 1  # schedulingCheckSyncStateSet: the periodic check (re)started
        self.node.env.process(self._check_sync_state_set_loop(self.check_task))
        self.check_sync_state_set()
        self.node.trace(BROKER_ROLE, broker.broker_name, "master", self.master_epoch)
        broker.register_all()

    def _mark_reused_offsets(self) -> None:
        """Ground truth, not behaviour: queue offsets another replica of the group already gave out
        beyond this one's queues will be given out again here, to other messages; appends below
        them are recorded as `consume_queue.offset_reused` (a consumer past them skips them)."""
        log = self.broker.commit_log
        for other in self.truth_peers:
            for key, cq in other.reput.queues.items():
                high = max(cq.max_offset, other.commit_log.reused_below.get(key, 0))
                if high > log.queue_offsets.get(key, 0) and high > log.reused_below.get(key, 0):
                    log.reused_below[key] = high
        log._update_slow_append()

    def reused_by_master(self, ranges: dict[int, tuple[int, int]]) -> None:
        """Ground truth, not behaviour: this replica is about to cut records whose queue offsets its
        new master (the one the controller named) has given to other messages meanwhile;
        those messages are recorded as stored at a reused offset (consume_queue.offset_reused), and
        so are the ones it will store below the highest offset cut."""
        for peer in self.truth_peers:
            if peer.node.name != self.master_addr or peer.slave or not peer.node.up:
                continue
            for key, (low, high) in ranges.items():
                cq = peer.reput.queues.get(key)
                if cq is None:
                    continue
                topic = peer.commit_log.topics[key >> QUEUE_ID_BITS]
                for offset in range(max(low, cq.min_offset), min(high + 1, cq.max_offset)):
                    msg = peer.store.look_message_by_offset(cq.unit(offset)[0])
                    if msg is not None:
                        peer.node.trace(OFFSET_REUSED, msg.msg_id, topic, key & QUEUE_MASK, offset)
                if high + 1 > max(cq.max_offset, peer.commit_log.reused_below.get(key, 0)):
                    peer.commit_log.reused_below[key] = high + 1  # and the ones it has yet to give
            peer.commit_log._update_slow_append()

    def _carry_timer_truth(self) -> None:
        """Ground truth, not behaviour: the slots this group's timers read before (a promoted
        slave's reads of them are `replay`s: timer_store.py)."""
        timer = self.broker.timer
        if timer is None:
            return
        for peer in self.truth_peers:
            if peer.timer is not None:
                timer.read_high_us = max(timer.read_high_us, peer.timer.read_high_us)

    def change_to_slave(self, master: str) -> None:
        """changeToSlave; the same master again (a higher epoch): changeToSlaveWhenMasterNotChange,
        nothing but the epoch changes (the HA connection and the slave's task go on)."""
        broker = self.broker
        if master != self.master_addr:
            self.master_addr = master
            self.check_task += 1  # stopCheckSyncStateSet
            self._become_slave_side(master)
            self.slave_sync_task += 1  # handleSlaveSynchronize(SLAVE): the task (re)scheduled
            self.node.env.process(self._slave_synchronize(self.slave_sync_task, master))
        self.node.trace(BROKER_ROLE, broker.broker_name, "slave", self.master_epoch)
        broker.register_all()

    def _become_slave_side(self, master: str) -> None:
        broker = self.broker
        broker.ha.change_to_slave()
        broker.broker_id = self.controller_id
        broker.role = BrokerRole.SLAVE
        broker.slave = True
        broker.commit_log.master = False
        broker.offsets.slave = True
        broker.store.correct_offsets = broker.store_cfg.offset_check_in_slave
        broker.reput.replica = True
        broker.replica_waits = False
        broker.waits = False
        broker._compose = broker.slave_processors.compose
        broker.slave_processors.register()
        self._special_services(False)
        broker.slave_sync.master = master
        if master:
            broker.ha_client.follow(master)
        else:
            broker.ha_client.stop()

    def _special_services(self, start: bool) -> None:
        """changeSpecialServiceStatus: schedule and (changeScheduleServiceStatus) the timer's
        dequeue (transaction checks read `slave`)."""
        broker = self.broker
        broker.schedule.set_running(start)
        if broker.timer is not None:
            broker.timer.set_role(start)

    # --- SyncStateSet -------------------------------------------------------------------------
    def _check_sync_state_set_loop(self, task: int) -> Generator[Any, Any, None]:
        """schedulingCheckSyncStateSet: checkSyncStateSetAndDoReport every 5 s (first 3 s) until
        stopCheckSyncStateSet or another schedulingCheckSyncStateSet."""
        planned, period = self.node.env._now + FIRST_SYNC_US, ms(self.cfg.check_sync_state_set_period_ms)
        while True:
            yield self._until(planned)
            planned += period
            if task != self.check_task:
                return
            self.check_sync_state_set()

    def check_sync_state_set(self) -> None:
        """checkSyncStateSetAndDoReport: shrink by haMaxTimeSlaveNotCatchup (a slave with no
        connection leaves at once), report a changed set."""
        ha = self.broker.ha
        keep = ha.maybe_shrink()
        if keep != ha.members:
            ha.propose(keep)

    def alter_sync_state_set(self, members: set[str]) -> None:
        """doReportSyncStateSetChanged: AlterSyncStateSet to the leader (3 s)."""
        if not self.leader or self.master_addr != self.node.name:
            self.broker.ha.remote = None
            return
        ids = tuple(sorted(self.peers[m] for m in members))
        request = AlterSyncStateSet(self.broker.broker_name, self.controller_id, self.master_epoch, ids,
                                    self.ss_epoch)
        self.node.rpc(self.leader, request, RPC_TIMEOUT_US, self._altered, self.master_epoch)

    def _altered(self, epoch: int, info: Any) -> None:
        ha = self.broker.ha
        if epoch != self.master_epoch:
            return
        if isinstance(info, ReplicaInfo) and info.code == SUCCESS:
            self._accept_set(info)
        else:  # the alteration failed (the leader's address stays until updateControllerMetadata)
            ha.remote = None  # the local set stays

    # --- sends --------------------------------------------------------------------------------
    def gate(self, handler: Callable[[str, int, Any], None]) -> Callable[[str, int, Any], None]:
        """CommitLog.asyncPutMessage's check before the write: fewer SyncStateSet members than
        minInSyncReplicas → IN_SYNC_REPLICAS_NOT_ENOUGH (SYSTEM_ERROR to the client)."""
        ha, need, node = self.broker.ha, self.broker.store_cfg.min_in_sync_replicas, self.node
        if need <= 1:
            return handler

        def gated(src: str, req_id: int, req: Any) -> None:
            if ha.in_sync_nums() < need:
                node.env.coverage[COV_IN_SYNC_REPLICAS_NOT_ENOUGH] += 1
                msg = req.msg if hasattr(req, "msg") else req.msgs[0]
                node.trace(BROKER_SEND_REJECTED, msg.msg_id, msg.topic, SYSTEM_ERROR)
                node.reply(src, req_id, SendResponse(SYSTEM_ERROR))
                return
            handler(src, req_id, req)

        return gated
