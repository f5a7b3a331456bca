"""The proxy's settings: :class:`ProxyConfig` and the reader of RocketMQ's ``rmq-proxy.json``.

Keys keep the names of RocketMQ's ``ProxyConfig`` so that a RocketMQ user's file works; keys the
proxy does not read are reported (:attr:`LoadedProxyConfig.ignored`, logged by ``mqproxy``) and
otherwise skipped, as ``mqnamesrv`` and ``mqbroker`` treat unknown keys; a value of the wrong kind
is an error naming the key.  Defaults are RocketMQ 5.3's.
"""

from __future__ import annotations

import enum
import json
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rocketq.client.errors import RocketQError
from rocketq.client.transport.tls import TlsConfig, TlsConfigError
from rocketq.server.metrics import DEFAULT_PROM_EXPORTER_PORT, MetricsExporterType, parse_exporter_type
from rocketq.server.tls_config import tls_config_from_properties

__all__ = ["KEYS", "LoadedProxyConfig", "ProxyConfig", "ProxyConfigError", "ProxyMode", "load_proxy_config"]

MIB = 1024 * 1024


class ProxyConfigError(RocketQError):
    """A setting of the proxy is missing, unknown or out of range."""


class ProxyMode(enum.Enum):
    """``proxyMode``: CLUSTER (a process of its own, brokers reached over the network) or LOCAL."""

    CLUSTER = "CLUSTER"
    LOCAL = "LOCAL"


