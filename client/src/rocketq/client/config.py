"""Configuration of the client APIs: frozen keyword-only dataclasses with RocketMQ's defaults.

:class:`ClientConfig` covers what every client instance shares (client id, NameServer polling,
heartbeats, RPC timeout); :class:`ProducerConfig` and :class:`ConsumerConfig` add the producer's
and the consumers' knobs.  Names are RocketMQ's Java field names in snake_case with the unit
spelled out (``send_msg_timeout_ms``); values are validated in ``__post_init__``.  Each class has
``from_properties`` which also accepts the Java camelCase keys (``sendMsgTimeout``,
``pullBatchSize``...) so a RocketMQ user's settings carry over.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rocketq.client.errors import ClientError, MQClientError
from rocketq.client.remoting.acl import SessionCredentials
from rocketq.client.remoting.message import CompressionType
from rocketq.client.remoting.vocabulary import AUTO_CREATE_TOPIC_KEY_TOPIC, validate_topic
from rocketq.client.transport.tls import client_ssl_context

__all__ = [
    "AllocateStrategy",
    "ClientConfig",
    "CompressionType",
    "ConsumeFromWhere",
    "ConsumerConfig",
    "MessageModel",
    "ProducerConfig",
    "local_ip",
    "make_client_id",
    "parse_namesrv_addr",
]

LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)


class MessageModel(enum.Enum):
    """How a consumer group shares a topic's queues."""

    CLUSTERING = "CLUSTERING"  # each queue is consumed by one member; offsets on the broker
    BROADCASTING = "BROADCASTING"  # every member consumes every queue; offsets in a local file


