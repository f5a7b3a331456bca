"""Storing a send and answering it: where the put runs, the waits before the answer, the response.

Where the put runs.  A request of at most ``INLINE_PUT_MAX_BYTES`` (1 MiB: the Spark sink's
default batch) is appended on the event loop (``MessageStore.put_batch_nowait``: encoding plus one
``pwrite``), which saves two thread hand-offs per send; when the append could wait (another thread
holds the append lock, a new CommitLog segment must be created) or the request is bigger, it runs
on the bounded send executor, whose full queue or stale tasks are answered SYSTEM_BUSY
``[REJECTREQUEST]`` / ``[TIMEOUT_CLEAN_QUEUE]``.  With SYNC_FLUSH neither path blocks on the disk:
the response waits, on the loop, for the group-commit thread's callback
(``MessageStore.when_flushed``), at most ``syncFlushTimeout`` (then FLUSH_DISK_TIMEOUT, the message
being stored).  Half messages keep the blocking store calls on the executor.  On a SYNC_MASTER the
answer then waits, on the loop too, until a slave acknowledged the bytes
(:meth:`Replication.after_put`).  The store's ``PutMessageStatus`` becomes the response code
(:mod:`rocketq.broker.processor.status_codes`); a stored send is answered with its msgId and queue
offset under the queue id the client asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence, Sized

from rocketq.broker.executor import Busy
from rocketq.broker.ha.replication import Replication
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.processor.status_codes import put_response_code, put_status_remark
from rocketq.broker.store.message_store import PutOutcome
from rocketq.broker.store.record_batch import MessageBatchToStore, MessageToStore
from rocketq.broker.store.status import PutMessageResult, PutMessageStatus
from rocketq.broker.transaction.half_message import HALF_TOPIC
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageResponseHeader
from rocketq.client.remoting.properties import MAX_PROPERTIES_SIZE, encode_properties

__all__ = ["INLINE_PUT_MAX_BYTES", "SendPutter"]

#: Requests up to this size are appended on the event loop; bigger ones on the send executor.
INLINE_PUT_MAX_BYTES = 1024 * 1024


class SendPutter:
    """Puts the messages of a send into the store and builds the answer (one per send processor)."""

    def __init__(self, ctx: BrokerContext, replication: Replication | None) -> None:
        self.ctx = ctx
        self.replication = replication

    async def put_batch(
        self,
        request: RemotingCommand,
        batch: MessageBatchToStore,
        *,
        queue_id: int,
        ext: dict[str, str] | None = None,
        topic: str,
    ) -> RemotingCommand:
        """Store ``batch`` (on the loop when small and nothing could wait, else on the send executor)."""
        ctx = self.ctx
        store = ctx.store
        try:
            if len(request.body) <= INLINE_PUT_MAX_BYTES:
                # Dispatched on the loop once this step (which writes the response) is over:
                # waking the dispatch thread instead costs two thread switches per send, and
                # woken at once it would take the GIL first and delay the answer.
                outcome = store.put_batch_nowait(batch, wake=False)
                asyncio.get_running_loop().call_soon(store.dispatch_appended)
                if callable(outcome):
                    outcome = await ctx.send_executor.run(outcome)
            else:
                outcome = await ctx.send_executor.run(lambda: _complete(store.put_batch_nowait(batch)))
        except Busy as busy:
            ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        result, durable_at = outcome
        if durable_at:
            result = await self._durable(result, durable_at)
        if self.replication is not None:
            result = await self.replication.after_put(result)
        return self._respond(
            request,
            result,
            len(batch),
            queue_id=queue_id,
            ext=ext,
            detail=lambda: self._illegal_detail(batch.bodies, batch.properties),
            topic=topic,
            stored_topic=batch.topic,
        )

    async def _durable(self, result: PutMessageResult, durable_at: int) -> PutMessageResult:
        """SYNC_FLUSH: wait (on the loop, no thread) for the group commit to pass ``durable_at``."""
        store = self.ctx.store
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()

        def resolve(ok: bool) -> None:
            if not future.done():
                future.set_result(ok)

        def flushed(ok: bool) -> None:  # group-commit thread (or here, at once)
            try:
                loop.call_soon_threadsafe(resolve, ok)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

        store.when_flushed(durable_at, flushed)
        timer = loop.call_later(store.config.sync_flush_timeout_ms / 1000, resolve, False)
        try:
            ok = await future
        finally:
            timer.cancel()
        return result if ok else store.flush_timed_out(result)

    async def put_blocking(
        self,
        request: RemotingCommand,
        msgs: Sequence[MessageToStore],
        *,
        queue_id: int,
        put: Callable[[], PutMessageResult],
        ext: dict[str, str] | None = None,
        topic: str,
    ) -> RemotingCommand:
        """A blocking store call (half messages) on the send executor."""
        try:
            result = await self.ctx.send_executor.run(put)
        except Busy as busy:
            self.ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if self.replication is not None:
            result = await self.replication.after_put(result)
        return self._respond(
            request,
            result,
            len(msgs),
            queue_id=queue_id,
            ext=ext,
            detail=lambda: self._illegal_detail(
                [m.body for m in msgs], [_props_bytes(m.properties) for m in msgs]
            ),
            topic=topic,
            stored_topic=HALF_TOPIC,
        )

    def _respond(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        count: int,
        *,
        queue_id: int,
        detail: Callable[[], str],
        ext: dict[str, str] | None = None,
        topic: str,
        stored_topic: str,
    ) -> RemotingCommand:
        status = result.status
        code = put_response_code(status)
        if not status.is_ok:
            illegal = status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            return request.make_response(code, put_status_remark(status, detail() if illegal else ""))
        append = result.append_result
        if self.ctx.metrics is not None and append is not None:  # docs/observability.md
            self.ctx.metrics.record_send(topic, stored_topic, count, append.wrote_bytes)
        if append is not None:  # mqadmin statsAll (rocketq.broker.stats_items)
            self.ctx.stats_items.record_put(stored_topic, count, append.wrote_bytes)
        if request.is_oneway or append is None:
            return request.make_response(code)
        self.ctx.stats.put_messages += count
        self.ctx.stats.put_bytes += append.wrote_bytes
        response_header = SendMessageResponseHeader(
            msg_id=append.msg_id,
            queue_id=queue_id,
            queue_offset=append.queue_offset,
            msg_region="DefaultRegion",
            trace_on=True,
        )
        fields = response_header.to_ext_fields()
        if ext:
            fields.update(ext)
        return request.make_response(code, ext_fields=fields)

    def _illegal_detail(self, bodies: Sequence[Sized], properties: Sequence[Sized]) -> str:
        body = max(map(len, bodies))
        props = max(map(len, properties))
        return (
            f"maxMessageSize={self.ctx.config.max_message_size} bytes, body={body} bytes, "
            f"properties={props} bytes (limit {MAX_PROPERTIES_SIZE})"
        )


def _complete(outcome: PutOutcome | Callable[[], PutOutcome]) -> PutOutcome:
    """Finish a ``put_batch_nowait`` in a worker thread (run its continuation if it handed one back)."""
    return outcome() if callable(outcome) else outcome


def _props_bytes(properties: Mapping[str, str] | str) -> bytes:
    if isinstance(properties, str):
        return properties.encode("utf-8")
    return encode_properties(properties).encode("utf-8")
