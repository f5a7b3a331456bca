"""The broker's Prometheus families, built when Prometheus scrapes (a pull-time collector).

Two steps per scrape.  :func:`take_snapshot` runs on the broker's event loop (the exporter hops
there) and copies what lives in loop-confined tables: the recorder's counters, topic and group
counts, connections, each group's committed and pulled offsets, executor queue sizes and the
HA connections.  :class:`BrokerCollector` then builds the families on the exporter's thread from
that copy plus thread-safe store reads (queue max offsets and store times for the lag, CommitLog
offsets, disk usage), so the loop spends microseconds per scrape, not the lag arithmetic.

Names and labels follow RocketMQ 5 (BrokerMetricsConstant, RemotingMetricsConstant) where the
metric exists there; the store's own are named ``rocketq_store_*``.  Every family carries the
``cluster``, ``node_type`` and ``node_id`` (brokerName) labels, as RocketMQ's do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketq.broker.metrics.lag import GroupTopic, QueueReader, calculate_lag
from rocketq.broker.metrics.recorder import Buckets, RecorderSnapshot
from rocketq.broker.offset_manager import TOPIC_GROUP_SEPARATOR
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.clean import disk_usage_percent
from rocketq.client.remoting.vocabulary import (
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
    REVIVE_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    is_system_topic,
)

__all__ = ["BrokerCollector", "BrokerSnapshot", "ReplicaLag", "StoreView", "take_snapshot"]

#: RocketMQ's MixAll.CID_RMQ_SYS_PREFIX, compared lower-case
_SYSTEM_GROUP_PREFIX = "cid_" + SYSTEM_TOPIC_PREFIX
_CONSUME_MODES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}
_REMOTING = "remoting"


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    """One slave connected to this master's HA port."""

    slave: str
    lag_bytes: int
    lag_seconds: float
    in_sync: bool


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """Loop-confined broker state, copied on the loop for one scrape."""

    recorder: RecorderSnapshot
    permission: int
    topic_number: int
    group_number: int
    watermarks: Mapping[str, int]
    producer_connections: Mapping[tuple[str, str], int]
    consumer_connections: Mapping[tuple[str, str, str, str], int]
    lag_items: Sequence[GroupTopic]
    replicas: Sequence[ReplicaLag]


class StoreView(QueueReader, Protocol):
    """The store reads a scrape makes (``exporter.MessageStoreView`` adapts the MessageStore)."""

    @property
    def max_phy_offset(self) -> int: ...

    @property
    def min_phy_offset(self) -> int: ...

    @property
    def dispatch_behind_bytes(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    @property
    def root_dir(self) -> str: ...


def is_system_group(group: str) -> bool:
    return group.lower().startswith(_SYSTEM_GROUP_PREFIX)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def take_snapshot(
    ctx: BrokerContext, recorder: RecorderSnapshot, replicas: Sequence[ReplicaLag] = ()
) -> BrokerSnapshot:
    """Copy the loop-confined tables (call on the broker's event loop)."""
    producers: dict[tuple[str, str], int] = {}
    for group in ctx.producers.groups():
        for producer in ctx.producers.get(group).values():
            key = (producer.language.lower(), str(producer.version))
            producers[key] = producers.get(key, 0) + 1
    consumers: dict[tuple[str, str, str, str], int] = {}
    groups = set(ctx.groups.groups())
    for group in ctx.consumers.groups():
        groups.add(group)
        group_info = ctx.consumers.get(group)
        if group_info is None:
            continue
        mode = _CONSUME_MODES.get(group_info.consume_type, group_info.consume_type.lower())
        for channel_info in group_info.channels.values():
            ckey = (group, channel_info.language.lower(), str(channel_info.version), mode)
            consumers[ckey] = consumers.get(ckey, 0) + 1
    committed = _committed_offsets(ctx)
    topics_of: dict[str, set[str]] = {group: set() for group in groups}
    for group, topic in committed:
        topics_of.setdefault(group, set()).add(topic)
    for group in groups:
        online = ctx.consumers.get(group)
        if online is not None:
            topics_of[group].update(online.subscriptions)
    items: list[GroupTopic] = []
    for group, topics in sorted(topics_of.items()):
        for topic in sorted(topics):
            tc = ctx.topics.select(topic)
            items.append(
                GroupTopic(
                    group=group,
                    topic=topic,
                    queue_nums=tc.read_queue_nums if tc is not None else 0,
                    committed=committed.get((group, topic), {}),
                    pulled=recorder.pull_offsets.get((group, topic), {}),
                )
            )
    return BrokerSnapshot(
        recorder=recorder,
        permission=ctx.broker_permission,
        topic_number=len(ctx.topics),
        group_number=len(ctx.groups.groups()),
        watermarks={
            "send": ctx.send_executor.pending,
            "pull": ctx.pull_executor.pending,
            "query_message": ctx.query_executor.pending,
            "pull_hold": ctx.hold.held_count,
        },
        producer_connections=producers,
        consumer_connections=consumers,
        lag_items=items,
        replicas=tuple(replicas),
    )


def _committed_offsets(ctx: BrokerContext) -> dict[tuple[str, str], dict[int, int]]:
    """(group, topic) -> queue id -> committed offset, in one pass over the offset table."""
    table = ctx.offsets.encode().get("offsetTable")
    out: dict[tuple[str, str], dict[int, int]] = {}
    if isinstance(table, dict):
        for key, queues in table.items():
            topic, _, group = str(key).rpartition(TOPIC_GROUP_SEPARATOR)
            out[(group, topic)] = {int(q): int(o) for q, o in queues.items()}
    return out


class _Families:
    """Families sharing the node labels, in the order they are declared."""

    def __init__(self, node: Mapping[str, str]) -> None:
        self.node_keys = list(node)
        self.node_values = list(node.values())
        self.out: list[Metric] = []

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=[*self.node_keys, *labels])
        self.out.append(family)
        return family

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=[*self.node_keys, *labels])
        self.out.append(family)
        return family

    def histogram(self, name: str, doc: str, labels: Sequence[str] = ()) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=[*self.node_keys, *labels])
        self.out.append(family)
        return family

    def values(self, *labels: str) -> list[str]:
        return [*self.node_values, *labels]


