"""NameServer configuration: a frozen dataclass and a loader for RocketMQ properties files.

``NamesrvConfig`` holds every setting in snake_case with units in the names.  The loader reads a
Java ``.properties`` file with RocketMQ's camelCase keys (``listenPort``,
``scanNotActiveBrokerInterval``, ``kvConfigPath``...) so that a RocketMQ user's
``namesrv.properties`` works unchanged; keys RocketMQ knows but rocketq does not need (thread pool
sizes and the like) are accepted and ignored, truly unknown keys are reported to the caller.
With ``enableControllerInNamesrv=true`` the controller.conf keys found here (all but
``listenPort``, which stays the NameServer's) are kept in ``controller_properties`` for the
embedded controller (docs/failover.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rocketq.client.errors import ClientError
from rocketq.client.remoting.command import SerializeType
from rocketq.client.transport import channel as limits_defaults
from rocketq.client.transport.channel import ConnectionLimits
from rocketq.client.transport.tls import TLS_KEYS, TlsConfig, TlsConfigError
from rocketq.controller.config import CONTROLLER_KEYS
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.server.metrics import DEFAULT_PROM_EXPORTER_PORT, MetricsExporterType, parse_exporter_type
from rocketq.server.properties import PropertiesSyntaxError, parse_properties
from rocketq.server.tls_config import tls_config_from_properties

DEFAULT_LISTEN_PORT = 9876
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
DEFAULT_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS = 5_000


@dataclass(frozen=True, kw_only=True, slots=True)
class NamesrvConfig:
    """Effective NameServer settings."""

    listen_port: int = DEFAULT_LISTEN_PORT
    bind_address: str = "127.0.0.1"
    scan_not_active_broker_interval_ms: int = DEFAULT_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS
    broker_channel_expired_time_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
    kv_config_path: str | None = None
    order_message_enable: bool = False
    serialize_type: SerializeType = SerializeType.JSON
    max_inflight_per_connection: int = 64
    max_queued_requests: int = 10_000
    #: memory bounds of the remoting port against hostile clients (docs/security.md)
    write_buffer_high_water_mark: int = limits_defaults.DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK
    write_buffer_low_water_mark: int = limits_defaults.DEFAULT_WRITE_BUFFER_LOW_WATER_MARK
    server_max_pending_frame_bytes: int = limits_defaults.DEFAULT_MAX_PENDING_FRAME_BYTES
    server_max_pending_frame_bytes_total: int = limits_defaults.DEFAULT_MAX_PENDING_FRAME_BYTES_TOTAL
    enable_controller_in_namesrv: bool = False
    #: the controller.conf keys found in the NameServer's config (used when embedding a controller)
    controller_properties: tuple[tuple[str, str], ...] = ()
    #: TLS on the remoting port (the tls.* keys of RocketMQ's TlsSystemConfig; docs/security.md)
    tls: TlsConfig = dataclasses.field(default_factory=TlsConfig)
    #: plain ACL (rocketq.server.acl, docs/security.md): every request is checked against
    #: aclFilePath ("" = $ROCKETMQ_HOME/conf/plain_acl.yml); REGISTER_BROKER needs an admin account
    acl_enable: bool = False
    acl_file_path: str = ""
    #: Prometheus metrics (RocketMQ 5's keys; docs/observability.md): DISABLE or PROM; host ""
    #: = bind_address; port 0 = a free port
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = DEFAULT_PROM_EXPORTER_PORT
    #: the file the NameServer was started with (``-c``): UPDATE_NAMESRV_CONFIG writes changes there
    #: (rocketq.namesrv.config_update); None: changes last until the NameServer stops
    config_file: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise NamesrvConfigError(f"listenPort must be in 0..65535, got {self.listen_port}")
        if self.scan_not_active_broker_interval_ms <= 0:
            raise NamesrvConfigError("scanNotActiveBrokerInterval must be > 0 ms")
        if self.broker_channel_expired_time_ms <= 0:
            raise NamesrvConfigError("brokerChannelExpiredTime must be > 0 ms")
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise NamesrvConfigError(
                f"metricsPromExporterPort must be in 0..65535, got {self.metrics_prom_exporter_port}"
            )
        if self.max_inflight_per_connection <= 0 or self.max_queued_requests <= 0:
            raise NamesrvConfigError("maxInflightPerConnection and maxQueuedRequests must be > 0")
        try:
            self.connection_limits()
        except ClientError as exc:
            raise NamesrvConfigError(str(exc)) from None

    def connection_limits(self) -> ConnectionLimits:
        """The remoting port's memory bounds (``writeBufferHighWaterMark`` ... keys)."""
        return ConnectionLimits(
            write_buffer_high_water_mark=self.write_buffer_high_water_mark,
            write_buffer_low_water_mark=self.write_buffer_low_water_mark,
            max_pending_frame_bytes=self.server_max_pending_frame_bytes,
            max_pending_frame_bytes_total=self.server_max_pending_frame_bytes_total,
        )


# camelCase key -> (field name, parser)
def _parse_bool(text: str) -> bool:
    # Java Boolean.parseBoolean: only "true" (any case) is true.
    return text.strip().lower() == "true"


def _parse_int(text: str) -> int:
    return int(text.strip())


