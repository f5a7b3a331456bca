"""Tests of RemotingCommand and its JSON / ROCKETMQ header codecs, with hand-written golden bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import (
    RPC_ONEWAY,
    RPC_RESPONSE,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    decode_command,
    encode_command,
)
from rocketq.client.remoting.frame import FrameDecoder
from rocketq.client.remoting.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader


def _hex(text: str) -> bytes:
    """Hex with spaces, '|' separators and '#' comments (to end of line) ignored."""
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return bytes.fromhex(" ".join(lines).replace("|", " "))


def _payload(frame: bytes) -> memoryview:
    (payload,) = FrameDecoder().feed(frame)
    return payload


# ------------------------------------------------------------------ reference B.1 worked example

B1_JSON_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"PYTHON","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":401}'
)
B1_JSON = _hex("00 00 00 89  00 00 00 85") + B1_JSON_HEADER
B1_BINARY = _hex(
    """
    00 00 00 2d | 01 00 00 29 | 00 69 | 03 | 01 91 | 00 00 00 01 | 00 00 00 00 | 00 00 00 00 | 00 00 00 14
    00 05 746f706963 | 00 00 00 09 546f70696354657374   # "topic" -> "TopicTest"
    """
)


def _route_request() -> RemotingCommand:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    cmd.opaque = 1
    return cmd


def test_b1_json_golden() -> None:
    assert len(B1_JSON_HEADER) == 0x85
    assert encode_command(_route_request(), SerializeType.JSON) == B1_JSON


def test_b1_binary_golden() -> None:
    assert len(B1_BINARY) == 4 + 0x2D
    assert encode_command(_route_request(), SerializeType.ROCKETMQ) == B1_BINARY


@pytest.mark.parametrize(
    ("frame", "stype"), [(B1_JSON, SerializeType.JSON), (B1_BINARY, SerializeType.ROCKETMQ)]
)
def test_b1_decodes(frame: bytes, stype: SerializeType) -> None:
    cmd = decode_command(_payload(frame))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (105, 1, 0, 401)
    assert cmd.language is LanguageCode.PYTHON
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.remark is None and cmd.body == b""
    assert cmd.serialize_type is stype


# ------------------------------------------------------------------ SEND_MESSAGE_V2 request / response

V2_HEADER = SendMessageRequestHeaderV2(
    producer_group="pg",
    topic="T1",
    default_topic="TBW102",
    default_topic_queue_nums=4,
    queue_id=1,
    sys_flag=0,
    born_timestamp=1700000000000,
    flag=0,
    properties="K\x01v\x02",
    reconsume_times=0,
    unit_mode=False,
    max_reconsume_times=16,
    batch=False,
    broker_name="broker-a",
)

V2_JSON_HEADER = (
    b'{"code":310,"extFields":{"a":"pg","b":"T1","c":"TBW102","d":"4","e":"1","f":"0",'
    b'"g":"1700000000000","h":"0","i":"K\\u0001v\\u0002","j":"0","k":"false","l":"16","m":"false",'
    b'"n":"broker-a"},"flag":0,"language":"PYTHON","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}'
)
V2_JSON = _hex("00 00 01 1a | 00 00 01 11") + V2_JSON_HEADER + b"hello"  # 4 + 273 + 5 = 282

V2_BINARY = _hex(
    """
    00 00 00 b4          # length 180 = 4 + header 171 + body 5
    01 00 00 ab          # ROCKETMQ, header length 171 = 17 + 4 + 150
    01 36                # code 310
    03                   # language PYTHON
    01 91                # version 401
    00 00 00 07          # opaque 7
    00 00 00 00          # flag 0
    00 00 00 00          # remark null
    00 00 00 96          # extFields: 150 bytes
    0001 61 00000002 7067                       # a = pg              (9)
    0001 62 00000002 5431                       # b = T1              (9)
    0001 63 00000006 544257313032               # c = TBW102          (13)
    0001 64 00000001 34                         # d = 4               (8)
    0001 65 00000001 31                         # e = 1               (8)
    0001 66 00000001 30                         # f = 0               (8)
    0001 67 0000000d 31373030303030303030303030 # g = 1700000000000   (20)
    0001 68 00000001 30                         # h = 0               (8)
    0001 69 00000004 4b017602                   # i = K\\x01v\\x02     (11)
    0001 6a 00000001 30                         # j = 0               (8)
    0001 6b 00000005 66616c7365                 # k = false           (12)
    0001 6c 00000002 3136                       # l = 16              (9)
    0001 6d 00000005 66616c7365                 # m = false           (12)
    0001 6e 00000008 62726f6b65722d61           # n = broker-a        (15)
    68656c6c6f                                  # body "hello"
    """
)

SEND_RESPONSE_HEADER = SendMessageResponseHeader(
    msg_id="0A00000100002A9F0000000000000000", queue_id=1, queue_offset=42
)
RESP_JSON_HEADER = (
    b'{"code":0,"extFields":{"msgId":"0A00000100002A9F0000000000000000","queueId":"1","queueOffset":"42"},'
    b'"flag":1,"language":"PYTHON","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}'
)
RESP_JSON = _hex("00 00 00 bf | 00 00 00 bb") + RESP_JSON_HEADER  # 4 + 187

RESP_BINARY = _hex(
    """
    00 00 00 65          # length 101 = 4 + 97
    01 00 00 61          # ROCKETMQ, header length 97 = 17 + 4 + 76
    00 00                # code 0 SUCCESS
    03                   # PYTHON
    01 91                # version 401
    00 00 00 07          # opaque 7
    00 00 00 01          # flag RESPONSE
    00 00 00 00          # remark null
    00 00 00 4c          # extFields: 76 bytes
    0005 6d73674964 00000020                    # msgId (32 chars)    (43)
         30413030303030313030303032413946 30303030303030303030303030303030
    0007 71756575654964 00000001 31             # queueId = 1         (14)
    000b 71756575654f6666736574 00000002 3432   # queueOffset = 42    (19)
    """
)


def _send_request() -> RemotingCommand:
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, V2_HEADER.to_ext_fields(), b"hello")
    cmd.opaque = 7
    return cmd


def _send_response() -> RemotingCommand:
    return _send_request().make_response(
        ResponseCode.SUCCESS, ext_fields=SEND_RESPONSE_HEADER.to_ext_fields()
    )


def test_send_v2_json_golden() -> None:
    assert len(V2_JSON_HEADER) == 0x111
    assert encode_command(_send_request(), SerializeType.JSON) == V2_JSON


def test_send_v2_binary_golden() -> None:
    assert encode_command(_send_request(), SerializeType.ROCKETMQ) == V2_BINARY


def test_send_response_json_golden() -> None:
    assert len(RESP_JSON_HEADER) == 0xBB
    assert encode_command(_send_response(), SerializeType.JSON) == RESP_JSON


def test_send_response_binary_golden() -> None:
    assert encode_command(_send_response(), SerializeType.ROCKETMQ) == RESP_BINARY


@pytest.mark.parametrize("frame", [V2_JSON, V2_BINARY])
def test_send_v2_decodes(frame: bytes) -> None:
    cmd = decode_command(_payload(frame))
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.opaque == 7 and not cmd.is_response
    assert cmd.body == b"hello"
    assert SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields) == V2_HEADER


@pytest.mark.parametrize("frame", [RESP_JSON, RESP_BINARY])
def test_send_response_decodes(frame: bytes) -> None:
    cmd = decode_command(_payload(frame))
    assert cmd.code == ResponseCode.SUCCESS and cmd.is_response and cmd.opaque == 7
    assert SendMessageResponseHeader.from_ext_fields(cmd.ext_fields) == SEND_RESPONSE_HEADER


# ------------------------------------------------------------------ behaviour


def test_remark_in_both_serializations() -> None:
    cmd = RemotingCommand(code=1, opaque=3, flag=RPC_RESPONSE, remark="boom: é")
    js = encode_command(cmd)
    assert b'"remark":"boom: \xc3\xa9"' in js
    assert js.index(b'"opaque"') < js.index(b'"remark"') < js.index(b'"serializeType')
    binary = encode_command(cmd, SerializeType.ROCKETMQ)
    assert _hex("00 00 00 08") + "boom: é".encode() in binary
    for frame in (js, binary):
        assert decode_command(_payload(frame)).remark == "boom: é"


def test_code_above_int16_falls_back_to_json() -> None:
    cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, {"topic": "t"})
    frame = encode_command(cmd, SerializeType.ROCKETMQ)
    assert frame[4] == SerializeType.JSON
    decoded = decode_command(_payload(frame))
    assert decoded.code == 200050 and decoded.serialize_type is SerializeType.JSON


def test_negative_pseudo_code_fits_binary() -> None:
    frame = encode_command(RemotingCommand(code=-1006), SerializeType.ROCKETMQ)
    assert frame[4] == SerializeType.ROCKETMQ
    assert decode_command(_payload(frame)).code == -1006


def test_out_of_int32_values_rejected() -> None:
    with pytest.raises(ProtocolError, match="opaque 2147483648"):
        encode_command(RemotingCommand(code=1, opaque=1 << 31))


def test_request_and_make_response() -> None:
    req = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "t"}, oneway=True)
    assert req.is_oneway and not req.is_response and req.flag == RPC_ONEWAY
    req.opaque = 99
    req.language = LanguageCode.JAVA
    req.version = 409
    resp = req.make_response(ResponseCode.SYSTEM_ERROR, remark="x", body=b"b")
    assert resp.opaque == 99 and resp.flag == RPC_RESPONSE and resp.is_response
    assert resp.language is LanguageCode.PYTHON and resp.version == 401
    assert (resp.code, resp.remark, resp.body, resp.ext_fields) == (1, "x", b"b", {})
    assert "body=<1 bytes>" in repr(resp)


def test_java_minimal_response_from_reference() -> None:
    header = (
        b'{"code":0,"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":401}'
    )
    cmd = decode_command(struct.pack(">i", len(header)) + header)
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.language) == (0, 1, 42, LanguageCode.JAVA)
    assert cmd.ext_fields == {} and cmd.remark is None


def _decode_json(header: bytes, body: bytes = b"") -> RemotingCommand:
    return decode_command(struct.pack(">i", len(header)) + header + body)


def test_json_decoding_is_lenient() -> None:
    cmd = _decode_json(
        b'{"opaque":"12","code":" 17 ","language":"KOTLIN","unknownKey":[1,2],"flag":1.0,'
        b'"extFields":{"n":5,"b":true,"f":false,"z":null,"o":{"x":1},"s":"v"}}',
        b"BODY",
    )
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (17, 12, 1, 0)
    assert cmd.language is LanguageCode.OTHER
    assert cmd.ext_fields == {"n": "5", "b": "true", "f": "false", "o": '{"x":1}', "s": "v"}
    assert cmd.body == b"BODY"
    assert _decode_json(b'{"language":9}').language is LanguageCode.GO
    assert _decode_json(b'{"language":null,"remark":null,"extFields":null}').ext_fields == {}


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1,2]", "not an object"),
        (b'{"code":"abc"}', "'code' is not an integer"),
        (b'{"extFields":[1]}', "extFields is not an object"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_json_decoding_errors(header: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        _decode_json(header)


def _binary_payload(header: bytes) -> bytes:
    return struct.pack(">i", (1 << 24) | len(header)) + header


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (_hex("0069 03 0191 00000001 00000000"), "shorter than the minimum 21"),
        (_hex("0069 03 0191 00000001 00000000 00000010 00000000"), "remark length 16 overruns"),
        (_hex("0069 03 0191 00000001 00000000 ffffffff 00000000"), "remark length -1 overruns"),
        (_hex("0069 03 0191 00000001 00000000 00000000 00000009 0001 61"), "extFields length 9 overruns"),
        (_hex("0069 03 0191 00000001 00000000 00000000 00000003 0009 61"), "key length 9 overruns"),
        (
            _hex("0069 03 0191 00000001 00000000 00000000 00000008 0001 61 00000009 00"),
            "value length 9 overruns",
        ),
        (_hex("0069 03 0191 00000001 00000000 00000002 c328 00000000"), "invalid UTF-8"),
        (_hex("0069 03 0191 00000001 00000000 00000000 00000001 00"), "truncated extFields key length"),
    ],
)
def test_binary_decoding_errors(header: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_command(_binary_payload(header))


def test_decode_command_bad_payloads() -> None:
    with pytest.raises(ProtocolError, match="too short"):
        decode_command(b"\x00\x00")
    with pytest.raises(ProtocolError, match="exceeds the payload"):
        decode_command(struct.pack(">i", 10) + b"{}")
    with pytest.raises(ProtocolError, match="unknown serialize type 5"):
        decode_command(struct.pack(">i", (5 << 24) | 2) + b"{}")


def test_unknown_binary_language_is_other() -> None:
    cmd = decode_command(_binary_payload(_hex("0069 63 0191 00000001 00000000 00000000 00000000")))
    assert cmd.language is LanguageCode.OTHER and cmd.ext_fields == {}


def test_language_codes() -> None:
    assert [m.name for m in LanguageCode] == [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY",
        "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS",
    ]  # fmt: skip
    assert [m.value for m in LanguageCode] == list(range(14))


# ------------------------------------------------------------------ hypothesis round trips

_int16 = st.integers(min_value=-(1 << 15), max_value=(1 << 15) - 1)
_int32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
_text = st.text(max_size=30)
commands = st.builds(
    RemotingCommand,
    code=_int16,
    opaque=_int32,
    flag=_int32,
    language=st.sampled_from(list(LanguageCode)),
    version=_int16,
    remark=st.none() | _text,
    ext_fields=st.dictionaries(_text, _text, max_size=6),
    body=st.binary(max_size=200),
)


def _expected(cmd: RemotingCommand, stype: SerializeType) -> RemotingCommand:
    remark = None if stype is SerializeType.ROCKETMQ and cmd.remark == "" else cmd.remark
    return RemotingCommand(
        code=cmd.code,
        opaque=cmd.opaque,
        flag=cmd.flag,
        language=cmd.language,
        version=cmd.version,
        remark=remark,
        ext_fields=dict(cmd.ext_fields),
        body=cmd.body,
        serialize_type=stype,
    )


@settings(max_examples=200, deadline=None)
@given(cmd=commands, stype=st.sampled_from(list(SerializeType)))
def test_round_trip(cmd: RemotingCommand, stype: SerializeType) -> None:
    frame = encode_command(cmd, stype)
    assert decode_command(_payload(frame)) == _expected(cmd, stype)


@settings(max_examples=100, deadline=None)
@given(cmd=commands, code=st.integers(min_value=1 << 15, max_value=(1 << 31) - 1))
def test_round_trip_large_codes_use_json(cmd: RemotingCommand, code: int) -> None:
    cmd.code = code
    decoded = decode_command(_payload(encode_command(cmd, SerializeType.ROCKETMQ)))
    assert decoded == _expected(cmd, SerializeType.JSON)
