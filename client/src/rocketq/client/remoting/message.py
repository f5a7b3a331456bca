"""Stored-message record codec: the CommitLog format, also the body of pull/query/view responses.

Field diagram (big-endian, signed unless noted; byte offsets for an IPv4 born and store host)::

     0  TOTALSIZE          int32   whole record, these 4 bytes included
     4  MAGICCODE          uint32  MAGIC_V1 (1-byte topic length) | MAGIC_V2 (2-byte) | BLANK_MAGIC
     8  BODYCRC            int32   crc32(stored body) & 0x7FFFFFFF
    12  QUEUEID            int32
    16  FLAG               int32   user flag
    20  QUEUEOFFSET        int64   logical ConsumeQueue index     (patched by the store)
    28  PHYSICALOFFSET     int64   CommitLog offset of the record (patched by the store)
    36  SYSFLAG            int32   SysFlag bits, compression type in bits 8-10
    40  BORNTIMESTAMP      int64   ms
    48  BORNHOST           4+4     IPv4 + port int32; 16+4 if SysFlag.BORNHOST_V6
    56  STORETIMESTAMP     int64   ms                             (patched by the store)
    64  STOREHOST          4+4     IPv4 + port int32; 16+4 if SysFlag.STOREHOST_V6
    72  RECONSUMETIMES     int32
    76  PREPAREDTXOFFSET   int64
    84  BODYLENGTH         int32   then BODY (compressed if SysFlag.COMPRESSED)
    ..  TOPICLENGTH        int8 (V1, <= 127) | int16 (V2), then TOPIC (UTF-8)
    ..  PROPERTIESLENGTH   int16   then PROPERTIES (``k\\x01v\\x02`` UTF-8, <= 32767 bytes)

An IPv4 V1 record is ``91 + len(body) + len(topic) + len(properties)`` bytes.  An end-of-file
filler is ``TOTALSIZE = remaining bytes`` followed by ``BLANK_MAGIC``.

Theory of operation.  Offsets before BORNHOST are fixed and named once (``*_POS``); the ones after
it move by 12 bytes per IPv6 host and are computed from the sys flag (``store_timestamp_pos``).
The store builds a record with :func:`encode_stored_message` and patches QUEUEOFFSET,
PHYSICALOFFSET and STORETIMESTAMP in place under its append lock.  Decoders never read past the
buffer: every length is checked first and any inconsistency raises :class:`MessageFormatError`
carrying the position and the bytes there.  :func:`decode_records_columnar` is the bulk decoder for
the Spark source: one precompiled struct unpack per record, lists per column, cached host strings.
"""

from __future__ import annotations

import gc
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any, Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.msgid import bytes_to_ip, encode_offset_msg_id, ip_to_bytes
from rocketq.client.remoting.properties import (
    MAX_PROPERTIES_SIZE,
    MessageConst,
    decode_properties,
    encode_properties_bytes,
    split_keys,
)

MAGIC_V1: Final = 0xDAA320A7
MAGIC_V2: Final = 0xDAA320AB
BLANK_MAGIC: Final = 0xCBD43194
#: A V1 topic length is a signed byte; longer topics switch to MAGIC_V2 automatically.
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_TOPIC_LENGTH_V2: Final = 32767
#: A file always keeps room for the blank marker (TOTALSIZE + BLANK_MAGIC).
END_FILE_MIN_BLANK_LENGTH: Final = 8

TOTALSIZE_POS: Final = 0
MAGICCODE_POS: Final = 4
BODYCRC_POS: Final = 8
QUEUEID_POS: Final = 12
FLAG_POS: Final = 16
QUEUEOFFSET_POS: Final = 20
PHYSICALOFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
BORNTIMESTAMP_POS: Final = 40
BORNHOST_POS: Final = 48
#: STORETIMESTAMP position when the born host is IPv4; use store_timestamp_pos() in general.
STORETIMESTAMP_POS: Final = 56

_SIZE_MAGIC: Final = struct.Struct(">iI")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT8: Final = struct.Struct(">B")
_UINT16: Final = struct.Struct(">H")
_INT16: Final = struct.Struct(">h")
_PREFIX_FMT: Final = ">iIiiiqqiq"  # TOTALSIZE .. BORNTIMESTAMP
assert struct.calcsize(_PREFIX_FMT) == BORNHOST_POS
assert _SIZE_MAGIC.size == 8 and _INT16.size == 2


