"""The commit/op crash window: real messages stored, op record lost, broker killed.

A commit appends the real message(s), then the op message.  These tests store the real messages
and make the op append fail (``make_op_message`` raises), ``halt()`` the store (no clean shutdown),
reopen it and recover: the recovery must find the committed messages in the CommitLog, append the
missing op record and treat them as ended, so a replayed COMMIT writes nothing and a check pass
does not ask about them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult
from rocketq.broker.testing import small_store
from rocketq.broker.transaction import HALF_TOPIC, OP_TOPIC, TransactionalMessageService
from rocketq.broker.transaction import service as service_mod
from rocketq.broker.transaction.op_log import OP_QUEUE_ID, iter_queue_records, parse_op_body
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketq.client.remoting.msgid import new_uniq_key

HOST = ("127.0.0.1", 10911)
COMMIT, ROLLBACK = 8, 12
TOPIC = "TopicW"


def later() -> int:
    """A check time past the transaction timeout, well within the CommitLog retention."""
    return int(time.time() * 1000) + 600_000


def make_store(root: Path) -> MessageStore:
    return small_store(
        root,
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=400,
        max_message_size_bytes=16 * 1024,
        max_hash_slot_num=64,
        max_index_num=1000,
        clean_resource_interval_ms=3_600_000,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> Iterator[MessageStore]:
    s = make_store(root)
    s.start()
    yield s
    s.halt()


def msgs(n: int, tag: str, **extra: str) -> list[MessageToStore]:
    return [
        MessageToStore(
            topic=TOPIC,
            queue_id=0,
            body=f"{tag}-{i}".encode() * 20,
            sys_flag=4,
            properties={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": new_uniq_key(), **extra},
            born_timestamp=int(time.time() * 1000),
            born_host=HOST,
            store_host=HOST,
        )
        for i in range(n)
    ]


def header(ar: AppendMessageResult, kind: int = COMMIT) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=ar.queue_offset,
        commit_log_offset=ar.wrote_offset,
        commit_or_rollback=kind,
        msg_id=ar.msg_id,
    )


def prepare_one(svc: TransactionalMessageService, tag: str) -> AppendMessageResult:
    res = svc.prepare(msgs(1, tag)[0])
    assert res.is_ok and res.append_result is not None
    return res.append_result


def prepare_batch(svc: TransactionalMessageService, n: int, tag: str) -> AppendMessageResult:
    res = svc.prepare_half_batch(msgs(n, tag))
    assert res.is_ok and res.append_result is not None
    return res.append_result


def lose_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash window: every op message fails to be built, after the real messages are stored."""

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between the real messages and the op message")

    monkeypatch.setattr(service_mod, "make_op_message", boom)


def recorder(calls: list[int]) -> Callable[[str, bytes, CheckTransactionStateRequestHeader], bool]:
    def send_check(group: str, body: bytes, h: CheckTransactionStateRequestHeader) -> bool:
        calls.append(h.tran_state_table_offset)
        return True

    return send_check


def real_count(store: MessageStore) -> int:
    assert store.wait_dispatched()
    return store.get_max_offset_in_queue(TOPIC, 0)


def op_offsets(store: MessageStore) -> list[list[int]]:
    assert store.wait_dispatched()
    end = store.get_max_offset_in_queue(OP_TOPIC, OP_QUEUE_ID)
    return [parse_op_body(r.body) for r in iter_queue_records(store, OP_TOPIC, OP_QUEUE_ID, 0, end)]


def crash_and_reopen(store: MessageStore, root: Path) -> MessageStore:
    assert store.wait_dispatched()
    store.halt()
    again = make_store(root)
    again.start()
    return again


def recovered_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "had no op record" in r.getMessage()]


