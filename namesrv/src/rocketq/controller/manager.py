"""The controller's decisions: registration, SyncStateSet changes, elections and role-change notices.

:class:`ControllerManager` joins the replicated table (``raft.py``), broker liveness
(``heartbeat.py``) and the election policy (``state.py``) into the operations the request
processor exposes, one async method per request.  Writes run one at a time on the leader: a Raft
barrier first (so the leader's table holds every committed event), then the plan, then the
replicated event; the outcome of applying the event is the answer.  When a group gets a new master
the group's active brokers are told with a oneway NOTIFY_BROKER_ROLE_CHANGED (1008) if
``notifyBrokerRoleChanged``; brokers also learn it from GET_REPLICA_INFO and from the answer to
their heartbeats.  :meth:`ControllerManager.check_inactive_masters` is the leader's periodic
scan that elects a new master for each group whose master stopped heartbeating.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass

from rocketq.client.errors import RocketQError
from rocketq.client.remoting import controller as wire
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.transport.aio import RemotingClient
from rocketq.controller.config import ControllerConfig
from rocketq.controller.heartbeat import BrokerHeartbeatManager
from rocketq.controller.raft import ControllerRaft
from rocketq.controller.state import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CandidateInfo,
    ElectMasterEvent,
    GroupState,
    Outcome,
    UpdateBrokerAddressEvent,
)

__all__ = ["ControllerManager", "ElectResult", "GroupView"]

log = logging.getLogger("rocketq.controller")


@dataclass(frozen=True, slots=True)
class GroupView:
    """A copy of one group's record, taken under the table lock."""

    cluster_name: str
    broker_name: str
    broker_addrs: dict[int, str]
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    @classmethod
    def of(cls, group: GroupState) -> GroupView:
        return cls(
            group.cluster_name,
            group.broker_name,
            dict(group.broker_addrs),
            group.master_broker_id,
            group.master_address,
            group.master_epoch,
            group.sync_state_set,
            group.sync_state_set_epoch,
        )

    def sync_state(self) -> wire.SyncStateSet:
        return wire.SyncStateSet(self.sync_state_set, self.sync_state_set_epoch)


@dataclass(frozen=True, slots=True)
class ElectResult:
    outcome: Outcome
    group: GroupView | None  # the group after the election (or as it stands, when refused)


