"""The ``broker.conf`` key table: every camelCase key the broker accepts, where it goes, its default.

A RocketMQ user's ``broker.conf`` must work unchanged, so this is the one place that says which of
its keys rocketq understands and how each value is parsed.  Broker keys (:data:`BROKER_KEYS`)
become typed fields of :class:`~rocketq.broker.config.BrokerConfig`; store keys are those of the
store's ``StoreConfig.from_broker_conf`` (:func:`store_keys`), kept as raw strings and converted by
:func:`~rocketq.broker.config_loader.build_store_config`; the ``tls.*`` and metrics keys belong to
``TlsConfig`` and ``MetricsConfig``; :data:`IGNORED_KEYS` are accepted and do nothing.  Some keys
are both broker and store keys (``maxMessageSize``: the send processor checks it to give a precise
remark, the store enforces it too).  :func:`broker_conf_keys` lists all of them with their
defaults, and :func:`broker_properties` renders a configuration back as keys.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketq.broker.config import BrokerConfig, BrokerRole, PopOrderBlockScope, is_host_port
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.metrics.config import METRICS_KEYS, MetricsConfig
from rocketq.broker.store.config import FlushDiskType, store_conf_defaults
from rocketq.client.remoting.assignment import MessageRequestMode
from rocketq.client.transport.tls import TLS_KEYS, TlsConfig

__all__ = [
    "BROKER_KEYS",
    "IGNORED_KEYS",
    "REFUSED_DLEGER_KEYS",
    "STORE_BASE_KEYS",
    "BrokerConfKey",
    "KeyOwner",
    "broker_conf_keys",
    "broker_properties",
    "store_keys",
]

# ----------------------------------------------------------------------------- value parsers


def _parse_int(key: str, raw: str) -> int:
    text = raw.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        raise BrokerConfigError(key, f"expected an integer, got {raw!r}")
    return int(text)


def _parse_bool(key: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise BrokerConfigError(key, f"expected true or false, got {raw!r}")
    return text == "true"


def _parse_str(key: str, raw: str) -> str:
    return raw.strip()


def _parse_addr_list(key: str, raw: str) -> tuple[str, ...]:
    # RocketMQ separates NameServer addresses with ';'; a ',' is a common mistake, accept it too.
    parts = tuple(p.strip() for p in re.split(r"[;,]", raw) if p.strip())
    for part in parts:
        if not is_host_port(part):
            raise BrokerConfigError(key, f"{part!r} is not host:port")
    return parts


def _enum_parser(enum_type: type[enum.Enum]) -> Callable[[str, str], Any]:
    def parse(key: str, raw: str) -> Any:
        name = raw.strip().upper()
        try:
            return enum_type[name]
        except KeyError:
            choices = ", ".join(m.name for m in enum_type)
            raise BrokerConfigError(key, f"expected one of {choices}, got {raw!r}") from None

    return parse


#: camelCase key -> (BrokerConfig attribute, parser of its value)
BROKER_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "brokerClusterName": ("broker_cluster_name", _parse_str),
    "brokerName": ("broker_name", _parse_str),
    "brokerId": ("broker_id", _parse_int),
    "brokerIP1": ("broker_ip1", _parse_str),
    "brokerIP2": ("broker_ip2", _parse_str),
    "bindAddress": ("bind_address", _parse_str),
    "listenPort": ("listen_port", _parse_int),
    "writeBufferHighWaterMark": ("write_buffer_high_water_mark", _parse_int),
    "writeBufferLowWaterMark": ("write_buffer_low_water_mark", _parse_int),
    "serverMaxInflightRequestsPerConnection": ("server_max_inflight_requests_per_connection", _parse_int),
    "serverMaxPendingFrameBytes": ("server_max_pending_frame_bytes", _parse_int),
    "serverMaxPendingFrameBytesTotal": ("server_max_pending_frame_bytes_total", _parse_int),
    "haListenPort": ("ha_listen_port", _parse_int),
    "fastListenPort": ("fast_listen_port", _parse_int),
    "namesrvAddr": ("namesrv_addr", _parse_addr_list),
    "brokerRole": ("broker_role", _enum_parser(BrokerRole)),
    "brokerPermission": ("broker_permission", _parse_int),
    "haMasterAddress": ("ha_master_address", _parse_str),
    "haSendHeartbeatInterval": ("ha_send_heartbeat_interval_ms", _parse_int),
    "haHousekeepingInterval": ("ha_housekeeping_interval_ms", _parse_int),
    "haTransferBatchSize": ("ha_transfer_batch_size", _parse_int),
    "haMaxGapNotInSync": ("ha_max_gap_not_in_sync", _parse_int),
    "haSlaveFallbehindMax": ("ha_max_gap_not_in_sync", _parse_int),
    "haSlaveTruncateDivergent": ("ha_slave_truncate_divergent", _parse_bool),
    "slaveReadEnable": ("slave_read_enable", _parse_bool),
    "storePathRootDir": ("store_path_root_dir", _parse_str),
    "flushDiskType": ("flush_disk_type", _enum_parser(FlushDiskType)),
    "maxMessageSize": ("max_message_size", _parse_int),
    "autoCreateTopicEnable": ("auto_create_topic_enable", _parse_bool),
    "traceTopicEnable": ("trace_topic_enable", _parse_bool),
    "msgTraceTopicName": ("msg_trace_topic_name", _parse_str),
    "autoCreateSubscriptionGroup": ("auto_create_subscription_group", _parse_bool),
    "defaultTopicQueueNums": ("default_topic_queue_nums", _parse_int),
    "registerNameServerPeriod": ("register_name_server_period_ms", _parse_int),
    "registerBrokerTimeoutMills": ("register_broker_timeout_ms", _parse_int),
    "longPollingEnable": ("long_polling_enable", _parse_bool),
    "shortPollingTimeMills": ("short_polling_time_ms", _parse_int),
    "maxSuspendedPulls": ("max_suspended_pulls", _parse_int),
    "maxTransferCountOnMessageInMemory": ("max_transfer_count_on_message_in_memory", _parse_int),
    "maxTransferBytesOnMessageInMemory": ("max_transfer_bytes_on_message_in_memory", _parse_int),
    "sendMessageThreadPoolNums": ("send_message_thread_pool_nums", _parse_int),
    "pullMessageThreadPoolNums": ("pull_message_thread_pool_nums", _parse_int),
    "sendThreadPoolQueueCapacity": ("send_thread_pool_queue_capacity", _parse_int),
    "pullThreadPoolQueueCapacity": ("pull_thread_pool_queue_capacity", _parse_int),
    "queryThreadPoolQueueCapacity": ("query_thread_pool_queue_capacity", _parse_int),
    "waitTimeMillsInSendQueue": ("wait_time_ms_in_send_queue", _parse_int),
    "waitTimeMillsInPullQueue": ("wait_time_ms_in_pull_queue", _parse_int),
    "channelExpiredTimeout": ("channel_expired_timeout_ms", _parse_int),
    "rebalanceLockMaxLiveTime": ("rebalance_lock_max_live_time_ms", _parse_int),
    "flushConsumerOffsetInterval": ("flush_consumer_offset_interval_ms", _parse_int),
    "flushDelayOffsetInterval": ("flush_delay_offset_interval_ms", _parse_int),
    "enablePropertyFilter": ("enable_property_filter", _parse_bool),
    "reviveQueueNum": ("revive_queue_num", _parse_int),
    "reviveInterval": ("revive_interval_ms", _parse_int),
    "enableRetryTopicV2": ("enable_retry_topic_v2", _parse_bool),
    "retrieveMessageFromPopRetryTopicV1": ("retrieve_message_from_pop_retry_topic_v1", _parse_bool),
    "popFromRetryProbability": ("pop_from_retry_probability", _parse_int),
    "maxPopPollingSize": ("max_pop_polling_size", _parse_int),
    "initPopOffsetByCheckMsgInMem": ("init_pop_offset_by_check_msg_in_mem", _parse_bool),
    "popResponseReturnActualRetryTopic": ("pop_response_return_actual_retry_topic", _parse_bool),
    "popOrderBlockScope": ("pop_order_block_scope", _enum_parser(PopOrderBlockScope)),
    "serverLoadBalancerEnable": ("server_load_balancer_enable", _parse_bool),
    "defaultMessageRequestMode": ("default_message_request_mode", _enum_parser(MessageRequestMode)),
    "defaultPopShareQueueNum": ("default_pop_share_queue_num", _parse_int),
    "transactionTimeOut": ("transaction_timeout_ms", _parse_int),
    "transactionCheckMax": ("transaction_check_max", _parse_int),
    "transactionCheckInterval": ("transaction_check_interval_ms", _parse_int),
    "rejectTransactionMessage": ("reject_transaction_message", _parse_bool),
    "transactionBatchMaxMessages": ("transaction_batch_max_messages", _parse_int),
    "transactionBatchMaxBytes": ("transaction_batch_max_bytes", _parse_int),
    "timerWheelEnable": ("timer_wheel_enable", _parse_bool),
    "timerPrecisionMs": ("timer_precision_ms", _parse_int),
    "timerMaxDelaySec": ("timer_max_delay_sec", _parse_int),
    "timerRollWindowSlot": ("timer_roll_window_slot", _parse_int),
    "mappedFileSizeTimerLog": ("mapped_file_size_timer_log", _parse_int),
    "timerFlushIntervalMs": ("timer_flush_interval_ms", _parse_int),
    "recallMessageEnable": ("recall_message_enable", _parse_bool),
    "enableProxy": ("enable_proxy", _parse_bool),
    "grpcServerPort": ("grpc_server_port", _parse_int),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio_percent", _parse_int),
    "offsetCheckInSlave": ("offset_check_in_slave", _parse_bool),
    "slaveSyncInterval": ("slave_sync_interval_ms", _parse_int),
    "enableControllerMode": ("enable_controller_mode", _parse_bool),
    "controllerAddr": ("controller_addr", _parse_addr_list),
    "brokerHeartbeatInterval": ("broker_heartbeat_interval_ms", _parse_int),
    "controllerHeartBeatTimeoutMills": ("controller_heart_beat_timeout_ms", _parse_int),
    "sendHeartbeatTimeoutMillis": ("send_heartbeat_timeout_ms", _parse_int),
    "syncBrokerMetadataPeriod": ("sync_broker_metadata_period_ms", _parse_int),
    "checkSyncStateSetPeriod": ("check_sync_state_set_period_ms", _parse_int),
    "brokerElectionPriority": ("broker_election_priority", _parse_int),
    "allAckInSyncStateSet": ("all_ack_in_sync_state_set", _parse_bool),
    "haMaxTimeSlaveNotCatchup": ("ha_max_time_slave_not_catchup_ms", _parse_int),
    "inSyncReplicas": ("in_sync_replicas", _parse_int),
    "minInSyncReplicas": ("min_in_sync_replicas", _parse_int),
    "enableDLegerCommitLog": ("enable_dleger_commit_log", _parse_bool),
    "dLegerGroup": ("dleger_group", _parse_str),
    "dLegerPeers": ("dleger_peers", _parse_str),
    "dLegerSelfId": ("dleger_self_id", _parse_str),
    "preferredLeaderId": ("preferred_leader_id", _parse_str),
    "aclEnable": ("acl_enable", _parse_bool),
    "aclFilePath": ("acl_file_path", _parse_str),
    "accessKey": ("access_key", _parse_str),
    "secretKey": ("secret_key", _parse_str),
}

#: Keys RocketMQ users commonly have in broker.conf that rocketq accepts but does not act on.
IGNORED_KEYS = frozenset(
    {
        "filterSupportRetry",
        "enableCalcFilterBitMap",
        "clusterTopicEnable",
        "brokerTopicEnable",
        "transientStorePoolEnable",
        "vipChannelEnabled",
        "compressedRegister",
        "forceRegister",
        "serverWorkerThreads",
        "serverSelectorThreads",
        "waitTimeMillsInHeartbeatQueue",
    }
)

#: RocketMQ's DLedger keys rocketq does not act on: refused at load with their name (docs/dledger.md)
REFUSED_DLEGER_KEYS = {
    "isEnableBatchPush": "DLedger's batch push is not implemented: rocketq replicates the CommitLog "
    "with its HA transfer, which streams batches anyway",
    "enableBatchPush": "DLedger's batch push is not implemented: rocketq replicates the CommitLog "
    "with its HA transfer, which streams batches anyway",
}


#: Store keys the broker reads itself (typed fields of BrokerConfig, handed to the store too).
STORE_BASE_KEYS = frozenset({"storePathRootDir", "flushDiskType", "maxMessageSize"})


def store_keys() -> frozenset[str]:
    """The camelCase keys the store's ``StoreConfig.from_broker_conf`` understands."""
    return frozenset(store_conf_defaults())


