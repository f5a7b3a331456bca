"""The byte-level ranged commit (``transaction.bulk_commit``) stores what the general path stores.

Two stores get the same half records, appended the way the send processor stores a prepared batch
(``ranged.half_properties``).  One ends them with the service as is (the bulk path, checked to be
taken), the other with the bulk loader switched off (the column reader and ``append_committed``).
The committed messages, their ConsumeQueue units, index entries, op records and the service's
answers must agree; the cases the bulk path does not cover must fall back to the general path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rocketq.broker.transaction.service as service_module
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageBatchToStore, PreparedBatch
from rocketq.broker.store.status import PutMessageResult
from rocketq.broker.transaction import HALF_TOPIC, OP_TOPIC, TransactionalMessageService
from rocketq.broker.transaction.bulk_commit import BULK_MIN, committed_batches, load_bulk
from rocketq.broker.transaction.op_log import iter_queue_records, parse_op_body
from rocketq.broker.transaction.ranged import half_properties
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import encode_properties

HOST = ("127.0.0.1", 10911)
BORN = ("10.0.0.2", 5555)
COMMIT, ROLLBACK = 8, 12
GROUP = "PG"
CLUSTER = b"CLUSTER\x01DefaultCluster\x02"


def make_store(root: Path, max_message_size: int = 64 * 1024) -> MessageStore:
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(root),
            mapped_file_size_commit_log_bytes=4 * 1024 * 1024,
            mapped_file_size_consume_queue_units=4000,
            max_message_size_bytes=max_message_size,
            max_hash_slot_num=512,
            max_index_num=20_000,
            clean_resource_interval_ms=3_600_000,
        )
    )
    store.start()
    return store


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[MessageStore, MessageStore]]:
    a, b = make_store(tmp_path / "bulk"), make_store(tmp_path / "general")
    yield a, b
    a.shutdown()
    b.shutdown()


def props(i: int, *, group: str = GROUP, **extra: str) -> bytes:
    base = {"KEYS": f"k{i} shared", "UNIQ_KEY": f"U{i:06d}", "WAIT": "true", **extra}
    if i % 3 == 0:
        base["TAGS"] = f"tag{i % 2}"
    base.update({"__RQ_TXN": f"{i:010d}:0:0:w1:b1:sink", "TRAN_MSG": "true", "PGROUP": group})
    return encode_properties(base).encode()


def put_halves(
    store: MessageStore,
    first: int,
    n: int,
    topic: str = "TopicB",
    queue_id: int = 2,
    *,
    body_size: int = 40,
    lead: bytes = b"",
    **extra: str,
) -> tuple[int, int]:
    """A prepared batch as the send processor stores it; (first half offset, its CommitLog offset).
    ``lead``: encoded properties put first (as another writer might)."""
    fast = half_properties(
        [props(i, **extra) for i in range(first, first + n)], topic, queue_id, cluster=CLUSTER
    )
    assert fast is not None
    fast = [lead + f for f in fast]
    result = store.put_batch(
        MessageBatchToStore(
            topic=HALF_TOPIC,
            queue_id=0,
            born_host=BORN,
            store_host=HOST,
            bodies=[bytes([i % 251]) * (body_size + i % 7) for i in range(first, first + n)],
            properties=fast,
            flags=[i % 4 for i in range(n)],
            born_timestamps=1_700_000_000_000,
        )
    )
    assert result.is_ok and result.append_result is not None
    return result.append_result.queue_offset, result.append_result.wrote_offset


def header(first: tuple[int, int], kind: int, group: str = GROUP) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=first[0],
        commit_log_offset=first[1],
        commit_or_rollback=kind,
        msg_id="x",
    )


def records(store: MessageStore, topic: str, queue_id: int) -> list[StoredMessage]:
    store.wait_dispatched()
    res = store.get_message("G", topic, queue_id, 0, 100_000, 64 * 1024 * 1024)
    try:
        return [decode_stored_message(b, decompress=False) for b in res.buffers]
    finally:
        res.release()


def view(m: StoredMessage) -> tuple[Any, ...]:
    """Everything but the store time (and the order of properties, which carries no meaning)."""
    return (
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.physical_offset,
        m.total_size,
        m.body,
        m.flag,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.store_host,
        m.reconsume_times,
        m.prepared_transaction_offset,
        m.body_crc,
        dict(m.properties),
    )


def tags_codes(store: MessageStore, topic: str, queue_id: int) -> list[int]:
    cq = store.find_consume_queue(topic, queue_id)
    units = None if cq is None else cq.units_from(0, 100_000)
    return [] if units is None else units["tags_code"].tolist()


class Paths:
    """Runs every step on both stores: the bulk path on ``a``, the general path on ``b``."""

    def __init__(self, pair: tuple[MessageStore, MessageStore], monkeypatch: pytest.MonkeyPatch) -> None:
        self.a, self.b = pair
        self.svc_a, self.svc_b = TransactionalMessageService(self.a), TransactionalMessageService(self.b)
        self.monkeypatch = monkeypatch
        self.bulk_used = 0
        real = load_bulk

        def counting(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            self.bulk_used += out is not None
            return out

        monkeypatch.setattr(service_module, "load_bulk", counting)

    def put(self, first: int, n: int, **kw: Any) -> tuple[int, int]:
        ra, rb = put_halves(self.a, first, n, **kw), put_halves(self.b, first, n, **kw)
        assert ra == rb
        return ra

    def end(
        self, first: tuple[int, int], kind: int, ranges: list[tuple[int, int]], group: str = GROUP
    ) -> Any:
        got = self.svc_a.end_transaction_ranges(header(first, kind, group), ranges)
        with self.monkeypatch.context() as m:
            m.setattr(service_module, "load_bulk", lambda *a, **k: None)
            expected = self.svc_b.end_transaction_ranges(header(first, kind, group), ranges)
        assert (got.code, got.remark, got.ended, got.skipped) == (
            expected.code,
            expected.remark,
            expected.ended,
            expected.skipped,
        )
        return got

    def same_outcome(self, topic: str = "TopicB", queue_id: int = 2) -> list[StoredMessage]:
        got, expected = records(self.a, topic, queue_id), records(self.b, topic, queue_id)
        assert [view(m) for m in got] == [view(m) for m in expected]
        assert tags_codes(self.a, topic, queue_id) == tags_codes(self.b, topic, queue_id)
        ops = [sorted(parse_op_body(m.body)) for m in records(self.a, OP_TOPIC, 0)]
        assert ops == [sorted(parse_op_body(m.body)) for m in records(self.b, OP_TOPIC, 0)]
        for key in ("k5", "shared", "U000007"):
            qa = self.a.query_message(topic, key, 1000, 0, 2**62)
            qb = self.b.query_message(topic, key, 1000, 0, 2**62)
            assert sorted(qa.phy_offsets) == sorted(qb.phy_offsets)
        return got


def test_bulk_commit_stores_what_the_general_path_stores(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Paths(pair, monkeypatch)
    first = p.put(0, 80)
    second = p.put(80, 70, queue_id=5)  # another destination: ended by its own request
    p.put(150, 90)
    result = p.end(first, COMMIT, [(0, 80), (150, 90)])
    assert (result.code, result.ended, result.skipped) == (ResponseCode.SUCCESS, 170, 0)
    assert p.bulk_used == 1
    got = p.same_outcome()
    assert [m.body for m in got] == [
        bytes([i % 251]) * (40 + i % 7) for i in list(range(80)) + list(range(150, 240))
    ]
    props0 = got[0].properties
    assert (
        props0["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
        and "REAL_TOPIC" not in props0
        and props0["TAGS"] == "tag0"
    )
    assert all(m.sys_flag & 0xC == COMMIT and m.queue_id == 2 for m in got)
    assert p.a.query_message("TopicB", "k155", 10, 0, 2**62).phy_offsets == [got[85].physical_offset]
    assert p.end(second, COMMIT, [(80, 70)]).ended == 70 and p.bulk_used == 2
    p.same_outcome(queue_id=5)
    again = p.end(first, COMMIT, [(0, 80), (150, 90)])  # a repeat ends nothing and writes nothing
    assert (again.ended, again.skipped) == (0, 170) and p.bulk_used == 3
    p.same_outcome()


def test_partly_ended_ranges_commit_the_rest(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Paths(pair, monkeypatch)
    a1, a2 = p.put(0, 70), p.put(70, 70)
    assert p.end(a1, ROLLBACK, [(0, 70)]).ended == 70
    result = p.end(a1, COMMIT, [(0, 70), (70, 70)])
    assert (result.ended, result.skipped) == (70, 70)
    assert [m.queue_offset for m in p.same_outcome()] == list(range(70))
    assert p.bulk_used == 2 and a2[0] == 70


def test_origins_of_different_widths_and_store_batch_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half offsets crossing 99 -> 100 (one byte more of TRAN_PREPARED_QUEUE_OFFSET) and a group
    larger than the store's batch limit (several appends, in order)."""
    pair = (make_store(tmp_path / "a", 40 * 1024), make_store(tmp_path / "b", 40 * 1024))
    try:
        p = Paths(pair, monkeypatch)
        p.put(0, 90)
        start = p.put(90, 70, body_size=60)
        p.put(160, 70, body_size=60)
        p.put(230, 60, body_size=60)
        appends: list[int] = []
        put_prepared = p.a.put_prepared

        def counting_put(prep: PreparedBatch) -> PutMessageResult:
            appends.append(prep.n)
            return put_prepared(prep)

        monkeypatch.setattr(p.a, "put_prepared", counting_put)
        assert p.end(start, COMMIT, [(90, 70), (160, 70), (230, 60)]).ended == 200 and p.bulk_used == 1
        assert len(appends) > 1 and sum(appends) == 200  # the 40 KiB store batch limit splits the group
        got = p.same_outcome()
        assert [m.properties["TRAN_PREPARED_QUEUE_OFFSET"] for m in got] == [str(i) for i in range(90, 290)]
    finally:
        for s in pair:
            s.shutdown()


