"""RemotingCommand and its two header serializations, JSON and ROCKETMQ binary.

A command is a header (code, language, version, opaque, flag, remark, extFields) plus an opaque
body.  The header is serialized either as JSON (fastjson style: keys in alphabetical order,
``remark`` omitted when null, ``language`` as the enum *name*) or as the compact ROCKETMQ binary
layout (all big-endian, signed)::

    offset  size  field
    0       2     code            int16
    2       1     language        int8 (LanguageCode value)
    3       2     version         int16
    5       4     opaque          int32
    9       4     flag            int32 (bit 0 RESPONSE, bit 1 ONEWAY)
    13      4     remark_length   int32, 0 = null
    17      r     remark          UTF-8
    17+r    4     ext_length      int32, total bytes of the entries that follow
    21+r    ...   entries         [int16 key_length][key][int32 value_length][value] ...

Theory of operation: the receiver decodes every frame by its own serialize-type byte, so a sender
may pick the serialization per frame.  :func:`encode_command` honours the requested type except
when the command cannot be expressed in binary (code or version outside int16, such as the
200050+ POP codes, or an extFields key longer than 32767 bytes); such a command is sent as JSON,
which every RocketMQ peer accepts on any connection.  Decoding is lenient the way fastjson is:
missing keys take defaults, unknown keys are ignored, numbers may arrive as numeric strings,
unknown language names become ``OTHER`` and non-string extFields values are stringified.

Hostile headers: every decoding failure is a :class:`~rocketq.client.errors.ProtocolError` (too
deep nesting included, never a ``RecursionError``).  A JSON header whose ``opaque`` is a valid
int32 but whose ``code``, ``flag``, ``version`` or ``extFields`` is out of range or of the wrong
type raises :class:`MalformedRequestError`, which carries the opaque so the transport can answer
``SYSTEM_ERROR`` instead of leaving the sender waiting; without a usable opaque (missing type,
outside int32) the error is a plain ProtocolError and the transport closes the connection.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from rocketq.client.errors import HeaderError, ProtocolError
from rocketq.client.remoting.frame import FRAME_PREFIX, SerializeType, encode_frame

__all__ = [
    "DEFAULT_VERSION",
    "RPC_ONEWAY",
    "RPC_RESPONSE",
    "LanguageCode",
    "MalformedRequestError",
    "RemotingCommand",
    "SerializeType",
    "decode_command",
    "encode_command",
]

RPC_RESPONSE = 0x1
RPC_ONEWAY = 0x2

DEFAULT_VERSION = 401
"""MQVersion V4_9_4: Java NameServers answer standard JSON (quoted keys) from this version on."""


class LanguageCode(IntEnum):
    """The sender's implementation language; JSON carries the name, binary the value."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


_LANGUAGE_BY_NAME: dict[str, LanguageCode] = {m.name: m for m in LanguageCode}
_LANGUAGE_BY_VALUE: dict[int, LanguageCode] = {m.value: m for m in LanguageCode}

_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1

# Binary header pieces; see the field diagram in the module docstring.
_BIN_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remark_length
assert _BIN_FIXED.size == 17
_INT16 = struct.Struct(">h")
assert _INT16.size == 2
_INT32 = struct.Struct(">i")
assert _INT32.size == 4
_PREFIX_WORD = 4  # serialize-type/header-length int32 at the start of a payload
assert FRAME_PREFIX.size == 4 + _PREFIX_WORD


@dataclass(slots=True, repr=False)
class RemotingCommand:
    """One request or response of the remoting protocol."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.PYTHON
    version: int = DEFAULT_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON
    """The serialization the command was decoded with (JSON for commands built locally)."""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A new request; the opaque is assigned when it is sent (see RemotingConnection)."""
        return cls(
            code=int(code),
            flag=RPC_ONEWAY if oneway else 0,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
        )

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque, RESPONSE flag, our own language and version."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=RPC_RESPONSE,
            remark=remark,
            ext_fields=dict(ext_fields) if ext_fields else {},
            body=body,
        )

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag}"
            f" language={self.language.name} version={self.version} remark={self.remark!r}"
            f" ext_fields={self.ext_fields!r} body=<{len(self.body)} bytes>)"
        )


# --------------------------------------------------------------------------- encoding


class _NotBinaryEncodable(Exception):
    """The command has a value the binary header cannot carry; JSON is used instead."""


def _check_int32(name: str, value: int) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ProtocolError(f"{name} {value} does not fit in a signed int32")