class KeyOwner(enum.Enum):
    """Which configuration object a ``broker.conf`` key sets."""

    BROKER = "broker"
    STORE = "store"
    TLS = "tls"
    METRICS = "metrics"
    IGNORED = "ignored"


@dataclass(frozen=True, kw_only=True, slots=True)
class BrokerConfKey:
    """One accepted ``broker.conf`` key with its default as it would be written in the file."""

    key: str
    default: str
    owner: KeyOwner


def broker_conf_keys() -> tuple[BrokerConfKey, ...]:
    """Every key ``broker.conf`` accepts, sorted, with its default (``""``: none, or ignored).

    ``brokerName`` defaults to the host name and ``storePathRootDir`` to ``~/store``: their default
    here is the one of the machine this runs on.
    """
    keys: dict[str, BrokerConfKey] = {}
    for key, default in store_conf_defaults().items():
        keys[key] = BrokerConfKey(key=key, default=default, owner=KeyOwner.STORE)
    defaults = _field_defaults(BrokerConfig)
    for key, (attr, _) in BROKER_KEYS.items():
        keys[key] = BrokerConfKey(key=key, default=format_value(defaults[attr]), owner=KeyOwner.BROKER)
    tls = TlsConfig()
    for key, name in TLS_KEYS.items():
        keys[key] = BrokerConfKey(key=key, default=format_value(getattr(tls, name)), owner=KeyOwner.TLS)
    metrics = MetricsConfig().to_properties()
    for key in METRICS_KEYS:
        keys[key] = BrokerConfKey(key=key, default=metrics[key], owner=KeyOwner.METRICS)
    for key in IGNORED_KEYS:
        keys[key] = BrokerConfKey(key=key, default="", owner=KeyOwner.IGNORED)
    return tuple(keys[key] for key in sorted(keys))


def _field_defaults(cls: type[BrokerConfig]) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def broker_properties(config: BrokerConfig) -> dict[str, str]:
    """The configuration as camelCase ``broker.conf`` properties (``mqbroker -p``, GET_BROKER_CONFIG)."""
    out: dict[str, str] = {}
    for key, (attr, _) in BROKER_KEYS.items():
        out[key] = format_value(getattr(config, attr))
    if config.secret_key:
        out["secretKey"] = "***"  # never shown (mqbroker -p, GET_BROKER_CONFIG)
    out.update(dict(config.store_options))
    out.update(config.tls.to_properties())
    out.update(config.metrics.to_properties())
    return dict(sorted(out.items()))


def format_value(value: object) -> str:
    """A typed value as ``broker.conf`` text (``true``, enum values, ``;``-separated lists)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return ";".join(str(v) for v in value)
    return str(value)
