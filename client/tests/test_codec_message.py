"""Tests of the CommitLog record codec: hand-derived golden bytes, round trips, corruption."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import (
    BLANK_MAGIC,
    BORNHOST_POS,
    COLUMNS,
    MAGIC_V1,
    MAGIC_V2,
    PHYSICALOFFSET_POS,
    QUEUEOFFSET_POS,
    STORETIMESTAMP_POS,
    SYSFLAG_POS,
    CompressionType,
    StoredMessage,
    SysFlag,
    compress_body,
    compression_type_of,
    decode_records_columnar,
    decode_stored_message,
    encode_blank,
    encode_stored_message,
    iter_stored_messages,
    patch_record,
    peek_total_size_and_magic,
    record_header_fields,
    store_timestamp_pos,
    stored_record_size,
    with_compression,
)

BORN_TS = 1700000000000  # 0x0000018BCFE56800
STORE_TS = 1700000000123  # 0x0000018BCFE5687B

# IPv4, magic V1, topic "T1", body b"hello", one property TAGS=TagA.  108 = 91 + 5 + 2 + 10.
GOLDEN_V1 = bytes.fromhex(
    "0000006C"  # TOTALSIZE 108
    "DAA320A7"  # MAGICCODE V1
    "3610A686"  # BODYCRC = crc32(b"hello") & 0x7FFFFFFF
    "00000001"  # QUEUEID 1
    "00000000"  # FLAG 0
    "0000000000000007"  # QUEUEOFFSET 7           (byte 20)
    "0000000000001000"  # PHYSICALOFFSET 4096     (byte 28)
    "00000000"  # SYSFLAG 0                       (byte 36)
    "0000018BCFE56800"  # BORNTIMESTAMP           (byte 40)
    "0A000005" "0000C350"  # BORNHOST 10.0.0.5:50000  (byte 48)
    "0000018BCFE5687B"  # STORETIMESTAMP          (byte 56)
    "0A000001" "00002A9F"  # STOREHOST 10.0.0.1:10911
    "00000000"  # RECONSUMETIMES 0
    "0000000000000000"  # PREPARED TRANSACTION OFFSET 0
    "00000005" "68656C6C6F"  # BODYLENGTH 5, b"hello"
    "02" "5431"  # TOPICLENGTH 1 byte, "T1"
    "000A" "54414753" "01" "54616741" "02"  # PROPERTIESLENGTH 10, "TAGS\x01TagA\x02"
)  # fmt: skip

# Magic V2 (topic of 128 bytes > 127), body b"hi", no properties.  222 = 84 + 4+2 + 2+128 + 2.
LONG_TOPIC = "a" * 128
GOLDEN_V2 = bytes.fromhex(
    "000000DE"  # TOTALSIZE 222
    "DAA320AB"  # MAGICCODE V2
    "58932AAC"  # BODYCRC = crc32(b"hi") & 0x7FFFFFFF (top bit of 0xD8932AAC cleared)
    "00000000" "00000000" "0000000000000000" "0000000000000000" "00000000"
    "0000018BCFE56800" "0A000005" "0000C350" "0000018BCFE5687B" "0A000001" "00002A9F"
    "00000000" "0000000000000000"
    "00000002" "6869"  # BODYLENGTH 2, b"hi"
    "0080" + "61" * 128 +  # TOPICLENGTH 2 bytes = 128, "aaa..."
    "0000"  # PROPERTIESLENGTH 0
)  # fmt: skip

# IPv6 born host [::1]:1234 and store host [2001:db8::1]:10911: SYSFLAG 0x30, hosts 20 bytes each.
GOLDEN_V6 = bytes.fromhex(
    "00000075"  # TOTALSIZE 117 = 112 + 1 + 1+1 + 2
    "DAA320A7" "68B7BE43"  # V1, crc32(b"a") & 0x7FFFFFFF
    "00000003" "00000009"  # QUEUEID 3, FLAG 9
    "0000000000000002" "0000000000000064"  # QUEUEOFFSET 2, PHYSICALOFFSET 100
    "00000030"  # SYSFLAG BORNHOST_V6 | STOREHOST_V6
    "0000018BCFE56800"
    "00000000000000000000000000000001" "000004D2"  # BORNHOST ::1 port 1234
    "0000018BCFE5687B"  # STORETIMESTAMP at 48 + 20 = 68
    "20010DB8000000000000000000000001" "00002A9F"  # STOREHOST 2001:db8::1 port 10911
    "00000001" "0000000000000000"  # RECONSUMETIMES 1, PREPARED 0
    "00000001" "61"  # body b"a"
    "01" "54"  # topic "T"
    "0000"
)  # fmt: skip


def _crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def test_golden_crcs_are_zlib_crc32() -> None:
    assert GOLDEN_V1[8:12] == _crc(b"hello").to_bytes(4, "big")
    assert GOLDEN_V2[8:12] == _crc(b"hi").to_bytes(4, "big")
    assert GOLDEN_V6[8:12] == _crc(b"a").to_bytes(4, "big")


def test_encode_v1_golden() -> None:
    data = encode_stored_message(
        topic="T1", queue_id=1, flag=0, queue_offset=7, physical_offset=4096, sys_flag=0,
        born_timestamp=BORN_TS, born_host=("10.0.0.5", 50000), store_timestamp=STORE_TS,
        store_host=("10.0.0.1", 10911), reconsume_times=0, prepared_transaction_offset=0,
        body=b"hello", properties={"TAGS": "TagA"},
    )  # fmt: skip
    assert data == GOLDEN_V1
    assert stored_record_size(5, 2, 10) == 108


def test_decode_v1_golden() -> None:
    msg = decode_stored_message(GOLDEN_V1, check_crc=True)
    assert msg == StoredMessage(
        total_size=108, magic=MAGIC_V1, body_crc=0x3610A686, queue_id=1, flag=0, queue_offset=7,
        physical_offset=4096, sys_flag=0, born_timestamp=BORN_TS, born_host=("10.0.0.5", 50000),
        store_timestamp=STORE_TS, store_host=("10.0.0.1", 10911), reconsume_times=0,
        prepared_transaction_offset=0, body=b"hello", topic="T1", properties={"TAGS": "TagA"},
    )  # fmt: skip
    assert msg.tags == "TagA" and msg.keys == [] and msg.uniq_key is None
    assert msg.msg_id == "0A00000100002A9F0000000000001000"


def test_v2_golden_both_ways() -> None:
    data = encode_stored_message(
        topic=LONG_TOPIC, queue_id=0, born_timestamp=BORN_TS, born_host=("10.0.0.5", 50000),
        store_timestamp=STORE_TS, store_host=("10.0.0.1", 10911), body=b"hi",
    )  # fmt: skip
    assert data == GOLDEN_V2
    msg = decode_stored_message(GOLDEN_V2, check_crc=True)
    assert msg.magic == MAGIC_V2 and msg.topic == LONG_TOPIC and msg.body == b"hi" and msg.properties == {}


def test_v2_can_be_forced_and_v1_rejects_long_topics() -> None:
    kw = dict(queue_id=0, born_timestamp=0, born_host=("1.2.3.4", 1), store_host=("1.2.3.4", 2), body=b"")
    forced = encode_stored_message(topic="T", magic=MAGIC_V2, **kw)  # type: ignore[arg-type]
    assert decode_stored_message(forced).topic == "T"
    with pytest.raises(MessageFormatError):
        encode_stored_message(topic=LONG_TOPIC, magic=MAGIC_V1, **kw)  # type: ignore[arg-type]


def test_ipv6_golden_both_ways() -> None:
    data = encode_stored_message(
        topic="T", queue_id=3, flag=9, queue_offset=2, physical_offset=100, born_timestamp=BORN_TS,
        born_host=("::1", 1234), store_timestamp=STORE_TS, store_host=("2001:db8::1", 10911),
        reconsume_times=1, body=b"a",
    )  # fmt: skip
    assert data == GOLDEN_V6
    msg = decode_stored_message(GOLDEN_V6, check_crc=True)
    assert msg.sys_flag == SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
    assert msg.born_host == ("::1", 1234) and msg.store_host == ("2001:db8::1", 10911)
    assert msg.store_timestamp == STORE_TS and store_timestamp_pos(msg.sys_flag) == 68
    assert msg.msg_id == "20010DB800000000000000000000000100002A9F0000000000000064"


def test_host_bits_follow_addresses() -> None:
    data = encode_stored_message(
        topic="T", queue_id=0, born_timestamp=0, born_host=("10.0.0.5", 1), store_host=("10.0.0.1", 2),
        body=b"", sys_flag=SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | SysFlag.MULTI_TAGS,
    )  # fmt: skip
    assert decode_stored_message(data).sys_flag == SysFlag.MULTI_TAGS


def test_named_offsets() -> None:
    assert (QUEUEOFFSET_POS, PHYSICALOFFSET_POS, SYSFLAG_POS, BORNHOST_POS, STORETIMESTAMP_POS) == (
        20,
        28,
        36,
        48,
        56,
    )
    assert GOLDEN_V1[QUEUEOFFSET_POS : QUEUEOFFSET_POS + 8] == (7).to_bytes(8, "big")
    assert GOLDEN_V1[STORETIMESTAMP_POS : STORETIMESTAMP_POS + 8] == STORE_TS.to_bytes(8, "big")


def _record_with_stored_body(stored: bytes, sys_flag: int) -> bytes:
    """A V1 record built field by field (not by the encoder) around an already-compressed body."""
    topic_props = bytes.fromhex("01540000")  # topic "T", no properties
    total = 88 + len(stored) + len(topic_props)
    return b"".join((
        total.to_bytes(4, "big"), bytes.fromhex("DAA320A7"), _crc(stored).to_bytes(4, "big"),
        bytes(4 + 4 + 8 + 8), sys_flag.to_bytes(4, "big"), bytes(8), bytes.fromhex("7F000001" "00000001"),
        bytes(8), bytes.fromhex("7F000001" "00000002"), bytes(4 + 8), len(stored).to_bytes(4, "big"),
        stored, topic_props,
    ))  # fmt: skip


BIG_BODY = b"RocketMQ " * 1000


@pytest.mark.parametrize(
    ("stored", "sys_flag"),
    [
        (zlib.compress(BIG_BODY, 5), 0x301),  # 5.x: COMPRESSED | ZLIB << 8
        (zlib.compress(BIG_BODY, 9), 0x001),  # 4.x: type bits 0 mean ZLIB
        (lz4.frame.compress(BIG_BODY), 0x101),  # COMPRESSED | LZ4 << 8, default (linked) frame
        (lz4.frame.compress(BIG_BODY, block_linked=False, store_size=False), 0x101),
    ],
)
def test_compressed_records_decode(stored: bytes, sys_flag: int) -> None:
    data = _record_with_stored_body(stored, sys_flag)
    msg = decode_stored_message(data, check_crc=True)
    assert msg.body == BIG_BODY and msg.body_crc == _crc(stored)
    assert decode_stored_message(data, decompress=False).body == stored
    assert decode_records_columnar(data)["body"] == [BIG_BODY]


@pytest.mark.parametrize("ctype", [CompressionType.ZLIB, CompressionType.LZ4])
def test_compress_roundtrip_through_encoder(ctype: CompressionType) -> None:
    stored = compress_body(BIG_BODY, ctype)
    if ctype == CompressionType.ZLIB:
        assert zlib.decompress(stored) == BIG_BODY
    else:
        assert lz4.frame.decompress(stored) == BIG_BODY
    sys_flag = with_compression(0, ctype)
    assert compression_type_of(sys_flag) == ctype
    data = encode_stored_message(
        topic="T", queue_id=0, born_timestamp=0, born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2),
        body=stored, sys_flag=sys_flag,
    )  # fmt: skip
    assert data == _record_with_stored_body(stored, sys_flag)
    assert decode_stored_message(data).body == BIG_BODY


def test_zstd_is_refused_clearly() -> None:
    with pytest.raises(MessageFormatError, match=r"(?i)zstd"):
        compress_body(b"x", CompressionType.ZSTD)
    data = _record_with_stored_body(b"\x28\xb5\x2f\xfd", 0x201)
    with pytest.raises(MessageFormatError, match=r"(?i)zstd"):
        decode_stored_message(data)
    assert decode_stored_message(data, decompress=False).body == b"\x28\xb5\x2f\xfd"


def test_corrupt_compressed_body() -> None:
    with pytest.raises(MessageFormatError, match="decompress"):
        decode_stored_message(_record_with_stored_body(b"not zlib", 0x1))


def test_every_truncation_raises_format_error() -> None:
    for data in (GOLDEN_V1, GOLDEN_V2, GOLDEN_V6):
        for cut in range(len(data)):
            with pytest.raises(MessageFormatError, match="position 0"):
                decode_stored_message(data[:cut])
            with pytest.raises(MessageFormatError):
                decode_records_columnar(data[:cut] if cut else b"\x00")
            with pytest.raises(MessageFormatError):
                list(iter_stored_messages(GOLDEN_V1 + data[:cut] if cut else b"\x00"))


def test_corruptions_name_position_and_bytes() -> None:
    bad_magic = GOLDEN_V1 + b"\x00\x00\x00\x6c\x12\x34\x56\x78" + GOLDEN_V1[8:]
    with pytest.raises(
        MessageFormatError, match=r"bad magic code 0x12345678 at position 108.*0000006c12345678"
    ):
        list(iter_stored_messages(bad_magic))
    with pytest.raises(MessageFormatError, match="position 108"):
        decode_records_columnar(bad_magic)
    bad_crc = GOLDEN_V1[:88] + b"jello" + GOLDEN_V1[93:]
    assert decode_stored_message(bad_crc).body == b"jello"
    with pytest.raises(MessageFormatError, match="CRC"):
        decode_stored_message(bad_crc, check_crc=True)
    too_big = b"\x00\x00\x00\x6d" + GOLDEN_V1[4:] + b"\x00"  # TOTALSIZE 109, one byte too many
    with pytest.raises(MessageFormatError, match="properties length"):
        decode_stored_message(too_big)
    with pytest.raises(MessageFormatError):
        decode_records_columnar(too_big)
    huge_body = GOLDEN_V1[:84] + b"\x7f\xff\xff\xff" + GOLDEN_V1[88:]
    with pytest.raises(MessageFormatError, match="body length"):
        decode_stored_message(huge_body)
    negative_size = b"\xff\xff\xff\xff" + GOLDEN_V1[4:]
    with pytest.raises(MessageFormatError, match="total size"):
        decode_stored_message(negative_size)
    with pytest.raises(MessageFormatError, match="blank"):
        decode_stored_message(encode_blank(1000) + bytes(992))


def test_blank_and_peek() -> None:
    assert encode_blank(24) == bytes.fromhex("00000018CBD43194")
    assert peek_total_size_and_magic(encode_blank(24)) == (24, BLANK_MAGIC)
    assert peek_total_size_and_magic(GOLDEN_V1 + GOLDEN_V2, 108) == (222, MAGIC_V2)
    with pytest.raises(MessageFormatError):
        peek_total_size_and_magic(GOLDEN_V1, 104)


def test_record_header_fields_and_patch() -> None:
    buf = bytearray(b"\xee" * 10 + GOLDEN_V6)
    patch_record(buf, 10, queue_offset=55, physical_offset=1 << 40, store_timestamp=42)
    head = record_header_fields(buf, 10, check_crc=True)
    assert (head.total_size, head.queue_id, head.flag, head.queue_offset) == (117, 3, 9, 55)
    assert (head.physical_offset, head.store_timestamp, head.reconsume_times) == (1 << 40, 42, 1)
    assert (head.body_pos, head.body_length, head.topic, head.properties) == (10 + 112, 1, "T", {})
    assert decode_stored_message(buf, 10).store_timestamp == 42


def test_iter_and_columnar_agree() -> None:
    buf = GOLDEN_V1 + GOLDEN_V2 + GOLDEN_V6
    msgs = list(iter_stored_messages(memoryview(buf)))
    assert [m.topic for m in msgs] == ["T1", LONG_TOPIC, "T"]
    cols = decode_records_columnar(bytearray(buf))
    assert list(cols) == list(COLUMNS)
    assert cols["body"] == [m.body for m in msgs]
    assert cols["properties"] == [m.properties for m in msgs]
    assert cols["born_host"] == ["10.0.0.5:50000", "10.0.0.5:50000", "::1:1234"]
    assert cols["store_timestamp"] == [STORE_TS] * 3
    assert decode_records_columnar(GOLDEN_V1, parse_properties=False)["properties"] == [b"TAGS\x01TagA\x02"]
    assert decode_records_columnar(b"") == {name: [] for name in COLUMNS}


ips = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(str),
)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
prop_text = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1, max_size=8
)


@settings(max_examples=150, deadline=None)
@given(
    topic=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=200),
    queue_id=int32, flag=int32, queue_offset=int64, physical_offset=int64,
    sys_flag=st.integers(0, 0x7FF).filter(lambda f: not f & 1), born_timestamp=int64, store_timestamp=int64,
    born_host=st.tuples(ips, st.integers(0, 65535)), store_host=st.tuples(ips, st.integers(0, 65535)),
    reconsume_times=int32, prepared=int64, body=st.binary(max_size=300),
    properties=st.dictionaries(prop_text, prop_text, max_size=5),
)  # fmt: skip
def test_roundtrip(
    topic: str, queue_id: int, flag: int, queue_offset: int, physical_offset: int, sys_flag: int,
    born_timestamp: int, store_timestamp: int, born_host: tuple[str, int], store_host: tuple[str, int],
    reconsume_times: int, prepared: int, body: bytes, properties: dict[str, str],
) -> None:  # fmt: skip
    data = encode_stored_message(
        topic=topic,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared,
        body=body,
        properties=properties,
    )
    msg = decode_stored_message(b"xyz" + data, 3, check_crc=True)
    assert msg.total_size == len(data)
    assert msg.magic == (MAGIC_V2 if len(topic.encode()) > 127 else MAGIC_V1)
    assert (msg.topic, msg.queue_id, msg.flag, msg.queue_offset) == (topic, queue_id, flag, queue_offset)
    assert (msg.physical_offset, msg.born_timestamp, msg.store_timestamp) == (
        physical_offset, born_timestamp, store_timestamp,
    )  # fmt: skip
    assert msg.sys_flag & ~0x30 == sys_flag & ~0x30
    assert (msg.reconsume_times, msg.prepared_transaction_offset) == (reconsume_times, prepared)
    assert (msg.body, msg.properties) == (body, properties)
    assert msg.born_host[1] == born_host[1] and msg.store_host[1] == store_host[1]
    cols = decode_records_columnar(data + data)
    assert cols["body"] == [body, body] and cols["topic"] == [topic, topic]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 107))
def test_fuzzed_records_never_crash(noise: bytes, at: int) -> None:
    data = GOLDEN_V1[:at] + noise + GOLDEN_V1[at + len(noise) :]
    for decode in (decode_stored_message, decode_records_columnar, lambda b: list(iter_stored_messages(b))):
        try:
            decode(data)
        except MessageFormatError:
            pass


def test_consumer_msg_id_is_the_uniq_key_and_survives_a_retry() -> None:
    """As Java's consumer-side ``getMsgId()``: the UNIQ_KEY when present, else the offset msgId."""

    def stored(topic: str, physical_offset: int, properties: dict[str, str]) -> StoredMessage:
        return decode_stored_message(
            encode_stored_message(
                topic=topic,
                queue_id=0,
                born_timestamp=BORN_TS,
                born_host=("10.0.0.5", 50000),
                store_host=("10.0.0.1", 10911),
                body=b"x",
                physical_offset=physical_offset,
                properties=properties,
            )
        )

    uniq = "0A000005" + "1F40" + "12345678" + "00000010" + "0001"
    first = stored("T1", 4096, {"UNIQ_KEY": uniq})
    retry_props = {"UNIQ_KEY": uniq, "RETRY_TOPIC": "T1", "ORIGIN_MESSAGE_ID": first.offset_msg_id}
    retried = stored("%RETRY%g", 8192, retry_props)
    assert first.msg_id == retried.msg_id == first.uniq_key == uniq
    assert first.offset_msg_id == "0A00000100002A9F0000000000001000"
    assert retried.offset_msg_id == "0A00000100002A9F0000000000002000" != first.offset_msg_id
    plain = stored("T1", 4096, {"TAGS": "A"})
    assert plain.uniq_key is None and plain.msg_id == plain.offset_msg_id == first.offset_msg_id


