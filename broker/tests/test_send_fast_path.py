"""The broker's send fast path: column-oriented SEND_BATCH_MESSAGE, appends on the event loop with
their fallbacks to the send executor, and SYNC_FLUSH acknowledgements through the group-commit
callback (store hooks ``put_batch_nowait`` / ``when_flushed``), on a real in-process broker and store."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocketq.broker.processor import send_put as send_module
from rocketq.broker.server import BrokerController
from rocketq.broker.store.config import FlushDiskType, StoreConfig
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageBatchToStore
from rocketq.broker.testing import Scenario
from rocketq.broker.testing import run_broker as _run_broker
from rocketq.client.remoting.batch import encode_batch
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.codes import ResponseCode as R
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    QueryMessageRequestHeader,
)
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.testing import pull_header, send_header
from rocketq.client.transport.aio import RemotingClient

HOST = ("127.0.0.1", 10911)


def run_broker(tmp_path: Path, scenario: Scenario, **conf: str) -> None:
    _run_broker(
        tmp_path,
        scenario,
        **{
            "brokerName": "broker-f",
            "mappedFileSizeCommitLog": str(1 << 20),
            "maxMessageSize": str(512 * 1024),
            **conf,
        },
    )


def header(*, props: str = "", batch: bool = False, queue_id: int = 0) -> dict[str, str]:
    return send_header("TF", queue_id=queue_id, properties=props, batch=batch).to_ext_fields()


async def send_batch(client: RemotingClient, addr: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    req = RemotingCommand.request(
        RC.SEND_BATCH_MESSAGE, header(props="WAIT\x01true\x02", batch=True, queue_id=queue_id), body
    )
    return await client.invoke(addr, req, 10_000)


async def send_one(
    client: RemotingClient, addr: str, body: bytes = b"one", queue_id: int = 0
) -> RemotingCommand:
    req = RemotingCommand.request(
        RC.SEND_MESSAGE_V2, header(props="UNIQ_KEY\x01U-one\x02", queue_id=queue_id), body
    )
    return await client.invoke(addr, req, 10_000)


async def pull_all(client: RemotingClient, addr: str, queue_id: int = 0) -> list[Any]:
    ext = pull_header("TF", queue_id, 0, group="cg", max_msg_nums=32, expression_type=None).to_ext_fields()
    r = await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, ext), 5000)
    assert r.code == R.SUCCESS, (r.code, r.remark)
    return list(iter_stored_messages(r.body))


def test_batch_columns_cluster_flags_and_unique_keys(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        entries = [
            (7, b"b0", b"UNIQ_KEY\x01U0\x02KEYS\x01k0\x02"),
            (8, b"b1", b"UNIQ_KEY\x01U1\x02CLUSTER\x01Other\x02"),  # CLUSTER kept as sent
            (9, b"b2", b"UNIQ_KEY\x01U2\x02MYDELAY\x013"),  # not a delay; no trailing \x02
            (0, b"", b""),
        ]
        r = await send_batch(client, addr, encode_batch(entries))
        assert r.code == R.SUCCESS, r.remark
        assert len(r.ext_fields["msgId"].split(",")) == 4
        assert c.store.wait_dispatched()
        msgs = await pull_all(client, addr)
        assert [m.body for m in msgs] == [b"b0", b"b1", b"b2", b""]
        assert [m.flag for m in msgs] == [7, 8, 9, 0]
        cluster = c.config.broker_cluster_name
        assert [m.properties.get("CLUSTER") for m in msgs] == [cluster, "Other", cluster, cluster]
        assert msgs[2].properties["MYDELAY"] == "3" and msgs[0].properties["KEYS"] == "k0"
        ext = QueryMessageRequestHeader(
            topic="TF", key="U1", max_num=4, begin_timestamp=0, end_timestamp=2**62
        ).to_ext_fields()
        q = await client.invoke(addr, RemotingCommand.request(RC.QUERY_MESSAGE, ext), 5000)
        assert q.code == R.SUCCESS and [m.body for m in iter_stored_messages(q.body)] == [b"b1"]

    run_broker(tmp_path, scenario)


def test_batch_rejections(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        delayed = encode_batch(
            [(0, b"a", b"UNIQ_KEY\x01U0\x02"), (0, b"b", b"DELAY\x012\x02UNIQ_KEY\x01U1\x02")]
        )
        r = await send_batch(client, addr, delayed)
        assert r.code == R.MESSAGE_ILLEGAL and "delay" in (r.remark or "")
        r = await send_batch(client, addr, b"\x00\x00\x00\x30garbage")
        assert r.code == R.MESSAGE_ILLEGAL and "malformed" in (r.remark or "")
        too_big = encode_batch([(0, b"x" * (300 * 1024), b""), (0, b"y" * (300 * 1024), b"")])
        r = await send_batch(client, addr, too_big)
        assert r.code == R.MESSAGE_ILLEGAL and "maxMessageSize" in (r.remark or "")
        assert c.store.max_phy_offset == 0

    run_broker(tmp_path, scenario)


def test_big_batch_runs_on_the_executor_and_busy_answers_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(send_module, "INLINE_PUT_MAX_BYTES", 256 * 1024)  # below this broker's maxMessageSize

    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        assert c.ctx is not None
        big = encode_batch([(0, b"z" * 1000, b"UNIQ_KEY\x01U%d\x02" % i) for i in range(300)])
        assert len(big) > send_module.INLINE_PUT_MAX_BYTES
        r = await send_batch(client, addr, big)
        assert r.code == R.SUCCESS, r.remark
        ex = c.ctx.send_executor
        capacity, ex._capacity = ex._capacity, 0  # a full send queue
        try:
            r = await send_batch(client, addr, big)
            assert r.code == R.SYSTEM_BUSY and (r.remark or "").startswith("[REJECTREQUEST]")
            # A small send is appended on the loop: it does not queue behind the executor.
            assert (await send_one(client, addr)).code == R.SUCCESS
            # ... unless the append would wait (another thread holds the append lock): then it queues.
            with c.store.commit_log.put_lock:
                r = await send_one(client, addr)
            assert r.code == R.SYSTEM_BUSY and (r.remark or "").startswith("[REJECTREQUEST]")
        finally:
            ex._capacity = capacity

    run_broker(tmp_path, scenario)


def test_segment_roll_and_locked_appends_fall_back_to_the_executor(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        body = encode_batch([(0, b"r" * 1000, b"UNIQ_KEY\x01U%d\x02" % i) for i in range(100)])  # ~100 KB
        for i in range(25):  # 2.5 MB over 1 MiB segments: rolls twice
            r = await send_batch(client, addr, body, queue_id=i % 4)
            assert r.code == R.SUCCESS, r.remark
        assert len(c.store.commit_log.mfq.files) >= 3

        lock = c.store.commit_log.put_lock
        lock.acquire()
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, lock.release)
        started = time.monotonic()
        r = await send_one(client, addr)  # waits in an executor thread, the loop keeps running
        assert r.code == R.SUCCESS and time.monotonic() - started >= 0.15
        assert c.store.wait_dispatched()

    run_broker(tmp_path, scenario)


def test_sync_flush_sends_are_acknowledged_after_the_group_commit(tmp_path: Path) -> None:
    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        results = await asyncio.gather(
            *(send_one(client, addr, b"s%d" % i, queue_id=i % 4) for i in range(40)),
            send_batch(client, addr, encode_batch([(0, b"x", b"")] * 10)),
        )
        assert all(r.code == R.SUCCESS for r in results), [(r.code, r.remark) for r in results]
        assert c.store.commit_log.flushed_where >= c.store.max_phy_offset - 1  # nothing acked unflushed
        # a disk that never finishes its flush
        c.store.when_flushed = lambda offset, callback: None  # type: ignore[method-assign]
        r = await send_one(client, addr)
        assert r.code == R.FLUSH_DISK_TIMEOUT and r.ext_fields.get("msgId")  # stored, not durable in time

    run_broker(tmp_path, scenario, flushDiskType="SYNC_FLUSH", syncFlushTimeout="200")


def _store(tmp_path: Path, flush: FlushDiskType, **kw: Any) -> MessageStore:
    cfg = StoreConfig(
        store_path_root_dir=str(tmp_path),
        mapped_file_size_commit_log_bytes=64 * 1024,
        mapped_file_size_consume_queue_units=1000,
        max_hash_slot_num=100,
        max_index_num=400,
        max_message_size_bytes=60_000,
        flush_disk_type=flush,
        **kw,
    )
    store = MessageStore(cfg)
    store.start()
    return store


def _batch(n: int, size: int = 100) -> MessageBatchToStore:
    return MessageBatchToStore(
        topic="T",
        queue_id=0,
        born_host=HOST,
        store_host=HOST,
        bodies=[b"b" * size] * n,
        properties=[b"UNIQ_KEY\x01u%d\x02" % i for i in range(n)],
        born_timestamps=1,
    )


def test_store_put_batch_nowait_and_when_flushed(tmp_path: Path) -> None:
    store = _store(tmp_path / "sync", FlushDiskType.SYNC_FLUSH)
    try:
        creates = store.put_batch_nowait(_batch(1))  # no segment yet: its creation could wait
        assert callable(creates) and creates()[0].is_ok
        outcome = store.put_batch_nowait(_batch(3))
        assert not callable(outcome)
        result, durable_at = outcome
        assert result.is_ok and durable_at == store.max_phy_offset
        done = threading.Event()
        seen: list[bool] = []

        def flushed(ok: bool) -> None:
            seen.append(ok)
            done.set()

        store.when_flushed(durable_at, flushed)
        assert done.wait(5) and seen == [True] and store.commit_log.flushed_where >= durable_at
        store.when_flushed(durable_at, seen.append)  # already durable: called at once
        assert seen == [True, True]
        with store.commit_log.put_lock:
            pending = store.put_batch_nowait(_batch(2))
        assert callable(pending)
        result, durable_at = pending()
        assert result.is_ok and durable_at == store.max_phy_offset
        first = store.put_batch_nowait(_batch(40, 1000))
        assert not callable(first) and first[0].is_ok
        rolled = store.put_batch_nowait(_batch(40, 1000))  # does not fit in the 64 KiB segment: new file
        assert callable(rolled) and rolled()[0].is_ok and len(store.commit_log.mfq.files) == 2
        illegal, durable_at = store.put_batch_nowait(_batch(0))  # type: ignore[misc]
        assert illegal.status.name == "MESSAGE_ILLEGAL" and durable_at == 0
        # A callback registered for an offset that is never flushed is called with False on shutdown.
        store._group_commit._stop.set()  # type: ignore[union-attr]
        late: list[bool] = []
        store.when_flushed(store.max_phy_offset + 10**6, late.append)
        assert late == [False]
    finally:
        store.shutdown()
    astore = _store(tmp_path / "async", FlushDiskType.ASYNC_FLUSH)
    try:
        assert astore.put_batch(_batch(1)).is_ok
        outcome = astore.put_batch_nowait(_batch(3))
        assert not callable(outcome) and outcome[0].is_ok and outcome[1] == 0
        wait_false = astore.put_batch_nowait(
            MessageBatchToStore(
                topic="T",
                queue_id=0,
                born_host=HOST,
                store_host=HOST,
                bodies=[b"w"],
                properties=[b"WAIT\x01false\x02"],
                born_timestamps=1,
            )
        )
        assert not callable(wait_false) and wait_false[1] == 0
    finally:
        astore.shutdown()


def test_group_commit_callbacks_pending_at_shutdown_get_false(tmp_path: Path) -> None:
    store = _store(tmp_path, FlushDiskType.SYNC_FLUSH)
    gc = store._group_commit
    assert gc is not None
    seen: list[bool] = []
    gc.add_flush_callback(10**9, seen.append)  # never reached
    store.shutdown()
    assert seen == [False]


def test_pulls_of_recent_data_run_on_the_loop_older_ones_on_the_executor(tmp_path: Path) -> None:
    from rocketq.broker.processor import pull as pull_module

    async def scenario(c: BrokerController, client: RemotingClient, addr: str) -> None:
        assert c.ctx is not None
        r = await send_batch(
            client, addr, encode_batch([(0, b"p%d" % i, b"UNIQ_KEY\x01P%d\x02" % i) for i in range(5)])
        )
        assert r.code == R.SUCCESS and c.store.wait_dispatched()
        assert c.store.check_in_mem_by_consume_offset("TF", 0, 0, 1 << 20)
        assert not c.store.check_in_mem_by_consume_offset("TF", 0, 0, 0)
        assert c.store.check_in_mem_by_consume_offset("TF", 0, 5, 0)  # nothing to read there
        ex = c.ctx.pull_executor
        capacity, ex._capacity = ex._capacity, 0
        behind = pull_module.INLINE_READ_MAX_BEHIND_BYTES
        try:
            assert [m.body for m in await pull_all(client, addr)] == [b"p%d" % i for i in range(5)]
            pull_module.INLINE_READ_MAX_BEHIND_BYTES = 0  # "old" data: read on the (full) executor
            ext = pull_header("TF", 0, 0, group="cg", max_msg_nums=32, expression_type=None).to_ext_fields()
            busy = await client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, ext), 5000)
            assert busy.code == R.SYSTEM_BUSY and (busy.remark or "").startswith("[REJECTREQUEST]")
        finally:
            ex._capacity = capacity
            pull_module.INLINE_READ_MAX_BEHIND_BYTES = behind

    run_broker(tmp_path, scenario)
