"""What every request processor needs: the broker's managers, its store and its executors.

One :class:`BrokerContext` is built by :func:`build_context` around a started store, for the
server (``BrokerController``) and for unit tests, and shared by the processors; with a config
directory its tables are loaded from RocketMQ's ``config/*.json`` files and persisted there.  The helpers here
are the few answers every processor family gives the same way (parsing a header into a typed
object or a ready error response, the peer address of a channel).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from rocketq.broker.client_manager import ConsumerManager, ProducerManager
from rocketq.broker.config import BrokerConfig
from rocketq.broker.executor import BoundedExecutor
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.metadata import (
    CONSUMER_OFFSET_JSON,
    SUBSCRIPTION_GROUP_JSON,
    TOPICS_JSON,
    load_json_file,
    persist_json_file,
)
from rocketq.broker.metrics.pop import PopMetricsRecorder
from rocketq.broker.metrics.recorder import BrokerMetricsRecorder
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.pop.order_info import CONSUMER_ORDER_INFO_JSON, ConsumerOrderInfoManager
from rocketq.broker.pop.polling import PopLongPolling
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.schedule.delay import parse_delay_levels
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.stats_items import BrokerStatsManager, SamplingPeriods
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.topic_manager import TopicConfigManager
from rocketq.broker.transaction.service import TransactionalMessageService
from rocketq.client.errors import HeaderError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CommandHeader
from rocketq.client.remoting.vocabulary import PERM_RW, Perm
from rocketq.server import Channel

__all__ = ["BrokerContext", "BrokerStats", "build_context", "parse_header", "peer_host"]

_H = TypeVar("_H", bound=CommandHeader)
DEFAULT_DELAY_LEVELS_MS: tuple[int, ...] = (
    1_000,
    5_000,
    10_000,
    30_000,
    60_000,
    120_000,
    180_000,
    240_000,
    300_000,
    360_000,
    420_000,
    480_000,
    540_000,
    600_000,
    1_200_000,
    1_800_000,
    3_600_000,
    7_200_000,
)


@dataclass(slots=True)
class BrokerStats:
    """Counters reported by GET_BROKER_RUNTIME_INFO (since boot)."""

    boot_timestamp_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    put_messages: int = 0
    put_bytes: int = 0
    get_found: int = 0
    get_messages: int = 0
    busy_rejects: int = 0


@dataclass(kw_only=True, slots=True)
class BrokerContext:
    """Shared state of one broker: its config, store, managers and executors."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    groups: SubscriptionGroupManager
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    hold: PullRequestHoldService
    #: POP requests and notifications waiting for messages (rocketq.broker.pop)
    pop_polling: PopLongPolling
    send_executor: BoundedExecutor
    pull_executor: BoundedExecutor
    query_executor: BoundedExecutor
    stats: BrokerStats = field(default_factory=BrokerStats)
    broker_permission: int = PERM_RW
    #: delay of each level in ms, level 1 first (the store's ``messageDelayLevel``)
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS
    #: the ScheduleMessageService (None on a slave or in tests without one)
    schedule: ScheduleMessageService | None = None
    #: the TransactionalMessageService (None on a slave or in tests without one)
    txn: TransactionalMessageService | None = None
    #: the metrics counters (metricsExporterType=PROM; None when metrics are off)
    metrics: BrokerMetricsRecorder | None = None
    #: POP in-flight counts, revive-log traffic and the timer's figures, kept with metrics off too
    #: (mqadmin popStatus, the metrics exporter; rocketq.broker.metrics.pop)
    pop_stats: PopMetricsRecorder = field(default_factory=PopMetricsRecorder)
    #: orderly-pop state (config/consumerOrderInfo.json), persisted with the consumer offsets
    pop_order: ConsumerOrderInfoManager = field(default_factory=ConsumerOrderInfoManager)
    #: waits until the slaves hold the CommitLog up to an offset (SYNC_MASTER, controller mode;
    #: PUT_OK at once on other roles): POP checkpoints and acks are answered after it, as sends are
    replicated: Callable[[int], Awaitable[PutMessageStatus]] | None = None
    #: the stats items of VIEW_BROKER_STATS_DATA (mqadmin statsAll; rocketq.broker.stats_items)
    stats_items: BrokerStatsManager = field(default_factory=BrokerStatsManager)

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.config.broker_ip1, self.config.listen_port)

    @property
    def broker_addr(self) -> str:
        return self.config.broker_addr

    @property
    def writeable(self) -> bool:
        return bool(self.broker_permission & Perm.WRITE) and self.config.is_master

    @property
    def readable(self) -> bool:
        return bool(self.broker_permission & Perm.READ)

    def with_port(self, port: int) -> None:
        """Record the port actually bound (``listenPort=0``) in the config."""
        self.config = replace(self.config, listen_port=port)