@dataclass(frozen=True, kw_only=True)
class ProxyConfig:
    """What ``mqproxy`` needs; times in milliseconds, sizes in bytes."""

    namesrv_addr: str
    proxy_mode: ProxyMode = ProxyMode.CLUSTER
    grpc_server_bind_address: str = "0.0.0.0"
    grpc_server_port: int = 8081
    #: the address put in QueryRoute's endpoints (the SDKs connect there); default: the bind address
    #: and the port listened on, 127.0.0.1 when bound to every interface
    advertised_address: str | None = None
    max_message_size: int = 4 * MIB
    #: the largest gRPC request accepted (a bigger one is refused by gRPC itself)
    grpc_max_inbound_message_size: int = 130 * MIB
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    default_invisible_time_mills: int = 60_000
    #: renew the handles of receives with ``auto_renew`` (push consumers) until they are acked
    enable_proxy_auto_renew: bool = True
    #: a handle is renewed this long before its message would become visible again
    renew_ahead_time_millis: int = 10_000
    #: each renewal makes the message invisible this much longer (RocketMQ 5.1.0's key)
    renew_slice_time_millis: int = 60_000
    #: no renewal after this long since the receive: the message comes back to be consumed again
    renew_max_time_millis: int = 3 * 3600 * 1000
    #: handles due for renewal are looked for this often
    renew_schedule_period_millis: int = 5_000
    #: a failed renewal is tried again at the next scans this many times
    max_renew_retry_times: int = 3
    #: the messages of a client that went away become visible again after this long
    invisible_time_millis_when_clear: int = 1_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    #: settings pushed to producers: send attempts and the exponential back-off between them
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1_000
    grpc_client_producer_backoff_multiplier: float = 2.0
    #: consumers' max delivery attempts when no broker answers for the group's retryMaxTimes (16 + 1)
    consumer_max_attempts: int = 17
    #: a subscription group's settings (FIFO, retryMaxTimes) are read again from a broker this often
    subscription_group_config_cache_refresh_seconds: int = 20
    #: refuse a message whose type is not its topic's ``message.type`` (topics without one take any)
    enable_topic_message_type_check: bool = True
    #: a topic's message type is read again from a broker this often (rocketq's addition)
    topic_config_cache_refresh_seconds: int = 20
    grpc_shutdown_grace_millis: int = 3_000
    #: check the SDKs' credentials against plain_acl.yml (RocketMQ 5.1 proxy's ``enableACL``)
    enable_acl: bool = False
    #: the plain_acl.yml file; empty: ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (rocketq's addition)
    acl_file_path: str = ""
    #: Prometheus metrics (RocketMQ's keys; docs/observability.md): DISABLE or PROM; host "" = the
    #: gRPC bind address; port 0 = a free port, logged once listening
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = DEFAULT_PROM_EXPORTER_PORT
    #: the ``cluster`` and ``node_id`` labels of the proxy's metrics; proxyName "" = the host name
    proxy_cluster_name: str = "DefaultCluster"
    proxy_name: str = ""
    #: sign what the proxy sends to the brokers with its own account (RocketMQ's key), the one of
    #: ``innerClientAuthenticationCredentials``, else of ``$ROCKETMQ_HOME/conf/tools.yml``
    enable_acl_rpc_hook_for_cluster_mode: bool = False
    #: ``{"accessKey": "...", "secretKey": "..."}`` as a JSON string (RocketMQ's AuthConfig key)
    inner_client_authentication_credentials: str = ""
    #: how long a broker's request relayed to a 5.x client over Telemetry waits for its answer
    #: (RocketMQ's default is 5; rocketq's 2 stays below the broker's 5 s and mqadmin's 3 s waits)
    grpc_proxy_relay_request_timeout_in_seconds: int = 2
    #: a 5.x client silent this long (no Heartbeat, no Settings) is unregistered from the brokers
    channel_expired_timeout: int = 120_000
    #: RocketMQ's ``tls.*`` keys (``tls.server.mode``, ``tls.server.certPath``, ...) as given
    tls_properties: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.namesrv_addr.strip():
            raise ProxyConfigError("namesrvAddr is empty: give -n host:port or namesrvAddr in rmq-proxy.json")
        if not 0 <= self.grpc_server_port <= 65535:
            raise ProxyConfigError(f"grpcServerPort must be 0..65535, got {self.grpc_server_port}")
        if self.max_message_size <= 0:
            raise ProxyConfigError(f"maxMessageSize must be positive, got {self.max_message_size}")
        if self.grpc_max_inbound_message_size <= self.max_message_size:
            raise ProxyConfigError(
                "grpcMaxInboundMessageSize must exceed maxMessageSize (a request holds a body and more),"
                f" got {self.grpc_max_inbound_message_size} and {self.max_message_size}"
            )
        low = self.grpc_client_consumer_min_long_polling_timeout_millis
        high = self.grpc_client_consumer_max_long_polling_timeout_millis
        if not 0 < low <= high:
            raise ProxyConfigError(
                "grpcClientConsumerMinLongPollingTimeoutMillis must be positive and at most"
                f" grpcClientConsumerMaxLongPollingTimeoutMillis, got {low} and {high}"
            )
        if not 0 < self.min_invisible_time_mills_for_recv <= self.max_invisible_time_mills:
            raise ProxyConfigError(
                "minInvisibleTimeMillsForRecv must be positive and at most maxInvisibleTimeMills,"
                f" got {self.min_invisible_time_mills_for_recv} and {self.max_invisible_time_mills}"
            )
        if self.subscription_group_config_cache_refresh_seconds < 0:
            raise ProxyConfigError(
                "subscriptionGroupConfigCacheRefreshSeconds must be >= 0,"
                f" got {self.subscription_group_config_cache_refresh_seconds}"
            )
        self.tls()  # refuses bad tls.* keys at start
        self._check_renewal()
        if self.grpc_proxy_relay_request_timeout_in_seconds <= 0:
            raise ProxyConfigError(
                "grpcProxyRelayRequestTimeoutInSeconds must be positive,"
                f" got {self.grpc_proxy_relay_request_timeout_in_seconds}"
            )
        if self.channel_expired_timeout <= 0:
            raise ProxyConfigError(
                f"channelExpiredTimeout must be positive, got {self.channel_expired_timeout}"
            )
        batch = self.grpc_client_consumer_long_polling_batch_size
        if not 1 <= batch <= 32:
            raise ProxyConfigError(f"grpcClientConsumerLongPollingBatchSize must be 1..32, got {batch}")
        try:
            parse_exporter_type(self.metrics_exporter_type)
        except ValueError as exc:
            raise ProxyConfigError(str(exc)) from None
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ProxyConfigError(
                f"metricsPromExporterPort must be 0..65535, got {self.metrics_prom_exporter_port}"
            )

    def _check_renewal(self) -> None:
        for key, value in (
            ("renewAheadTimeMillis", self.renew_ahead_time_millis),
            ("renewMaxTimeMillis", self.renew_max_time_millis),
            ("renewSchedulePeriodMillis", self.renew_schedule_period_millis),
            ("defaultInvisibleTimeMills", self.default_invisible_time_mills),
        ):
            if value <= 0:
                raise ProxyConfigError(f"{key} must be positive, got {value}")
        if self.renew_slice_time_millis <= self.renew_ahead_time_millis:
            raise ProxyConfigError(
                "renewSliceTimeMillis must exceed renewAheadTimeMillis (a renewed handle would be due"
                f" again at once), got {self.renew_slice_time_millis} and {self.renew_ahead_time_millis}"
            )
        if self.max_renew_retry_times < 0 or self.invisible_time_millis_when_clear < 0:
            raise ProxyConfigError(
                "maxRenewRetryTimes and invisibleTimeMillisWhenClear must be >= 0, got"
                f" {self.max_renew_retry_times} and {self.invisible_time_millis_when_clear}"
            )

    @property
    def metrics_enabled(self) -> bool:
        """``metricsExporterType=PROM``: the proxy serves Prometheus metrics."""
        return parse_exporter_type(self.metrics_exporter_type) is MetricsExporterType.PROM

    @property
    def proxy_node_id(self) -> str:
        """``proxyName``, else the host name (RocketMQ's default)."""
        return self.proxy_name or socket.gethostname() or "DEFAULT_PROXY"

    def tls(self) -> TlsConfig:
        """The ``tls.*`` settings (``tls.config.file`` read first, as RocketMQ's TlsSystemConfig)."""
        try:
            return tls_config_from_properties(dict(self.tls_properties))
        except TlsConfigError as exc:
            raise ProxyConfigError(str(exc)) from None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