def test_single_commit_without_op_is_ended_after_a_crash(
    store: MessageStore, root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    svc = TransactionalMessageService(store)
    a, pending = prepare_one(svc, "a"), prepare_one(svc, "p")
    with monkeypatch.context() as m:
        lose_ops(m)
        with pytest.raises(RuntimeError):
            svc.end_transaction(header(a))
    assert real_count(store) == 1 and op_offsets(store) == []  # no op record at all: scan from the half queue
    store = crash_and_reopen(store, root)
    try:
        caplog.set_level(logging.INFO, logger=service_mod.__name__)
        svc = TransactionalMessageService(store)
        svc.recover()
        assert len(recovered_lines(caplog)) == 1 and "1 committed transactions" in recovered_lines(caplog)[0]
        assert svc.is_finished(a.queue_offset) and not svc.is_finished(pending.queue_offset)
        assert op_offsets(store) == [[a.queue_offset]]  # the missing op record is now durable
        assert svc.end_transaction(header(a)) == (ResponseCode.SUCCESS, None)
        assert svc.end_transaction(header(a, ROLLBACK)) == (ResponseCode.SUCCESS, None)
        assert real_count(store) == 1  # no duplicate
        calls: list[int] = []
        stats = svc.check(later(), recorder(calls))
        assert stats.skipped_done == 1 and stats.checked == 1 and len(calls) == 1  # only the pending one
    finally:
        store.shutdown()


def test_ranged_commit_without_op_is_ended_after_a_crash(
    store: MessageStore, root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    svc = TransactionalMessageService(store)
    early = prepare_one(svc, "e")
    assert svc.end_transaction(header(early)) == (
        ResponseCode.SUCCESS,
        None,
    )  # a durable op before the window
    first = prepare_batch(svc, 4, "b")
    pending = prepare_one(svc, "p")
    with monkeypatch.context() as m:
        lose_ops(m)
        with pytest.raises(RuntimeError):
            svc.end_transaction_ranges(header(first), [(first.queue_offset, 3)])
    assert real_count(store) == 4 and len(op_offsets(store)) == 1
    store = crash_and_reopen(store, root)
    caplog.set_level(logging.INFO, logger=service_mod.__name__)
    svc = TransactionalMessageService(store)
    svc.recover()
    assert "3 committed transactions" in recovered_lines(caplog)[0]
    ended = range(first.queue_offset, first.queue_offset + 3)
    assert sorted(op_offsets(store)[-1]) == list(ended)
    again = svc.end_transaction_ranges(header(first), [(first.queue_offset, 3)])
    assert again.code is ResponseCode.SUCCESS and (again.ended, again.skipped) == (0, 3)
    assert real_count(store) == 4  # nothing written twice
    rest = svc.end_transaction_ranges(header(first), [(first.queue_offset, 4)])  # the 4th was never committed
    assert (rest.ended, rest.skipped) == (1, 3) and real_count(store) == 5
    calls: list[int] = []
    stats = svc.check(later(), recorder(calls))
    assert stats.checked == 1 and stats.skipped_done == 5  # early, 4 batch messages; only `pending` asked
    store.shutdown()
    # the op record appended by the recovery is durable: nothing left to repair on the next start
    store = make_store(root)
    store.start()
    caplog.clear()
    svc = TransactionalMessageService(store)
    svc.recover()
    assert "0 committed transactions" in recovered_lines(caplog)[0]
    assert not svc.is_finished(pending.queue_offset)
    store.halt()


def test_check_copy_commit_is_mapped_to_its_origin(
    store: MessageStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = TransactionalMessageService(store)
    origin = prepare_one(svc, "o")
    assert store.wait_dispatched()
    stats = svc.check(later(), lambda g, b, h: True)  # makes a check copy
    assert stats.checked == 1
    copy_offset = origin.queue_offset + 1
    assert store.wait_dispatched()
    recs = list(iter_queue_records(store, HALF_TOPIC, 0, copy_offset, copy_offset + 1))
    copy = recs[0]
    copy_header = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=copy.queue_offset,
        commit_log_offset=copy.physical_offset,
        commit_or_rollback=COMMIT,
        msg_id="",
    )
    with monkeypatch.context() as m:
        lose_ops(m)
        with pytest.raises(RuntimeError):
            svc.end_transaction(copy_header)
    store = crash_and_reopen(store, root)
    svc = TransactionalMessageService(store)
    svc.recover()
    assert svc.is_finished(origin.queue_offset) and svc.is_finished(copy.queue_offset)
    assert sorted(op_offsets(store)[-1]) == [origin.queue_offset, copy.queue_offset]
    assert svc.end_transaction(header(origin)) == (ResponseCode.SUCCESS, None)  # any copy: a no-op
    assert svc.end_transaction(copy_header) == (ResponseCode.SUCCESS, None)
    assert real_count(store) == 1
    store.shutdown()


def test_forged_commit_flag_ends_nothing(store: MessageStore, root: Path) -> None:
    svc = TransactionalMessageService(store)
    pending = prepare_one(svc, "p")
    forged = MessageToStore(
        topic=TOPIC,
        queue_id=0,
        body=b"x",
        sys_flag=COMMIT,
        properties={"TRAN_PREPARED_QUEUE_OFFSET": str(pending.queue_offset), "UNIQ_KEY": new_uniq_key()},
        born_timestamp=0,
        born_host=HOST,
        store_host=HOST,
        prepared_transaction_offset=pending.wrote_offset,
    )  # names the real half
    assert store.put_message(forged).is_ok
    store = crash_and_reopen(store, root)
    svc = TransactionalMessageService(store)
    svc.recover()
    assert not svc.is_finished(pending.queue_offset)
    assert op_offsets(store) == []
    store.shutdown()
