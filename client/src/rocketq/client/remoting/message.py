"""Stored-message record codec: encoding and decoding CommitLog records (also the body of
pull/query/view responses).

The layout itself (field diagram, magic codes, positions, header structs, sys flag bits) is
defined once in :mod:`.record_layout`; this module re-exports the names it always exported so that
``from rocketq.client.remoting.message import MAGIC_V1, SYSFLAG_POS, ...`` keeps working.

Theory of operation.  The store builds a record with :func:`encode_stored_message` and patches
QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP in place under its append lock
(:func:`patch_record`).  Decoders never read past the buffer: every length is checked first and any
inconsistency raises :class:`MessageFormatError` carrying the position and the bytes there.
:func:`decode_records_columnar` is the bulk decoder for the Spark source: one precompiled struct
unpack per record, lists per column, cached host strings.  Received messages (``msg_id`` is the
producer's ``UNIQ_KEY`` when there is one, as Java's consumer-side ``getMsgId()``) are
:class:`StoredMessage`; the lazy views of a pull are in :mod:`.message_view`.
"""

from __future__ import annotations

import gc
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.msgid import bytes_to_ip, encode_offset_msg_id, ip_to_bytes
from rocketq.client.remoting.properties import (
    MessageConst,
    decode_properties,
    encode_properties_bytes,
    split_keys,
)
from rocketq.client.remoting.record_layout import (
    BLANK_MAGIC,
    BODYCRC_POS,
    BORNHOST_POS,
    BORNHOST_V6_FLAG,
    BORNTIMESTAMP_POS,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    END_FILE_MIN_BLANK_LENGTH,
    FLAG_POS,
    HEADER_FIELD_NAMES,
    HEADER_STRUCTS,
    HOST_FLAGS_BYTE_POS,
    HOST_KIND_SHIFT,
    HOST_V6_FLAGS,
    MAGIC_V1,
    MAGIC_V2,
    MAGICCODE_POS,
    MAX_PROPERTIES_SIZE,
    MAX_TOPIC_LENGTH_V1,
    MAX_TOPIC_LENGTH_V2,
    MIN_RECORD_SIZE,
    MIN_TAIL_SIZE,
    NAME_VALUE_SEPARATOR,
    PHYSICALOFFSET_POS,
    PROPERTIES_LENGTH_SIZE,
    PROPERTY_SEPARATOR,
    QUEUEID_POS,
    QUEUEOFFSET_POS,
    SIZE_MAGIC,
    STOREHOST_V6_FLAG,
    STORETIMESTAMP_POS,
    SYSFLAG_POS,
    TOPIC_LENGTH_SIZE_V1,
    TOPIC_LENGTH_SIZE_V2,
    TOTALSIZE_POS,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    CompressionType,
    SysFlag,
    body_length_pos,
    born_host_len,
    compression_type_of,
    header_struct,
    prepared_transaction_offset_pos,
    reconsume_times_pos,
    record_header_size,
    store_host_len,
    store_host_pos,
    store_timestamp_pos,
    stored_record_size,
    transaction_value,
    with_compression,
)

__all__ = [
    "BLANK_MAGIC", "BODYCRC_POS", "BORNHOST_POS", "BORNHOST_V6_FLAG", "BORNTIMESTAMP_POS", "COLUMNS",
    "COMPRESSION_TYPE_MASK", "END_FILE_MIN_BLANK_LENGTH", "FLAG_POS", "MAGICCODE_POS", "MAGIC_V1",
    "MAGIC_V2", "MAX_TOPIC_LENGTH_V1", "MAX_TOPIC_LENGTH_V2", "PHYSICALOFFSET_POS", "QUEUEID_POS",
    "QUEUEOFFSET_POS", "STOREHOST_V6_FLAG", "STORETIMESTAMP_POS", "SYSFLAG_POS", "TOTALSIZE_POS",
    "TRANSACTION_NOT_TYPE", "TRANSACTION_TYPE_MASK", "CompressionType", "RecordHeader", "StoredMessage",
    "SysFlag", "body_crc", "body_length_pos", "born_host_len", "compress_body", "compression_type_of",
    "decode_records_columnar", "decode_stored_message", "decompress_body", "encode_blank",
    "encode_stored_message", "iter_stored_messages", "patch_record", "peek_total_size_and_magic",
    "prepared_transaction_offset_pos", "reconsume_times_pos", "record_header_fields", "record_header_size",
    "store_host_len", "store_host_pos", "store_timestamp_pos", "stored_record_size", "transaction_value",
    "with_compression",
]  # fmt: skip

