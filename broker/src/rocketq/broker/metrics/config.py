"""The metrics keys of ``broker.conf`` (RocketMQ 5 names), as one frozen :class:`MetricsConfig`.

``metricsExporterType`` is DISABLE (default) or PROM; RocketMQ's other two exporters (OTLP_GRPC,
LOG) are refused with a clear message rather than silently ignored.  ``metricsPromExporterHost``
"" means the broker's ``brokerIP1``, as in RocketMQ; ``metricsPromExporterPort`` defaults to 5557,
and 0 (rocketq) picks a free port, logged at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.broker.errors import BrokerConfigError
from rocketq.server.metrics import DEFAULT_PROM_EXPORTER_PORT, MetricsExporterType, parse_exporter_type

__all__ = ["METRICS_KEYS", "MetricsConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsConfig:
    """Whether and where the broker serves Prometheus metrics."""

    exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    #: "" = the broker's brokerIP1 (RocketMQ's rule)
    prom_exporter_host: str = ""
    #: 0 = a free port (rocketq), logged once listening
    prom_exporter_port: int = DEFAULT_PROM_EXPORTER_PORT

    def __post_init__(self) -> None:
        if not 0 <= self.prom_exporter_port <= 65535:
            raise BrokerConfigError(
                "metricsPromExporterPort", f"must be in 0..65535, got {self.prom_exporter_port}"
            )

    @property
    def enabled(self) -> bool:
        return self.exporter_type is MetricsExporterType.PROM

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetricsConfig:
        """Build from the camelCase ``METRICS_KEYS`` found in ``props``."""
        kwargs: dict[str, object] = {}
        if "metricsExporterType" in props:
            try:
                kwargs["exporter_type"] = parse_exporter_type(props["metricsExporterType"])
            except ValueError as exc:
                raise BrokerConfigError("metricsExporterType", str(exc)) from None
        if "metricsPromExporterHost" in props:
            kwargs["prom_exporter_host"] = props["metricsPromExporterHost"].strip()
        if "metricsPromExporterPort" in props:
            raw = props["metricsPromExporterPort"].strip()
            if not raw.isdigit():
                raise BrokerConfigError("metricsPromExporterPort", f"expected a port number, got {raw!r}")
            kwargs["prom_exporter_port"] = int(raw)
        return cls(**kwargs)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        return {
            "metricsExporterType": str(self.exporter_type),
            "metricsPromExporterHost": self.prom_exporter_host,
            "metricsPromExporterPort": str(self.prom_exporter_port),
        }


#: the camelCase keys :meth:`MetricsConfig.from_properties` reads
METRICS_KEYS = frozenset({"metricsExporterType", "metricsPromExporterHost", "metricsPromExporterPort"})
