"""The requests a controller-mode broker sends, one function each: build, send, read the answer.

Each function builds one request's header from plain values, sends it through the
:class:`ControllerClient` and turns the answer into a :class:`ReplicaInfo`, a status enum or a
frozen result, so that the replicas manager deals only in its own state: registration (the broker
id from ``brokerIdentity.json`` or GET_NEXT_BROKER_ID + APPLY_BROKER_ID, then
CONTROLLER_REGISTER_BROKER), the heartbeat and whether the leader accepted it, GET_REPLICA_INFO,
CONTROLLER_ELECT_MASTER and CONTROLLER_ALTER_SYNC_STATE_SET.  Nothing here keeps state.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from dataclasses import dataclass

from rocketq.broker.config import BrokerConfig
from rocketq.broker.controller_mode.controller_client import ControllerClient, ControllerUnavailable
from rocketq.broker.controller_mode.identity import BrokerIdentity, load_identity, persist_identity
from rocketq.broker.errors import BrokerError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    SyncStateSet,
    register_check_code,
)

__all__ = [
    "AlterOutcome",
    "AlterStatus",
    "ReplicaInfo",
    "ReplicaLookup",
    "alter_sync_state_set",
    "elect_master",
    "get_replica_info",
    "register_broker",
    "send_heartbeat",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """What the controller says about this broker's group."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


class ReplicaLookup(enum.Enum):
    """GET_REPLICA_INFO gave no replica info."""

    UNAVAILABLE = "UNAVAILABLE"  # no controller answered, or it answered an error (logged)
    NOT_REGISTERED = "NOT_REGISTERED"  # the controller does not know this broker: register again


class AlterStatus(enum.Enum):
    APPROVED = "APPROVED"
    FENCED = "FENCED"  # the controller knows a newer master epoch
    REFUSED = "REFUSED"  # refused or unanswered (logged)


@dataclass(frozen=True, slots=True)
class AlterOutcome:
    """The controller's answer to ALTER_SYNC_STATE_SET; the set and epoch only when approved."""

    status: AlterStatus
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0


def now_ms() -> int:
    return int(time.time() * 1000)


async def _ok(
    controller: ControllerClient, code: int, ext: dict[str, str], body: bytes = b""
) -> RemotingCommand:
    answer = await controller.invoke(code, ext, body)
    if answer.code != ResponseCode.SUCCESS:
        raise BrokerError(f"controller answered request {code} with code {answer.code}: {answer.remark}")
    return answer


def _replica_info(
    master_broker_id: int | None,
    master_address: str | None,
    master_epoch: int | None,
    sss_epoch: int | None,
    body: bytes,
) -> ReplicaInfo:
    sss = SyncStateSet.from_json(body) if body else SyncStateSet(frozenset(), 0)
    return ReplicaInfo(
        master_broker_id,
        master_address,
        master_epoch or 0,
        sss.sync_state_set,
        sss_epoch or sss.sync_state_set_epoch,
    )


async def register_broker(
    controller: ControllerClient, cfg: BrokerConfig, broker_addr: str
) -> tuple[int, ReplicaInfo]:
    """This broker's id (applied for the first time) and the group's replica info."""
    identity = await asyncio.to_thread(load_identity, cfg.store_path_root_dir)
    if identity is None or (identity.cluster_name, identity.broker_name) != (
        cfg.broker_cluster_name,
        cfg.broker_name,
    ):
        identity = await _apply_broker_id(controller, cfg, broker_addr)
    broker_id = identity.broker_id
    header = RegisterBrokerToControllerRequestHeader(
        cluster_name=cfg.broker_cluster_name,
        broker_name=cfg.broker_name,
        broker_id=broker_id,
        broker_address=broker_addr,
        invoke_time=now_ms(),
    )
    answer = await _ok(controller, RequestCode.CONTROLLER_REGISTER_BROKER, header.to_ext_fields())
    reply = RegisterBrokerToControllerResponseHeader.from_ext_fields(answer.ext_fields)
    log.info(
        "registered with the controller as broker id %d of %s (master %s, epoch %s)",
        broker_id,
        cfg.broker_name,
        reply.master_broker_id,
        reply.master_epoch,
    )
    info = _replica_info(
        reply.master_broker_id,
        reply.master_address,
        reply.master_epoch,
        reply.sync_state_set_epoch,
        answer.body,
    )
    return broker_id, info


async def _apply_broker_id(
    controller: ControllerClient, cfg: BrokerConfig, broker_addr: str
) -> BrokerIdentity:
    names = GetNextBrokerIdRequestHeader(cluster_name=cfg.broker_cluster_name, broker_name=cfg.broker_name)
    answer = await _ok(controller, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, names.to_ext_fields())
    next_id = GetNextBrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
    if next_id is None:
        raise BrokerError("the controller named no next broker id")
    apply = ApplyBrokerIdRequestHeader(
        cluster_name=cfg.broker_cluster_name,
        broker_name=cfg.broker_name,
        applied_broker_id=next_id,
        register_check_code=register_check_code(broker_addr, now_ms()),
    )
    await _ok(controller, RequestCode.CONTROLLER_APPLY_BROKER_ID, apply.to_ext_fields())
    identity = BrokerIdentity(cfg.broker_cluster_name, cfg.broker_name, next_id)
    await asyncio.to_thread(persist_identity, cfg.store_path_root_dir, identity)
    return identity