def _header_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    born = "16s" if born_v6 else "4s"
    store = "16s" if store_v6 else "4s"
    return struct.Struct(f"{_PREFIX_FMT}{born}iq{store}iiqi")  # ... BODYLENGTH


#: Fixed part of a record (TOTALSIZE .. BODYLENGTH), indexed by (sys_flag >> 4) & 3.
_HEADERS: Final = (
    _header_struct(False, False),
    _header_struct(True, False),
    _header_struct(False, True),
    _header_struct(True, True),
)
assert [h.size for h in _HEADERS] == [88, 100, 100, 112]
_MIN_RECORD_SIZE: Final = _HEADERS[0].size + 1 + 2


class SysFlag(IntFlag):
    """``MessageSysFlag`` bits of the SYSFLAG field."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_TYPE_MASK = 0x700


TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_NOT_TYPE: Final = 0
# Plain-int copies of the SysFlag bits used on hot paths (IntFlag arithmetic costs ~1 us per operation).
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
_HOST_V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
COMPRESSION_TYPE_MASK: Final = 0x700


def transaction_value(sys_flag: int) -> int:
    """The 2-bit transaction state (0, PREPARED, COMMIT or ROLLBACK) of a sys flag."""
    return sys_flag & TRANSACTION_TYPE_MASK


class CompressionType(IntEnum):
    """5.x compression types, stored in sys flag bits 8-10 (0 = ZLIB for 4.x compatibility)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def compression_type_of(sys_flag: int) -> CompressionType:
    """The compression type encoded in ``sys_flag`` (only meaningful if COMPRESSED is set)."""
    bits = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if bits == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(bits)
    except ValueError:
        raise MessageFormatError(f"unknown compression type {bits} in sys flag {sys_flag:#x}") from None


def with_compression(sys_flag: int, compression: CompressionType) -> int:
    """``sys_flag`` with COMPRESSED set and the type bits set to ``compression``."""
    return (sys_flag & ~SysFlag.COMPRESSION_TYPE_MASK) | SysFlag.COMPRESSED | (int(compression) << 8)


