"""Lazy received messages (model.LazyMessageExt / scan_messages) against the eager decoder."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.errors import MessageFormatError
from rocketq.client.model import LazyMessageExt, PullResult, PullStatus, scan_messages
from rocketq.client.pull_scan import uniform_columns
from rocketq.client.remoting.message import (
    CompressionType,
    StoredMessage,
    compress_body,
    encode_stored_message,
    iter_stored_messages,
    with_compression,
)
from rocketq.client.remoting.properties import MessageConst

HOSTS = [("10.0.0.1", 5000), ("::1", 10911), ("fe80::1:2", 7)]


def _record(
    i: int,
    *,
    body: bytes = b"body",
    topic: str = "T",
    born: int = 0,
    store: int = 0,
    compressed: CompressionType | None = None,
    tags: str | None = None,
) -> bytes:
    props = {MessageConst.UNIQ_KEY: f"ID{i}", MessageConst.KEYS: f"k{i} x"}
    if tags is not None:
        props[MessageConst.TAGS] = tags
    sys_flag = 0
    if compressed is not None:
        body = compress_body(body, compressed)
        sys_flag = with_compression(0, compressed)
    return encode_stored_message(
        topic=topic,
        queue_id=i % 4,
        born_timestamp=1000 + i,
        born_host=HOSTS[born],
        store_host=HOSTS[store],
        body=body,
        flag=i,
        queue_offset=100 + i,
        physical_offset=5000 + 300 * i,
        sys_flag=sys_flag,
        store_timestamp=2000 + i,
        reconsume_times=i % 3,
        properties=props,
    )


def _same(lazy: StoredMessage, eager: StoredMessage) -> None:
    assert isinstance(lazy, LazyMessageExt) and isinstance(lazy, StoredMessage)
    for f in dataclasses.fields(StoredMessage):
        if f.name != "properties":
            assert getattr(lazy, f.name) == getattr(eager, f.name), f.name
    assert (lazy.tags, lazy.keys, lazy.uniq_key, lazy.msg_id, lazy.offset_msg_id) == (
        eager.tags,
        eager.keys,
        eager.uniq_key,
        eager.msg_id,
        eager.offset_msg_id,
    )


def test_every_field_matches_the_eager_decoder_ipv4_ipv6_compressed() -> None:
    records = [
        _record(0),
        _record(1, born=1),
        _record(2, store=2),
        _record(3, born=2, store=1),
        _record(4, body=b"z" * 5000, compressed=CompressionType.ZLIB),
        _record(5, body=b"y" * 5000, compressed=CompressionType.LZ4, born=1),
        _record(6, topic="T" * 200),  # MAGIC_V2
    ]
    buf = b"".join(records)
    eager = list(iter_stored_messages(buf))
    lazy = scan_messages(buf, min_offset=3, max_offset=99)
    assert [m.queue_offset for m in lazy] == [m.queue_offset for m in eager]
    for lz, eg in zip(lazy, eager, strict=True):
        _same(lz, eg)
        assert lz.properties == {**eg.properties, MessageConst.MIN_OFFSET: "3", MessageConst.MAX_OFFSET: "99"}
    compressed = lazy[4]
    assert isinstance(compressed, LazyMessageExt)
    assert compressed.body == b"z" * 5000 and compressed.body_size < 5000


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(min_size=0, max_size=300),
            st.integers(0, 2),
            st.integers(0, 2),
            st.sampled_from(["T", "Topic_x", "%RETRY%g"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_round_trip_matches_eager(items: list[tuple[bytes, int, int, str]]) -> None:
    buf = b"".join(_record(i, body=b, born=bh, store=sh, topic=t) for i, (b, bh, sh, t) in enumerate(items))
    for lz, eg in zip(scan_messages(buf), iter_stored_messages(buf), strict=True):
        _same(lz, eg)
        assert lz.properties == eg.properties


def test_views_are_frozen_and_copy_to_eager_messages() -> None:
    msg = scan_messages(_record(1))[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.topic = "other"  # type: ignore[misc]
    moved = dataclasses.replace(msg, topic="Real")
    assert type(moved) is StoredMessage and moved.topic == "Real" and moved.body == msg.body
    for clone in (copy.copy(msg), pickle.loads(pickle.dumps(msg))):
        assert type(clone) is StoredMessage and clone.queue_offset == msg.queue_offset
        assert clone.properties == msg.properties
    assert "LazyMessageExt(" in repr(msg)


def test_bad_records_raise_at_scan_with_the_position() -> None:
    good = _record(0)
    with pytest.raises(MessageFormatError, match="position"):
        scan_messages(good + good[:50])
    broken = bytearray(good)
    broken[4:8] = b"\x00\x00\x00\x01"  # magic
    with pytest.raises(MessageFormatError, match="magic"):
        scan_messages(bytes(broken))
    broken = bytearray(good)
    broken[84:88] = (10_000).to_bytes(4, "big")  # body length past the record
    with pytest.raises(MessageFormatError, match="position 0"):
        scan_messages(bytes(broken))


def test_pull_result_filters_tags_and_process_queue_counts_body_sizes() -> None:
    buf = b"".join(_record(i, tags="A" if i % 2 else "B", body=b"x" * (i + 1)) for i in range(6))
    result = PullResult(PullStatus.FOUND, 106, 0, 106, body=buf, tags_filter=frozenset({"A"}))
    msgs = result.messages
    assert [m.queue_offset for m in msgs] == [101, 103, 105] and {m.tags for m in msgs} == {"A"}
    pq = ProcessQueue()
    pq.put_messages(msgs)
    assert pq.msg_size == 2 + 4 + 6 and pq.msg_count == 3
    assert pq.remove_messages(msgs[:2]) == 105 and pq.msg_size == 6
    assert pq.remove_messages(msgs[2:]) == 106 and pq.msg_size == 0


def test_lazy_msg_id_is_the_uniq_key_and_offset_msg_id_the_store_position() -> None:
    buf = _record(7) + encode_stored_message(
        topic="T",
        queue_id=0,
        born_timestamp=0,
        born_host=HOSTS[0],
        store_host=HOSTS[0],
        body=b"",
        physical_offset=9000,
        properties={MessageConst.TAGS: "A"},
    )
    with_uniq, without = scan_messages(buf)
    host = "0A00000100001388"  # 10.0.0.1:5000
    assert with_uniq.msg_id == "ID7" and with_uniq.offset_msg_id == host + f"{5000 + 300 * 7:016X}"
    assert without.msg_id == without.offset_msg_id == host + f"{9000:016X}"


# Same-size IPv4 uncompressed records take the bulk scan (header columns read at once); these
# pin it to the eager decoder, and a bad record among same-size ones to the walk's error.
def _same_size_records(count: int, body_len: int, **kw: object) -> list[bytes]:
    # ids of one width (ID1000..) keep the properties, hence the records, of one size
    return [_record(1000 + i, body=bytes([i % 256]) * body_len, **kw) for i in range(count)]  # type: ignore[arg-type]


@pytest.mark.parametrize(("count", "body_len"), [(2, 0), (3, 1), (50, 100), (7, 4096)])
def test_same_size_records_match_the_eager_decoder(count: int, body_len: int) -> None:
    records = _same_size_records(count, body_len)
    assert len(set(map(len, records))) == 1
    buf = b"".join(records)
    lazy = scan_messages(buf, min_offset=1, max_offset=9)
    eager = list(iter_stored_messages(buf))
    assert len(lazy) == len(eager) == count
    for a, b in zip(lazy, eager, strict=True):
        _same(a, b)
    assert lazy[-1].properties[MessageConst.MAX_OFFSET] == "9"


def test_same_size_records_with_ipv6_or_compression_still_decode() -> None:
    for kw in ({"born": 1}, {"store": 2}, {"compressed": CompressionType.ZLIB}):
        records = _same_size_records(4, 64, **kw)
        if len(set(map(len, records))) != 1:
            continue  # compression can vary the size: the walk's case, covered elsewhere
        buf = b"".join(records)
        for a, b in zip(scan_messages(buf), iter_stored_messages(buf), strict=True):
            _same(a, b)


@pytest.mark.parametrize(("field_pos", "value"), [(0, 10_000), (4, 12345), (84, 10_000), (84, -1)])
def test_a_bad_record_among_same_size_ones_raises_with_its_position(field_pos: int, value: int) -> None:
    records = _same_size_records(4, 32)
    size = len(records[0])
    buf = bytearray(b"".join(records))
    buf[2 * size + field_pos : 2 * size + field_pos + 4] = value.to_bytes(4, "big", signed=True)
    with pytest.raises(MessageFormatError, match=f"position {2 * size}"):
        scan_messages(bytes(buf))


# PullResult.columns(): the queue offsets and bodies of `messages` without a view each; same-size
# pulls take the bulk reader (uniform_columns), every other pull the views.
def _found(buf: bytes, tags: frozenset[str] | None = None) -> PullResult:
    return PullResult(PullStatus.FOUND, 0, 0, 0, body=buf, tags_filter=tags)


@pytest.mark.parametrize(("count", "body_len"), [(2, 0), (3, 1), (50, 100), (7, 4096)])
def test_columns_of_same_size_records_are_read_in_bulk_and_match_the_views(count: int, body_len: int) -> None:
    buf = b"".join(_same_size_records(count, body_len))
    assert uniform_columns(buf) is not None  # the bulk path, not the views
    offsets, bodies = _found(buf).columns()
    views = _found(buf).messages
    assert offsets == [m.queue_offset for m in views] == [1100 + i for i in range(count)]
    assert bodies == [m.body for m in views] == [bytes([i % 256]) * body_len for i in range(count)]
    assert all(type(b) is bytes for b in bodies)


def test_columns_of_other_pulls_come_from_the_views() -> None:
    mixed = b"".join(_record(i, body=b"b" * i, born=i % 2) for i in range(5))
    compressed = b"".join(_same_size_records(3, 300, compressed=CompressionType.ZLIB))
    tagged = b"".join(_same_size_records(4, 8, tags="A")) + b"".join(
        _record(2000 + i, body=b"z" * 8, tags="B") for i in range(2)
    )
    for buf, tags in ((mixed, None), (compressed, None), (tagged, frozenset({"B"}))):
        result = _found(buf, tags)
        views = _found(buf, tags).messages
        assert result.columns() == ([m.queue_offset for m in views], [m.body for m in views])
    assert _found(tagged, frozenset({"B"})).columns()[1] == [b"z" * 8] * 2
    assert _found(compressed).columns()[1] == [bytes([i]) * 300 for i in range(3)]
    assert PullResult(PullStatus.NO_NEW_MSG, 0, 0, 0).columns() == ([], [])


def test_columns_of_a_bad_pull_raise_like_the_views() -> None:
    records = _same_size_records(4, 32)
    size = len(records[0])
    buf = bytearray(b"".join(records))
    buf[2 * size + 4 : 2 * size + 8] = (12345).to_bytes(4, "big")  # a bad magic code
    assert uniform_columns(bytes(buf)) is None
    with pytest.raises(MessageFormatError, match=f"position {2 * size}"):
        _found(bytes(buf)).columns()
