"""The broker's stats items (rocketq.broker.stats_items) with an injected clock: the minute, hour
and day windows as Java's StatsItem builds them from snapshots, the keys the processors record
under, the BrokerStatsData JSON and the sampling task (integration_tests/test_mqadmin_stats.py
covers the processors and mqadmin)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from rocketq.broker.schedule.delay import SCHEDULE_TOPIC, apply_delay_level, parse_delay_levels
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.stats_items import (
    SCHEDULE_CONSUMER_GROUP,
    BrokerStatsManager,
    SamplingPeriods,
    StatsItem,
    Window,
)
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import small_store
from rocketq.broker.timer.config import TimerConfig
from rocketq.broker.timer.rules import TimerRouteStatus, route_timer_message
from rocketq.broker.timer.store import TimerMessageStore
from rocketq.broker.transaction import TransactionalMessageService
from rocketq.client.remoting.broker_stats import BrokerStatsData, BrokerStatsItem, StatsName
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.properties import encode_properties

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


def _minute_sum(stats: BrokerStatsManager, name: StatsName, key: str) -> int | None:
    data = stats.view(name, key)
    return None if data is None else data.stats_minute.sum


def test_deleting_a_topic_drops_its_puts_and_every_read_and_send_back_of_it_only() -> None:
    stats, _ = manager()
    stats.record_put("T", 1, 10)
    stats.record_put("T2", 1, 10)
    stats.record_put("T@x", 1, 10)  # a key that merely starts with the topic's name stays
    stats.record_get("G", "T", 1, 10)
    stats.record_get("G", "T2", 1, 10)
    stats.record_send_back("G", "T")
    stats.put_from_thread("T", 4, 40)  # pending from another thread: must not come back later
    stats.on_topic_deleted("T")
    stats.tick()
    for name, key in [
        (StatsName.TOPIC_PUT_NUMS, "T"),
        (StatsName.TOPIC_PUT_SIZE, "T"),
        (StatsName.GROUP_GET_NUMS, "T@G"),
        (StatsName.GROUP_GET_SIZE, "T@G"),
        (StatsName.SNDBCK_PUT_NUMS, "T@G"),
    ]:
        assert stats.view(name, key) is None, (name, key)
    assert stats.view(StatsName.TOPIC_PUT_NUMS, "T2") is not None
    assert stats.view(StatsName.TOPIC_PUT_NUMS, "T@x") is not None
    assert stats.view(StatsName.GROUP_GET_NUMS, "T2@G") is not None
    assert stats.view(StatsName.BROKER_PUT_NUMS, "C1") is not None  # the broker's totals stay, as Java


def test_deleting_a_group_drops_its_reads_and_send_backs_on_every_topic_only() -> None:
    stats, _ = manager()
    stats.record_get("G", "T", 1, 10)
    stats.record_get("G", "%RETRY%G", 1, 10)
    stats.record_get("XG", "T", 1, 10)  # another group whose name ends with the deleted one's
    stats.record_send_back("G", "T")
    stats.record_put("T", 1, 10)
    stats.on_group_deleted("G")
    for name, key in [
        (StatsName.GROUP_GET_NUMS, "T@G"),
        (StatsName.GROUP_GET_SIZE, "T@G"),
        (StatsName.GROUP_GET_NUMS, "%RETRY%G@G"),
        (StatsName.SNDBCK_PUT_NUMS, "T@G"),
    ]:
        assert stats.view(name, key) is None, (name, key)
    assert stats.view(StatsName.GROUP_GET_NUMS, "T@XG") is not None
    assert stats.view(StatsName.TOPIC_PUT_NUMS, "T") is not None


def test_puts_from_other_threads_add_up_and_count_at_the_next_sample() -> None:
    stats, clock = manager()
    stats.tick()
    threads, per_thread = 4, 500

    def put() -> None:
        for _ in range(per_thread):
            stats.put_from_thread("T", 2, 100)

    workers = [threading.Thread(target=put) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    stats.record_put("T", 1, 50)  # the loop's own put of the same topic
    clock.now = T0 + MINUTE
    stats.tick()
    data = stats.view(StatsName.TOPIC_PUT_NUMS, "T")
    assert data is not None
    calls = threads * per_thread + 1
    assert data.stats_minute.sum == threads * per_thread * 2 + 1
    assert data.stats_minute.avgpt == pytest.approx((threads * per_thread * 2 + 1) / calls)
    assert _minute_sum(stats, StatsName.TOPIC_PUT_SIZE, "T") == threads * per_thread * 100 + 50
    assert _minute_sum(stats, StatsName.BROKER_PUT_NUMS, "C1") == threads * per_thread * 2 + 1


def test_a_scheduled_delivery_counts_the_real_topics_put_and_the_schedulers_read() -> None:
    stats, clock = manager()
    stats.tick()
    stats.schedule_put_from_thread("Real", 1, 200)
    clock.now = T0 + MINUTE
    stats.tick()
    assert _minute_sum(stats, StatsName.TOPIC_PUT_NUMS, "Real") == 1
    assert _minute_sum(stats, StatsName.TOPIC_PUT_SIZE, "Real") == 200
    key = f"SCHEDULE_TOPIC_XXXX@{SCHEDULE_CONSUMER_GROUP}"
    assert _minute_sum(stats, StatsName.GROUP_GET_NUMS, key) == 1
    assert _minute_sum(stats, StatsName.GROUP_GET_SIZE, key) == 200
    assert _minute_sum(stats, StatsName.BROKER_PUT_NUMS, "C1") == 1


def test_the_scheduler_reports_each_delivery_to_the_stats(tmp_path: Path) -> None:
    store = small_store(tmp_path / "store", start=True, message_delay_level="1s 2s")
    try:
        props = encode_properties({"UNIQ_KEY": "U-1", "DELAY": "1"})
        topic, queue_id, props = apply_delay_level("Orders", 1, props, 2)
        put = store.put_message(
            MessageToStore(
                topic=topic,
                queue_id=queue_id,
                body=b"delayed",
                properties=props,
                born_timestamp=T0,
                born_host=("10.0.0.2", 1),
                store_host=("127.0.0.1", 10911),
            )
        )
        assert put.is_ok and put.append_result is not None and store.wait_dispatched()
        stats, clock = manager()
        stats.tick()
        svc = ScheduleMessageService(store, parse_delay_levels("1s 2s"))
        svc.on_put = stats.schedule_put_from_thread
        svc.deliver_due(put.append_result.store_timestamp + 60_000)
        assert svc.delivered == 1
        clock.now = T0 + MINUTE
        stats.tick()
        assert _minute_sum(stats, StatsName.TOPIC_PUT_NUMS, "Orders") == 1
        size = _minute_sum(stats, StatsName.TOPIC_PUT_SIZE, "Orders")
        assert size is not None and size > len(b"delayed")
        key = f"{SCHEDULE_TOPIC}@{SCHEDULE_CONSUMER_GROUP}"
        assert _minute_sum(stats, StatsName.GROUP_GET_NUMS, key) == 1
    finally:
        store.shutdown()


def test_a_ranged_commit_reports_one_call_per_topic_and_a_repeat_none(tmp_path: Path) -> None:
    store = small_store(tmp_path / "store", start=True)
    try:
        svc = TransactionalMessageService(store)
        calls: list[tuple[str, int, int]] = []
        svc.on_commit = lambda topic, count, size: calls.append((topic, count, size))
        firsts = []
        for queue_id, n in ((0, 4), (1, 3)):
            msgs = [
                MessageToStore(
                    topic="TxnT",
                    queue_id=queue_id,
                    body=b"row-%d" % i,
                    sys_flag=4,
                    properties={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": f"U{queue_id}-{i}"},
                    born_timestamp=T0,
                    born_host=("10.0.0.2", 1),
                    store_host=("127.0.0.1", 10911),
                )
                for i in range(n)
            ]
            result = svc.prepare_half_batch(msgs)
            assert result.is_ok and result.append_result is not None
            firsts.append(result.append_result)
        msg_id = firsts[0].msg_id.split(",")[0]
        header = EndTransactionRequestHeader(
            producer_group="PG",
            tran_state_table_offset=firsts[0].queue_offset,
            commit_log_offset=decode_offset_msg_id(msg_id)[2],
            commit_or_rollback=8,
            msg_id=msg_id,
        )
        ranges = [(firsts[0].queue_offset, 4), (firsts[1].queue_offset, 3)]
        assert svc.end_transaction_ranges(header, ranges).ended == 7
        assert len(calls) == 1 and calls[0][:2] == ("TxnT", 7) and calls[0][2] > 7 * len(b"row-0")
        assert svc.end_transaction_ranges(header, ranges).skipped == 7
        assert len(calls) == 1  # nothing stored by the repeat, nothing counted
    finally:
        store.shutdown()


def test_the_timer_reports_each_delivery_to_the_stats(tmp_path: Path) -> None:
    store = small_store(tmp_path / "store", start=True, mapped_file_size_commit_log_bytes=256 * 1024)
    try:
        now = T0 + 400
        timer = TimerMessageStore(
            store,
            TimerConfig.of(timer_log_file_size=4096),
            store.config.store_path_root_dir,
            clock=lambda: now,
        )
        timer.load()
        calls: list[tuple[str, int, int]] = []
        timer.on_put = lambda topic, count, size: calls.append((topic, count, size))
        props = encode_properties({"TIMER_DELAY_SEC": "1", "UNIQ_KEY": "UT"})
        route = route_timer_message(TimerConfig.of(), "Orders", 1, props, now)
        assert route.status is TimerRouteStatus.TIMER
        put = store.put_message(
            MessageToStore(
                topic=route.topic,
                queue_id=route.queue_id,
                body=b"timed",
                properties=route.properties,
                born_timestamp=now,
                born_host=("10.0.0.2", 1),
                store_host=("127.0.0.1", 10911),
            )
        )
        assert put.is_ok and store.wait_dispatched()
        now += 3_000  # due at enqueue: delivered at once
        timer.enqueue()
        assert timer.stats.delivered == 1
        assert len(calls) == 1 and calls[0][:2] == ("Orders", 1) and calls[0][2] > len(b"timed")
        timer.close()
    finally:
        store.shutdown()