#: one encoder for every JSON header (``json.dumps`` with these options builds a new one per call)
_JSON_HEADER_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The fastjson-compatible JSON header (sorted keys, compact separators, UTF-8)."""
    obj: dict[str, Any] = {
        "code": cmd.code,
        "flag": cmd.flag,
        "language": cmd.language.name,
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.ext_fields:
        obj["extFields"] = cmd.ext_fields
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    return _JSON_HEADER_ENCODER.encode(obj).encode("utf-8")


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ binary header; extFields entries are written in the dict's order."""
    code, version = cmd.code, cmd.version
    if not (_INT16_MIN <= code <= _INT16_MAX and _INT16_MIN <= version <= _INT16_MAX):
        raise _NotBinaryEncodable
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts: list[bytes] = []
    pack16, pack32 = _INT16.pack, _INT32.pack
    for key, value in cmd.ext_fields.items():
        k = key.encode("utf-8")
        v = str(value).encode("utf-8")
        if len(k) > _INT16_MAX:
            raise _NotBinaryEncodable
        parts += (pack16(len(k)), k, pack32(len(v)), v)
    ext = b"".join(parts)
    fixed = _BIN_FIXED.pack(code, int(cmd.language), version, cmd.opaque, cmd.flag, len(remark))
    return b"".join((fixed, remark, pack32(len(ext)), ext))


