"""The metrics keys of ``broker.conf`` (RocketMQ 5 names), as one frozen :class:`MetricsConfig`.

``metricsExporterType`` is DISABLE (default) or PROM; RocketMQ's other two exporters (OTLP_GRPC,
LOG) are refused with a clear message rather than silently ignored.  ``metricsPromExporterHost``
"" means the broker's ``brokerIP1``, as in RocketMQ; ``metricsPromExporterPort`` defaults to 5557,
and 0 (rocketq) picks a free port, logged at start.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from rocketq.broker.errors import BrokerConfigError

__all__ = [
    "DEFAULT_PROM_EXPORTER_PORT",
    "METRICS_KEYS",
    "MetricsConfig",
    "MetricsExporterType",
    "parse_exporter_type",
]

DEFAULT_PROM_EXPORTER_PORT = 5557


class MetricsExporterType(enum.StrEnum):
    DISABLE = "DISABLE"
    PROM = "PROM"


_UNSUPPORTED = ("OTLP_GRPC", "LOG")


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
