"""Timer messages on the client: Message.deliver_at / delay as RocketMQ 5's properties, the recall
handle of a send response, and RECALL_MESSAGE's headers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.errors import ClientError
from rocketq.client.model import Message
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import RecallMessageRequestHeader, RecallMessageResponseHeader


def test_deliver_at_epoch_ms_and_datetime() -> None:
    assert Message("T", b"x", deliver_at=1_700_000_000_123).wire_properties()["TIMER_DELIVER_MS"] == (
        "1700000000123"
    )
    when = datetime(2030, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
    props = Message("T", b"x", deliver_at=when).wire_properties()
    assert props["TIMER_DELIVER_MS"] == "1893553445600"
    assert "TIMER_DELAY_SEC" not in props and "TIMER_DELAY_MS" not in props


def test_delay_whole_seconds_and_milliseconds() -> None:
    assert Message("T", b"x", delay=5).wire_properties()["TIMER_DELAY_SEC"] == "5"
    assert Message("T", b"x", delay=timedelta(minutes=2)).wire_properties()["TIMER_DELAY_SEC"] == "120"
    props = Message("T", b"x", delay=1.25).wire_properties()
    assert props["TIMER_DELAY_MS"] == "1250" and "TIMER_DELAY_SEC" not in props
    assert "TIMER_DELAY_SEC" not in Message("T", b"x").wire_properties()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"deliver_at": 1, "delay": 1}, "either deliver_at or delay"),
        ({"delay": 3, "delay_time_level": 2}, "exclude each other"),
        ({"delay": -1}, "must not be negative"),
        ({"deliver_at": -5}, "must not be negative"),
        ({"deliver_at": "tomorrow"}, "epoch milliseconds or a datetime"),
        ({"delay": "soon"}, "seconds or a timedelta"),
    ],
)
def test_bad_timer_arguments_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ClientError, match=match):
        Message("T", b"x", **kwargs)  # type: ignore[arg-type]


def test_replace_keeps_the_timer_fields() -> None:
    msg = dataclasses.replace(Message("T", b"x"), delay=2)
    assert msg.wire_properties()["TIMER_DELAY_SEC"] == "2"


def test_send_result_carries_the_recall_handle() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
    response = request.make_response(
        ResponseCode.SUCCESS,
        ext_fields={"msgId": "0A", "queueId": "1", "queueOffset": "7", "recallHandle": "djEgVCBiIDEgVQ=="},
    )
    result = MQClientAPI.process_send_response("a:1", "b", Message("T", b"x"), response)
    assert result.recall_handle == "djEgVCBiIDEgVQ=="
    response.ext_fields.pop("recallHandle")
    assert MQClientAPI.process_send_response("a:1", "b", Message("T", b"x"), response).recall_handle is None


def test_recall_headers_wire_names() -> None:
    header = RecallMessageRequestHeader(producer_group="pg", topic="T", recall_handle="h")
    assert header.to_ext_fields() == {"producerGroup": "pg", "topic": "T", "recallHandle": "h"}
    assert RecallMessageResponseHeader.from_ext_fields({"msgId": "U"}).msg_id == "U"
