"""POP and timer metrics: in-flight counts from the revive-log records, RocketMQ 5's names on a scrape."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from rocketq.broker.metrics.collector import BrokerCollector, BrokerSnapshot
from rocketq.broker.metrics.lag import GroupTopic
from rocketq.broker.metrics.pop import PopMetricsRecorder, TimerFigures, timer_figures
from rocketq.broker.metrics.recorder import BrokerMetricsRecorder
from rocketq.broker.pop.records import AckMsg, PopCheckPoint, ack_message, ck_message
from rocketq.broker.server import BrokerController
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.broker.testing import run_broker
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeader
from rocketq.client.remoting.pop import PopMessageRequestHeader
from rocketq.client.remoting.vocabulary import TopicConfig
from rocketq.client.testing.metrics import parse_samples, pick
from rocketq.client.transport.aio import RemotingClient

HOST = ("127.0.0.1", 10911)
OK = PutMessageResult(status=PutMessageStatus.PUT_OK)
NOW = 1_700_000_000_000


def ck(pop_time: int, offsets: int = 3, queue_id: int = 1) -> PopCheckPoint:
    return PopCheckPoint(
        start_offset=10,
        pop_time=pop_time,
        invisible_time=30_000,
        queue_id=queue_id,
        topic="T",
        cid="G",
        queue_offset_diff=tuple(range(offsets)),
        broker_name="b",
    )


def ck_record(c: PopCheckPoint) -> MessageToStore:
    return ck_message(c, revive_topic="rmq_sys_REVIVE_LOG_C", revive_qid=0, now_ms=NOW, store_host=HOST)


def ack_record(pop_time: int, offsets: tuple[int, ...] = (), queue_id: int = 1) -> MessageToStore:
    ack = AckMsg(
        ack_offset=10,
        start_offset=10,
        consumer_group="G",
        topic="T",
        queue_id=queue_id,
        pop_time=pop_time,
        broker_name="b",
        ack_offsets=offsets,
    )
    return ack_message(
        ack,
        invisible_time=30_000,
        revive_topic="rmq_sys_REVIVE_LOG_C",
        revive_qid=0,
        now_ms=NOW,
        store_host=HOST,
    )


def test_in_flight_follows_checkpoints_acks_and_revives() -> None:
    rec = PopMetricsRecorder(clock_ms=lambda: NOW)
    popped = ck(NOW + 5)
    rec.record_revive_puts([ck_record(popped), ck_record(ck(NOW + 6, 2, queue_id=2))], [OK, OK])
    assert rec.in_flight_of("G", "T") == {1: 3, 2: 2}
    rec.record_revive_puts([ack_record(NOW + 5)], [OK])  # one ack
    rec.record_revive_puts([ack_record(NOW + 6, (10, 11), queue_id=2)], [OK])  # a batch ack of both
    assert rec.in_flight_of("G", "T") == {1: 2}
    rec.record_revived(popped, "PUT_OK", ok=True)
    rec.record_revived(popped, "CREATE_MAPPED_FILE_FAILED", ok=False)  # retried later: still in flight
    assert rec.in_flight_of("G", "T") == {1: 1}
    snap = rec.snapshot()
    assert snap.in_flight == {("G", "T"): 1}
    assert snap.revive_in == {("G", "T", "CK", "PUT_OK"): 2, ("G", "T", "ACK", "PUT_OK"): 2}
    assert snap.revive_retry == {("G", "T", "PUT_OK"): 1, ("G", "T", "CREATE_MAPPED_FILE_FAILED"): 1}


def test_pops_before_boot_and_failed_puts_do_not_move_in_flight() -> None:
    rec = PopMetricsRecorder(clock_ms=lambda: NOW)
    failed = PutMessageResult(status=PutMessageStatus.SERVICE_NOT_AVAILABLE)
    rec.record_revive_puts([ck_record(ck(NOW + 1))], [failed])
    rec.record_revive_puts([ack_record(NOW - 1)], [OK])  # an ack of a pop made before this process
    assert rec.in_flight_of("G", "T") == {}
    rec.record_revive_puts([ck_record(ck(NOW + 1, 1))], [OK])
    rec.record_revive_puts([ack_record(NOW + 1), ack_record(NOW + 1)], [OK, OK])  # a late second ack
    assert rec.in_flight_of("G", "T") == {}  # never below zero
    assert rec.snapshot().revive_in[("G", "T", "CK", "SERVICE_NOT_AVAILABLE")] == 1


def test_revive_reads_are_counted_per_revive_queue() -> None:
    rec = PopMetricsRecorder(clock_ms=lambda: NOW)
    rec.record_revive_read(ck(NOW), 3)
    rec.record_revive_read(ck(NOW), 3)
    assert rec.snapshot().revive_out == {("G", "T", 3, "CK"): 2}


def test_timer_figures_read_the_store() -> None:
    timer = SimpleNamespace(
        precision_ms=1000,
        curr_read_time_ms=NOW - 4_000,
        clock=lambda: NOW + 500,
        backlog=7,
        stats=SimpleNamespace(enqueued=10, delivered=3),
    )
    assert timer_figures(timer)() == TimerFigures(7, 4_000, 10, 3)


class NoStore:
    max_phy_offset = min_phy_offset = dispatch_behind_bytes = flushed_offset = 0

    def __init__(self, root: str) -> None:
        self.root_dir = root

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 5 if topic == "rmq_sys_REVIVE_LOG_C" and queue_id == 0 else 0

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        return NOW - 1_500 if (topic, queue_id, offset) == ("rmq_sys_REVIVE_LOG_C", 0, 2) else 0


def test_collector_exposes_pop_and_timer_names(tmp_path: Path) -> None:
    rec = BrokerMetricsRecorder()
    rec.pop.started_ms = NOW
    rec.pop.record_revive_puts([ck_record(ck(NOW + 1))], [OK])
    rec.pop.record_revive_read(ck(NOW + 1), 0)
    rec.pop.record_revived(ck(NOW + 1), "PUT_OK", ok=True)
    rec.pop.timer = lambda: TimerFigures(5, 2_000, 9, 4)
    snapshot = BrokerSnapshot(
        recorder=rec.snapshot(),
        permission=6,
        topic_number=1,
        group_number=1,
        watermarks={},
        producer_connections={},
        consumer_connections={},
        lag_items=[GroupTopic("CID_RMQ_SYS_REVIVE_GROUP", "rmq_sys_REVIVE_LOG_C", 2, {0: 2, 1: 0}, {})],
        replicas=[],
    )
    registry = CollectorRegistry(auto_describe=False)
    node = {"cluster": "C", "node_type": "broker", "node_id": "b"}
    registry.register(BrokerCollector(node, lambda: snapshot, NoStore(str(tmp_path)), clock_ms=lambda: NOW))
    samples = parse_samples(generate_latest(registry).decode())
    assert pick(samples, "rocketmq_consumer_inflight_messages", consumer_group="G", topic="T") == [2]
    assert pick(
        samples, "rocketmq_pop_revive_in_message_total", revive_message_type="CK", put_status="PUT_OK"
    ) == [1]
    assert pick(samples, "rocketmq_pop_revive_out_message_total", queue_id="0", revive_message_type="CK") == [
        1
    ]
    assert pick(
        samples, "rocketmq_pop_revive_retry_messages_total", consumer_group="G", put_status="PUT_OK"
    ) == [1]
    assert pick(samples, "rocketmq_pop_revive_lag", queue_id="0") == [3]
    assert pick(samples, "rocketmq_pop_revive_latency", queue_id="0") == [1_500]
    assert pick(samples, "rocketmq_pop_revive_lag", queue_id="1") == [0]
    assert pick(samples, "rocketmq_timer_enqueue_lag") == [5]
    assert pick(samples, "rocketmq_timer_dequeue_latency") == [2_000]
    assert pick(samples, "rocketmq_timer_enqueue_total") == [9]
    assert pick(samples, "rocketmq_timer_dequeue_total") == [4]


def test_in_process_broker_counts_pop_in_flight_on_a_scrape(tmp_path: Path) -> None:
    async def scenario(controller: BrokerController, client: RemotingClient, addr: str) -> None:
        assert controller.metrics is not None and controller.metrics.address is not None
        assert controller.ctx is not None
        controller.ctx.topics.update(TopicConfig(topic_name="PopT", read_queue_nums=1, write_queue_nums=1))
        header_send = SendMessageRequestHeader(
            producer_group="p",
            topic="PopT",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
        )
        send = RemotingCommand.request(RequestCode.SEND_MESSAGE, header_send.to_ext_fields(), b"hello")
        for _ in range(3):
            assert (await client.invoke(addr, send, 3000)).code == ResponseCode.SUCCESS
        header = PopMessageRequestHeader(
            consumer_group="PopG",
            topic="PopT",
            queue_id=-1,
            max_msg_nums=32,
            invisible_time=60_000,
            poll_time=1_000,
            born_time=int(time.time() * 1000),
            init_mode=0,
        )
        pop = await client.invoke(
            addr, RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields()), 5000
        )
        assert pop.code == ResponseCode.SUCCESS
        host, port = controller.metrics.address

        def get() -> str:
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
                return str(response.read().decode())

        samples = parse_samples(await asyncio.to_thread(get))
        assert pick(samples, "rocketmq_consumer_inflight_messages", consumer_group="PopG", topic="PopT") == [
            3
        ]
        assert pick(
            samples, "rocketmq_pop_revive_in_message_total", consumer_group="PopG", revive_message_type="CK"
        )

    run_broker(tmp_path, scenario, metricsExporterType="PROM", metricsPromExporterPort="0")