async def send_heartbeat(controller: ControllerClient, header: BrokerHeartbeatRequestHeader) -> bool:
    """Whether the controller leader accepted the heartbeat (only its acceptance extends the lease)."""
    # Every controller tracks liveness on its own (it is not replicated), so a controller that
    # becomes leader already knows this broker.
    answers = await controller.broadcast(RequestCode.BROKER_HEARTBEAT, header.to_ext_fields())
    if not answers:
        log.warning("heartbeat: no controller of %s answered", controller.addrs)
        return False
    leader = controller.leader
    if leader is None or leader not in answers:
        # a leader-only request finds the leader (followers answer CONTROLLER_NOT_LEADER)
        probe = GetReplicaInfoRequestHeader(broker_name=header.broker_name)
        with contextlib.suppress(ControllerUnavailable):
            await controller.invoke(RequestCode.CONTROLLER_GET_REPLICA_INFO, probe.to_ext_fields())
        leader = controller.leader
    answer = answers.get(leader) if leader is not None else None
    if answer is not None and answer.code == ResponseCode.SUCCESS:
        return True
    why = "no leader answered" if answer is None else f"code {answer.code} {answer.remark}"
    log.warning("the controller leader did not accept the heartbeat: %s", why)
    return False


async def get_replica_info(controller: ControllerClient, broker_name: str) -> ReplicaInfo | ReplicaLookup:
    header = GetReplicaInfoRequestHeader(broker_name=broker_name)
    try:
        answer = await controller.invoke(RequestCode.CONTROLLER_GET_REPLICA_INFO, header.to_ext_fields())
    except ControllerUnavailable as exc:
        log.warning("cannot read the replica info: %s", exc)
        return ReplicaLookup.UNAVAILABLE
    if answer.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
        return ReplicaLookup.NOT_REGISTERED
    if answer.code != ResponseCode.SUCCESS:
        log.warning("GET_REPLICA_INFO answered %s: %s", answer.code, answer.remark)
        return ReplicaLookup.UNAVAILABLE
    reply = GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields)
    return _replica_info(
        reply.master_broker_id,
        reply.master_address,
        reply.master_epoch,
        reply.sync_state_set_epoch,
        answer.body,
    )


async def elect_master(controller: ControllerClient, cfg: BrokerConfig, broker_id: int) -> ReplicaInfo | None:
    """The elected master's replica info; None while no master could be elected (logged)."""
    header = ElectMasterRequestHeader(
        cluster_name=cfg.broker_cluster_name, broker_name=cfg.broker_name, broker_id=broker_id
    )
    try:
        answer = await controller.invoke(RequestCode.CONTROLLER_ELECT_MASTER, header.to_ext_fields())
    except ControllerUnavailable as exc:
        log.warning("cannot ask for an election: %s", exc)
        return None
    if answer.code != ResponseCode.SUCCESS:
        log.info("no master elected yet for %s: code %s %s", cfg.broker_name, answer.code, answer.remark)
        return None
    reply = ElectMasterResponseHeader.from_ext_fields(answer.ext_fields)
    body = ElectMasterResponseBody.from_json(answer.body) if answer.body else None
    if reply.master_broker_id is None or not reply.master_address:
        return None
    return ReplicaInfo(
        reply.master_broker_id,
        reply.master_address,
        reply.master_epoch or 0,
        body.sync_state_set if body else frozenset(),
        reply.sync_state_set_epoch or 0,
    )


async def alter_sync_state_set(
    controller: ControllerClient,
    broker_name: str,
    *,
    master_broker_id: int,
    master_epoch: int,
    wanted: frozenset[int],
    sync_state_set_epoch: int,
) -> AlterOutcome:
    """Asks the controller to make ``wanted`` the SyncStateSet; the approved set when it does."""
    header = AlterSyncStateSetRequestHeader(
        broker_name=broker_name,
        master_broker_id=master_broker_id,
        master_epoch=master_epoch,
        invoke_time=now_ms(),
    )
    body = SyncStateSet(wanted, sync_state_set_epoch).to_json()
    try:
        answer = await controller.invoke(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header.to_ext_fields(), body
        )
    except ControllerUnavailable as exc:
        log.warning("cannot report the SyncStateSet %s: %s", sorted(wanted), exc)
        return AlterOutcome(AlterStatus.REFUSED)
    if answer.code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH:
        return AlterOutcome(AlterStatus.FENCED)
    if answer.code != ResponseCode.SUCCESS:
        log.warning(
            "the controller refused SyncStateSet %s: code %s %s", sorted(wanted), answer.code, answer.remark
        )
        return AlterOutcome(AlterStatus.REFUSED)
    new_epoch = AlterSyncStateSetResponseHeader.from_ext_fields(answer.ext_fields).new_sync_state_set_epoch
    if answer.body:
        approved = SyncStateSet.from_json(answer.body)
        wanted, new_epoch = approved.sync_state_set, approved.sync_state_set_epoch or new_epoch
    return AlterOutcome(AlterStatus.APPROVED, wanted, new_epoch or 0)
