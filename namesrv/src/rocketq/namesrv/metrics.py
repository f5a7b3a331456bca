"""Prometheus metrics of the NameServer (``metricsExporterType=PROM``; docs/observability.md).

The same keys as the broker's (RocketMQ 5 names, parsed by :mod:`rocketq.server.metrics`):
``metricsExporterType`` DISABLE (default) or PROM, ``metricsPromExporterHost`` ("" = the
NameServer's bind address) and ``metricsPromExporterPort`` (5557; 0 = a free port).

:class:`NamesrvMetrics` counts requests by code in the remoting server's ``request_check`` hook
(one dict update per request, on the event loop) and serves a private ``CollectorRegistry``
with prometheus_client's threaded WSGI server.  The route registry takes its own lock on every
read, so the collector reads it directly from the exporter's thread at scrape time: live broker
addresses per cluster, topics, route requests, registrations.  A broker that stops or is killed
only changes those numbers; the exporter keeps answering.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.namesrv.config import NamesrvConfig
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.namesrv.routeinfo import RouteInfoManager
from rocketq.server import Channel
from rocketq.server.metrics import PromExporter, metrics_line
from rocketq.server.remoting_server import RequestCheck

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["NamesrvCollector", "NamesrvMetrics"]

log = logging.getLogger("rocketq.namesrv")


class NamesrvCollector:
    """The NameServer's families, read from the route registry at scrape time."""

    def __init__(self, node_id: str, route_info: RouteInfoManager, requests: dict[int, int]) -> None:
        self.node = {"node_type": "namesrv", "node_id": node_id}
        self.route_info = route_info
        self.requests = requests

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        keys, values = list(self.node), list(self.node.values())
        info = self.route_info.cluster_info()
        brokers = GaugeMetricFamily(
            "rocketq_namesrv_broker_number",
            "Registered broker addresses per cluster",
            labels=[*keys, "cluster"],
        )
        for cluster, names in info.cluster_addr_table.items():
            routes = [info.broker_addr_table[n] for n in names if n in info.broker_addr_table]
            brokers.add_metric([*values, cluster], sum(len(r.broker_addrs) for r in routes))
        yield brokers
        topics = GaugeMetricFamily("rocketq_namesrv_topic_number", "Topics with a route", labels=keys)
        topics.add_metric(values, len(self.route_info.all_topics()))
        yield topics
        requests = dict(self.requests)  # one C-level copy: the loop may add a code meanwhile
        route = CounterMetricFamily(
            "rocketq_namesrv_route_requests_total", "GET_ROUTEINFO_BY_TOPIC requests", labels=keys
        )
        route.add_metric(values, requests.get(RequestCode.GET_ROUTEINFO_BY_TOPIC, 0))
        yield route
        registrations = CounterMetricFamily(
            "rocketq_namesrv_broker_registrations_total", "REGISTER_BROKER requests", labels=keys
        )
        registrations.add_metric(values, requests.get(RequestCode.REGISTER_BROKER, 0))
        yield registrations
        by_code = CounterMetricFamily(
            "rocketq_namesrv_requests_total", "Requests per request code", labels=[*keys, "request_code"]
        )
        for code, count in sorted(requests.items()):
            by_code.add_metric([*values, str(code)], count)
        yield by_code


class NamesrvMetrics:
    """Request counting plus the HTTP exporter of one NameServer."""

    def __init__(self, config: NamesrvConfig, route_info: RouteInfoManager) -> None:
        self.config = config
        self.route_info = route_info
        self.requests: dict[int, int] = {}
        self._exporter = PromExporter()
        self.address: tuple[str, int] | None = None

    def request_check(self, inner: RequestCheck | None) -> RequestCheck:
        """A ``request_check`` that counts the request, then runs ``inner`` (the ACL) if any."""
        requests = self.requests

        def counted(cmd: RemotingCommand, channel: Channel) -> RemotingCommand | None:
            requests[cmd.code] = requests.get(cmd.code, 0) + 1
            return inner(cmd, channel) if inner is not None else None

        return counted

    async def start(self, node_id: str) -> tuple[str, int]:
        """Listen on ``metricsPromExporterHost:metricsPromExporterPort``; returns ``(host, port)``."""
        host = self.config.metrics_prom_exporter_host or self.config.bind_address
        try:
            self.address = self._exporter.start(
                NamesrvCollector(node_id, self.route_info, self.requests),
                host,
                self.config.metrics_prom_exporter_port,
            )
        except OSError as exc:
            raise NamesrvConfigError(exc.strerror) from exc
        log.info(metrics_line(*self.address))
        return self.address

    async def stop(self) -> None:
        await self._exporter.stop()
