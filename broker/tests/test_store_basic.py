"""Message store: appends, rollover and the blank record, validation, pulls, index queries, retention."""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.errors import StoreLockedError
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus, PutMessageStatus
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.message import BLANK_MAGIC, SysFlag, decode_stored_message

HOST = ("127.0.0.1", 10911)


def small_config(root: Path, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=100,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        flush_interval_commit_log_ms=20,
        flush_interval_consume_queue_ms=20,
        clean_resource_interval_ms=3_600_000,
    )
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def msg(topic: str = "TopicA", queue_id: int = 0, body: bytes = b"hello", **props: str) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=props,
        born_timestamp=int(time.time() * 1000),
        born_host=("10.0.0.2", 5555),
        store_host=HOST,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(small_config(tmp_path))
    s.start()
    yield s
    s.shutdown()


def test_put_and_get_round_trip(store: MessageStore) -> None:
    r = store.put_message(msg(body=b"abc", TAGS="TagA", KEYS="k1 k2"))
    assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
    assert r.append_result.wrote_offset == 0 and r.append_result.queue_offset == 0
    assert r.append_result.msg_id == "7F00000100002A9F0000000000000000"
    assert store.wait_dispatched()
    g = store.get_message("g", "TopicA", 0, 0, 32, 1 << 20)
    assert g.status is GetMessageStatus.FOUND and g.msg_count == 1 and g.next_begin_offset == 1
    assert isinstance(g.buffers[0], memoryview)
    m = decode_stored_message(g.buffers[0], check_crc=True)
    assert (m.body, m.topic, m.queue_offset, m.physical_offset) == (b"abc", "TopicA", 0, 0)
    assert m.properties["TAGS"] == "TagA" and m.store_timestamp > 0
    assert store.look_message_by_offset(0) == bytes(g.buffers[0])
    assert store.get_max_offset_in_queue("TopicA", 0) == 1


def test_rollover_writes_blank_record(store: MessageStore) -> None:
    body = b"x" * 3000
    offsets = [store.put_message(msg(body=body)).append_result.wrote_offset for _ in range(40)]  # type: ignore[union-attr]
    size = 64 * 1024
    assert any(o >= size for o in offsets)
    first_in_second = min(o for o in offsets if o >= size)
    assert first_in_second == size
    last_in_first = max(o for o in offsets if o < size)
    rec_size = offsets[1] - offsets[0]
    blank_pos = last_in_first + rec_size
    raw = (Path(store.config.commit_log_dir) / f"{0:020d}").read_bytes()
    total, magic = struct.unpack_from(">iI", raw, blank_pos)
    assert magic == BLANK_MAGIC and total == size - blank_pos
    assert store.wait_dispatched()
    g = store.get_message("g", "TopicA", 0, 0, 100, 1 << 30)
    assert g.msg_count == 40 and all(len(b) == rec_size for b in g.buffers)
    assert [decode_stored_message(b).physical_offset for b in g.buffers] == offsets


def test_consume_queue_rollover_and_queue_offsets(store: MessageStore) -> None:
    for i in range(250):
        assert store.put_message(msg(queue_id=i % 2, body=str(i).encode())).is_ok
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TopicA", 0) == 125
    cq_dir = Path(store.config.consume_queue_dir) / "TopicA" / "0"
    assert sorted(os.listdir(cq_dir)) == [f"{0:020d}", f"{2000:020d}"]
    bodies = []
    offset = 0
    while True:
        g = store.get_message("g", "TopicA", 0, offset, 32, 1 << 20)
        if g.status is not GetMessageStatus.FOUND:
            assert g.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            break
        bodies += [decode_stored_message(b).body for b in g.buffers]
        offset = g.next_begin_offset
    assert bodies == [str(i).encode() for i in range(0, 250, 2)]


