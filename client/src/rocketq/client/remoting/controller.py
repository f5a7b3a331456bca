"""Controller-mode (RIP-44) wire vocabulary: the typed headers and JSON bodies of codes 904 and 1001-1013.

Brokers in controller mode talk to the controller with BROKER_HEARTBEAT (904) and the
``CONTROLLER_*`` request codes of :mod:`rocketq.client.remoting.codes`; the controller tells them
about a new master with NOTIFY_BROKER_ROLE_CHANGED (1008) and admins read the broker's epoch
cache with GET_BROKER_EPOCH_CACHE (1007).  This module holds the header classes (Java field names
of RocketMQ 5's ``header/controller`` package) and the JSON bodies (``SyncStateSet``,
``ElectMasterResponseBody``, ``BrokerMemberGroup``, ``EpochEntryCache``, ``BrokerReplicasInfo``)
with ``to_obj``/``from_obj`` and ``to_json``/``from_json``; nothing else spells these names.
Bodies are read with the lenient fastjson reader (Java writes ``Map<Long, String>`` with bare
numeric keys) and written as standard JSON, which fastjson reads back.  docs/failover.md
("Wire protocol") lists every exchange and where rocketq goes beyond Java.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.headers import CommandHeader, command_header, jbool, jint, jlong, jstr
from rocketq.client.remoting.lenient_json import dumps, loads

__all__ = [
    "FIRST_BROKER_CONTROLLER_ID",
    "INFINITE_END_OFFSET",
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "ApplyBrokerIdResponseHeader",
    "BrokerHeartbeatRequestHeader",
    "BrokerMemberGroup",
    "BrokerReplicasInfo",
    "CleanControllerBrokerDataRequestHeader",
    "ControllerMetadata",
    "ElectMasterRequestHeader",
    "ElectMasterResponseBody",
    "ElectMasterResponseHeader",
    "EpochEntry",
    "EpochEntryCache",
    "GetMetaDataResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader",
    "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader",
    "NotifyBrokerRoleChangedRequestHeader",
    "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
    "ReplicaIdentity",
    "ReplicasInfo",
    "SyncStateSet",
    "broker_names_from_json",
    "broker_names_to_json",
    "register_check_code",
]

FIRST_BROKER_CONTROLLER_ID = 1
"""The first broker id a controller hands out (Java ``MixAll.FIRST_BROKER_CONTROLLER_ID``)."""
INFINITE_END_OFFSET = (1 << 63) - 1
"""``EpochEntry.endOffset`` of the current (open) epoch: Java's ``Long.MAX_VALUE``."""


# --------------------------------------------------------------------------- headers


@command_header
class BrokerHeartbeatRequestHeader(CommandHeader):
    """BROKER_HEARTBEAT (904), ``BrokerHeartbeatRequestHeader`` of 5.x ``header/namesrv``."""

    cluster_name: str = jstr("clusterName")
    broker_addr: str = jstr("brokerAddr")
    broker_name: str = jstr("brokerName")
    broker_id: int | None = jlong("brokerId", default=None)
    epoch: int | None = jint("epoch", default=None)
    max_offset: int | None = jlong("maxOffset", default=None)
    confirm_offset: int | None = jlong("confirmOffset", default=None)
    heartbeat_timeout_ms: int | None = jlong("heartbeatTimeoutMills", default=None)
    election_priority: int | None = jint("electionPriority", default=None)


