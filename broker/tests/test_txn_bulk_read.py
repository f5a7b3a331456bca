"""The bulk half-record reader of ranged END_TRANSACTION agrees with the record-by-record reader.

``ranged.read_halves`` gathers record fields with numpy when the half records look like the ones
rocketq's prepared batches store, and falls back to ``read_half`` per record otherwise.  Both must
give the same records, the same destination, group, origin and committed properties.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.transaction.half_message import to_half_message
from rocketq.broker.transaction.half_read import HalfColumns, _read_bulk, read_half, read_halves
from rocketq.broker.transaction.ranged import check_half_batch, half_properties
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.properties import decode_properties, encode_properties

STORE = ("127.0.0.1", 10911)


def half_record(
    i: int,
    *,
    topic: str = "TopicB",
    queue_id: int = 3,
    group: str = "PG",
    born: tuple[str, int] = ("10.0.0.2", 5555),
    body: bytes = b"payload",
    renewed_from: int | None = None,
    **extra: str,
) -> bytes:
    """A stored half record as the broker writes it for a prepared send, at half offset 100 + i
    (``renewed_from``: a copy re-appended by a check pass, carrying its origin offset)."""
    msg = MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=body,
        sys_flag=4,
        properties=encode_properties(
            {
                "TRAN_MSG": "true",
                "PGROUP": group,
                "UNIQ_KEY": f"U{i}",
                "KEYS": f"k{i}",
                **extra,
                "CLUSTER": "c",
            }
        ),
        born_timestamp=1_700_000_000_000 + i,
        born_host=born,
        store_host=STORE,
        flag=i % 3,
    )
    half = to_half_message(msg)
    if renewed_from is not None:
        props = half.properties
        props = decode_properties(props) if isinstance(props, str) else dict(props)
        props["TRAN_PREPARED_QUEUE_OFFSET"] = str(renewed_from)
        half = dataclasses.replace(half, properties=props)
    return encode_stored_message(
        topic=half.topic,
        queue_id=half.queue_id,
        flag=half.flag,
        body=half.body,
        properties=half.properties,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_host=half.store_host,
        reconsume_times=i % 2,
        prepared_transaction_offset=0,
        queue_offset=100 + i,
        physical_offset=5000 + 300 * i,
        store_timestamp=1_700_000_000_500,
    )


def rows(cols: HalfColumns | None) -> list[tuple[Any, ...]]:
    """The records of ``cols`` as tuples (committed properties decoded: their order may differ)."""
    assert cols is not None
    names = [n for n in HalfColumns.__slots__ if n != "committed"]
    return [
        (*row, decode_properties(c))
        for *row, c in zip(*(getattr(cols, n) for n in names), cols.committed, strict=True)
    ]


def one_by_one(buffers: list[memoryview]) -> HalfColumns:
    out = HalfColumns()
    for buf in buffers:
        read_half(buf, out)
    return out


def test_bulk_path_taken_for_prepared_batches_and_agrees() -> None:
    buffers = [memoryview(half_record(i, body=bytes([i]) * (i % 7))) for i in range(20)]
    bulk = _read_bulk(buffers)
    assert bulk is not None, "a plain prepared batch must take the bulk path"
    assert rows(bulk) == rows(one_by_one(buffers))
    committed = decode_properties(bulk.committed[5])
    assert committed["TRAN_PREPARED_QUEUE_OFFSET"] == "105"
    assert "REAL_TOPIC" not in committed and "REAL_QID" not in committed
    assert bulk.reals[5] == ("TopicB", 3) and bulk.groups[5] == "PG" and bulk.origins[5] == 105


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["TopicB", "TopicC"]),
            st.integers(0, 2),
            st.sampled_from(["PG", "PG2"]),
            st.sampled_from([("10.0.0.2", 5555), ("::1", 7000)]),
            st.sampled_from([{}, {"DELAY": "3"}, {"REAL_TOPIC": "Preset"}, {"KEYS": ""}]),
            st.sampled_from([None, 7, 100, 10_000]),
            st.binary(max_size=40),
        ),
        min_size=1,
        max_size=24,
    )
)
def test_bulk_reader_matches_record_by_record(specs: list[tuple[Any, ...]]) -> None:
    buffers = []
    for i, (topic, qid, group, born, extra, renewed, body) in enumerate(specs):
        rec = half_record(
            i, topic=topic, queue_id=qid, group=group, born=born, body=body, renewed_from=renewed, **extra
        )
        buffers.append(memoryview(rec))
    assert rows(read_halves(buffers)) == rows(one_by_one(buffers))


def test_mixed_batches_fall_back() -> None:
    same = [half_record(i) for i in range(10)]
    assert _read_bulk([memoryview(b) for b in same]) is not None
    for odd in (
        half_record(4, topic="Other"),
        half_record(4, group="PG2"),
        half_record(4, DELAY="2"),
        half_record(4, born=("::1", 1)),
        half_record(4, renewed_from=1),
    ):
        mixed = [*same[:4], odd, *same[5:]]
        views = [memoryview(b) for b in mixed]
        assert _read_bulk(views) is None
        assert rows(read_halves(views)) == rows(one_by_one(views))


def test_unreadable_record_is_skipped_not_fatal() -> None:
    good = [half_record(i) for i in range(10)]
    broken = bytearray(good[3])
    broken[4:8] = b"\x00\x00\x00\x00"  # bad magic
    out = read_halves([memoryview(b) for b in [*good[:3], bytes(broken), *good[4:]]])
    assert out.queue_offsets == [100 + i for i in range(10) if i != 3]


_prop_maps = st.dictionaries(
    st.sampled_from(["TRAN_MSG", "PGROUP", "KEYS", "TAGS", "REAL_TOPIC", "TRAN_PREPARED_QUEUE_OFFSET", "é"]),
    st.sampled_from(["true", "TRUE", "PG", "PG2", "k1 k2", "x", "é"]),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_prop_maps, min_size=1, max_size=6))
def test_half_properties_agrees_with_the_decoding_path(maps: list[dict[str, str]]) -> None:
    raw = [encode_properties(m).encode() for m in maps]
    fast = half_properties(raw, "TopicB", 5)
    if fast is None:
        return  # the processor takes the decoding path, which is the reference
    assert check_half_batch([decode_properties(p) for p in raw]) is None
    for props, out in zip(raw, fast, strict=True):
        msg = MessageToStore(
            topic="TopicB",
            queue_id=5,
            body=b"",
            properties=props.decode(),
            born_timestamp=0,
            born_host=STORE,
            store_host=STORE,
        )
        expected = to_half_message(msg).properties
        assert decode_properties(out) == (
            decode_properties(expected) if isinstance(expected, str) else expected
        )


def test_half_properties_takes_the_usual_batch() -> None:
    raw = [
        encode_properties({"TRAN_MSG": "true", "PGROUP": "PG", "KEYS": f"k{i}"}).encode() for i in range(5)
    ]
    fast = half_properties(raw, "TopicB", 5)
    assert fast is not None and fast[2] == raw[2] + b"REAL_TOPIC\x01TopicB\x02REAL_QID\x015\x02"
    assert half_properties([*raw, raw[0].replace(b"PG", b"PX")], "TopicB", 5) is None  # two groups


def test_half_properties_appends_the_cluster_unless_present() -> None:
    props = [
        encode_properties({"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": f"U{i}"}).encode()
        for i in range(3)
    ]
    cluster = b"CLUSTER\x01c1\x02"
    out = half_properties(props, "TopicB", 4, cluster=cluster)
    assert out is not None
    for p, o in zip(props, out, strict=True):
        assert decode_properties(o.decode()) == {
            **decode_properties(p.decode()),
            "CLUSTER": "c1",
            "REAL_TOPIC": "TopicB",
            "REAL_QID": "4",
        }
    present = [p + cluster for p in props]
    assert (
        half_properties(present, "TopicB", 4, cluster=cluster) is None
    )  # the caller then uses its own rewrite
    assert half_properties(present, "TopicB", 4) is not None


def test_half_properties_tail_path_refuses_what_the_counts_refuse() -> None:
    """Messages ending with TRAN_MSG=true and PGROUP (the sink's layout) skip two exact counts:
    a key that only looks like TRAN_MSG, a second TRAN_MSG or PGROUP, or another group must still
    send the batch to the decoding path."""
    tail = b"TRAN_MSG\x01true\x02PGROUP\x01PG\x02"
    good = [b"KEYS\x01k%d\x02UNIQ_KEY\x01U%d\x02" % (i, i) + tail for i in range(4)]
    out = half_properties(good, "T", 1)
    assert out is not None and out[0] == good[0] + b"REAL_TOPIC\x01T\x02REAL_QID\x011\x02"
    for bad in (
        b"TRAN_MSG\x01false\x02xx" + tail,  # the real TRAN_MSG is false
        b"KEYS\x01a\x02PGROUP\x01other\x02" + tail,  # two groups
        b"KEYS\x01a\x02TRAN_MSG\x01true\x02" + tail,  # TRAN_MSG twice
        b"KEYS\x01a\x02" + tail.replace(b"PG\x02", b"PG2\x02"),
        b"REAL_QID\x013\x02" + tail,
    ):
        assert half_properties([*good, bad], "T", 1) is None, bad  # the decoding path decides