_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT8: Final = struct.Struct(">B")
_UINT16: Final = struct.Struct(">H")
_INT16: Final = struct.Struct(">h")
assert _INT16.size == PROPERTIES_LENGTH_SIZE and _UINT16.size == TOPIC_LENGTH_SIZE_V2
#: Fixed part of a record (TOTALSIZE .. BODYLENGTH), indexed by host_kind(sys_flag).
_HEADERS: Final = HEADER_STRUCTS
_BODY_CRC_INDEX: Final = HEADER_FIELD_NAMES.index("body_crc")


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


def encode_blank(size: int) -> bytes:
    """The end-of-file filler header (8 bytes) announcing ``size`` blank bytes."""
    return SIZE_MAGIC.pack(size, BLANK_MAGIC)


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
        """The message id a consumer sees, as Java's ``MessageClientExt.getMsgId()``: the producer's
        ``UNIQ_KEY`` when the record has one (it survives retries and transactions), else the
        offset msgId; ``offset_msg_id`` is always the latter (store host + physical offset)."""
        uniq = self.properties.get(MessageConst.UNIQ_KEY)
        return self.offset_msg_id if uniq is None else uniq


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
    sys_flag = int(sys_flag) & ~HOST_V6_FLAGS
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
    header = _HEADERS[(sys_flag >> HOST_KIND_SHIFT) & 3]
    total = header.size + len(body) + len(topic_len) + len(topic_b) + PROPERTIES_LENGTH_SIZE + len(props_b)
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
    if pos < 0 or pos + SIZE_MAGIC.size > len(buf):
        raise _error(buf, pos, f"truncated record header (need {SIZE_MAGIC.size} bytes)")
    size, magic = SIZE_MAGIC.unpack_from(buf, pos)
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
    if total_size < MIN_RECORD_SIZE or end > len(buf):
        raise _error(buf, pos, f"bad total size {total_size}")
    (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
    header = _HEADERS[(sys_flag >> HOST_KIND_SHIFT) & 3]
    if header.size + MIN_TAIL_SIZE > total_size:
        raise _error(buf, pos, f"total size {total_size} too small for sys flag {sys_flag:#x}")
    fields = header.unpack_from(buf, pos)
    body_pos = pos + header.size
    body_len = fields[-1]
    p = body_pos + body_len
    if body_len < 0 or p + MIN_TAIL_SIZE > end:
        raise _error(buf, pos, f"body length {body_len} overruns the record of {total_size} bytes")
    if magic == MAGIC_V1:
        topic_len, p = buf[p], p + TOPIC_LENGTH_SIZE_V1
    else:
        (topic_len,), p = _UINT16.unpack_from(buf, p), p + TOPIC_LENGTH_SIZE_V2
    topic_end = p + topic_len
    if topic_end + PROPERTIES_LENGTH_SIZE > end:
        raise _error(buf, pos, f"topic length {topic_len} overruns the record")
    try:
        topic = str(buf[p:topic_end], "utf-8")
    except UnicodeDecodeError:
        raise _error(buf, pos, "topic is not UTF-8") from None
    (props_len,) = _INT16.unpack_from(buf, topic_end)
    props_pos = topic_end + PROPERTIES_LENGTH_SIZE
    if props_len < 0 or props_pos + props_len != end:
        raise _error(buf, pos, f"properties length {props_len} does not end the record of {total_size} bytes")
    crc = fields[_BODY_CRC_INDEX]
    if check_crc and zlib.crc32(buf[body_pos : body_pos + body_len]) & 0x7FFFFFFF != crc:
        raise _error(buf, pos, f"body CRC mismatch (stored {crc})")
    return fields, body_pos, topic, props_pos, props_len


def decode_stored_message(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False, decompress: bool = True
) -> StoredMessage:
    """Decode the record starting at ``buf[pos]``."""
    fields, body_pos, topic, props_pos, props_len = _parse(buf, pos, check_crc)
    (total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len) = fields  # fmt: skip
    body = bytes(buf[body_pos : body_pos + body_len])
    if decompress and sys_flag & COMPRESSED_FLAG:
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
    (total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     _born_ip, _born_port, store_ts, _store_ip, _store_port, reconsume, prepared, body_len,
     ) = fields  # fmt: skip
    properties = decode_properties(buf[props_pos : props_pos + props_len])
    return RecordHeader(
        total_size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts,
        reconsume, prepared, body_pos, body_len, topic, properties,
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


def _columnar_struct(kind: int) -> tuple[struct.Struct, int]:
    # Hosts are read as one "ip+port" blob (a cache key); BODYCRC and PREPAREDTXOFFSET are skipped.
    skipped = ("body_crc", "prepared_transaction_offset")
    st = header_struct(kind, [name for name in HEADER_FIELD_NAMES if name not in skipped], host_blobs=True)
    return st, st.size


_COLUMNAR: Final = tuple(_columnar_struct(kind) for kind in range(4))
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
    kind_at, shift, compressed = HOST_FLAGS_BYTE_POS, HOST_KIND_SHIFT, COMPRESSED_FLAG
    tail, tl1, tl2, pl = MIN_TAIL_SIZE, TOPIC_LENGTH_SIZE_V1, TOPIC_LENGTH_SIZE_V2, PROPERTIES_LENGTH_SIZE
    nv, ps = NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    n = len(data)
    pos = 0
    while pos < n:
        if pos + kind_at >= n:
            raise _error(data, pos, "truncated record header")
        st, hsize = structs[(data[pos + kind_at] >> shift) & 3]
        if pos + hsize > n:
            _parse(data, pos, False)  # raises the precise error
        (total, magic, qid, flag, qoff, poff, sysflag, born, bhost, store, shost, recon, blen) = (
            st.unpack_from(data, pos)
        )
        end = pos + total
        body_pos = pos + hsize
        p = body_pos + blen
        if (magic != v1 and magic != v2) or end > n or blen < 0 or p + tail > end:
            _parse(data, pos, False)
            raise _error(data, pos, "bad record header")  # pragma: no cover - _parse raises
        if magic == v1:
            tlen = data[p]
            p += tl1
        else:
            tlen = (data[p] << 8) | data[p + 1]
            p += tl2
        tend = p + tlen
        plen = (data[tend] << 8) | data[tend + 1] if tend + pl <= end else -1
        if plen < 0 or plen > MAX_PROPERTIES_SIZE or tend + pl + plen != end:
            _parse(data, pos, False)
            raise _error(data, pos, "inconsistent record lengths")  # pragma: no cover - _parse raises
        tkey = data[p:tend]
        topic = topics.get(tkey)
        if topic is None:
            topic = topics[tkey] = _parse(data, pos, False)[2]
        body = data[body_pos : body_pos + blen]
        if decompress and sysflag & compressed:
            body = decompress_body(body, sysflag)
        bh = hosts.get(bhost)
        if bh is None:
            bh = hosts[bhost] = _host_text(bhost)
        sh = hosts.get(shost)
        if sh is None:
            sh = hosts[shost] = _host_text(shost)
        raw = data[tend + pl : end]
        props: Any = raw
        if parse_properties:
            props = {}
            for segment in str(raw, "utf-8", "replace").split(ps):
                key, sep, value = segment.partition(nv)
                if key and value and sep:
                    props[key] = value
        append((topic, qid, flag, qoff, poff, sysflag, born, bh, store, sh, recon, body, props))
        pos = end
    return rows
