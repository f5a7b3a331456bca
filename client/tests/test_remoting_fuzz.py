"""Property-based fuzzing of the frame decoder and both header decoders.

Whatever bytes a peer sends, decoding gives frames, a clean :class:`ProtocolError` (FrameError,
HeaderError... are subclasses), or "need more bytes" -- never another exception (no
RecursionError, OverflowError, struct.error, UnicodeDecodeError, KeyError...).
"""

from __future__ import annotations

import json
import struct

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting import lenient_json
from rocketq.client.remoting.command import (
    MalformedRequestError,
    RemotingCommand,
    decode_binary_header,
    decode_command,
    decode_json_header,
    encode_command,
)
from rocketq.client.remoting.connection import (
    MalformedRequest,
    RemotingConnection,
    RequestReceived,
    UnexpectedResponse,
)
from rocketq.client.remoting.frame import FrameDecoder, SerializeType

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


# JSON values, including hostile ones: huge ints, floats, deep nesting, wrong types.
_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 80), max_value=1 << 80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_header_keys = st.sampled_from(
    ["code", "opaque", "flag", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC", "x"]
)
_json_headers = st.dictionaries(_header_keys, _json_value, max_size=8)


def _check_command(cmd: RemotingCommand) -> None:
    """A decoded command can always be answered: its opaque and flag fit the wire."""
    assert _INT32[0] <= cmd.opaque <= _INT32[1]
    for value in (cmd.code, cmd.flag, cmd.version):
        assert _INT32[0] <= value <= _INT32[1]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())
    encode_command(cmd.make_response(1, cmd.remark), SerializeType.JSON)


@FUZZ
@given(st.binary(max_size=400), st.integers(min_value=1, max_value=64))
@example(b"\x00\x00\x00\x08\x00\x00\x00\x04" + b"[" * 4, 3)
@example(b"\xff" * 16, 1)
def test_frame_decoder_any_bytes(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_length=1 << 12)
    try:
        for i in range(0, len(data), chunk):
            for frame in decoder.feed(data[i : i + chunk]):
                assert len(frame) >= 4
    except ProtocolError:
        return
    assert decoder.buffered <= len(data)


@FUZZ
@given(st.binary(max_size=300))
@example(b"[" * 100_000)
@example(b'{"opaque":' + b"[" * 5000 + b"}")
@example(b'{"opaque":1180591620717411303424,"code":10}')
@example(b'{"opaque":5,"code":1e999}')
@example(b'{"opaque":5,"code":10,"extFields":"x"}')
@example(b"\xff\xfe")
def test_json_header_decoder_any_bytes(raw: bytes) -> None:
    try:
        cmd = decode_json_header(raw)
    except ProtocolError:
        return
    _check_command(cmd)


@FUZZ
@given(_json_headers)
def test_json_header_decoder_any_json_object(obj: dict[str, object]) -> None:
    try:
        raw = json.dumps(obj).encode()
    except (ValueError, RecursionError):
        return
    try:
        cmd = decode_json_header(raw)
    except MalformedRequestError as exc:
        assert _INT32[0] <= exc.opaque <= _INT32[1]  # answerable
        return
    except ProtocolError:
        return
    _check_command(cmd)


@FUZZ
@given(st.binary(max_size=300))
@example(b"\x00" * 17 + b"\x7f\xff\xff\xff")
@example(b"\x00\x0a\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x06\xff\xff")
def test_binary_header_decoder_any_bytes(raw: bytes) -> None:
    try:
        cmd = decode_binary_header(raw, 0, len(raw))
    except ProtocolError:
        return
    _check_command(cmd)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([0, 1, 2, 255]))
def test_decode_command_any_payload(header: bytes, serialize_type: int) -> None:
    payload = memoryview(_frame(header, b"body", serialize_type))[4:]
    try:
        cmd = decode_command(payload)
    except ProtocolError:
        return
    _check_command(cmd)


@FUZZ
@given(
    st.lists(st.one_of(st.binary(max_size=80), _json_headers.map(lambda o: _frame(_dumps(o)))), max_size=6)
)
def test_connection_any_stream(parts: list[bytes]) -> None:
    """The sans-IO connection turns any stream into events or one clean ProtocolError."""
    conn = RemotingConnection()
    try:
        for part in parts:
            for event in conn.receive_data(part):
                if isinstance(event, MalformedRequest):
                    assert _INT32[0] <= event.command.opaque <= _INT32[1] and event.reason
                elif isinstance(event, (RequestReceived, UnexpectedResponse)):
                    _check_command(event.command)
    except ProtocolError:
        assert conn.broken


@FUZZ
@given(st.binary(max_size=300))
@example(b"[" * 100_000)
@example(b"{0:" * 5000)
@example(b"{{" * 3000)
def test_lenient_json_any_bytes(raw: bytes) -> None:
    try:
        lenient_json.loads(raw)
    except ProtocolError:
        pass


def _dumps(obj: object) -> bytes:
    try:
        return json.dumps(obj).encode()
    except (ValueError, RecursionError):
        return b"{}"