class ControllerManager:
    """Operations of one controller node; every write is refused unless this node leads."""

    def __init__(self, config: ControllerConfig, raft: ControllerRaft) -> None:
        self.config = config
        self.raft = raft
        self.heartbeats = BrokerHeartbeatManager(config.controller_heartbeat_timeout_ms)
        self._write_lock = asyncio.Lock()
        self._notifier = RemotingClient(connect_timeout_ms=1_000)

    async def close(self) -> None:
        await self._notifier.close()

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

    def view(self, broker_name: str) -> GroupView | None:
        with self.raft.read() as table:
            group = table.group(broker_name)
            return None if group is None else GroupView.of(group)

    def views(self) -> list[GroupView]:
        with self.raft.read() as table:
            return [GroupView.of(g) for g in table.groups.values()]

    def alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeats.is_active(cluster_name, broker_name, broker_id)

    def _live_info(self, cluster_name: str, broker_name: str, broker_id: int) -> CandidateInfo | None:
        info = self.heartbeats.get(cluster_name, broker_name, broker_id)
        return None if info is None else info.candidate()

    # -- registration --------------------------------------------------------------------------

    def next_broker_id(self, broker_name: str) -> int:
        with self.raft.read() as table:
            return table.next_broker_id(broker_name)

    async def apply_broker_id(self, hdr: wire.ApplyBrokerIdRequestHeader) -> Outcome:
        address = hdr.register_check_code.split(";")[0]
        event = ApplyBrokerIdEvent(
            hdr.cluster_name, hdr.broker_name, hdr.applied_broker_id, address, hdr.register_check_code
        )
        async with self._write_lock:
            barrier = await self.raft.barrier()
            if not barrier.ok:
                return barrier
            with self.raft.read() as table:
                planned = table.plan_apply_broker_id(event)
            if not planned.ok:
                return planned
            return await self.raft.submit(event)

    async def register_broker(
        self, hdr: wire.RegisterBrokerToControllerRequestHeader
    ) -> tuple[Outcome, GroupView | None]:
        """Java's ``registerBroker``: the broker's id must have been applied; updates its address."""
        group = self.view(hdr.broker_name)
        if group is None:
            remark = f"Broker-set: {hdr.broker_name} hasn't been registered in controller"
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark), None
        if hdr.broker_id not in group.broker_addrs:
            remark = f"BrokerId: {hdr.broker_id} hasn't been registered in broker-set: {hdr.broker_name}"
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, remark), None
        if group.broker_addrs[hdr.broker_id] != hdr.broker_address:
            async with self._write_lock:
                event = UpdateBrokerAddressEvent(hdr.broker_name, hdr.broker_id, hdr.broker_address)
                outcome = await self.raft.submit(event)
            if not outcome.ok:
                return outcome, None
            group = self.view(hdr.broker_name)
        return Outcome(), group

    def master_if_alive(self, group: GroupView) -> int | None:
        master = group.master_broker_id
        if master is not None and self.alive(group.cluster_name, group.broker_name, master):
            return master
        return None

    # -- SyncStateSet --------------------------------------------------------------------------

    async def alter_sync_state_set(
        self, hdr: wire.AlterSyncStateSetRequestHeader, body: wire.SyncStateSet
    ) -> tuple[Outcome, GroupView | None]:
        event = AlterSyncStateSetEvent(
            hdr.broker_name,
            hdr.master_broker_id,
            hdr.master_epoch,
            body.sync_state_set_epoch,
            body.sync_state_set,
        )
        async with self._write_lock:
            barrier = await self.raft.barrier()
            if not barrier.ok:
                return barrier, None
            with self.raft.read() as table:
                group = table.group(hdr.broker_name)
                cluster = group.cluster_name if group else ""
                alive = functools.partial(self.alive, cluster, hdr.broker_name)
                planned = table.plan_alter_sync_state_set(event, alive)
            if not planned.ok:
                return planned, None
            outcome = await self.raft.submit(event)
        if outcome.ok:
            log.info(
                "SyncStateSet of %s is now %s (epoch %s)",
                hdr.broker_name,
                sorted(body.sync_state_set),
                outcome.new_epoch,
            )
        return outcome, self.view(hdr.broker_name)

    # -- elections -----------------------------------------------------------------------------

    async def elect_master(
        self, broker_name: str, *, broker_id: int | None, designate: bool, trigger: str
    ) -> ElectResult:
        """Plan and commit an election; tells the group's brokers when a new master is in."""
        async with self._write_lock:
            barrier = await self.raft.barrier()
            if not barrier.ok:
                return ElectResult(barrier, self.view(broker_name))
            with self.raft.read() as table:
                group = table.group(broker_name)
                cluster = group.cluster_name if group else ""
                planned, event = table.plan_election(
                    broker_name,
                    broker_id=broker_id,
                    designate=designate,
                    alive=functools.partial(self.alive, cluster, broker_name),
                    live_info=functools.partial(self._live_info, cluster, broker_name),
                    unclean=self.config.enable_elect_unclean_master,
                )
            if event is None:
                return ElectResult(planned, self.view(broker_name))
            applied = await self.raft.submit(event)
        view = self.view(broker_name)
        if not applied.ok:
            return ElectResult(applied, view)
        self._log_election(trigger, event, view)
        if event.new_master_broker_id is None:
            return ElectResult(planned, view)
        if view is not None and self.config.notify_broker_role_changed:
            asyncio.get_running_loop().create_task(self.notify_role_changed(view), name="notify-role")
        return ElectResult(applied, view)

    @staticmethod
    def _log_election(trigger: str, event: ElectMasterEvent, view: GroupView | None) -> None:
        epoch = view.master_epoch if view else "?"
        if event.new_master_broker_id is None:
            log.warning(
                "%s: master of %s is gone and no replica can take over (epoch %s)",
                trigger,
                event.broker_name,
                epoch,
            )
        else:
            address = view.master_address if view else "?"
            log.info(
                "%s: elected broker %d (%s) master of %s, master epoch %s",
                trigger,
                event.new_master_broker_id,
                address,
                event.broker_name,
                epoch,
            )

    async def check_inactive_masters(self) -> list[ElectResult]:
        """The leader's scan: elect wherever the master stopped heartbeating (or is missing)."""
        if not self.is_leader:
            return []
        results: list[ElectResult] = []
        for group in self.views():
            master = group.master_broker_id
            if master is not None and self.alive(group.cluster_name, group.broker_name, master):
                continue
            if master is None and group.master_epoch == 0:
                continue  # never had a master: the brokers trigger the first election
            if not self.heartbeats.knows_enough() and master is not None:
                continue  # just started: "not heard yet" is not "dead"
            results.append(await self._elect_with_retries(group.broker_name))
        return results

    async def _elect_with_retries(self, broker_name: str) -> ElectResult:
        result = ElectResult(Outcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED), None)
        for _ in range(self.config.elect_master_max_retry_count):
            result = await self.elect_master(
                broker_name, broker_id=None, designate=False, trigger="master inactive"
            )
            if result.outcome.code != ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH:
                break
        return result

    async def notify_role_changed(self, view: GroupView) -> None:
        """Oneway NOTIFY_BROKER_ROLE_CHANGED to every active broker of the group."""
        header = wire.NotifyBrokerRoleChangedRequestHeader(
            master_address=view.master_address,
            master_epoch=view.master_epoch,
            sync_state_set_epoch=view.sync_state_set_epoch,
            master_broker_id=view.master_broker_id,
        )
        body = view.sync_state().to_json()
        for broker_id, addr in sorted(view.broker_addrs.items()):
            if not self.alive(view.cluster_name, view.broker_name, broker_id):
                continue
            request = RemotingCommand.request(
                RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header.to_ext_fields(), body
            )
            try:
                await self._notifier.invoke_oneway(addr, request)
            except (RocketQError, OSError) as exc:
                log.warning("could not tell broker %s (%s) about its new role: %s", broker_id, addr, exc)

    # -- admin ---------------------------------------------------------------------------------

    async def clean_broker_data(self, hdr: wire.CleanControllerBrokerDataRequestHeader) -> Outcome:
        ids = hdr.broker_ids()
        async with self._write_lock:
            barrier = await self.raft.barrier()
            if not barrier.ok:
                return barrier
            with self.raft.read() as table:
                group = table.group(hdr.broker_name)
                cluster = group.cluster_name if group else (hdr.cluster_name or "")
                planned, event = table.plan_clean(
                    hdr.broker_name,
                    ids,
                    clean_living=hdr.is_clean_living_broker,
                    alive=functools.partial(self.alive, cluster, hdr.broker_name),
                )
            if event is None:
                return planned
            return await self.raft.submit(event)

    def sync_state_data(self, broker_names: tuple[str, ...]) -> wire.BrokerReplicasInfo:
        with self.raft.read() as table:
            clusters = {name: g.cluster_name for name, g in table.groups.items()}

            def alive(name: str, broker_id: int) -> bool:
                return self.alive(clusters.get(name, ""), name, broker_id)

            return wire.BrokerReplicasInfo(table.sync_state_data(broker_names, alive))

    def metadata(self) -> wire.ControllerMetadata:
        status = self.raft.status()
        leader = status.leader
        with self.raft.read() as table:
            groups = {
                name: g.replicas_info(functools.partial(self.alive, g.cluster_name, name))
                for name, g in table.groups.items()
            }
        return wire.ControllerMetadata(
            group=self.config.controller_dleger_group,
            controller_leader_id=None if leader is None else leader.node_id,
            controller_leader_address=None if leader is None else leader.address,
            is_leader=status.state == "leader",
            peers=self.config.peers_spec(),
            raft_state=status.state,
            commit_index=status.commit_index,
            last_applied=status.last_applied,
            has_quorum=status.has_quorum,
            groups=groups,
        )
