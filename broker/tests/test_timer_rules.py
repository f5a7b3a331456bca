"""The send-path rules of timer messages (HookUtils.transformTimerMessage), the precision snap,
the recall handle and the timer keys of broker.conf."""

from __future__ import annotations

import base64

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.errors import BrokerConfigError
from rocketq.broker.timer.config import TimerConfig, snap_precision_ms, timer_config_of
from rocketq.broker.timer.rules import TimerRouteStatus, recall_handle_of, route_timer_message
from rocketq.client.remoting.properties import decode_properties, encode_properties
from rocketq.client.remoting.recall_handle import RecallHandleError, build_recall_handle, decode_recall_handle
from rocketq.client.remoting.vocabulary import TIMER_TOPIC

NOW = 1_700_000_000_400
CFG = TimerConfig.of()


def route(props: dict[str, str], *, config: TimerConfig = CFG, topic: str = "Orders", now: int = NOW):  # type: ignore[no-untyped-def]
    return route_timer_message(config, topic, 3, encode_properties(props), now)


def test_delay_sec_floors_to_precision_and_moves_to_timer_topic() -> None:
    r = route({"TIMER_DELAY_SEC": "5", "UNIQ_KEY": "U1"})
    assert r.status is TimerRouteStatus.TIMER and (r.topic, r.queue_id) == (TIMER_TOPIC, 0)
    props = decode_properties(r.properties)
    assert props["TIMER_OUT_MS"] == "1700000005000" and r.deliver_ms == 1_700_000_005_000
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["UNIQ_KEY"]) == ("Orders", "3", "U1")


def test_exact_multiple_is_one_slot_earlier() -> None:
    r = route({"TIMER_DELIVER_MS": "1700000010000"})
    assert decode_properties(r.properties)["TIMER_OUT_MS"] == "1700000009000"
    r = route({"TIMER_DELIVER_MS": "1700000010000"}, config=TimerConfig.of(precision_ms=100))
    assert decode_properties(r.properties)["TIMER_OUT_MS"] == "1700000009900"


def test_precedence_delay_sec_then_delay_ms_then_deliver_ms() -> None:
    both = {"TIMER_DELAY_SEC": "2", "TIMER_DELAY_MS": "7000", "TIMER_DELIVER_MS": "1700000100000"}
    assert route(both).deliver_ms == 1_700_000_002_000
    del both["TIMER_DELAY_SEC"]
    assert route(both).deliver_ms == 1_700_000_007_000
    del both["TIMER_DELAY_MS"]
    assert route(both).deliver_ms == 1_700_000_099_000


def test_delay_level_wins_and_clears_timer_properties() -> None:
    r = route({"DELAY": "2", "TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": "1"})
    assert r.status is TimerRouteStatus.NOT_TIMER and r.topic == "Orders"
    assert decode_properties(r.properties) == {"DELAY": "2"}


def test_past_delivery_is_a_normal_message_and_tombstone_illegal() -> None:
    r = route({"TIMER_DELIVER_MS": str(NOW)})
    assert r.status is TimerRouteStatus.NOT_TIMER and r.topic == "Orders"
    assert decode_properties(r.properties) == {"TIMER_DELIVER_MS": str(NOW)}
    r = route({"TIMER_DELIVER_MS": str(NOW - 5), "TIMER_DEL_UNIQKEY": "Orders+U"})
    assert r.status is TimerRouteStatus.ILLEGAL


def test_beyond_max_delay_and_garbage_are_illegal() -> None:
    cfg = TimerConfig.of(max_delay_sec=60)
    assert route({"TIMER_DELAY_SEC": "60"}, config=cfg).status is TimerRouteStatus.TIMER
    assert route({"TIMER_DELAY_SEC": "61"}, config=cfg).status is TimerRouteStatus.ILLEGAL
    assert route({"TIMER_DELAY_MS": "soon"}).status is TimerRouteStatus.ILLEGAL
    assert route({"TIMER_DELIVER_MS": "12x"}).status is TimerRouteStatus.ILLEGAL


