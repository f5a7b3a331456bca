"""Unit tests of the NameServer's metrics: config keys, request counting, the collector."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.namesrv.config import NamesrvConfig, config_from_properties, config_to_properties
from rocketq.namesrv.errors import NamesrvConfigError
from rocketq.namesrv.metrics import NamesrvCollector, NamesrvMetrics
from rocketq.namesrv.routeinfo import RouteInfoManager
from rocketq.server import Channel
from rocketq.server.metrics import MetricsExporterType


def test_metrics_keys_parse_and_print() -> None:
    assert NamesrvConfig().metrics_exporter_type is MetricsExporterType.DISABLE
    config, unknown = config_from_properties({"metricsExporterType": "PROM", "metricsPromExporterPort": "0"})
    assert unknown == []
    assert config.metrics_exporter_type is MetricsExporterType.PROM
    assert config.metrics_prom_exporter_port == 0
    assert "metricsExporterType=PROM\n" in config_to_properties(config)


def test_otlp_is_refused_with_the_remedy() -> None:
    with pytest.raises(NamesrvConfigError, match="use PROM"):
        config_from_properties({"metricsExporterType": "OTLP_GRPC"})
    with pytest.raises(NamesrvConfigError, match="metricsPromExporterPort"):
        config_from_properties({"metricsPromExporterPort": "-1"})


def test_request_check_counts_then_delegates() -> None:
    metrics = NamesrvMetrics(NamesrvConfig(), RouteInfoManager())
    refusal = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC).make_response(
        ResponseCode.NO_PERMISSION
    )
    check = metrics.request_check(
        lambda cmd, ch: refusal if cmd.code == RequestCode.REGISTER_BROKER else None
    )
    channel = Channel.__new__(Channel)  # never used by the check
    assert check(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), channel) is None
    assert check(RemotingCommand.request(RequestCode.REGISTER_BROKER), channel) is refusal
    assert metrics.requests == {RequestCode.GET_ROUTEINFO_BY_TOPIC: 1, RequestCode.REGISTER_BROKER: 1}


def test_collector_counts_brokers_per_cluster_and_requests() -> None:
    routes = RouteInfoManager()
    for name, addr, cluster in (
        ("a", "10.0.0.1:10911", "C1"),
        ("b", "10.0.0.2:10911", "C1"),
        ("x", "1:2", "C2"),
    ):
        routes.register_broker(cluster_name=cluster, broker_addr=addr, broker_name=name, broker_id=0)
    routes.register_broker(cluster_name="C1", broker_addr="10.0.0.3:10911", broker_name="a", broker_id=1)
    requests = {int(RequestCode.GET_ROUTEINFO_BY_TOPIC): 7, int(RequestCode.REGISTER_BROKER): 4}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NamesrvCollector("127.0.0.1:9876", routes, requests))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    node = (("node_id", "127.0.0.1:9876"), ("node_type", "namesrv"))
    assert samples[("rocketq_namesrv_broker_number", (("cluster", "C1"), *node))] == 3
    assert samples[("rocketq_namesrv_broker_number", (("cluster", "C2"), *node))] == 1
    assert samples[("rocketq_namesrv_route_requests_total", node)] == 7
    assert samples[("rocketq_namesrv_broker_registrations_total", node)] == 4
    assert samples[("rocketq_namesrv_requests_total", (*node, ("request_code", "105")))] == 7
