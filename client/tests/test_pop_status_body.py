"""GET_POP_STATUS: the body round-trips through its documented JSON and a bad body is named."""

from __future__ import annotations

import json

import pytest

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.pop_status import (
    GetPopStatusRequestHeader,
    PopRetryStatus,
    PopStatus,
    PopTopicStatus,
)

DOC = {
    "brokerName": "broker-a",
    "consumerGroup": "G",
    "topics": [
        {
            "topic": "T",
            "inFlight": 3,
            "inFlightByQueue": {"0": 1, "1": 2},
            "retryTopics": [{"topic": "%RETRY%G_T", "backlog": 2, "inFlight": 1}],
        }
    ],
}


def test_body_round_trip_in_the_documented_shape() -> None:
    status = PopStatus.decode(json.dumps(DOC).encode())
    (topic,) = status.topics
    assert topic == PopTopicStatus("T", 3, {0: 1, 1: 2}, (PopRetryStatus("%RETRY%G_T", 2, 1),))
    assert (topic.retry_backlog, topic.retry_in_flight) == (2, 1)
    assert json.loads(status.encode()) == DOC


def test_header_topic_is_optional() -> None:
    assert GetPopStatusRequestHeader(consumer_group="G").to_ext_fields() == {"consumerGroup": "G"}
    assert GetPopStatusRequestHeader.from_ext_fields({"consumerGroup": "G", "topic": "T"}).topic == "T"


@pytest.mark.parametrize(
    "body", [b"", b"{}", b'{"brokerName":"b","consumerGroup":"G","topics":[{"topic":"T"}]}']
)
def test_a_bad_body_is_named(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="GET_POP_STATUS"):
        PopStatus.decode(body)
