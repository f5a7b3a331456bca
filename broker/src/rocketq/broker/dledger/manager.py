"""DLedgerManager: a broker of a DLedger group (``enableDLegerCommitLog=true``).

It is controller mode's :class:`ReplicasManager` with the group's own Raft (:mod:`.raft`) in
place of the controller: becoming master or slave, the epoch file, the truncation of a divergent
tail, the HA transfer, the ack waiters and the read limit at the confirm offset are the same code;
what differs is who decides (the replicated :class:`~.state.GroupState`) and the ack rule (a
majority of the whole group, :mod:`.acks`).

Theory of operation.  At start the broker takes no writes and is not registered.  It starts its
Raft node on its ``dLegerPeers`` port, commits its broker address (:class:`~.state.Join`) and then
steps every :data:`STEP_S`:

* the group has no master (an election round is open): stop being master or replicating, then
  report the log (:class:`~.state.Report`); the state picks the master once a majority reported;
* the group has a master: become it, or become its slave (truncate, replicate), through
  :meth:`ReplicasManager.apply` in a task of its own, abandoned when the state moves on (a new
  member may wait on a named master that died, and must still report for the next election);
* on the master: commit :class:`~.state.Alive` every ``brokerHeartbeatInterval``; a committed
  Alive renews the *lease*, and the master acknowledges writes only while its last committed
  Alive was sent less than 0.8 x the heartbeat timeout ago (3 x ``brokerHeartbeatInterval``, as
  DLedger's ``maxHeartBeatLeak``), so a master cut off from the majority stops acknowledging
  before the others may elect a successor;
* on the Raft leader: end the mastership (:class:`~.state.Fence`) when no Alive of the master
  was applied for the heartbeat timeout, or its Raft connection has been closed (a crashed
  process) for half a heartbeat interval.

A master that is stopped cleanly (SIGTERM) hands over first (:meth:`hand_over_before_stop`): it
refuses writes, commits a :class:`~.state.Handover` to a member holding its whole log and waits
for that member's first Alive, so producers see one switch, not an election after a timeout.
The committed handover (as an election) is the new master's first lease.

A member that finds itself master in the journal at start-up (it was master before a restart)
fences its own old epoch: its HA port and in-memory state are new, so the group elects again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.controller_mode.controller_requests import ReplicaInfo
from rocketq.broker.controller_mode.replicas_manager import LEASE_FRACTION, ReplicasManager
from rocketq.broker.dledger.acks import MajorityTracker, majority_policy
from rocketq.broker.dledger.peers import DLedgerPeer, majority, parse_peers
from rocketq.broker.dledger.raft import GroupRaft
from rocketq.broker.dledger.state import Alive, Event, Fence, GroupState, Handover, Join, Report
from rocketq.broker.ha.replication import Replication
from rocketq.broker.store.message_store import MessageStore
from rocketq.client.transport.aio import RemotingClient
from rocketq.client.transport.cancel import cancel_and_wait

__all__ = ["MAX_HEARTBEAT_LEAK", "DLedgerManager"]

log = logging.getLogger(__name__)

#: heartbeat intervals without an Alive after which the master counts as dead (DLedger's value)
MAX_HEARTBEAT_LEAK = 3
STEP_S = 0.1


class DLedgerManager(ReplicasManager):
    """Role and epochs of one DLedger member; everything but the Raft tick runs on the event loop."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        replication: Replication,
        client: RemotingClient,
        *,
        broker_addr: Callable[[], str],
        on_role_changed: Callable[[BrokerConfig], Awaitable[None]],
    ) -> None:
        super().__init__(
            config, store, replication, client, broker_addr=broker_addr, on_role_changed=on_role_changed
        )
        self.peers = parse_peers(
            config.dleger_peers, self_id=config.dleger_self_id, preferred_leader_id=config.preferred_leader_id
        )
        self.self_peer = next(p for p in self.peers if p.node_id == config.dleger_self_id)
        self._by_id = {p.node_id: p for p in self.peers}
        self.broker_id = self.self_peer.broker_id
        self.heartbeat_s = config.broker_heartbeat_interval_ms / 1000
        self.timeout_s = self.heartbeat_s * MAX_HEARTBEAT_LEAK
        self.policy = majority_policy(len(self.peers))
        members = frozenset(p.broker_id for p in self.peers)
        self.tracker = MajorityTracker(
            self_id=self.broker_id,
            max_time_not_catchup_ms=config.ha_max_time_slave_not_catchup_ms,
            members=members,
            group_size=len(self.peers),
        )
        self.raft = GroupRaft(
            self.self_peer,
            self.peers,
            config.store_path_root_dir,
            heartbeat_ms=config.broker_heartbeat_interval_ms,
            listener=self._applied,
        )
        self._alive_lock = threading.Lock()
        self._alive_at: dict[tuple[str, int], float] = {}  # (node, epoch) -> last Alive applied here
        self._changed_at = time.monotonic()  # the last master change or round applied here
        self._started_at = time.monotonic()  # before it, a silent master may just be unheard of yet
        self._leader_since: float | None = None
        self._disconnected: tuple[str, float] | None = None  # the master's Raft connection closed since
        self._standby_round = -1
        self._state = GroupState(group_size=len(self.peers))
        self._last_alive_sent = float("-inf")
        self._report_sent: dict[int, float] = {}  # round -> when this member first reported in it
        # the switch to the master the state names (it may wait on a master that died meanwhile)
        self._apply_task: asyncio.Task[None] | None = None
        self._apply_key: tuple[str, int] | None = None
        self._handing_over: float | None = None  # since when this master refuses writes to hand over
        self._handover_after = 0.0
        self._stopping = False  # hand_over_before_stop runs: writes stay refused until the exit
        #: members that handed the mastership over and have not joined since (one stopping on
        #: SIGTERM hands over, then exits): the preferred leader among them is not handed it back
        #: before its restart, which would give the mastership to a process about to exit
        self._stepped_down: set[str] = set()

    # -- lifecycle --------------------------------------------------------------------------------
    async def _run(self) -> None:
        await asyncio.to_thread(self.raft.start)
        log.info(
            "DLedger group %s: member %s (broker id %d) on %s, peers %s, %d needed to acknowledge",
            self.config.dleger_group,
            self.self_peer.node_id,
            self.broker_id,
            self.self_peer.raft_address,
            ";".join(f"{p.node_id}-{p.raft_address}" for p in self.peers),
            majority(len(self.peers)),
        )
        while not await self.raft.submit(Join(self.self_peer.node_id, self._broker_addr()), self.timeout_s):
            await asyncio.sleep(self.heartbeat_s / 2)
        boot = self.raft.snapshot()
        if boot.master == self.self_peer.node_id:
            log.info("this member was master of epoch %d before its restart: a new election", boot.epoch)
            await self.raft.submit(Fence(boot.epoch), self.timeout_s)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._every_step(self._send_alive)))
        self._tasks.append(loop.create_task(self._every_step(self._watch_master)))
        await self._every_step(self._step)

    async def stop(self) -> None:
        if self._apply_task is not None:
            self._apply_task.cancel()
            await asyncio.gather(self._apply_task, return_exceptions=True)
        await super().stop()
        await asyncio.to_thread(self.raft.stop)

    @staticmethod
    async def _every_step(fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await fn()
            except Exception:
                log.exception("DLedger task %s failed", getattr(fn, "__name__", fn))
            await asyncio.sleep(STEP_S)

    def _applied(self, event: Event, changed: bool, at: float) -> None:
        """Raft tick thread: an event was applied here."""
        with self._alive_lock:
            if isinstance(event, Alive):
                self._alive_at[(event.node_id, event.epoch)] = at
            elif isinstance(event, Handover) and changed:
                self._stepped_down.add(event.from_node)
            elif isinstance(event, Join):
                self._stepped_down.discard(event.node_id)
            if changed:
                self._changed_at = at

    # -- the step ---------------------------------------------------------------------------------
    async def _step(self) -> None:
        state = self._state = self.raft.snapshot()
        key = None if state.master is None else (state.master, state.epoch)
        switching = self._apply_task is not None and not self._apply_task.done()
        if switching and self._apply_key != key and self._apply_task is not None:
            log.info("DLedger group %s moved on (%s): the switch to %s is abandoned", *self._moved(key))
            await cancel_and_wait(self._apply_task)  # (wait_for may drop one cancellation)
            switching = False
        if state.master is None:
            await self._stand_by(state)
            if self.self_peer.node_id not in state.reports:
                self._report_sent.setdefault(state.round, time.monotonic())
                await self.raft.submit(self._report(state.round), self.timeout_s)
            return
        address = state.addresses.get(state.master)
        if switching or address is None:
            return
        info = ReplicaInfo(
            master_broker_id=self._by_id[state.master].broker_id,
            master_address=address,
            master_epoch=state.epoch,
            sync_state_set=self.tracker.members,
            sync_state_set_epoch=0,
        )
        self._apply_key = key
        self._apply_task = asyncio.get_running_loop().create_task(self.apply(info))

    def _moved(self, key: tuple[str, int] | None) -> tuple[str, str, str]:
        now = "election open" if key is None else f"master {key[0]}, epoch {key[1]}"
        was = "none" if self._apply_key is None else f"{self._apply_key[0]} (epoch {self._apply_key[1]})"
        return self.config.dleger_group, now, was

    def _report(self, round_: int) -> Report:
        max_offset = self.store.max_phy_offset
        held = [e.epoch for e in self.epoch_file.entries(max_offset) if e.start_offset < max_offset]
        return Report(
            node_id=self.self_peer.node_id,
            round=round_,
            last_epoch=max(held, default=0),
            max_offset=max_offset,
            index=self.self_peer.index,
            preferred=self.self_peer.node_id == self.config.preferred_leader_id,
        )

    async def _stand_by(self, state: GroupState) -> None:
        """An election is open: stop acknowledging and replicating before reporting the log."""
        if self._standby_round == state.round:
            return
        async with self._lock:
            if self.is_master:
                log.warning(
                    "DLedger group %s: election round %d, this master of epoch %d steps down",
                    self.config.dleger_group,
                    state.round,
                    self.master_epoch,
                )
                self._stepdown_limit = self.confirm_offset  # its unconfirmed tail may be truncated
                self.is_master = False
                self._waiters.fail_all()
                await self.replication.stop()
                await self._role_changed(
                    replace(self.config, broker_role=BrokerRole.SLAVE, broker_id=self.broker_id)
                )
            else:
                await self.replication.stop()
            self._standby_round = state.round

    async def _become_master(self, info: ReplicaInfo) -> None:
        # The election is the first lease: a majority committed this member's report (sent at
        # the time kept) before the pick, and the Raft leader times a new master from the pick.
        sent = [t for r, t in self._report_sent.items() if r == self._state.round]
        if sent:
            self._lease_sent = max(self._lease_sent, sent[0])
        elif self._state.master == self.self_peer.node_id:
            # A handover (no round): its commit by a majority is the first lease, timed from its
            # application here, which the Raft leader's own (its silence clock restarts at the
            # change) precedes by about one append period, within the lease's 0.2 x timeout slack.
            # Without it the new master would refuse writes until its first Alive commits, which
            # waits for a new Raft leader when the stopping master led the Raft group.
            with self._alive_lock:
                self._lease_sent = max(self._lease_sent, self._changed_at - STEP_S)
        self._report_sent.clear()
        self._handing_over = None
        await super()._become_master(info)

    async def _send_alive(self) -> None:
        if not self.is_master:
            return
        now = time.monotonic()
        due = self.heartbeat_s if self._fenced_at is None else STEP_S
        if now - self._last_alive_sent < due:
            return
        self._last_alive_sent = now
        if await self.raft.submit(Alive(self.self_peer.node_id, self.master_epoch), self.timeout_s):
            self._lease_sent = max(self._lease_sent, now)
        await self._hand_over()

    async def _hand_over(self) -> None:
        """Hand the mastership over to ``preferredLeaderId`` once it holds this whole log (as
        Java's DLedger moves leadership to its preferred leader): writes are refused meanwhile,
        and resume if the handover is not committed within the heartbeat timeout."""
        preferred = self.config.preferred_leader_id
        if self._stopping or not preferred or preferred == self.self_peer.node_id or not self.lease_ok():
            return
        now = time.monotonic()
        if self._handing_over is not None:
            if now - self._handing_over > self.timeout_s:
                log.warning(
                    "DLedger group %s: the handover to %s did not happen", self.config.dleger_group, preferred
                )
                self._handing_over, self._handover_after = None, now + self.timeout_s
            return
        target = self._by_id[preferred]
        with self._alive_lock:
            stepped_down = preferred in self._stepped_down
        if (
            stepped_down
            or now < self._handover_after
            or not self.raft.connected(target)
            or not self._holds_all(target)
        ):
            return
        self._handing_over = now
        log.info(
            "DLedger group %s: handing the mastership over to the preferred %s",
            self.config.dleger_group,
            preferred,
        )
        deadline = now + self.heartbeat_s
        while not self._holds_all(target):  # writes admitted before the refusal are still replicating
            if time.monotonic() > deadline:
                self._handing_over, self._handover_after = None, time.monotonic() + self.timeout_s
                return
            await asyncio.sleep(STEP_S / 5)
        await self.raft.submit(Handover(self.master_epoch, self.self_peer.node_id, preferred), self.timeout_s)

    async def hand_over_before_stop(self, timeout_s: float) -> str | None:
        """The clean stop (SIGTERM) of a master: refuse writes, hand the mastership over to a
        connected member that holds this whole log (the preferred leader first, as Java's DLedger
        transfers leadership before a shutdown), and return once the group names it master, so
        that producers wait for one switch instead of an election after the heartbeat timeout.
        Returns the new master's id, or None (not master, no member caught up within ``timeout_s``,
        or the handover not committed): then the others elect once this member is gone."""
        if not self.is_master or self._fenced_at is not None:
            return None
        deadline = time.monotonic() + timeout_s
        self._stopping = True  # the periodic handover to preferredLeaderId stays out
        self._handing_over = time.monotonic()  # writes refused from now on (write_refusal)
        preferred = self.config.preferred_leader_id
        others = sorted(
            (p for p in self.peers if p != self.self_peer),
            key=lambda p: (p.node_id != preferred, -self.tracker.acks.get(p.broker_id, -1), p.index),
        )
        target = None
        while target is None and time.monotonic() < deadline:  # admitted writes still replicating
            target = next((p for p in others if self.raft.connected(p) and self._holds_all(p)), None)
            if target is None:
                await asyncio.sleep(STEP_S / 5)
        if target is None:
            log.warning("DLedger group %s: no member holds the whole log: no handover before the stop",
                        self.config.dleger_group)  # fmt: skip
            return None
        log.info(
            "DLedger group %s: stopping: handing the mastership over to %s",
            self.config.dleger_group,
            target.node_id,
        )
        epoch = self.master_epoch
        remaining = max(0.1, deadline - time.monotonic())
        if not await self.raft.submit(Handover(epoch, self.self_peer.node_id, target.node_id), remaining):
            log.warning("DLedger group %s: the handover to %s was not committed", self.config.dleger_group,
                        target.node_id)  # fmt: skip
            return None
        # the new master registers as brokerId 0 once it has switched: wait for its Alive
        while time.monotonic() < deadline:
            with self._alive_lock:
                if any(n == target.node_id and e > epoch for n, e in self._alive_at):
                    break
            await asyncio.sleep(STEP_S / 2)
        log.info("DLedger group %s: %s is master, this member stops", self.config.dleger_group,
                 target.node_id)  # fmt: skip
        return target.node_id

    def _holds_all(self, peer: DLedgerPeer) -> bool:
        return self.tracker.acks.get(peer.broker_id, -1) >= self.store.max_phy_offset

    async def _watch_master(self) -> None:
        """On the Raft leader: fence a master that stopped sending Alive or whose process died."""
        now = time.monotonic()
        state = self.raft.snapshot()
        # watched on every member, so that a new Raft leader knows how long the master is gone
        master = state.master
        if master is None or self.raft.connected(self._by_id[master]):
            self._disconnected = None
        elif self._disconnected is None or self._disconnected[0] != master:
            self._disconnected = (master, now)
        if not self.raft.is_leader:
            self._leader_since = None
            return
        if self._leader_since is None:
            self._leader_since = now
        if state.master is None:
            return
        with self._alive_lock:
            last = max(
                self._alive_at.get((state.master, state.epoch), 0.0), self._changed_at, self._started_at
            )
        silent = now - last
        gone = (
            self._disconnected is not None
            and now - self._disconnected[1] >= self.heartbeat_s / 2
            and now - self._started_at >= self.timeout_s  # not a connection still being opened
        )
        # a new Raft leader may not have applied the last Alive yet: one interval to catch up
        settled = now - self._leader_since >= self.heartbeat_s
        if (silent < self.timeout_s or not settled) and not gone:
            return
        why = "its Raft connection is closed" if gone else f"no Alive for {silent:.1f} s"
        log.warning(
            "DLedger group %s: master %s (epoch %d) is gone (%s): new election",
            self.config.dleger_group,
            state.master,
            state.epoch,
            why,
        )
        await self.raft.submit(Fence(state.epoch), self.timeout_s)

    # -- controller mode's hooks, answered by the group -----------------------------------------
    async def _heartbeat_round(self) -> None:
        return None

    async def _poll_replica_info(self) -> None:
        return None

    async def _check_sync_state_set(self) -> None:
        return None

    async def _elect(self) -> None:
        return None

    def lease_ok(self) -> bool:
        """True while this master may acknowledge writes (its last Alive committed recently)."""
        if not self.is_master or self._fenced_at is not None:
            return False
        lease_s = self.timeout_s * LEASE_FRACTION
        if time.monotonic() - self._lease_sent < lease_s:
            return True
        self._fence(f"no Alive committed by a majority of the group for {lease_s:.1f} s")
        return False

    def write_refusal(self) -> str | None:
        if self.is_master and self._handing_over is not None:
            return (
                f"the master of DLedger group {self.config.dleger_group} is handing over to the preferred "
                f"leader {self.config.preferred_leader_id}: retry shortly"
            )
        return super().write_refusal()

    def no_leader_refusal(self) -> str | None:
        """Why a send is refused while the group has no master (None once it has one)."""
        state = self._state
        if state.master is not None and self.role_known:
            return None
        return (
            f"the DLedger group {self.config.dleger_group} has no leader yet (election round "
            f"{state.round}, {len(state.reports)} of {majority(len(self.peers))} reports needed): "
            "retry in a few seconds"
        )

    def status_keys(self) -> dict[str, object]:
        keys = super().status_keys()
        state = self._state
        leader: DLedgerPeer | None = self.raft.leader()
        keys.update(
            {
                "controllerMode": False,
                "dLegerMode": True,
                "dLegerGroup": self.config.dleger_group,
                "dLegerSelfId": self.self_peer.node_id,
                "dLegerMaster": state.master or "",
                "dLegerRound": state.round,
                "raftLeader": leader.node_id if leader else "",
                "raftTerm": self.raft.term(),
                "syncStateSet": sorted(self.tracker.members) if self.is_master else [],
            }
        )
        return keys
