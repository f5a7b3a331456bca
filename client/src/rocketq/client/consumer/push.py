"""AsyncPushConsumer: long-polling pull loops feeding a concurrent or an orderly listener.

Theory of operation (DefaultMQPushConsumerImpl).  Rebalance gives the consumer its queues; for
each one a pull task long-polls PULL_MESSAGE (``broker_suspend_max_time_ms`` on the broker, a
longer RPC timeout), piggy-backing the queue's current offset (COMMIT_OFFSET flag), puts what it
finds into the queue's ProcessQueue and hands it to the consume side.  Flow control delays the
next pull while the ProcessQueue holds too many messages/bytes, or (concurrent mode) spans too
many offsets.

* Concurrent: batches run as tasks bounded by ``consume_thread_nums``; after each batch the
  committable offset is the smallest still pending.  Failed messages (RECONSUME_LATER or an
  exception) go back to the broker with CONSUMER_SEND_MSG_BACK (clustering), into the group's
  ``%RETRY%`` topic, which the consumer also subscribes to; if that fails they are consumed
  again locally 5 s later.  Broadcasting drops failures.
* Orderly: one task per queue takes messages in offset order; in clustering mode it only runs
  while the broker lock (LOCK_BATCH_MQ, refreshed every ``lock_interval_ms``) is held, so one
  queue is consumed by one thread of one consumer, in order.  SUSPEND_CURRENT_QUEUE_A_MOMENT
  retries the same messages after ``suspend_current_queue_time_ms``; beyond
  ``max_reconsume_times`` they go to the DLQ.

Offsets go to the broker every ``persist_consumer_offset_interval_ms`` and at shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import logging
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from rocketq.client.config import ConsumerConfig, MessageModel
from rocketq.client.consumer.allocate import AllocateFn
from rocketq.client.consumer.base import ConsumerBase
from rocketq.client.consumer.direct import consume_directly
from rocketq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerConcurrently,
    MessageListenerOrderly,
)
from rocketq.client.consumer.offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from rocketq.client.consumer.process_queue import ProcessQueue
from rocketq.client.consumer.subscription import SUB_ALL, Subscribable, SubscriptionRefusedError
from rocketq.client.errors import MQClientError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import MessageExt, PullStatus
from rocketq.client.producer.core import trace_sender
from rocketq.client.remoting.consume_directly import ConsumeMessageDirectlyResult
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, MessageQueue, retry_topic
from rocketq.client.trace.dispatcher import CONSUME_TRACE
from rocketq.client.trace.hooks import ConsumerTracer, consume_outcome, consumer_tracer

__all__ = ["AsyncPushConsumer"]

log = logging.getLogger("rocketq.client")

_R = TypeVar("_R")
_LOCAL_RETRY_DELAY_S = 5.0
_FLOW_CONTROL_DELAY_S = 0.05
_LOCK_RETRY_DELAY_S = 0.1
_CANCEL_GRACE_S = 10.0  # how long a cancelled orderly task waits for its running listener
_REMOVE_LOCK_WAIT_S = 1.0  # how long rebalance waits for an orderly batch before keeping the queue


class AsyncPushConsumer(ConsumerBase):
    """The asyncio push consumer: ``subscribe``, ``register_message_listener[_orderly]``, ``start``."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        config: ConsumerConfig | None = None,
        *,
        instance: ClientInstance | None = None,
        allocate: AllocateFn | None = None,
        **settings: Any,
    ) -> None:
        """``settings`` are ConsumerConfig fields (``consumer_group="cg"``...)."""
        super().__init__(namesrv_addr, config, instance=instance, allocate=allocate, **settings)
        self._listener: MessageListenerConcurrently | None = None
        self._orderly_listener: MessageListenerOrderly | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._consume_tasks: set[asyncio.Task[None]] = set()
        self._orderly_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock_task: asyncio.Task[None] | None = None
        self._local_retries: dict[tuple[MessageQueue, int], int] = {}
        self._consume_locks: dict[int, asyncio.Lock] = {}  # id(ProcessQueue) -> consume lock
        self._tracer: ConsumerTracer | None = None  # enable_msg_trace: SubBefore/SubAfter records

    # ------------------------------------------------------------------ setup

    def subscribe(self, topic: str, expression: Subscribable = SUB_ALL) -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"TagA || TagB"``) or a
        :class:`MessageSelector` (``MessageSelector.by_sql("a > 5")``).

        A string that cannot be a tag expression raises MQClientError (use ``by_sql``).
        """
        self._add_subscription(topic, expression)
        if self.running:
            self.instance.rebalance_immediately()

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)

    def register_message_listener(self, listener: MessageListenerConcurrently) -> None:
        self._listener, self._orderly_listener = listener, None
        self.orderly = False

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        self._orderly_listener, self._listener = listener, None
        self.orderly = True

    @property
    def _clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    async def start(self) -> None:
        if self.running:
            return
        if self._listener is None and self._orderly_listener is None:
            raise MQClientError("register a message listener before start()")
        if not self._subscriptions:
            raise MQClientError("subscribe to a topic before start()")
        if self._clustering:
            self._add_subscription(retry_topic(self.group), SUB_ALL)
        self._semaphore = asyncio.Semaphore(self.config.consume_thread_nums)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.config.consume_thread_nums, thread_name_prefix=f"rocketq-consume-{self.group}"
        )
        await self._start_base()
        if self.config.enable_msg_trace and self._tracer is None:
            topic = self.config.custom_trace_topic
            sender = trace_sender(self._namesrv_addr, self.instance, self.group, CONSUME_TRACE)
            tracer = consumer_tracer(sender, self.group, topic)
            await tracer.start()
            self._tracer = tracer
        await self.instance.update_all_routes()
        await self.instance.send_heartbeat_to_all_brokers()
        try:
            await self.check_client_in_broker()
        except RocketQError:
            await self.shutdown()
            raise
        if self.orderly and self._clustering:
            self._lock_task = asyncio.get_running_loop().create_task(self._lock_loop())
        await self.do_rebalance()

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        for task in self._pull_tasks.values():
            task.cancel()
        orderly = [t for t in self._orderly_tasks.values() if not t.done()]
        if orderly:  # they stop after the batch in flight (running is False), then commit it
            await asyncio.wait(orderly, timeout=_CANCEL_GRACE_S)
        tasks = [*self._pull_tasks.values(), *self._orderly_tasks.values(), *self._consume_tasks]
        if self._lock_task is not None:
            tasks.append(self._lock_task)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10.0)
        if self.orderly and self._clustering:
            await self.rebalance.stop()  # a round in progress could lock a queue after the unlock
            await self.rebalance.unlock(list(self.rebalance.process_queue_table), oneway=False)
        if self._tracer is not None:  # sends the queued traces while the instance is still open
            await self._tracer.shutdown()
            self._tracer = None
        await self._stop_base()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ rebalance hooks

    async def start_queue(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        old = self._pull_tasks.pop(mq, None)
        if old is not None:
            old.cancel()
        self.offset_store.update_offset(mq, next_offset)
        self._pull_tasks[mq] = asyncio.get_running_loop().create_task(
            self._pull_loop(mq, pq, next_offset), name=f"pull {mq}"
        )

    async def remove_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        if self.orderly and self._clustering:
            # Java's removeUnnecessaryMessageQueue: wait (briefly) for the batch in flight, so that
            # its offset is persisted and no other consumer gets the queue while it still runs.
            lock = self._consume_lock(pq)
            try:
                await asyncio.wait_for(lock.acquire(), _REMOVE_LOCK_WAIT_S)
            except TimeoutError:
                log.info("%s is still being consumed; keeping it until the next rebalance", mq)
                return False
            try:
                orderly = self._orderly_tasks.pop(mq, None)
                if orderly is not None:
                    orderly.cancel()
                await self._persist_and_forget(mq)
                await self.rebalance.unlock([mq])
            finally:
                lock.release()
                self._consume_locks.pop(id(pq), None)
            return True
        await self._persist_and_forget(mq)
        return True

    async def _persist_and_forget(self, mq: MessageQueue) -> None:
        with contextlib.suppress(RocketQError):
            await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker asks to move queues (resetOffsetByTime): drop them, store the new offsets,
        and let the next rebalance take them up again from there."""
        table = self.rebalance.process_queue_table
        for mq, offset in offsets.items():
            pq = table.pop(mq, None) if mq.topic == topic else None
            if pq is not None:
                pq.dropped = True
                task = self._pull_tasks.pop(mq, None)
                if task is not None:
                    task.cancel()
            self.offset_store.update_offset(mq, offset)
            store = self.offset_store
            try:
                if isinstance(store, RemoteBrokerOffsetStore):
                    await store.commit_sync(mq, offset)
                else:
                    await store.persist(mq)
            except RocketQError as exc:
                log.warning("resetting the offset of %s to %d failed: %s", mq, offset, exc)
        self.instance.rebalance_immediately()

    async def _lock_loop(self) -> None:
        while self.running:
            await asyncio.sleep(self.config.lock_interval_ms / 1000)
            await self.rebalance.lock_all()

    # ------------------------------------------------------------------ pulling

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        c = self.config
        while self.running and not pq.dropped:
            if (
                pq.msg_count > c.pull_threshold_for_queue
                or pq.msg_size > c.pull_threshold_size_for_queue_mib * 1024 * 1024
                or (not self.orderly and pq.max_span() > c.consume_concurrently_max_span)
            ):
                await asyncio.sleep(c.pull_time_delay_when_flow_control_ms / 1000)
                continue
            if self.orderly and self._clustering and not pq.locked:
                await asyncio.sleep(c.pull_time_delay_when_exception_ms / 1000)
                continue
            sub = self._subscriptions.get(mq.topic)
            if sub is None:
                return
            commit = -1
            if self._clustering:
                commit = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            try:
                result = await self.pull_once(
                    mq, sub, offset, c.pull_batch_size, block=True, commit_offset=commit
                )
            except asyncio.CancelledError:
                raise
            except SubscriptionRefusedError as exc:
                log.error("pull of %s at %d failed: %s", mq, offset, exc.remark)
                await asyncio.sleep(c.pull_time_delay_when_exception_ms / 1000)
                continue
            except (RocketQError, OSError) as exc:
                log.warning("pull of %s at %d failed: %s", mq, offset, exc)
                await asyncio.sleep(c.pull_time_delay_when_exception_ms / 1000)
                continue
            pq.last_pull_timestamp = _monotonic_ms()
            if pq.dropped:
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "pull offset %d of %s is illegal, moving to %d", offset, mq, result.next_begin_offset
                )
                pq.dropped = True
                self.offset_store.update_offset(mq, result.next_begin_offset)
                with contextlib.suppress(RocketQError):
                    await self.offset_store.persist(mq)
                self.rebalance.process_queue_table.pop(mq, None)
                self._pull_tasks.pop(mq, None)
                self.instance.rebalance_immediately()
                return
            offset = result.next_begin_offset
            msgs = result.messages
            if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # only retry queues hold moved messages
                msgs = [self._restore_retry_topic(m) for m in msgs]
            if not msgs:
                if pq.msg_count == 0 and self._clustering:
                    self.offset_store.update_offset(mq, offset, increase_only=True)
                continue
            dispatch = pq.put_messages(msgs)
            self._dispatch(mq, pq, msgs, dispatch)
            if c.pull_interval_ms:
                await asyncio.sleep(c.pull_interval_ms / 1000)

    def _restore_retry_topic(self, msg: MessageExt) -> MessageExt:
        if msg.topic != retry_topic(self.group):
            return msg
        real = msg.properties.get(MessageConst.RETRY_TOPIC)
        if real:
            return dataclasses.replace(msg, topic=real)
        return msg

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str
    ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin ``queryMsgById -g -d``): the listener consumes ``msg``."""
        listener = self._orderly_listener or self._listener
        if listener is None:
            raise MQClientError(f"consumer {self.group} has no message listener")
        msg = self._restore_retry_topic(msg)
        orderly = self._orderly_listener is not None
        return await consume_directly(self._call, listener, orderly, msg, broker_name)

    def _dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], dispatch: bool) -> None:
        loop = asyncio.get_running_loop()
        if self.orderly:
            task = self._orderly_tasks.get(mq)
            if dispatch or task is None or task.done():
                self._orderly_tasks[mq] = loop.create_task(
                    self._consume_orderly(mq, pq), name=f"orderly {mq}"
                )
            return
        size = self.config.consume_message_batch_max_size
        for i in range(0, len(msgs), size):
            self._spawn(self._consume_concurrently(mq, pq, msgs[i : i + size]))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    async def _call(self, fn: Any, *args: Any) -> Any:
        """Run a listener: awaited if async, else in the consume thread pool."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        result = await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        if inspect.isawaitable(result):
            result = await result
        return result

    # ------------------------------------------------------------------ concurrent

    async def _consume_concurrently(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._semaphore is not None and self._listener is not None
        if pq.dropped:
            return
        ctx = ConsumeConcurrentlyContext(mq)
        tracer = self._tracer
        raised = False
        async with self._semaphore:
            trace = tracer.before(msgs) if tracer is not None else None
            try:
                status = await self._call(self._listener, msgs, ctx)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "the message listener of %s raised; the messages will be consumed later", self.group
                )
                status, raised = ConsumeConcurrentlyStatus.RECONSUME_LATER, True
        if tracer is not None:
            ok = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            tracer.after(trace, ok, consume_outcome(status, ok, raised))
        if not isinstance(status, ConsumeConcurrentlyStatus):
            log.warning(
                "the listener returned %r, not a ConsumeConcurrentlyStatus; treated as RECONSUME_LATER",
                status,
            )
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if pq.dropped:
            return
        await self._process_consume_result(mq, pq, msgs, status, ctx)

    async def _process_consume_result(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        msgs: list[MessageExt],
        status: ConsumeConcurrentlyStatus,
        ctx: ConsumeConcurrentlyContext,
    ) -> None:
        ack = len(msgs) - 1 if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS else -1
        ack = min(ack, ctx.ack_index)
        failed = msgs[ack + 1 :]
        retry_locally: list[MessageExt] = []
        if failed and self._clustering:
            for msg in failed:
                if not await self._send_back(msg, mq, ctx.delay_level_when_next_consume):
                    retry_locally.append(msg)
        elif failed:
            log.warning("broadcasting: dropping %d messages the listener failed", len(failed))
        done = [m for m in msgs if m not in retry_locally]
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, increase_only=True)
        if retry_locally:
            self._spawn(self._consume_later(mq, pq, retry_locally))

    async def _consume_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        await asyncio.sleep(_LOCAL_RETRY_DELAY_S)
        await self._consume_concurrently(mq, pq, msgs)

    async def _send_back(self, msg: MessageExt, mq: MessageQueue, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the queue's master; False if it failed (a slave cannot
        store the retry message: while the master is down the batch is consumed again locally)."""
        try:
            addr = await self.instance.find_master_addr_or_refresh(mq.broker_name, mq.topic)
            await self.instance.api.consumer_send_message_back(
                addr, msg, self.group, delay_level, self.config.max_reconsume_times
            )
            return True
        except RocketQError as exc:
            log.warning("CONSUMER_SEND_MSG_BACK of %s failed: %s", msg.offset_msg_id, exc)
            return False

    # ------------------------------------------------------------------ orderly

    def _consume_lock(self, pq: ProcessQueue) -> asyncio.Lock:
        """The lock held while an orderly batch runs and commits (Java's ``consumeLock``)."""
        lock = self._consume_locks.get(id(pq))
        if lock is None:
            lock = self._consume_locks[id(pq)] = asyncio.Lock()
        return lock

    async def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        assert self._orderly_listener is not None and self._semaphore is not None
        c = self.config
        while self.running and not pq.dropped:
            if self._clustering and (not pq.locked or pq.is_lock_expired()):
                if not await self.rebalance.lock(mq):
                    await asyncio.sleep(_LOCK_RETRY_DELAY_S)
                    continue
            async with self._consume_lock(pq):
                if pq.dropped:
                    return
                msgs = pq.take_messages(c.consume_message_batch_max_size)
                if not msgs:
                    return
                ctx = ConsumeOrderlyContext(mq)
                tracer = self._tracer
                trace = tracer.before(msgs) if tracer is not None else None
                status = await self._call_orderly(msgs, ctx)
                if tracer is not None:
                    ok = status is ConsumeOrderlyStatus.SUCCESS
                    tracer.after(trace, ok, consume_outcome(status, ok, False))
                if status is ConsumeOrderlyStatus.SUCCESS:
                    # Committed even if the queue was dropped meanwhile: remove_queue waits for
                    # this lock before it persists the offset, so the batch is not redelivered.
                    for m in msgs:
                        self._local_retries.pop((mq, m.queue_offset), None)
                    offset = pq.commit()
                    if offset >= 0:
                        self.offset_store.update_offset(mq, offset)
                    continue
                if pq.dropped:
                    pq.make_messages_to_consume_again(msgs)
                    return
                delay = await self._suspend_orderly(mq, pq, msgs, ctx)
            if delay > 0:
                await asyncio.sleep(delay / 1000)

    async def _call_orderly(self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        assert self._orderly_listener is not None and self._semaphore is not None
        async with self._semaphore:
            call = asyncio.ensure_future(self._call(self._orderly_listener, msgs, ctx))
            try:
                # shielded: a listener running in a thread cannot be stopped, so a cancelled
                # consumer task still waits for it before it lets go of the consume lock
                status = await asyncio.shield(call)
            except asyncio.CancelledError:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(call), _CANCEL_GRACE_S)
                raise
            except Exception:
                log.exception("the orderly listener of %s raised; suspending the queue", self.group)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if not isinstance(status, ConsumeOrderlyStatus):
            log.warning("the orderly listener returned %r; treated as SUSPEND_CURRENT_QUEUE_A_MOMENT", status)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return status

    async def _suspend_orderly(
        self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext
    ) -> int:
        """Handle a failed orderly batch; returns how long (ms) to suspend the queue."""
        max_times = self.config.max_reconsume_times
        to_dlq = []
        for m in msgs:
            key = (mq, m.queue_offset)
            self._local_retries[key] = self._local_retries.get(key, 0) + 1
            if 0 <= max_times <= self._local_retries[key]:
                to_dlq.append(m)
        if to_dlq and len(to_dlq) == len(msgs) and self._clustering:
            if all([await self._send_back(m, mq, -1) for m in to_dlq]):
                offset = pq.commit()
                if offset >= 0:
                    self.offset_store.update_offset(mq, offset)
                return 0
        pq.make_messages_to_consume_again(msgs)
        delay = ctx.suspend_current_queue_time_ms
        return delay if delay > 0 else self.config.suspend_current_queue_time_ms


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)
