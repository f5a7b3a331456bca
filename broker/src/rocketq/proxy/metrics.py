"""Prometheus metrics of the proxy (``metricsExporterType=PROM`` in ``rmq-proxy.json``).

Names are RocketMQ 5's where its proxy has the metric: ``rocketmq_proxy_up`` (ProxyMetricsManager)
and ``rocketmq_rpc_latency`` (RemotingMetricsManager's histogram, milliseconds, its buckets), here
with ``protocol_type="grpc"``, ``request_code`` the gRPC method (``SendMessage``) and
``response_code`` the name of the ``apache.rocketmq.v2.Code`` of the answer's status (``OK``,
``TOPIC_NOT_FOUND``, ...).  Every sample carries RocketMQ's proxy labels: ``node_type="proxy"``,
``cluster`` (``proxyClusterName``), ``node_id`` (``proxyName``) and ``proxy_mode``.  RocketMQ's
proxy has no gauge of receives in flight; rocketq's is ``rocketq_proxy_receive_in_flight``.

:class:`MetricsInterceptor` is the outermost ``grpc.aio`` server interceptor: it times each call
from the moment the handler runs to its last answer (a ReceiveMessage includes its long polling,
a Telemetry stream its whole life) and reads the code of the first answer that has a status.  A
call that raises is counted as ``INTERNAL_SERVER_ERROR``, one the client cancels as
``CANCELLED``.  The request path adds a dict look-up and a few integer updates on the event loop;
a scrape copies those tables from the exporter's thread (dict copies of ints, no lock needed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

from rocketq.proxy.config import ProxyConfig, ProxyConfigError
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.server.metrics import PromExporter, metrics_line

if TYPE_CHECKING:  # prometheus_client is imported only when metricsExporterType=PROM
    from prometheus_client.core import Metric

__all__ = ["RPC_LATENCY_BOUNDS_MS", "MetricsInterceptor", "ProxyMetrics"]

log = logging.getLogger("rocketq.proxy")

#: RocketMQ's rocketmq_rpc_latency buckets (RemotingMetricsManager.getMetricsView), milliseconds
RPC_LATENCY_BOUNDS_MS: tuple[float, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_CANCELLED = "CANCELLED"
_FAILED = pb.Code.Name(pb.Code.INTERNAL_SERVER_ERROR)


class _Latency:
    """One histogram row: a count per bucket (the last is +Inf) and the sum, in milliseconds."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(RPC_LATENCY_BOUNDS_MS) + 1)
        self.total = 0.0


class ProxyMetrics:
    """The proxy's tables (filled by :class:`MetricsInterceptor`) and their HTTP exporter."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        #: (method, code name) -> latency histogram row
        self.rpc: dict[tuple[str, str], _Latency] = {}
        #: ReceiveMessage calls being served (long polling included)
        self.receives_in_flight = 0
        self._names: dict[int, str] = {}
        self._exporter = PromExporter()
        self.address: tuple[str, int] | None = None

    def code_name(self, code: int) -> str:
        name = self._names.get(code)
        if name is None:
            try:
                name = pb.Code.Name(code)
            except ValueError:  # a code newer than our protos
                name = str(code)
            self._names[code] = name
        return name

    def observe(self, method: str, code: str, elapsed_ms: float) -> None:
        key = (method, code)
        row = self.rpc.get(key)
        if row is None:
            row = self.rpc[key] = _Latency()
        row.counts[bisect_left(RPC_LATENCY_BOUNDS_MS, elapsed_ms)] += 1
        row.total += elapsed_ms

    def labels(self) -> dict[str, str]:
        return {
            "cluster": self.config.proxy_cluster_name,
            "node_type": "proxy",
            "node_id": self.config.proxy_node_id,
            "proxy_mode": self.config.proxy_mode.value.lower(),
        }

    def collect(self) -> Iterator[Metric]:
        """The families of a scrape (prometheus_client's collector protocol; runs on its thread)."""
        from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

        node = self.labels()
        keys, values = list(node), list(node.values())
        up = GaugeMetricFamily("rocketmq_proxy_up", "proxy status", labels=keys)
        up.add_metric(values, 1)
        yield up
        rpc = HistogramMetricFamily(
            "rocketmq_rpc_latency",
            "Time to answer a gRPC call, per method and status code (milliseconds)",
            labels=[*keys, "protocol_type", "request_code", "response_code"],
        )
        for (method, code), row in sorted(dict(self.rpc).items()):
            counts = list(row.counts)
            cumulative, buckets = 0, []
            for bound, count in zip((*RPC_LATENCY_BOUNDS_MS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else str(float(bound)), float(cumulative)))
            rpc.add_metric([*values, "grpc", method, code], buckets, row.total)
        yield rpc
        receiving = GaugeMetricFamily(
            "rocketq_proxy_receive_in_flight",
            "ReceiveMessage calls being served, long polling included",
            labels=keys,
        )
        receiving.add_metric(values, self.receives_in_flight)
        yield receiving

    async def start(self) -> tuple[str, int]:
        """Listen on ``metricsPromExporterHost:metricsPromExporterPort``; returns ``(host, port)``."""
        host = self.config.metrics_prom_exporter_host or self.config.grpc_server_bind_address
        try:
            self.address = self._exporter.start(self, host, self.config.metrics_prom_exporter_port)
        except OSError as exc:
            raise ProxyConfigError(exc.strerror) from exc
        log.info(metrics_line(*self.address))
        return self.address

    async def stop(self) -> None:
        await self._exporter.stop()


def _status_code(answer: Any) -> int | None:
    """The code of an answer's ``status`` (None: the answer has none, e.g. a message of a stream)."""
    try:
        has = answer.HasField("status")
    except ValueError:  # a type without a status field
        return None
    return int(answer.status.code) if has else None


class MetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Times every call of MessagingService into :attr:`ProxyMetrics.rpc`."""

    def __init__(self, metrics: ProxyMetrics) -> None:
        self.metrics = metrics
        #: the wrapped handler of each method, built once (keyed by the handler grpc gives us)
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        full = handler_call_details.method
        cached = self._wrapped.get(full)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(full.rsplit("/", 1)[-1], handler)
        self._wrapped[full] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        metrics, clock = self.metrics, time.perf_counter
        kinds = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                start, code = clock(), _FAILED
                try:
                    answer = await inner(request, context)
                    number = _status_code(answer)
                    code = "OK" if number is None else metrics.code_name(number)
                    return answer
                except asyncio.CancelledError:
                    code = _CANCELLED
                    raise
                finally:
                    metrics.observe(method, code, (clock() - start) * 1000.0)

            return grpc.unary_unary_rpc_method_handler(unary, **kinds)
        streaming: Callable[..., AsyncIterator[Any]] | None = handler.unary_stream or handler.stream_stream
        if streaming is None:
            return handler
        inner_stream = streaming
        receive = method == "ReceiveMessage"

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            start, code, seen = clock(), _FAILED, None
            if receive:
                metrics.receives_in_flight += 1
            try:
                async for answer in inner_stream(request, context):
                    if seen is None:
                        seen = _status_code(answer)
                    yield answer
                code = "OK" if seen is None else metrics.code_name(seen)
            except (asyncio.CancelledError, GeneratorExit):
                code = _CANCELLED
                raise
            finally:
                if receive:
                    metrics.receives_in_flight -= 1
                metrics.observe(method, code, (clock() - start) * 1000.0)

        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(stream, **kinds)
        return grpc.stream_stream_rpc_method_handler(stream, **kinds)
