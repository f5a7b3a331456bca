"""Prometheus metrics of real NameServer and broker processes (docs/observability.md "Metrics").

One NameServer and one broker with ``metricsExporterType=PROM`` on free ports (port 0, the
address read from their logs) serve the module; each test scrapes over HTTP and parses the text
with prometheus_client's own parser, so a malformed exposition fails here too.
"""

from __future__ import annotations

import os
import signal
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.consumer import ConsumeFromWhere, LitePullConsumer
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.testing import (
    LocalCluster,
    drain,
    local_cluster,
    spawn_broker,
    start_rocketq_dev,
    wait_for,
)
from rocketq.client.testing.metrics import Samples, parse_samples, total

PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": 0}
NAMESRV_PROM = ("-o", "metricsExporterType=PROM", "-o", "metricsPromExporterPort=0")


def scrape(addr: str | None) -> Samples:
    """Every sample of the exporter at ``addr``: (name, labels) -> value."""
    assert addr, "the server logged no metrics exporter address: is metricsExporterType=PROM applied?"
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return parse_samples(text)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    work = tmp_path_factory.mktemp("metrics")
    with local_cluster(work, broker_conf=PROM, namesrv_args=NAMESRV_PROM) as c:
        yield c


def test_messages_in_grows_by_exactly_the_sent_messages(cluster: LocalCluster) -> None:
    topic = "MetricsInTopic"
    bodies = [b"m" * n for n in (1, 10, 100, 1000, 3000, 50, 7)]
    with Producer(cluster.namesrv_addr, producer_group="metrics-producer") as producer:
        producer.send(Message(topic, b"warm-up: creates the topic"))
        before = scrape(cluster.broker.metrics_addr)
        for body in bodies:
            producer.send(Message(topic, body))
    after = scrape(cluster.broker.metrics_addr)
    grown = total(after, "rocketmq_messages_in_total", topic=topic) - total(
        before, "rocketmq_messages_in_total", topic=topic
    )
    assert grown == len(bodies), f"messages_in grew by {grown}, {len(bodies)} messages were sent"
    assert (
        total(after, "rocketmq_messages_in_total", topic=topic, message_type="normal", is_system="false") > 0
    )
    # rocketmq_throughput_in_total counts stored record bytes (RocketMQ's wroteBytes): read them back
    stored = {m.body: m.total_size for m in _read_all(cluster, topic, "metrics-reader", len(bodies) + 1)}
    bytes_grown = total(after, "rocketmq_throughput_in_total", topic=topic) - total(
        before, "rocketmq_throughput_in_total", topic=topic
    )
    assert bytes_grown == sum(stored[b] for b in bodies)
    assert bytes_grown > sum(map(len, bodies))  # bodies plus each record's header, topic, properties
    sizes = total(after, "rocketmq_message_size_count", topic=topic) - total(
        before, "rocketmq_message_size_count", topic=topic
    )
    assert sizes == len(bodies)
    sends = total(after, "rocketmq_rpc_latency_count", request_code="310", response_code="0") - total(
        before, "rocketmq_rpc_latency_count", request_code="310", response_code="0"
    )
    assert sends >= len(bodies)
    out = scrape(cluster.broker.metrics_addr)
    assert (
        total(out, "rocketmq_messages_out_total", topic=topic, consumer_group="metrics-reader")
        == len(bodies) + 1
    )
    wait_for(
        lambda: total(scrape(cluster.broker.metrics_addr), "rocketq_store_flush_latency_seconds_count") > 0,
        "a CommitLog flush to be observed",
    )
    assert total(out, "rocketq_store_commitlog_size_bytes") > 0
    assert 0 < total(out, "rocketq_store_disk_usage_ratio") <= 1


