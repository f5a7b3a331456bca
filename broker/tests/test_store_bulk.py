"""Bulk append path: column batches, the numpy record builder, the property scanner, vectorised dispatch.

Every bulk component is checked against the scalar reference it replaces: records against
``encode_stored_message``, tags codes and index keys against ``decode_properties``, IndexFile bulk
inserts against repeated ``put_key``, and a whole store fed through the bulk path against the same
store fed through the scalar path and through record-parsing dispatch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rocketq.broker.store import commit_log as commit_log_module
from rocketq.broker.store import record_batch
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.index_file import IndexFile
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.props_scan import (
    PropsColumn,
    index_key_hashes,
    join_properties,
    scan_joined,
    scan_properties,
    scan_uniform,
    segment_hashes,
)
from rocketq.broker.store.record_batch import (
    MessageBatchToStore,
    MessageToStore,
    PreparedBatch,
    prepare_batch,
)
from rocketq.broker.store.status import PutMessageStatus
from rocketq.client.remoting.javahash import index_key_hash, java_string_hash, tags_hash_code
from rocketq.client.remoting.message import decode_stored_message, encode_stored_message
from rocketq.client.remoting.properties import decode_properties, encode_properties, split_keys

HOSTS = [("127.0.0.1", 10911), ("10.1.2.3", 65535), ("::1", 8080), ("fe80::1:2:3:4", 1)]
_text = st.text(alphabet=st.sampled_from("abcXYZ019 _-é中\U0001f600"), max_size=12)
_props = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "TAGSX", "KEY"]), _text, max_size=5
)


def raw_properties(draw: Callable[[st.SearchStrategy[Any]], Any]) -> bytes:
    """Encoded properties, sometimes hand-made with duplicates, empty keys/values and odd segments."""
    result: bytes
    if draw(st.booleans()):
        result = encode_properties(draw(_props)).encode()
        return result
    segments: list[str] = draw(
        st.lists(
            st.one_of(
                st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "", "x"]), _text).map(
                    lambda kv: f"{kv[0]}\x01{kv[1]}"
                ),
                _text,
            ),
            max_size=6,
        )
    )
    tail: str = draw(st.sampled_from(["", "\x02"]))
    return ("\x02".join(segments) + tail).encode()


@st.composite
def batches(draw: st.DrawFn, min_size: int = 1, max_size: int = 24) -> MessageBatchToStore:
    n = draw(st.integers(min_size, max_size))
    long_topic = draw(st.booleans())
    topic = (
        "T" * draw(st.integers(128, 200))
        if long_topic
        else draw(st.sampled_from(["TopicA", "%RETRY%g", "a|b-c_d"]))
    )

    def column(strategy: st.SearchStrategy[int]) -> int | list[int]:
        return draw(strategy) if draw(st.booleans()) else draw(st.lists(strategy, min_size=n, max_size=n))

    return MessageBatchToStore(
        topic=topic,
        queue_id=draw(st.integers(0, 2**31 - 1)),
        born_host=draw(st.sampled_from(HOSTS)),
        store_host=draw(st.sampled_from(HOSTS)),
        bodies=draw(st.lists(st.binary(max_size=300), min_size=n, max_size=n)),
        properties=[raw_properties(draw) for _ in range(n)],
        born_timestamps=column(st.integers(0, 2**63 - 1)),
        flags=column(st.integers(-(2**31), 2**31 - 1)),
        sys_flags=column(st.sampled_from([0, 1, 2, 4, 8, 12, 0x10, 0x31, 0x103])),
        reconsume_times=column(st.integers(0, 16)),
        prepared_transaction_offsets=column(st.integers(0, 2**40)),
    )


def config(root: Path, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=100,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        max_topic_length=1000,
        clean_resource_interval_ms=3_600_000,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def render(prep: PreparedBatch, first_qo: int, base: int, now: int) -> bytes:
    qos = list(range(first_qo, first_qo + prep.n))
    phys = [base + int(s) for s in prep.starts]
    return bytes(
        prep.render(
            np.array(qos) if prep.hdr is not None else qos,
            np.array(phys) if prep.hdr is not None else phys,
            now,
        )
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches(), first_qo=st.integers(0, 2**40), base=st.integers(0, 2**50), now=st.integers(0, 2**45))
def test_bulk_records_equal_scalar_encoder(
    tmp_path_factory: pytest.TempPathFactory, batch: MessageBatchToStore, first_qo: int, base: int, now: int
) -> None:
    cfg = config(Path("/nonexistent"))
    bulk = record_batch._prepare_bulk(batch, cfg, len(batch))
    small = record_batch._prepare_small(batch, cfg, len(batch))
    assert isinstance(bulk, PreparedBatch) and isinstance(small, PreparedBatch)
    got = render(bulk, first_qo, base, now)
    assert got == render(small, first_qo, base, now)
    pos = 0
    for i in range(len(batch)):  # and each record is what encode_stored_message makes of it
        rec = encode_stored_message(
            topic=batch.topic,
            queue_id=batch.queue_id,
            flag=batch.column("flags", i),
            body=bytes(batch.bodies[i]),
            properties=bytes(batch.properties[i]),
            sys_flag=batch.column("sys_flags", i),
            born_timestamp=batch.column("born_timestamps", i),
            born_host=batch.born_host,
            store_host=batch.store_host,
            reconsume_times=batch.column("reconsume_times", i),
            prepared_transaction_offset=batch.column("prepared_transaction_offsets", i),
            queue_offset=first_qo + i,
            physical_offset=base + pos,
            store_timestamp=now,
        )
        assert got[pos : pos + len(rec)] == rec
        pos += len(rec)
    assert pos == len(got) == bulk.total
    assert list(bulk.in_cq) == list(small.in_cq)


def test_bulk_rejections_match_scalar_rules(tmp_path: Path) -> None:
    cfg = config(tmp_path, max_properties_size_bytes=100)
    ok = MessageBatchToStore(
        topic="T",
        queue_id=0,
        born_host=HOSTS[0],
        store_host=HOSTS[0],
        bodies=[b"x"] * 8,
        properties=[b""] * 8,
        born_timestamps=1,
    )

    def status(**changes: object) -> object:
        fields = {f: getattr(ok, f) for f in ok.__dataclass_fields__}
        fields.update(changes)
        return prepare_batch(MessageBatchToStore(**fields), cfg, lambda t: t != "bad")

    assert isinstance(status(), PreparedBatch)
    assert status(topic="bad") is PutMessageStatus.MESSAGE_ILLEGAL
    assert status(queue_id=-1) is PutMessageStatus.MESSAGE_ILLEGAL
    assert status(properties=[b"a\x01b\x02"] * 7 + [b"x" * 101]) is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert (
        status(bodies=[b"x" * (16 * 1024 + 1)] + [b""] * 7, properties=[b""] * 7 + [b"x" * 101])
        is PutMessageStatus.MESSAGE_ILLEGAL
    )  # the first one decides
    assert status(flags=[2**31] + [0] * 7) is PutMessageStatus.MESSAGE_ILLEGAL
    assert status(born_timestamps=2**63) is PutMessageStatus.MESSAGE_ILLEGAL
    assert status(properties=[b""] * 7) is PutMessageStatus.MESSAGE_ILLEGAL  # columns of different lengths
    assert status(bodies=[], properties=[]) is PutMessageStatus.MESSAGE_ILLEGAL


def reference_dispatch_data(props: list[bytes], topic: str) -> tuple[list[int], list[tuple[int, int]]]:
    tags, keys = [], []
    for i, p in enumerate(props):
        pmap = decode_properties(p)
        tags.append(tags_hash_code(pmap.get("TAGS")))
        record_keys = split_keys(pmap.get("KEYS"))
        if pmap.get("UNIQ_KEY"):
            record_keys.append(pmap["UNIQ_KEY"])
        keys += [(i, index_key_hash(f"{topic}#{k}")) for k in record_keys]
    return tags, keys


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 30), topic=st.sampled_from(["TopicA", "T" * 130, "x"]))
def test_property_scan_matches_decode_properties(data: st.DataObject, n: int, topic: str) -> None:
    props = [raw_properties(data.draw) for _ in range(n)]
    tags, key_hashes, key_lens, key_recs = scan_properties(
        props, np.array([len(p) for p in props], dtype=np.int64)
    )
    want_tags, want_keys = reference_dispatch_data(props, topic)
    assert tags.tolist() == want_tags
    prefix = np.full(len(key_hashes), java_string_hash(topic + "#") & 0xFFFFFFFF, dtype=np.int64)
    full = index_key_hashes(prefix, key_hashes, key_lens) if len(key_hashes) else key_hashes
    assert list(zip(key_recs.tolist(), full.tolist(), strict=True)) == want_keys


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(1, 30), uniform=st.booleans(), gap=st.integers(0, 40))
def test_property_props_column_joins_like_slices(
    data: st.DataObject, n: int, uniform: bool, gap: int
) -> None:
    """A PropsColumn over a buffer (the records' properties between other bytes, as in replicated
    CommitLog bytes) joins, indexes and scans exactly like the list of its slices: the strided
    copy of equal-length runs and the per-record slices of the others."""
    first = raw_properties(data.draw)
    props = [first if uniform else raw_properties(data.draw) for _ in range(n)]
    filler = data.draw(st.binary(min_size=gap, max_size=gap))
    buf, starts = bytearray(filler), []
    for p in props:
        starts.append(len(buf))
        buf += p + filler  # a fixed stride when uniform
    lens = np.array([len(p) for p in props], dtype=np.int64)
    column = PropsColumn(bytes(buf), np.array(starts, dtype=np.int64), lens)
    assert column.joined() == b"\x02".join(props)
    assert list(column) == props and column[1:3] == props[1:3]
    assert join_properties([column, props[:2]]) == b"\x02".join([*props, *props[:2]])
    for got, want in zip(scan_properties(column, lens), scan_properties(props, lens), strict=True):
        assert got.tolist() == want.tolist()


def _column(rows: list[bytes], gap: int) -> PropsColumn:
    """A column over ``rows`` laid out at a fixed stride, ``gap`` filler bytes between them."""
    buf, starts = bytearray(b"\xff" * gap), []
    for r in rows:
        starts.append(len(buf))
        buf += r + b"\xfe" * gap
    return PropsColumn(bytes(buf), np.array(starts, dtype=np.int64), np.array([len(r) for r in rows]))


#: bytes a row may differ by: separators, a space, ASCII, non-ASCII (UTF-8 lead and follow bytes)
_MUTATIONS = st.sampled_from([0x01, 0x02, 0x20, 0xC3, 0xA9, 0x00, *b"aZ7" * 4])


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 25),
    gap=st.integers(0, 9),
    index_enabled=st.booleans(),
)
def test_property_uniform_scan_matches_joined_scan(
    data: st.DataObject, n: int, gap: int, index_enabled: bool
) -> None:
    """Rows of one layout that differ in a few bytes anywhere (inside values, keys or separators,
    by separators, spaces or non-ASCII bytes): the uniform scan either declines or gives exactly
    what the general scan gives."""
    template = raw_properties(data.draw)
    # mostly inside values (where the uniform scan applies), sometimes anywhere
    inside = [p for p in range(len(template)) if b"\x01" in template[:p].rsplit(b"\x02", 1)[-1]]
    anywhere = st.integers(0, len(template) - 1) if template else st.nothing()
    where = st.one_of(st.sampled_from(inside), st.sampled_from(inside), anywhere) if inside else anywhere
    rows = []
    for _ in range(n):
        row = bytearray(template)
        if row:
            for _ in range(data.draw(st.integers(0, 2))):
                row[data.draw(where)] = data.draw(_MUTATIONS)
        rows.append(bytes(row))
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    got = scan_uniform(_column(rows, gap), index_enabled)
    want = scan_joined(b"\x02".join(rows), lens, index_enabled)
    event("uniform scan: " + ("declined" if got is None else "taken"))
    if got is not None:
        for g, w in zip(got, want, strict=True):
            assert g.tolist() == w.tolist()


def test_uniform_scan_takes_a_producers_batch() -> None:
    """The batch of one producer (a TAGS, per-message KEYS of one length, a UNIQ_KEY counting up,
    other properties) is scanned by the uniform path, with the results of decoding each record."""
    rows = [
        encode_properties(
            {"TAGS": "TagA", "KEYS": f"order-{i:04d} shared", "WAIT": "true", "UNIQ_KEY": f"C0A8{i:028X}"}
        ).encode()
        for i in range(300)
    ]
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    got = scan_uniform(_column(rows, 17))
    assert got is not None
    tags, key_hashes, key_lens, key_recs = got
    want_tags, want_keys = reference_dispatch_data(rows, "TopicA")
    assert tags.tolist() == want_tags
    prefix = np.full(len(key_hashes), java_string_hash("TopicA#") & 0xFFFFFFFF, dtype=np.int64)
    full = index_key_hashes(prefix, key_hashes, key_lens)
    assert list(zip(key_recs.tolist(), full.tolist(), strict=True)) == want_keys
    for g, w in zip(got, scan_joined(b"\x02".join(rows), lens), strict=True):
        assert g.tolist() == w.tolist()
    # rows that are not one layout, or differ in a key, are left to the general scan
    assert scan_uniform(_column([rows[0], rows[1] + b"x"], 3)) is None
    assert scan_uniform(_column([rows[0], rows[1].replace(b"TAGS", b"TAGX")], 3)) is None


@given(
    st.lists(
        st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=140), min_size=1, max_size=60
    )
)
def test_segment_hashes_match_java(keys: list[str]) -> None:
    data = "".join(keys).encode()
    lens = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.cumsum(lens) - lens
    got = segment_hashes(np.frombuffer(data, dtype=np.uint8), starts, lens)
    assert got.tolist() == [java_string_hash(k) & 0xFFFFFFFF for k in keys]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.lists(st.integers(0, 2**31 - 1), max_size=20),
    hashes=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=60),
    slots=st.integers(1, 9),
    stamps=st.lists(st.integers(0, 10**7), min_size=60, max_size=60),
    stale=st.integers(-3, 90),
)
def test_index_bulk_insert_equals_sequential_put_key(
    tmp_path: Path, before: list[int], hashes: list[int], slots: int, stamps: list[int], stale: int
) -> None:
    paths = [tmp_path / f"{next(_counter)}" for _ in range(2)]
    files = [IndexFile(str(p), slots, 50) for p in paths]
    try:
        for f in files:  # a slot holding a stale or out-of-range entry number must be treated alike
            np.frombuffer(f.mf.buffer, dtype=">i4", count=slots, offset=40)[0] = stale
            for i, h in enumerate(before):
                f.put_hashes(np.array([h]), np.array([i]), np.array([1000 + i]))
        seq, bulk = files
        n = 0
        for i, h in enumerate(hashes):  # put_key hashes the key itself: feed it keys with known hashes
            if seq.is_full:
                break
            seq.put_hashes(np.array([h]), np.array([100 + i]), np.array([stamps[i]]))
            n += 1
        assert (
            bulk.put_hashes(
                np.array(hashes), np.arange(100, 100 + len(hashes)), np.array(stamps[: len(hashes)])
            )
            == n
        )
        assert bytes(seq.mf.buffer) == bytes(bulk.mf.buffer)
        assert (seq.index_count, seq.hash_slot_count, seq.end_timestamp) == (
            bulk.index_count,
            bulk.hash_slot_count,
            bulk.end_timestamp,
        )
    finally:
        for f in files:
            f.close()


_counter = itertools.count()


def test_single_entry_put_hashes_equals_put_key(tmp_path: Path) -> None:
    a, b = IndexFile(str(tmp_path / "1"), 5, 30), IndexFile(str(tmp_path / "2"), 5, 30)
    for i, key in enumerate(["T#k1", "T#k2", "T#k1", "T#polygenelubricants", "T#k3"] * 5):
        a.put_key(key, 10 * i, 5_000 + 1500 * i)
        b.put_hashes(np.array([index_key_hash(key)]), np.array([10 * i]), np.array([5_000 + 1500 * i]))
    assert bytes(a.mf.buffer) == bytes(b.mf.buffer)
    a.close()
    b.close()


def store_files(root: Path) -> dict[str, bytes]:
    """Every data file of a store; index files (named by creation time) by their rank."""
    out = {
        str(p.relative_to(root)): p.read_bytes()
        for d in ("commitlog", "consumequeue")
        for p in sorted((root / d).rglob("*"))
        if p.is_file()
    }
    out.update({f"index/{i}": p.read_bytes() for i, p in enumerate(sorted((root / "index").glob("*")))})
    return out


def fill(
    root: Path,
    batches_: list[MessageBatchToStore],
    monkeypatch: pytest.MonkeyPatch,
    *,
    small: bool,
    hints: bool,
) -> dict[str, bytes]:
    clock = itertools.count(1_700_000_000_000, 1234)

    class FakeTime:  # only the CommitLog's store timestamps are made deterministic
        @staticmethod
        def time() -> float:
            return next(clock) / 1000

    monkeypatch.setattr(commit_log_module, "time", FakeTime)
    monkeypatch.setattr(record_batch, "SMALL_BATCH", 10**9 if small else 6)
    store = MessageStore(config(root, max_hash_slot_num=16, max_index_num=200))
    store.commit_log.hints_enabled = hints
    with store:
        for b in batches_:
            assert store.put_batch(b).is_ok
        assert store.wait_dispatched()
    monkeypatch.undo()
    return store_files(root)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_store_bulk_path_equals_scalar_and_parsing_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    """Whole stores: bulk encoder + bulk dispatch vs scalar encoder + scalar dispatch vs record parsing.

    Small segments make batches roll over to new CommitLog, ConsumeQueue and index files.
    """
    topic = data.draw(st.sampled_from(["TopicA", "T" * 140, "RMQ_SYS_TRANS_HALF_TOPIC"]))
    host = data.draw(st.sampled_from(HOSTS))
    born = data.draw(st.sampled_from(HOSTS))
    sizes = data.draw(st.lists(st.integers(1, 30), min_size=3, max_size=12))
    batches_ = []
    for k, n in enumerate(sizes):
        props = [
            encode_properties(
                {"TAGS": f"t{(k + i) % 3}", "KEYS": f"a{k}-{i} b{i}", "UNIQ_KEY": f"U{k:04d}{i:04d}"}
            ).encode()
            for i in range(n)
        ]
        if data.draw(st.booleans()):
            props = [raw_properties(data.draw) for _ in range(n)]
        batches_.append(
            MessageBatchToStore(
                topic=topic,
                queue_id=k % 3,
                born_host=born,
                store_host=host,
                bodies=[bytes([k, i]) * data.draw(st.integers(0, 60)) for i in range(n)],
                properties=props,
                born_timestamps=k,
                flags=0 if data.draw(st.booleans()) else list(range(n)),
                sys_flags=data.draw(st.sampled_from([0, 8]))
                if data.draw(st.booleans())
                else [(4 if i % 5 == 1 else 0) for i in range(n)],
            )
        )
    for k in range(8):  # 10-13 KB each: the CommitLog (64 KiB segments) rolls over at least once
        batches_.insert(
            data.draw(st.integers(0, len(batches_))),
            MessageBatchToStore(
                topic=topic,
                queue_id=k % 2,
                born_host=born,
                store_host=host,
                bodies=[bytes([k]) * 400] * 20,
                properties=[f"KEYS\x01big{k}-{i}\x02".encode() for i in range(20)],
                born_timestamps=7,
            ),
        )
    run = next(_counter)
    bulk = fill(tmp_path / f"bulk{run}", batches_, monkeypatch, small=False, hints=True)
    assert bulk == fill(tmp_path / f"small{run}", batches_, monkeypatch, small=True, hints=True)
    assert bulk == fill(tmp_path / f"parsed{run}", batches_, monkeypatch, small=False, hints=False)
    assert sum(1 for name in bulk if name.startswith("commitlog/")) >= 2


def test_put_batch_round_trip_and_batch_msg_ids(tmp_path: Path) -> None:
    store = MessageStore(config(tmp_path))
    with store:
        n = 20
        batch = MessageBatchToStore(
            topic="TopicA",
            queue_id=1,
            born_host=HOSTS[2],
            store_host=HOSTS[0],
            bodies=[b"m%d" % i for i in range(n)],
            properties=[encode_properties({"TAGS": "TagA", "KEYS": f"k{i}"}).encode() for i in range(n)],
            born_timestamps=list(range(n)),
            tags_codes=None,
        )
        r = store.put_batch(batch)
        assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
        ids = r.append_result.msg_id.split(",")
        assert len(ids) == n and r.append_result.msg_num == n
        assert store.wait_dispatched()
        g = store.get_message("g", "TopicA", 1, 0, 64, 1 << 20)
        recs = [decode_stored_message(b, check_crc=True) for b in g.buffers]
        assert [m.body for m in recs] == [b"m%d" % i for i in range(n)]
        assert [m.offset_msg_id for m in recs] == ids
        assert [m.born_host for m in recs] == [HOSTS[2]] * n
        assert len(store.query_message("TopicA", "k7", 32, 0, 1 << 62).buffers) == 1


def test_put_messages_adapter_keeps_per_message_semantics(tmp_path: Path) -> None:
    store = MessageStore(config(tmp_path))
    with store:
        msgs = [
            MessageToStore(
                topic="TopicA",
                queue_id=0,
                body=b"x",
                properties={"KEYS": "a b", "TAGS": "t"},
                born_timestamp=1,
                born_host=HOSTS[0],
                store_host=HOSTS[0],
            )
            for _ in range(10)
        ]
        assert store.put_messages(msgs).is_ok
        mixed_hosts = [
            msgs[0],
            MessageToStore(
                topic="TopicA",
                queue_id=0,
                body=b"y",
                properties="",
                born_timestamp=1,
                born_host=HOSTS[1],
                store_host=HOSTS[0],
            ),
        ]
        assert store.put_messages(mixed_hosts).status is PutMessageStatus.MESSAGE_ILLEGAL
        bad = MessageToStore(
            topic="TopicA",
            queue_id=0,
            body=b"x",
            properties={"K": "a\x01"},
            born_timestamp=1,
            born_host=HOSTS[0],
            store_host=HOSTS[0],
        )
        assert store.put_message(bad).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.wait_dispatched()
        assert len(store.query_message("TopicA", "b", 32, 0, 1 << 62).buffers) == 10
