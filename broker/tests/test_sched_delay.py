"""Delay levels: the SCHEDULE_TOPIC_XXXX rewrite, the store's delivery-time tagsCode and the
ScheduleMessageService (driven round by round with an explicit clock, then as a thread)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.schedule.delay import (
    SCHEDULE_TOPIC,
    apply_delay_level,
    parse_delay_levels,
    restore_real_topic,
)
from rocketq.broker.schedule.service import ScheduleMessageService
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.testing import small_store
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.properties import decode_properties, encode_properties

HOST = ("127.0.0.1", 10911)
LEVELS = "1s 2s 3s"


def open_store(root: Path) -> MessageStore:
    return small_store(
        root,
        start=True,
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=100,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        clean_resource_interval_ms=3_600_000,
        message_delay_level=LEVELS,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = open_store(tmp_path / "store")
    yield s
    s.shutdown()


def put_delayed(
    store: MessageStore, body: bytes, level: int, topic: str = "Orders", queue_id: int = 2
) -> int:
    props = encode_properties({"TAGS": "T", "UNIQ_KEY": f"U-{body.decode()}", "DELAY": str(level)})
    t, q, p = apply_delay_level(topic, queue_id, props, 3)
    r = store.put_message(
        MessageToStore(
            topic=t,
            queue_id=q,
            body=body,
            properties=p,
            born_timestamp=int(time.time() * 1000),
            born_host=("10.0.0.2", 1),
            store_host=HOST,
            reconsume_times=1,
        )
    )
    assert r.is_ok and r.append_result is not None
    assert store.wait_dispatched()
    return r.append_result.store_timestamp


def bodies(store: MessageStore, topic: str = "Orders", queue_id: int = 2) -> list[bytes]:
    assert store.wait_dispatched()
    g = store.get_message("g", topic, queue_id, 0, 32, 1 << 20)
    try:
        return [decode_stored_message(b).body for b in g.buffers]
    finally:
        g.release()


def test_parse_delay_levels() -> None:
    assert parse_delay_levels("1s 5s 1m 2h 1d") == [1000, 5000, 60_000, 7_200_000, 86_400_000]
    for bad in ("", "1x", "5", "0s"):
        with pytest.raises(ValueError):
            parse_delay_levels(bad)
    with pytest.raises(BrokerConfigError, match="messageDelayLevel"):
        load_broker_config(None, overrides={"messageDelayLevel": "1s soon"})
    assert load_broker_config(None, overrides={"messageDelayLevel": LEVELS}).store_options


def test_apply_delay_level_rewrites_and_clamps() -> None:
    props = encode_properties({"TAGS": "T", "DELAY": "7"})
    topic, qid, out = apply_delay_level("Orders", 3, props, 3)
    decoded = decode_properties(out)
    assert (topic, qid) == (SCHEDULE_TOPIC, 2)
    assert decoded == {"TAGS": "T", "DELAY": "3", "REAL_TOPIC": "Orders", "REAL_QID": "3"}
    for no_delay in ({"DELAY": "0"}, {"DELAY": "-1"}, {"DELAY": "x"}, {"TAGS": "T"}):
        text = encode_properties(no_delay)
        assert apply_delay_level("Orders", 3, text, 3) == ("Orders", 3, text)
    restored = restore_real_topic(decoded)
    assert restored == ("Orders", 3, {"TAGS": "T", "REAL_TOPIC": "Orders", "REAL_QID": "3"})
    assert restore_real_topic({"DELAY": "1"}) is None


def test_store_writes_the_delivery_time_as_tags_code(store: MessageStore) -> None:
    stored_at = put_delayed(store, b"m", 2)
    cq = store.find_consume_queue(SCHEDULE_TOPIC, 1)
    assert cq is not None and cq.unit_at(0) is not None
    assert cq.unit_at(0)[2] == stored_at + 2000  # type: ignore[index]


def test_due_messages_are_delivered_in_order_and_progress_persists(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    config_dir = str(root / "config")
    svc = ScheduleMessageService(store, parse_delay_levels(LEVELS), config_dir=config_dir)
    try:
        t0 = put_delayed(store, b"a", 1)
        put_delayed(store, b"b", 1)
        t_late = put_delayed(store, b"c", 3)
        assert bodies(store) == []
        next_due = svc.deliver_due(t0 + 500)
        assert bodies(store) == [] and next_due is not None and t0 + 900 <= next_due <= t0 + 1100
        svc.deliver_due(t0 + 1200)  # level 1 due, level 3 not yet
        assert bodies(store) == [b"a", b"b"]
        assert svc.offsets == {1: 2, 3: 0}
        svc.deliver_due(t_late + 3000)
        assert bodies(store) == [b"a", b"b", b"c"]
        g = store.get_message("g", "Orders", 2, 0, 32, 1 << 20)
        try:
            m = decode_stored_message(g.buffers[0])
        finally:
            g.release()
        assert m.topic == "Orders" and m.queue_id == 2 and m.reconsume_times == 1
        assert (
            "DELAY" not in m.properties and m.properties["UNIQ_KEY"] == "U-a" and m.properties["TAGS"] == "T"
        )
        svc.persist()
        doc = json.loads((root / "config" / "delayOffset.json").read_text())
        assert doc == {"offsetTable": {"1": 2, "3": 1}}
        svc.deliver_due(t_late + 10_000)
        assert bodies(store) == [b"a", b"b", b"c"]  # nothing delivered twice
    finally:
        store.shutdown()
    # a restart resumes from delayOffset.json: nothing is redelivered
    store = open_store(root)
    try:
        svc2 = ScheduleMessageService(store, parse_delay_levels(LEVELS), config_dir=config_dir)
        svc2.load()
        assert svc2.offsets == {1: 2, 3: 1}
        put_delayed(store, b"d", 1)
        svc2.deliver_due(int(time.time() * 1000) + 1500)
        assert bodies(store) == [b"a", b"b", b"c", b"d"]
    finally:
        store.shutdown()


def test_clock_step_back_delivers_at_once(store: MessageStore) -> None:
    stored_at = put_delayed(store, b"x", 1)
    svc = ScheduleMessageService(store, parse_delay_levels(LEVELS))
    svc.deliver_due(stored_at - 60_000)  # now far before the delivery time: treated as due
    assert bodies(store) == [b"x"]


def test_service_thread_delivers_and_persists_on_shutdown(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = open_store(root)
    svc = ScheduleMessageService(store, parse_delay_levels(LEVELS), config_dir=str(root / "config"))
    try:
        svc.start()
        put_delayed(store, b"threaded", 1)
        deadline = time.monotonic() + 10
        while not bodies(store) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bodies(store) == [b"threaded"]
        assert svc.delivered == 1
    finally:
        svc.shutdown()
        store.shutdown()
    assert json.loads((root / "config" / "delayOffset.json").read_text())["offsetTable"] == {"1": 1}