def compress_body(body: bytes, compression: CompressionType = CompressionType.ZLIB, level: int = 5) -> bytes:
    """Compress a message body the way RocketMQ's compressors do (zlib stream, LZ4 frame)."""
    if compression == CompressionType.ZLIB:
        return zlib.compress(body, level)
    if compression == CompressionType.LZ4:
        import lz4.frame

        # lz4-java's LZ4FrameInputStream rejects linked blocks and needs no content size.
        data: bytes = lz4.frame.compress(
            body,
            block_size=lz4.frame.BLOCKSIZE_MAX4MB,
            block_linked=False,
            store_size=False,
        )
        return data
    raise MessageFormatError("ZSTD compression is not supported by rocketq (no zstd codec installed)")


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Decompress a stored body according to the type bits of ``sys_flag``."""
    compression = compression_type_of(sys_flag)
    try:
        if compression == CompressionType.ZLIB:
            return zlib.decompress(body)
        if compression == CompressionType.LZ4:
            import lz4.frame

            data: bytes = lz4.frame.decompress(body)
            return data
    except (zlib.error, RuntimeError, ValueError) as exc:
        raise MessageFormatError(f"cannot decompress {compression.name} body: {exc}") from exc
    raise MessageFormatError("message body is ZSTD-compressed; zstd is not supported by rocketq")


def born_host_len(sys_flag: int) -> int:
    return 20 if sys_flag & BORNHOST_V6_FLAG else 8


def store_host_len(sys_flag: int) -> int:
    return 20 if sys_flag & STOREHOST_V6_FLAG else 8


def store_timestamp_pos(sys_flag: int) -> int:
    """Byte offset of STORETIMESTAMP within a record with this sys flag."""
    return BORNHOST_POS + born_host_len(sys_flag)


def store_host_pos(sys_flag: int) -> int:
    return store_timestamp_pos(sys_flag) + 8


def reconsume_times_pos(sys_flag: int) -> int:
    return store_host_pos(sys_flag) + store_host_len(sys_flag)


def prepared_transaction_offset_pos(sys_flag: int) -> int:
    return reconsume_times_pos(sys_flag) + 4


def body_length_pos(sys_flag: int) -> int:
    return prepared_transaction_offset_pos(sys_flag) + 8


def record_header_size(sys_flag: int) -> int:
    """Size of the fixed part of a record (TOTALSIZE .. BODYLENGTH): 88, 100 or 112 bytes."""
    return _HEADERS[(sys_flag >> 4) & 3].size


def stored_record_size(
    body_len: int, topic_len: int, properties_len: int, *, born_v6: bool = False, store_v6: bool = False
) -> int:
    """Size of a record; ``topic_len`` in UTF-8 bytes (V2 topic length above 127 bytes)."""
    topic_len_size = 2 if topic_len > MAX_TOPIC_LENGTH_V1 else 1
    return _HEADERS[born_v6 + 2 * store_v6].size + body_len + topic_len_size + topic_len + 2 + properties_len


def encode_blank(size: int) -> bytes:
    """The end-of-file filler header (8 bytes) announcing ``size`` blank bytes."""
    return _SIZE_MAGIC.pack(size, BLANK_MAGIC)


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC of a stored body."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One CommitLog record, decoded (``body`` is decompressed when decoded with decompress=True)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(MessageConst.KEYS))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_KEY)

    @property
    def offset_msg_id(self) -> str:
        return encode_offset_msg_id(self.store_host[0], self.store_host[1], self.physical_offset)

    @property
    def msg_id(self) -> str:
        """The offset msgId (store host + physical offset); see ``uniq_key`` for the client id."""
        return self.offset_msg_id


def _properties_bytes(properties: bytes | str | Mapping[str, str | None]) -> bytes:
    if isinstance(properties, bytes):
        data = properties
    elif isinstance(properties, str):
        data = properties.encode()
    else:
        return encode_properties_bytes(properties)
    if len(data) > MAX_PROPERTIES_SIZE:
        raise MessageFormatError(f"properties are {len(data)} bytes, more than {MAX_PROPERTIES_SIZE}")
    return data


def encode_stored_message(
    *,
    topic: str,
    queue_id: int,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    body: bytes,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    store_timestamp: int = 0,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    properties: bytes | str | Mapping[str, str | None] = b"",
    magic: int | None = None,
) -> bytes:
    """Build one record; ``body`` is stored as given (compress it first and set the sys flag).

    The magic is V1 unless the topic is longer than 127 UTF-8 bytes (or ``magic=MAGIC_V2``);
    the IPv6 host bits of ``sys_flag`` follow the addresses.
    """
    born_ip = ip_to_bytes(born_host[0])
    store_ip = ip_to_bytes(store_host[0])
    sys_flag = int(sys_flag) & ~_HOST_V6_FLAGS
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOST_V6_FLAG
    topic_b = topic.encode()
    props_b = _properties_bytes(properties)
    if magic is None:
        magic = MAGIC_V2 if len(topic_b) > MAX_TOPIC_LENGTH_V1 else MAGIC_V1
    if magic == MAGIC_V1 and len(topic_b) <= MAX_TOPIC_LENGTH_V1:
        topic_len = _UINT8.pack(len(topic_b))
    elif magic == MAGIC_V2 and len(topic_b) <= MAX_TOPIC_LENGTH_V2:
        topic_len = _UINT16.pack(len(topic_b))
    else:
        raise MessageFormatError(f"topic of {len(topic_b)} bytes cannot be stored with magic {magic:#x}")
    header = _HEADERS[(sys_flag >> 4) & 3]
    total = header.size + len(body) + len(topic_len) + len(topic_b) + 2 + len(props_b)
    try:
        head = header.pack(
            total, magic, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset, physical_offset,
            sys_flag, born_timestamp, born_ip, born_host[1], store_timestamp, store_ip, store_host[1],
            reconsume_times, prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as exc:
        raise MessageFormatError(f"a record field is out of range: {exc}") from exc
    return b"".join((head, body, topic_len, topic_b, _INT16.pack(len(props_b)), props_b))


def patch_record(
    buf: bytearray | memoryview, pos: int, *, queue_offset: int, physical_offset: int, store_timestamp: int
) -> None:
    """Write QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP into the record at ``buf[pos:]``."""
    (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
    _INT64.pack_into(buf, pos + QUEUEOFFSET_POS, queue_offset)
    _INT64.pack_into(buf, pos + PHYSICALOFFSET_POS, physical_offset)
    _INT64.pack_into(buf, pos + store_timestamp_pos(sys_flag), store_timestamp)


def _error(buf: bytes | bytearray | memoryview, pos: int, what: str) -> MessageFormatError:
    """A MessageFormatError naming the position and showing the bytes found there."""
    shown = bytes(buf[max(pos, 0) : max(pos, 0) + 32]).hex()
    return MessageFormatError(f"{what} at position {pos} (buffer of {len(buf)} bytes; bytes there: {shown})")


def peek_total_size_and_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """TOTALSIZE and MAGICCODE (unsigned) at ``pos``; MessageFormatError if fewer than 8 bytes remain."""
    if pos < 0 or pos + 8 > len(buf):
        raise _error(buf, pos, "truncated record header (need 8 bytes)")
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return int(size), int(magic)


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """Everything but the body and hosts of a record, for the store's recovery/dispatch scan."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_pos: int  # absolute position of BODY in the buffer
    body_length: int
    topic: str
    properties: dict[str, str]


