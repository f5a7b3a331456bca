"""TimerMessageStore over a real MessageStore, driven step by step with an explicit clock:
delivery at the slot time with RocketMQ's properties, rolling past the window, recall tombstones,
messages already due, and restarts (clean and without a flush) that deliver everything due once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import small_store
from rocketq.broker.timer.config import TimerConfig
from rocketq.broker.timer.layout import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL
from rocketq.broker.timer.rules import TimerRouteStatus, route_timer_message
from rocketq.broker.timer.store import NEVER_ENQUEUED, TimerMessageStore, delete_key
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import encode_properties
from rocketq.client.remoting.vocabulary import TIMER_TOPIC

HOST = ("127.0.0.1", 10911)
T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_store(root: Path) -> MessageStore:
    return small_store(
        root,
        start=True,
        mapped_file_size_commit_log_bytes=256 * 1024,
        mapped_file_size_consume_queue_units=1000,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        clean_resource_interval_ms=3_600_000,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = open_store(tmp_path / "store")
    yield s
    s.shutdown()


def timer_store(store: MessageStore, clock: Clock, roll_window_slots: int = 172_800) -> TimerMessageStore:
    config = TimerConfig.of(timer_log_file_size=4096, roll_window_slots=roll_window_slots)
    t = TimerMessageStore(store, config, store.config.store_path_root_dir, clock=clock)
    t.load()
    return t


def send(store: MessageStore, clock: Clock, body: str, props: dict[str, str], topic: str = "Orders") -> None:
    r = route_timer_message(TimerConfig.of(), topic, 1, encode_properties(props), clock.now)
    assert r.status is TimerRouteStatus.TIMER
    result = store.put_message(
        MessageToStore(
            topic=r.topic,
            queue_id=r.queue_id,
            body=body.encode(),
            properties=r.properties,
            born_timestamp=clock.now,
            born_host=HOST,
            store_host=HOST,
        )
    )
    assert result.is_ok
    assert store.wait_dispatched()


def delivered(store: MessageStore, topic: str = "Orders", queue_id: int = 1) -> list[StoredMessage]:
    assert store.wait_dispatched()
    g = store.get_message("g", topic, queue_id, 0, 64, 1 << 20)
    try:
        return [decode_stored_message(b) for b in g.buffers]
    finally:
        g.release()


def run_until(timer: TimerMessageStore, clock: Clock, end: int, step: int = 100) -> None:
    while clock.now < end:
        clock.now += step
        timer.store.wait_dispatched()
        timer.enqueue()
        timer.dequeue()


def test_message_fires_at_its_time_with_java_properties(store: MessageStore) -> None:
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)
    send(store, clock, "a", {"TIMER_DELAY_SEC": "5", "UNIQ_KEY": "UA", "TAGS": "t"})
    assert timer.enqueue() == 1
    slot = timer.wheel.get_slot(T0 + 5000)
    assert (slot.num, slot.first_pos, slot.last_pos) == (1, 0, 0)
    record = timer.timer_log.read(0)
    assert record is not None and record.magic == MAGIC_DEFAULT and record.delayed_time_ms == T0 + 5000
    run_until(timer, clock, T0 + 5900)
    assert delivered(store) == []
    run_until(timer, clock, T0 + 6000)
    [msg] = delivered(store)
    assert (msg.topic, msg.queue_id, msg.body) == ("Orders", 1, b"a")
    props = msg.properties
    assert props["TIMER_OUT_MS"] == str(T0 + 5000) and props["TIMER_DELAY_SEC"] == "5"
    assert props["TIMER_ENQUEUE_MS"] == str(T0) and props["TIMER_DEQUEUE_MS"] == str(T0 + 6000)
    assert "REAL_TOPIC" not in props and "REAL_QID" not in props and props["UNIQ_KEY"] == "UA"
    run_until(timer, clock, T0 + 9000)
    assert len(delivered(store)) == 1
    timer.close()


def test_message_due_at_enqueue_is_delivered_at_once(store: MessageStore) -> None:
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)
    send(store, clock, "late", {"TIMER_DELAY_SEC": "1"})
    clock.now += 3000  # the service was behind
    timer.enqueue()
    [msg] = delivered(store)
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(NEVER_ENQUEUED)
    timer.close()


def test_delay_past_the_roll_window_rolls_then_fires(store: MessageStore) -> None:
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock, roll_window_slots=5)
    send(store, clock, "far", {"TIMER_DELAY_SEC": "20", "UNIQ_KEY": "UF"})
    timer.enqueue()
    record = timer.timer_log.read(0)
    assert record is not None and record.magic == MAGIC_DEFAULT | MAGIC_ROLL
    assert record.delayed_time_ms == T0 + 5000  # parked at the window edge
    run_until(timer, clock, T0 + 6000)
    assert delivered(store) == []
    rolled = delivered(store, TIMER_TOPIC, 0)
    assert len(rolled) == 2 and rolled[1].properties["TIMER_ROLL_TIMES"] == "1"
    assert rolled[1].properties["TIMER_OUT_MS"] == str(T0 + 20_000)
    run_until(timer, clock, T0 + 20_900)
    assert delivered(store) == []
    run_until(timer, clock, T0 + 21_000)
    [msg] = delivered(store)
    assert msg.body == b"far" and int(msg.properties["TIMER_ROLL_TIMES"]) >= 3
    assert timer.stats.rolled >= 3
    timer.close()


def test_recalled_message_never_fires(store: MessageStore) -> None:
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock, roll_window_slots=5)
    send(store, clock, "keep", {"TIMER_DELAY_SEC": "3", "UNIQ_KEY": "UK"})
    send(store, clock, "gone", {"TIMER_DELAY_SEC": "3", "UNIQ_KEY": "UG"})
    send(store, clock, "gone-far", {"TIMER_DELAY_SEC": "12", "UNIQ_KEY": "UGF"})
    for uniq, out in (("UG", T0 + 3000), ("UGF", T0 + 12_000)):
        tomb = {
            "TIMER_DEL_UNIQKEY": delete_key("Orders", uniq),
            "UNIQ_KEY": uniq,
            "TIMER_DELIVER_MS": str(out + 1),  # the handle's TIMER_OUT_MS + 1
            "TAGS": "_RECALL_TAG_",
        }
        send(store, clock, "0", tomb)
    timer.enqueue()
    magics = [r.magic for r in (timer.timer_log.read(p * 52) for p in range(5)) if r is not None]
    assert magics[3] == MAGIC_DEFAULT | MAGIC_DELETE
    assert magics[4] == MAGIC_DEFAULT | MAGIC_DELETE | MAGIC_ROLL
    run_until(timer, clock, T0 + 15_000)
    assert [m.body for m in delivered(store)] == [b"keep"]
    assert timer.stats.recalled == 2
    timer.close()


def test_restart_without_flush_delivers_everything_due_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)
    send(store, clock, "first", {"TIMER_DELAY_SEC": "2"})
    send(store, clock, "second", {"TIMER_DELAY_SEC": "8"})
    run_until(timer, clock, T0 + 3000)
    assert [m.body for m in delivered(store)] == [b"first"]
    timer.flush()
    send(store, clock, "third", {"TIMER_DELAY_SEC": "4"})
    timer.enqueue()
    # killed: no flush of the timer files or the checkpoint, no clean store shutdown
    store.halt()
    store = open_store(root)
    clock.now = T0 + 30_000  # an outage longer than every delay
    timer = timer_store(store, clock)
    run_until(timer, clock, T0 + 30_200)
    assert sorted(m.body for m in delivered(store)) == [b"first", b"second", b"third"]
    timer.close()
    store.shutdown()


def test_restart_before_the_checkpoint_caught_up_delivers_nothing_twice(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)
    timer.flush()
    send(store, clock, "early", {"TIMER_DELAY_SEC": "1", "UNIQ_KEY": "UE"})
    send(store, clock, "later", {"TIMER_DELAY_SEC": "9", "UNIQ_KEY": "UL"})
    run_until(timer, clock, T0 + 3000)
    assert [m.body for m in delivered(store)] == [b"early"]
    store.halt()  # killed before the next flush: the checkpoint still says nothing was read
    store = open_store(root)
    clock.now = T0 + 12_000
    timer = timer_store(store, clock)
    assert timer.curr_read_time_ms == T0
    run_until(timer, clock, T0 + 12_200)
    assert [m.body for m in delivered(store)] == [b"early", b"later"]
    assert timer.stats.redelivery_skipped == 1
    timer.close()
    store.shutdown()


def test_crash_before_the_first_flush_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)  # a first start: no checkpoint yet
    send(store, clock, "soon", {"TIMER_DELAY_SEC": "5"})
    clock.now += 200
    timer.enqueue()
    store.halt()  # killed before the first timerFlushIntervalMs
    store = open_store(root)
    clock.now = T0 + 10_000
    timer = timer_store(store, clock)
    assert timer.curr_read_time_ms == T0  # where the first start began, not the restart's time
    run_until(timer, clock, T0 + 10_200)
    assert [m.body for m in delivered(store)] == [b"soon"]
    timer.close()
    store.shutdown()


def test_clean_restart_keeps_progress(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    clock = Clock(T0 + 400)
    timer = timer_store(store, clock)
    send(store, clock, "x", {"TIMER_DELAY_SEC": "2"})
    send(store, clock, "y", {"TIMER_DELAY_SEC": "6"})
    run_until(timer, clock, T0 + 3000)
    timer.close()
    store.shutdown()
    store = open_store(root)
    timer = timer_store(store, clock)
    assert timer.curr_read_time_ms == T0 + 3000 and timer.curr_queue_offset == 2
    run_until(timer, clock, T0 + 7000)
    assert [m.body for m in delivered(store)] == [b"x", b"y"]
    timer.close()
    store.shutdown()


def test_wall_clock_default(store: MessageStore) -> None:
    timer = TimerMessageStore(store, TimerConfig.of(), store.config.store_path_root_dir)
    timer.load()
    assert abs(timer.curr_read_time_ms - time.time() * 1000) < 5000
    timer.close()