class ConsumeFromWhere(enum.Enum):
    """Where a group starts on a queue for which the broker has no committed offset."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class AllocateStrategy(enum.Enum):
    """The built-in rebalance algorithms (Java class names in the values)."""

    AVG = "AllocateMessageQueueAveragely"
    AVG_BY_CIRCLE = "AllocateMessageQueueAveragelyByCircle"
    CONSISTENT_HASH = "AllocateMessageQueueConsistentHash"


def _check_trace_topic(topic: str | None) -> None:
    if topic is not None and validate_topic(topic) is not None:
        raise ClientError(f"custom_trace_topic {topic!r}: {validate_topic(topic)}")


def _positive(name: str, value: int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ClientError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


@dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """Settings shared by every producer/consumer/admin built on one client instance."""

    instance_name: str = "DEFAULT"  # "DEFAULT" becomes "<pid>#<nanotime>" in the client id
    client_ip: str | None = None  # None: the address of the interface that routes outwards
    unit_name: str | None = None
    mq_client_api_timeout_ms: int = 3000
    poll_name_server_interval_ms: int = 30_000  # route cache refresh
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    serialize_json: bool = True  # False: send the ROCKETMQ binary header
    # sends and most broker admin calls go to the broker's VIP channel, port - 2 (Java's
    # vipChannelEnabled; rocketq.client.remoting.vip_channel); pulls and heartbeats do not
    vip_channel_enabled: bool = False
    # reads (pulls, offsets) avoid a replica that failed at the transport level for this long
    # and go to another replica of its broker group (a slave when the master is down)
    unreachable_broker_backoff_ms: int = 5_000
    # after a failed send, pull, offset commit or lock the topic's route is fetched again at once
    # (a new master may have been elected), at most once per this interval per topic
    route_refresh_on_failure_interval_ms: int = 500
    # ACL (RocketMQ 4.x plain ACL): every request is signed with these when access_key is set
    # (rocketq.client.remoting.acl); keys accessKey/secretKey/securityToken in from_properties
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    # TLS (docs/security.md "TLS"): Java's ClientConfig.setUseTLS / -Dtls.enable=true; the server's
    # chain is verified when a trust file is given or tls_auth_server (tls.client.* keys)
    use_tls: bool = False
    tls_trust_cert_path: str | None = None
    tls_auth_server: bool = False
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.access_key is None) != (self.secret_key is None):
            raise ClientError("ACL credentials need both access_key and secret_key (or neither)")
        _ = self.credentials  # raises ClientError for an empty key
        _positive("mq_client_api_timeout_ms", self.mq_client_api_timeout_ms)
        _positive("unreachable_broker_backoff_ms", self.unreachable_broker_backoff_ms, allow_zero=True)
        _positive("poll_name_server_interval_ms", self.poll_name_server_interval_ms)
        _positive(
            "route_refresh_on_failure_interval_ms", self.route_refresh_on_failure_interval_ms, allow_zero=True
        )
        _positive("heartbeat_broker_interval_ms", self.heartbeat_broker_interval_ms)
        _positive("persist_consumer_offset_interval_ms", self.persist_consumer_offset_interval_ms)

    @property
    def credentials(self) -> SessionCredentials | None:
        """The ACL credentials requests are signed with, or None to send unsigned requests."""
        if self.access_key is None or self.secret_key is None:
            return None
        return SessionCredentials(
            access_key=self.access_key, secret_key=self.secret_key, security_token=self.security_token
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of this client's connections, or None without ``use_tls``."""
        if not self.use_tls:
            return None
        return client_ssl_context(
            trust_cert_path=self.tls_trust_cert_path,
            auth_server=self.tls_auth_server,
            cert_path=self.tls_cert_path,
            key_path=self.tls_key_path,
            key_password=self.tls_key_password,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ClientConfig:
        return _from_properties(cls, props)


@dataclass(frozen=True, kw_only=True)
class ProducerConfig:
    """Producer settings (DefaultMQProducer's fields)."""

    producer_group: str = "DEFAULT_PRODUCER"
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    send_msg_timeout_ms: int = 3000
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    compression_type: CompressionType = CompressionType.ZLIB
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    send_latency_fault_enable: bool = False
    latency_max_ms: tuple[int, ...] = LATENCY_MAX_MS
    not_available_duration_ms: tuple[int, ...] = NOT_AVAILABLE_DURATION_MS
    # message traces (rocketq.client.trace, docs/observability.md): Pub records of every send to
    # custom_trace_topic (None: RMQ_SYS_TRACE_TOPIC)
    enable_msg_trace: bool = False
    custom_trace_topic: str | None = None
    client: ClientConfig = field(default_factory=ClientConfig)

    def __post_init__(self) -> None:
        if not self.producer_group:
            raise ClientError("producer_group must not be empty")
        _positive("send_msg_timeout_ms", self.send_msg_timeout_ms)
        _positive("retry_times_when_send_failed", self.retry_times_when_send_failed, allow_zero=True)
        _positive(
            "retry_times_when_send_async_failed", self.retry_times_when_send_async_failed, allow_zero=True
        )
        _positive("max_message_size", self.max_message_size)
        _positive("default_topic_queue_nums", self.default_topic_queue_nums)
        if not 0 <= self.compress_level <= 9:
            raise ClientError(f"compress_level must be 0..9, got {self.compress_level}")
        if len(self.latency_max_ms) != len(self.not_available_duration_ms):
            raise ClientError("latency_max_ms and not_available_duration_ms must have the same length")
        _check_trace_topic(self.custom_trace_topic)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ProducerConfig:
        return _from_properties(cls, props)


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig:
    """Push and lite-pull consumer settings (DefaultMQPushConsumer / DefaultLitePullConsumer)."""

    consumer_group: str
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None  # CONSUME_FROM_TIMESTAMP; None = 30 minutes ago
    allocate_strategy: AllocateStrategy = AllocateStrategy.AVG
    pull_batch_size: int = 32
    pull_interval_ms: int = 0
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    pull_time_delay_when_flow_control_ms: int = 50
    pull_time_delay_when_exception_ms: int = 3000
    consume_thread_nums: int = 20
    consume_message_batch_max_size: int = 1
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = -1  # -1: the broker's retryMaxTimes (16)
    suspend_current_queue_time_ms: int = 1000
    broker_suspend_max_time_ms: int = 15_000  # long-poll hold on the broker
    consumer_timeout_when_suspend_ms: int = 30_000  # RPC timeout of a long-poll pull (> the above)
    consumer_pull_timeout_ms: int = 10_000  # RPC timeout of a lite pull
    rebalance_interval_ms: int = 20_000
    lock_interval_ms: int = 20_000
    poll_timeout_ms: int = 5_000  # LitePullConsumer.poll default
    auto_commit: bool = True  # LitePullConsumer
    auto_commit_interval_ms: int = 5_000
    pull_threshold_for_all: int = 10_000  # LitePullConsumer buffered messages across queues
    offset_store_dir: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), ".rocketmq_offsets")
    )
    # message traces: SubBefore/SubAfter records of every listener call (push) or poll (lite pull)
    enable_msg_trace: bool = False
    custom_trace_topic: str | None = None
    client: ClientConfig = field(default_factory=ClientConfig)

    def __post_init__(self) -> None:
        if not self.consumer_group:
            raise ClientError("consumer_group must not be empty")
        if not 1 <= self.pull_batch_size <= 1024:
            raise ClientError(f"pull_batch_size must be 1..1024, got {self.pull_batch_size}")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise ClientError("consume_message_batch_max_size must be 1..1024")
        _positive("consume_thread_nums", self.consume_thread_nums)
        _positive("pull_threshold_for_queue", self.pull_threshold_for_queue)
        _positive("pull_interval_ms", self.pull_interval_ms, allow_zero=True)
        if self.consumer_timeout_when_suspend_ms <= self.broker_suspend_max_time_ms:
            raise ClientError("consumer_timeout_when_suspend_ms must exceed broker_suspend_max_time_ms")
        _check_trace_topic(self.custom_trace_topic)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ConsumerConfig:
        return _from_properties(cls, props)


