"""``metricsExporterType=PROM``: the broker's metrics served over HTTP by prometheus_client.

:class:`BrokerMetrics` is what the ``BrokerController`` holds when metrics are on.  It owns the
:class:`~rocketq.broker.metrics.recorder.BrokerMetricsRecorder` (put on ``BrokerContext.metrics``
for the send and pull processors), wraps every request processor in an RPC timer
(``rocketmq_rpc_latency``), observes CommitLog flushes, and serves a private
``CollectorRegistry`` (never prometheus_client's global one) with prometheus_client's threaded
WSGI server on ``metricsPromExporterHost:metricsPromExporterPort``; any path answers the metrics
text, as RocketMQ's exporter does.  A scrape runs on the server's thread: it asks the event loop
for a snapshot of the loop-confined tables (:func:`~rocketq.broker.metrics.collector.take_snapshot`,
bounded by ``SNAPSHOT_TIMEOUT_S``) and does the rest off the loop.  Once listening it logs
``Prometheus metrics exporter listening on http://host:port/metrics`` (the launcher reads it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from typing import TYPE_CHECKING

from rocketq.broker.config import BrokerConfig
from rocketq.broker.ha.replication import Replication
from rocketq.broker.metrics.recorder import RPC_LATENCY_BOUNDS_MS, BrokerMetricsRecorder, Buckets
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.message_store import MessageStore
from rocketq.client.remoting.command import RemotingCommand
from rocketq.server import Channel, Processor
from rocketq.server.metrics import METRICS_LINE, PromExporter, metrics_line

if TYPE_CHECKING:  # prometheus_client is imported only when metricsExporterType=PROM
    from rocketq.broker.metrics.collector import BrokerCollector, BrokerSnapshot, ReplicaLag

__all__ = ["METRICS_LINE", "SNAPSHOT_TIMEOUT_S", "BrokerMetrics", "MessageStoreView", "metrics_line"]

log = logging.getLogger(__name__)

#: how long a scrape waits for the event loop's snapshot before answering an error
SNAPSHOT_TIMEOUT_S = 5.0


class MessageStoreView:
    """The :class:`~rocketq.broker.metrics.collector.StoreView` of a ``MessageStore``."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self._store.get_max_offset_in_queue(topic, queue_id)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        return self._store.get_store_time(topic, queue_id, offset)

    @property
    def max_phy_offset(self) -> int:
        return self._store.max_phy_offset

    @property
    def min_phy_offset(self) -> int:
        return self._store.min_phy_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return self._store.dispatch_behind_bytes

    @property
    def flushed_offset(self) -> int:
        return self._store.commit_log.flushed_where

    @property
    def root_dir(self) -> str:
        return str(self._store.config.store_path_root_dir)


def replica_lags(replication: Replication | None) -> list[ReplicaLag]:
    """The HA connections of a master (call on the loop); empty elsewhere."""
    from rocketq.broker.metrics.collector import ReplicaLag

    master = replication.master if replication is not None else None
    if master is None:
        return []
    _, _, connections = master.runtime_info()
    return [
        ReplicaLag(
            slave=c.addr,
            lag_bytes=max(c.diff, 0),
            lag_seconds=max(c.lag_ms, 0) / 1000.0,
            in_sync=c.in_sync,
        )
        for c in connections
    ]


class BrokerMetrics:
    """The metrics side of one broker: recorder, RPC timers, collector and HTTP exporter."""

    def __init__(self, config: BrokerConfig, ctx: BrokerContext, replication: Replication | None) -> None:
        self.config = config
        self.ctx = ctx
        self.replication = replication
        self.recorder = BrokerMetricsRecorder(pop=ctx.pop_stats)
        ctx.metrics = self.recorder
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exporter = PromExporter()
        self.address: tuple[str, int] | None = None

    def instrument(self, request_code: int, processor: Processor) -> Processor:
        """``processor`` timed into ``rocketmq_rpc_latency`` (response code ``oneway`` when None)."""
        rpc = self.recorder.rpc  # record_rpc, inlined: this runs for every request
        clock = time.perf_counter
        request_code = int(request_code)  # an IntEnum hashes in Python code: slower dict keys
        by_response: dict[int, Buckets] = {}  # this code's entries of ``rpc``, keyed by an int

        async def timed(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
            start = clock()
            response = await processor(request, channel)
            elapsed_ms = (clock() - start) * 1000.0
            response_code = response.code if response is not None else -1
            buckets = by_response.get(response_code)
            if buckets is None:
                buckets = by_response[response_code] = rpc.setdefault(
                    (request_code, response_code), Buckets(RPC_LATENCY_BOUNDS_MS)
                )
            buckets.counts[bisect_left(RPC_LATENCY_BOUNDS_MS, elapsed_ms)] += 1
            buckets.total += elapsed_ms
            return response

        return timed

    def snapshot(self) -> BrokerSnapshot:
        """The loop-confined state, copied on the loop (called from the exporter's thread)."""
        from rocketq.broker.metrics.collector import take_snapshot

        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the broker's event loop is not running")

        async def copy() -> BrokerSnapshot:
            return take_snapshot(self.ctx, self.recorder.snapshot(), replica_lags(self.replication))

        return asyncio.run_coroutine_threadsafe(copy(), loop).result(SNAPSHOT_TIMEOUT_S)

    def collector(self) -> BrokerCollector:
        from rocketq.broker.metrics.collector import BrokerCollector

        node = {
            "cluster": self.config.broker_cluster_name,
            "node_type": "broker",
            "node_id": self.config.broker_name,
        }
        return BrokerCollector(node, self.snapshot, MessageStoreView(self.ctx.store))

    async def start(self) -> tuple[str, int]:
        """Observe flushes and listen; returns the bound ``(host, port)``."""
        self._loop = asyncio.get_running_loop()
        self.ctx.store.commit_log.flush_observer = self.recorder.record_flush
        host = self.config.metrics.prom_exporter_host or self.config.broker_ip1
        self.address = self._exporter.start(self.collector(), host, self.config.metrics.prom_exporter_port)
        log.info(metrics_line(*self.address))
        return self.address

    async def stop(self) -> None:
        self.ctx.store.commit_log.flush_observer = None
        await self._exporter.stop()
