"""Push consumer on POP (Java's ``DefaultMQPushConsumer`` with ``clientRebalance=false``).

The consumer owns no queues: one task pops from every broker of its subscriptions (queue id -1,
long polling for ``await_duration_s``), hands the messages to the listener and then
- concurrent listener: CONSUME_SUCCESS acks (one BATCH_ACK_MESSAGE per broker per pop through
  ``ack_many``); RECONSUME_LATER (or an exception) changes the message's invisible time to the
  back-off for its ``reconsume_times`` and does not ack, so the broker delivers it again with the
  attempt count raised, and after the group's retryMaxTimes dead-letters it;
- orderly listener (``fifo`` pops with an attemptId): the messages of one queue, in order, one at a
  time; SUSPEND_CURRENT_QUEUE_A_MOMENT changes the invisible time of that message and of the rest
  of its queue's batch to the suspend time, and the broker hands the batch out again then.
At most ``pop_threshold_for_queue`` messages are in flight (popped and not yet acked or changed).
On shutdown the consumer stops popping and waits for the listener calls under way; messages it
did not finish become visible again after their invisible time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from rocketq.client.blocking_facade import BlockingConsumerFacade
from rocketq.client.config import ClientConfig
from rocketq.client.consumer.direct import consume_directly
from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerConcurrently,
    MessageListenerOrderly,
)
from rocketq.client.consumer.simple import AsyncSimpleConsumer
from rocketq.client.consumer.subscription import SUB_ALL, Subscribable
from rocketq.client.errors import MQClientError
from rocketq.client.model import MessageExt, MessageQueue
from rocketq.client.remoting.consume_directly import ConsumeMessageDirectlyResult
from rocketq.client.remoting.pop import ConsumeInitMode, ExtraInfo
from rocketq.client.remoting.properties import MessageConst

__all__ = ["RETRY_BACKOFF_S", "AsyncPopPushConsumer", "PopPushConsumer"]

log = logging.getLogger(__name__)

# Java's messageDelayLevel from level 3 (10s): the back-off of the n-th RECONSUME_LATER
RETRY_BACKOFF_S: tuple[float, ...] = (
    10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
)  # fmt: skip
POP_INVISIBLE_TIME_S = 60.0  # popInvisibleTime
POP_BATCH_NUMS = 32  # popBatchNums
POP_THRESHOLD_FOR_QUEUE = 96  # popThresholdForQueue


def _queue(msg: MessageExt) -> MessageQueue:
    """The queue a popped message came from (its broker is named in the receipt handle)."""
    handle = ExtraInfo.parse(msg.properties[MessageConst.POP_CK])
    return MessageQueue(msg.topic, handle.broker_name, msg.queue_id)


class AsyncPopPushConsumer:
    """A push consumer that POPs (see the module doc).  Register one listener, then ``start()``."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        consumer_group: str,
        subscriptions: Mapping[str, Subscribable] | None = None,
        *,
        invisible_time_s: float = POP_INVISIBLE_TIME_S,
        batch_nums: int = POP_BATCH_NUMS,
        pop_threshold_for_queue: int = POP_THRESHOLD_FOR_QUEUE,
        await_duration_s: float = 20.0,
        retry_backoff_s: Sequence[float] = RETRY_BACKOFF_S,
        suspend_time_s: float = 1.0,
        init_mode: ConsumeInitMode = ConsumeInitMode.MAX,
        consume_thread_nums: int = 20,
        config: ClientConfig | None = None,
    ) -> None:
        if not 1 <= batch_nums <= 32:
            raise MQClientError(f"batch_nums must be 1..32, got {batch_nums!r}")
        if pop_threshold_for_queue < 1:
            raise MQClientError(f"pop_threshold_for_queue must be >= 1, got {pop_threshold_for_queue!r}")
        if consume_thread_nums < 1:
            raise MQClientError(f"consume_thread_nums must be >= 1, got {consume_thread_nums!r}")
        if not retry_backoff_s or min(retry_backoff_s) <= 0:
            raise MQClientError("retry_backoff_s must be a non-empty list of positive seconds")
        self._args: tuple[Any, ...] = (namesrv_addr, consumer_group, subscriptions)
        self._settings: dict[str, Any] = {
            "await_duration_s": await_duration_s,
            "init_mode": init_mode,
            "config": config,
        }
        self.invisible_time_s = invisible_time_s
        self.batch_nums = batch_nums
        self.pop_threshold_for_queue = pop_threshold_for_queue
        self.retry_backoff_s = tuple(retry_backoff_s)
        self.suspend_time_s = suspend_time_s
        self.consume_thread_nums = consume_thread_nums
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._concurrently: MessageListenerConcurrently | None = None
        self._orderly: MessageListenerOrderly | None = None
        self._simple: AsyncSimpleConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._workers: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._room: asyncio.Condition | None = None
        self._extra_subs: list[tuple[str, Subscribable]] = []

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        self._extra_subs.append((topic, expression))

    def register_message_listener_concurrently(self, listener: MessageListenerConcurrently) -> None:
        self._concurrently, self._orderly = listener, None

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        self._orderly, self._concurrently = listener, None

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def start(self) -> None:
        if self._task is not None:
            return
        if self._concurrently is None and self._orderly is None:
            raise MQClientError("register a listener before start()")
        simple = AsyncSimpleConsumer(*self._args, fifo=self._orderly is not None, **self._settings)
        for topic, expression in self._extra_subs:
            simple.subscribe(topic, expression)
        simple.direct_consume = self.consume_message_directly
        await simple.start()
        self._simple = simple
        self._semaphore = asyncio.Semaphore(self.consume_thread_nums)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.consume_thread_nums, thread_name_prefix=f"rocketq-pop-consume-{simple.group}"
        )
        self._room = asyncio.Condition()
        self._task = asyncio.create_task(self._pop_loop())

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._workers:
            await asyncio.gather(*self._workers, return_exceptions=True)
        if self._simple is not None:
            await self._simple.shutdown()
            self._simple = None
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _pop_loop(self) -> None:
        assert self._simple is not None and self._room is not None
        while True:
            async with self._room:
                await self._room.wait_for(lambda: self._in_flight < self.pop_threshold_for_queue)
                room = min(self.batch_nums, self.pop_threshold_for_queue - self._in_flight)
            try:
                msgs = await self._simple.receive(room, self.invisible_time_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # broker down or route gone: try again shortly
                log.warning("pop failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            if not msgs:
                continue
            self._in_flight += len(msgs)
            work = self._consume_concurrently(msgs) if self._orderly is None else self._consume_orderly(msgs)
            task = asyncio.create_task(work)
            self._workers.add(task)
            task.add_done_callback(self._workers.discard)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin ``queryMsgById -g -d``): the listener consumes ``msg``."""
        listener = self._orderly or self._concurrently
        if listener is None:
            raise MQClientError("register a listener before start()")
        return await consume_directly(self._call, listener, self._orderly is not None, msg, broker_name)

    async def _done(self, n: int) -> None:
        assert self._room is not None
        async with self._room:
            self._in_flight -= n
            self._room.notify_all()

    async def _call(self, listener: Callable[..., Any], msgs: list[MessageExt], ctx: Any) -> Any:
        """Run the listener: awaited if async, else in the consume thread pool; at most
        ``consume_thread_nums`` calls at once."""
        assert self._semaphore is not None
        async with self._semaphore:
            if inspect.iscoroutinefunction(listener):
                return await listener(msgs, ctx)
            result = await asyncio.get_running_loop().run_in_executor(self._executor, listener, msgs, ctx)
            return await result if inspect.isawaitable(result) else result

    async def _consume_concurrently(self, msgs: list[MessageExt]) -> None:
        assert self._simple is not None and self._concurrently is not None
        try:
            ok: list[MessageExt] = []
            for msg in msgs:
                ctx = ConsumeConcurrentlyContext(_queue(msg))
                try:
                    status = await self._call(self._concurrently, [msg], ctx)
                except Exception:
                    log.exception("listener failed on %s", msg.msg_id)
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER
                if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
                    ok.append(msg)
                    continue
                level = min(msg.reconsume_times, len(self.retry_backoff_s) - 1)
                try:
                    await self._simple.change_invisible_duration(msg, self.retry_backoff_s[level])
                except Exception as exc:  # it comes back after its invisible time anyway
                    log.warning("change invisible time of %s failed: %s", msg.msg_id, exc)
            if ok:
                try:
                    await self._simple.ack_many(ok)
                except Exception as exc:  # not acked: delivered again after the invisible time
                    log.warning("ack of %d messages failed: %s", len(ok), exc)
        finally:
            await self._done(len(msgs))

    async def _consume_orderly(self, msgs: list[MessageExt]) -> None:
        assert self._simple is not None and self._orderly is not None
        by_queue: dict[MessageQueue, list[MessageExt]] = {}
        for msg in msgs:
            by_queue.setdefault(_queue(msg), []).append(msg)
        try:
            await asyncio.gather(*(self._one_queue(q) for q in by_queue.values()))
        finally:
            await self._done(len(msgs))

    async def _one_queue(self, msgs: list[MessageExt]) -> None:
        assert self._simple is not None and self._orderly is not None
        msgs.sort(key=lambda m: m.queue_offset)
        for i, msg in enumerate(msgs):
            ctx = ConsumeOrderlyContext(_queue(msg))
            try:
                status = await self._call(self._orderly, [msg], ctx)
            except Exception:
                log.exception("orderly listener failed on %s", msg.msg_id)
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            if status == ConsumeOrderlyStatus.SUCCESS:
                try:
                    await self._simple.ack(msg)
                except Exception as exc:
                    log.warning("ack of %s failed: %s", msg.msg_id, exc)
                continue
            wait_ms = ctx.suspend_current_queue_time_ms
            wait_s = wait_ms / 1000 if wait_ms > 0 else self.suspend_time_s
            for rest in msgs[i:]:
                try:
                    await self._simple.change_invisible_duration(rest, wait_s)
                except Exception as exc:
                    log.warning("change invisible time of %s failed: %s", rest.msg_id, exc)
            return


class PopPushConsumer(BlockingConsumerFacade[AsyncPopPushConsumer]):
    """The blocking twin of :class:`AsyncPopPushConsumer`; the listener runs on the process's
    background loop thread (a plain function is fine)."""

    def __init__(self, *args: Any, **settings: Any) -> None:
        super().__init__(lambda: AsyncPopPushConsumer(*args, **settings))

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        self._consumer.subscribe(topic, expression)

    def register_message_listener_concurrently(self, listener: MessageListenerConcurrently) -> None:
        self._consumer.register_message_listener_concurrently(listener)

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        self._consumer.register_message_listener_orderly(listener)

    def start(self) -> None:
        self._loop.run(self._consumer.start())
