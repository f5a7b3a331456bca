"""What every request processor needs: the broker's managers, its store and its executors.

One :class:`BrokerContext` is built by the server (``BrokerController``) and shared by the
processors; unit tests build one around a real store in a temporary directory.  The helpers here
are the few answers every processor family gives the same way (parsing a header into a typed
object or a ready error response, the peer address of a channel).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TypeVar

from rocketq.broker.client_manager import ConsumerManager, ProducerManager
from rocketq.broker.config import BrokerConfig
from rocketq.broker.executor import BoundedExecutor
from rocketq.broker.long_polling import PullRequestHoldService
from rocketq.broker.metrics.recorder import BrokerMetricsRecorder
from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.rebalance_lock import RebalanceLockManager
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.subscription_manager import SubscriptionGroupManager
from rocketq.broker.topic_manager import TopicConfigManager
from rocketq.broker.transaction.service import TransactionalMessageService
from rocketq.client.errors import HeaderError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import CommandHeader
from rocketq.client.remoting.vocabulary import PERM_RW, Perm
from rocketq.server import Channel

__all__ = ["BrokerContext", "BrokerStats", "parse_header", "peer_host"]

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