def test_unusual_requests_take_the_general_path(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Paths(pair, monkeypatch)
    delayed = p.put(0, 70, DELAY="2")
    assert p.end(delayed, COMMIT, [(0, 70)]).ended == 70
    assert p.bulk_used == 0 and len(records(p.a, "SCHEDULE_TOPIC_XXXX", 1)) == 70
    two = p.put(70, 70)
    other = p.put(140, 70, queue_id=3)
    mixed = p.end(two, COMMIT, [(70, 70), (140, 70)])  # two destinations in one request
    assert mixed.ended == 140 and p.bulk_used == 0
    p.same_outcome()
    p.same_outcome(queue_id=3)
    third = p.put(210, 70)
    wrong = p.end(third, COMMIT, [(210, 70)], group="other")
    assert wrong.code == ResponseCode.SYSTEM_ERROR and "producer group wrong" in wrong.remark
    missing = p.end(third, COMMIT, [(210, 75)])
    assert "half offset 280 not found" in missing.remark
    overlapping = p.end(third, COMMIT, [(210, 70), (240, 10)])
    assert overlapping.ended == 70 and p.bulk_used == 0
    assert other[0] == 140
    small = p.put(280, BULK_MIN - 1)
    assert p.end(small, COMMIT, [(280, BULK_MIN - 1)]).ended == BULK_MIN - 1 and p.bulk_used == 0
    p.same_outcome()


def test_load_bulk_refuses_copies_and_reads_no_hole(pair: Any) -> None:
    store, _ = pair
    first = put_halves(store, 0, 70)
    store.wait_dispatched()
    assert load_bulk(store, [(0, 70)], GROUP, max_bytes=1 << 30) is not None
    renewed = put_halves(store, 70, 70, lead=b"TRAN_PREPARED_QUEUE_OFFSET\x013\x02")  # a check-back copy
    delayed = put_halves(store, 140, 70, lead=b"DELAY\x012\x02")
    store.wait_dispatched()
    assert load_bulk(store, [(70, 70)], GROUP, max_bytes=1 << 30) is None
    assert load_bulk(store, [(140, 70)], GROUP, max_bytes=1 << 30) is None
    assert load_bulk(store, [(0, 70), (70, 70)], GROUP, max_bytes=1 << 30) is None
    assert delayed[0] == 140
    assert load_bulk(store, [(0, 300)], GROUP, max_bytes=1 << 30) is None  # beyond the queue
    assert store.copy_queue_records(HALF_TOPIC, 0, [(200, 20)]) is None
    assert store.copy_queue_records(HALF_TOPIC, 0, [(0, 5), (200, 20)]) is None
    copied = store.copy_queue_records(HALF_TOPIC, 0, [(10, 100), (0, 3)])  # across two appends, then back
    assert copied is not None and len(copied.data) == int(copied.sizes.sum())
    assert np.array_equal(copied.starts[1:], np.cumsum(copied.sizes)[:-1])
    records = [
        decode_stored_message(copied.data[s : s + n])
        for s, n in zip(copied.starts.tolist(), copied.sizes.tolist(), strict=True)
    ]
    assert [m.queue_offset for m in records] == [*range(10, 110), 0, 1, 2]
    assert [m.physical_offset for m in records] == copied.phys.tolist()
    assert first[0] == 0 and renewed[0] == 70


def test_records_ended_while_the_commit_was_built_are_skipped(
    pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed records are built before the service lock is taken: halves another request
    ends in between (here a rollback of part of the range) are skipped and not written, as the
    general path does."""
    p = Paths(pair, monkeypatch)
    first = p.put(0, 100)
    real = committed_batches
    calls: list[int] = []

    def racing(bulk: Any, keep: Any, *args: Any) -> Any:
        calls.append(len(keep))
        if len(calls) == 1:  # the build outside the lock: another request ends 30 halves first
            assert p.svc_a.end_transaction_ranges(header(first, ROLLBACK), [(0, 30)]).ended == 30
        return real(bulk, keep, *args)

    monkeypatch.setattr(service_module, "committed_batches", racing)
    result = p.svc_a.end_transaction_ranges(header(first, COMMIT), [(0, 100)])
    assert (result.code, result.ended, result.skipped) == (ResponseCode.SUCCESS, 70, 30)
    assert calls == [100, 70] and p.bulk_used == 1  # built for all, rebuilt for the 70 left
    monkeypatch.setattr(service_module, "committed_batches", real)
    assert p.svc_b.end_transaction_ranges(header(first, ROLLBACK), [(0, 30)]).ended == 30
    with monkeypatch.context() as m:
        m.setattr(service_module, "load_bulk", lambda *a, **k: None)
        assert p.svc_b.end_transaction_ranges(header(first, COMMIT), [(0, 100)]).ended == 70
    got = p.same_outcome()
    assert [m.properties["TRAN_PREPARED_QUEUE_OFFSET"] for m in got] == [str(i) for i in range(30, 100)]


def test_check_pass_reads_only_unfinished_halves(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check pass skips the finished offsets without reading their records (a sink's halves are
    nearly all committed when the pass comes): it reads only the open run, counts the others as
    skipped, and its progress ends where it stopped or past a finished tail."""
    import rocketq.broker.transaction.check_pass as check_module

    store = pair[0]
    svc = TransactionalMessageService(store)
    first = put_halves(store, 0, 200)
    assert svc.end_transaction_ranges(header(first, COMMIT), [(0, 100), (150, 50)]).ended == 150
    reads: list[tuple[int, int]] = []
    real = iter_queue_records

    def spy(st: MessageStore, topic: str, queue_id: int, start: int, end: int) -> Any:
        reads.append((start, end))
        return real(st, topic, queue_id, start, end)

    monkeypatch.setattr(check_module, "iter_queue_records", spy)
    asked: list[int] = []

    def send_check(group: str, body: bytes, hdr: Any) -> bool:
        asked.append(hdr.tran_state_table_offset)
        return True

    born = 1_700_000_000_000
    young = svc.check(born + 1_000, send_check)  # younger than the transaction timeout: stops at 100
    assert (young.begin_offset, young.end_offset, young.skipped_done, young.checked) == (0, 100, 100, 0)
    assert reads == [(100, 150)] and asked == []
    reads.clear()
    stats = svc.check(born + 60_000, send_check)
    assert reads == [(100, 150)] and len(asked) == 50  # the open run only, each asked once
    assert (stats.begin_offset, stats.end_offset, stats.skipped_done, stats.checked) == (100, 200, 50, 50)
    assert stats.scanned == 100 and svc.check_progress == 200


def test_rollback_in_bulk_writes_only_the_op_record(pair: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Paths(pair, monkeypatch)
    first = p.put(0, 100)
    result = p.end(first, ROLLBACK, [(0, 100)])
    assert result.ended == 100 and p.bulk_used == 1
    assert p.same_outcome() == []
    assert all(p.svc_a.is_finished(i) for i in range(100))


def test_bulk_commit_without_its_op_record_is_ended_after_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash window of a ranged commit (real messages stored, op record not) on the bulk path:
    recovery finds the committed records by their TRAN_PREPARED_QUEUE_OFFSET (written first here)
    and appends the op record, so a replayed COMMIT writes nothing twice."""
    store = make_store(tmp_path)
    svc = TransactionalMessageService(store)
    first = put_halves(store, 0, 100)
    store.wait_dispatched()

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between the real messages and the op message")

    used: list[bool] = []

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        used.append(True)
        return load_bulk(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(service_module, "make_op_message", boom)
        m.setattr(service_module, "load_bulk", counting_load)
        with pytest.raises(RuntimeError):
            svc.end_transaction_ranges(header(first, COMMIT), [(0, 80)])
    assert used and len(records(store, "TopicB", 2)) == 80 and records(store, OP_TOPIC, 0) == []
    store.halt()
    store = make_store(tmp_path)
    try:
        svc = TransactionalMessageService(store)
        svc.recover()
        assert sorted(parse_op_body(records(store, OP_TOPIC, 0)[0].body)) == list(range(80))
        again = svc.end_transaction_ranges(header(first, COMMIT), [(0, 100)])
        assert (again.ended, again.skipped) == (20, 80)
        got = records(store, "TopicB", 2)
        assert [m.properties["TRAN_PREPARED_QUEUE_OFFSET"] for m in got] == [str(i) for i in range(100)]
    finally:
        store.shutdown()