def _parse(
    buf: bytes | bytearray | memoryview, pos: int, check_crc: bool
) -> tuple[tuple[Any, ...], int, str, int, int]:
    """Validate the record at ``pos``; return (header fields, body pos, topic, props pos, props len)."""
    total_size, magic = peek_total_size_and_magic(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        what = "blank (end of file) marker" if magic == BLANK_MAGIC else f"bad magic code {magic:#010x}"
        raise _error(buf, pos, what)
    end = pos + total_size
    if total_size < _MIN_RECORD_SIZE or end > len(buf):
        raise _error(buf, pos, f"bad total size {total_size}")
    (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
    header = _HEADERS[(sys_flag >> 4) & 3]
    if header.size + 3 > total_size:
        raise _error(buf, pos, f"total size {total_size} too small for sys flag {sys_flag:#x}")
    fields = header.unpack_from(buf, pos)
    body_pos = pos + header.size
    body_len = fields[-1]
    p = body_pos + body_len
    if body_len < 0 or p + 3 > end:
        raise _error(buf, pos, f"body length {body_len} overruns the record of {total_size} bytes")
    if magic == MAGIC_V1:
        topic_len, p = buf[p], p + 1
    else:
        (topic_len,), p = _UINT16.unpack_from(buf, p), p + 2
    topic_end = p + topic_len
    if topic_end + 2 > end:
        raise _error(buf, pos, f"topic length {topic_len} overruns the record")
    try:
        topic = str(buf[p:topic_end], "utf-8")
    except UnicodeDecodeError:
        raise _error(buf, pos, "topic is not UTF-8") from None
    (props_len,) = _INT16.unpack_from(buf, topic_end)
    props_pos = topic_end + 2
    if props_len < 0 or props_pos + props_len != end:
        raise _error(buf, pos, f"properties length {props_len} does not end the record of {total_size} bytes")
    if check_crc and zlib.crc32(buf[body_pos : body_pos + body_len]) & 0x7FFFFFFF != fields[2]:
        raise _error(buf, pos, f"body CRC mismatch (stored {fields[2]})")
    return fields, body_pos, topic, props_pos, props_len


def decode_stored_message(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False, decompress: bool = True
) -> StoredMessage:
    """Decode the record starting at ``buf[pos]``."""
    fields, body_pos, topic, props_pos, props_len = _parse(buf, pos, check_crc)
    (total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len) = fields  # fmt: skip
    body = bytes(buf[body_pos : body_pos + body_len])
    if decompress and sys_flag & SysFlag.COMPRESSED:
        body = decompress_body(body, sys_flag)
    return StoredMessage(
        total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
        (bytes_to_ip(born_ip), born_port), store_ts, (bytes_to_ip(store_ip), store_port), reconsume,
        prepared, body, topic, decode_properties(buf[props_pos : props_pos + props_len]),
    )  # fmt: skip


def record_header_fields(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False
) -> RecordHeader:
    """Validate and decode the record at ``pos`` without copying its body."""
    fields, body_pos, topic, props_pos, props_len = _parse(buf, pos, check_crc)
    return RecordHeader(
        fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7], fields[8],
        fields[11], fields[14], fields[15], body_pos, fields[16], topic,
        decode_properties(buf[props_pos : props_pos + props_len]),
    )  # fmt: skip


def iter_stored_messages(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False, decompress: bool = True
) -> Iterator[StoredMessage]:
    """Decode concatenated records (a pull/query body) until the buffer is exhausted."""
    pos = 0
    while pos < len(buf):
        msg = decode_stored_message(buf, pos, check_crc=check_crc, decompress=decompress)
        yield msg
        pos += msg.total_size


COLUMNS: Final = (
    "topic", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag", "born_timestamp",
    "born_host", "store_timestamp", "store_host", "reconsume_times", "body", "properties",
)  # fmt: skip


def _columnar_struct(born_v6: bool, store_v6: bool) -> tuple[struct.Struct, int]:
    # Hosts are read as one "ip+port" blob (a cache key); BODYCRC and PREPAREDTXOFFSET are skipped.
    born = "20s" if born_v6 else "8s"
    store = "20s" if store_v6 else "8s"
    st = struct.Struct(f">iI4xiiqqiq{born}q{store}i8xi")
    return st, st.size


_COLUMNAR: Final = tuple(_columnar_struct(bool(i & 1), bool(i & 2)) for i in range(4))
assert [size for _, size in _COLUMNAR] == [h.size for h in _HEADERS]


def _host_text(blob: bytes) -> str:
    return f"{bytes_to_ip(blob[:-4])}:{int.from_bytes(blob[-4:], 'big', signed=True)}"


def decode_records_columnar(
    buf: bytes | bytearray | memoryview, *, decompress: bool = True, parse_properties: bool = True
) -> dict[str, list[Any]]:
    """Decode concatenated records into one list per column (names and order in ``COLUMNS``).

    Hosts are ``"ip:port"`` strings, ``body`` is bytes (decompressed if ``decompress``) and
    ``properties`` a ``dict[str, str]`` (the raw UTF-8 bytes if ``parse_properties`` is false).
    Records are validated like :func:`decode_stored_message`, without the CRC check.  The cyclic
    garbage collector is paused while decoding: the many small containers built here would
    otherwise trigger collections that cost more than the decoding itself.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        rows = _decode_rows(buf if isinstance(buf, bytes) else bytes(buf), decompress, parse_properties)
        if not rows:
            return {name: [] for name in COLUMNS}
        return {name: list(column) for name, column in zip(COLUMNS, zip(*rows, strict=True), strict=True)}
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode_rows(data: bytes, decompress: bool, parse_properties: bool) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    hosts: dict[bytes, str] = {}
    topics: dict[bytes, str] = {}
    structs, v1, v2 = _COLUMNAR, MAGIC_V1, MAGIC_V2
    n = len(data)
    pos = 0
    while pos < n:
        if pos + 40 > n:
            raise _error(data, pos, "truncated record header")
        st, hsize = structs[(data[pos + 39] >> 4) & 3]
        if pos + hsize > n:
            _parse(data, pos, False)  # raises the precise error
        (total, magic, qid, flag, qoff, poff, sysflag, born, bhost, store, shost, recon, blen) = (
            st.unpack_from(data, pos)
        )
        end = pos + total
        body_pos = pos + hsize
        p = body_pos + blen
        if (magic != v1 and magic != v2) or end > n or blen < 0 or p + 3 > end:
            _parse(data, pos, False)
            raise _error(data, pos, "bad record header")  # pragma: no cover - _parse raises
        if magic == v1:
            tlen = data[p]
            p += 1
        else:
            tlen = (data[p] << 8) | data[p + 1]
            p += 2
        tend = p + tlen
        plen = (data[tend] << 8) | data[tend + 1] if tend + 2 <= end else -1
        if plen < 0 or plen > MAX_PROPERTIES_SIZE or tend + 2 + plen != end:
            _parse(data, pos, False)
            raise _error(data, pos, "inconsistent record lengths")  # pragma: no cover - _parse raises
        tkey = data[p:tend]
        topic = topics.get(tkey)
        if topic is None:
            topic = topics[tkey] = _parse(data, pos, False)[2]
        body = data[body_pos : body_pos + blen]
        if decompress and sysflag & 1:
            body = decompress_body(body, sysflag)
        bh = hosts.get(bhost)
        if bh is None:
            bh = hosts[bhost] = _host_text(bhost)
        sh = hosts.get(shost)
        if sh is None:
            sh = hosts[shost] = _host_text(shost)
        raw = data[tend + 2 : end]
        props: Any = raw
        if parse_properties:
            props = {}
            for segment in str(raw, "utf-8", "replace").split("\x02"):
                key, sep, value = segment.partition("\x01")
                if key and value and sep:
                    props[key] = value
        append((topic, qid, flag, qoff, poff, sysflag, born, bh, store, sh, recon, body, props))
        pos = end
    return rows
