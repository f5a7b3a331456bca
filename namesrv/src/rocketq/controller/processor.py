"""The controller's request processors: one method per request code (Java's ``ControllerRequestProcessor``).

Every handler decodes its typed header from :mod:`rocketq.client.remoting.controller`, calls the
:class:`~rocketq.controller.manager.ControllerManager` and encodes the answer.  BROKER_HEARTBEAT,
CONTROLLER_GET_METADATA_INFO and GET/UPDATE_CONTROLLER_CONFIG are answered by every controller
(an update changes that node only); everything else only by the Raft leader, as in RocketMQ.
A follower answers ``CONTROLLER_NOT_LEADER`` with the leader's id and address both in the remark
and, as a rocketq extension, in the ``controllerLeaderId`` / ``controllerLeaderAddress`` extFields
of a :class:`GetMetaDataResponseHeader`, so a client retries on the leader without another round
trip. A header or body that does not parse is answered ``CONTROLLER_INVALID_REQUEST`` with the
reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting import controller as wire
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.controller.config import config_to_properties
from rocketq.controller.config_update import apply_update
from rocketq.controller.manager import ControllerManager, GroupView
from rocketq.controller.state import Outcome
from rocketq.server import Channel, RemotingServer

__all__ = ["ControllerProcessor"]

log = logging.getLogger("rocketq.controller")

Handler = Callable[[RemotingCommand, Channel | None], Awaitable[RemotingCommand]]


def _answer(
    request: RemotingCommand, outcome: Outcome, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    return request.make_response(outcome.code, outcome.remark or None, ext, body)


class ControllerProcessor:
    """Answers the controller's request codes; ``register_all`` installs them on a server."""

    def __init__(self, manager: ControllerManager) -> None:
        self.manager = manager

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_controller_config,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_controller_config,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.leader_only(self.get_next_broker_id),
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.leader_only(self.apply_broker_id),
            RequestCode.CONTROLLER_REGISTER_BROKER: self.leader_only(self.register_broker),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.leader_only(self.get_replica_info),
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.leader_only(self.alter_sync_state_set),
            RequestCode.CONTROLLER_ELECT_MASTER: self.leader_only(self.elect_master),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.leader_only(self.get_sync_state_data),
            RequestCode.CLEAN_BROKER_DATA: self.leader_only(self.clean_broker_data),
        }

    def register_all(self, server: RemotingServer) -> None:
        for code, handler in self.handlers().items():
            server.register(code, _guarded(handler))

    def leader_only(self, handler: Handler) -> Handler:
        async def run(request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
            if not self.manager.is_leader:
                return self.not_leader(request)
            return await handler(request, channel)

        return run

    def not_leader(self, request: RemotingCommand) -> RemotingCommand:
        outcome = self.manager.raft.not_leader_outcome()
        return _answer(request, outcome, self.manager.metadata().header().to_ext_fields())

    def _answer_outcome(
        self, request: RemotingCommand, outcome: Outcome, ext: dict[str, str] | None = None
    ) -> RemotingCommand:
        if outcome.code == ResponseCode.CONTROLLER_NOT_LEADER:
            ext = self.manager.metadata().header().to_ext_fields()
        return _answer(request, outcome, ext)

    # -- any node ------------------------------------------------------------------------------

    async def broker_heartbeat(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        if hdr.broker_id is None:
            return request.make_response(
                ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId"
            )
        self.manager.heartbeats.on_heartbeat(hdr, channel)
        ext: dict[str, str] = {}
        if self.manager.is_leader:
            view = self.manager.view(hdr.broker_name)
            if view is not None:
                ext = _replica_header(view).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, "Heart beat success", ext)

    async def get_metadata_info(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        meta = self.manager.metadata()
        return request.make_response(
            ResponseCode.SUCCESS, None, meta.header().to_ext_fields(), meta.to_json()
        )

    async def get_controller_config(
        self, request: RemotingCommand, channel: Channel | None
    ) -> RemotingCommand:
        body = config_to_properties(self.manager.config).encode()
        return request.make_response(ResponseCode.SUCCESS, None, None, body)

    async def update_controller_config(
        self, request: RemotingCommand, channel: Channel | None
    ) -> RemotingCommand:
        response, self.manager.config = apply_update(request, self.manager.config)  # .config_update
        if response.code == ResponseCode.SUCCESS:
            log.info("controller config updated: %s", request.body.decode("utf-8", "replace").strip())
        return response

    # -- leader only ---------------------------------------------------------------------------

    async def get_next_broker_id(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.GetNextBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        answer = wire.GetNextBrokerIdResponseHeader(
            cluster_name=hdr.cluster_name,
            broker_name=hdr.broker_name,
            next_broker_id=self.manager.next_broker_id(hdr.broker_name),
        )
        return request.make_response(ResponseCode.SUCCESS, None, answer.to_ext_fields())

    async def apply_broker_id(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.ApplyBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        outcome = await self.manager.apply_broker_id(hdr)
        answer = wire.ApplyBrokerIdResponseHeader(cluster_name=hdr.cluster_name, broker_name=hdr.broker_name)
        return self._answer_outcome(request, outcome, answer.to_ext_fields())

    async def register_broker(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.RegisterBrokerToControllerRequestHeader.from_ext_fields(request.ext_fields)
        outcome, view = await self.manager.register_broker(hdr)
        if view is None:
            return self._answer_outcome(request, outcome)
        master = self.manager.master_if_alive(view)
        answer = wire.RegisterBrokerToControllerResponseHeader(
            cluster_name=hdr.cluster_name,
            broker_name=hdr.broker_name,
            master_broker_id=master,
            master_address=None if master is None else view.broker_addrs.get(master),
            master_epoch=None if master is None else view.master_epoch,
            sync_state_set_epoch=None if master is None else view.sync_state_set_epoch,
        )
        return _answer(request, outcome, answer.to_ext_fields(), view.sync_state().to_json())

    async def get_replica_info(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.GetReplicaInfoRequestHeader.from_ext_fields(request.ext_fields)
        view = self.manager.view(hdr.broker_name)
        if view is None:
            return request.make_response(
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed"
            )
        ext = _replica_header(view).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, None, ext, view.sync_state().to_json())

    async def alter_sync_state_set(
        self, request: RemotingCommand, channel: Channel | None
    ) -> RemotingCommand:
        hdr = wire.AlterSyncStateSetRequestHeader.from_ext_fields(request.ext_fields)
        body = wire.SyncStateSet.from_json(request.body)
        outcome, view = await self.manager.alter_sync_state_set(hdr, body)
        if not outcome.ok or view is None:
            return self._answer_outcome(request, outcome)
        answer = wire.AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=view.sync_state_set_epoch)
        return _answer(request, outcome, answer.to_ext_fields(), view.sync_state().to_json())

    async def elect_master(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.ElectMasterRequestHeader.from_ext_fields(request.ext_fields)
        broker_id = None if hdr.broker_id < 0 else hdr.broker_id
        trigger = "admin request" if hdr.designate_elect else "broker request"
        result = await self.manager.elect_master(
            hdr.broker_name, broker_id=broker_id, designate=hdr.designate_elect, trigger=trigger
        )
        view = result.group
        if view is None or result.outcome.code == ResponseCode.CONTROLLER_NOT_LEADER:
            return self._answer_outcome(request, result.outcome)
        answer = wire.ElectMasterResponseHeader(
            master_broker_id=view.master_broker_id,
            master_address=view.master_address,
            master_epoch=view.master_epoch,
            sync_state_set_epoch=view.sync_state_set_epoch,
        )
        members = wire.BrokerMemberGroup(view.cluster_name, view.broker_name, view.broker_addrs)
        body = wire.ElectMasterResponseBody(members, view.sync_state_set)
        return _answer(request, result.outcome, answer.to_ext_fields(), body.to_json())

    async def get_sync_state_data(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        names = wire.broker_names_from_json(request.body) if request.body else ()
        info = self.manager.sync_state_data(names)
        return request.make_response(ResponseCode.SUCCESS, None, None, info.to_json())

    async def clean_broker_data(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        hdr = wire.CleanControllerBrokerDataRequestHeader.from_ext_fields(request.ext_fields)
        outcome = await self.manager.clean_broker_data(hdr)
        if outcome.ok:
            log.warning(
                "cleaned controller metadata of %s ids %s", hdr.broker_name, sorted(hdr.broker_ids()) or "all"
            )
        return self._answer_outcome(request, outcome)


def _replica_header(view: GroupView) -> wire.GetReplicaInfoResponseHeader:
    return wire.GetReplicaInfoResponseHeader(
        master_broker_id=view.master_broker_id,
        master_address=view.master_address,
        master_epoch=view.master_epoch,
        sync_state_set_epoch=view.sync_state_set_epoch,
    )


def _guarded(handler: Handler) -> Callable[[RemotingCommand, Channel], Awaitable[RemotingCommand]]:
    async def processor(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            return await handler(request, channel)
        except ProtocolError as exc:
            log.warning("bad controller request code=%d: %s", request.code, exc)
            return request.make_response(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))

    return processor
