"""Putting POP records (checkpoints, acks) into the store from the event loop.

A checkpoint or an ack is one small record, written on every POP and ACK.  The records of one
request that go to one revive queue (a BATCH_ACK's acks of one pop, a change of invisible
time's checkpoint and ack) are put as one batch: one append, one dispatch.  With ASYNC_FLUSH a
batch is appended on the event loop when that cannot wait (``MessageStore.put_batch_nowait``,
as the send path does for small sends), else on the send executor.  With SYNC_FLUSH each batch
goes through the blocking ``put_messages`` on the send executor, which returns once the group
commit made it durable, so a POP is not answered before its checkpoint is on disk.  On a
SYNC_MASTER and in controller mode, the records are replicated before the POP or ACK is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.config import FlushDiskType
from rocketq.broker.store.record_batch import MessageToStore, batch_from_messages
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus

__all__ = ["MAX_PUTS_PER_BATCH", "put_records"]

#: at most this many records go into one store batch (and at most half of maxMessageSize)
MAX_PUTS_PER_BATCH = 64
#: a record's bytes beyond its body and properties (header, topic), an upper bound for sizing batches
_RECORD_OVERHEAD = 256


async def put_records(ctx: BrokerContext, msgs: Sequence[MessageToStore]) -> list[PutMessageResult]:
    """Store each record (the records of one queue as batches); the result of each, in order.
    Raises :class:`~rocketq.broker.executor.Busy` when the executor is full.

    The records of a batch share its result.  On a SYNC_MASTER and in controller mode it returns
    once the slaves hold the last record, as Java's POP and ACK processors (whose puts wait for
    HA) do: an ack answered before that could be lost with the master, and the message delivered
    again by the slave that takes over.  A slave that is late or missing is logged by the
    replication, not an error of the records: they are stored either way (as a send's
    FLUSH_SLAVE_TIMEOUT).
    """
    results = await _put_records(ctx, msgs)
    ends = [r.append_result.wrote_offset + r.append_result.wrote_bytes for r in results if r.append_result]
    if ctx.replicated is not None and ends:
        await ctx.replicated(max(ends))
    ctx.pop_stats.record_revive_puts(msgs, results)  # POP in-flight counts (metrics/pop.py)
    return results


def _batches(msgs: Sequence[MessageToStore], max_bytes: int) -> list[list[int]]:
    """The indexes of ``msgs`` grouped by queue (in order within one), each group cut to
    :data:`MAX_PUTS_PER_BATCH` records and ``max_bytes``."""
    by_queue: dict[tuple[str, int], list[list[int]]] = {}
    sizes: dict[tuple[str, int], int] = {}
    for i, m in enumerate(msgs):
        key = (m.topic, m.queue_id)
        size = len(m.body) + _text_bound(m.properties) + 4 * len(m.topic) + _RECORD_OVERHEAD
        runs = by_queue.get(key)
        if runs is None or len(runs[-1]) >= MAX_PUTS_PER_BATCH or sizes[key] + size > max_bytes:
            by_queue.setdefault(key, []).append([i])
            sizes[key] = size
        else:
            runs[-1].append(i)
            sizes[key] += size
    return [run for runs in by_queue.values() for run in runs]


def _text_bound(props: Mapping[str, str] | str) -> int:
    """An upper bound of the encoded properties' UTF-8 size."""
    if isinstance(props, str):
        return 4 * len(props)
    return sum(4 * (len(k) + len(v)) + 2 for k, v in props.items())


async def _put_records(ctx: BrokerContext, msgs: Sequence[MessageToStore]) -> list[PutMessageResult]:
    store = ctx.store
    results: list[PutMessageResult | None] = [None] * len(msgs)
    batches = [[0]] if len(msgs) == 1 else _batches(msgs, store.config.max_message_size_bytes // 2)
    if store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:

        def put_all() -> list[PutMessageResult]:
            return [store.put_messages([msgs[i] for i in run]) for run in batches]

        for run, result in zip(batches, await ctx.send_executor.run(put_all), strict=True):
            for i in run:
                results[i] = result
        return [r for r in results if r is not None]
    appended = False
    for run in batches:
        batch = batch_from_messages([msgs[i] for i in run])
        if batch is None:
            for i in run:
                results[i] = PutMessageResult(status=PutMessageStatus.MESSAGE_ILLEGAL)
            continue
        outcome = store.put_batch_nowait(batch, wake=False)
        if not appended:
            appended = True
            asyncio.get_running_loop().call_soon(store.dispatch_appended)
        if callable(outcome):
            outcome = await ctx.send_executor.run(outcome)
        for i in run:
            results[i] = outcome[0]
    return [r for r in results if r is not None]
