"""Unit tests of the broker's metrics: config keys, counters, the lag arithmetic, the collector's
exposition, and the exporter of an in-process broker scraped over HTTP."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from rocketq.broker.config import BrokerConfig
from rocketq.broker.config_keys import broker_properties
from rocketq.broker.config_loader import config_from_properties
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.metrics.collector import BrokerCollector, BrokerSnapshot, ReplicaLag
from rocketq.broker.metrics.config import MetricsConfig
from rocketq.broker.metrics.lag import GroupTopic, calculate_lag
from rocketq.broker.metrics.recorder import BrokerMetricsRecorder, Buckets, MessageType
from rocketq.broker.server import BrokerController
from rocketq.broker.testing import run_broker
from rocketq.client.remoting.codes import RequestCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketq.client.testing.metrics import parse_samples, pick
from rocketq.client.transport.aio import RemotingClient
from rocketq.server.metrics import MetricsExporterType

# ----------------------------------------------------------------------------- config


def test_metrics_are_off_by_default_and_prom_turns_them_on() -> None:
    assert not BrokerConfig().metrics.enabled
    assert BrokerConfig().metrics.prom_exporter_port == 5557
    config = config_from_properties(
        {
            "metricsExporterType": "prom",
            "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": "0",
        }
    )
    assert config.metrics == MetricsConfig(
        exporter_type=MetricsExporterType.PROM, prom_exporter_host="127.0.0.1", prom_exporter_port=0
    )
    props = broker_properties(config)
    assert props["metricsExporterType"] == "PROM" and props["metricsPromExporterPort"] == "0"


@pytest.mark.parametrize("exporter", ["OTLP_GRPC", "LOG"])
def test_rocketmq_exporters_rocketq_lacks_are_refused_with_the_remedy(exporter: str) -> None:
    with pytest.raises(BrokerConfigError, match="not supported by rocketq; use PROM"):
        config_from_properties({"metricsExporterType": exporter})


@pytest.mark.parametrize(
    ("key", "raw"), [("metricsExporterType", "PROMETHEUS"), ("metricsPromExporterPort", "70000")]
)
def test_bad_metrics_values_name_the_key(key: str, raw: str) -> None:
    with pytest.raises(BrokerConfigError, match=key):
        config_from_properties({key: raw})


# ----------------------------------------------------------------------------- recorder


def test_buckets_are_cumulative_with_le_inclusive() -> None:
    buckets = Buckets((1, 10))
    for v in (0.5, 1, 2, 100):
        buckets.observe(v)
    assert buckets.cumulative() == [("1", 2.0), ("10", 3.0), ("+Inf", 4.0)]
    assert (buckets.count, buckets.total) == (4, 103.5)


def test_recorder_counts_in_out_and_pull_offsets() -> None:
    rec = BrokerMetricsRecorder()
    rec.record_in("T", MessageType.NORMAL, 1, 200)
    rec.record_in("T", MessageType.NORMAL, 4, 8000)  # a batch: one size observation of 2000 bytes
    rec.record_out("G", "T", 3, 17, 2, 400, True)
    rec.record_out("G", "T", 3, 19, 2, 400, None)  # SQL92 read: no residency estimate
    rec.record_out("G", "T", 1, 5, 1, 200, False)
    snap = rec.snapshot()
    rec.record_in("T", MessageType.NORMAL, 1, 1)  # the snapshot is a copy
    stats = snap.messages_in[("T", "normal")]
    assert (stats.messages, stats.bytes) == (5, 8200)
    assert stats.size.cumulative()[:2] == [("1024", 1.0), ("4096", 2.0)]
    assert snap.messages_out[("T", "G")].messages == 5
    assert snap.pull_offsets[("G", "T")] == {3: 19, 1: 5}
    assert (snap.reads_hot, snap.reads_cold) == (1, 1)


def test_record_send_labels_the_message_type_and_skips_group_topics() -> None:
    rec = BrokerMetricsRecorder()
    rec.record_send("T", "T", 1, 100)
    rec.record_send("T", SCHEDULE_TOPIC, 1, 100)
    rec.record_send("T", TRANS_HALF_TOPIC, 3, 300)
    rec.record_send("%RETRY%G", "%RETRY%G", 1, 100)  # a client's retry send: not counted in
    rec.record_send("%RETRY%G", "%DLQ%G", 1, 100)  # its fallback to the DLQ: a DLQ send
    assert {k: v.messages for k, v in rec.messages_in.items()} == {
        ("T", "normal"): 1,
        ("T", "delay"): 1,
        ("T", "transaction"): 3,
    }
    assert rec.dlq == {("G", "%RETRY%G"): 1}


# ----------------------------------------------------------------------------- lag


class FakeQueues:
    def __init__(self, max_offsets: dict[int, int], times: dict[tuple[int, int], int]) -> None:
        self.max_offsets = max_offsets
        self.times = times

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offsets.get(queue_id, 0)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        return self.times.get((queue_id, offset), -1)


def test_lag_sums_the_committed_queues_and_takes_the_oldest_times() -> None:
    store = FakeQueues({0: 10, 1: 4, 2: 7}, {(0, 6): 5_000, (1, 4): 0, (0, 8): 6_000, (2, 1): 1_000})
    items = [
        GroupTopic("G", "T", 3, committed={0: 6, 1: 4}, pulled={0: 8}),  # queue 2 never committed
        GroupTopic("H", "T", 3, committed={}, pulled={}),
    ]
    rows = list(calculate_lag(store, items, now_ms=10_000))
    assert len(rows) == 1, "a group without committed offsets has no row"
    row = rows[0]
    assert (row.lag_messages, row.inflight_messages, row.ready_messages) == (4, 2, 2)
    assert row.lag_latency_ms == 5_000  # the oldest unacknowledged message, queue 0 offset 6
    assert row.queueing_latency_ms == 4_000  # the oldest unpulled one, queue 0 offset 8


def test_a_pull_offset_behind_the_commit_counts_nothing_in_flight() -> None:
    store = FakeQueues({0: 10}, {(0, 7): 1})
    row = next(calculate_lag(store, [GroupTopic("G", "T", 1, committed={0: 7}, pulled={0: 3})], 5))
    assert (row.lag_messages, row.inflight_messages, row.ready_messages) == (3, 0, 3)


# ----------------------------------------------------------------------------- collector


class FakeStore(FakeQueues):
    def __init__(self, root: str) -> None:
        super().__init__({0: 9}, {(0, 4): 1_000})
        self.root = root

    max_phy_offset = 5_000
    min_phy_offset = 1_000
    dispatch_behind_bytes = 120
    flushed_offset = 4_500

    @property
    def root_dir(self) -> str:
        return self.root


def test_collector_exposes_rocketmq_names_and_labels(tmp_path: Path) -> None:
    rec = BrokerMetricsRecorder()
    rec.record_in("Orders", MessageType.DELAY, 2, 600)
    rec.record_out("G", "%RETRY%G", 0, 3, 3, 900, True)
    rec.record_rpc(RequestCode.SEND_MESSAGE_V2, 0, 2.5)
    rec.record_rpc(RequestCode.UPDATE_CONSUMER_OFFSET, -1, 0.1)
    rec.record_dlq("G", "Orders")
    rec.record_end_transaction(True, 3)
    rec.record_end_transaction(False, 1)
    rec.record_flush(0.002)
    snapshot = BrokerSnapshot(
        recorder=rec.snapshot(),
        permission=6,
        topic_number=12,
        group_number=3,
        watermarks={"send": 4, "pull": 0},
        producer_connections={("java", "401"): 2},
        consumer_connections={("G", "python", "401", "push"): 1},
        lag_items=[GroupTopic("G", "Orders", 1, committed={0: 4}, pulled={})],
        replicas=[ReplicaLag("127.0.0.1:5555", 2048, 1.5, False)],
    )
    node = {"cluster": "C", "node_type": "broker", "node_id": "b"}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        BrokerCollector(node, lambda: snapshot, FakeStore(str(tmp_path)), clock_ms=lambda: 3_000)
    )
    samples = parse_samples(generate_latest(registry).decode())
    node_labels = frozenset(node.items())
    in_labels = node_labels | {("topic", "Orders"), ("message_type", "delay"), ("is_system", "false")}
    assert samples[("rocketmq_messages_in_total", in_labels)] == 2
    assert samples[("rocketmq_throughput_in_total", in_labels)] == 600
    assert samples[("rocketmq_message_size_bucket", in_labels | {("le", "1024")})] == 1
    assert pick(samples, "rocketmq_messages_out_total", consumer_group="G", is_retry="true") == [3]
    assert pick(samples, "rocketmq_rpc_latency_count", request_code="310", response_code="0") == [1]
    assert pick(samples, "rocketmq_rpc_latency_count", request_code="15", response_code="oneway") == [1]
    assert pick(samples, "rocketmq_processor_watermark", processor="send") == [4]
    assert pick(samples, "rocketmq_broker_permission") == [6]
    assert pick(samples, "rocketmq_topic_number") == [12]
    assert pick(samples, "rocketmq_producer_connections", language="java", protocol_type="remoting") == [2]
    assert pick(samples, "rocketmq_consumer_connections", consumer_group="G", consume_mode="push") == [1]
    assert pick(samples, "rocketmq_consumer_lag_messages", consumer_group="G", topic="Orders") == [5]
    assert pick(samples, "rocketmq_consumer_lag_latency", consumer_group="G") == [2_000]
    assert pick(samples, "rocketmq_send_to_dlq_messages_total", consumer_group="G") == [1]
    assert pick(samples, "rocketmq_commit_messages_total") == [3]
    assert pick(samples, "rocketmq_rollback_messages_total") == [1]
    assert pick(samples, "rocketq_store_commitlog_size_bytes") == [4_000]
    assert pick(samples, "rocketq_store_flush_behind_bytes") == [500]
    assert pick(samples, "rocketq_store_dispatch_behind_bytes") == [120]
    assert pick(samples, "rocketq_store_flush_latency_seconds_count") == [1]
    assert pick(samples, "rocketq_store_pull_reads_total", residency="hot") == [1]
    assert pick(samples, "rocketq_store_replication_lag_bytes", slave="127.0.0.1:5555") == [2048]
    assert pick(samples, "rocketq_store_replication_in_sync") == [0]
    assert 0 < pick(samples, "rocketq_store_disk_usage_ratio")[0] <= 1
    assert all(node_labels <= labels for _, labels in samples), "every sample carries the node labels"


# ----------------------------------------------------------------------------- in-process exporter


def test_in_process_broker_serves_its_metrics_over_http(tmp_path: Path) -> None:
    async def scenario(controller: BrokerController, client: RemotingClient, addr: str) -> None:
        assert controller.metrics is not None and controller.metrics.address is not None
        host, port = controller.metrics.address
        await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 3000)

        def get() -> str:
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
                return str(response.read().decode())

        samples = parse_samples(await asyncio.to_thread(get))  # the scrape hops back to this loop
        assert controller.ctx is not None
        assert pick(samples, "rocketmq_topic_number") == [len(controller.ctx.topics)]
        assert pick(
            samples, "rocketmq_rpc_latency_count", request_code=str(int(RequestCode.GET_BROKER_RUNTIME_INFO))
        )

    run_broker(tmp_path, scenario, metricsExporterType="PROM", metricsPromExporterPort="0")
