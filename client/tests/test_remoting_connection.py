"""Tests of the sans-IO RemotingConnection: two connections wired to each other, no sockets."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import ClientError, FrameError, ProtocolError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand, SerializeType, encode_command
from rocketq.client.remoting.connection import (
    MalformedRequest,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
    UnexpectedResponse,
)


def _route_request(topic: str = "T") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def test_request_response_round_trip() -> None:
    client, server = RemotingConnection(), RemotingConnection()
    req = _route_request()
    data = client.send_request(req)
    assert req.opaque == 1 and client.pending_opaques == {1}
    (event,) = server.receive_data(data)
    assert isinstance(event, RequestReceived)
    assert event.command.ext_fields == {"topic": "T"} and event.command.opaque == 1
    resp = event.command.make_response(ResponseCode.SUCCESS, body=b'{"queueDatas":[]}')
    (answer,) = client.receive_data(server.send_response(resp))
    assert isinstance(answer, ResponseReceived)
    assert answer.command.opaque == 1 and answer.command.body == b'{"queueDatas":[]}'
    assert client.pending_opaques == frozenset()


def test_opaques_increment_and_many_in_flight_out_of_order() -> None:
    client, server = RemotingConnection(), RemotingConnection()
    stream = b"".join(client.send_request(_route_request(f"T{i}")) for i in range(5))
    assert client.pending_opaques == {1, 2, 3, 4, 5}
    requests = server.receive_data(stream)
    assert [e.command.opaque for e in requests] == [1, 2, 3, 4, 5]
    replies = b"".join(server.send_response(e.command.make_response(0)) for e in reversed(requests))
    events = client.receive_data(replies)
    assert [type(e) for e in events] == [ResponseReceived] * 5
    assert [e.command.opaque for e in events] == [5, 4, 3, 2, 1]


def test_oneway_is_not_pending_and_response_to_it_is_unexpected() -> None:
    client, server = RemotingConnection(), RemotingConnection()
    req = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
    (event,) = server.receive_data(client.send_request(req))
    assert isinstance(event, RequestReceived) and event.command.is_oneway
    assert client.pending_opaques == frozenset()
    (late,) = client.receive_data(server.send_response(event.command.make_response(0)))
    assert isinstance(late, UnexpectedResponse)


def test_cancel_then_late_response_is_unexpected() -> None:
    client, server = RemotingConnection(), RemotingConnection()
    req = _route_request()
    (event,) = server.receive_data(client.send_request(req))
    assert client.cancel(req.opaque) is True
    assert client.cancel(req.opaque) is False
    (late,) = client.receive_data(server.send_response(event.command.make_response(0)))
    assert isinstance(late, UnexpectedResponse) and late.command.opaque == req.opaque


def test_fail_all() -> None:
    client = RemotingConnection()
    for _ in range(3):
        client.send_request(_route_request())
    assert client.fail_all() == [1, 2, 3]
    assert client.pending_opaques == frozenset() and client.fail_all() == []


def test_opaque_wraps_around_and_skips_pending() -> None:
    client = RemotingConnection(first_opaque=2**31 - 2)
    a, b, c, d = (_route_request() for _ in range(4))
    for cmd in (a, b, c):
        client.send_request(cmd)
    assert (a.opaque, b.opaque, c.opaque) == (2**31 - 2, 2**31 - 1, -(2**31))
    # Wrap all the way round: the still-pending a and b are skipped.
    client._next_opaque = 2**31 - 2
    client.send_request(d)
    assert d.opaque == -(2**31) + 1
    client.cancel(a.opaque)
    client._next_opaque = 2**31 - 2
    e = _route_request()
    client.send_request(e)
    assert e.opaque == 2**31 - 2


def test_send_request_rejects_response_and_bad_first_opaque() -> None:
    with pytest.raises(ClientError, match="use send_response"):
        RemotingConnection().send_request(RemotingCommand(code=0, flag=1))
    with pytest.raises(ClientError, match="first_opaque"):
        RemotingConnection(first_opaque=2**31)


def test_send_response_sets_flag() -> None:
    client, server = RemotingConnection(), RemotingConnection()
    req = _route_request()
    server.receive_data(client.send_request(req))
    bare = RemotingCommand(code=ResponseCode.TOPIC_NOT_EXIST, opaque=req.opaque, remark="No topic route info")
    (event,) = client.receive_data(server.send_response(bare))
    assert isinstance(event, ResponseReceived) and event.command.remark == "No topic route info"


def test_server_initiated_request_on_same_connection() -> None:
    client, broker = RemotingConnection(), RemotingConnection()
    pending = _route_request()
    client_bytes = client.send_request(pending)
    notify = RemotingCommand.request(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}, oneway=True
    )
    broker.receive_data(client_bytes)
    events = client.receive_data(broker.send_request(notify))
    assert [type(e) for e in events] == [RequestReceived]
    assert events[0].command.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert client.pending_opaques == {pending.opaque}


def test_mixed_serializations() -> None:
    client = RemotingConnection(SerializeType.ROCKETMQ)
    server = RemotingConnection(SerializeType.JSON)
    req = _route_request()
    data = client.send_request(req)
    assert data[4] == SerializeType.ROCKETMQ
    (event,) = server.receive_data(data)
    assert event.command.serialize_type is SerializeType.ROCKETMQ
    reply = server.send_response(event.command.make_response(0))
    assert reply[4] == SerializeType.JSON
    (answer,) = client.receive_data(reply)
    assert isinstance(answer, ResponseReceived) and answer.command.serialize_type is SerializeType.JSON


def test_protocol_error_breaks_the_connection() -> None:
    conn = RemotingConnection()
    with pytest.raises(FrameError, match="unknown serialize type 9"):
        conn.receive_data(struct.pack(">ii", 8, (9 << 24) | 1) + b"xxxx")
    assert conn.broken
    with pytest.raises(ProtocolError, match="connection already failed"):
        conn.receive_data(encode_command(RemotingCommand(code=1)))


def test_bad_header_raises_protocol_error() -> None:
    conn = RemotingConnection()
    with pytest.raises(ProtocolError, match="not valid JSON"):
        conn.receive_data(struct.pack(">ii", 6, 2) + b"{x")
    assert conn.broken


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=12),
    chunk=st.integers(min_value=1, max_value=64),
    stype=st.sampled_from(list(SerializeType)),
)
def test_chunked_conversation(n: int, chunk: int, stype: SerializeType) -> None:
    client, server = RemotingConnection(stype), RemotingConnection()
    stream = b"".join(client.send_request(_route_request(f"topic-{i}")) for i in range(n))
    events = []
    for i in range(0, len(stream), chunk):
        events += server.receive_data(stream[i : i + chunk])
    assert [e.command.ext_fields["topic"] for e in events] == [f"topic-{i}" for i in range(n)]
    replies = b"".join(
        server.send_response(e.command.make_response(0, body=b"x" * i)) for i, e in enumerate(events)
    )
    answers = []
    for i in range(0, len(replies), chunk):
        answers += client.receive_data(replies[i : i + chunk])
    assert all(isinstance(a, ResponseReceived) for a in answers)
    assert [len(a.command.body) for a in answers] == list(range(n))
    assert client.pending_opaques == frozenset()


def test_malformed_request_with_usable_opaque_is_an_event_not_a_broken_connection() -> None:
    server = RemotingConnection()
    bad = b'{"code":1180591620717411303424,"opaque":7,"flag":2}'
    good = encode_command(_route_request())
    (malformed, request) = server.receive_data(struct.pack(">ii", 4 + len(bad), len(bad)) + bad + good)
    assert isinstance(malformed, MalformedRequest) and "code" in malformed.reason
    assert malformed.command.opaque == 7 and malformed.command.is_oneway
    assert isinstance(request, RequestReceived) and not server.broken
    # without a usable opaque there is nothing to answer: the connection is broken
    worse = b'{"code":10,"opaque":1180591620717411303424}'
    with pytest.raises(ProtocolError, match="opaque"):
        server.receive_data(struct.pack(">ii", 4 + len(worse), len(worse)) + worse)
    assert server.broken
