"""Broker configuration: the frozen ``BrokerConfig`` with its validation, and ``BrokerRole``.

Every field has RocketMQ's default and carries its unit in the name; ``__post_init__`` rejects a
value out of range with :class:`BrokerConfigError` naming the camelCase ``broker.conf`` key, so a
bad file fails at load time.  Which ``broker.conf`` key sets which field, and how the file is read,
live beside this module: :mod:`.config_keys` (the key table) and :mod:`.config_loader`.
"""

from __future__ import annotations

import enum
import socket
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.broker.dledger.peers import parse_peers
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.metrics.config import MetricsConfig
from rocketq.broker.store.config import FlushDiskType  # one FlushDiskType for broker and store
from rocketq.client.errors import ClientError
from rocketq.client.remoting.assignment import MessageRequestMode
from rocketq.client.remoting.vocabulary import PERM_RW, TRACE_TOPIC, validate_topic
from rocketq.client.transport import channel as limits_defaults
from rocketq.client.transport.channel import ConnectionLimits
from rocketq.client.transport.tls import TlsConfig

__all__ = ["BrokerConfig", "BrokerRole", "PopOrderBlockScope", "is_host_port"]


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class PopOrderBlockScope(enum.Enum):
    """What an un-acked, still invisible orderly (FIFO) pop blocks (docs/rocketmq5.md, "FIFO
    message groups")."""

    #: RocketMQ's rule: the whole queue, every message group hashed to it.
    QUEUE = "queue"
    #: rocketq: only the later messages of its own message group (``__SHARDINGKEY``) in that queue.
    GROUP = "group"


def _default_broker_name() -> str:
    return socket.gethostname() or "broker-a"


