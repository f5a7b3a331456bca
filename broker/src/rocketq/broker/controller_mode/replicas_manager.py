"""ReplicasManager: a broker in controller mode (RocketMQ 5's ``ReplicasManager``).

The manager keeps the role, epochs, lease and SyncStateSet and decides; the requests it sends the
controller are built and read in :mod:`controller_requests`.

Theory of operation.  At start the broker takes no writes and is not registered with the
NameServers.  A background task registers with the controller leader (a broker id from
``<storePathRootDir>/brokerIdentity.json``, or GET_NEXT_BROKER_ID + APPLY_BROKER_ID the first
time, then CONTROLLER_REGISTER_BROKER), sends a heartbeat, and applies the answer: this broker is
master, or slave of another, or nobody is master yet and it asks for an election.  From then on:

* a heartbeat (BROKER_HEARTBEAT) every ``brokerHeartbeatInterval``;
* GET_REPLICA_INFO every ``syncBrokerMetadataPeriod`` (every heartbeat while master), and
  NOTIFY_BROKER_ROLE_CHANGED pushed by the controller, both handled by :meth:`apply`; a newer
  master epoch changes the role, a newer SyncStateSet epoch updates the set;
* on a master, the SyncStateSet check every ``checkSyncStateSetPeriod`` and after acks.

Becoming master appends ``(epoch, max offset)`` to the epoch file, starts the HA service and
re-registers with the NameServers as broker id 0.  Becoming slave refuses writes at once, reads the
new master's epoch cache, truncates the CommitLog (and its derived files) to the consistent point,
copies the master's epoch entries and replicates from the master's HA port, then re-registers
with its own id.

Fencing.  A master acknowledges a write only while its *lease* holds: its last heartbeat the
controller leader accepted was sent less than ``controllerHeartBeatTimeoutMills`` × 0.8 ago.  The
controller elects a new master only after that timeout without heartbeats, so a master that was
stopped (SIGSTOP), partitioned or cut from the controllers stops acknowledging before another can
be elected; on resuming it refuses writes until the controller confirms it is still master of
its epoch (else it becomes slave and its unacknowledged tail is truncated).

Reads stop at the confirm offset (RocketMQ 5's ``readUnCommitted=false``).  A master serves pulls
only up to the lowest offset every SyncStateSet member holds (``store.read_limit``), so no consumer
reads a tail that a failover may truncate; the confirm listeners (the pull hold service) wake
parked pulls when it advances.  At promotion the new master's whole log is the truth: its confirm
offset starts at its max offset (the new epoch's start).  The master sends its confirm offset to
its slaves in confirm frames (ha/protocol.py) and a slave serves reads only up to the last one
(at least up to the start of the epoch it follows), so a consumer that reads from a slave while
the master is down cannot read a tail the election truncates either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from rocketq.broker.config import BrokerConfig, BrokerRole
from rocketq.broker.controller_mode.ack_waiters import AckWaiters
from rocketq.broker.controller_mode.acks import AckPolicy, AckVerdict, SyncStateSetTracker, ack_verdict
from rocketq.broker.controller_mode.controller_client import ControllerClient
from rocketq.broker.controller_mode.controller_requests import (
    AlterStatus,
    ReplicaInfo,
    ReplicaLookup,
    alter_sync_state_set,
    elect_master,
    get_replica_info,
    register_broker,
    send_heartbeat,
)
from rocketq.broker.controller_mode.controller_requests import now_ms as _now_ms
from rocketq.broker.controller_mode.epoch_file import EpochFile
from rocketq.broker.controller_mode.handshake import HANDSHAKE_SIZE, decode_handshake, encode_handshake
from rocketq.broker.controller_mode.slave_switch import SlaveSwitchError, prepare_slave
from rocketq.broker.errors import BrokerError
from rocketq.broker.ha.master import SlaveConnection
from rocketq.broker.ha.replication import Replication
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.controller import BrokerHeartbeatRequestHeader
from rocketq.client.transport.aio import RemotingClient

__all__ = ["ReplicaInfo", "ReplicasManager"]

log = logging.getLogger(__name__)

#: the share of controllerHeartBeatTimeoutMills a master trusts its last accepted heartbeat
LEASE_FRACTION = 0.8
_RETRY_S = 1.0


class ReplicasManager:
    """Role, epochs and SyncStateSet of one broker; everything runs on the broker's event loop."""

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
        self.config = config
        self.store = store
        self.replication = replication
        self.controller = ControllerClient(
            client, config.controller_addr, timeout_ms=max(config.send_heartbeat_timeout_ms, 3_000)
        )
        self._client = client
        self._broker_addr = broker_addr
        self._on_role_changed = on_role_changed
        self.epoch_file = EpochFile.open(config.store_path_root_dir)
        self.policy = AckPolicy(
            all_ack_in_sync_state_set=config.all_ack_in_sync_state_set,
            in_sync_replicas=config.in_sync_replicas,
            min_in_sync_replicas=config.min_in_sync_replicas,
        )
        self.broker_id = -1
        self.master_epoch = 0
        self.master_broker_id: int | None = None
        self.master_addr = ""
        self.is_master = False
        self.role_known = False
        self.tracker = SyncStateSetTracker(
            self_id=-1, max_time_not_catchup_ms=config.ha_max_time_slave_not_catchup_ms
        )
        self._lease_sent = float("-inf")  # monotonic send time of the last heartbeat the leader accepted
        self._fenced_at: float | None = None
        self._lock = asyncio.Lock()
        self._waiters = AckWaiters()
        self._tasks: list[asyncio.Task[None]] = []
        self._alter_task: asyncio.Task[None] | None = None
        self._confirm_floor = 0  # the max offset at promotion: confirmed by the election
        self._stepdown_limit: int | None = None  # a deposed master's reads, until it has truncated
        # a slave's reads: up to the last confirm offset its master sent, or at least up to the
        # start of the epoch it follows (the new master's log up to there is the truth)
        self._slave_confirm = -1
        self._slave_floor = self._epoch_start()
        self._last_confirm = -1
        #: called on the loop when the confirm offset advances (wakes parked pulls)
        self.confirm_listeners: list[Callable[[], None]] = []
        replication.gate = self
        store.read_limit = self.read_limit

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._run()))

    async def stop(self) -> None:
        for task in [*self._tasks, self._alter_task]:
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *[t for t in [*self._tasks, self._alter_task] if t is not None], return_exceptions=True
        )
        self._waiters.fail_all()

    async def _run(self) -> None:
        while True:
            try:
                info = await self._register()
                break
            except (RocketQError, OSError) as exc:
                log.warning(
                    "cannot register with the controller (%s): %s; retrying",
                    ";".join(self.config.controller_addr),
                    exc,
                )
                await asyncio.sleep(_RETRY_S)
        await self._heartbeat()
        await self.apply(info)
        loop = asyncio.get_running_loop()
        self._tasks += [
            loop.create_task(self._every(self.config.broker_heartbeat_interval_ms, self._heartbeat_round)),
            loop.create_task(
                self._every(self.config.sync_broker_metadata_period_ms, self._poll_replica_info)
            ),
            loop.create_task(
                self._every(self.config.check_sync_state_set_period_ms, self._check_sync_state_set)
            ),
        ]

    @staticmethod
    async def _every(period_ms: int, fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                await fn()
            except Exception:
                log.exception("controller-mode task %s failed", getattr(fn, "__name__", fn))

    # -- registration, heartbeats, polling, the lease ------------------------------------------------
    async def _register(self) -> ReplicaInfo:
        cfg = self.config
        self.broker_id, info = await register_broker(self.controller, cfg, self._broker_addr())
        self.tracker = SyncStateSetTracker(
            self_id=self.broker_id, max_time_not_catchup_ms=cfg.ha_max_time_slave_not_catchup_ms
        )
        return info

    async def _heartbeat(self) -> bool:
        cfg = self.config
        header = BrokerHeartbeatRequestHeader(
            cluster_name=cfg.broker_cluster_name,
            broker_addr=self._broker_addr(),
            broker_name=cfg.broker_name,
            broker_id=self.broker_id,
            epoch=self.epoch_file.last_epoch,
            max_offset=self.store.max_phy_offset,
            confirm_offset=self.confirm_offset,
            heartbeat_timeout_ms=cfg.controller_heart_beat_timeout_ms,
            election_priority=cfg.broker_election_priority,
        )
        sent = time.monotonic()
        accepted = await send_heartbeat(self.controller, header)
        if accepted:
            self._lease_sent = sent
        return accepted

    async def _heartbeat_round(self) -> None:
        ok = await self._heartbeat()
        self.lease_ok()
        if self.is_master and ok:
            await self._poll_replica_info()  # confirms (or ends) the mastership every round

    async def _poll_replica_info(self) -> None:
        if self.broker_id < 0:
            return
        info = await get_replica_info(self.controller, self.config.broker_name)
        if info is ReplicaLookup.NOT_REGISTERED:
            await self._register()
        elif isinstance(info, ReplicaInfo):
            await self.apply(info)

    def lease_ok(self) -> bool:
        """True while this master may acknowledge writes; fences it (logged once) otherwise."""
        if not self.is_master:
            return False
        if self._fenced_at is not None:
            return False
        lease_s = self.config.controller_heart_beat_timeout_ms / 1000 * LEASE_FRACTION
        if time.monotonic() - self._lease_sent < lease_s:
            return True
        self._fence(f"no heartbeat accepted by the controller for {lease_s:.1f} s")
        return False

    def _fence(self, why: str) -> None:
        if self._fenced_at is None:
            log.warning("master of epoch %d stops acknowledging writes: %s", self.master_epoch, why)
            self._fenced_at = time.monotonic()
        self._reevaluate()

    # -- role changes -------------------------------------------------------------------------------
    async def apply(self, info: ReplicaInfo) -> None:
        """A replica info (poll, registration, election or NOTIFY_BROKER_ROLE_CHANGED)."""
        async with self._lock:
            if info.master_epoch < self.master_epoch:
                return
            if info.master_broker_id is None or info.master_broker_id < 0 or not info.master_address:
                if self.is_master:
                    self._fence("the controller lists no master for this group")
                await self._elect()
                return
            if info.master_epoch == self.master_epoch and self.role_known:
                if self.is_master and info.master_broker_id == self.broker_id:
                    self._confirmed(info)
                return
            try:
                if info.master_broker_id == self.broker_id:
                    await self._become_master(info)
                else:
                    await self._become_slave(info)
            except (SlaveSwitchError, RocketQError, OSError) as exc:
                log.error(
                    "cannot follow master %s (epoch %d) yet: %s; retrying at the next replica info",
                    info.master_address,
                    info.master_epoch,
                    exc,
                )
            except Exception:  # a bug must not leave the broker silently without a role for good
                log.exception(
                    "unexpected error switching to follow master %s (epoch %d); retrying at the next "
                    "replica info",
                    info.master_address,
                    info.master_epoch,
                )

    def _confirmed(self, info: ReplicaInfo) -> None:
        if self.tracker.approved(info.sync_state_set, info.sync_state_set_epoch):
            self._reevaluate()
        if self._fenced_at is not None and self._lease_sent > self._fenced_at:
            log.info(
                "the controller confirms this broker as master of epoch %d: writes resume", self.master_epoch
            )
            self._fenced_at = None

    async def _elect(self) -> None:
        info = await elect_master(self.controller, self.config, self.broker_id)
        if info is not None:
            asyncio.get_running_loop().create_task(self.apply(info))  # after this lock is released

    async def _become_master(self, info: ReplicaInfo) -> None:
        log.info(
            "becoming master of %s, epoch %d (SyncStateSet %s)",
            self.config.broker_name,
            info.master_epoch,
            sorted(info.sync_state_set),
        )
        self.is_master = False
        self._waiters.fail_all()
        await self.replication.stop()  # no replicated append after the epoch's start offset is read
        # replicated appends do not advance the queue offsets a put assigns: take them from the CQs
        await asyncio.to_thread(self.store.recover_topic_queue_table)
        max_offset = self.store.max_phy_offset
        self.epoch_file.truncate_suffix(max_offset + 1)
        self.epoch_file.append(info.master_epoch, max_offset)
        self._confirm_floor, self._last_confirm = max_offset, -1
        self.master_epoch = info.master_epoch
        port = await self.replication.start_master(self._read_handshake, self._on_ack, self._ha_confirm)
        self.tracker.reset(info.sync_state_set, info.sync_state_set_epoch, _now_ms())
        self.master_broker_id, self.master_addr = self.broker_id, self._broker_addr()
        self.is_master, self.role_known = True, True
        self._fenced_at = None
        self._stepdown_limit = None
        await self._role_changed(
            replace(self.config, broker_role=BrokerRole.SYNC_MASTER, broker_id=0, ha_listen_port=port)
        )
        self._notify_confirm()
        self._schedule_alter()

    async def _become_slave(self, info: ReplicaInfo) -> None:
        assert info.master_broker_id is not None and info.master_address is not None
        log.info(
            "becoming slave of broker %d at %s, epoch %d",
            info.master_broker_id,
            info.master_address,
            info.master_epoch,
        )
        if self.is_master or not self.role_known:
            if self.is_master:  # its unconfirmed tail may be truncated: keep it unreadable
                self._stepdown_limit = self.confirm_offset
            self.is_master = False
            self._waiters.fail_all()
            await self.replication.stop()
            await self._role_changed(
                replace(self.config, broker_role=BrokerRole.SLAVE, broker_id=self.broker_id)
            )
        ha_addr = await prepare_slave(
            self._client, self.store, self.epoch_file, info.master_address, info.master_epoch
        )
        self._slave_floor = self._epoch_start()  # of the new master's epochs, copied by prepare_slave
        await self.replication.start_slave(
            ha_addr, encode_handshake(self.broker_id, info.master_epoch), self._on_master_confirm
        )
        self._stepdown_limit = None  # truncated to the new master's log: reads up to its confirm offset
        self.master_epoch, self.master_broker_id, self.master_addr = (
            info.master_epoch,
            info.master_broker_id,
            info.master_address,
        )
        self.role_known = True
        await self._role_changed(self.config)

    async def _role_changed(self, config: BrokerConfig) -> None:
        self.config = config
        self.replication.config = config
        await self._on_role_changed(config)

    # -- the master's HA side -------------------------------------------------------------------------
    async def _read_handshake(self, reader: asyncio.StreamReader) -> int:
        handshake = decode_handshake(await reader.readexactly(HANDSHAKE_SIZE))
        if not self.is_master or handshake.master_epoch != self.master_epoch:
            role = f"master of epoch {self.master_epoch}" if self.is_master else "no master"
            raise BrokerError(
                f"slave {handshake.broker_id} follows epoch {handshake.master_epoch}, this broker is {role}"
            )
        return handshake.broker_id

    def _on_ack(self, conn: SlaveConnection) -> None:
        if conn.broker_id < 1:
            return
        self.tracker.on_ack(conn.broker_id, conn.acked, self.store.max_phy_offset, _now_ms())
        self._reevaluate()
        if conn.broker_id not in self.tracker.members:
            self._schedule_alter()

    @property
    def confirm_offset(self) -> int:
        master_max = self.store.max_phy_offset
        if not self.is_master:
            return master_max
        return min(master_max, max(self._confirm_floor, self.tracker.confirm_offset(master_max)))

    def read_limit(self) -> int | None:
        """The offset reads stop at; None (read everything) when all is confirmed.

        A master: its confirm offset.  A deposed master: its last confirm offset, until it has
        truncated.  A slave: the last confirm offset its master sent (confirm frames, ha/protocol.py),
        at least the start of the epoch it follows; everything below is held by every member of
        the SyncStateSet, so no election truncates what a consumer read from a slave."""
        if self.is_master:
            confirm = self.confirm_offset
            return confirm if confirm < self.store.max_phy_offset else None
        if self._stepdown_limit is not None:
            return self._stepdown_limit
        limit = max(self._slave_confirm, self._slave_floor)
        return limit if limit < self.store.max_phy_offset else None

    def _epoch_start(self) -> int:
        """Where the last epoch of the epoch file starts (0 without one)."""
        entry = self.epoch_file.last_entry()
        return entry.start_offset if entry is not None else 0

    def _ha_confirm(self) -> int:
        """The confirm offset the HA service sends its slaves; -1 (none) once no longer master: a
        deposed master's writers may run once more before they stop, and its max offset (what
        :attr:`confirm_offset` answers off master) must never reach a slave as confirmed."""
        return self.confirm_offset if self.is_master else -1

    def _on_master_confirm(self, offset: int) -> None:
        """A slave's HA client got a higher confirm offset: wake the pulls parked below it."""
        if offset > self._slave_confirm:
            self._slave_confirm = offset
            if not self.is_master:
                for listener in self.confirm_listeners:
                    listener()

    def _notify_confirm(self) -> None:
        confirm = self.confirm_offset if self.is_master else -1
        if confirm > self._last_confirm:
            for listener in self.confirm_listeners:
                listener()
        self._last_confirm = confirm

    def _schedule_alter(self) -> None:
        if self._alter_task is None or self._alter_task.done():
            self._alter_task = asyncio.get_running_loop().create_task(self._check_sync_state_set())

    async def _check_sync_state_set(self) -> None:
        if not self.is_master or self._fenced_at is not None:
            return
        wanted = self.tracker.wanted(self.store.max_phy_offset, self._epoch_start(), _now_ms())
        if wanted == self.tracker.members:
            return
        await self._alter(wanted)

    async def _alter(self, wanted: frozenset[int]) -> None:
        epoch = self.master_epoch
        outcome = await alter_sync_state_set(
            self.controller,
            self.config.broker_name,
            master_broker_id=self.broker_id,
            master_epoch=epoch,
            wanted=wanted,
            sync_state_set_epoch=self.tracker.epoch,
        )
        if epoch != self.master_epoch:
            return  # the answer is about an epoch this broker has left
        if outcome.status is AlterStatus.FENCED:
            self._fence("the controller fenced this master's epoch (a newer master exists)")
            await self._poll_replica_info()
        elif outcome.status is AlterStatus.APPROVED and self.tracker.approved(
            outcome.sync_state_set, outcome.sync_state_set_epoch
        ):
            log.info(
                "SyncStateSet of %s is now %s (epoch %d)",
                self.config.broker_name,
                sorted(outcome.sync_state_set),
                outcome.sync_state_set_epoch,
            )
            self._reevaluate()

    # -- AckGate ----------------------------------------------------------------------------------
    def write_refusal(self) -> str | None:
        if not self.is_master:
            return None  # the processors' slave check answers it
        if not self.lease_ok():
            return (
                f"the broker[{self._broker_addr()}] is master of epoch {self.master_epoch} but the "
                "controller has not confirmed it recently: it takes no writes until it does"
            )
        members = self.tracker.members | {self.broker_id}
        if len(members) < self.policy.min_in_sync_replicas:
            return (
                f"in-sync replicas not enough: the SyncStateSet {sorted(members)} is smaller than "
                f"minInSyncReplicas={self.policy.min_in_sync_replicas}"
            )
        return None

    async def after_put(self, result: PutMessageResult) -> PutMessageResult:
        append = result.append_result
        if append is None or result.status is not PutMessageStatus.PUT_OK:
            return result
        status = await self.wait_offset(append.wrote_offset + append.wrote_bytes)
        return (
            result
            if status is PutMessageStatus.PUT_OK
            else PutMessageResult(status=status, append_result=append)
        )

    async def wait_offset(self, offset: int) -> PutMessageStatus:
        verdict = self._verdict(offset)
        if verdict is AckVerdict.WAITING:
            master = self.replication.master
            timeout_s = self.store.config.sync_flush_timeout_ms / 1000
            try:
                verdict = await self._waiters.wait(offset, timeout_s, master.wakeup if master else None)
            except TimeoutError:
                return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        if verdict is AckVerdict.NOT_ENOUGH:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if verdict is AckVerdict.ACKED and self.lease_ok():
            return PutMessageStatus.PUT_OK
        return PutMessageStatus.SERVICE_NOT_AVAILABLE

    def _verdict(self, offset: int) -> AckVerdict | None:
        """None: this broker may not acknowledge anything (not master, fenced)."""
        if not self.lease_ok():
            return None
        return ack_verdict(
            self.policy, offset, self_id=self.broker_id, members=self.tracker.members, acks=self.tracker.acks
        )

    def _reevaluate(self) -> None:
        self._notify_confirm()
        self._waiters.reevaluate(self._verdict)

    def status_keys(self) -> dict[str, object]:
        entry = self.epoch_file.last_entry()
        return {
            "controllerMode": True,
            "brokerControllerId": self.broker_id,
            "masterEpoch": self.master_epoch,
            "lastEpoch": self.epoch_file.last_epoch,
            "lastEpochStartOffset": entry.start_offset if entry else -1,
            "masterBrokerId": self.master_broker_id if self.master_broker_id is not None else -1,
            "masterAddress": self.master_addr,
            "syncStateSet": sorted(self.tracker.members) if self.is_master else [],
            "syncStateSetEpoch": self.tracker.epoch if self.is_master else 0,
            "fenced": self.is_master and self._fenced_at is not None,
            "haServerAddr": f"{self.config.broker_ip2 or self.config.broker_ip1}:{self.replication.ha_port}"
            if self.is_master
            else "",
        }
