"""Controller configuration: a frozen dataclass, the peer list, and a loader for controller.conf.

``ControllerConfig`` carries RocketMQ 5's ``ControllerConfig`` keys in snake_case with units in
the names; :func:`config_from_properties` reads the camelCase keys (``controllerDLegerGroup``,
``controllerDLegerPeers``, ``controllerDLegerSelfId``, ``controllerStorePath``,
``scanNotActiveBrokerInterval``, ``enableElectUncleanMaster``, ``notifyBrokerRoleChanged``...)
so that a RocketMQ controller.conf works.  In Java the peer address is both the controller's
remoting address and its DLedger port; rocketq's Raft (pysyncobj) needs a port of its own, so a
peer is ``id-host:port`` or ``id-host:port:raftPort``; without ``raftPort`` the Raft port is
``port + 10000``.  ``listenPort`` (0 = any free port) overrides the port this node listens on
for remoting requests; the peers still advertise the configured one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.controller.errors import ControllerConfigError

__all__ = [
    "CONTROLLER_KEYS",
    "RAFT_PORT_OFFSET",
    "ControllerConfig",
    "ControllerPeer",
    "config_from_properties",
    "config_to_properties",
    "parse_peers",
]

RAFT_PORT_OFFSET = 10_000
"""Raft port of a peer written without one: its controller port plus this."""


@dataclass(frozen=True, slots=True)
class ControllerPeer:
    """One controller of the group: its id, remoting address and Raft port."""

    node_id: str
    host: str
    port: int
    raft_port: int

    @property
    def address(self) -> str:
        """The remoting address brokers and admins connect to."""
        return f"{self.host}:{self.port}"

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft_port}"

    def spec(self) -> str:
        return f"{self.node_id}-{self.host}:{self.port}:{self.raft_port}"


def _port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ControllerConfigError(f"controllerDLegerPeers: bad port {text!r} in {where!r}") from None
    if not 0 < port <= 65535:
        raise ControllerConfigError(f"controllerDLegerPeers: port {port} out of 1..65535 in {where!r}")
    return port


def parse_peers(text: str) -> tuple[ControllerPeer, ...]:
    """Parse ``n0-host:port[:raftPort];n1-...``; ControllerConfigError names the bad entry."""
    peers: list[ControllerPeer] = []
    for raw in text.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        node_id, dash, rest = entry.partition("-")
        parts = rest.split(":")
        if not dash or not node_id or len(parts) not in (2, 3) or not parts[0]:
            raise ControllerConfigError(
                f"controllerDLegerPeers: {entry!r} is not id-host:port or id-host:port:raftPort"
            )
        port = _port(parts[1], entry)
        raft_port = _port(parts[2], entry) if len(parts) == 3 else port + RAFT_PORT_OFFSET
        if raft_port > 65535:
            raise ControllerConfigError(f"controllerDLegerPeers: give {entry!r} an explicit raftPort")
        peers.append(ControllerPeer(node_id, parts[0], port, raft_port))
    ids = [p.node_id for p in peers]
    if len(set(ids)) != len(ids):
        raise ControllerConfigError(f"controllerDLegerPeers: duplicate peer id in {text!r}")
    return tuple(peers)


@dataclass(frozen=True, kw_only=True, slots=True)
class ControllerConfig:
    """Effective controller settings (one node of a controller group)."""

    controller_type: str = "DLedger"  # DLedger and jRaft are both served by pysyncobj Raft
    controller_dleger_group: str = "DefaultControllerGroup"
    controller_dleger_peers: tuple[ControllerPeer, ...] = ()
    controller_dleger_self_id: str = ""
    controller_store_path: str = ""  # "" = keep no journal (state lives in the peers only)
    listen_port: int | None = None  # None = the self peer's port
    scan_not_active_broker_interval_ms: int = 5_000
    controller_heartbeat_timeout_ms: int = 10_000  # when a heartbeat carries no heartbeatTimeoutMills
    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    elect_master_max_retry_count: int = 3
    commit_timeout_ms: int = 5_000  # Java's WAIT_TIMEOUT_OUT for a Raft write
    raft_min_timeout_ms: int = 400
    raft_max_timeout_ms: int = 1_400
    raft_leader_fallback_timeout_ms: int = 3_000  # a leader cut off from the majority steps down
    #: the properties file this node was started with (``mqcontroller -c``, or the NameServer's
    #: ``-c`` when embedded): UPDATE_CONTROLLER_CONFIG writes changes there; not a config key
    config_file: str | None = None

    def __post_init__(self) -> None:
        if self.controller_dleger_peers and self.self_peer_or_none() is None:
            raise ControllerConfigError(
                f"controllerDLegerSelfId {self.controller_dleger_self_id!r} is not one of the peers"
                f" {[p.node_id for p in self.controller_dleger_peers]}"
            )
        if self.listen_port is not None and not 0 <= self.listen_port <= 65535:
            raise ControllerConfigError(f"listenPort must be in 0..65535, got {self.listen_port}")
        for name in (
            "scan_not_active_broker_interval_ms",
            "controller_heartbeat_timeout_ms",
            "commit_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ControllerConfigError(f"{name} must be > 0")
        if not 0 < self.raft_min_timeout_ms < self.raft_max_timeout_ms:
            raise ControllerConfigError("need 0 < controllerRaftMinTimeoutMs < controllerRaftMaxTimeoutMs")
        if self.elect_master_max_retry_count < 1:
            raise ControllerConfigError("electMasterMaxRetryCount must be >= 1")

    def require_peers(self) -> None:
        """Raise unless the Raft group is configured (peers and self id)."""
        if not self.controller_dleger_peers:
            raise ControllerConfigError("controllerDLegerPeers is not set (e.g. n0-127.0.0.1:9878)")

    def self_peer_or_none(self) -> ControllerPeer | None:
        for peer in self.controller_dleger_peers:
            if peer.node_id == self.controller_dleger_self_id:
                return peer
        return None

    @property
    def self_peer(self) -> ControllerPeer:
        peer = self.self_peer_or_none()
        if peer is None:
            raise ControllerConfigError("controllerDLegerSelfId is not one of controllerDLegerPeers")
        return peer

    @property
    def other_peers(self) -> tuple[ControllerPeer, ...]:
        return tuple(p for p in self.controller_dleger_peers if p.node_id != self.controller_dleger_self_id)

    def peers_spec(self) -> str:
        return ";".join(p.spec() for p in self.controller_dleger_peers)


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"  # Java Boolean.parseBoolean


def _int(text: str) -> int:
    return int(text.strip())


def _str(text: str) -> str:
    return text.strip()


def _opt_int(text: str) -> int | None:
    return int(text) if text.strip() else None


_KEYS = {
    "controllerType": ("controller_type", _str),
    "controllerDLegerGroup": ("controller_dleger_group", _str),
    "controllerDLegerPeers": ("controller_dleger_peers", parse_peers),
    "controllerDLegerSelfId": ("controller_dleger_self_id", _str),
    "controllerStorePath": ("controller_store_path", _str),
    "listenPort": ("listen_port", _opt_int),
    "scanNotActiveBrokerInterval": ("scan_not_active_broker_interval_ms", _int),
    "controllerHeartBeatTimeoutMills": ("controller_heartbeat_timeout_ms", _int),
    "enableElectUncleanMaster": ("enable_elect_unclean_master", _bool),
    "notifyBrokerRoleChanged": ("notify_broker_role_changed", _bool),
    "electMasterMaxRetryCount": ("elect_master_max_retry_count", _int),
    "controllerCommitTimeoutMills": ("commit_timeout_ms", _int),
    "controllerRaftMinTimeoutMs": ("raft_min_timeout_ms", _int),
    "controllerRaftMaxTimeoutMs": ("raft_max_timeout_ms", _int),
    "controllerRaftLeaderFallbackTimeoutMs": ("raft_leader_fallback_timeout_ms", _int),
}

#: Keys of Java's ControllerConfig / NettyServerConfig that rocketq accepts and ignores.
IGNORED_KEYS = frozenset(
    {
        "rocketmqHome",
        "configStorePath",
        "controllerThreadPoolNums",
        "controllerRequestThreadPoolQueueCapacity",
        "mappedFileSize",
        "isProcessReadEvent",
        "scanInactiveMasterInterval",
        "metricsExporterType",
        "metricsGrpcExporterTarget",
        "metricsGrpcExporterHeader",
        "metricGrpcExporterTimeOutInMills",
        "metricGrpcExporterIntervalInMills",
        "metricLoggingExporterIntervalInMills",
        "metricsPromExporterPort",
        "metricsPromExporterHost",
        "metricsLabel",
        "metricsInDelta",
        "configBlackList",
        "jRaftGroupId",
        "jRaftServerId",
        "jRaftInitConf",
        "jRaftControllerRPCAddr",
        "serverWorkerThreads",
        "serverSelectorThreads",
        "serverCallbackExecutorThreads",
        "serverChannelMaxIdleTimeSeconds",
    }
)


CONTROLLER_KEYS = frozenset(_KEYS)
"""The camelCase keys the controller reads (a NameServer embedding a controller passes them on)."""


def config_from_properties(
    props: Mapping[str, str], base: ControllerConfig | None = None
) -> tuple[ControllerConfig, list[str]]:
    """Apply camelCase ``props`` over ``base``; returns the config and the keys it does not know."""
    changes: dict[str, object] = {}
    unknown: list[str] = []
    for key, value in props.items():
        if key in _KEYS:
            name, parse = _KEYS[key]
            try:
                changes[name] = parse(value)
            except ValueError:
                raise ControllerConfigError(f"bad value for {key}: {value!r}") from None
        elif key not in IGNORED_KEYS:
            unknown.append(key)
    return dataclasses.replace(base or ControllerConfig(), **changes), unknown  # type: ignore[arg-type]


def config_to_properties(config: ControllerConfig) -> str:
    """The effective config as camelCase properties text (``mqcontroller -p``)."""
    lines = []
    for key, (name, _) in _KEYS.items():
        value = getattr(config, name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif name == "controller_dleger_peers":
            text = config.peers_spec()
        else:
            text = "" if value is None else str(value)
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"