def _observe(family: HistogramMetricFamily, labels: list[str], buckets: Buckets) -> None:
    family.add_metric(labels, buckets.cumulative(), buckets.total)


class BrokerCollector(Collector):
    """Builds every broker family from a :class:`BrokerSnapshot` and the store."""

    def __init__(
        self,
        node: Mapping[str, str],
        snapshot: Callable[[], BrokerSnapshot],
        store: StoreView,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.node = dict(node)
        self.snapshot = snapshot
        self.store = store
        self.clock_ms = clock_ms

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        f = _Families(self.node)
        self._stats(f, snap)
        self._messages(f, snap.recorder)
        self._connections(f, snap)
        self._lag(f, snap)
        self._transactions(f, snap.recorder)
        self._pop(f, snap.recorder)
        self._revive_lag(f, snap)
        self._store(f, snap)
        yield from f.out

    def _stats(self, f: _Families, snap: BrokerSnapshot) -> None:
        watermark = f.gauge(
            "rocketmq_processor_watermark", "Requests queued per request processor", ["processor"]
        )
        for processor, queued in snap.watermarks.items():
            watermark.add_metric(f.values(processor), queued)
        f.gauge(
            "rocketmq_broker_permission", "Broker permission (PermName bits: 2 read, 4 write)"
        ).add_metric(f.values(), snap.permission)
        f.gauge("rocketmq_topic_number", "Topics in the broker's topic table").add_metric(
            f.values(), snap.topic_number
        )
        f.gauge("rocketmq_consumer_group_number", "Subscription groups in the broker").add_metric(
            f.values(), snap.group_number
        )

    def _messages(self, f: _Families, rec: RecorderSnapshot) -> None:
        in_labels = ["topic", "message_type", "is_system"]
        messages_in = f.counter("rocketmq_messages_in_total", "Messages accepted by sends", in_labels)
        bytes_in = f.counter(
            "rocketmq_throughput_in_total", "Stored bytes of messages accepted by sends", in_labels
        )
        size = f.histogram("rocketmq_message_size", "Stored size of incoming messages (bytes)", in_labels)
        for (topic, message_type), stats in sorted(rec.messages_in.items()):
            labels = f.values(topic, message_type, _bool(is_system_topic(topic)))
            messages_in.add_metric(labels, stats.messages)
            bytes_in.add_metric(labels, stats.bytes)
            _observe(size, labels, stats.size)
        out_labels = ["topic", "consumer_group", "is_retry", "is_system"]
        messages_out = f.counter("rocketmq_messages_out_total", "Messages returned by pulls", out_labels)
        bytes_out = f.counter("rocketmq_throughput_out_total", "Stored bytes returned by pulls", out_labels)
        for (topic, group), out in sorted(rec.messages_out.items()):
            labels = f.values(
                topic,
                group,
                _bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                _bool(is_system_topic(topic) or is_system_group(group)),
            )
            messages_out.add_metric(labels, out.messages)
            bytes_out.add_metric(labels, out.bytes)
        rpc = f.histogram(
            "rocketmq_rpc_latency",
            "Time to answer a request, per request and response code (milliseconds)",
            ["protocol_type", "request_code", "response_code"],
        )
        for (request_code, response_code), buckets in sorted(rec.rpc.items()):
            answer = str(response_code) if response_code >= 0 else "oneway"
            _observe(rpc, f.values(_REMOTING, str(request_code), answer), buckets)

    def _connections(self, f: _Families, snap: BrokerSnapshot) -> None:
        producers = f.gauge(
            "rocketmq_producer_connections", "Producer connections", ["language", "version", "protocol_type"]
        )
        for (language, version), count in sorted(snap.producer_connections.items()):
            producers.add_metric(f.values(language, version, _REMOTING), count)
        consumers = f.gauge(
            "rocketmq_consumer_connections",
            "Consumer connections",
            ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
        )
        for (group, language, version, mode), count in sorted(snap.consumer_connections.items()):
            consumers.add_metric(
                f.values(group, language, version, mode, _REMOTING, _bool(is_system_group(group))), count
            )

    def _lag(self, f: _Families, snap: BrokerSnapshot) -> None:
        labels = ["consumer_group", "topic", "is_retry", "is_system"]
        lag = f.gauge(
            "rocketmq_consumer_lag_messages", "Stored messages the group has not acknowledged", labels
        )
        latency = f.gauge(
            "rocketmq_consumer_lag_latency", "Age of the oldest unacknowledged message (milliseconds)", labels
        )
        inflight = f.gauge(
            "rocketmq_consumer_inflight_messages", "Pulled but unacknowledged messages", labels
        )
        queueing = f.gauge(
            "rocketmq_consumer_queueing_latency",
            "Age of the oldest message not yet pulled (milliseconds)",
            labels,
        )
        ready = f.gauge("rocketmq_consumer_ready_messages", "Stored messages not yet pulled", labels)
        # POP groups: popped, not yet acked or revived (PopInflightMessageCounter), added to the pulls'
        pop_inflight = dict(snap.recorder.pop.in_flight) if snap.recorder.pop is not None else {}
        for row in calculate_lag(self.store, snap.lag_items, self.clock_ms()):
            values = f.values(
                row.group,
                row.topic,
                _bool(row.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                _bool(is_system_topic(row.topic) or is_system_group(row.group)),
            )
            lag.add_metric(values, row.lag_messages)
            latency.add_metric(values, row.lag_latency_ms)
            inflight.add_metric(values, row.inflight_messages + pop_inflight.pop((row.group, row.topic), 0))
            queueing.add_metric(values, row.queueing_latency_ms)
            ready.add_metric(values, row.ready_messages)
        for (group, topic), count in sorted(pop_inflight.items()):  # POP groups without a lag row
            system = is_system_topic(topic) or is_system_group(group)
            values = f.values(group, topic, _bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)), _bool(system))
            inflight.add_metric(values, count)

    def _transactions(self, f: _Families, rec: RecorderSnapshot) -> None:
        dlq = f.counter(
            "rocketmq_send_to_dlq_messages_total",
            "Messages moved to a group's dead-letter queue",
            ["consumer_group", "topic", "is_system"],
        )
        for (group, topic), count in sorted(rec.dlq.items()):
            dlq.add_metric(f.values(group, topic, _bool(is_system_group(group))), count)
        f.counter("rocketmq_commit_messages_total", "Half messages committed by END_TRANSACTION").add_metric(
            f.values(), rec.commits
        )
        f.counter(
            "rocketmq_rollback_messages_total", "Half messages rolled back by END_TRANSACTION"
        ).add_metric(f.values(), rec.rollbacks)

    def _revive_lag(self, f: _Families, snap: BrokerSnapshot) -> None:
        """rocketmq_pop_revive_lag / _latency per revive queue: records of the revive log past the
        revive service's committed offset (checkpoints still waiting or not yet read), and the age
        of the oldest of them (PopReviveService.getReviveBehindMessages / getReviveBehindMillis)."""
        lag = f.gauge(
            "rocketmq_pop_revive_lag", "Revive-log records the revive service has not finished", ["queue_id"]
        )
        latency = f.gauge(
            "rocketmq_pop_revive_latency",
            "Age of the oldest unfinished revive-log record (milliseconds)",
            ["queue_id"],
        )
        now = self.clock_ms()
        for item in snap.lag_items:
            if item.group != REVIVE_GROUP or not item.topic.startswith(REVIVE_TOPIC_PREFIX):
                continue
            for queue_id, committed in sorted(item.committed.items()):
                behind = max(int(self.store.get_max_offset_in_queue(item.topic, queue_id)) - committed, 0)
                stored = self.store.get_store_time(item.topic, queue_id, committed) if behind else 0
                lag.add_metric(f.values(str(queue_id)), behind)
                latency.add_metric(f.values(str(queue_id)), max(now - stored, 0) if stored > 0 else 0)

    def _pop(self, f: _Families, rec: RecorderSnapshot) -> None:
        """RocketMQ 5's PopMetricsManager counters and the store's rocketmq_timer_* figures."""
        pop = rec.pop
        if pop is not None:
            revive_in = f.counter(
                "rocketmq_pop_revive_in_message_total",
                "POP checkpoints (CK) and acks (ACK) put into the revive log",
                ["consumer_group", "topic", "revive_message_type", "put_status"],
            )
            for (group, topic, kind, status), n in sorted(pop.revive_in.items()):
                revive_in.add_metric(f.values(group, topic, kind, status), n)
            revive_out = f.counter(
                "rocketmq_pop_revive_out_message_total",
                "POP checkpoints and acks read by the revive service",
                ["consumer_group", "topic", "queue_id", "revive_message_type"],
            )
            for (group, topic, qid, kind), n in sorted(pop.revive_out.items()):
                revive_out.add_metric(f.values(group, topic, str(qid), kind), n)
            retry = f.counter(
                "rocketmq_pop_revive_retry_messages_total",
                "Un-acked POP messages put back (POP retry topic or DLQ) by the revive service",
                ["consumer_group", "topic", "put_status"],
            )
            for (group, topic, status), n in sorted(pop.revive_retry.items()):
                retry.add_metric(f.values(group, topic, status), n)
        timer = rec.timer
        if timer is not None:
            f.gauge(
                "rocketmq_timer_enqueue_lag", "Timer messages stored but not yet in the timer wheel"
            ).add_metric(f.values(), timer.enqueue_lag)
            f.gauge(
                "rocketmq_timer_dequeue_latency",
                "How far the timer wheel's read time is behind now (milliseconds)",
            ).add_metric(f.values(), timer.dequeue_latency_ms)
            f.counter("rocketmq_timer_enqueue_total", "Timer messages put into the wheel").add_metric(
                f.values(), timer.enqueued
            )
            f.counter("rocketmq_timer_dequeue_total", "Timer messages delivered from the wheel").add_metric(
                f.values(), timer.delivered
            )

    def _store(self, f: _Families, snap: BrokerSnapshot) -> None:
        store = self.store
        max_offset = store.max_phy_offset
        f.gauge(
            "rocketq_store_commitlog_size_bytes", "Bytes of CommitLog kept (max - min offset)"
        ).add_metric(f.values(), max(max_offset - store.min_phy_offset, 0))
        f.gauge(
            "rocketq_store_commitlog_max_offset", "CommitLog end offset (bytes ever appended)"
        ).add_metric(f.values(), max_offset)
        f.gauge(
            "rocketq_store_disk_usage_ratio", "Used fraction of the filesystem holding the store (0..1)"
        ).add_metric(f.values(), disk_usage_percent(store.root_dir) / 100.0)
        f.gauge(
            "rocketq_store_flush_behind_bytes", "CommitLog bytes appended but not yet flushed to disk"
        ).add_metric(f.values(), max(max_offset - store.flushed_offset, 0))
        f.gauge(
            "rocketq_store_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched to ConsumeQueues and index",
        ).add_metric(f.values(), max(store.dispatch_behind_bytes, 0))
        _observe(
            f.histogram(
                "rocketq_store_flush_latency_seconds", "Duration of CommitLog flushes that wrote data"
            ),
            f.values(),
            snap.recorder.flush,
        )
        reads = f.counter(
            "rocketq_store_pull_reads_total",
            "Pull reads by estimated page-cache residency (hot: within the recent CommitLog tail)",
            ["residency"],
        )
        reads.add_metric(f.values("hot"), snap.recorder.reads_hot)
        reads.add_metric(f.values("cold"), snap.recorder.reads_cold)
        lag_bytes = f.gauge(
            "rocketq_store_replication_lag_bytes", "Bytes a slave is behind this master", ["slave"]
        )
        lag_seconds = f.gauge(
            "rocketq_store_replication_lag_seconds",
            "Time since a lagging slave was last caught up",
            ["slave"],
        )
        in_sync = f.gauge("rocketq_store_replication_in_sync", "1 if the slave is in sync", ["slave"])
        for replica in snap.replicas:
            lag_bytes.add_metric(f.values(replica.slave), replica.lag_bytes)
            lag_seconds.add_metric(f.values(replica.slave), replica.lag_seconds)
            in_sync.add_metric(f.values(replica.slave), 1 if replica.in_sync else 0)
