"""The GET_BROKER_HA_STATUS (907) body: a master's view of its slaves, or a slave's replication.

Modelled on RocketMQ 5's ``HARuntimeInfo`` JSON (``haConnectionInfo`` of
``HAConnectionRuntimeInfo``, ``haClientRuntimeInfo`` of ``HAClientRuntimeInfo``) with a few
rocketq fields (``brokerRole``, ``haListenPort``, ``lagMillis``, ``status``, ``statusDetail``);
docs/replication.md ("Admin API") lists them.  The broker writes it with :meth:`HAStatus.to_json`
and the admin client reads it with :meth:`HAStatus.from_json`: the field names live here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.lenient_json import dumps, loads

__all__ = ["HAClientInfo", "HAConnectionInfo", "HAStatus", "slave_lag"]


@dataclass(frozen=True, slots=True)
class HAConnectionInfo:
    """One slave connected to a master's HA port (Java 5's ``HAConnectionRuntimeInfo``)."""

    addr: str  # the slave's HA connection (IP and ephemeral port), not its remoting address
    slave_ack_offset: int
    diff: int  # bytes the slave is behind: masterCommitLogMaxOffset - slaveAckOffset
    in_sync: bool
    transfer_from_where: int
    transferred_byte_in_second: int
    lag_ms: int  # rocketq: time since the slave was last caught up (0 while diff == 0)
    last_ack_timestamp_ms: int
    last_caught_up_timestamp_ms: int

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> HAConnectionInfo:
        return cls(
            addr=str(obj.get("addr") or ""),
            slave_ack_offset=_int(obj, "slaveAckOffset"),
            diff=_int(obj, "diff"),
            in_sync=bool(obj.get("inSync", False)),
            transfer_from_where=_int(obj, "transferFromWhere"),
            transferred_byte_in_second=_int(obj, "transferredByteInSecond"),
            lag_ms=_int(obj, "lagMillis"),
            last_ack_timestamp_ms=_int(obj, "lastAckTimestamp"),
            last_caught_up_timestamp_ms=_int(obj, "lastCaughtUpTimestamp"),
        )

    def to_obj(self) -> dict[str, object]:
        return {
            "addr": self.addr,
            "slaveAckOffset": self.slave_ack_offset,
            "diff": self.diff,
            "inSync": self.in_sync,
            "transferFromWhere": self.transfer_from_where,
            "transferredByteInSecond": self.transferred_byte_in_second,
            "lagMillis": self.lag_ms,
            "lastAckTimestamp": self.last_ack_timestamp_ms,
            "lastCaughtUpTimestamp": self.last_caught_up_timestamp_ms,
        }

    @property
    def host(self) -> str:
        return self.addr.rpartition(":")[0]


@dataclass(frozen=True, slots=True)
class HAClientInfo:
    """A slave's replication client (Java 5's ``HAClientRuntimeInfo``)."""

    master_addr: str  # the master's HA address ("" while unknown)
    max_offset: int  # the slave's CommitLog max offset
    transferred_byte_in_second: int
    last_read_timestamp_ms: int
    last_write_timestamp_ms: int
    master_flush_offset: int
    activated: bool  # the HA connection is up
    status: str  # rocketq: NO_MASTER, CONNECTING, REPLICATING or DIVERGENT_REFUSED
    status_detail: str

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> HAClientInfo:
        return cls(
            master_addr=str(obj.get("masterAddr") or ""),
            max_offset=_int(obj, "maxOffset"),
            transferred_byte_in_second=_int(obj, "transferredByteInSecond"),
            last_read_timestamp_ms=_int(obj, "lastReadTimestamp"),
            last_write_timestamp_ms=_int(obj, "lastWriteTimestamp"),
            master_flush_offset=_int(obj, "masterFlushOffset"),
            activated=bool(obj.get("isActivated", obj.get("activated", False))),
            status=str(obj.get("status") or ""),
            status_detail=str(obj.get("statusDetail") or ""),
        )

    def to_obj(self) -> dict[str, object]:
        return {
            "masterAddr": self.master_addr,
            "maxOffset": self.max_offset,
            "transferredByteInSecond": self.transferred_byte_in_second,
            "lastReadTimestamp": self.last_read_timestamp_ms,
            "lastWriteTimestamp": self.last_write_timestamp_ms,
            "masterFlushOffset": self.master_flush_offset,
            "isActivated": self.activated,
            "status": self.status,
            "statusDetail": self.status_detail,
        }


@dataclass(frozen=True, slots=True)
class HAStatus:
    """The answer to GET_BROKER_HA_STATUS (907): a master's slaves, or a slave's replication."""

    master: bool
    broker_role: str  # ASYNC_MASTER, SYNC_MASTER or SLAVE, as the broker reports it
    ha_listen_port: int
    master_commit_log_max_offset: int
    in_sync_slave_nums: int
    connections: tuple[HAConnectionInfo, ...]
    client: HAClientInfo | None  # on a slave

    @classmethod
    def from_json(cls, body: bytes | str) -> HAStatus:
        """Parse the JSON body (docs/replication.md, "Admin API"); ProtocolError if it is not one."""
        try:
            obj = loads(body)
        except ValueError as exc:
            raise ProtocolError(f"the HA status body is not JSON: {exc}") from exc
        if not isinstance(obj, dict) or "master" not in obj:
            raise ProtocolError(f"the HA status body has no 'master' field: {str(obj)[:200]}")
        client = obj.get("haClientRuntimeInfo")
        return cls(
            master=bool(obj["master"]),
            broker_role=str(obj.get("brokerRole") or ("ASYNC_MASTER" if obj["master"] else "SLAVE")),
            ha_listen_port=_int(obj, "haListenPort"),
            master_commit_log_max_offset=_int(obj, "masterCommitLogMaxOffset"),
            in_sync_slave_nums=_int(obj, "inSyncSlaveNums"),
            connections=tuple(HAConnectionInfo.from_obj(c) for c in obj.get("haConnectionInfo") or ()),
            client=HAClientInfo.from_obj(client) if isinstance(client, dict) else None,
        )

    def to_json(self) -> bytes:
        return dumps(self.to_obj())

    def to_obj(self) -> dict[str, object]:
        return {
            "master": self.master,
            "brokerRole": self.broker_role,
            "haListenPort": self.ha_listen_port,
            "masterCommitLogMaxOffset": self.master_commit_log_max_offset,
            "inSyncSlaveNums": self.in_sync_slave_nums,
            "haConnectionInfo": [c.to_obj() for c in self.connections],
            "haClientRuntimeInfo": None if self.client is None else self.client.to_obj(),
        }


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    return int(value) if value not in (None, "") else 0


def slave_lag(master: HAStatus, slave: HAStatus, slave_addr: str) -> tuple[int | None, int | None]:
    """(bytes, ms) ``slave`` is behind ``master``: bytes from the two CommitLog max offsets; ms
    from the master's HA connection of that slave (the one from the slave's host whose acked
    offset is nearest the slave's max offset: HA connections show ephemeral ports only)."""
    if slave.client is None:
        return None, None
    slave_max = slave.client.max_offset
    lag_bytes = max(master.master_commit_log_max_offset - slave_max, 0)
    host = slave_addr.rpartition(":")[0]
    same_host = [c for c in master.connections if c.host == host]
    if not same_host or not slave.client.activated:
        return lag_bytes, None
    best = min(same_host, key=lambda c: abs(c.slave_ack_offset - slave_max))
    return lag_bytes, best.lag_ms
