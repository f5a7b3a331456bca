"""POP records and replication: put_records answers only after the context's replication wait
for the end of the last record it stored (SYNC_MASTER, controller mode), and not at all before."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketq.broker.config_loader import load_broker_config
from rocketq.broker.pop.appender import put_records
from rocketq.broker.pop.records import AckMsg, ack_message
from rocketq.broker.processor.context import build_context
from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.testing import SMALL_STORE_CONF, small_store
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
