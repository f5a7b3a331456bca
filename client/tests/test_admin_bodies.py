"""The admin answer bodies of remoting.admin_bodies, read from fastjson's text as a Java broker
writes it (object map keys) and from standard JSON (a key as the object's JSON text)."""

from __future__ import annotations

import json

from rocketq.client.remoting.admin_bodies import (
    ConsumerConnection,
    QueueProgress,
    consumer_offset_groups,
    parse_consume_stats,
    parse_consumer_connection,
    parse_offset_table,
    subscription_group_names,
)
from rocketq.client.remoting.vocabulary import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_reset_offset_body_with_fastjson_object_keys() -> None:
    body = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:7,'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:9}}'
    )
    assert parse_offset_table(body) == {MQ0: 7, MQ1: 9}
    assert parse_offset_table(b"") == {}


def test_consume_stats_with_object_keys_and_json_text_keys() -> None:
    java = (
        b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
        b'{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000000}}}'
    )
    assert parse_consume_stats(java) == [QueueProgress(MQ0, 10, 4, 1700000000000)]
    key = json.dumps(json.dumps({"brokerName": "broker-a", "queueId": 1, "topic": "T"}))
    text_key = ('{"offsetTable":{' + key + ':{"brokerOffset":3}}}').encode()
    [row] = parse_consume_stats(text_key)
    assert (row.message_queue, row.broker_offset, row.consumer_offset, row.lag) == (MQ1, 3, -1, 3)
    assert parse_consume_stats(b"") == []


def test_consumer_connection_body() -> None:
    body = (
        b'{"connectionSet":[{"clientAddr":"10.0.0.1:5000","clientId":"10.0.0.1@1","language":"JAVA",'
        b'"version":453}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"subString":"TagA || TagB","topic":"T"},'
        b'"%RETRY%cg":{"topic":"%RETRY%cg"}}}'
    )
    answer = parse_consumer_connection(body)
    assert answer.connections == (ConsumerConnection("10.0.0.1@1", "10.0.0.1:5000", "JAVA", 453),)
    assert dict(answer.subscriptions) == {"T": "TagA || TagB", "%RETRY%cg": "*"}
    assert (answer.consume_type, answer.message_model, answer.consume_from_where) == (
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    )


def test_group_names_of_subscription_and_offset_wrappers() -> None:
    groups = (
        b'{"dataVersion":{"counter":1,"timestamp":1},"subscriptionGroupTable":{"cg":{},"TOOLS_CONSUMER":{}}}'
    )
    assert subscription_group_names(groups) == ["cg", "TOOLS_CONSUMER"]
    offsets = b'{"offsetTable":{"T@cg":{0:5},"%RETRY%cg@cg":{0:0},"bad":{}}}'
    assert consumer_offset_groups(offsets) == ["cg", "cg"]