@command_header
class AlterSyncStateSetRequestHeader(CommandHeader):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001); the body is the new :class:`SyncStateSet`."""

    broker_name: str = jstr("brokerName")
    master_broker_id: int = jlong("masterBrokerId")
    master_epoch: int = jint("masterEpoch")
    invoke_time: int | None = jlong("invokeTime", default=None)


@command_header
class AlterSyncStateSetResponseHeader(CommandHeader):
    new_sync_state_set_epoch: int = jint("newSyncStateSetEpoch", default=0)


@command_header
class ElectMasterRequestHeader(CommandHeader):
    """CONTROLLER_ELECT_MASTER (1002).

    A broker asks with its own id (``designateElect`` false: it becomes master only if the group
    never had one); an admin names the broker to elect with ``designateElect`` true; the
    controller's own trigger (master inactive) leaves ``brokerId`` at -1.
    """

    cluster_name: str = jstr("clusterName", default="")
    broker_name: str = jstr("brokerName", default="")
    broker_id: int = jlong("brokerId", default=-1)
    designate_elect: bool = jbool("designateElect", default=False)
    invoke_time: int | None = jlong("invokeTime", default=None)


@command_header
class ElectMasterResponseHeader(CommandHeader):
    """The answer to 1002; the body is an :class:`ElectMasterResponseBody`."""

    master_broker_id: int | None = jlong("masterBrokerId", default=None)
    master_address: str | None = jstr("masterAddress", default=None)
    master_epoch: int | None = jint("masterEpoch", default=None)
    sync_state_set_epoch: int | None = jint("syncStateSetEpoch", default=None)


@command_header
class GetNextBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""

    cluster_name: str = jstr("clusterName")
    broker_name: str = jstr("brokerName")


@command_header
class GetNextBrokerIdResponseHeader(CommandHeader):
    cluster_name: str | None = jstr("clusterName", default=None)
    broker_name: str | None = jstr("brokerName", default=None)
    next_broker_id: int | None = jlong("nextBrokerId", default=None)


@command_header
class ApplyBrokerIdRequestHeader(CommandHeader):
    """CONTROLLER_APPLY_BROKER_ID (1013): claim an id; see :func:`register_check_code`."""

    cluster_name: str = jstr("clusterName")
    broker_name: str = jstr("brokerName")
    applied_broker_id: int = jlong("appliedBrokerId")
    register_check_code: str = jstr("registerCheckCode")


@command_header
class ApplyBrokerIdResponseHeader(CommandHeader):
    cluster_name: str | None = jstr("clusterName", default=None)
    broker_name: str | None = jstr("brokerName", default=None)


@command_header
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    """CONTROLLER_REGISTER_BROKER (1003): a broker with an applied id comes online."""

    cluster_name: str = jstr("clusterName")
    broker_name: str = jstr("brokerName")
    broker_id: int = jlong("brokerId")
    broker_address: str = jstr("brokerAddress")
    invoke_time: int | None = jlong("invokeTime", default=None)


@command_header
class RegisterBrokerToControllerResponseHeader(CommandHeader):
    """The answer to 1003: the alive master, if any; the body is the :class:`SyncStateSet`."""

    cluster_name: str | None = jstr("clusterName", default=None)
    broker_name: str | None = jstr("brokerName", default=None)
    master_broker_id: int | None = jlong("masterBrokerId", default=None)
    master_address: str | None = jstr("masterAddress", default=None)
    master_epoch: int | None = jint("masterEpoch", default=None)
    sync_state_set_epoch: int | None = jint("syncStateSetEpoch", default=None)


@command_header
class GetReplicaInfoRequestHeader(CommandHeader):
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    broker_name: str = jstr("brokerName")


@command_header
class GetReplicaInfoResponseHeader(CommandHeader):
    """The answer to 1004; the body is the :class:`SyncStateSet`.

    rocketq also sends ``syncStateSetEpoch`` (Java carries it in the body only).
    """

    master_broker_id: int | None = jlong("masterBrokerId", default=None)
    master_address: str | None = jstr("masterAddress", default=None)
    master_epoch: int | None = jint("masterEpoch", default=None)
    sync_state_set_epoch: int | None = jint("syncStateSetEpoch", default=None)


@command_header
class GetMetaDataResponseHeader(CommandHeader):
    """The answer to CONTROLLER_GET_METADATA_INFO (1005), and to any request a follower refuses.

    ``controllerLeaderAddress`` is the leader's controller (remoting) address, not its Raft port.
    """

    group: str | None = jstr("group", default=None)
    controller_leader_id: str | None = jstr("controllerLeaderId", default=None)
    controller_leader_address: str | None = jstr("controllerLeaderAddress", default=None)
    is_leader: bool = jbool("isLeader", default=False)
    peers: str | None = jstr("peers", default=None)


@command_header
class CleanControllerBrokerDataRequestHeader(CommandHeader):
    """CLEAN_BROKER_DATA (1011); ``brokerControllerIdsToClean`` is ``"1;2"`` (empty: the group)."""

    cluster_name: str | None = jstr("clusterName", default=None)
    broker_name: str = jstr("brokerName")
    broker_controller_ids_to_clean: str | None = jstr("brokerControllerIdsToClean", default=None)
    is_clean_living_broker: bool = jbool("isCleanLivingBroker", default=False)
    invoke_time: int | None = jlong("invokeTime", default=None)

    def broker_ids(self) -> frozenset[int]:
        """The ids to clean; ProtocolError when the list is not ``;``-separated integers."""
        raw = (self.broker_controller_ids_to_clean or "").strip()
        try:
            return frozenset(int(part) for part in raw.split(";") if part.strip())
        except ValueError as exc:
            raise ProtocolError(f"brokerControllerIdsToClean is not a ';' list of ids: {raw!r}") from exc


@command_header
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """NOTIFY_BROKER_ROLE_CHANGED (1008), controller to broker; the body is the :class:`SyncStateSet`."""

    master_address: str | None = jstr("masterAddress", default=None)
    master_epoch: int | None = jint("masterEpoch", default=None)
    sync_state_set_epoch: int | None = jint("syncStateSetEpoch", default=None)
    master_broker_id: int | None = jlong("masterBrokerId", default=None)


def register_check_code(broker_address: str, timestamp_ms: int) -> str:
    """The ``registerCheckCode`` of APPLY_BROKER_ID: ``address;timestamp`` as in Java."""
    return f"{broker_address};{timestamp_ms}"


# --------------------------------------------------------------------------- bodies


def _parse(body: bytes | str, what: str) -> Any:
    try:
        return loads(body)
    except ValueError as exc:
        raise ProtocolError(f"the {what} body is not JSON: {exc}") from exc


def _obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProtocolError(f"the {what} is not a JSON object: {str(value)[:200]}")
    return value


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def _ids(value: Any, what: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise ProtocolError(f"{what} is not a JSON array of broker ids: {str(value)[:200]}")
    try:
        return frozenset(int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{what} holds a non-integer broker id: {str(value)[:200]}") from exc


def _int(obj: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"field {key!r} is not an integer: {value!r}") from exc


def _opt_int(obj: Mapping[str, Any], key: str) -> int | None:
    return None if obj.get(key) is None else _int(obj, key)


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    """``SyncStateSet``: the in-sync replica ids of a group and the set's epoch."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    def to_obj(self) -> dict[str, Any]:
        return {"syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> SyncStateSet:
        return cls(
            sync_state_set=_ids(obj.get("syncStateSet"), "syncStateSet"),
            sync_state_set_epoch=_int(obj, "syncStateSetEpoch"),
        )

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, body: bytes | str) -> SyncStateSet:
        return cls.from_obj(_obj(_parse(body, "SyncStateSet"), "SyncStateSet body"))


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """``BrokerMemberGroup``: the replicas of one group, ``{brokerId: address}``."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        addrs = {str(k): v for k, v in sorted(self.broker_addrs.items())}
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": addrs}

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> BrokerMemberGroup:
        raw = _obj(_or_empty(obj.get("brokerAddrs")), "brokerAddrs")
        try:
            addrs = {int(k): str(v) for k, v in raw.items()}
        except ValueError as exc:
            raise ProtocolError(f"brokerAddrs has a non-integer broker id: {dict(raw)!r:.200}") from exc
        return cls(
            cluster=str(obj.get("cluster") or ""),
            broker_name=str(obj.get("brokerName") or ""),
            broker_addrs=addrs,
        )


@dataclass(frozen=True, slots=True)
class ElectMasterResponseBody:
    """``ElectMasterResponseBody``: the group's members and the new SyncStateSet."""

    broker_member_group: BrokerMemberGroup | None
    sync_state_set: frozenset[int]

    def to_obj(self) -> dict[str, Any]:
        group = None if self.broker_member_group is None else self.broker_member_group.to_obj()
        return {"brokerMemberGroup": group, "syncStateSet": sorted(self.sync_state_set)}

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> ElectMasterResponseBody:
        group = obj.get("brokerMemberGroup")
        return cls(
            broker_member_group=None if group is None else BrokerMemberGroup.from_obj(_obj(group, "group")),
            sync_state_set=_ids(obj.get("syncStateSet"), "syncStateSet"),
        )

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    @classmethod
    def from_json(cls, body: bytes | str) -> ElectMasterResponseBody:
        return cls.from_obj(_obj(_parse(body, "ElectMasterResponseBody"), "ElectMasterResponseBody"))


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """``EpochEntry``: the CommitLog range ``[start_offset, end_offset)`` written under ``epoch``."""

    epoch: int
    start_offset: int
    end_offset: int = INFINITE_END_OFFSET

    def to_obj(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> EpochEntry:
        return cls(
            epoch=_int(obj, "epoch"),
            start_offset=_int(obj, "startOffset"),
            end_offset=_int(obj, "endOffset", INFINITE_END_OFFSET),
        )


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    """``EpochEntryCache``: the answer to GET_BROKER_EPOCH_CACHE (1007), sent by a broker."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: tuple[EpochEntry, ...]
    max_offset: int

    def to_json(self) -> bytes:
        return dumps(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "brokerId": self.broker_id,
                "epochList": [e.to_obj() for e in self.epoch_list],
                "maxOffset": self.max_offset,
            }
        )

    @classmethod
    def from_json(cls, body: bytes | str) -> EpochEntryCache:
        obj = _obj(_parse(body, "EpochEntryCache"), "EpochEntryCache body")
        entries = obj.get("epochList")
        entries = [] if entries is None else entries
        if not isinstance(entries, list):
            raise ProtocolError(f"epochList is not a JSON array: {str(entries)[:200]}")
        return cls(
            cluster_name=str(obj.get("clusterName") or ""),
            broker_name=str(obj.get("brokerName") or ""),
            broker_id=_int(obj, "brokerId"),
            epoch_list=tuple(EpochEntry.from_obj(_obj(e, "epoch entry")) for e in entries),
            max_offset=_int(obj, "maxOffset"),
        )


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """``BrokerReplicasInfo.ReplicaIdentity``: one replica and whether it heartbeats."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool

    def to_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "brokerAddress": self.broker_address,
            "alive": self.alive,
        }

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> ReplicaIdentity:
        return cls(
            broker_name=str(obj.get("brokerName") or ""),
            broker_id=_int(obj, "brokerId"),
            broker_address=str(obj.get("brokerAddress") or ""),
            alive=bool(obj.get("alive", False)),
        )


