"""TransactionalMessageService over a real MessageStore: prepare, commit, rollback, check-back, parking."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.offset_manager import ConsumerOffsetManager
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult, GetMessageStatus
from rocketq.broker.transaction import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    SYS_TRANS_GROUP,
    TransactionalMessageService,
    TransactionCheckService,
    TransactionConfig,
)
from rocketq.broker.transaction.progress import PROGRESS_FILE
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.client.remoting.message import (
    TRANSACTION_TYPE_MASK,
    StoredMessage,
    SysFlag,
    decode_stored_message,
    encode_stored_message,
)
from rocketq.client.remoting.msgid import new_uniq_key

HOST = ("127.0.0.1", 10911)
COMMIT, ROLLBACK = 8, 12
Check = tuple[str, bytes, CheckTransactionStateRequestHeader]


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log_bytes=256 * 1024,
        mapped_file_size_consume_queue_units=200,
        max_message_size_bytes=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=500,
        clean_resource_interval_ms=3_600_000,
    )


def prepared(
    body: bytes = b"order-1",
    *,
    topic: str = "TopicT",
    queue_id: int = 1,
    group: str = "PG",
    born: int | None = None,
    sys_flag: int = 0,
    **extra: str,
) -> MessageToStore:
    props = {"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": new_uniq_key(), "TAGS": "TagA", **extra}
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=props,
        sys_flag=sys_flag | int(SysFlag.TRANSACTION_PREPARED),
        born_timestamp=born if born is not None else int(time.time() * 1000),
        born_host=("10.0.0.2", 5555),
        store_host=HOST,
    )


def end_header(
    ar: AppendMessageResult | CheckTransactionStateRequestHeader,
    kind: int,
    *,
    group: str = "PG",
    from_check: bool = False,
) -> EndTransactionRequestHeader:
    if isinstance(ar, CheckTransactionStateRequestHeader):
        qo, phy, msg_id = ar.tran_state_table_offset, ar.commit_log_offset, ar.offset_msg_id or ""
    else:
        qo, phy, msg_id = ar.queue_offset, ar.wrote_offset, ar.msg_id
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=qo,
        commit_log_offset=phy,
        commit_or_rollback=kind,
        from_transaction_check=from_check,
        msg_id=msg_id,
    )


def pull_all(store: MessageStore, topic: str, queue_id: int = 0) -> list[StoredMessage]:
    assert store.wait_dispatched()
    res = store.get_message("g", topic, queue_id, 0, 1000, 1 << 24)
    if res.status is not GetMessageStatus.FOUND:
        return []
    out = [decode_stored_message(b, decompress=False) for b in res.buffers]
    res.release()
    return out


class Recorder:
    """A send_check that records the checks and answers with a fixed liveness."""

    def __init__(self, live: bool = True) -> None:
        self.live = live
        self.calls: list[Check] = []

    def __call__(self, group: str, body: bytes, header: CheckTransactionStateRequestHeader) -> bool:
        self.calls.append((group, body, header))
        return self.live


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(store_config(tmp_path))
    s.start()
    yield s
    s.shutdown()


def put_prepared(svc: TransactionalMessageService, msg: MessageToStore) -> AppendMessageResult:
    res = svc.prepare(msg)
    assert res.is_ok and res.append_result is not None
    return res.append_result


def test_prepare_stores_a_half_message(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    msg = prepared(KEYS="k1")
    ar = put_prepared(svc, msg)
    (half,) = pull_all(store, HALF_TOPIC)
    assert (half.topic, half.queue_id, half.queue_offset, half.physical_offset) == (
        HALF_TOPIC,
        0,
        0,
        ar.wrote_offset,
    )
    assert ar.queue_offset == 0
    assert half.sys_flag & TRANSACTION_TYPE_MASK == 0  # reset as RocketMQ's parseHalfMessageInner does
    p = half.properties
    assert (p["REAL_TOPIC"], p["REAL_QID"], p["TRAN_MSG"], p["PGROUP"]) == ("TopicT", "1", "true", "PG")
    assert p["UNIQ_KEY"] == msg.properties["UNIQ_KEY"]  # type: ignore[index]
    assert pull_all(store, "TopicT", 1) == []


def test_commit_makes_the_real_message_visible(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    msg = prepared(b"payload", KEYS="biz-1")
    ar = put_prepared(svc, msg)
    assert svc.end_transaction(end_header(ar, COMMIT)) == (ResponseCode.SUCCESS, None)
    (real,) = pull_all(store, "TopicT", 1)
    assert (real.topic, real.queue_id, real.body) == ("TopicT", 1, b"payload")
    assert real.sys_flag & TRANSACTION_TYPE_MASK == int(SysFlag.TRANSACTION_COMMIT)
    assert real.prepared_transaction_offset == ar.wrote_offset
    p = real.properties
    assert "REAL_TOPIC" not in p and "REAL_QID" not in p
    assert p["UNIQ_KEY"] == msg.properties["UNIQ_KEY"]  # type: ignore[index]
    assert (p["TRAN_PREPARED_QUEUE_OFFSET"], p["TAGS"], p["KEYS"], p["PGROUP"]) == (
        "0",
        "TagA",
        "biz-1",
        "PG",
    )
    (op,) = pull_all(store, OP_TOPIC)
    assert op.properties["TAGS"] == "d" and op.body == b"0"
    assert svc.is_finished(0)
    assert store.query_message("TopicT", "biz-1", 10, 0, 2**62).phy_offsets  # the committed copy is indexed


def test_rollback_is_never_visible(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = put_prepared(svc, prepared(born=0))
    assert svc.end_transaction(end_header(ar, ROLLBACK)) == (ResponseCode.SUCCESS, None)
    assert pull_all(store, "TopicT", 1) == []
    assert [op.body for op in pull_all(store, OP_TOPIC)] == [b"0"]
    rec = Recorder()
    stats = svc.check(10**13, rec)
    assert rec.calls == [] and stats.skipped_done == 1 and stats.end_offset == 1


def test_second_end_transaction_is_a_no_op(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = put_prepared(svc, prepared())
    assert svc.end_transaction(end_header(ar, COMMIT))[0] is ResponseCode.SUCCESS
    assert svc.end_transaction(end_header(ar, COMMIT))[0] is ResponseCode.SUCCESS
    assert svc.end_transaction(end_header(ar, ROLLBACK))[0] is ResponseCode.SUCCESS
    assert len(pull_all(store, "TopicT", 1)) == 1
    assert len(pull_all(store, OP_TOPIC)) == 1


def test_unknown_state_is_ignored(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = put_prepared(svc, prepared())
    assert svc.end_transaction(end_header(ar, 0)) == (ResponseCode.SUCCESS, None)
    assert pull_all(store, OP_TOPIC) == [] and not svc.is_finished(0)


def test_end_transaction_validates_the_half_message(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = put_prepared(svc, prepared())
    other = store.put_message(
        MessageToStore(
            topic="Plain",
            queue_id=0,
            body=b"x",
            properties={},
            born_timestamp=1,
            born_host=HOST,
            store_host=HOST,
        )
    )
    assert other.append_result is not None
    h = end_header(ar, COMMIT)
    cases = {
        "The producer group wrong": h.replace(producer_group="other"),
        "The transaction state table offset wrong": h.replace(tran_state_table_offset=7),
        "Find prepared transaction message failed": h.replace(
            commit_log_offset=other.append_result.wrote_offset
        ),
    }
    for remark, bad in cases.items():
        assert svc.end_transaction(bad) == (ResponseCode.SYSTEM_ERROR, remark)
    assert svc.end_transaction(h.replace(commit_log_offset=10**9))[0] is ResponseCode.SYSTEM_ERROR
    assert pull_all(store, "TopicT", 1) == [] and pull_all(store, OP_TOPIC) == []


def test_compressed_body_survives_commit(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    raw = b"compress me " * 50
    ar = put_prepared(svc, prepared(zlib.compress(raw), sys_flag=int(SysFlag.COMPRESSED)))
    svc.end_transaction(end_header(ar, COMMIT))
    assert store.wait_dispatched()
    res = store.get_message("g", "TopicT", 1, 0, 10, 1 << 20)
    assert decode_stored_message(res.buffers[0]).body == raw


def test_check_back_after_the_timeout(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    born = int(time.time() * 1000)
    msg = prepared(b"pending", born=born)
    ar = put_prepared(svc, msg)
    assert store.wait_dispatched()
    rec = Recorder()
    young = svc.check(born + 1_000, rec)
    assert rec.calls == [] and young.end_offset == 0 and young.stop_reason.startswith("younger")
    stats = svc.check(born + 7_000, rec)
    assert stats.checked == 1 and stats.end_offset == 1
    ((group, body, header),) = rec.calls
    uniq = msg.properties["UNIQ_KEY"]  # type: ignore[index]
    assert group == "PG"
    assert (header.tran_state_table_offset, header.msg_id, header.transaction_id, header.topic) == (
        1,
        uniq,
        uniq,
        "TopicT",
    )
    assert header.commit_log_offset > ar.wrote_offset
    stored = store.look_message_by_offset(header.commit_log_offset)
    assert stored is not None
    copy = decode_stored_message(stored)
    assert header.offset_msg_id == copy.offset_msg_id
    checked = decode_stored_message(body, check_crc=True)
    assert (checked.topic, checked.queue_id, checked.body) == ("TopicT", 1, b"pending")
    assert (checked.physical_offset, checked.queue_offset) == (header.commit_log_offset, 1)
    assert checked.properties["TRANSACTION_CHECK_TIMES"] == "1" and checked.properties["PGROUP"] == "PG"
    assert checked.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    # The producer answers the check: commit through the header it was given.
    assert svc.end_transaction(end_header(header, COMMIT, from_check=True)) == (ResponseCode.SUCCESS, None)
    assert [m.body for m in pull_all(store, "TopicT", 1)] == [b"pending"]
    assert store.wait_dispatched()
    assert svc.check(born + 70_000, rec).checked == 0 and len(rec.calls) == 1


def test_late_answer_on_the_original_offsets_finishes_every_copy(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = put_prepared(svc, prepared(born=0))
    assert store.wait_dispatched()
    rec = Recorder()
    svc.check(10_000, rec)
    assert len(rec.calls) == 1
    # The producer's own (late) END_TRANSACTION names the first copy.
    assert svc.end_transaction(end_header(ar, COMMIT))[0] is ResponseCode.SUCCESS
    assert pull_all(store, OP_TOPIC)[0].body == b"0"
    stats = svc.check(20_000, rec)
    assert stats.checked == 0 and stats.skipped_done == 1 and len(rec.calls) == 1
    # ...and an answer to the check, naming the copy, is a no-op.
    assert (
        svc.end_transaction(end_header(rec.calls[0][2], COMMIT, from_check=True))[0] is ResponseCode.SUCCESS
    )
    assert len(pull_all(store, "TopicT", 1)) == 1


def test_max_checks_then_parked(store: MessageStore) -> None:
    svc = TransactionalMessageService(store, TransactionConfig(transaction_check_max=3))
    put_prepared(svc, prepared(b"stuck", born=0))
    rec = Recorder()
    for i in range(1, 7):
        assert store.wait_dispatched()
        svc.check(i * 60_000, rec)
    counts = [decode_stored_message(body).properties["TRANSACTION_CHECK_TIMES"] for _, body, _ in rec.calls]
    assert counts == ["1", "2", "3"]
    (parked,) = pull_all(store, CHECK_MAX_TIME_TOPIC)
    assert parked.body == b"stuck" and parked.properties["REAL_TOPIC"] == "TopicT"
    assert parked.properties["TRANSACTION_CHECK_TIMES"] == "3"
    # A late commit of the parked transaction still works.
    last = rec.calls[-1][2]
    assert svc.end_transaction(end_header(last, COMMIT, from_check=True))[0] is ResponseCode.SUCCESS
    assert [m.body for m in pull_all(store, "TopicT", 1)] == [b"stuck"]


def test_checks_without_a_live_producer_still_count(store: MessageStore) -> None:
    svc = TransactionalMessageService(store, TransactionConfig(transaction_check_max=2))
    put_prepared(svc, prepared(born=0))
    rec = Recorder(live=False)
    stats = []
    for i in range(1, 5):
        assert store.wait_dispatched()
        stats.append(svc.check(i * 60_000, rec))
    assert [s.no_producer for s in stats] == [1, 1, 0, 0]
    assert [s.parked for s in stats] == [0, 0, 1, 0]
    assert len(rec.calls) == 2


def test_check_immunity_time(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    put_prepared(svc, prepared(born=0, CHECK_IMMUNITY_TIME_IN_SECONDS="60"))
    assert store.wait_dispatched()
    rec = Recorder()
    first = svc.check(7_000, rec)
    assert rec.calls == [] and first.renewed_immune == 1 and first.end_offset == 1
    assert store.wait_dispatched()
    assert svc.check(30_000, rec).renewed_immune == 1 and rec.calls == []
    assert store.wait_dispatched()
    assert svc.check(61_000, rec).checked == 1
    assert rec.calls[0][2].tran_state_table_offset == 3
    assert decode_stored_message(rec.calls[0][1]).properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"


def test_progress_is_persisted_and_mirrored(store: MessageStore, tmp_path: Path) -> None:
    offsets = ConsumerOffsetManager()
    svc = TransactionalMessageService(store, offsets=offsets)
    for _ in range(3):
        ar = put_prepared(svc, prepared(born=0))
    svc.end_transaction(end_header(ar, ROLLBACK))
    assert store.wait_dispatched()
    stats = svc.check(10_000, Recorder())
    assert (stats.checked, stats.skipped_done, stats.end_offset) == (2, 1, 3)
    assert (tmp_path / "config" / PROGRESS_FILE).exists()
    assert offsets.query_offset(SYS_TRANS_GROUP, HALF_TOPIC, 0) == 3
    assert offsets.query_offset(SYS_TRANS_GROUP, OP_TOPIC, 0) == 1
    again = TransactionalMessageService(store)
    again.recover()
    assert again.check_progress == 3


def test_foreign_4x_op_body_is_understood(store: MessageStore) -> None:
    """An op written by a RocketMQ 4.x broker (single offset) finishes that half offset."""
    svc = TransactionalMessageService(store)
    put_prepared(svc, prepared(born=0))
    op = encode_stored_message(
        topic=OP_TOPIC,
        queue_id=0,
        born_timestamp=0,
        born_host=HOST,
        store_host=HOST,
        body=b"0",
        properties={"TAGS": "d"},
    )
    decoded = decode_stored_message(op)
    store.put_message(
        MessageToStore(
            topic=OP_TOPIC,
            queue_id=0,
            body=decoded.body,
            properties=decoded.properties,
            born_timestamp=0,
            born_host=HOST,
            store_host=HOST,
        )
    )
    assert store.wait_dispatched()
    fresh = TransactionalMessageService(store)
    rec = Recorder()
    assert fresh.check(10_000, rec).skipped_done == 1 and rec.calls == []


def test_check_service_thread_runs_passes(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    put_prepared(svc, prepared(born=int(time.time() * 1000) - 10_000))
    assert store.wait_dispatched()
    rec = Recorder()
    runner = TransactionCheckService(svc, rec, interval_ms=20)
    runner.start()
    try:
        runner.wakeup()
        deadline = time.monotonic() + 10
        while not rec.calls and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        runner.shutdown()
    assert len(rec.calls) >= 1 and runner.last_stats is not None