#: fields whose rmq-proxy.json key is not the field's camelCase (RocketMQ's spelling)
_KEY_SPELLING = {"enable_acl": "enableACL"}
#: rmq-proxy.json key -> ProxyConfig field
KEYS: dict[str, str] = {
    _KEY_SPELLING.get(f.name, _camel(f.name)): f.name
    for f in fields(ProxyConfig)
    if f.name != "tls_properties"  # the tls.* keys, read as they are
}


@dataclass(frozen=True)
class LoadedProxyConfig:
    config: ProxyConfig
    #: keys of the file that rocketq's proxy does not read (the caller logs them)
    ignored: list[str] = field(default_factory=list)


def _coerce(key: str, name: str, value: Any) -> Any:
    target = {f.name: f.type for f in fields(ProxyConfig)}[name]
    if name == "proxy_mode":
        try:
            return ProxyMode(str(value).upper())
        except ValueError:
            raise ProxyConfigError(f"{key} must be CLUSTER or LOCAL, got {value!r}") from None
    if target == "bool":
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() not in ("true", "false"):
            raise ProxyConfigError(f"{key} must be true or false, got {value!r}")
        return str(value).strip().lower() == "true"
    if target in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ProxyConfigError(f"{key} must be a number, got {value!r}")
        try:
            return int(value) if target == "int" else float(value)
        except ValueError:
            raise ProxyConfigError(f"{key} must be a number, got {value!r}") from None
    return None if value is None else str(value)


def load_proxy_config(path: Path | None, **overrides: Any) -> LoadedProxyConfig:
    """Read ``rmq-proxy.json`` (when given), then apply ``overrides`` (ProxyConfig field names,
    from the command line); ProxyConfigError says which key or value is wrong."""
    values: dict[str, Any] = {}
    ignored: list[str] = []
    if path is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ProxyConfigError(f"cannot read the proxy config {path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ProxyConfigError(f"{path} is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ProxyConfigError(f"{path} must hold a JSON object of rmq-proxy.json keys")
        tls = []
        for key, value in data.items():
            if key.startswith("tls."):
                tls.append((key, str(value).lower() if isinstance(value, bool) else str(value)))
            elif key in KEYS:
                values[KEYS[key]] = _coerce(key, KEYS[key], value)
            else:
                ignored.append(key)
        if tls:
            values["tls_properties"] = tuple(tls)
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "namesrv_addr" not in values:
        raise ProxyConfigError("no NameServer address: give -n host:port or namesrvAddr in rmq-proxy.json")
    return LoadedProxyConfig(ProxyConfig(**values), ignored)