def test_record_layout_tables_agree_with_each_other_and_the_golden_records() -> None:
    import numpy as np

    from rocketq.client.remoting import record_layout as rl

    for kind, layout in enumerate(rl.HEADER_LAYOUTS):
        dtype = np.dtype(rl.header_dtype_spec(kind))
        assert dtype.itemsize == layout.size == rl.HEADER_STRUCTS[kind].size
        assert dtype.fields is not None
        assert {name: dtype.fields[name][1] for name in rl.HEADER_FIELD_NAMES} == dict(layout.positions)
        sys_flag = (kind & 1) * rl.BORNHOST_V6_FLAG | (kind >> 1) * rl.STOREHOST_V6_FLAG
        assert rl.host_kind(sys_flag) == kind and rl.record_header_size(sys_flag) == layout.size
        assert rl.body_length_pos(sys_flag) == layout.size - 4
    assert [layout.store_timestamp_pos for layout in rl.HEADER_LAYOUTS] == [56, 68, 56, 68]
    head = np.frombuffer(GOLDEN_V6[:112], dtype=np.dtype(rl.header_dtype_spec(3)))[0]
    fields = (head["store_timestamp"], head["body_length"], head["reconsume_times"], head["queue_id"])
    assert [int(f) for f in fields] == [STORE_TS, 1, 1, 3]
    partial = rl.header_struct(0, ("queue_offset", "body_length"))
    assert partial.size == 88 and partial.unpack_from(GOLDEN_V1) == (7, 5)
    with pytest.raises(ValueError, match="not header fields"):
        rl.header_struct(0, ("queue_offset", "tags"))