def test_batch_put(store: MessageStore) -> None:
    store.put_message(msg())
    r = store.put_messages([msg(body=bytes([i]) * 10, KEYS=f"b{i}") for i in range(5)])
    assert r.status is PutMessageStatus.PUT_OK and r.append_result is not None
    assert r.append_result.queue_offset == 1 and r.append_result.msg_num == 5
    ids = r.append_result.msg_id.split(",")
    assert len(ids) == 5 and len(set(ids)) == 5
    assert store.wait_dispatched()
    g = store.get_message("g", "TopicA", 0, 1, 32, 1 << 20)
    got = [decode_stored_message(b) for b in g.buffers]
    assert [m.queue_offset for m in got] == [1, 2, 3, 4, 5]
    assert [f"{m.physical_offset:016X}" for m in got] == [i[-16:] for i in ids]
    mixed = store.put_messages([msg(queue_id=0), msg(queue_id=1)])
    assert mixed.status is PutMessageStatus.MESSAGE_ILLEGAL


@pytest.mark.parametrize(
    ("topic", "body", "props", "status"),
    [
        ("bad topic", b"x", {}, PutMessageStatus.MESSAGE_ILLEGAL),
        ("", b"x", {}, PutMessageStatus.MESSAGE_ILLEGAL),
        ("T" * 128, b"x", {}, PutMessageStatus.MESSAGE_ILLEGAL),
        ("T" * 127, b"x", {}, PutMessageStatus.PUT_OK),
        ("%RETRY%g|x_y-z", b"x", {}, PutMessageStatus.PUT_OK),
        ("TopicA", b"x" * (16 * 1024 + 1), {}, PutMessageStatus.MESSAGE_ILLEGAL),
        ("TopicA", b"x", {"K": "v" * 32767}, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
    ],
)
def test_validation(
    store: MessageStore, topic: str, body: bytes, props: dict[str, str], status: PutMessageStatus
) -> None:
    m = MessageToStore(
        topic=topic,
        queue_id=0,
        body=body,
        properties=props,
        born_timestamp=1,
        born_host=HOST,
        store_host=HOST,
    )
    assert store.put_message(m).status is status


def test_transaction_prepared_records_skip_consume_queue(store: MessageStore) -> None:
    half = MessageToStore(
        topic="TopicA",
        queue_id=0,
        body=b"half",
        properties={},
        sys_flag=int(SysFlag.TRANSACTION_PREPARED),
        born_timestamp=1,
        born_host=HOST,
        store_host=HOST,
    )
    r = store.put_message(half)
    assert r.is_ok and r.append_result is not None and r.append_result.queue_offset == 0
    store.put_message(msg(body=b"normal"))
    assert store.wait_dispatched()
    g = store.get_message("g", "TopicA", 0, 0, 32, 1 << 20)
    assert [decode_stored_message(b).body for b in g.buffers] == [b"normal"]


def test_ipv6_hosts(store: MessageStore) -> None:
    m = MessageToStore(
        topic="TopicA",
        queue_id=0,
        body=b"v6",
        properties={},
        born_timestamp=5,
        born_host=("::1", 1),
        store_host=("fe80::1", 10911),
    )
    r = store.put_message(m)
    assert r.is_ok and r.append_result is not None and len(r.append_result.msg_id) == 56
    assert store.wait_dispatched()
    rec = decode_stored_message(store.get_message("g", "TopicA", 0, 0, 1, 1 << 20).buffers[0], check_crc=True)
    assert rec.store_host == ("fe80::1", 10911) and rec.store_timestamp > 5 and rec.queue_offset == 0


def test_get_message_statuses_and_filters(store: MessageStore) -> None:
    g = store.get_message("g", "Nope", 0, 5, 32, 1 << 20)
    assert g.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE and g.next_begin_offset == 0
    for i in range(10):
        store.put_message(msg(body=b"%d" % i, TAGS="TagA" if i % 2 else "TagB"))
    assert store.wait_dispatched()
    assert store.get_message("g", "TopicA", 0, 10, 32, 1 << 20).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "TopicA", 0, 11, 32, 1 << 20)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 0
    tag_a = frozenset({java_string_hash("TagA")})
    g = store.get_message("g", "TopicA", 0, 0, 32, 1 << 20, tag_a)
    assert [decode_stored_message(b).body for b in g.buffers] == [b"1", b"3", b"5", b"7", b"9"]
    assert g.next_begin_offset == 10 and g.queue_offsets == [1, 3, 5, 7, 9]
    g = store.get_message("g", "TopicA", 0, 0, 3, 1 << 20, tag_a)
    assert g.msg_count == 3 and g.next_begin_offset == 7
    none = store.get_message("g", "TopicA", 0, 0, 32, 1 << 20, frozenset({42}))
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10
    one_size = len(g.buffers[0])
    g = store.get_message("g", "TopicA", 0, 0, 32, one_size * 2 + 1)
    assert g.msg_count == 2 and g.next_begin_offset == 2
    g = store.get_message("g", "TopicA", 0, 0, 32, 1)  # the first message always fits
    assert g.msg_count == 1