def test_not_timer_when_timer_out_present_or_in_timer_topic_or_disabled() -> None:
    assert route({"TIMER_DELAY_SEC": "5", "TIMER_OUT_MS": "1"}).status is TimerRouteStatus.NOT_TIMER
    assert route({"TIMER_DELAY_SEC": "5"}, topic=TIMER_TOPIC).status is TimerRouteStatus.NOT_TIMER
    assert route({"KEYS": "k"}).status is TimerRouteStatus.NOT_TIMER
    off = TimerConfig.of(wheel_enable=False)
    assert route({"TIMER_DELAY_SEC": "5"}, config=off).status is TimerRouteStatus.NOT_ENABLED


def test_timer_message_without_uniq_key_gets_one() -> None:
    props = decode_properties(route({"TIMER_DELAY_SEC": "5"}).properties)
    assert len(props["UNIQ_KEY"]) == 32


def test_precision_snaps_as_java() -> None:
    assert [snap_precision_ms(v) for v in (1, 100, 199, 200, 499, 500, 999, 1000, 5000)] == [
        100,
        100,
        100,
        200,
        200,
        500,
        500,
        1000,
        1000,
    ]


def test_recall_handle_round_trip_and_java_bytes() -> None:
    handle = build_recall_handle("Orders", "broker-a", 1_700_000_005_001, "U1")
    assert base64.urlsafe_b64decode(handle) == b"v1 Orders broker-a 1700000005001 U1"
    decoded = decode_recall_handle(handle.rstrip("="))
    assert (decoded.topic, decoded.broker_name, decoded.timestamp, decoded.message_id) == (
        "Orders",
        "broker-a",
        "1700000005001",
        "U1",
    )
    for bad in ("", "!!!", base64.urlsafe_b64encode(b"v2 a b c d").decode(), "djEgYQ=="):
        with pytest.raises(RecallHandleError, match="recall handle is invalid"):
            decode_recall_handle(bad)


def test_recall_handle_of_a_routed_message() -> None:
    r = route({"TIMER_DELAY_SEC": "5", "UNIQ_KEY": "U1"})
    handle = recall_handle_of(r.properties, "broker-a")
    assert handle is not None
    assert decode_recall_handle(handle).timestamp == "1700000005001"  # TIMER_OUT_MS + 1
    retry = route({"TIMER_DELAY_SEC": "5", "UNIQ_KEY": "U1"}, topic="%RETRY%g")
    assert recall_handle_of(retry.properties, "broker-a") is None


def test_broker_conf_timer_keys() -> None:
    cfg = load_broker_config(
        None,
        overrides={
            "timerPrecisionMs": "250",
            "timerRollWindowSlot": "5",
            "timerMaxDelaySec": "600",
            "recallMessageEnable": "true",
            "mappedFileSizeTimerLog": "8192",
        },
    )
    timer = timer_config_of(cfg)
    assert (timer.precision_ms, timer.roll_window_slots, timer.max_delay_sec) == (200, 5, 600)
    assert timer.timer_log_file_size == 8192 and cfg.recall_message_enable
    with pytest.raises(BrokerConfigError, match="timerMaxDelaySec"):
        load_broker_config(None, overrides={"timerMaxDelaySec": "0"})
    with pytest.raises(BrokerConfigError, match="timerWheelEnable"):
        load_broker_config(None, overrides={"timerWheelEnable": "maybe"})
    with pytest.raises(BrokerConfigError, match="timerRollWindowSlot"):
        load_broker_config(None, overrides={"timerRollWindowSlot": "0"})
    with pytest.raises(BrokerConfigError, match="mappedFileSizeTimerLog: must be >= 4096"):
        load_broker_config(None, overrides={"mappedFileSizeTimerLog": "100"})
    assert TimerConfig.of(roll_window_slots=1).roll_window_slots == 1