def build_context(
    config: BrokerConfig,
    store: MessageStore,
    loop: asyncio.AbstractEventLoop,
    *,
    config_dir: str | None = None,
    on_ids_changed: Callable[[str, list[Channel]], None] | None = None,
) -> BrokerContext:
    """The managers and executors around an already started store (used by the server and tests).

    With ``config_dir`` the metadata is loaded from (and persisted to) RocketMQ's ``config/`` files.
    """

    def persister(name: str) -> Callable[[Mapping[str, object]], None] | None:
        if config_dir is None:
            return None
        path = os.path.join(config_dir, name)
        return lambda doc: persist_json_file(path, doc)

    topics = TopicConfigManager(config, persist=persister(TOPICS_JSON))
    groups = SubscriptionGroupManager(
        auto_create=config.auto_create_subscription_group, persist=persister(SUBSCRIPTION_GROUP_JSON)
    )
    offsets = ConsumerOffsetManager()
    pop_order = ConsumerOrderInfoManager(
        scope=config.pop_order_block_scope,
        path=None if config_dir is None else os.path.join(config_dir, CONSUMER_ORDER_INFO_JSON),
    )
    pop_order.load()
    delay_levels_ms = tuple(parse_delay_levels(store.config.message_delay_level))
    if config_dir is not None:
        topics.load(load_json_file(os.path.join(config_dir, TOPICS_JSON)))
        groups.load(load_json_file(os.path.join(config_dir, SUBSCRIPTION_GROUP_JSON)))
        offsets.load(load_json_file(os.path.join(config_dir, CONSUMER_OFFSET_JSON)))
    return BrokerContext(
        config=config,
        store=store,
        topics=topics,
        offsets=offsets,
        groups=groups,
        consumers=ConsumerManager(
            channel_expired_timeout_ms=config.channel_expired_timeout_ms, on_ids_changed=on_ids_changed
        ),
        producers=ProducerManager(channel_expired_timeout_ms=config.channel_expired_timeout_ms),
        locks=RebalanceLockManager(max_live_time_ms=config.rebalance_lock_max_live_time_ms),
        hold=PullRequestHoldService(loop, max_suspended=config.max_suspended_pulls),
        pop_polling=PopLongPolling(loop, max_polling=config.max_pop_polling_size),
        send_executor=BoundedExecutor(
            "send",
            threads=config.send_message_thread_pool_nums,
            capacity=config.send_thread_pool_queue_capacity,
            max_wait_ms=config.wait_time_ms_in_send_queue,
        ),
        pull_executor=BoundedExecutor(
            "pull",
            threads=config.pull_message_thread_pool_nums,
            capacity=config.pull_thread_pool_queue_capacity,
            max_wait_ms=config.wait_time_ms_in_pull_queue,
        ),
        query_executor=BoundedExecutor("query", threads=2, capacity=config.query_thread_pool_queue_capacity),
        delay_levels_ms=delay_levels_ms,
        pop_order=pop_order,
        stats_items=BrokerStatsManager(config.broker_cluster_name, SamplingPeriods.from_env()),
    )


def parse_header(request: RemotingCommand, header_type: type[_H]) -> _H | RemotingCommand:
    """The typed header, or a SYSTEM_ERROR response naming the bad field (Java's behaviour)."""
    try:
        return header_type.from_ext_fields(request.ext_fields)
    except HeaderError as exc:
        return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))


def peer_host(channel: Channel) -> tuple[str, int]:
    """``(ip, port)`` of a channel's remote address (``("0.0.0.0", 0)`` when unknown)."""
    addr = channel.remote_address or ""
    host, sep, port = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit():
        return ("0.0.0.0", 0)
    return (host or "0.0.0.0", int(port))