def _default_store_root() -> str:
    return str(Path.home() / "store")


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """Everything the broker process needs, validated.  Times carry their unit in the name."""

    # identity and addressing
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=_default_broker_name)
    broker_id: int = 0
    broker_ip1: str = "127.0.0.1"
    broker_ip2: str = ""
    bind_address: str = "127.0.0.1"
    listen_port: int = 10911
    #: -1: RocketMQ's default, listenPort + 1 (0 when listenPort is 0: a free port)
    ha_listen_port: int = -1
    #: the VIP channel (rocketq.client.remoting.vip_channel); -1: RocketMQ's listenPort - 2 (0 when
    #: listenPort is 0 or 1: a free port); clients derive it as the advertised port - 2
    fast_listen_port: int = -1
    namesrv_addr: tuple[str, ...] = ()
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    broker_permission: int = PERM_RW
    # replication (docs/replication.md)
    ha_master_address: str = ""
    ha_send_heartbeat_interval_ms: int = 5_000
    ha_housekeeping_interval_ms: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024
    #: rocketq-specific: a slave whose CommitLog runs past its master's truncates the excess
    #: (true) or refuses to replicate and serve reads (false)
    ha_slave_truncate_divergent: bool = True
    slave_read_enable: bool = False
    # store-related keys the broker reads itself (they also go to the store)
    store_path_root_dir: str = field(default_factory=_default_store_root)
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    max_message_size: int = 4 * 1024 * 1024
    # topics and groups
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    # message traces (docs/observability.md): create the trace topic at start
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = TRACE_TOPIC
    # NameServer registration
    register_name_server_period_ms: int = 30_000
    register_broker_timeout_ms: int = 24_000
    # pulls
    long_polling_enable: bool = True
    short_polling_time_ms: int = 1_000
    max_suspended_pulls: int = 10_000
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    # queues and thread pools (overload protection)
    send_message_thread_pool_nums: int = 4
    pull_message_thread_pool_nums: int = 4
    send_thread_pool_queue_capacity: int = 10_000
    pull_thread_pool_queue_capacity: int = 100_000
    query_thread_pool_queue_capacity: int = 20_000
    wait_time_ms_in_send_queue: int = 200
    wait_time_ms_in_pull_queue: int = 5_000
    # clients, locks, offsets
    channel_expired_timeout_ms: int = 120_000
    rebalance_lock_max_live_time_ms: int = 60_000
    flush_consumer_offset_interval_ms: int = 5_000
    # delay levels, retry, filters (the levels themselves are the store key messageDelayLevel)
    flush_delay_offset_interval_ms: int = 10_000
    enable_property_filter: bool = False
    # POP consumption (RocketMQ 5's BrokerConfig keys; docs/rocketmq5.md "POP consumption")
    revive_queue_num: int = 8
    revive_interval_ms: int = 1_000
    enable_retry_topic_v2: bool = False
    retrieve_message_from_pop_retry_topic_v1: bool = True
    pop_from_retry_probability: int = 20
    max_pop_polling_size: int = 100_000
    init_pop_offset_by_check_msg_in_mem: bool = True
    pop_response_return_actual_retry_topic: bool = False
    pop_order_block_scope: PopOrderBlockScope = PopOrderBlockScope.QUEUE
    # server-side rebalance (QUERY_ASSIGNMENT; docs/rocketmq5.md "Assignment and request modes")
    server_load_balancer_enable: bool = True
    default_message_request_mode: MessageRequestMode = MessageRequestMode.PULL
    default_pop_share_queue_num: int = -1
    # transactional messages (half messages, check-back; see docs/transactions.md)
    transaction_timeout_ms: int = 6_000
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = 60_000
    reject_transaction_message: bool = False
    transaction_batch_max_messages: int = 100_000
    transaction_batch_max_bytes: int = 64 * 1024 * 1024
    # timer messages and recall (RocketMQ 5's timer keys and recallMessageEnable; docs/rocketmq5.md)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1_000
    timer_max_delay_sec: int = 259_200
    timer_roll_window_slot: int = 172_800
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_flush_interval_ms: int = 1_000
    recall_message_enable: bool = False
    # the gRPC proxy started with the broker (RocketMQ 5's local mode; docs/grpc.md)
    enable_proxy: bool = False
    grpc_server_port: int = 8081
    # slave duties and slave reads (docs/replication.md "Slave metadata and reads")
    access_message_in_memory_max_ratio_percent: int = 40
    offset_check_in_slave: bool = False
    slave_sync_interval_ms: int = 10_000  # rocketq key; RocketMQ's SlaveSynchronize runs every 10 s
    # controller mode (RocketMQ 5, RIP-44; docs/failover.md): the controller decides role and id
    enable_controller_mode: bool = False
    controller_addr: tuple[str, ...] = ()
    broker_heartbeat_interval_ms: int = 1_000
    controller_heart_beat_timeout_ms: int = 10_000
    send_heartbeat_timeout_ms: int = 1_000
    sync_broker_metadata_period_ms: int = 5_000
    check_sync_state_set_period_ms: int = 5_000
    broker_election_priority: int = 2**31 - 1
    all_ack_in_sync_state_set: bool = False
    ha_max_time_slave_not_catchup_ms: int = 15_000
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    # DLedger mode (RocketMQ 4.5's DLedger CommitLog keys; docs/dledger.md): the group elects its master
    enable_dleger_commit_log: bool = False
    dleger_group: str = ""
    dleger_peers: str = ""
    dleger_self_id: str = ""
    preferred_leader_id: str = ""
    # memory bounds of the remoting port against hostile clients (docs/security.md)
    write_buffer_high_water_mark: int = limits_defaults.DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK
    write_buffer_low_water_mark: int = limits_defaults.DEFAULT_WRITE_BUFFER_LOW_WATER_MARK
    server_max_inflight_requests_per_connection: int = 1024
    server_max_pending_frame_bytes: int = limits_defaults.DEFAULT_MAX_PENDING_FRAME_BYTES
    server_max_pending_frame_bytes_total: int = limits_defaults.DEFAULT_MAX_PENDING_FRAME_BYTES_TOTAL
    # TLS on the remoting and HA ports (the tls.* keys of RocketMQ's TlsSystemConfig; docs/security.md)
    tls: TlsConfig = field(default_factory=TlsConfig)
    # Prometheus metrics (metricsExporterType=PROM, RocketMQ 5's keys; docs/observability.md)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # plain ACL (rocketq.broker.acl_wiring, docs/security.md): verify requests against aclFilePath
    # ("" = $ROCKETMQ_HOME/conf/plain_acl.yml); the broker signs its own requests with the keys
    acl_enable: bool = False
    acl_file_path: str = ""
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    # raw camelCase store keys, converted by config_loader.build_store_config()
    store_options: tuple[tuple[str, str], ...] = ()
    #: the file the broker was started with (``mqbroker -c``): UPDATE_BROKER_CONFIG rewrites it
    #: (rocketq.broker.processor.broker_config); None: ``<storePathRootDir>/config/broker.properties``
    config_file: str | None = None

    def __post_init__(self) -> None:
        _check(bool(self.broker_name.strip()), "brokerName", "must not be empty")
        _check(self.broker_id >= 0, "brokerId", f"must be >= 0, got {self.broker_id}")
        _check(0 <= self.listen_port <= 65535, "listenPort", f"must be 0..65535, got {self.listen_port}")
        _check(0 <= self.broker_permission <= 15, "brokerPermission", "must be a 4-bit perm value")
        bad_trace_topic = validate_topic(self.msg_trace_topic_name)
        _check(bad_trace_topic is None, "msgTraceTopicName", str(bad_trace_topic))
        self._check_controller_mode()
        self._check_dleger()
        self._check_replication()
        try:
            self.connection_limits()
        except ClientError as exc:
            raise BrokerConfigError("writeBufferHighWaterMark", str(exc)) from None
        inflight = self.server_max_inflight_requests_per_connection
        _check(inflight > 0, "serverMaxInflightRequestsPerConnection", "must be > 0")
        _check(self.max_message_size > 0, "maxMessageSize", "must be > 0")
        _check(1 <= self.default_topic_queue_nums <= 1024, "defaultTopicQueueNums", "must be 1..1024")
        for key, value in (
            ("sendMessageThreadPoolNums", self.send_message_thread_pool_nums),
            ("pullMessageThreadPoolNums", self.pull_message_thread_pool_nums),
            ("sendThreadPoolQueueCapacity", self.send_thread_pool_queue_capacity),
            ("pullThreadPoolQueueCapacity", self.pull_thread_pool_queue_capacity),
            ("queryThreadPoolQueueCapacity", self.query_thread_pool_queue_capacity),
            ("maxSuspendedPulls", self.max_suspended_pulls),
            ("maxTransferCountOnMessageInMemory", self.max_transfer_count_on_message_in_memory),
            ("maxTransferBytesOnMessageInMemory", self.max_transfer_bytes_on_message_in_memory),
            ("flushDelayOffsetInterval", self.flush_delay_offset_interval_ms),
            ("transactionTimeOut", self.transaction_timeout_ms),
            ("transactionCheckMax", self.transaction_check_max),
            ("transactionCheckInterval", self.transaction_check_interval_ms),
            ("transactionBatchMaxMessages", self.transaction_batch_max_messages),
            ("transactionBatchMaxBytes", self.transaction_batch_max_bytes),
            ("slaveSyncInterval", self.slave_sync_interval_ms),
            ("timerPrecisionMs", self.timer_precision_ms),
            ("timerMaxDelaySec", self.timer_max_delay_sec),
            ("timerRollWindowSlot", self.timer_roll_window_slot),
            ("mappedFileSizeTimerLog", self.mapped_file_size_timer_log),
            ("timerFlushIntervalMs", self.timer_flush_interval_ms),
        ):
            _check(value >= 1, key, f"must be >= 1, got {value}")
        timer_log = self.mapped_file_size_timer_log
        _check(timer_log >= 4096, "mappedFileSizeTimerLog", f"must be >= 4096 bytes, got {timer_log}")
        for key, value in (
            ("reviveQueueNum", self.revive_queue_num),
            ("reviveInterval", self.revive_interval_ms),
            ("maxPopPollingSize", self.max_pop_polling_size),
        ):
            _check(value >= 1, key, f"must be >= 1, got {value}")
        _check(
            0 <= self.pop_from_retry_probability <= 100,
            "popFromRetryProbability",
            f"must be 0..100 (percent), got {self.pop_from_retry_probability}",
        )
        _check(
            0 <= self.access_message_in_memory_max_ratio_percent <= 100,
            "accessMessageInMemoryMaxRatio",
            f"must be 0..100, got {self.access_message_in_memory_max_ratio_percent}",
        )
        for addr in self.namesrv_addr:
            _check(is_host_port(addr), "namesrvAddr", f"{addr!r} is not host:port")

    def _check_controller_mode(self) -> None:
        if not self.enable_controller_mode:
            return
        _check(bool(self.controller_addr), "controllerAddr", "is required with enableControllerMode=true")
        for key, value in (
            ("brokerHeartbeatInterval", self.broker_heartbeat_interval_ms),
            ("controllerHeartBeatTimeoutMills", self.controller_heart_beat_timeout_ms),
            ("sendHeartbeatTimeoutMillis", self.send_heartbeat_timeout_ms),
            ("syncBrokerMetadataPeriod", self.sync_broker_metadata_period_ms),
            ("checkSyncStateSetPeriod", self.check_sync_state_set_period_ms),
            ("haMaxTimeSlaveNotCatchup", self.ha_max_time_slave_not_catchup_ms),
            ("inSyncReplicas", self.in_sync_replicas),
            ("minInSyncReplicas", self.min_in_sync_replicas),
        ):
            _check(value >= 1, key, f"must be >= 1, got {value}")
        _check(
            self.controller_heart_beat_timeout_ms > self.broker_heartbeat_interval_ms,
            "controllerHeartBeatTimeoutMills",
            f"must exceed brokerHeartbeatInterval ({self.broker_heartbeat_interval_ms} ms)",
        )
        _check(
            self.min_in_sync_replicas <= self.in_sync_replicas,
            "minInSyncReplicas",
            f"must not exceed inSyncReplicas ({self.in_sync_replicas})",
        )
        for addr in self.controller_addr:
            _check(is_host_port(addr), "controllerAddr", f"{addr!r} is not host:port")

    def _check_dleger(self) -> None:
        if not self.enable_dleger_commit_log:
            return
        _check(
            not self.enable_controller_mode,
            "enableDLegerCommitLog",
            "cannot be combined with enableControllerMode=true: choose one way of electing the master",
        )
        for key, value in (
            ("dLegerGroup", self.dleger_group),
            ("dLegerPeers", self.dleger_peers),
            ("dLegerSelfId", self.dleger_self_id),
        ):
            _check(bool(value.strip()), key, "is required with enableDLegerCommitLog=true")
        _check(
            self.broker_heartbeat_interval_ms >= 1,
            "brokerHeartbeatInterval",
            f"must be >= 1, got {self.broker_heartbeat_interval_ms}",
        )
        parse_peers(
            self.dleger_peers, self_id=self.dleger_self_id, preferred_leader_id=self.preferred_leader_id
        )

    @property
    def fast_listen_port_derived(self) -> bool:
        """True when the VIP port is RocketMQ's ``listenPort - 2``, not a configured one."""
        return self.fast_listen_port < 0

    def vip_listen_port(self) -> int:
        """The port the VIP channel binds (0: a free one)."""
        if self.fast_listen_port >= 0:
            return self.fast_listen_port
        return self.listen_port - 2 if self.listen_port >= 2 else 0

    def _check_replication(self) -> None:
        _check(
            -1 <= self.fast_listen_port <= 65535,
            "fastListenPort",
            f"must be 0..65535 (or -1: listenPort - 2), got {self.fast_listen_port}",
        )
        if self.ha_listen_port < 0:
            object.__setattr__(self, "ha_listen_port", self.listen_port + 1 if self.listen_port else 0)
        port = self.ha_listen_port
        _check(0 <= port <= 65535, "haListenPort", f"must be 0..65535, got {port}")
        _check(
            not self.listen_port or self.ha_listen_port != self.listen_port,
            "haListenPort",
            f"must differ from listenPort ({self.listen_port})",
        )
        if self.enable_controller_mode or self.enable_dleger_commit_log:
            pass  # role and id come from the controller (controller_mode/) or the group (dledger/)
        elif self.broker_role is BrokerRole.SLAVE:
            _check(
                self.broker_id > 0,
                "brokerId",
                f"a SLAVE needs brokerId > 0 (0 is the master), got {self.broker_id}",
            )
        else:
            _check(
                self.broker_id == 0,
                "brokerId",
                f"brokerRole={self.broker_role.value} is a master and needs brokerId=0, got {self.broker_id}",
            )
        _check(
            not self.ha_master_address or is_host_port(self.ha_master_address),
            "haMasterAddress",
            f"{self.ha_master_address!r} is not host:port",
        )
        for key, value in (
            ("haSendHeartbeatInterval", self.ha_send_heartbeat_interval_ms),
            ("haHousekeepingInterval", self.ha_housekeeping_interval_ms),
            ("haTransferBatchSize", self.ha_transfer_batch_size),
            ("haMaxGapNotInSync", self.ha_max_gap_not_in_sync),
        ):
            _check(value >= 1, key, f"must be >= 1, got {value}")
        _check(self.ha_transfer_batch_size <= 64 * 1024 * 1024, "haTransferBatchSize", "must be <= 64 MiB")
        heartbeat_ms = self.ha_send_heartbeat_interval_ms
        _check(
            self.ha_housekeeping_interval_ms > heartbeat_ms,
            "haHousekeepingInterval",
            f"must exceed haSendHeartbeatInterval ({self.ha_send_heartbeat_interval_ms} ms), "
            "else idle connections are dropped between heartbeats",
        )

    @property
    def is_master(self) -> bool:
        return self.broker_role is not BrokerRole.SLAVE

    def connection_limits(self) -> ConnectionLimits:
        """The remoting port's memory bounds (``writeBufferHighWaterMark`` ... keys)."""
        return ConnectionLimits(
            write_buffer_high_water_mark=self.write_buffer_high_water_mark,
            write_buffer_low_water_mark=self.write_buffer_low_water_mark,
            max_pending_frame_bytes=self.server_max_pending_frame_bytes,
            max_pending_frame_bytes_total=self.server_max_pending_frame_bytes_total,
        )

    @property
    def broker_addr(self) -> str:
        """The advertised ``brokerIP1:listenPort`` (after a port-0 bind, the server's real port)."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def register_period_s(self) -> float:
        """``registerNameServerPeriod`` clamped to RocketMQ's 10–60 s window."""
        return min(max(self.register_name_server_period_ms, 10_000), 60_000) / 1000.0


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise BrokerConfigError(key, message)


def is_host_port(addr: str) -> bool:
    """True for ``host:port`` with a port in 1..65535."""
    host, sep, port = addr.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)