def _read_all(cluster: LocalCluster, topic: str, group: str, expected: int) -> list[MessageExt]:
    consumer = LitePullConsumer(
        cluster.namesrv_addr,
        consumer_group=group,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.start()
    try:
        got = drain(consumer, expected, 30, poll_ms=1000)
        consumer.commit()
    finally:
        consumer.shutdown()
    assert len(got) == expected, f"read {len(got)} of {expected} messages back"
    return got


def test_stopped_consumer_lag_equals_the_backlog(cluster: LocalCluster) -> None:
    topic, group = "MetricsLagTopic", "metrics-lag-group"
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)
        with Producer(cluster.namesrv_addr, producer_group="metrics-lag-producer") as producer:
            for i in range(6):
                producer.send(Message(topic, f"consumed {i}".encode()))
            _read_all(cluster, topic, group, 6)  # consumed and committed, then the consumer stops
            for i in range(5):
                producer.send(Message(topic, f"backlog {i}".encode()))
        backlog = sum(q.lag for q in admin.consume_stats(group, topic))
    assert backlog == 5
    samples = scrape(cluster.broker.metrics_addr)
    labels = {"consumer_group": group, "topic": topic}
    assert total(samples, "rocketmq_consumer_lag_messages", **labels) == backlog
    # a pull the stopped consumer left parked may still be answered (to nobody) when the backlog
    # arrives: the broker then counts those messages pulled, in flight rather than ready
    ready = total(samples, "rocketmq_consumer_ready_messages", **labels)
    inflight = total(samples, "rocketmq_consumer_inflight_messages", **labels)
    assert ready + inflight == backlog, f"ready {ready} + in flight {inflight} != backlog {backlog}"
    assert total(samples, "rocketmq_consumer_lag_latency", **labels) >= 0
    assert (
        "rocketmq_consumer_lag_messages",
        frozenset({*labels.items(), ("is_retry", "false"), ("is_system", "false"), *_node(cluster)}),
    ) in samples


def _node(cluster: LocalCluster) -> set[tuple[str, str]]:
    return {("cluster", "DefaultCluster"), ("node_type", "broker"), ("node_id", cluster.broker_name)}


def test_namesrv_metrics_show_the_broker(cluster: LocalCluster) -> None:
    samples = scrape(cluster.namesrv.metrics_addr)
    assert total(samples, "rocketq_namesrv_broker_number", cluster="DefaultCluster") == 1
    assert total(samples, "rocketq_namesrv_broker_registrations_total") >= 1
    assert total(samples, "rocketq_namesrv_topic_number") >= 1


def _raw(addr: str, payload: bytes) -> bytes:
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_malformed_scrapes_do_not_break_the_exporters(cluster: LocalCluster) -> None:
    for addr in (cluster.broker.metrics_addr, cluster.namesrv.metrics_addr):
        assert addr is not None
        host, _, port = addr.rpartition(":")
        idle = socket.create_connection((host, int(port)), timeout=5)  # opens, says nothing
        try:
            assert b"400" in _raw(addr, b"\x00\xff\x13garbage that is not HTTP\r\n\r\n")  # Bad request
            _raw(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X" * 70000 + b"\r\n\r\n")  # huge header
            _raw(addr, b"GET /no/such/path HTTP/1.0\r\n\r\n")
            _raw(addr, b"GET /metrics HTTP/1.0\r\n")  # truncated request
            assert scrape(addr), f"the exporter at {addr} stopped answering after malformed requests"
        finally:
            idle.close()


def test_a_killed_broker_does_not_break_the_namesrv_exporter(cluster: LocalCluster, tmp_path: Path) -> None:
    extra = spawn_broker(
        tmp_path,
        cluster.namesrv_addr,
        brokerName="metrics-doomed",
        metricsExporterType="PROM",
        metricsPromExporterPort=0,
    )
    try:
        samples = scrape(cluster.namesrv.metrics_addr)
        assert total(samples, "rocketq_namesrv_broker_number", cluster="DefaultCluster") == 2
        assert scrape(extra.metrics_addr)
        extra.kill9()
        wait_for(
            lambda: total(scrape(cluster.namesrv.metrics_addr), "rocketq_namesrv_broker_number") == 1,
            "the NameServer to drop the killed broker",
        )
    finally:
        extra.kill9()


def test_rocketq_dev_serves_and_prints_metrics(tmp_path: Path) -> None:
    proc, out = start_rocketq_dev("--no-dashboard", cwd=tmp_path)
    try:
        values = out.values({"NAMESRV_METRICS_URL", "BROKER_METRICS_URL"}, 60)
        urls = {key: url for key, url in values.items() if key.endswith("_METRICS_URL")}
        assert any(line.startswith("Metrics:") for line in out.lines())
        for url in urls.values():
            assert url.startswith("http://") and url.endswith("/metrics"), url
            samples = scrape(url.removeprefix("http://").removesuffix("/metrics"))
            assert samples, f"{url} served no samples"
        assert total(scrape(urls["BROKER_METRICS_URL"][7:-8]), "rocketmq_topic_number") > 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
