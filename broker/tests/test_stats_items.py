"""The broker's stats items (rocketq.broker.stats_items) with an injected clock: the minute, hour
and day windows as Java's StatsItem builds them from snapshots, the keys the processors record
under, the BrokerStatsData JSON and the sampling task (integration_tests/test_mqadmin_stats.py
covers the processors and mqadmin)."""

from __future__ import annotations

import asyncio
import json

import pytest

from rocketq.broker.stats_items import BrokerStatsManager, SamplingPeriods, StatsItem, Window
from rocketq.client.remoting.broker_stats import BrokerStatsData, BrokerStatsItem, StatsName

T0 = 1_700_000_000_000
#: the sampling periods of the minute, hour and day windows
MINUTE, HOUR, DAY = 10_000, 600_000, 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def manager() -> tuple[BrokerStatsManager, Clock]:
    clock = Clock()
    return BrokerStatsManager("C1", SamplingPeriods(), clock_ms=clock), clock


def test_young_item_counts_after_the_next_sample_with_a_zero_snapshot_before_it() -> None:
    stats, clock = manager()
    assert stats.tick() == T0 + MINUTE  # the first tick samples every window (no items yet)
    clock.now += 3_000
    stats.record_put("T", 5, 500)
    stats.record_put("T", 3, 300)
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data == BrokerStatsData(BrokerStatsItem(), BrokerStatsItem(), BrokerStatsItem())
    clock.now = T0 + MINUTE
    stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None
    # the zero snapshot sits one period before the first real one: 8 messages over 10 s, 2 puts
    assert data.stats_minute == BrokerStatsItem(8, 0.8, 4.0)
    assert data.stats_hour == BrokerStatsItem() and data.stats_day == BrokerStatsItem()
    assert data.sum_24_hours() == 8
    size = stats.view(StatsName.TOPIC_PUT_SIZE, "T")
    assert size is not None and size.stats_minute == BrokerStatsItem(800, 80.0, 400.0)


def test_minute_window_keeps_seven_snapshots_so_traffic_leaves_it_after_a_minute() -> None:
    stats, clock = manager()
    stats.tick()
    stats.record_get("G", "T", 6, 60)
    sums = []
    for i in range(1, 9):
        clock.now = T0 + i * MINUTE
        stats.tick()
        data = stats.view(StatsName.GROUP_GET_NUMS, "T@G")
        assert data is not None
        sums.append((data.stats_minute.sum, round(data.stats_minute.tps, 4)))
    # two snapshots: 6 over 10 s; then the window widens to 60 s; then the zero leaves it
    assert sums[0] == (6, 0.6)
    assert sums[5] == (6, 0.1)
    assert sums[6] == (0, 0.0) and sums[7] == (0, 0.0)


def test_hour_and_day_windows_sample_on_their_own_periods() -> None:
    stats, clock = manager()
    stats.tick()
    stats.record_put("T", 10, 1)
    clock.now = T0 + HOUR  # 10 min: minute samples due too
    stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None and data.stats_hour.sum == 10 and data.stats_day.sum == 0
    assert data.stats_hour.tps == pytest.approx(10 / 600)
    clock.now = T0 + DAY
    stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None and data.stats_day == BrokerStatsItem(10, 10 / 3600, 10.0)
    # 25 day snapshots (24 hours between the first and the last): the zero one leaves at hour 25
    for h in range(2, 25):
        clock.now = T0 + h * DAY
        stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None and data.stats_day.sum == 10
    clock.now = T0 + 25 * DAY
    stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None and data.stats_day.sum == 0 and data.sum_24_hours() == 0


def test_keys_follow_java_and_broker_counters_count_no_calls() -> None:
    stats, clock = manager()
    stats.tick()
    stats.record_put("T", 4, 40)
    stats.record_get("G", "T", 3, 30)
    stats.record_send_back("G", "T")
    clock.now += MINUTE
    stats.tick()
    put = stats.view(StatsName.BROKER_PUT_NUMS, "C1")
    get = stats.view(StatsName.BROKER_GET_NUMS, "C1")
    back = stats.view(StatsName.SNDBCK_PUT_NUMS, "T@G")
    assert put is not None and put.stats_minute == BrokerStatsItem(4, 0.4, 0.0)
    assert get is not None and get.stats_minute.sum == 3
    assert back is not None and back.stats_minute.sum == 1
    assert stats.view(StatsName.GROUP_GET_SIZE, "T@G") is not None
    assert stats.view(StatsName.GROUP_GET_NUMS, "T") is None
    assert stats.view("NO_SUCH_STATS", "T") is None


def test_stats_item_without_snapshots_and_json_round_trip() -> None:
    item = StatsItem()
    item.add(5, 1)
    assert item.snapshot(Window.DAY) == BrokerStatsItem()
    item.sample(Window.DAY, T0, DAY)
    data = item.data()
    doc = json.loads(data.encode())
    assert doc == {
        "statsMinute": {"sum": 0, "tps": 0.0, "avgpt": 0.0},
        "statsHour": {"sum": 0, "tps": 0.0, "avgpt": 0.0},
        "statsDay": {"sum": 5, "tps": 5 / 3600, "avgpt": 5.0},
    }
    assert BrokerStatsData.decode(data.encode()) == data


def test_sampling_periods_from_env() -> None:
    assert SamplingPeriods.from_env({}) == SamplingPeriods()
    assert SamplingPeriods.from_env({"ROCKETQ_STATS_SAMPLING_MS": "100,200,300"}) == SamplingPeriods(
        minute_ms=100, hour_ms=200, day_ms=300
    )
    for bad in ("100,200", "a,b,c", "0,1,2"):
        with pytest.raises(ValueError, match=r"minute|positive"):
            SamplingPeriods.from_env({"ROCKETQ_STATS_SAMPLING_MS": bad})


def test_run_samples_on_the_loop() -> None:
    stats = BrokerStatsManager("C1", SamplingPeriods(minute_ms=20, hour_ms=50, day_ms=100))

    async def go() -> BrokerStatsData | None:
        task = asyncio.create_task(stats.run())
        stats.record_put("T", 2, 20)
        for _ in range(200):  # bounded: at most ~2 s
            await asyncio.sleep(0.01)
            data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
            if data is not None and data.stats_day.sum == 2:
                break
        task.cancel()
        return stats.view(StatsName.TOPIC_PUT_NUMS, "T")

    data = asyncio.run(go())
    assert data is not None and data.stats_day.sum == 2 and data.stats_hour.sum == 2
