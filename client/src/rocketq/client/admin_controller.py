"""Controller administration (RocketMQ 5 controller mode): metadata, SyncStateSets, manual
elections, metadata cleaning, and the brokers' epoch caches.

:class:`AsyncControllerAdmin` is what ``mqadmin getControllerMetaData``, ``getSyncStateSet``,
``electMaster``, ``cleanBrokerMetadata`` and ``getBrokerEpoch`` run (Java's DefaultMQAdminExt
methods of the same names).  The controller requests go to one of the given controller addresses
(``"a:9878;b:9878"``); a follower answers CONTROLLER_NOT_LEADER with the leader's address in the
``controllerLeaderAddress`` header field, and the request is made again there (each address at
most once), so any controller of the cluster may be named.  A controller that does not answer is
passed over for the next one.  Broker answers other than SUCCESS raise ``MQBrokerError`` with the
wire code and remark (CONTROLLER_ELECT_MASTER_FAILED, CONTROLLER_BROKER_METADATA_NOT_EXIST...).
``getBrokerEpoch`` asks brokers, not controllers: GET_BROKER_EPOCH_CACHE (1007) to each replica.
Results are the frozen dataclasses of :mod:`rocketq.client.remoting.controller`, plus
:class:`ElectMasterResult`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rocketq.client.admin_config import parse_properties_body, properties_body
from rocketq.client.api import MQClientAPI
from rocketq.client.errors import MQBrokerError, MQClientError, ProtocolError, RemotingError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ControllerMetadata,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    broker_names_to_json,
)

__all__ = ["AsyncControllerAdmin", "ElectMasterResult", "parse_controller_addrs"]


@dataclass(frozen=True, slots=True)
class ElectMasterResult:
    """The answer to CONTROLLER_ELECT_MASTER: the group's master, epochs, members and set."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None
    broker_member_group: BrokerMemberGroup | None
    sync_state_set: frozenset[int]


def parse_controller_addrs(addrs: str | Sequence[str]) -> list[str]:
    """``"a:9878;b:9878"`` (or a list) -> addresses; MQClientError when there is none."""
    items = addrs.split(";") if isinstance(addrs, str) else list(addrs)
    result = [a.strip() for a in items if a and a.strip()]
    if not result or any(":" not in a for a in result):
        raise MQClientError(
            f"bad controller address list {addrs!r}: give host:port, several separated by ';'"
        )
    return result