def test_offset_by_time_and_store_time(store: MessageStore) -> None:
    stamps = []
    for i in range(6):
        r = store.put_message(msg(body=b"%d" % i))
        assert r.append_result is not None
        stamps.append(r.append_result.store_timestamp)
        time.sleep(0.003)
    assert store.wait_dispatched()
    assert store.get_offset_in_queue_by_time("TopicA", 0, stamps[3]) == 3
    assert store.get_offset_in_queue_by_time("TopicA", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("TopicA", 0, stamps[-1] + 10_000) == 5
    assert store.get_store_time("TopicA", 0, 2) == stamps[2]
    assert store.get_earliest_message_time("TopicA", 0) == stamps[0]


def test_query_by_key_and_uniq_key(tmp_path: Path) -> None:
    s = MessageStore(small_config(tmp_path, max_hash_slot_num=4, max_index_num=20))
    s.start()
    try:
        for i in range(30):
            s.put_message(msg(body=b"%d" % i, KEYS=f"order{i % 3} k{i}", UNIQ_KEY=f"U{i:04d}"))
        assert s.wait_dispatched()
        assert len(s.index_service.files) >= 3  # type: ignore[union-attr]
        q = s.query_message("TopicA", "order1", 32, 0, 1 << 62)
        assert sorted(decode_stored_message(b).body for b in q.buffers) == sorted(
            b"%d" % i for i in range(1, 30, 3)
        )
        assert q.index_last_update_phy_offset == s.max_phy_offset - len(q.buffers[0])
        q = s.query_message("TopicA", "U0017", 32, 0, 1 << 62)
        assert [decode_stored_message(b).body for b in q.buffers] == [b"17"]
        assert len(s.query_message("TopicA", "order2", 4, 0, 1 << 62).buffers) == 4
        assert s.query_message("TopicA", "order2", 32, 0, 1000).buffers == []
        assert s.query_message("Other", "order2", 32, 0, 1 << 62).buffers == []
    finally:
        s.shutdown()


def test_arrival_listener(store: MessageStore) -> None:
    seen: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda t, q, m: seen.append((t, q, m)))
    store.put_message(msg(queue_id=3))
    store.put_messages([msg(queue_id=3)] * 2)
    assert store.wait_dispatched()
    deadline = time.time() + 2
    while (not seen or seen[-1][2] != 3) and time.time() < deadline:
        time.sleep(0.005)
    assert seen[-1] == ("TopicA", 3, 3)


def test_lock_file_rejects_second_store(store: MessageStore) -> None:
    other = MessageStore(store.config)
    with pytest.raises(StoreLockedError):
        other.start()


