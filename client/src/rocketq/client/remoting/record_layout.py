"""The stored-record layout: the one definition of a CommitLog record's bytes.

A record is what the broker appends to the CommitLog and what PULL_MESSAGE, QUERY_MESSAGE,
VIEW_MESSAGE_BY_ID and CHECK_TRANSACTION_STATE answers carry.  Field diagram (big-endian, signed
unless noted; byte offsets for an IPv4 born and store host)::

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

Theory of operation.  The fixed header (TOTALSIZE .. BODYLENGTH) is described once, by
``HEADER_FIELDS`` (name, struct code); everything else is derived from it: the named positions
(``*_POS`` for the fields before BORNHOST, which never move), the :class:`HeaderLayout` of each of
the four host kinds (``host_kind(sys_flag)``: each IPv6 host moves the fields after it by 12
bytes), the precompiled :data:`HEADER_STRUCTS`, :func:`header_struct` for decoders that read only
some fields (the others become pad bytes), and :func:`header_dtype_spec`, the header as a list of
``(name, format)`` pairs that numpy-using modules turn into a structured dtype with
``np.dtype(spec)`` (this package does not import numpy).  This module knows only the layout;
encoding and decoding live in :mod:`.message` and :mod:`.message_view`.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from types import MappingProxyType
from typing import Final

from rocketq.client.errors import MessageFormatError

MAGIC_V1: Final = 0xDAA320A7
MAGIC_V2: Final = 0xDAA320AB
BLANK_MAGIC: Final = 0xCBD43194

#: A V1 topic length is a signed byte; longer topics switch to MAGIC_V2 automatically.
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_TOPIC_LENGTH_V2: Final = 32767
TOPIC_LENGTH_SIZE_V1: Final = 1
TOPIC_LENGTH_SIZE_V2: Final = 2
PROPERTIES_LENGTH_SIZE: Final = 2
#: What follows the body at least: a V1 topic length and PROPERTIESLENGTH.
MIN_TAIL_SIZE: Final = TOPIC_LENGTH_SIZE_V1 + PROPERTIES_LENGTH_SIZE

#: Properties are ``key NAME_VALUE_SEPARATOR value PROPERTY_SEPARATOR`` entries, UTF-8.
NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"
#: The properties length is a signed int16 in the record and in batch bodies.
MAX_PROPERTIES_SIZE: Final = 32767

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
#: The low byte of SYSFLAG (big-endian), which holds the two IPv6 host bits.
HOST_FLAGS_BYTE_POS: Final = SYSFLAG_POS + 3

#: TOTALSIZE and MAGICCODE: the start of every record, and the whole end-of-file blank marker.
SIZE_MAGIC: Final = struct.Struct(">iI")
#: A file always keeps room for the blank marker.
END_FILE_MIN_BLANK_LENGTH: Final = SIZE_MAGIC.size


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


# Plain-int copies of the SysFlag bits for hot paths (IntFlag arithmetic is far slower than int's).
COMPRESSED_FLAG: Final = 0x1
TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_NOT_TYPE: Final = 0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
HOST_V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
#: ``host_kind(sys_flag)`` is ``(sys_flag >> HOST_KIND_SHIFT) & 3``.
HOST_KIND_SHIFT: Final = 4
COMPRESSION_TYPE_MASK: Final = 0x700
COMPRESSION_TYPE_SHIFT: Final = 8
assert HOST_V6_FLAGS >> HOST_KIND_SHIFT == 3


class CompressionType(IntEnum):
    """5.x compression types, stored in sys flag bits 8-10 (0 = ZLIB for 4.x compatibility)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def host_kind(sys_flag: int) -> int:
    """0..3: bit 0 set for an IPv6 born host, bit 1 for an IPv6 store host (indexes the tables)."""
    return (sys_flag >> HOST_KIND_SHIFT) & 3


def transaction_value(sys_flag: int) -> int:
    """The 2-bit transaction state (0, PREPARED, COMMIT or ROLLBACK) of a sys flag."""
    return sys_flag & TRANSACTION_TYPE_MASK