class AsyncControllerAdmin:
    """Controller admin requests over an existing :class:`MQClientAPI` (its connections)."""

    def __init__(self, api: MQClientAPI) -> None:
        self.api = api

    async def invoke_controller(
        self, controller_addrs: str | Sequence[str], cmd: RemotingCommand, timeout_ms: int | None = None
    ) -> tuple[str, RemotingCommand]:
        """Send ``cmd`` to the controller leader: (the leader's address, its SUCCESS answer)."""
        queue = parse_controller_addrs(controller_addrs)
        tried: set[str] = set()
        unreachable: list[str] = []
        refusal: MQBrokerError | None = None
        last: Exception | None = None
        while queue:
            addr = queue.pop(0)
            if addr in tried:
                continue
            tried.add(addr)
            try:
                response = await self.api.invoke(addr, _copy(cmd), timeout_ms)
            except RemotingError as exc:
                last = exc
                unreachable.append(addr)
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                leader = GetMetaDataResponseHeader.from_ext_fields(response.ext_fields)
                if leader.controller_leader_address and leader.controller_leader_address not in tried:
                    queue.insert(0, leader.controller_leader_address)
                refusal = MQBrokerError.for_code(response.code, response.remark, addr)
                continue
            return addr, self.api.check(response, addr)
        if refusal is not None:  # a controller's own answer says more than a refused connection
            if unreachable:
                refusal.add_note(f"controllers not answering: {', '.join(unreachable)}")
            raise refusal
        assert last is not None
        raise last

    async def get_controller_config(self, controller_addrs: str | Sequence[str]) -> dict[str, dict[str, str]]:
        """GET_CONTROLLER_CONFIG (1010) of each controller of the list: address -> its config."""
        result: dict[str, dict[str, str]] = {}
        for addr in parse_controller_addrs(controller_addrs):
            cmd = RemotingCommand.request(RequestCode.GET_CONTROLLER_CONFIG)
            response = self.api.check(await self.api.invoke(addr, cmd), addr)
            result[addr] = parse_properties_body(response.body)
        return result

    async def update_controller_config(
        self, controller_addrs: str | Sequence[str], props: Mapping[str, str]
    ) -> list[str]:
        """UPDATE_CONTROLLER_CONFIG (1009) on each controller of the list, in order; the addresses.
        Raises the first refusal (MQBrokerError naming the key) or unreachable controller."""
        body = properties_body(props)
        addrs = parse_controller_addrs(controller_addrs)
        for addr in addrs:
            cmd = RemotingCommand.request(RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)
            self.api.check(await self.api.invoke(addr, cmd), addr)
        return addrs

    async def get_controller_metadata(
        self, controller_addr: str, timeout_ms: int | None = None
    ) -> ControllerMetadata:
        """CONTROLLER_GET_METADATA_INFO (1005) of one controller, leader or not (no redirect)."""
        cmd = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
        addr = parse_controller_addrs(controller_addr)[0]
        response = self.api.check(await self.api.invoke(addr, cmd, timeout_ms), addr)
        if response.body:
            return ControllerMetadata.from_json(response.body)
        header = GetMetaDataResponseHeader.from_ext_fields(response.ext_fields)
        return ControllerMetadata(
            group=header.group or "",
            controller_leader_id=header.controller_leader_id,
            controller_leader_address=header.controller_leader_address,
            is_leader=header.is_leader,
            peers=header.peers or "",
        )

    async def get_sync_state_data(
        self, controller_addrs: str | Sequence[str], broker_names: Iterable[str]
    ) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006): master, epochs and (not) in-sync replicas."""
        body = broker_names_to_json(sorted(set(broker_names)))
        cmd = RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, None, body)
        _, response = await self.invoke_controller(controller_addrs, cmd)
        return BrokerReplicasInfo.from_json(response.body)

    async def elect_master(
        self, controller_addrs: str | Sequence[str], cluster: str, broker_name: str, broker_id: int
    ) -> ElectMasterResult:
        """CONTROLLER_ELECT_MASTER (1002) naming ``broker_id`` (``designateElect``): a manual
        switch-over; the controller refuses a broker that is not alive or not in the SyncStateSet
        (unless unclean elections are enabled)."""
        header = ElectMasterRequestHeader(
            cluster_name=cluster,
            broker_name=broker_name,
            broker_id=broker_id,
            designate_elect=True,
            invoke_time=int(time.time() * 1000),
        )
        cmd = RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, header.to_ext_fields())
        _, response = await self.invoke_controller(controller_addrs, cmd)
        answer = ElectMasterResponseHeader.from_ext_fields(response.ext_fields)
        body = ElectMasterResponseBody.from_json(response.body) if response.body else None
        return ElectMasterResult(
            master_broker_id=answer.master_broker_id,
            master_address=answer.master_address,
            master_epoch=answer.master_epoch,
            sync_state_set_epoch=answer.sync_state_set_epoch,
            broker_member_group=body.broker_member_group if body else None,
            sync_state_set=body.sync_state_set if body else frozenset(),
        )

    async def clean_broker_metadata(
        self,
        controller_addrs: str | Sequence[str],
        broker_name: str,
        *,
        cluster: str | None = None,
        broker_ids: Iterable[int] = (),
        clean_living_broker: bool = False,
    ) -> None:
        """CLEAN_BROKER_DATA (1011): forget ``broker_ids`` of a group (all of it when empty)."""
        ids = ";".join(str(i) for i in sorted(set(broker_ids)))
        header = CleanControllerBrokerDataRequestHeader(
            cluster_name=cluster,
            broker_name=broker_name,
            broker_controller_ids_to_clean=ids or None,
            is_clean_living_broker=clean_living_broker,
            invoke_time=int(time.time() * 1000),
        )
        cmd = RemotingCommand.request(RequestCode.CLEAN_BROKER_DATA, header.to_ext_fields())
        await self.invoke_controller(controller_addrs, cmd)

    async def get_broker_epoch(self, broker_addr: str, timeout_ms: int | None = None) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE (1007) of one broker: its (epoch, startOffset, endOffset) list."""
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE)
        response = self.api.check(await self.api.invoke(broker_addr, cmd, timeout_ms), broker_addr)
        try:
            return EpochEntryCache.from_json(response.body)
        except ProtocolError as exc:
            raise ProtocolError(f"the epoch cache of {broker_addr} does not decode: {exc}") from exc


def _copy(cmd: RemotingCommand) -> RemotingCommand:
    """A fresh request (new opaque) with the same code, fields and body, for a redirect."""
    return RemotingCommand.request(cmd.code, dict(cmd.ext_fields), cmd.body)