def _parse_str(text: str) -> str:
    return text.strip()


def _parse_opt_str(text: str) -> str | None:
    return text.strip() or None


def _parse_exporter_type(text: str) -> MetricsExporterType:
    try:
        return parse_exporter_type(text)
    except ValueError as exc:  # the message carries the remedy; keep it
        raise NamesrvConfigError(str(exc)) from None


def _parse_serialize_type(text: str) -> SerializeType:
    try:
        return SerializeType[text.strip().upper()]
    except KeyError:
        raise NamesrvConfigError(f"serializeType must be JSON or ROCKETMQ, got {text!r}") from None


_KEYS = {
    "listenPort": ("listen_port", _parse_int),
    "bindAddress": ("bind_address", _parse_str),
    "scanNotActiveBrokerInterval": ("scan_not_active_broker_interval_ms", _parse_int),
    "brokerChannelExpiredTime": ("broker_channel_expired_time_ms", _parse_int),
    "kvConfigPath": ("kv_config_path", _parse_opt_str),
    "orderMessageEnable": ("order_message_enable", _parse_bool),
    "serializeType": ("serialize_type", _parse_serialize_type),
    "maxInflightPerConnection": ("max_inflight_per_connection", _parse_int),
    "maxQueuedRequests": ("max_queued_requests", _parse_int),
    "writeBufferHighWaterMark": ("write_buffer_high_water_mark", _parse_int),
    "writeBufferLowWaterMark": ("write_buffer_low_water_mark", _parse_int),
    "serverMaxPendingFrameBytes": ("server_max_pending_frame_bytes", _parse_int),
    "serverMaxPendingFrameBytesTotal": ("server_max_pending_frame_bytes_total", _parse_int),
    "enableControllerInNamesrv": ("enable_controller_in_namesrv", _parse_bool),
    "aclEnable": ("acl_enable", _parse_bool),
    "aclFilePath": ("acl_file_path", _parse_str),
    "metricsExporterType": ("metrics_exporter_type", _parse_exporter_type),
    "metricsPromExporterHost": ("metrics_prom_exporter_host", _parse_str),
    "metricsPromExporterPort": ("metrics_prom_exporter_port", _parse_int),
}

# Keys of RocketMQ's NamesrvConfig / NettyServerConfig that rocketq accepts and ignores.
IGNORED_KEYS = frozenset(
    {
        "rocketmqHome", "configStorePath", "productEnvName", "clusterTest", "returnOrderTopicConfigToBroker",
        "clientRequestThreadPoolNums", "defaultThreadPoolNums", "clientRequestThreadPoolQueueCapacity",
        "defaultThreadPoolQueueCapacity", "serverWorkerThreads", "serverCallbackExecutorThreads",
        "serverSelectorThreads", "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue",
        "serverChannelMaxIdleTimeSeconds", "serverSocketSndBufSize", "serverSocketRcvBufSize",
        "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector", "needWaitForService",
        "enableTopicList", "enableAllTopicList", "notifyMinBrokerIdChanged", "waitSecondsForService",
    }
)  # fmt: skip


def config_from_properties(
    props: Mapping[str, str], base: NamesrvConfig | None = None
) -> tuple[NamesrvConfig, list[str]]:
    """Apply camelCase ``props`` over ``base``; returns the config and the unknown keys."""
    changes: dict[str, object] = {}
    unknown: list[str] = []
    controller = dict((base or NamesrvConfig()).controller_properties)
    tls_props = (base or NamesrvConfig()).tls.to_properties()
    for key, value in props.items():
        if key in CONTROLLER_KEYS and key != "listenPort":
            controller[key] = value  # as Java, keys both configs know (scan interval) go to both
        if key in _KEYS:
            field, parse = _KEYS[key]
            try:
                changes[field] = parse(value)
            except ValueError:
                raise NamesrvConfigError(f"bad value for {key}: {value!r}") from None
        elif key in TLS_KEYS:
            tls_props[key] = value
        elif key not in IGNORED_KEYS and key not in CONTROLLER_KEYS:
            unknown.append(key)
    changes["controller_properties"] = tuple(sorted(controller.items()))
    try:
        changes["tls"] = tls_config_from_properties(tls_props)
    except TlsConfigError as exc:
        raise NamesrvConfigError(str(exc)) from None
    return dataclasses.replace(base or NamesrvConfig(), **changes), unknown  # type: ignore[arg-type]


def load_config_file(path: str | Path, base: NamesrvConfig | None = None) -> tuple[NamesrvConfig, list[str]]:
    """Read a ``namesrv.properties`` file; returns the config and the unknown keys."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise NamesrvConfigError(f"cannot read config file {path}: {exc}") from exc
    try:
        props = parse_properties(text)
    except PropertiesSyntaxError as exc:
        raise NamesrvConfigError(f"{path}: {exc}") from None
    return config_from_properties(props, base)


def config_to_properties(config: NamesrvConfig) -> str:
    """The effective config as camelCase properties text (what ``mqnamesrv -p`` prints)."""
    lines = []
    for key, (field, _) in _KEYS.items():
        value = getattr(config, field)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, SerializeType):
            text = value.name
        elif value is None:
            text = ""
        else:
            text = str(value)
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"
