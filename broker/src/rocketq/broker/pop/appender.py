"""Putting POP records (checkpoints, acks) into the store from the event loop.

A checkpoint or an ack is one small record, written on every POP and ACK: with ASYNC_FLUSH it is
appended on the event loop when that cannot wait (``MessageStore.put_batch_nowait``, as the send
path does for small sends), else on the send executor.  With SYNC_FLUSH every record goes through
the blocking ``put_message`` on the send executor, which returns once the group commit made it
durable, so a POP is not answered before its checkpoint is on disk.  On a SYNC_MASTER and in
controller mode, the records are replicated before the POP or ACK is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.config import FlushDiskType
from rocketq.broker.store.record_batch import MessageToStore, batch_from_messages
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus

__all__ = ["put_records"]


async def put_records(ctx: BrokerContext, msgs: Sequence[MessageToStore]) -> list[PutMessageResult]:
    """Store each record; raises :class:`~rocketq.broker.executor.Busy` when the executor is full.

    On a SYNC_MASTER and in controller mode it returns once the slaves hold the last record, as
    Java's POP and ACK processors (whose puts wait for HA) do: an ack answered before that could be
    lost with the master, and the message delivered again by the slave that takes over.  A slave
    that is late or missing is logged by the replication, not an error of the records: they are
    stored either way (as a send's FLUSH_SLAVE_TIMEOUT).
    """
    results = await _put_records(ctx, msgs)
    ends = [r.append_result.wrote_offset + r.append_result.wrote_bytes for r in results if r.append_result]
    if ctx.replicated is not None and ends:
        await ctx.replicated(max(ends))
    ctx.pop_stats.record_revive_puts(msgs, results)  # POP in-flight counts (metrics/pop.py)
    return results


async def _put_records(ctx: BrokerContext, msgs: Sequence[MessageToStore]) -> list[PutMessageResult]:
    store = ctx.store
    if store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
        return await ctx.send_executor.run(lambda: [store.put_message(m) for m in msgs])
    results: list[PutMessageResult] = []
    for msg in msgs:
        batch = batch_from_messages((msg,))
        if batch is None:
            results.append(PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL))
            continue
        outcome = store.put_batch_nowait(batch, wake=False)
        asyncio.get_running_loop().call_soon(store.dispatch_appended)
        if callable(outcome):
            outcome = await ctx.send_executor.run(outcome)
        results.append(outcome[0])
    return results
