"""The QUERY_CONSUME_QUEUE and GET_ALL_PRODUCER_INFO bodies: Java's JSON field names, null fields
left out, Java-written bodies (extra fields, nulls) read, and Java's toString lines."""

from __future__ import annotations

import json

import pytest

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.cq_producer_bodies import (
    ConsumeQueueData,
    GetAllProducerInfoRequestHeader,
    ProducerInfo,
    QueryConsumeQueueBody,
    QueryConsumeQueueRequestHeader,
    decode_producer_table,
    encode_producer_table,
)
from rocketq.client.remoting.vocabulary import build_subscription


def test_query_consume_queue_header_fields() -> None:
    header = QueryConsumeQueueRequestHeader(topic="T", queue_id=1, index=5, count=10)
    assert header.to_ext_fields() == {"topic": "T", "queueId": "1", "index": "5", "count": "10"}
    assert (
        QueryConsumeQueueRequestHeader.from_ext_fields(
            {"topic": "T", "queueId": "1", "index": "5", "count": "10", "consumerGroup": "G"}
        ).consumer_group
        == "G"
    )
    assert GetAllProducerInfoRequestHeader().to_ext_fields() == {}


def test_query_consume_queue_body_wire_shape() -> None:
    body = QueryConsumeQueueBody(
        queue_data=(
            ConsumeQueueData(100, 90, 2598919, eval=True),
            ConsumeQueueData(190, 91, -(2**31) - 5, msg="m"),
        ),
        max_queue_index=7,
        min_queue_index=2,
    )
    doc = json.loads(body.encode())
    assert doc == {
        "maxQueueIndex": 7,
        "minQueueIndex": 2,
        "queueData": [
            {"eval": True, "physicOffset": 100, "physicSize": 90, "tagsCode": 2598919},
            {"eval": False, "msg": "m", "physicOffset": 190, "physicSize": 91, "tagsCode": -(2**31) - 5},
        ],
    }
    assert QueryConsumeQueueBody.decode(body.encode()) == body
    with_group = QueryConsumeQueueBody((), 0, 0, build_subscription("T", "TagA"), "null")
    doc = json.loads(with_group.encode())
    assert doc["filterData"] == "null" and doc["subscriptionData"]["subString"] == "TagA"
    assert doc["subscriptionData"]["codeSet"] == [2598919]
    assert QueryConsumeQueueBody.decode(with_group.encode()).subscription_data == with_group.subscription_data


def test_java_written_bodies_are_read() -> None:
    java = (
        b'{"filterData":"G@T is not online!","maxQueueIndex":3,"minQueueIndex":0,"queueData":[{"bitMap":null,'
        b'"eval":false,"extendDataJson":null,"msg":null,"physicOffset":0,"physicSize":180,"tagsCode":0}]}'
    )
    body = QueryConsumeQueueBody.decode(java)
    assert body.filter_data == "G@T is not online!" and body.subscription_data is None
    assert body.queue_data == (ConsumeQueueData(0, 180, 0),)
    assert body.queue_data[0].java_str() == (
        "ConsumeQueueData{physicOffset=0, physicSize=180, tagsCode=0, extendDataJson='null', bitMap='null',"
        " eval=false, msg='null'}"
    )
    with pytest.raises(ProtocolError):
        QueryConsumeQueueBody.decode(None)


def test_producer_table_wire_shape() -> None:
    info = ProducerInfo("127.0.0.1@1#2", "/127.0.0.1:5000", "JAVA", 453, 1700000000000)
    doc = json.loads(encode_producer_table({"PG": [info]}))
    assert doc == {
        "data": {
            "PG": [
                {
                    "clientId": "127.0.0.1@1#2",
                    "remoteIP": "/127.0.0.1:5000",
                    "language": "JAVA",
                    "version": 453,
                    "lastUpdateTimestamp": 1700000000000,
                }
            ]
        }
    }
    assert decode_producer_table(json.dumps(doc).encode()) == {"PG": [info]}
    assert decode_producer_table(b'{"data":{"E":null}}') == {"E": []}
    assert info.java_str() == (
        "clientId=127.0.0.1@1#2,remoteIP=/127.0.0.1:5000, language=JAVA, version=453,"
        " lastUpdateTimestamp=1700000000000"
    )
