"""Prometheus metrics of the broker (docs/observability.md "Metrics").

``config`` holds RocketMQ 5's ``metricsExporterType`` / ``metricsPromExporterHost`` /
``metricsPromExporterPort`` keys; ``recorder`` the few counters the request path bumps (plain
ints, no prometheus_client on the hot path); ``lag`` the consumer-lag arithmetic; ``collector`` turns
all of it, plus the managers, the store and replication, into Prometheus families at scrape time;
``exporter`` serves them over HTTP.  Only ``exporter`` and ``collector`` import prometheus_client,
and only when ``metricsExporterType=PROM``.
"""
