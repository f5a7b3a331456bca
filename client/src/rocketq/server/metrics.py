"""The metrics-exporter vocabulary of every rocketq server (RocketMQ 5's ``metricsExporterType`` keys).

The broker and the NameServer read the same three keys: ``metricsExporterType`` DISABLE (the
default) or PROM, ``metricsPromExporterHost`` and ``metricsPromExporterPort`` (5557 by default;
0 picks a free port).  RocketMQ's other two exporters, OTLP_GRPC and LOG, are refused with the
remedy rather than silently ignored.  Each server turns the ``ValueError`` of
:func:`parse_exporter_type` into its own configuration error naming the key.

:class:`PromExporter` is the one HTTP endpoint they all serve for PROM: prometheus_client's WSGI
server on a thread of its own, started on a collector, announced by :func:`metrics_line`.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # prometheus_client is imported only when metricsExporterType=PROM
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.registry import Collector

__all__ = [
    "DEFAULT_PROM_EXPORTER_PORT",
    "METRICS_LINE",
    "MetricsExporterType",
    "PromExporter",
    "metrics_line",
    "parse_exporter_type",
]

METRICS_LINE = "Prometheus metrics exporter listening on http://{host}:{port}/metrics"

DEFAULT_PROM_EXPORTER_PORT = 5557
_UNSUPPORTED = ("OTLP_GRPC", "LOG")


class MetricsExporterType(enum.StrEnum):
    DISABLE = "DISABLE"
    PROM = "PROM"


def parse_exporter_type(raw: str) -> MetricsExporterType:
    """``metricsExporterType``: DISABLE or PROM; ValueError with the remedy for anything else."""
    name = raw.strip().upper()
    if name in _UNSUPPORTED:
        raise ValueError(
            f"metricsExporterType={name} is not supported by rocketq; use PROM (Prometheus, scraped over "
            "HTTP on metricsPromExporterPort) or DISABLE"
        )
    try:
        return MetricsExporterType[name]
    except KeyError:
        raise ValueError(f"metricsExporterType must be DISABLE or PROM, got {raw!r}") from None


def metrics_line(host: str, port: int) -> str:
    """The log line announcing an exporter (``rocketq.client.launcher.METRICS_RE`` parses it)."""
    return METRICS_LINE.format(host=host, port=port)


class PromExporter:
    """``/metrics`` over HTTP for one collector; :meth:`start` binds, :meth:`stop` closes."""

    def __init__(self) -> None:
        self._server: WSGIServer | None = None
        self.address: tuple[str, int] | None = None

    def start(self, collector: Collector, host: str, port: int) -> tuple[str, int]:
        """Listen on ``host:port`` (0: a free port); OSError naming the keys when it cannot."""
        from prometheus_client import CollectorRegistry, start_wsgi_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            self._server, _ = start_wsgi_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot serve metrics on {host}:{port} ({exc.strerror}): set metricsPromExporterPort to a "
                "free port (0 = any) or metricsExporterType=DISABLE",
            ) from exc
        self.address = (host, int(self._server.server_address[1]))
        return self.address  # the server logs metrics_line(*address) with its own logger

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(_shutdown, server)


def _shutdown(server: WSGIServer) -> None:
    server.shutdown()
    server.server_close()
