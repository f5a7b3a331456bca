"""Batched transactions (rocketq extension): prepared batches and ranged END_TRANSACTION.

Store level: TransactionalMessageService over a real MessageStore in a temp dir.  Processor level:
a real in-process BrokerController spoken to over TCP (SEND_BATCH_MESSAGE with the PREPARED
sysFlag, ranged END_TRANSACTION, the feature flag of GET_BROKER_RUNTIME_INFO).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.broker.processor.end_transaction import process_end_transaction
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult, GetMessageStatus
from rocketq.broker.testing import run_broker as run_broker_with_controller
from rocketq.broker.testing import small_store
from rocketq.broker.transaction import HALF_TOPIC, OP_TOPIC, TransactionalMessageService, TransactionConfig
from rocketq.broker.transaction.op_log import parse_op_body
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketq.client.remoting.message import TRANSACTION_TYPE_MASK, StoredMessage, decode_stored_message
from rocketq.client.remoting.msgid import decode_offset_msg_id, new_uniq_key
from rocketq.client.remoting.txn_batch import encode_ranges_body
from rocketq.client.testing import pull_header, send_header
from rocketq.client.transport.aio import RemotingClient

HOST = ("127.0.0.1", 10911)
BORN = ("10.0.0.2", 5555)
COMMIT, ROLLBACK = 8, 12
TOPIC = "TopicB"


def make_store(root: Path) -> MessageStore:
    return small_store(
        root,
        mapped_file_size_commit_log_bytes=512 * 1024,
        mapped_file_size_consume_queue_units=400,
        max_message_size_bytes=64 * 1024,
        max_hash_slot_num=64,
        max_index_num=1000,
        clean_resource_interval_ms=3_600_000,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = make_store(tmp_path)
    s.start()
    yield s
    s.shutdown()


def batch(
    n: int, *, queue_id: int = 0, tag: str = "b", group: str = "PG", born_ms: int | None = None, **extra: str
) -> list[MessageToStore]:
    born = born_ms if born_ms is not None else int(time.time() * 1000)
    return [
        MessageToStore(
            topic=TOPIC,
            queue_id=queue_id,
            body=f"{tag}-{i}".encode() * 3,
            sys_flag=4,
            properties={
                "TRAN_MSG": "true",
                "PGROUP": group,
                "UNIQ_KEY": new_uniq_key(),
                "KEYS": f"k{i}",
                "color": "blue",
                **extra,
            },
            born_timestamp=born,
            born_host=BORN,
            store_host=HOST,
        )
        for i in range(n)
    ]


def prepare(svc: TransactionalMessageService, msgs: list[MessageToStore]) -> AppendMessageResult:
    result = svc.prepare_half_batch(msgs)
    assert result.is_ok and result.append_result is not None
    return result.append_result


def ranged_header(first: AppendMessageResult, kind: int, group: str = "PG") -> EndTransactionRequestHeader:
    msg_id = first.msg_id.split(",")[0]
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=first.queue_offset,
        commit_log_offset=decode_offset_msg_id(msg_id)[2],
        commit_or_rollback=kind,
        msg_id=msg_id,
    )


def pull_all(store: MessageStore, topic: str, queue_id: int) -> list[StoredMessage]:
    assert store.wait_dispatched()
    res = store.get_message("g", topic, queue_id, 0, 1000, 1 << 24)
    if res.status is not GetMessageStatus.FOUND:
        return []
    out = [decode_stored_message(b, decompress=False) for b in res.buffers]
    res.release()
    return out


# ------------------------------------------------------------------ store level


def test_half_batch_is_one_invisible_append(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    msgs = batch(5, queue_id=1)
    ar = prepare(svc, msgs)
    assert ar.queue_offset == 0 and ar.msg_num == 5 and len(ar.msg_id.split(",")) == 5
    halves = pull_all(store, HALF_TOPIC, 0)
    assert [h.queue_offset for h in halves] == [0, 1, 2, 3, 4]
    assert [h.physical_offset for h in halves] == [decode_offset_msg_id(m)[2] for m in ar.msg_id.split(",")]
    for h, m in zip(halves, msgs, strict=True):
        assert h.properties["REAL_TOPIC"] == TOPIC and h.properties["REAL_QID"] == "1"
        assert h.properties["UNIQ_KEY"] == m.properties["UNIQ_KEY"]  # type: ignore[index]
        assert h.sys_flag & TRANSACTION_TYPE_MASK == 0 and h.body == m.body
    assert pull_all(store, TOPIC, 1) == []


def test_ranged_commit_is_visible_per_queue_at_once(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    arrivals: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda t, q, m: arrivals.append((t, q, m)) if t == TOPIC else None)
    b1, b2, b3 = batch(4, queue_id=0, tag="a"), batch(3, queue_id=1, tag="b"), batch(5, queue_id=0, tag="c")
    a1, a2, a3 = prepare(svc, b1), prepare(svc, b2), prepare(svc, b3)
    store.put_message(
        MessageToStore(
            topic="Other",
            queue_id=0,
            body=b"noise",
            properties={},
            born_timestamp=1,
            born_host=BORN,
            store_host=HOST,
        )
    )
    assert pull_all(store, TOPIC, 0) == [] and pull_all(store, TOPIC, 1) == []
    ranges = [(a1.queue_offset, 4), (a2.queue_offset, 3), (a3.queue_offset, 5)]
    result = svc.end_transaction_ranges(ranged_header(a1, COMMIT), ranges)
    assert result.code == ResponseCode.SUCCESS and (result.ended, result.skipped) == (12, 0), result
    assert "committed 12" in result.remark
    q0, q1 = pull_all(store, TOPIC, 0), pull_all(store, TOPIC, 1)
    assert [m.body for m in q0] == [m.body for m in b1 + b3] and [m.body for m in q1] == [m.body for m in b2]
    for got, sent, origin in zip(
        q0 + q1, b1 + b3 + b2, list(range(4)) + list(range(7, 12)) + list(range(4, 7)), strict=True
    ):
        expected = dict(sent.properties)  # type: ignore[arg-type]
        expected["TRAN_PREPARED_QUEUE_OFFSET"] = str(origin)
        got_props = {k: v for k, v in got.properties.items() if k != "CLUSTER"}
        assert got_props == expected
        assert got.sys_flag & TRANSACTION_TYPE_MASK == 8
    # one append per queue: the 9 records of queue 0 are back to back, and arrive in one step
    assert all(q0[i].physical_offset + q0[i].total_size == q0[i + 1].physical_offset for i in range(8))
    assert {m for t, q, m in arrivals if q == 0} == {9} and {m for t, q, m in arrivals if q == 1} == {3}
    ops = pull_all(store, OP_TOPIC, 0)
    assert len(ops) == 1 and sorted(parse_op_body(ops[0].body)) == list(range(12))
    assert all(svc.is_finished(i) for i in range(12))


def test_ranged_rollback_and_idempotent_repeats(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    a1, a2 = prepare(svc, batch(3)), prepare(svc, batch(2))
    rb = svc.end_transaction_ranges(ranged_header(a1, ROLLBACK), [(0, 3)])
    assert rb.code == ResponseCode.SUCCESS and rb.ended == 3 and "rolled back 3" in rb.remark
    assert pull_all(store, TOPIC, 0) == []
    first = svc.end_transaction_ranges(ranged_header(a1, COMMIT), [(0, 3), (3, 2)])
    assert (first.code, first.ended, first.skipped) == (ResponseCode.SUCCESS, 2, 3)
    again = svc.end_transaction_ranges(ranged_header(a1, COMMIT), [(0, 3), (3, 2)])
    assert (again.code, again.ended, again.skipped) == (
        ResponseCode.SUCCESS,
        0,
        5,
    ) and "skipped 5" in again.remark
    assert len(pull_all(store, TOPIC, 0)) == 2
    assert len(pull_all(store, OP_TOPIC, 0)) == 2  # nothing written by the repeat
    assert a2.queue_offset == 3


def test_refusals_write_nothing(store: MessageStore) -> None:
    svc = TransactionalMessageService(
        store, TransactionConfig(transaction_batch_max_messages=4, transaction_batch_max_bytes=200)
    )
    a1 = prepare(svc, batch(3))
    too_many = svc.end_transaction_ranges(ranged_header(a1, COMMIT), [(0, 3), (3, 2)])
    assert (
        too_many.code == ResponseCode.MESSAGE_ILLEGAL and "transactionBatchMaxMessages=4" in too_many.remark
    )
    assert "split" in too_many.remark
    too_big = svc.end_transaction_ranges(ranged_header(a1, COMMIT), [(0, 3)])
    assert too_big.code == ResponseCode.MESSAGE_ILLEGAL and "transactionBatchMaxBytes=200" in too_big.remark
    svc = TransactionalMessageService(store)
    assert (
        svc.end_transaction_ranges(ranged_header(a1, COMMIT, "other"), [(0, 3)]).code
        == ResponseCode.SYSTEM_ERROR
    )
    missing = svc.end_transaction_ranges(ranged_header(a1, COMMIT), [(0, 5)])
    assert missing.code == ResponseCode.SYSTEM_ERROR and "half offset 3 not found" in missing.remark
    wrong = ranged_header(a1, COMMIT).replace(commit_log_offset=a1.wrote_offset + 1)
    assert svc.end_transaction_ranges(wrong, [(0, 3)]).remark == "The commit log offset wrong"
    unknown = svc.end_transaction_ranges(ranged_header(a1, 0), [(0, 3)])
    assert unknown.code == ResponseCode.SUCCESS and unknown.ended == 0
    assert pull_all(store, TOPIC, 0) == [] and pull_all(store, OP_TOPIC, 0) == []


def test_large_group_respects_the_store_batch_limit(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    big = [
        MessageToStore(
            topic=TOPIC,
            queue_id=2,
            body=bytes([i]) * 30_000,
            sys_flag=4,
            properties={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": new_uniq_key()},
            born_timestamp=1,
            born_host=BORN,
            store_host=HOST,
        )
        for i in range(3)
    ]
    ars = [prepare(svc, big[:2]), prepare(svc, big[2:])]
    result = svc.end_transaction_ranges(ranged_header(ars[0], COMMIT), [(0, 2), (2, 1)])
    assert result.code == ResponseCode.SUCCESS and result.ended == 3
    assert [m.body for m in pull_all(store, TOPIC, 2)] == [m.body for m in big]


def test_delayed_messages_go_through_the_schedule_topic(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = prepare(svc, batch(2, DELAY="3"))
    assert svc.end_transaction_ranges(ranged_header(ar, COMMIT), [(0, 2)]).ended == 2
    assert pull_all(store, TOPIC, 0) == []
    sched = pull_all(store, "SCHEDULE_TOPIC_XXXX", 2)
    assert len(sched) == 2 and all(m.properties["REAL_TOPIC"] == TOPIC for m in sched)
    single = prepare(svc, batch(1, DELAY="1"))  # the single-message commit applies the delay too
    header = ranged_header(single, COMMIT)
    assert svc.end_transaction(header) == (ResponseCode.SUCCESS, None)
    assert len(pull_all(store, "SCHEDULE_TOPIC_XXXX", 0)) == 1


def test_batch_half_message_is_checked_back_individually(store: MessageStore) -> None:
    svc = TransactionalMessageService(store, TransactionConfig(transaction_timeout_ms=1000))
    ar = prepare(svc, batch(3, born_ms=int(time.time() * 1000) - 60_000))
    calls: list[CheckTransactionStateRequestHeader] = []
    assert store.wait_dispatched()

    def record(group: str, body: bytes, header: CheckTransactionStateRequestHeader) -> bool:
        calls.append(header)
        return True

    stats = svc.check(int(time.time() * 1000), record)
    assert stats.checked == 3 and [c.tran_state_table_offset for c in calls] == [3, 4, 5]
    c = calls[1]  # the producer answers the check of the 2nd message: commit
    answer = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=c.tran_state_table_offset,
        commit_log_offset=c.commit_log_offset,
        commit_or_rollback=COMMIT,
        from_transaction_check=True,
        msg_id=c.offset_msg_id or "",
    )
    assert svc.end_transaction(answer) == (ResponseCode.SUCCESS, None)
    assert len(pull_all(store, TOPIC, 0)) == 1
    result = svc.end_transaction_ranges(ranged_header(ar, COMMIT), [(0, 3)])
    assert (result.ended, result.skipped) == (2, 1)
    assert sorted(m.body for m in pull_all(store, TOPIC, 0)) == sorted(m.body for m in batch(3))
    assert svc.check(int(time.time() * 1000), lambda g, body, h: True).checked == 0


def test_processor_ranged_request(store: MessageStore) -> None:
    svc = TransactionalMessageService(store)
    ar = prepare(svc, batch(3))
    ext = ranged_header(ar, COMMIT).to_ext_fields()
    ext["rqRanges"] = "true"
    cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, ext, encode_ranges_body([(0, 3)]))
    resp = asyncio.run(process_end_transaction(svc, cmd))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    assert resp.ext_fields["rqEnded"] == "3" and resp.ext_fields["rqSkipped"] == "0"
    for body, code in (
        (b"{}", ResponseCode.MESSAGE_ILLEGAL),
        (b'{"ranges":[[0,0]]}', ResponseCode.MESSAGE_ILLEGAL),
        (encode_ranges_body([(1, 2)]), ResponseCode.MESSAGE_ILLEGAL),
    ):
        resp = asyncio.run(
            process_end_transaction(svc, RemotingCommand.request(RequestCode.END_TRANSACTION, ext, body))
        )
        assert resp is not None and resp.code == code, body
    oneway = RemotingCommand.request(
        RequestCode.END_TRANSACTION, ext, encode_ranges_body([(0, 3)]), oneway=True
    )
    assert asyncio.run(process_end_transaction(svc, oneway)) is None
    assert len(pull_all(store, TOPIC, 0)) == 3


# ------------------------------------------------------------------ over TCP, in-process broker

Scenario = Callable[[RemotingClient, str], Awaitable[None]]


def run_broker(tmp_path: Path, scenario: Scenario, **conf: str) -> None:
    """``scenario(client, addr)`` against an in-process broker with a small store."""
    run_broker_with_controller(tmp_path, lambda _controller, client, addr: scenario(client, addr), **conf)


def batch_request(items: list[dict[str, str]], *, sys_flag: int = 4, queue_id: int = 1) -> RemotingCommand:
    header = send_header(
        TOPIC,
        queue_id=queue_id,
        properties="WAIT\x01true\x02",
        producer_group="PG",
        sys_flag=sys_flag,
        batch=True,
    )
    body = encode_batch([(0, f"row-{i}".encode(), props) for i, props in enumerate(items)])
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_fields(), body)


def txn_props(group: str = "PG", **extra: Any) -> dict[str, str]:
    return {"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": new_uniq_key(), **extra}


async def pull_count(client: RemotingClient, addr: str, queue_id: int) -> int:
    header = pull_header(TOPIC, queue_id, 0, group="cg", max_msg_nums=32, expression_type=None)
    resp = await client.invoke(
        addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields()), 5000
    )
    if resp.code != ResponseCode.SUCCESS:
        return 0
    return int(resp.ext_fields["nextBeginOffset"])


def test_broker_prepared_batch_send_and_ranged_end(tmp_path: Path) -> None:
    async def scenario(client: RemotingClient, addr: str) -> None:
        info = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
        assert json.loads(info.body)["table"]["rocketqTransactionBatch"] == "1"
        r = await client.invoke(addr, batch_request([txn_props() for _ in range(4)]), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["rqHalfCount"] == "4" and r.ext_fields["queueId"] == "1"
        assert r.ext_fields["queueOffset"] == "0" and len(r.ext_fields["msgId"].split(",")) == 4
        assert await pull_count(client, addr, 1) == 0
        first = r.ext_fields["msgId"].split(",")[0]
        ext = EndTransactionRequestHeader(
            producer_group="PG",
            tran_state_table_offset=0,
            commit_log_offset=decode_offset_msg_id(first)[2],
            commit_or_rollback=COMMIT,
            msg_id=first,
        ).to_ext_fields()
        ext["rqRanges"] = "true"
        end = await client.invoke(
            addr,
            RemotingCommand.request(RequestCode.END_TRANSACTION, ext, encode_ranges_body([(0, 4)])),
            5000,
        )
        assert end.code == ResponseCode.SUCCESS and end.remark == "committed 4, skipped 0 already ended"
        for _ in range(50):
            if await pull_count(client, addr, 1) == 4:
                break
            await asyncio.sleep(0.05)
        assert await pull_count(client, addr, 1) == 4
        mixed = [txn_props(), {"UNIQ_KEY": new_uniq_key()}]
        r = await client.invoke(addr, batch_request(mixed), 5000)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "TRAN_MSG=true on every message" in (r.remark or "")
        r = await client.invoke(addr, batch_request([txn_props("PG"), txn_props("PG2")]), 5000)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "one producer group" in (r.remark or "")
        r = await client.invoke(addr, batch_request([txn_props(), txn_props()], sys_flag=0), 5000)
        assert (
            r.code == ResponseCode.SUCCESS and r.ext_fields["rqHalfCount"] == "2"
        )  # TRAN_MSG alone suffices
        r = await client.invoke(addr, batch_request([{"UNIQ_KEY": new_uniq_key()}], sys_flag=0), 5000)
        assert (
            r.code == ResponseCode.SUCCESS and "rqHalfCount" not in r.ext_fields
        )  # a plain batch is unchanged

    run_broker(tmp_path, scenario)