@dataclass(frozen=True, slots=True)
class ReplicasInfo:
    """``BrokerReplicasInfo.ReplicasInfo``: one group's master, epochs and replicas."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...]
    not_in_sync_replicas: tuple[ReplicaIdentity, ...]

    def to_obj(self) -> dict[str, Any]:
        return {
            "masterBrokerId": self.master_broker_id,
            "masterAddress": self.master_address,
            "masterEpoch": self.master_epoch,
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "inSyncReplicas": [r.to_obj() for r in self.in_sync_replicas],
            "notInSyncReplicas": [r.to_obj() for r in self.not_in_sync_replicas],
        }

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> ReplicasInfo:
        return cls(
            master_broker_id=_opt_int(obj, "masterBrokerId"),
            master_address=None if obj.get("masterAddress") is None else str(obj["masterAddress"]),
            master_epoch=_int(obj, "masterEpoch"),
            sync_state_set_epoch=_int(obj, "syncStateSetEpoch"),
            in_sync_replicas=_replicas(obj.get("inSyncReplicas")),
            not_in_sync_replicas=_replicas(obj.get("notInSyncReplicas")),
        )


def _replicas(value: Any) -> tuple[ReplicaIdentity, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ProtocolError(f"a replica list is not a JSON array: {str(value)[:200]}")
    return tuple(ReplicaIdentity.from_obj(_obj(v, "replica")) for v in value)


@dataclass(frozen=True, slots=True)
class BrokerReplicasInfo:
    """``BrokerReplicasInfo``: the answer to CONTROLLER_GET_SYNC_STATE_DATA (1006)."""

    replicas_info_table: Mapping[str, ReplicasInfo]

    def to_json(self) -> bytes:
        table = {name: info.to_obj() for name, info in self.replicas_info_table.items()}
        return dumps({"replicasInfoTable": table})

    @classmethod
    def from_json(cls, body: bytes | str) -> BrokerReplicasInfo:
        obj = _obj(_parse(body, "BrokerReplicasInfo"), "BrokerReplicasInfo body")
        table = _obj(_or_empty(obj.get("replicasInfoTable")), "replicasInfoTable")
        return cls({str(k): ReplicasInfo.from_obj(_obj(v, "ReplicasInfo")) for k, v in table.items()})


def broker_names_to_json(broker_names: Iterable[str]) -> bytes:
    """The request body of 1006: a JSON array of broker names."""
    return dumps(list(broker_names))


def broker_names_from_json(body: bytes | str) -> tuple[str, ...]:
    value = _parse(body, "broker name list")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"the 1006 request body is not a JSON array of names: {str(value)[:200]}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class ControllerMetadata:
    """rocketq's JSON body of 1005 (Java sends the header only): the node's view of the cluster.

    The Java fields repeat :class:`GetMetaDataResponseHeader`; ``raftState``, ``commitIndex``,
    ``lastApplied``, ``hasQuorum`` and ``groups`` (the node's replicated copy of every group,
    readable on followers too) are rocketq additions.
    """

    group: str
    controller_leader_id: str | None
    controller_leader_address: str | None
    is_leader: bool
    peers: str
    raft_state: str = "follower"
    commit_index: int = 0
    last_applied: int = 0
    has_quorum: bool = False
    groups: Mapping[str, ReplicasInfo] = field(default_factory=dict)

    def header(self) -> GetMetaDataResponseHeader:
        return GetMetaDataResponseHeader(
            group=self.group,
            controller_leader_id=self.controller_leader_id,
            controller_leader_address=self.controller_leader_address,
            is_leader=self.is_leader,
            peers=self.peers,
        )

    def to_json(self) -> bytes:
        return dumps(
            {
                "group": self.group,
                "controllerLeaderId": self.controller_leader_id,
                "controllerLeaderAddress": self.controller_leader_address,
                "isLeader": self.is_leader,
                "peers": self.peers,
                "raftState": self.raft_state,
                "commitIndex": self.commit_index,
                "lastApplied": self.last_applied,
                "hasQuorum": self.has_quorum,
                "groups": {name: info.to_obj() for name, info in self.groups.items()},
            }
        )

    @classmethod
    def from_json(cls, body: bytes | str) -> ControllerMetadata:
        obj = _obj(_parse(body, "controller metadata"), "controller metadata body")
        groups = _obj(_or_empty(obj.get("groups")), "groups")
        leader_id = obj.get("controllerLeaderId")
        leader_addr = obj.get("controllerLeaderAddress")
        return cls(
            group=str(obj.get("group") or ""),
            controller_leader_id=None if leader_id is None else str(leader_id),
            controller_leader_address=None if leader_addr is None else str(leader_addr),
            is_leader=bool(obj.get("isLeader", False)),
            peers=str(obj.get("peers") or ""),
            raft_state=str(obj.get("raftState") or "follower"),
            commit_index=_int(obj, "commitIndex"),
            last_applied=_int(obj, "lastApplied"),
            has_quorum=bool(obj.get("hasQuorum", False)),
            groups={str(k): ReplicasInfo.from_obj(_obj(v, "ReplicasInfo")) for k, v in groups.items()},
        )