# Java camelCase names whose snake_case form differs from ours by more than the case.
_JAVA_ALIASES = {
    "sendMsgTimeout": "send_msg_timeout_ms",
    "pollNameServerInterval": "poll_name_server_interval_ms",
    "heartbeatBrokerInterval": "heartbeat_broker_interval_ms",
    "persistConsumerOffsetInterval": "persist_consumer_offset_interval_ms",
    "mqClientApiTimeout": "mq_client_api_timeout_ms",
    "clientIP": "client_ip",
    "pullInterval": "pull_interval_ms",
    "suspendCurrentQueueTimeMillis": "suspend_current_queue_time_ms",
    "brokerSuspendMaxTimeMillis": "broker_suspend_max_time_ms",
    "consumerTimeoutMillisWhenSuspend": "consumer_timeout_when_suspend_ms",
    "consumerPullTimeoutMillis": "consumer_pull_timeout_ms",
    "pullThresholdSizeForQueue": "pull_threshold_size_for_queue_mib",
    "autoCommitIntervalMillis": "auto_commit_interval_ms",
    "pollTimeoutMillis": "poll_timeout_ms",
    "compressMsgBodyOverHowmuch": "compress_msg_body_over_howmuch",
    "sendLatencyFaultEnable": "send_latency_fault_enable",
    "customizedTraceTopic": "custom_trace_topic",
    "useTLS": "use_tls",
    "tls.enable": "use_tls",
    "tls.client.trustCertPath": "tls_trust_cert_path",
    "tls.client.authServer": "tls_auth_server",
    "tls.client.certPath": "tls_cert_path",
    "tls.client.keyPath": "tls_key_path",
    "tls.client.keyPassword": "tls_key_password",
}

_T = TypeVar("_T")


def _snake(name: str) -> str:
    return _JAVA_ALIASES.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _coerce(cls_field: dataclasses.Field[Any], value: Any) -> Any:
    kind = str(cls_field.type)
    if not isinstance(value, str):
        return value
    if kind == "bool":
        return value.strip().lower() == "true"
    if kind in ("int", "int | None"):
        return int(value)
    for enum_cls in (MessageModel, ConsumeFromWhere, AllocateStrategy):
        if kind == enum_cls.__name__:
            return enum_cls(value) if value in enum_cls._value2member_map_ else enum_cls[value]
    if kind == "CompressionType":
        return CompressionType[value.upper()]
    return value


def _from_properties(cls: type[_T], props: Mapping[str, Any]) -> _T:
    """Build ``cls`` from snake_case or Java camelCase keys; unknown keys raise ClientError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    client_keys: dict[str, Any] = {}
    client_fields = {f.name for f in dataclasses.fields(ClientConfig)}
    for key, value in props.items():
        name = key if key in fields or key in client_fields else _snake(key)
        if name in fields and name != "client":
            kwargs[name] = _coerce(fields[name], value)
        elif name in client_fields and "client" in fields:
            client_keys[name] = value
        elif name in client_fields and cls is ClientConfig:
            kwargs[name] = _coerce(fields[name], value)
        else:
            raise ClientError(f"unknown {cls.__name__} setting {key!r}")
    if client_keys:
        kwargs["client"] = _from_properties(ClientConfig, client_keys)
    return cls(**kwargs)


def parse_namesrv_addr(addr: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` (or a list) -> addresses; raises MQClientError when there is none."""
    items = addr.split(";") if isinstance(addr, str) else list(addr)
    result = [a.strip() for a in items if a and a.strip()]
    if not result:
        raise MQClientError(f"no NameServer address in {addr!r}; give 'host:port', several separated by ';'")
    for a in result:
        if "," in a or " " in a or ":" not in a:
            raise MQClientError(f"bad NameServer address {a!r} in {addr!r}: use 'host:port' separated by ';'")
    return result


def local_ip() -> str:
    """The address of the interface that routes outwards (no packet is sent), else 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("10.255.255.255", 1))
            return str(sock.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def make_client_id(config: ClientConfig) -> str:
    """``clientIP@instanceName[@unitName]``; the instance name DEFAULT becomes ``pid#nanotime``."""
    ip = config.client_ip or local_ip()
    instance = config.instance_name
    if instance == "DEFAULT":
        instance = f"{os.getpid()}#{time.monotonic_ns()}"
    client_id = f"{ip}@{instance}"
    if config.unit_name:
        client_id += f"@{config.unit_name}"
    return client_id
