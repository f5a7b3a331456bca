"""Message traces of the Spark source (``enableMsgTrace``): SubBefore/SubAfter records per row.

A source task is the consumer: each Arrow batch it hands to Spark gets a SubBefore record per
row (the source's ``group``, the row's msgId, keys and retry count, one request id per batch)
when it is yielded, and a SubAfter record per row when Spark asks for the next batch (the time
Spark spent on the batch, divided by its rows, as Java divides a listener call's time by its
batch size; success unless the task failed while holding the batch).  Records go through one
:class:`BlockingTraceDispatcher` per Python worker and (group, trace topic, client settings),
kept for the worker's life like the sink's producers; sending never blocks the read, and records
still queued when a worker exits are lost (traces are best-effort, as in RocketMQ).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from rocketq.client.blocking_trace import BlockingTraceDispatcher
from rocketq.client.config import ClientConfig
from rocketq.client.remoting.msgid import new_uniq_key
from rocketq.client.trace.model import ConsumeReturnType, TraceRecord, TraceType
from rocketq.connector.options import SourceOptions

__all__ = ["traced_batches"]

_DISPATCHERS: dict[tuple[int, str, str, str | None, ClientConfig], BlockingTraceDispatcher] = {}
_LOCK = threading.Lock()


def _dispatcher(opts: SourceOptions) -> BlockingTraceDispatcher:
    key = (os.getpid(), opts.name_server, opts.group, opts.trace_topic, opts.client)
    with _LOCK:
        found = _DISPATCHERS.get(key)
        if found is None:
            found = BlockingTraceDispatcher(
                opts.name_server, opts.group, trace_topic=opts.trace_topic, client=opts.client
            )
            _DISPATCHERS[key] = found
        return found


def _sub_before(batch: pa.RecordBatch, group: str, now_ms: int) -> list[TraceRecord]:
    cols = batch.to_pydict()  # only when tracing: one Python object per row and column
    request_id = new_uniq_key()
    return [
        TraceRecord(
            trace_type=TraceType.SubBefore,
            timestamp_ms=now_ms,
            group_name=group,
            topic=topic,
            request_id=request_id,
            msg_id=uniq or msg_id,
            tags=tags,
            keys=" ".join(keys) if keys else None,
            store_host=store_host,
            retry_times=retries,
        )
        for topic, msg_id, uniq, tags, keys, store_host, retries in zip(
            cols["topic"],
            cols["msgId"],
            cols["uniqKey"],
            cols["tags"],
            cols["keys"],
            cols["storeHost"],
            cols["reconsumeTimes"],
            strict=True,
        )
    ]


def _sub_after(before: list[TraceRecord], begin_ms: int, ok: bool) -> list[TraceRecord]:
    end = int(time.time() * 1000)
    cost = max(0, end - begin_ms) // max(1, len(before))
    how = ConsumeReturnType.SUCCESS if ok else ConsumeReturnType.EXCEPTION
    return [
        TraceRecord(
            trace_type=TraceType.SubAfter,
            timestamp_ms=end,
            group_name=b.group_name,
            topic=b.topic,
            request_id=b.request_id,
            msg_id=b.msg_id,
            keys=b.keys,
            cost_time_ms=cost,
            success=ok,
            context_code=how,
        )
        for b in before
    ]


def traced_batches(opts: SourceOptions, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` unchanged, with their SubBefore/SubAfter records sent to the trace topic."""
    dispatcher = _dispatcher(opts)
    for batch in batches:
        if batch.num_rows == 0:
            yield batch
            continue
        begin = int(time.time() * 1000)
        before = _sub_before(batch, opts.group, begin)
        dispatcher.append(before)
        try:
            yield batch
        except GeneratorExit:  # the task stopped reading (a LIMIT): the rows were delivered
            dispatcher.append(_sub_after(before, begin, True))
            raise
        except BaseException:
            dispatcher.append(_sub_after(before, begin, False))
            raise
        dispatcher.append(_sub_after(before, begin, True))