def compression_type_of(sys_flag: int) -> CompressionType:
    """The compression type encoded in ``sys_flag`` (only meaningful if COMPRESSED is set)."""
    bits = (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT
    if bits == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(bits)
    except ValueError:
        raise MessageFormatError(f"unknown compression type {bits} in sys flag {sys_flag:#x}") from None


def with_compression(sys_flag: int, compression: CompressionType) -> int:
    """``sys_flag`` with COMPRESSED set and the type bits set to ``compression``."""
    cleared = sys_flag & ~COMPRESSION_TYPE_MASK
    return cleared | COMPRESSED_FLAG | (int(compression) << COMPRESSION_TYPE_SHIFT)


# ------------------------------------------------------------------------------- fixed header

_HOST: Final = "host"  # a host field: IP (4 or 16 bytes) + port int32
#: The int32 port that follows a host's IP.
PORT_SIZE: Final = 4
#: The fixed header, TOTALSIZE .. BODYLENGTH: (field name, struct code or _HOST).
HEADER_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("total_size", "i"), ("magic", "I"), ("body_crc", "i"), ("queue_id", "i"), ("flag", "i"),
    ("queue_offset", "q"), ("physical_offset", "q"), ("sys_flag", "i"), ("born_timestamp", "q"),
    ("born_host", _HOST), ("store_timestamp", "q"), ("store_host", _HOST), ("reconsume_times", "i"),
    ("prepared_transaction_offset", "q"), ("body_length", "i"),
)  # fmt: skip
HEADER_FIELD_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
_DTYPE_CODES: Final = {"i": ">i4", "I": ">u4", "q": ">i8"}


def _ip_len(name: str, kind: int) -> int:
    v6 = kind & (1 if name == "born_host" else 2)
    return 16 if v6 else 4


def _field_size(name: str, code: str, kind: int) -> int:
    return _ip_len(name, kind) + PORT_SIZE if code == _HOST else struct.calcsize(">" + code)


@dataclass(frozen=True, slots=True)
class HeaderLayout:
    """Positions of the fixed header fields for one host kind (see :func:`host_kind`)."""

    kind: int
    size: int  # TOTALSIZE .. BODYLENGTH; BODY starts here
    positions: Mapping[str, int]  # field name -> byte offset
    born_host_len: int  # IP + port
    store_host_len: int

    @property
    def store_timestamp_pos(self) -> int:
        return self.positions["store_timestamp"]

    @property
    def store_host_pos(self) -> int:
        return self.positions["store_host"]

    @property
    def reconsume_times_pos(self) -> int:
        return self.positions["reconsume_times"]

    @property
    def prepared_transaction_offset_pos(self) -> int:
        return self.positions["prepared_transaction_offset"]

    @property
    def body_length_pos(self) -> int:
        return self.positions["body_length"]


def _layout(kind: int) -> HeaderLayout:
    positions: dict[str, int] = {}
    pos = 0
    for name, code in HEADER_FIELDS:
        positions[name] = pos
        pos += _field_size(name, code, kind)
    born, store = _ip_len("born_host", kind) + PORT_SIZE, _ip_len("store_host", kind) + PORT_SIZE
    return HeaderLayout(
        kind=kind, size=pos, positions=MappingProxyType(positions), born_host_len=born, store_host_len=store
    )


#: Header layouts indexed by host_kind(sys_flag).
HEADER_LAYOUTS: Final = tuple(_layout(kind) for kind in range(4))
#: The layout of a record with IPv4 born and store hosts (what rocketq brokers usually store).
IPV4: Final = HEADER_LAYOUTS[0]
IPV4_HEADER_SIZE: Final = IPV4.size
#: The smallest record: an IPv4 header, an empty body, a V1 topic length and PROPERTIESLENGTH.
MIN_RECORD_SIZE: Final = IPV4_HEADER_SIZE + MIN_TAIL_SIZE