def encode_command(cmd: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    """Encode a whole frame (length field included).

    A command that the binary header cannot carry (code or version outside int16, a key longer
    than 32767 bytes) is encoded as JSON even when ROCKETMQ is asked for.
    """
    _check_int32("code", cmd.code)
    _check_int32("opaque", cmd.opaque)
    _check_int32("flag", cmd.flag)
    _check_int32("version", cmd.version)
    if serialize_type == SerializeType.ROCKETMQ:
        try:
            return encode_frame(encode_binary_header(cmd), cmd.body, SerializeType.ROCKETMQ)
        except _NotBinaryEncodable:
            pass
    return encode_frame(encode_json_header(cmd), cmd.body, SerializeType.JSON)


# --------------------------------------------------------------------------- decoding


class MalformedRequestError(HeaderError):
    """A header whose opaque is usable but whose other fields are not: answer it, do not close.

    ``oneway`` is True when the flag was readable and carried the ONEWAY bit (then no answer is
    due).  Raised only for requests: a malformed *response* is a plain ProtocolError.
    """

    def __init__(self, message: str, *, opaque: int, oneway: bool) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.oneway = oneway


def _json_int(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if type(value) is int:  # what every client sends
        return value
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        if isinstance(value, str):
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
    except (ValueError, OverflowError):
        pass
    raise ProtocolError(f"JSON header field {key!r} is not an integer: {_ext_value(value)!r:.200}")


def _json_language(value: object) -> LanguageCode:
    if isinstance(value, str):
        return _LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if isinstance(value, int):
        return _LANGUAGE_BY_VALUE.get(value, LanguageCode.OTHER)
    return LanguageCode.OTHER


def _ext_value(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        except (RecursionError, ValueError) as exc:
            raise ProtocolError(f"JSON header value cannot be re-serialized: {exc}") from None
    return str(value)


def decode_json_header(raw: bytes) -> RemotingCommand:
    """Parse a JSON header leniently (the body and serialize type are set by the caller).

    Raises ProtocolError for anything unusable, :class:`MalformedRequestError` when only the
    request's code, flag, version or extFields are bad (see the module docstring).
    """
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"JSON header is not valid JSON ({exc}): {bytes(raw[:200])!r}") from exc
    except RecursionError:
        raise ProtocolError(f"JSON header is nested too deeply: {bytes(raw[:200])!r}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"JSON header is not an object: {bytes(raw[:200])!r}")
    opaque = _json_int32(obj, "opaque")  # no usable opaque: nothing to answer, the caller closes
    try:
        flag = _json_int32(obj, "flag")
    except ProtocolError as exc:
        raise MalformedRequestError(str(exc), opaque=opaque, oneway=False) from None
    try:
        code = _json_int32(obj, "code")
        version = _json_int32(obj, "version")
        ext_fields = _json_ext_fields(obj.get("extFields"))
    except ProtocolError as exc:
        if flag & RPC_RESPONSE:
            raise
        raise MalformedRequestError(str(exc), opaque=opaque, oneway=bool(flag & RPC_ONEWAY)) from None
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _ext_value(remark)
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_json_language(obj.get("language")),
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.JSON,
    )


def _json_int32(obj: Mapping[str, Any], key: str) -> int:
    value = _json_int(obj, key, 0)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ProtocolError(f"JSON header field {key!r} = {value} does not fit in a signed int32")
    return value


def _json_ext_fields(ext_obj: object) -> dict[str, str]:
    ext_fields: dict[str, str] = {}
    if ext_obj is None:
        return ext_fields
    if not isinstance(ext_obj, dict):
        raise ProtocolError(f"JSON header extFields is not an object: {_ext_value(ext_obj)!r:.200}")
    if all(type(value) is str for value in ext_obj.values()):
        return ext_obj  # what every client sends: the parsed object is the answer (nobody else holds it)
    for key, value in ext_obj.items():
        text = _ext_value(value)
        if text is not None:
            ext_fields[key] = text
    return ext_fields


def _binary_error(what: str, pos: int, buf: bytes | memoryview, start: int) -> ProtocolError:
    window = bytes(buf[max(start, pos - 8) : pos + 8]).hex(" ")
    return ProtocolError(f"ROCKETMQ header: {what} at header offset {pos - start} (bytes near it: {window})")


def decode_binary_header(buf: bytes | memoryview, start: int, end: int) -> RemotingCommand:
    """Parse a ROCKETMQ binary header occupying buf[start:end]."""
    if end - start < _BIN_FIXED.size + 4:
        raise _binary_error(
            f"header of {end - start} bytes is shorter than the minimum 21", start, buf, start
        )
    code, language, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(buf, start)
    pos = start + _BIN_FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > end:
        raise _binary_error(f"remark length {remark_len} overruns the header", pos - 4, buf, start)
    try:
        remark = str(buf[pos : pos + remark_len], "utf-8") if remark_len else None
        pos += remark_len
        (ext_len,) = _INT32.unpack_from(buf, pos)
        pos += 4
        ext_end = pos + ext_len
        if ext_len < 0 or ext_end > end:
            raise _binary_error(f"extFields length {ext_len} overruns the header", pos - 4, buf, start)
        ext_fields = _decode_binary_ext(buf, pos, ext_end, start)
    except UnicodeDecodeError as exc:
        raise _binary_error(f"invalid UTF-8 ({exc.reason})", pos, buf, start) from exc
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_LANGUAGE_BY_VALUE.get(language, LanguageCode.OTHER),
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_binary_ext(buf: bytes | memoryview, pos: int, end: int, start: int) -> dict[str, str]:
    ext: dict[str, str] = {}
    unpack16, unpack32 = _INT16.unpack_from, _INT32.unpack_from
    while pos < end:
        if pos + 2 > end:
            raise _binary_error("truncated extFields key length", pos, buf, start)
        (key_len,) = unpack16(buf, pos)
        pos += 2
        if key_len < 0 or pos + key_len + 4 > end:
            raise _binary_error(f"extFields key length {key_len} overruns the map", pos - 2, buf, start)
        key = str(buf[pos : pos + key_len], "utf-8")
        pos += key_len
        (value_len,) = unpack32(buf, pos)
        pos += 4
        if value_len < 0 or pos + value_len > end:
            raise _binary_error(f"extFields value length {value_len} overruns the map", pos - 4, buf, start)
        ext[key] = str(buf[pos : pos + value_len], "utf-8")
        pos += value_len
    return ext


def decode_command(payload: bytes | memoryview) -> RemotingCommand:
    """Decode one frame payload (the frame without its length field), by its serialize type."""
    size = len(payload)
    if size < _PREFIX_WORD:
        raise ProtocolError(f"frame payload of {size} bytes is too short for the header length field")
    (word,) = _INT32.unpack_from(payload, 0)
    serialize_type = (word >> 24) & 0xFF
    header_end = _PREFIX_WORD + (word & 0xFFFFFF)
    if header_end > size:
        raise ProtocolError(f"header length {header_end - _PREFIX_WORD} exceeds the payload of {size} bytes")
    if serialize_type == SerializeType.JSON:
        cmd = decode_json_header(bytes(payload[_PREFIX_WORD:header_end]))
    elif serialize_type == SerializeType.ROCKETMQ:
        cmd = decode_binary_header(payload, _PREFIX_WORD, header_end)
    else:
        raise ProtocolError(f"unknown serialize type {serialize_type} (expected 0 = JSON or 1 = ROCKETMQ)")
    if header_end < size:
        cmd.body = bytes(payload[header_end:])
    return cmd
