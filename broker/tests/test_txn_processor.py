"""END_TRANSACTION processor: oneway and two-way requests, bad headers, slave, unknown state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.broker.processor.end_transaction import process_end_transaction
from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import AppendMessageResult, GetMessageStatus
from rocketq.broker.transaction import TransactionalMessageService
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import EndTransactionRequestHeader

HOST = ("127.0.0.1", 10911)


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[TransactionalMessageService]:
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(tmp_path),
            mapped_file_size_commit_log_bytes=128 * 1024,
            mapped_file_size_consume_queue_units=100,
            max_message_size_bytes=16 * 1024,
            max_hash_slot_num=64,
            max_index_num=500,
        )
    )
    store.start()
    yield TransactionalMessageService(store)
    store.shutdown()


def half(svc: TransactionalMessageService) -> AppendMessageResult:
    msg = MessageToStore(
        topic="TopicT",
        queue_id=0,
        body=b"x",
        sys_flag=4,
        properties={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "U" * 32},
        born_timestamp=int(time.time() * 1000),
        born_host=HOST,
        store_host=HOST,
    )
    ar = svc.prepare(msg).append_result
    assert ar is not None
    return ar


def request(ar: AppendMessageResult, kind: int, *, oneway: bool) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=ar.queue_offset,
        commit_log_offset=ar.wrote_offset,
        commit_or_rollback=kind,
        msg_id=ar.msg_id,
        transaction_id="U" * 32,
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=oneway)


def real_count(svc: TransactionalMessageService) -> int:
    assert svc.store.wait_dispatched()
    res = svc.store.get_message("g", "TopicT", 0, 0, 10, 1 << 20)
    return res.msg_count if res.status is GetMessageStatus.FOUND else 0


def test_oneway_commit_gets_no_response(svc: TransactionalMessageService) -> None:
    ar = half(svc)
    assert asyncio.run(process_end_transaction(svc, request(ar, 8, oneway=True))) is None
    assert real_count(svc) == 1


def test_two_way_commit_and_idempotent_repeat(svc: TransactionalMessageService) -> None:
    ar = half(svc)
    for _ in range(2):
        resp = asyncio.run(process_end_transaction(svc, request(ar, 8, oneway=False)))
        assert resp is not None and resp.is_response and resp.code == ResponseCode.SUCCESS
    assert real_count(svc) == 1


def test_errors_and_ignored_states(svc: TransactionalMessageService) -> None:
    ar = half(svc)
    bad = RemotingCommand.request(RequestCode.END_TRANSACTION, {"producerGroup": "PG"})
    resp = asyncio.run(process_end_transaction(svc, bad))
    assert (
        resp is not None
        and resp.code == ResponseCode.SYSTEM_ERROR
        and "tranStateTableOffset" in (resp.remark or "")
    )
    resp = asyncio.run(process_end_transaction(svc, request(ar, 8, oneway=False), is_slave=True))
    assert resp is not None and resp.code == ResponseCode.SLAVE_NOT_AVAILABLE
    resp = asyncio.run(process_end_transaction(svc, request(ar, 0, oneway=False)))
    assert resp is not None and resp.code == ResponseCode.SUCCESS
    wrong = request(ar, 8, oneway=False)
    wrong.ext_fields["producerGroup"] = "nope"
    resp = asyncio.run(process_end_transaction(svc, wrong))
    assert (
        resp is not None
        and resp.code == ResponseCode.SYSTEM_ERROR
        and resp.remark == "The producer group wrong"
    )
    assert real_count(svc) == 0


def test_offload_hook_is_used(svc: TransactionalMessageService) -> None:
    ar = half(svc)
    used: list[bool] = []

    async def offload(fn):  # type: ignore[no-untyped-def]
        used.append(True)
        return fn()

    resp = asyncio.run(process_end_transaction(svc, request(ar, 12, oneway=False), offload=offload))
    assert resp is not None and resp.code == ResponseCode.SUCCESS and used == [True]
    assert real_count(svc) == 0