assert [layout.size for layout in HEADER_LAYOUTS] == [88, 100, 100, 112]
assert IPV4.positions["queue_offset"] == QUEUEOFFSET_POS and IPV4.positions["sys_flag"] == SYSFLAG_POS
assert IPV4.positions["born_host"] == BORNHOST_POS and IPV4.store_timestamp_pos == STORETIMESTAMP_POS
assert [IPV4.positions[n] for n in ("magic", "body_crc", "queue_id", "flag")] == [
    MAGICCODE_POS,
    BODYCRC_POS,
    QUEUEID_POS,
    FLAG_POS,
]
assert IPV4.positions["physical_offset"] == PHYSICALOFFSET_POS
assert IPV4.positions["born_timestamp"] == BORNTIMESTAMP_POS and IPV4.body_length_pos == 84


def header_struct(
    kind: int = 0, fields: Collection[str] | None = None, *, host_blobs: bool = False
) -> struct.Struct:
    """A struct of the fixed header of host ``kind``, unpacking ``fields`` in header order
    (all by default) and skipping the others as pad bytes.

    A host unpacks as two items, IP bytes and port, or with ``host_blobs`` as one ``IP + port``
    bytes item (a cache key for decoders that turn hosts into text).
    """
    unknown = set(fields or ()) - set(HEADER_FIELD_NAMES)
    if unknown:
        raise ValueError(f"not header fields: {sorted(unknown)}")
    parts = [">"]
    pad = 0
    for name, code in HEADER_FIELDS:
        size = _field_size(name, code, kind)
        if fields is not None and name not in fields:
            pad += size
            continue
        if pad:
            parts.append(f"{pad}x")
            pad = 0
        if code != _HOST:
            parts.append(code)
        elif host_blobs:
            parts.append(f"{size}s")
        else:
            parts.append(f"{size - PORT_SIZE}si")
    if pad:
        parts.append(f"{pad}x")
    st = struct.Struct("".join(parts))
    assert st.size == HEADER_LAYOUTS[kind].size
    return st


#: The whole fixed header (hosts as IP bytes + port), indexed by host_kind(sys_flag).
HEADER_STRUCTS: Final = tuple(header_struct(kind) for kind in range(4))


def header_dtype_spec(kind: int = 0) -> list[tuple[str, str]]:
    """The fixed header of host ``kind`` as numpy structured-dtype fields: ``np.dtype(spec)``.

    Integers are big-endian (``>i4``, ``>u4``, ``>i8``); hosts are opaque ``V8`` / ``V20``.
    """
    return [
        (name, f"V{_field_size(name, code, kind)}" if code == _HOST else _DTYPE_CODES[code])
        for name, code in HEADER_FIELDS
    ]


# -------------------------------------------------------------- positions that follow the hosts


def born_host_len(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].born_host_len


def store_host_len(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].store_host_len


def store_timestamp_pos(sys_flag: int) -> int:
    """Byte offset of STORETIMESTAMP within a record with this sys flag."""
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].store_timestamp_pos


def store_host_pos(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].store_host_pos


def reconsume_times_pos(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].reconsume_times_pos


def prepared_transaction_offset_pos(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].prepared_transaction_offset_pos


def body_length_pos(sys_flag: int) -> int:
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].body_length_pos


def record_header_size(sys_flag: int) -> int:
    """Size of the fixed part of a record (TOTALSIZE .. BODYLENGTH): 88, 100 or 112 bytes."""
    return HEADER_LAYOUTS[(sys_flag >> HOST_KIND_SHIFT) & 3].size


def stored_record_size(
    body_len: int, topic_len: int, properties_len: int, *, born_v6: bool = False, store_v6: bool = False
) -> int:
    """Size of a record; ``topic_len`` in UTF-8 bytes (V2 topic length above 127 bytes)."""
    topic_len_size = TOPIC_LENGTH_SIZE_V2 if topic_len > MAX_TOPIC_LENGTH_V1 else TOPIC_LENGTH_SIZE_V1
    header = HEADER_LAYOUTS[born_v6 + 2 * store_v6].size
    return header + body_len + topic_len_size + topic_len + PROPERTIES_LENGTH_SIZE + properties_len
