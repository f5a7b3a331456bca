"""The metrics-exporter vocabulary of every rocketq server (RocketMQ 5's ``metricsExporterType`` keys).

The broker and the NameServer read the same three keys: ``metricsExporterType`` DISABLE (the
default) or PROM, ``metricsPromExporterHost`` and ``metricsPromExporterPort`` (5557 by default;
0 picks a free port).  RocketMQ's other two exporters, OTLP_GRPC and LOG, are refused with the
remedy rather than silently ignored.  Each server turns the ``ValueError`` of
:func:`parse_exporter_type` into its own configuration error naming the key.
"""

from __future__ import annotations

import enum

__all__ = ["DEFAULT_PROM_EXPORTER_PORT", "MetricsExporterType", "parse_exporter_type"]

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
