"""Arrow conversion of pulled record bytes: schema, fast path == reference path, edge cases."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.remoting.message import (
    CompressionType,
    SysFlag,
    compress_body,
    encode_stored_message,
    with_compression,
)
from rocketq.connector.records import decode_pull_body, record_starts
from rocketq.connector.schema import ARROW_SCHEMA, COLUMN_NAMES, spark_schema


def record(
    i: int,
    *,
    topic: str = "T1",
    props: dict[str, str] | None = None,
    body: bytes | None = None,
    sys_flag: int = 0,
    born: tuple[str, int] = ("10.0.0.5", 5555),
) -> bytes:
    if props is None:
        props = {
            "UNIQ_KEY": f"U{i:04d}",
            "TAGS": "TagA" if i % 2 else "TagB",
            "KEYS": f"k{i} z{i}",
            "WAIT": "true",
        }
    return encode_stored_message(
        topic=topic, queue_id=3, born_timestamp=1_700_000_000_000 + i, born_host=born,
        store_host=("127.0.0.1", 10911), body=body if body is not None else f"body-{i}".encode(),
        queue_offset=100 + i, physical_offset=1000 * i, sys_flag=sys_flag,
        store_timestamp=1_700_000_000_500 + i, properties=props, reconsume_times=i % 3, flag=i,
    )  # fmt: skip


def both(buf: bytes, **kw: object) -> pa.RecordBatch:
    fast = decode_pull_body(buf, topic="T1", broker_name="broker-a", **kw)  # type: ignore[arg-type]
    slow = decode_pull_body(buf, topic="T1", broker_name="broker-a", force_slow=True, **kw)  # type: ignore[arg-type]
    assert fast.batch.schema.equals(ARROW_SCHEMA)
    for name in COLUMN_NAMES:
        assert fast.batch.column(name).equals(slow.batch.column(name)), name
    assert (fast.last_queue_offset, fast.records_seen) == (slow.last_queue_offset, slow.records_seen)
    return fast.batch


def test_arrow_schema_is_exactly_sparks() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(spark_schema(), timezone="UTC").equals(ARROW_SCHEMA)


def test_row_values() -> None:
    batch = both(b"".join(record(i) for i in range(3)))
    row = batch.to_pylist()[1]
    assert row["topic"] == "T1" and row["brokerName"] == "broker-a"
    assert (row["queueId"], row["queueOffset"], row["flag"], row["reconsumeTimes"]) == (3, 101, 1, 1)
    assert row["msgId"] == "7F00000100002A9F00000000000003E8"
    assert (row["uniqKey"], row["tags"], row["keys"]) == ("U0001", "TagA", ["k1", "z1"])
    assert row["body"] == b"body-1"
    assert dict(row["properties"])["WAIT"] == "true"
    assert row["bornTimestamp"].timestamp() == pytest.approx(1_700_000_000.001)
    assert (row["bornHost"], row["storeHost"]) == ("10.0.0.5:5555", "127.0.0.1:10911")


def test_compressed_bodies_are_decompressed() -> None:
    raw = b"x" * 5000
    zl = record(0, body=compress_body(raw), sys_flag=int(SysFlag.COMPRESSED))
    lz = record(
        1, body=compress_body(raw, CompressionType.LZ4), sys_flag=with_compression(0, CompressionType.LZ4)
    )
    batch = both(zl + lz + record(2))
    assert batch.column("body").to_pylist()[:2] == [raw, raw]


def test_end_offset_cut_and_tag_filter() -> None:
    buf = b"".join(record(i) for i in range(10))
    cut = decode_pull_body(buf, topic="T1", broker_name="b", end_offset=104)
    assert cut.batch.column("queueOffset").to_pylist() == [100, 101, 102, 103]
    assert cut.last_queue_offset == 103 and cut.records_seen == 4
    tagged = both(buf, tags=frozenset({"TagA"}))
    assert tagged.column("queueOffset").to_pylist() == [101, 103, 105, 107, 109]
    none = decode_pull_body(buf, topic="T1", broker_name="b", end_offset=100)
    assert none.batch.num_rows == 0 and none.records_seen == 0


def test_slow_path_cases_match() -> None:
    odd = [
        record(0, props={}),
        record(1, props={"A": "1"}),
        record(2, props={"KEYS": "a  b ", "UNIQ_KEY": "u"}),
        record(3, born=("::1", 7)),  # IPv6 host -> reference decoder
        record(4, props={"Ü": "ünïcode", "TAGS": "标签"}),
    ]
    batch = both(b"".join(odd))
    assert batch.column("keys").to_pylist()[2] == ["a", "b"]
    assert batch.column("tags").to_pylist()[4] == "标签"
    assert batch.column("bornHost").to_pylist()[3] == "::1:7"


def test_empty_and_truncated() -> None:
    assert decode_pull_body(b"", topic="T1", broker_name="b").batch.num_rows == 0
    with pytest.raises(Exception, match="record"):
        record_starts(record(0)[:-3])


props_st = st.dictionaries(
    st.text(
        st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=8,
    ),
    st.text(
        st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=["Cs"]),
        min_size=0,
        max_size=12,
    ),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(props_st, st.binary(max_size=40)), min_size=1, max_size=12))
def test_fast_equals_reference(rows: list[tuple[dict[str, str], bytes]]) -> None:
    both(b"".join(record(i, props=p, body=b) for i, (p, b) in enumerate(rows)))


def test_take_slices_copies_sorted_slices() -> None:
    import numpy as np

    from rocketq.connector.records import take_slices

    data = pa.py_buffer(b"..ab...cde.f")
    out = take_slices(data, np.array([2, 7, 11]), np.array([2, 3, 1]))
    assert out.to_pylist() == [b"ab", b"cde", b"f"]
    assert take_slices(data, np.array([], dtype=np.int64), np.array([], dtype=np.int64)).to_pylist() == []


def test_uniform_and_mixed_record_chains() -> None:
    from rocketq.connector.records import record_starts_array

    same = b"".join(record(i, body=b"x" * 10, props={"UNIQ_KEY": f"U{i:04d}"}) for i in range(5))
    mixed = b"".join(record(i, body=b"x" * i) for i in range(5))
    for buf in (same, mixed):
        expected, pos = [], 0
        while pos < len(buf):
            expected.append(pos)
            pos += int.from_bytes(buf[pos : pos + 4], "big")
        assert record_starts_array(buf).tolist() == expected
        both(buf)
    # same-sized records where one size field lies: not uniform, and the walk reports it
    bad = bytearray(same)
    bad[len(same) // 5 * 2 : len(same) // 5 * 2 + 4] = (7).to_bytes(4, "big")
    with pytest.raises(Exception, match="record size"):
        record_starts_array(bytes(bad))


def test_nul_bytes_in_properties_and_bad_body_length() -> None:
    batch = both(b"".join(record(i, props={"A": "x\x00y", "UNIQ_KEY": "u"}) for i in range(3)))
    assert dict(batch.column("properties").to_pylist()[0])["A"] == "x\x00y"
    corrupt = bytearray(record(0))
    corrupt[84:88] = (-5).to_bytes(4, "big", signed=True)  # BODYLEN < 0: the fast path must refuse it
    with pytest.raises(Exception):  # noqa: B017 - the reference decoder's error type
        decode_pull_body(bytes(corrupt), topic="T1", broker_name="b")


def test_typical_records_take_the_fast_path() -> None:
    import numpy as np

    from rocketq.connector import records as r

    buf = b"".join(record(i) for i in range(20))
    data = pa.py_buffer(buf)
    starts = r.record_starts_array(buf)
    assert r._fast_batch(data, starts, r.read_heads(data, starts), "T1", "broker-a") is not None
    assert len(np.asarray(starts)) == 20