def test_sync_flush_and_restart(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with MessageStore(cfg) as s:
        for i in range(20):
            r = s.put_message(msg(body=b"%d" % i, KEYS=f"k{i}"))
            assert r.status is PutMessageStatus.PUT_OK
        assert s.commit_log.flushed_where == s.max_phy_offset
        end = s.max_phy_offset
    assert not (tmp_path / "abort").exists()
    with MessageStore(cfg) as s:
        assert s.last_exit_ok and s.max_phy_offset == end
        assert s.get_max_offset_in_queue("TopicA", 0) == 20
        r = s.put_message(msg(body=b"next"))
        assert r.append_result is not None and r.append_result.queue_offset == 20
        assert len(s.query_message("TopicA", "k7", 32, 0, 1 << 62).buffers) == 1


def test_sync_flush_timeout(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=50)
    with MessageStore(cfg) as s:
        gc = s._group_commit
        assert gc is not None
        gc.shutdown()  # no one flushes any more
        r = s.put_message(msg())
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and r.is_ok
        r = s.put_message(msg(WAIT="false"))
        assert r.status is PutMessageStatus.PUT_OK


def test_retention_deletes_commit_log_and_derived_data(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, file_reserved_time_hours=0.0)
    with MessageStore(cfg) as s:
        for i in range(150):
            s.put_message(msg(body=b"y" * 1500, KEYS=f"k{i}"))
        assert s.wait_dispatched()
        segments = len(s.commit_log.mfq.files)
        assert segments >= 3
        deleted = s.clean_expired_files()
        assert deleted == segments - 1 and s.min_phy_offset == s.commit_log.mfq.files[0].file_from_offset
        lo = s.get_min_offset_in_queue("TopicA", 0)
        assert lo > 0
        g = s.get_message("g", "TopicA", 0, 0, 32, 1 << 20)
        assert g.status is GetMessageStatus.OFFSET_TOO_SMALL and g.next_begin_offset == lo
        g = s.get_message("g", "TopicA", 0, lo, 32, 1 << 20)
        assert g.status is GetMessageStatus.FOUND and decode_stored_message(g.buffers[0]).queue_offset == lo
        assert s.query_message("TopicA", "k0", 32, 0, 1 << 62).buffers == []
    with MessageStore(cfg) as s:
        assert s.get_min_offset_in_queue("TopicA", 0) == lo
        assert s.get_max_offset_in_queue("TopicA", 0) == 150


def test_disk_thresholds(tmp_path: Path) -> None:
    usage = [50.0]
    s = MessageStore(small_config(tmp_path), disk_usage_probe=lambda _p: usage[0])
    with s:
        assert s.put_message(msg()).is_ok
        usage[0] = 95.0
        s.clean_expired_files()
        r = s.put_message(msg())
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert s.runtime_info()["diskFull"] == "true"
        usage[0] = 60.0
        s.clean_expired_files()
        assert s.put_message(msg()).is_ok


def test_delete_topics(store: MessageStore) -> None:
    store.put_message(msg(topic="Gone", queue_id=1))
    store.put_message(msg(topic="Kept"))
    assert store.wait_dispatched()
    assert store.topics() == ["Gone", "Kept"] and store.queue_ids("Gone") == [1]
    store.delete_topics(["Gone"])
    assert store.topics() == ["Kept"]
    assert not (Path(store.config.consume_queue_dir) / "Gone").exists()
    r = store.put_message(msg(topic="Gone", queue_id=1))
    assert r.append_result is not None and r.append_result.queue_offset == 0


def test_dispatch_hints_and_record_parsing_build_the_same_consume_queue(tmp_path: Path) -> None:
    files = []
    for hints in (True, False):
        s = MessageStore(small_config(tmp_path / str(hints)))
        s.commit_log.hints_enabled = hints
        with s:
            for i in range(60):
                batch = [msg(queue_id=i % 3, body=b"%d" % i, TAGS=f"t{i % 4}", KEYS=f"a{i} b{i}")] * (
                    1 + i % 3
                )
                assert s.put_messages(batch).is_ok
            assert s.wait_dispatched()
            assert len(s.query_message("TopicA", "b59", 32, 0, 1 << 62).buffers) == 3
        cq_root = tmp_path / str(hints) / "consumequeue" / "TopicA"
        files.append({p.relative_to(cq_root): p.read_bytes() for p in cq_root.rglob("0*") if p.is_file()})
    assert files[0] == files[1] and len(files[0]) >= 3


def test_dispatch_appended_runs_here_unless_busy_or_behind(tmp_path: Path) -> None:
    """After ``put_batch_nowait(wake=False)`` the caller dispatches itself (the broker's event loop
    after a small send), unless another thread is in a round or too much waits: then the dispatch
    thread is woken and does it."""
    from rocketq.broker.store.message_store import INLINE_DISPATCH_MAX_BYTES
    from rocketq.broker.store.record_batch import batch_from_messages

    with MessageStore(
        small_config(tmp_path, reput_idle_wait_ms=60_000, mapped_file_size_commit_log_bytes=1 << 20)
    ) as s:
        threads: list[int] = []
        s.add_arrival_listener(lambda t, q, m: threads.append(threading.get_ident()))

        def append(n: int, body: bytes = b"x") -> None:
            batch = batch_from_messages([msg(body=body)] * n)
            assert batch is not None
            outcome = s.put_batch_nowait(batch, wake=False)
            assert not callable(outcome) and outcome[0].status is PutMessageStatus.PUT_OK

        s.put_message(msg())  # creates the first segment (an append that could wait is handed back)
        assert s.wait_dispatched()
        time.sleep(0.05)  # the dispatch thread is idle, waiting up to a minute
        threads.clear()
        append(3)
        s.dispatch_appended()
        assert s.get_max_offset_in_queue("TopicA", 0) == 4 and threads == [threading.get_ident()]

        with s.dispatcher.lock:  # the dispatch thread is in a round: leave it to that thread
            append(2)
            s.dispatch_appended()
            assert s.get_max_offset_in_queue("TopicA", 0) == 4
        assert s.wait_dispatched() and s.get_max_offset_in_queue("TopicA", 0) == 6

        threads.clear()
        for _ in range(INLINE_DISPATCH_MAX_BYTES // (8 * 1024) + 1):  # more than the inline limit waits
            append(1, b"y" * 8 * 1024)
        s.dispatch_appended()
        assert s.wait_dispatched() and threads and threading.get_ident() not in threads


def test_half_topic_records_are_dispatched_without_tags_or_index(tmp_path: Path) -> None:
    """Nothing reads the transaction half topic by tag or key: its units get tags code 0 and its
    records no index entries, live and when the ConsumeQueues are rebuilt from the CommitLog."""
    import shutil

    from rocketq.broker.store.commit_log import UNSCANNED_TOPICS

    half = "RMQ_SYS_TRANS_HALF_TOPIC"
    assert half in UNSCANNED_TOPICS

    def check(s: MessageStore) -> None:
        cq = s.find_consume_queue(half, 0)
        assert cq is not None
        units = cq.units_from(0, 10)
        assert units is not None and len(units) == 3 and not units["tags_code"].any()
        assert s.query_message(half, "k1", 8, 0, 1 << 62).buffers == []
        assert len(s.query_message("TopicA", "k1", 8, 0, 1 << 62).buffers) == 1  # user topics still are

    with MessageStore(small_config(tmp_path)) as s:
        s.put_message(msg(body=b"user", TAGS="A", KEYS="k1"))
        assert s.put_messages([msg(topic=half, body=b"h%d" % i, TAGS="A", KEYS="k1") for i in range(3)]).is_ok
        assert s.wait_dispatched()
        check(s)
    shutil.rmtree(tmp_path / "consumequeue")
    shutil.rmtree(tmp_path / "index")
    with MessageStore(small_config(tmp_path)) as s:  # rebuilt by parsing the records
        check(s)


def test_a_batch_of_equal_records_reaches_dispatch_as_one_column(tmp_path: Path) -> None:
    """A bulk batch whose records have one size hands dispatch its properties as one compact
    column (scanned as one layout, as a slave's replicated batches); dispatch writes the same
    ConsumeQueue units and index entries as the record-parsing path, for equal batches and for
    batches whose records differ."""
    import numpy as np

    from rocketq.broker.store.index_file import ENTRY_DTYPE, HEADER_SIZE
    from rocketq.broker.store.props_scan import PropsColumn
    from rocketq.broker.store.record_batch import batch_from_messages

    def batches() -> Iterator[list[MessageToStore]]:
        for i in range(12):
            n = 6 + i % 5
            if i % 3 == 2:  # records of different sizes: a list of properties, as before
                yield [
                    msg(queue_id=i % 2, body=b"b" * (k + 1), TAGS=f"t{k}", KEYS=f"k{i}-{k}") for k in range(n)
                ]
            else:  # one size: a column (a key that differs in place, a tag, a UNIQ_KEY-like value)
                yield [
                    msg(
                        queue_id=i % 2,
                        body=b"%03d" % k,
                        TAGS="tag",
                        KEYS=f"a{i:02d}{k:03d} b",
                        UNIQ_KEY=f"U{i:02d}{k:04d}",
                    )
                    for k in range(n)
                ]

    for hints in (True, False):
        conf = small_config(
            tmp_path / str(hints),
            max_index_num=5000,
            max_hash_slot_num=512,
            mapped_file_size_commit_log_bytes=1 << 20,
            reput_idle_wait_ms=60_000,
        )
        s = MessageStore(conf)
        s.commit_log.hints_enabled = hints
        with s:
            assert s.put_message(msg(KEYS="first")).is_ok and s.wait_dispatched()  # the first segment
            for batch in batches():  # appended, not dispatched: nothing wakes the dispatch thread
                prepared = batch_from_messages(batch)
                assert prepared is not None
                outcome = s.put_batch_nowait(prepared, wake=False)
                assert not callable(outcome) and outcome[0].status is PutMessageStatus.PUT_OK
            kinds = [type(h.properties) for h in s.commit_log.hints]
            s.dispatch_appended()
            assert s.wait_dispatched()
            assert kinds == ([PropsColumn, PropsColumn, list] * 4 if hints else [])
            assert len(s.query_message("TopicA", "a07003", 32, 0, 1 << 62).buffers) == 1
            assert len(s.query_message("TopicA", "U070003", 32, 0, 1 << 62).buffers) == 1
            assert len(s.query_message("TopicA", "k5-4", 32, 0, 1 << 62).buffers) == 1
    cqs, indexes = [], []
    for hints in (True, False):
        root = tmp_path / str(hints)
        cqs.append(
            {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0*") if p.is_file()}
        )
        (index,) = (root / "index").iterdir()  # (named by its creation time)
        slots = 512 * 4
        entries = np.frombuffer(index.read_bytes(), dtype=ENTRY_DTYPE, offset=HEADER_SIZE + slots).copy()
        entries["time_diff"] = 0  # seconds since each store's own first entry
        indexes.append((index.read_bytes()[HEADER_SIZE : HEADER_SIZE + slots], entries.tobytes()))
    assert cqs[0] == cqs[1] and len(cqs[0]) == 2
    assert indexes[0] == indexes[1]


def test_a_batch_of_records_without_properties_is_dispatched(tmp_path: Path) -> None:
    """Equal records with no properties at all (a raw client's batch): nothing to scan, units written."""
    with MessageStore(small_config(tmp_path)) as s:
        assert s.put_messages([msg(body=b"abc") for _ in range(10)]).is_ok
        assert s.wait_dispatched() and s.get_max_offset_in_queue("TopicA", 0) == 10
        cq = s.find_consume_queue("TopicA", 0)
        units = cq.units_from(0, 10) if cq is not None else None
        assert units is not None and units["tags_code"].tolist() == [0] * 10
