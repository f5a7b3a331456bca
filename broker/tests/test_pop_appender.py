"""POP records and replication: put_records answers only after the context's replication wait
for the end of the last record it stored (SYNC_MASTER, controller mode), and not at all before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.pop.appender import put_records
from rocketq.broker.pop.records import AckMsg, ack_message
from rocketq.broker.processor.context import build_context
from rocketq.broker.store.config import FlushDiskType
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.testing import SMALL_STORE_CONF, small_store
from rocketq.client.remoting.message import decode_stored_message
from rocketq.client.remoting.vocabulary import revive_topic


def test_put_records_waits_for_the_replicas_of_its_last_record(tmp_path: Path) -> None:
    async def main() -> None:
        store = small_store(tmp_path / "store", start=True)
        overrides = {**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path)}
        ctx = build_context(load_broker_config(None, overrides=overrides), store, asyncio.get_running_loop())
        waited: list[int] = []
        release = asyncio.Event()

        async def replicated(offset: int) -> PutMessageStatus:
            waited.append(offset)
            await release.wait()
            return PutMessageStatus.PUT_OK

        ctx.replicated = replicated
        acks = [
            ack_message(
                AckMsg(ack_offset=i, start_offset=0, consumer_group="g", topic="T", queue_id=0, pop_time=1),
                invisible_time=10_000,
                revive_topic=revive_topic("c"),
                revive_qid=0,
                now_ms=1_700_000_000_000,
                store_host=("127.0.0.1", 1),
            )
            for i in range(3)
        ]
        try:
            task = asyncio.create_task(put_records(ctx, acks))
            for _ in range(200):
                if waited:
                    break
                await asyncio.sleep(0.01)
            assert waited == [store.max_phy_offset], "waits once, for the end of the last record"
            await asyncio.sleep(0.05)
            assert not task.done(), "answered before the replicas had the records"
            release.set()
            results = await asyncio.wait_for(task, 5)
            assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 3
        finally:
            store.shutdown()

    asyncio.run(main())


def _ack(i: int, revive_qid: int) -> MessageToStore:
    return ack_message(
        AckMsg(ack_offset=i, start_offset=0, consumer_group="g", topic="T", queue_id=0, pop_time=1),
        invisible_time=10_000,
        revive_topic=revive_topic("c"),
        revive_qid=revive_qid,
        now_ms=1_700_000_000_000,
        store_host=("127.0.0.1", 1),
    )


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_put_records_stores_the_records_of_a_queue_as_batches_in_order(
    tmp_path: Path, flush: FlushDiskType
) -> None:
    # 8 KiB messages at most: 40 acks of one queue (~300 B each) need several batches
    async def main() -> None:
        store = small_store(
            tmp_path / "store", start=True, mapped_file_size_commit_log_bytes=1 << 20, flush_disk_type=flush
        )
        overrides = {**SMALL_STORE_CONF, "storePathRootDir": str(tmp_path)}
        ctx = build_context(load_broker_config(None, overrides=overrides), store, asyncio.get_running_loop())
        msgs = [_ack(i, revive_qid=i % 2) for i in range(80)]
        try:
            results = await put_records(ctx, msgs)
            assert all(r.is_ok for r in results) and len(results) == 80
            batches = {id(r): r for r in results}.values()
            assert 4 <= len(batches) < 80, "each queue's acks in a few batches, not one put each"
            assert all(r.append_result and r.append_result.wrote_bytes <= 4096 for r in batches)
            for _ in range(200):  # dispatched on the loop or the dispatch thread
                if all(store.get_max_offset_in_queue(revive_topic("c"), q) == 40 for q in (0, 1)):
                    break
                await asyncio.sleep(0.01)
            for qid in (0, 1):
                assert store.get_max_offset_in_queue(revive_topic("c"), qid) == 40
                got = store.get_message("x", revive_topic("c"), qid, 0, 64, 1 << 20)
                try:
                    bodies = [decode_stored_message(b).body for b in got.buffers]
                finally:
                    got.release()
                assert bodies == [m.body for m in msgs if m.queue_id == qid]
        finally:
            store.shutdown()

    asyncio.run(main())
