"""Latency fault tolerance and round-robin queue choice of the producer."""

from __future__ import annotations

import pytest

from rocketq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy, TopicPublishInfo
from rocketq.client.remoting.route import BrokerData, MessageQueue, QueueData, TopicRouteData


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def route(*brokers: tuple[str, int, int]) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(name, n, n, perm) for name, n, perm in brokers],
        broker_datas=[
            BrokerData("c", name, {0: f"10.0.0.{i}:10911"}) for i, (name, _, _) in enumerate(brokers)
        ],
    )


@pytest.mark.parametrize(
    ("latency", "duration"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (2000, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
    ],
)
def test_not_available_duration_table(latency: int, duration: int) -> None:
    assert MQFaultStrategy(enabled=True).compute_not_available_duration(latency) == duration


def test_publish_info_expands_writable_masters_sorted() -> None:
    info = TopicPublishInfo.from_route("T", route(("b", 2, 6), ("a", 2, 6), ("ro", 2, 4)), start=0)
    assert [(mq.broker_name, mq.queue_id) for mq in info.message_queues] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
        ("b", 1),
    ]
    assert [info.select_one_message_queue().queue_id for _ in range(5)] == [0, 1, 0, 1, 0]
    assert info.write_queue_nums_of("b") == 2 and info.write_queue_nums_of("zz") == -1


def test_retry_avoids_the_last_broker() -> None:
    info = TopicPublishInfo.from_route("T", route(("a", 2, 6), ("b", 2, 6)), start=0)
    for _ in range(6):
        assert info.select_one_message_queue("a").broker_name == "b"
    single = TopicPublishInfo.from_route("T", route(("a", 2, 6)), start=0)
    assert single.select_one_message_queue("a").broker_name == "a"  # nothing else to try


def test_fault_item_expires_with_the_clock() -> None:
    clock = Clock()
    table = LatencyFaultTolerance(clock)
    table.update_fault_item("a", 600, 30000)
    assert not table.is_available("a") and table.is_available("b")
    clock.now += 30000
    assert table.is_available("a")


def test_strategy_avoids_isolated_broker_then_recovers() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, clock=clock)
    info = TopicPublishInfo.from_route("T", route(("a", 2, 6), ("b", 2, 6)), start=0)
    strategy.update_fault_item("a", 10, isolation=True)  # counts as 30 s latency: 10 minutes off
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"b"}
    strategy.update_fault_item("b", 20, isolation=False)  # fast: stays available
    assert strategy.select_one_message_queue(info, None).broker_name == "b"
    clock.now += 600_000
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"a", "b"}


def test_all_faulty_picks_least_bad_broker() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(enabled=True, clock=clock)
    info = TopicPublishInfo.from_route("T", route(("a", 4, 6), ("b", 4, 6)), start=0)
    strategy.update_fault_item("a", 5000, isolation=False)
    strategy.update_fault_item("b", 700, isolation=False)
    picks = {strategy.select_one_message_queue(info, None) for _ in range(8)}
    assert {mq.broker_name for mq in picks} == {"b"}  # the better half of two is one broker
    assert all(isinstance(mq, MessageQueue) and 0 <= mq.queue_id < 4 for mq in picks)


def test_disabled_strategy_ignores_latency() -> None:
    strategy = MQFaultStrategy(enabled=False)
    strategy.update_fault_item("a", 100000, isolation=True)
    info = TopicPublishInfo.from_route("T", route(("a", 1, 6), ("b", 1, 6)), start=0)
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(4)} == {"a", "b"}
