"""Tests of the typed command headers and their extFields conversion."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import HeaderError
from rocketq.client.remoting import headers as h
from rocketq.client.remoting.headers import CommandHeader, JavaType

ALL_HEADERS: list[type[CommandHeader]] = [
    cls
    for _, cls in inspect.getmembers(h, inspect.isclass)
    if issubclass(cls, CommandHeader) and cls is not CommandHeader
]

V1 = h.SendMessageRequestHeader(
    producer_group="pg",
    topic="T1",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=-1,
    sys_flag=4,
    born_timestamp=1700000000000,
    flag=0,
    properties="TRAN_MSG\x01true\x02",
    broker_name="broker-a",
)


def test_send_v1_wire_names() -> None:
    assert V1.to_ext_fields() == {
        "producerGroup": "pg",
        "topic": "T1",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "-1",
        "sysFlag": "4",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": "TRAN_MSG\x01true\x02",
        "unitMode": "false",
        "batch": "false",
        "bname": "broker-a",
    }


def test_send_v1_v2_conversion() -> None:
    v2 = V1.to_v2()
    assert v2.to_ext_fields() == {
        "a": "pg",
        "b": "T1",
        "c": "TBW102",
        "d": "4",
        "e": "-1",
        "f": "4",
        "g": "1700000000000",
        "h": "0",
        "i": "TRAN_MSG\x01true\x02",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    assert v2.to_v1() == V1
    assert h.parse_send_message_request(310, v2.to_ext_fields()) == V1
    assert h.parse_send_message_request(320, v2.to_ext_fields()) == V1
    assert h.parse_send_message_request(10, V1.to_ext_fields()) == V1


def test_missing_required_field_names_class_and_field() -> None:
    ext = V1.to_v2().to_ext_fields()
    del ext["g"]
    with pytest.raises(HeaderError, match=r"SendMessageRequestHeaderV2: required field 'g' is missing"):
        h.SendMessageRequestHeaderV2.from_ext_fields(ext)
    with pytest.raises(HeaderError, match=r"SendMessageRequestHeaderV2: required field 'g' is missing"):
        h.parse_send_message_request(310, ext)
    with pytest.raises(HeaderError, match=r"SendMessageRequestHeaderV2: field 'e' is not a Java Integer"):
        h.parse_send_message_request(310, {**V1.to_v2().to_ext_fields(), "e": "²"})


@pytest.mark.parametrize("bad", ["", "1.5", " 1", "1 ", "0x10", "1_000", "abc", "١", "²", "+", "-"])
def test_bad_integer_rejected(bad: str) -> None:
    with pytest.raises(
        HeaderError, match=r"QueryConsumerOffsetRequestHeader: field 'queueId' is not a Java Integer"
    ):
        h.QueryConsumerOffsetRequestHeader.from_ext_fields(
            {"consumerGroup": "g", "topic": "t", "queueId": bad}
        )


def test_java_integer_ranges() -> None:
    ext = {"topic": "t", "queueId": "+2147483647"}
    assert h.GetMinOffsetRequestHeader.from_ext_fields(ext).queue_id == 2**31 - 1
    with pytest.raises(HeaderError, match="outside the Java Integer range"):
        h.GetMinOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": "2147483648"})
    assert h.GetMinOffsetResponseHeader.from_ext_fields({"offset": "-9223372036854775808"}).offset == -(2**63)
    with pytest.raises(HeaderError, match="'offset' = 9223372036854775808 is outside the Java Long range"):
        h.GetMinOffsetResponseHeader.from_ext_fields({"offset": "9223372036854775808"})
    with pytest.raises(HeaderError, match="outside the Java Integer range"):
        h.GetMinOffsetRequestHeader(topic="t", queue_id=2**31).to_ext_fields()


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("tRuE", True),
        ("false", False),
        ("1", False),
        ("yes", False),
        ("", False),
        (" true", False),
    ],
)
def test_boolean_parsed_like_java(raw: str, value: bool) -> None:
    ext = {"topic": "t", "group": "g", "timestamp": "0", "isForce": raw}
    assert h.ResetOffsetRequestHeader.from_ext_fields(ext).is_force is value


def test_optional_omitted_and_always_sent_defaults() -> None:
    pull = h.PullMessageRequestHeader(
        consumer_group="cg",
        topic="t",
        queue_id=0,
        queue_offset=10,
        max_msg_nums=32,
        sys_flag=7,
        commit_offset=5,
        suspend_timeout_millis=15000,
        sub_version=1700000000000,
    )
    ext = pull.to_ext_fields()
    assert "subscription" not in ext and "maxMsgBytes" not in ext and "expressionType" not in ext
    assert h.PullMessageRequestHeader.from_ext_fields(ext) == pull
    pull2 = pull.replace(subscription="*", expression_type="TAG", max_msg_bytes=1 << 20)
    assert pull2.to_ext_fields()["maxMsgBytes"] == "1048576"
    reset = h.ResetOffsetRequestHeader(topic="t", group="g", timestamp=1)
    assert reset.to_ext_fields() == {"topic": "t", "group": "g", "timestamp": "1", "isForce": "false"}
    assert h.ResetOffsetRequestHeader.from_ext_fields({"topic": "t", "group": "g", "timestamp": "1"}) == reset
    create = h.CreateTopicRequestHeader(
        topic="t", default_topic="TBW102", read_queue_nums=8, write_queue_nums=8, perm=6
    )
    assert create.to_ext_fields() == {
        "topic": "t",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }


def test_required_none_rejected_on_encode() -> None:
    bad = h.GetTopicStatsInfoRequestHeader(topic=None)  # type: ignore[arg-type]
    with pytest.raises(HeaderError, match="GetTopicStatsInfoRequestHeader: required field 'topic'"):
        bad.to_ext_fields()


def test_extra_ext_fields_are_ignored() -> None:
    ext = {"consumerGroup": "cg", "ns": "x", "bname": "b"}
    assert h.GetConsumerListByGroupRequestHeader.from_ext_fields(ext).consumer_group == "cg"


def test_special_wire_names() -> None:
    q = h.QueryMessageRequestHeader(
        topic="t", key="k", max_num=32, begin_timestamp=0, end_timestamp=9, unique_key_query=True
    )
    assert q.to_ext_fields()["_UNIQUE_KEY_QUERY"] == "true"
    u = h.UnregisterClientRequestHeader(client_id="1.2.3.4@1", consumer_group="cg")
    assert u.to_ext_fields() == {"clientID": "1.2.3.4@1", "consumerGroup": "cg"}
    pull = h.PullMessageRequestHeader(
        consumer_group="c",
        topic="t",
        queue_id=0,
        queue_offset=0,
        max_msg_nums=1,
        sys_flag=0,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
    )
    p = h.PullMessageRequestHeader.from_ext_fields({**pull.to_ext_fields(), "proxyFrowardClientId": "x"})
    assert p.proxy_forward_client_id == "x"
    r = h.GetRouteInfoRequestHeader(topic="T", accept_standard_json_only=True)
    assert r.to_ext_fields() == {"topic": "T", "acceptStandardJsonOnly": "true"}
    assert isinstance(
        h.ResetConsumerClientOffsetRequestHeader(topic="t", group="g", timestamp=0),
        h.ResetOffsetRequestHeader,
    )


def test_headers_are_frozen_and_keyword_only() -> None:
    hdr = h.GetKVConfigRequestHeader(namespace="ns", key="k")
    with pytest.raises(AttributeError):
        hdr.key = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        h.GetKVConfigRequestHeader("ns", "k")  # type: ignore[call-arg]


def test_required_header_coverage() -> None:
    names = {cls.__name__ for cls in ALL_HEADERS}
    required_names = [
        "SendMessageRequestHeader",
        "SendMessageRequestHeaderV2",
        "SendMessageResponseHeader",
        "PullMessageRequestHeader",
        "PullMessageResponseHeader",
        "QueryConsumerOffsetRequestHeader",
        "QueryConsumerOffsetResponseHeader",
        "UpdateConsumerOffsetRequestHeader",
        "GetMaxOffsetRequestHeader",
        "GetMaxOffsetResponseHeader",
        "GetMinOffsetRequestHeader",
        "GetMinOffsetResponseHeader",
        "SearchOffsetRequestHeader",
        "SearchOffsetResponseHeader",
        "GetEarliestMsgStoretimeRequestHeader",
        "GetEarliestMsgStoretimeResponseHeader",
        "QueryMessageRequestHeader",
        "QueryMessageResponseHeader",
        "ViewMessageRequestHeader",
        "UnregisterClientRequestHeader",
        "GetConsumerListByGroupRequestHeader",
        "NotifyConsumerIdsChangedRequestHeader",
        "CreateTopicRequestHeader",
        "DeleteTopicRequestHeader",
        "EndTransactionRequestHeader",
        "CheckTransactionStateRequestHeader",
        "ConsumerSendMsgBackRequestHeader",
        "GetConsumeStatsRequestHeader",
        "GetTopicStatsInfoRequestHeader",
        "ResetOffsetRequestHeader",
        "ResetConsumerClientOffsetRequestHeader",
        "GetRouteInfoRequestHeader",
        "RegisterBrokerRequestHeader",
        "RegisterBrokerResponseHeader",
        "UnRegisterBrokerRequestHeader",
        "DeleteTopicFromNamesrvRequestHeader",
        "PutKVConfigRequestHeader",
        "GetKVConfigRequestHeader",
        "GetKVConfigResponseHeader",
        "DeleteKVConfigRequestHeader",
        "GetKVListByNamespaceRequestHeader",
        "QueryDataVersionRequestHeader",
    ]
    for required in required_names:
        assert required in names


_VALUES: dict[JavaType, st.SearchStrategy[Any]] = {
    JavaType.STRING: st.text(max_size=20),
    JavaType.INTEGER: st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
    JavaType.LONG: st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    JavaType.BOOLEAN: st.booleans(),
}


@st.composite
def _any_header(draw: st.DrawFn) -> CommandHeader:
    cls = draw(st.sampled_from(ALL_HEADERS))
    kwargs: dict[str, Any] = {}
    for f in cls.wire_fields:
        value = _VALUES[f.java]
        kwargs[f.attr] = draw(value if f.required else st.none() | value)
    return cls(**kwargs)


@settings(max_examples=300, deadline=None)
@given(header=_any_header())
def test_every_header_round_trips(header: CommandHeader) -> None:
    ext = header.to_ext_fields()
    assert all(isinstance(v, str) for v in ext.values())
    decoded = type(header).from_ext_fields(ext)
    for f in header.wire_fields:
        sent = getattr(header, f.attr)
        got = getattr(decoded, f.attr)
        if sent is None:  # omitted on the wire: the receiver sees the declared default
            assert got == type(header).__dataclass_fields__[f.attr].default  # type: ignore[attr-defined]
        else:
            assert got == sent
